"""Where the face runs a unit of database work (operator_site/face/db.py): on the event loop's
thread, or on a database thread, by OPERATOR_DB_INLINE and by how busy the worker is."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from django.db import connection

from operator_site import asgi
from operator_site.face import db as face_db

pytestmark = pytest.mark.anyio


def _where() -> str:
    return threading.current_thread().name


async def _ran_on(settings: Any, mode: str, in_flight: int, monkeypatch: pytest.MonkeyPatch) -> str:
    settings.OPERATOR_DB_INLINE = mode
    monkeypatch.setattr(face_db, "requests_in_flight", in_flight)
    try:
        return await face_db.run_db(_where)
    finally:
        kept = getattr(face_db._loop, "connection", None)
        if kept is not None:
            kept.close()


@pytest.mark.django_db(transaction=True)
async def test_forced_modes_ignore_how_busy_the_worker_is(settings, monkeypatch) -> None:
    loop_thread = _where()
    for in_flight in (0, 1, 5):
        assert await _ran_on(settings, "true", in_flight, monkeypatch) == loop_thread
        assert (await _ran_on(settings, "false", in_flight, monkeypatch)).startswith("operator-db")


@pytest.mark.django_db(transaction=True)
async def test_auto_runs_inline_while_no_other_request_is_in_flight(settings, monkeypatch) -> None:
    """PostgreSQL (auto): the unit runs on the loop's thread when this request is the worker's only
    one, on a database thread when another is in flight. SQLite (auto): always on the loop."""
    loop_thread = _where()
    assert await _ran_on(settings, "auto", 1, monkeypatch) == loop_thread
    assert await _ran_on(settings, "auto", 0, monkeypatch) == loop_thread
    busy = await _ran_on(settings, "auto", 2, monkeypatch)
    if connection.vendor == "postgresql":
        assert busy.startswith("operator-db"), busy
    else:
        assert busy == loop_thread


@pytest.mark.postgres  # SQLite (auto) runs every unit on the loop
@pytest.mark.django_db(transaction=True)
async def test_a_request_that_arrives_meanwhile_sends_the_unit_to_a_thread(settings, monkeypatch) -> None:
    """The count is read after the loop has had two turns: a request that arrived just before the
    unit starts is counted, and the unit does not block the loop it would be waiting on."""
    settings.OPERATOR_DB_INLINE = "auto"
    monkeypatch.setattr(face_db, "requests_in_flight", 1)

    async def arriving() -> None:
        with face_db.InFlight():
            await asyncio.sleep(0.05)

    other = asyncio.get_running_loop().create_task(arriving())  # starts on the loop's next turn
    try:
        assert (await face_db.run_db(_where)).startswith("operator-db")
    finally:
        await other
    assert face_db.requests_in_flight == 1


async def test_the_dispatcher_counts_every_http_request_while_it_is_served(monkeypatch) -> None:
    seen: list[int] = []

    async def endpoint(scope: Any, receive: Any, send: Any) -> None:
        seen.append(face_db.requests_in_flight)
        raise RuntimeError("the endpoint failed")

    monkeypatch.setattr(asgi, "mcp_endpoint", endpoint)
    before = face_db.requests_in_flight
    scope = {"type": "http", "path": "/mcp", "method": "POST", "headers": []}
    with pytest.raises(RuntimeError):
        await asgi.application(scope, None, None)  # type: ignore[arg-type]
    assert seen == [before + 1]
    assert face_db.requests_in_flight == before  # counted out on failure too
