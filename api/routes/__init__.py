"""The API's routes, thin: parse (api.deps), ask the serving layer, render (api.render)."""
