"""A small closed-loop HTTP/1.1 load generator for JSON-RPC over streamable HTTP.

Keep-alive connections on raw asyncio streams, so the client costs as little CPU as possible and
the figures describe the server. Each worker sends one request, reads the whole answer (Content-Length
or chunked), checks it, then sends the next. Reused by every benchmark under bench/.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit


@dataclass
class Result:
    requests: int = 0
    errors: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    seconds: float = 0.0
    first_error: str = ""

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def pct(self, q: float) -> float:
        if not self.latencies_ms:
            return float("nan")
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    def summary(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "errors": self.errors,
            "rps": round(self.rps, 1),
            "p50_ms": round(self.pct(0.50), 3),
            "p99_ms": round(self.pct(0.99), 3),
            "mean_ms": round(statistics.fmean(self.latencies_ms), 3) if self.latencies_ms else None,
            "first_error": self.first_error or None,
        }


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        parts = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                break
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
        body = b"".join(parts)
    else:
        body = await reader.read()
    return status, body


def default_check(status: int, body: bytes) -> str | None:
    """None if the answer is a successful tool result, else why not."""
    if status != 200:
        return f"HTTP {status}: {body[:200]!r}"
    text = body.decode("utf-8", "replace")
    data = next((line[6:] for line in text.splitlines() if line.startswith("data: ")), text)
    try:
        message = json.loads(data)
    except ValueError:
        return f"unparsable answer: {text[:200]!r}"
    result = message.get("result")
    if not result or result.get("isError"):
        return f"error answer: {text[:300]!r}"
    return None


async def run_load(
    url: str,
    make_body: Callable[[int], bytes],
    *,
    concurrency: int,
    seconds: float,
    headers: dict[str, str] | None = None,
    warmup_s: float = 1.0,
    max_requests: int | None = None,
    check: Callable[[int, bytes], str | None] = default_check,
    on_measure: Callable[[], None] | None = None,
    on_measured: Callable[[], None] | None = None,
) -> Result:
    """A closed loop of `concurrency` keep-alive connections for `seconds` after `warmup_s`.
    `on_measure` / `on_measured` run right before and right after the measured phase (the
    benchmark reads the servers' CPU time there)."""
    parts = urlsplit(url)
    host, port, path = parts.hostname or "127.0.0.1", parts.port or 80, parts.path or "/"
    base = {
        "Host": f"{host}:{port}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        **(headers or {}),
    }
    result = Result()
    counter = 0

    async def worker(deadline: float, record: bool) -> None:
        nonlocal counter
        reader, writer = await asyncio.open_connection(host, port)
        try:
            while time.perf_counter() < deadline:
                if record and max_requests is not None and result.requests >= max_requests:
                    return
                counter += 1
                body = make_body(counter)
                head = f"POST {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in base.items())
                head += f"Content-Length: {len(body)}\r\n\r\n"
                started = time.perf_counter()
                writer.write(head.encode() + body)
                await writer.drain()
                status, answer = await _read_response(reader)
                elapsed = (time.perf_counter() - started) * 1000
                if record:
                    result.requests += 1
                    result.latencies_ms.append(elapsed)
                    problem = check(status, answer)
                    if problem:
                        result.errors += 1
                        result.first_error = result.first_error or problem
        finally:
            writer.close()

    async def phase(duration: float, record: bool) -> list[Any]:
        deadline = time.perf_counter() + duration
        return await asyncio.gather(
            *(worker(deadline, record) for _ in range(concurrency)), return_exceptions=True
        )

    if warmup_s > 0:
        await phase(warmup_s, record=False)
    if on_measure is not None:
        on_measure()
    started = time.perf_counter()
    outcomes = await phase(seconds, record=True)
    result.seconds = time.perf_counter() - started
    if on_measured is not None:
        on_measured()
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            result.errors += 1
            result.first_error = result.first_error or repr(outcome)
    return result


def tools_call_body(
    name: str, arguments: Callable[[int], dict[str, Any]] | dict[str, Any]
) -> Callable[[int], bytes]:
    def make(i: int) -> bytes:
        args = arguments(i) if callable(arguments) else arguments
        return json.dumps(
            {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": name, "arguments": args}}
        ).encode()

    return make
