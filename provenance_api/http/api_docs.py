"""The API's documentation pages, served with no CDN: ``/docs`` (Swagger UI) and ``/redoc`` (ReDoc).

FastAPI's own pages load their JavaScript and CSS from a CDN, so offline they are blank. These pages are
FastAPI's same HTML pointed at the packaged copies in ``static/vendor`` (pinned versions, their licences and
checksums in ``static/vendor/VENDOR.md``), served at ``/docs/assets/<package>/<file>``. Every URL the pages
reference is on this service, and their Content-Security-Policy tells the browser to load nothing else:

- Swagger UI: its one inline script (the page's set-up) is allowed by its sha256, nothing else inline runs;
  styles may be inline (Swagger UI's React components set ``style`` attributes);
- ReDoc: its inline ``<style>`` and the styles it injects are allowed (``style-src 'unsafe-inline'``), and its
  search index runs in a web worker it creates from a ``blob:`` URL (``worker-src blob:``).

There is no ``/docs/oauth2-redirect``: the API authenticates with a Bearer key, never OAuth2.
"""

from __future__ import annotations

import base64
import hashlib
import re
from functools import lru_cache
from importlib import resources
from typing import Final

from fastapi import APIRouter, Request, Response
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html

from provenance_api.core.errors import NotFound

router = APIRouter(include_in_schema=False)

ASSETS_PATH: Final = "/docs/assets"
SWAGGER_JS: Final = "swagger-ui-dist/swagger-ui-bundle.js"
SWAGGER_CSS: Final = "swagger-ui-dist/swagger-ui.css"
REDOC_JS: Final = "redoc/redoc.standalone.js"
FAVICON_PATH: Final = "/favicon.ico"  # the viewer's icon (routes/ui.py)
_ASSETS: Final = {
    SWAGGER_JS: "text/javascript; charset=utf-8",
    SWAGGER_CSS: "text/css; charset=utf-8",
    REDOC_JS: "text/javascript; charset=utf-8",
}
"""The only files served: path under ``static/vendor`` → media type."""

_COMMON_CSP: Final = (
    "default-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; object-src 'none'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
_HEADERS: Final = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def _prefix(request: Request) -> str:
    """The path prefix the service is mounted under (``root_path`` behind a proxy), as FastAPI's pages use it."""
    root: str = request.scope.get("root_path", "")
    return root.rstrip("/")


def _openapi_url(request: Request) -> str:
    url = request.app.openapi_url
    if not url:
        raise NotFound("this service publishes no OpenAPI schema", field="path", fix="read the README instead")
    return _prefix(request) + str(url)


def _script_hashes(html: str) -> str:
    """CSP sources allowing exactly the page's inline scripts."""
    digests = (hashlib.sha256(body.encode()).digest() for body in _INLINE_SCRIPT.findall(html))
    return " ".join(f"'sha256-{base64.b64encode(d).decode()}'" for d in digests)


def _page(body: bytes, csp: str) -> Response:
    headers = {**_HEADERS, "Content-Security-Policy": csp, "Cache-Control": "no-cache"}
    return Response(body, media_type="text/html; charset=utf-8", headers=headers)


@router.get("/docs")
async def swagger_ui(request: Request) -> Response:
    """Swagger UI: the operations, their schemas, and "Try it out" against this service."""
    prefix = _prefix(request)
    html = get_swagger_ui_html(
        openapi_url=_openapi_url(request),
        title=f"{request.app.title} - Swagger UI",
        swagger_js_url=f"{prefix}{ASSETS_PATH}/{SWAGGER_JS}",
        swagger_css_url=f"{prefix}{ASSETS_PATH}/{SWAGGER_CSS}",
        swagger_favicon_url=prefix + FAVICON_PATH,
        oauth2_redirect_url=None,
        swagger_ui_parameters={"validatorUrl": None},  # no badge fetched from the public validator
    )
    text = bytes(html.body).decode()
    csp = f"{_COMMON_CSP}; script-src 'self' {_script_hashes(text)}; style-src 'self' 'unsafe-inline'"
    return _page(text.encode(), csp)


@router.get("/redoc")
async def redoc(request: Request) -> Response:
    """ReDoc: the same schema as one readable page."""
    prefix = _prefix(request)
    html = get_redoc_html(
        openapi_url=_openapi_url(request),
        title=f"{request.app.title} - ReDoc",
        redoc_js_url=f"{prefix}{ASSETS_PATH}/{REDOC_JS}",
        redoc_favicon_url=prefix + FAVICON_PATH,
        with_google_fonts=False,
    )
    csp = f"{_COMMON_CSP}; script-src 'self'; style-src 'self' 'unsafe-inline'; worker-src 'self' blob:"
    return _page(bytes(html.body), csp)


@lru_cache(maxsize=len(_ASSETS))
def _asset(path: str) -> tuple[bytes, str]:
    """(content, ETag) of a vendored file."""
    content = resources.files("provenance_api.http").joinpath("static", "vendor", *path.split("/")).read_bytes()
    return content, '"' + hashlib.sha256(content).hexdigest()[:32] + '"'


@router.get(ASSETS_PATH + "/{package}/{name}")
async def asset(request: Request, package: str, name: str) -> Response:
    """A vendored script or stylesheet of the pages above (revalidated by its ETag)."""
    path = f"{package}/{name}"
    media_type = _ASSETS.get(path)
    if media_type is None:
        raise NotFound(f"no documentation asset {path!r}", field="path", fix="open /docs or /redoc")
    content, etag = _asset(path)
    headers = {**_HEADERS, "ETag": etag, "Cache-Control": "no-cache"}
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers=headers)
    return Response(content, media_type=media_type, headers=headers)
