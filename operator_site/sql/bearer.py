"""The bearer check and the rate count in one statement."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import DEFAULT_DB_ALIAS, connections

from operator_site.sql.compiled import memo
from operator_site.sql.rows import _columns, _instance, _Select, row_where

if TYPE_CHECKING:
    from operator_site.models import Principal


# --- the bearer check and the rate count -----------------------------------------------------------
def _rate_upsert(conn: Any, source: str) -> str:
    from operator_site.models import RateCounter

    quote = conn.ops.quote_name
    table = quote(RateCounter._meta.db_table)
    count, window = quote("count"), quote("window_no")
    return (
        f"INSERT INTO {table} (principal_id, {window}, {count}) {source} "
        f"ON CONFLICT (principal_id) DO UPDATE SET "
        f"{count} = CASE WHEN {table}.{window} >= excluded.{window} THEN {table}.{count} + 1 ELSE 1 END, "
        f"{window} = CASE WHEN {table}.{window} < excluded.{window} "
        f"THEN excluded.{window} ELSE {table}.{window} END "
        f"RETURNING {count}, {window}"
    )


def count_request(principal_id: int, window: int) -> tuple[int, int]:
    """Count one request of the principal in rate window `window`: one atomic upsert that answers
    (the count in the stored window, that window). PostgreSQL serialises upserts of one row, SQLite
    its writers, so the count holds across workers and hosts."""
    conn = connections[DEFAULT_DB_ALIAS]
    sql = memo("count_request", lambda c: _rate_upsert(c, "VALUES (%s, %s, 1)"), conn)
    with conn.cursor() as cursor:
        cursor.execute(sql, [principal_id, window])
        count, window_no = cursor.fetchone()
    return count, window_no


def _principal_and_count_sql(conn: Any) -> tuple[str, Any]:
    from operator_site.models import Principal

    quote = conn.ops.quote_name
    meta = Principal._meta
    columns, attnames, converters = _columns(conn, Principal, "p")
    upsert = _rate_upsert(conn, "SELECT p.id, %s, 1 FROM p WHERE p.active")
    count, window = quote("count"), quote("window_no")
    sql = (
        f"WITH p AS (SELECT * FROM {quote(meta.db_table)} WHERE token_digest = %s), "  # noqa: S608
        f"r AS ({upsert}) "
        f"SELECT {columns}, r.{count}, r.{window} FROM p LEFT JOIN r ON TRUE"
    )
    return sql, _Select(sql, attnames, converters, ())


def principal_and_count(
    token_digest: str, window: int | None
) -> tuple[Principal | None, tuple[int, int] | None]:
    """The principal holding this token digest and, when it is active and `window` is given, its
    request counted in that rate window (`count_request`): (principal or None, (count, window) or
    None). On PostgreSQL ONE statement (a data-modifying CTE); on SQLite, which has none, the lookup
    and the upsert are two calls into the library in the caller's unit of work (no round trip)."""
    from operator_site.models import Principal

    conn = connections[DEFAULT_DB_ALIAS]
    if window is None or conn.vendor != "postgresql":
        principal = row_where(Principal, token_digest=token_digest)
        if principal is None or not principal.active or window is None:
            return principal, None
        return principal, count_request(principal.pk, window)
    sql, select = memo("principal_and_count", _principal_and_count_sql, conn)
    with conn.cursor() as cursor:
        cursor.execute(sql, [token_digest, window])
        row = cursor.fetchone()
    if row is None:
        return None, None
    width = len(select.attnames)
    principal = _instance(conn, Principal, select, row[:width])
    counted = (row[width], row[width + 1]) if row[width] is not None else None
    return principal, counted
