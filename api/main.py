"""The app as a module attribute, for ``uvicorn api.main:app`` (docker-compose.yml's api service).

``python -m api`` / ``make api`` build it through the factory instead; both read the settings from
the environment.
"""

from api.app import create_app

app = create_app()
