"""GET /: the dashboard, a static page that reads the public API and nothing else.

The page (api/dashboard/: one HTML file, two ES modules, one stylesheet, and the vendored uPlot
build) is served by the API itself, so it works offline: its Content-Security-Policy lets it load
scripts, styles and data from this origin only, and no request leaves the machine. Only the files
listed here are served; the routes are left out of the OpenAPI document (they are not API).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, HTTPException
from fastapi.responses import FileResponse

DASHBOARD_DIR = Path(__file__).resolve().parent.parent / "dashboard"

JS = "text/javascript; charset=utf-8"
CSS = "text/css; charset=utf-8"
ASSETS: dict[str, str] = {
    "dashboard.js": JS,
    "filters.js": JS,
    "dashboard.css": CSS,
    "vendor/uplot/uPlot.esm.js": JS,
    "vendor/uplot/uPlot.min.css": CSS,
    "vendor/uplot/LICENSE": "text/plain; charset=utf-8",
}

# Same origin only. uPlot sets styles through the CSSOM (allowed); the icon is an empty data: URL
# so the browser does not ask for /favicon.ico.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HEADERS = {
    # Small files: revalidate every time, so an upgrade of the API never leaves a stale page.
    "Cache-Control": "no-cache",
    "X-Content-Type-Options": "nosniff",
}

router = APIRouter(include_in_schema=False)


@router.get("/")
async def index() -> FileResponse:
    return FileResponse(
        DASHBOARD_DIR / "index.html",
        media_type="text/html; charset=utf-8",
        headers={**HEADERS, "Content-Security-Policy": CONTENT_SECURITY_POLICY},
    )


@router.get("/dashboard/{asset:path}")
async def asset(asset: str) -> FileResponse:
    media_type = ASSETS.get(asset)
    if media_type is None:
        raise HTTPException(404, "Not Found")
    return FileResponse(DASHBOARD_DIR / asset, media_type=media_type, headers=HEADERS)
