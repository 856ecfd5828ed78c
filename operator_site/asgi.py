"""ASGI entry point: `uvicorn operator_site.asgi:application`.

A small dispatcher rather than a Django view: the MCP SDK's transport needs its task group running
(Django's ASGI handler has no lifespan to start it) and a Django view adapting to the SDK buffers the
response and measured about half the throughput. So:

- `lifespan` is answered here (its startup settles the heap: operator_site/serving.py);
- `/mcp` goes to the MCP endpoint (operator_site/face/endpoint.py);
- `/static/` serves the admin's and the API docs' static files straight from the installed
  packages (no collectstatic step, no extra dependency);
- everything else (the admin, `/api/`, revert links) goes to Django.
"""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "operator_site.settings")

from django.conf import settings
from django.core.asgi import get_asgi_application
from starlette.exceptions import HTTPException
from starlette.responses import PlainTextResponse
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

django_application = get_asgi_application()

from operator_site import hidden  # noqa: E402
from operator_site.face import registry  # noqa: E402
from operator_site.face.db import InFlight  # noqa: E402
from operator_site.face.endpoint import mcp_endpoint  # noqa: E402
from operator_site.serving import install_access_log_filter, settle_heap  # noqa: E402

registry.all_tools()  # build every SDK Tool object now, not on the first request
hidden.hidden_re()  # and the hidden-character classes the argument checks and pages use
# However uvicorn was started (`serve`, or `uvicorn operator_site.asgi:application` by hand), its
# access log never carries a query string (operator_site/serving.py).
install_access_log_filter()

_static = StaticFiles(
    packages=[("django.contrib.admin", "static"), ("ninja", "static"), ("operator_site", "static")]
)
_STATIC_PREFIX = settings.STATIC_URL.rstrip("/")


async def _serve_static(scope: Scope, receive: Receive, send: Send) -> None:
    try:
        # StaticFiles serves the part of the path after root_path.
        await _static({**scope, "root_path": _STATIC_PREFIX}, receive, send)
    except HTTPException as exc:  # outside a Starlette app nobody turns this into a response
        await PlainTextResponse(exc.detail, status_code=exc.status_code)(scope, receive, send)


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            settle_heap()  # loaded and about to serve: the collector keeps off what loading made
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def application(scope: Scope, receive: Receive, send: Send) -> None:
    kind = scope["type"]
    if kind == "lifespan":
        await _lifespan(receive, send)
        return
    if kind != "http":
        return  # no websockets here
    path = scope["path"]
    with InFlight():  # how busy this worker is: where its database work runs (face/db.py)
        if path in ("/mcp", "/mcp/"):
            await mcp_endpoint(scope, receive, send)
        elif path.startswith(_STATIC_PREFIX + "/"):
            await _serve_static(scope, receive, send)
        else:
            await django_application(scope, receive, send)
