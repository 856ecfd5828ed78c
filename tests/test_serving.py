"""The listening socket `manage.py serve` binds for several workers is declared as TCP, so asyncio
sets TCP_NODELAY on every accepted connection (without it each keep-alive answer waited ~40 ms for
a delayed ACK: bench/perf.py, Kludex/uvicorn#3149)."""

from __future__ import annotations

import asyncio
import socket

import uvicorn

from operator_site.serving import APPLICATION


async def _nodelay_of_accepted(listener: socket.socket) -> int:
    accepted: asyncio.Queue[int] = asyncio.Queue()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        await accepted.put(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    listener.listen()
    server = await asyncio.start_server(on_connect, sock=listener)
    try:
        host, port = listener.getsockname()[:2]
        _, writer = await asyncio.open_connection(host, port)
        value = await asyncio.wait_for(accepted.get(), 5)
        writer.close()
        return value
    finally:
        server.close()
        await server.wait_closed()


def test_uvicorns_self_bound_socket_is_tcp_and_connections_get_nodelay() -> None:
    """With more than one worker uvicorn binds the listening socket itself; since uvicorn 0.55 (the
    floor in pyproject.toml) it declares it TCP, so accepted connections get TCP_NODELAY and a
    keep-alive answer never waits for a delayed ACK (operator_site/serving.py). If this fails,
    the socket needs re-wrapping again (Kludex/uvicorn#3149)."""
    listener = uvicorn.Config(APPLICATION, host="127.0.0.1", port=0, workers=2).bind_socket()
    assert listener.proto == socket.IPPROTO_TCP
    assert asyncio.run(_nodelay_of_accepted(listener)) != 0


# Run in a child process: `settle_heap()` freezes every object alive, and a test must not do that
# to the test run's own heap.
_SETTLE_PROBE = r"""
import asyncio, gc, json, weakref

from operator_site import asgi
from operator_site.face import registry

loaded = registry.get("operator_context_packet")  # made while loading, before the lifespan
before = {"frozen": gc.get_freeze_count(), "threshold": gc.get_threshold()}


async def lifespan():
    messages = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent = []

    async def receive():
        return messages.pop(0)

    async def send(message):
        sent.append(message["type"])

    await asgi.application({"type": "lifespan"}, receive, send)
    return sent


sent = asyncio.run(lifespan())


class Node:
    other = None  # the other node: two of them, each holding the other, make a cycle


first, second = Node(), Node()
first.other, second.other = second, first  # a cycle made after the startup
cycle = weakref.ref(first)
del first, second
gc.collect()
print(json.dumps({
    "sent": sent,
    "before": before,
    "frozen": gc.get_freeze_count(),
    "threshold": gc.get_threshold(),
    "loaded_examined": any(o is loaded for o in gc.get_objects()),
    "later_cycle_freed": cycle() is None,
}))
"""


def test_the_lifespan_startup_keeps_the_collector_off_what_loading_made() -> None:
    """`settle_heap()` (operator_site/serving.py) at the application's lifespan startup: before it,
    nothing is frozen and the first generation's threshold is CPython's default; after it, the objects
    loading made (the registry's tool specs among them) are frozen — never examined by a
    collection again — and the threshold is above a call's peak; a cycle made afterwards is still
    collected."""
    import json
    import os
    import subprocess
    import sys

    from operator_site.serving import FIRST_GENERATION_THRESHOLD
    from tests.fixtures import ROOT

    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "operator_site.settings", "OPERATOR_NO_VENV": "1"}
    done = subprocess.run(
        [sys.executable, "-c", _SETTLE_PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["sent"] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert seen["before"]["frozen"] == 0
    assert seen["before"]["threshold"][0] < FIRST_GENERATION_THRESHOLD  # CPython's default: 700
    assert seen["frozen"] > 50_000, seen["frozen"]  # Django, the SDK, the registry: ~160,000
    assert seen["threshold"] == [FIRST_GENERATION_THRESHOLD, *seen["before"]["threshold"][1:]]
    assert seen["loaded_examined"] is False
    assert seen["later_cycle_freed"] is True
