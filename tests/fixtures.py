"""Fixtures shared by every app's tests: principals with tokens, MCP clients (in-process over an
ASGI transport, and over a real uvicorn socket), raw JSON-RPC posts, and the PostgreSQL marker."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parent.parent
SEED_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


# --- markers -------------------------------------------------------------------------------------
def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("postgres") and connection.vendor != "postgresql":
        if os.environ.get("OPERATOR_REQUIRE_POSTGRES") == "1":
            pytest.fail(
                "this run must be on PostgreSQL (OPERATOR_REQUIRE_POSTGRES=1) but DATABASE_URL is not"
            )
        pytest.skip("needs PostgreSQL: races and locks are proven there (CI runs this on PostgreSQL)")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --- principals ------------------------------------------------------------------------------------
@dataclass
class Holder:
    principal: Any
    token: str

    @property
    def name(self) -> str:
        return self.principal.name


@pytest.fixture
def make_principal(db: None) -> Callable[..., Holder]:
    from operator_site.face.auth import issue_token
    from operator_site.models import Principal

    def make(name: str, kind: str = "agent", tools: list[str] | None = None, user: Any = None) -> Holder:
        principal = Principal.objects.create(name=name, kind=kind, tools=tools, user=user)
        return Holder(principal, issue_token(principal))

    return make


@pytest.fixture
def owner(make_principal: Callable[..., Holder], django_user_model: Any) -> Holder:
    user = django_user_model.objects.create_user(
        "owner", password="pw-owner-123", is_staff=True, is_superuser=True
    )
    return make_principal("owner", kind="human", user=user)


@pytest.fixture
def agent(make_principal: Callable[..., Holder]) -> Holder:
    return make_principal("scout", kind="agent")


# --- talking to /mcp ---------------------------------------------------------------------------------
def asgi_http(token: str | None = None, base_url: str = "http://127.0.0.1", **kw: Any) -> httpx2.AsyncClient:
    from operator_site.asgi import application

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=application), base_url=base_url, headers=headers, **kw
    )


@asynccontextmanager
async def mcp_client(token: str, mode: str = "legacy", base_url: str | None = None) -> AsyncIterator[Any]:
    """The official SDK client; in-process unless `base_url` names a live server."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"}
    if base_url is None:
        http = asgi_http(token)
        url = "http://127.0.0.1/mcp"
    else:
        http = httpx2.AsyncClient(headers=headers, timeout=30)
        url = f"{base_url}/mcp"
    async with http, Client(streamable_http_client(url, http_client=http), mode=mode) as client:
        yield client


def tool_json(result: Any) -> dict[str, Any]:
    """The envelope's one text block, decoded (and checked to be exactly one text block)."""
    assert len(result.content) == 1, result
    assert result.content[0].type == "text"
    return json.loads(result.content[0].text)


def parse_sse(body: str) -> dict[str, Any]:
    """The JSON-RPC message of a one-event SSE body (`event: message` / `data: {...}`)."""
    events = [block for block in body.replace("\r\n", "\n").split("\n\n") if block.strip()]
    assert len(events) == 1, body
    lines = events[0].split("\n")
    assert "event: message" in lines, body
    data = [line[len("data: ") :] for line in lines if line.startswith("data: ")]
    assert len(data) == 1, body
    return json.loads(data[0])


async def rpc(
    http: httpx2.AsyncClient,
    method: str,
    params: dict[str, Any] | None = None,
    id_: int = 1,
    headers: dict[str, str] | None = None,
) -> httpx2.Response:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        message["params"] = params
    return await http.post("/mcp", content=json.dumps(message), headers={**SEED_HEADERS, **(headers or {})})


