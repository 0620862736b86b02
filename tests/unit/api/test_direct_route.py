"""api.direct_route: a route of that class answers, fails and is documented exactly as FastAPI's
own handler would, and calls its dependency directly."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from api.direct_route import DirectRoute

CALLS: list[str] = []


async def parsed(request: Request) -> int:
    CALLS.append("parsed")
    n = int(request.query_params.get("n", "0"))
    if n < 0:
        raise HTTPException(403, "negative", headers={"X-Why": "n"})
    return n


async def endpoint(request: Request, n: Annotated[int, Depends(parsed)]) -> Response:
    return JSONResponse({"n": n, "path": request.url.path})


async def with_query(q: Annotated[int, Query()] = 1) -> Response:
    return JSONResponse({"q": q})


def app_with(route_class: type[Any]) -> FastAPI:
    router = APIRouter(prefix="/v1", route_class=route_class)
    router.get("/n", summary="n")(endpoint)
    router.get("/q")(with_query)
    app = FastAPI()
    app.include_router(router)
    return app


def test_answers_errors_and_document_are_fastapis() -> None:
    direct, plain = app_with(DirectRoute), app_with(APIRoute)
    assert direct.openapi() == plain.openapi()
    with TestClient(direct) as d, TestClient(plain) as p:
        for url in ("/v1/n?n=3", "/v1/n?n=-1", "/v1/q?q=2", "/v1/q?q=x", "/v1/none"):
            ours, theirs = d.get(url), p.get(url)
            assert (ours.status_code, ours.headers.get("x-why"), ours.content) == (
                theirs.status_code,
                theirs.headers.get("x-why"),
                theirs.content,
            ), url


def test_the_dependency_is_called_once_per_request() -> None:
    CALLS.clear()
    with TestClient(app_with(DirectRoute)) as d:
        assert d.get("/v1/n?n=5").json() == {"n": 5, "path": "/v1/n"}
    assert CALLS == ["parsed"]
