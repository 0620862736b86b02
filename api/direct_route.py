"""A route class whose handler calls the route's dependencies and endpoint directly, for the hot
query routes.

FastAPI's request handler solves a route's dependency graph on every request (parameters, caches,
exit stacks, a check of the body), which costs more than a cached answer does. A query route takes
the request and one dependency that itself takes only the request (its parsed request, see
:mod:`api.deps`), so :class:`DirectRoute` awaits that dependency and the endpoint itself instead.
Everything else is FastAPI's: the routing, the exception handlers (an exception propagates exactly
as from FastAPI's handler), the middleware and the OpenAPI document, which describes the route
from the same declarations. A route whose signature is not of that shape keeps FastAPI's handler.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

RequestCall = Callable[[Request], Awaitable[Any]]


def _direct_calls(dependant: Dependant) -> list[tuple[str, RequestCall]] | None:
    """``(parameter, dependency)`` of each dependency of ``dependant`` if each is an ``async``
    function of the request alone and the endpoint declares nothing else but the request; None
    otherwise (FastAPI's handler is needed)."""
    own = (
        dependant.path_params,
        dependant.query_params,
        dependant.header_params,
        dependant.cookie_params,
        dependant.body_params,
    )
    if any(own) or dependant.response_param_name or dependant.background_tasks_param_name:
        return None
    calls: list[tuple[str, RequestCall]] = []
    for sub in dependant.dependencies:
        plain = not (sub.dependencies or sub.path_params or sub.query_params or sub.header_params)
        plain = plain and not (sub.cookie_params or sub.body_params or sub.security_scopes_param_name)
        call = sub.call
        if not plain or sub.name is None or call is None or not inspect.iscoroutinefunction(call):
            return None
        if list(inspect.signature(call).parameters) != [sub.request_param_name]:
            return None
        calls.append((sub.name, call))
    return calls


class DirectRoute(APIRoute):
    """An APIRoute that awaits its dependencies and endpoint directly (see the module)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        calls = _direct_calls(self.dependant)
        endpoint = self.endpoint
        if calls is None or not inspect.iscoroutinefunction(endpoint):
            return super().get_route_handler()
        request_name = self.dependant.request_param_name

        async def handler(request: Request) -> Response:
            kwargs: dict[str, Any] = {request_name: request} if request_name else {}
            for name, call in calls:
                kwargs[name] = await call(request)
            response: Response = await endpoint(**kwargs)
            return response

        return handler
