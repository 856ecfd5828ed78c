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