async def call(http: httpx2.AsyncClient, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A raw tools/call in the runners' request shape (docs/client.md); returns the decoded text
    block (asserting the framing)."""
    response = await rpc(http, "tools/call", {"name": name, "arguments": arguments})
    assert response.status_code == 200, response.text
    message = parse_sse(response.text)
    content = message["result"]["content"]
    assert len(content) == 1 and content[0]["type"] == "text", message
    return json.loads(content[0]["text"])


# --- a real uvicorn server on loopback -------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def database_url_of_this_run() -> str:
    """A DATABASE_URL for the database this test run uses (pytest-django's test database)."""
    s = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{s['NAME']}"
    host = s.get("HOST") or "127.0.0.1"
    auth = s.get("USER") or ""
    if s.get("PASSWORD"):
        auth += f":{s['PASSWORD']}"
    return f"postgres://{auth}@{host}:{s.get('PORT') or 5432}/{s['NAME']}"


@dataclass
class LiveServer:
    url: str
    process: subprocess.Popen

    @property
    def pid(self) -> int:
        return self.process.pid


def start_uvicorn(workers: int = 1, extra_env: dict[str, str] | None = None) -> LiveServer:
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url_of_this_run(),
        "SECRET_KEY": os.environ["SECRET_KEY"],
        "OPERATOR_NO_VENV": "1",
        **(extra_env or {}),
    }
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "operator_site.serving",  # uvicorn, as `manage.py serve` runs it
            "--port",
            str(port),
            "--workers",
            str(workers),
        ],
        cwd=ROOT,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"uvicorn exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            time.sleep(0.1)
    else:
        process.kill()
        raise RuntimeError("uvicorn did not start within 60 s")
    return LiveServer(url, process)


def stop_uvicorn(server: LiveServer) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()


@pytest.fixture
def live_server_uvicorn(transactional_db: None) -> Iterator[LiveServer]:
    """A real uvicorn process on loopback against this run's test database."""
    server = start_uvicorn()
    try:
        yield server
    finally:
        stop_uvicorn(server)


async def orm(fn: Callable[..., Any], *args: Any) -> Any:
    """Run ORM code from an async test, on a worker thread. On PostgreSQL the thread's connection
    is closed after (an open one would keep the test database from being dropped); on SQLite it is
    kept for the thread's next call: opening one (WAL and busy-timeout pragmas) costs about a
    millisecond, and the security matrices make thousands of these calls."""
    import anyio.to_thread

    def run() -> Any:
        try:
            return fn(*args)
        finally:
            if connection.vendor != "sqlite":
                connection.close()

    return await anyio.to_thread.run_sync(run)


def wait_until(predicate: Callable[[], bool], timeout: float, what: str, every: float = 0.02) -> None:
    """Poll `predicate` until it holds; fail the test, naming `what`, if it does not in `timeout` s."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(every)


def plan_of(queryset: Any) -> str:
    """The plan the database makes for `queryset`, as one line of text; on PostgreSQL the generic
    plan of the statement prepared (what a prepared statement reaches after a few executions: made
    for any value of its parameters), with sequential scans priced out, so that only an index that
    can answer is used (a tiny test table would be scanned anyway)."""
    import re
    from datetime import datetime

    from django.db import transaction
    from psycopg.sql import Literal

    sql, params = queryset.query.sql_with_params()
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor != "postgresql":
            cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
            return " ".join(str(part) for row in cursor.fetchall() for part in row)
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        types = {datetime: "timestamptz", bool: "boolean", int: "bigint", str: "text"}
        kinds = [next(t for k, t in types.items() if isinstance(p, k)) for p in params]
        numbered = iter(range(1, len(params) + 1))
        text = re.sub("%s", lambda _m: f"${next(numbered)}", sql)
        declared = f" ({', '.join(kinds)})" if kinds else ""
        cursor.execute(f"PREPARE plan_probe{declared} AS {text}")
        try:
            # EXECUTE's arguments are a utility statement's: written in, not bound.
            raw = connection.connection
            values = ", ".join(
                f"{Literal(str(p)).as_string(raw)}::{k}" for p, k in zip(params, kinds, strict=True)
            )
            cursor.execute(f"EXPLAIN EXECUTE plan_probe{f'({values})' if values else ''}")
            return " ".join(str(part) for row in cursor.fetchall() for part in row)
        finally:
            cursor.execute("DEALLOCATE plan_probe")
