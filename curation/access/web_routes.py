"""The one HTTP route the app adds beside Streamlit's: set or clear the session cookie.

A Streamlit script cannot send response headers, so after a sign-in (or a sign-out) the page
posts a one-time hand-off nonce (:data:`curation.access.web_sessions.HANDOFFS`) to
``POST /_kb/session``; the route answers with the ``Set-Cookie`` header: ``HttpOnly``,
``SameSite=Strict``, ``Path=/``, ``Secure`` behind HTTPS, ``Max-Age`` the session's time limit
(or 0 to clear it). A request without a valid nonce changes nothing (403), so another site cannot
set or clear the cookie. Served by ``app_pages/server.py`` (``st.App``), which ``kbcurate serve``
runs.
"""

from __future__ import annotations

import json
import logging

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from curation.access.web_sessions import COOKIE_NAME, HANDOFFS, Handoffs

logger = logging.getLogger(__name__)

#: Path of the route (not under Streamlit's reserved ``/_stcore``).
SESSION_PATH = "/_kb/session"
_MAX_BODY = 1024


def _is_https(request: Request) -> bool:
    forwarded = request.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
    return request.url.scheme == "https" or forwarded == "https"


class BodyTooLarge(Exception):
    """The request body passed :data:`_MAX_BODY` bytes (by its declared length or as read)."""


async def read_limited(request: Request, limit: int = _MAX_BODY) -> bytes:
    """The request body, read only up to ``limit`` bytes.

    A ``Content-Length`` over the limit is refused before anything is read; a chunked body is
    refused at the chunk that passes the limit, so a 1 GB body costs one chunk of memory.

    Raises:
        BodyTooLarge: The body is (or says it is) longer than ``limit`` bytes.
        ValueError: ``Content-Length`` is not a whole number.
    """
    declared = request.headers.get("content-length")
    if declared is not None and int(declared) > limit:
        raise BodyTooLarge
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise BodyTooLarge
    return bytes(body)


def session_endpoint(handoffs: Handoffs = HANDOFFS):
    """The ``POST /_kb/session`` handler over ``handoffs`` (tests pass their own)."""

    async def endpoint(request: Request) -> Response:
        try:
            body = await read_limited(request)
        except BodyTooLarge:
            logger.info("session hand-off refused: body over %d bytes", _MAX_BODY)
            return JSONResponse({"error": f"request body over {_MAX_BODY} bytes; the session "
                                          "route takes a JSON object with a nonce"},
                                status_code=413, headers={"Connection": "close"})
        except ValueError:
            return JSONResponse({"error": "Content-Length is not a whole number"},
                                status_code=400)
        try:
            nonce = json.loads(body or b"{}").get("nonce", "")
        except (ValueError, AttributeError):
            return JSONResponse({"error": "expected a JSON object with a nonce"}, status_code=400)
        found = handoffs.redeem(nonce) if isinstance(nonce, str) and nonce else None
        if found is None:
            logger.info("session hand-off refused (unknown or expired nonce)")
            return JSONResponse({"error": "unknown or expired hand-off"}, status_code=403)
        value, max_age = found
        response = Response(status_code=204, headers={"Cache-Control": "no-store"})
        if value:
            response.set_cookie(COOKIE_NAME, value, max_age=max_age, path="/", httponly=True,
                                samesite="strict", secure=_is_https(request))
        else:
            response.delete_cookie(COOKIE_NAME, path="/", httponly=True, samesite="strict",
                                   secure=_is_https(request))
        return response

    return endpoint


def routes(handoffs: Handoffs = HANDOFFS) -> list[Route]:
    """The routes ``app_pages/server.py`` mounts beside Streamlit's."""
    return [Route(SESSION_PATH, session_endpoint(handoffs), methods=["POST"])]
