"""No database connection leaks: many sequential and concurrent calls against a real uvicorn worker
with persistent connections leave the PostgreSQL connection count flat and bounded by the worker's
database thread limit (OPERATOR_DB_THREADS)."""

from __future__ import annotations

import anyio
import httpx2
import pytest
from django.db import connection

from tests.fixtures import call, orm, start_uvicorn, stop_uvicorn, wait_until

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.postgres,
    pytest.mark.socket,
    pytest.mark.django_db(transaction=True),
]

DB_THREADS = 4
APP_NAME = "operator-live-server"


def _server_connections() -> int:
    """Connections the server process holds (libpq tags them with PGAPPNAME)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = %s",
            [APP_NAME],
        )
        return cursor.fetchone()[0]


async def test_connection_count_stays_flat_under_sequential_and_concurrent_load(owner) -> None:
    server = start_uvicorn(
        extra_env={
            "DATABASE_CONN_MAX_AGE": "300",
            "OPERATOR_DB_THREADS": str(DB_THREADS),
            "PGAPPNAME": APP_NAME,
        }
    )
    try:
        async with httpx2.AsyncClient(
            base_url=server.url, headers={"Authorization": f"Bearer {owner.token}"}, timeout=60
        ) as http:
            for _ in range(150):
                await call(http, "operator_list_directives", {})
            after_sequential = await orm(_server_connections)

            async def burst(n: int) -> None:
                async with anyio.create_task_group() as tg:
                    for i in range(n):
                        tool = "operator_set_directive" if i % 3 == 0 else "operator_list_directives"
                        args = {"kind": "topic_mute", "topic": f"t{i % 7}"} if i % 3 == 0 else {}
                        tg.start_soon(call, http, tool, args)

            counts = []
            for _ in range(3):
                await burst(200)
                counts.append(await orm(_server_connections))
    finally:
        stop_uvicorn(server)
    assert 1 <= after_sequential <= DB_THREADS
    assert max(counts) <= DB_THREADS, counts
    assert counts[-1] == counts[-2], f"connection count still growing: {counts}"
    # All closed when the worker stopped: each backend removes its own row once it sees its client
    # gone, a moment after the worker's exit, so this waits for the count rather than reading once.
    await orm(lambda: wait_until(lambda: _server_connections() == 0, 10, "the worker's connections to close"))
