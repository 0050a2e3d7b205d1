"""Issue 28, item 3: ``POST /_kb/session`` stops reading a request body at its 1 KB limit.

The route is driven as a bare ASGI app whose ``receive`` counts the chunks it hands out, so the
test sees how much of a huge body was read: a declared ``Content-Length`` over the limit reads
nothing, and a chunked body (no length) is refused as soon as the limit is passed.
"""

from __future__ import annotations

import asyncio
import json

from starlette.applications import Starlette

from curation.access.web_routes import SESSION_PATH, routes
from curation.access.web_sessions import Handoffs

CHUNK = b"x" * 64 * 1024  # 64 KiB per receive()
HUGE = 16 * 1024  # chunks offered: 1 GiB in all


def post(app, headers: list[tuple[bytes, bytes]], chunks) -> tuple[int, int, bytes]:
    """(status, chunks read by the app, response body) for one POST to the session route."""
    read = 0
    sent: list[dict] = []
    source = iter(chunks)

    async def receive():
        nonlocal read
        try:
            body, more = next(source)
        except StopIteration:
            return {"type": "http.disconnect"}
        read += 1
        return {"type": "http.request", "body": body, "more_body": more}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
             "scheme": "http", "path": SESSION_PATH, "raw_path": SESSION_PATH.encode(),
             "query_string": b"", "root_path": "", "headers": headers,
             "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8501)}
    asyncio.run(app(scope, receive, send))
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, read, body


def huge_body():
    for i in range(HUGE):
        yield CHUNK, i < HUGE - 1


def app() -> Starlette:
    return Starlette(routes=routes(Handoffs()))


def test_a_chunked_body_is_refused_once_it_passes_the_limit():
    status, read, body = post(app(), [(b"content-type", b"application/json"),
                                      (b"transfer-encoding", b"chunked")], huge_body())
    assert status == 413
    assert read == 1  # the first 64 KiB chunk already passes 1 KB: nothing more is read
    assert json.loads(body) == {"error": "request body over 1024 bytes; the session route "
                                         "takes a JSON object with a nonce"}


def test_a_declared_length_over_the_limit_is_refused_before_reading():
    status, read, _ = post(app(), [(b"content-type", b"application/json"),
                                   (b"content-length", str(1 << 30).encode())], huge_body())
    assert (status, read) == (413, 0)


def test_small_pieces_are_counted_across_chunks():
    pieces = [(b"{" + b" " * 400, True)] * 3 + [(b"}", False)]  # 1,204 bytes in four pieces
    status, read, _ = post(app(), [(b"transfer-encoding", b"chunked")], pieces)
    assert (status, read) == (413, 3)  # refused at the third piece, the fourth is never read


def test_a_body_within_the_limit_still_reaches_the_nonce_check():
    handoffs = Handoffs()
    nonce = handoffs.issue("signed.value", 60)
    body = json.dumps({"nonce": nonce}).encode()
    server = Starlette(routes=routes(handoffs))
    status, _, _ = post(server, [(b"transfer-encoding", b"chunked")],
                        [(body[:10], True), (body[10:], False)])
    assert status == 204
    status, _, _ = post(server, [(b"content-length", b"abc")], [(b"{}", False)])
    assert status == 400  # a malformed length is a bad request, not a crash
