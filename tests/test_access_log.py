"""Nothing sensitive in the access log: a real uvicorn's log never carries a query string.

A token sent in the query string is refused (the bearer check never looks there), but uvicorn writes
the request line — path and query — to its access log. The operator's filter replaces every query
string with `?[query omitted]`, whether uvicorn was started by `serve`'s code path
(`python -m operator_site.serving`, one or two workers) or by hand (`uvicorn operator_site.asgi:…`);
and Django's own log record of a 404 (which carries the request) keeps only its method and path.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest
from uvicorn.logging import AccessFormatter

from operator_site.serving import QUERY_OMITTED, AccessLogQueryFilter
from tests.fixtures import ROOT, database_url_of_this_run, free_port

SECRET = "opk_" + "S3cr3tQueryStringToken" * 2
# Every way a credential travels in a query string, on every kind of route.
REQUESTS = [
    ("GET", f"/mcp?access_token={SECRET}"),
    ("POST", f"/mcp?token={SECRET}&x=1"),
    ("GET", f"/mcp?{SECRET}"),
    ("GET", f"/api/health?api_key={SECRET}"),
    ("GET", f"/admin/login/?next=/admin/&password={SECRET}"),
    ("GET", f"/static/admin/css/base.css?sig={SECRET}"),
    ("GET", f"/no/such/page?bearer={SECRET}#frag"),
]


def _record(path: str) -> logging.LogRecord:
    return logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "GET", path, "1.1", 200),
        None,
    )


def test_the_filter_drops_the_query_and_the_control_shows_what_it_prevents() -> None:
    formatter = AccessFormatter('%(client_addr)s - "%(request_line)s" %(status_code)s', use_colors=False)
    raw = _record(f"/mcp?access_token={SECRET}")
    assert SECRET in formatter.format(raw)  # control: uvicorn alone writes the token
    filtered = _record(f"/mcp?access_token={SECRET}")
    assert AccessLogQueryFilter().filter(filtered) is True
    line = formatter.format(filtered)
    assert SECRET not in line and f"/mcp{QUERY_OMITTED}" in line
    plain = _record("/api/health")
    AccessLogQueryFilter().filter(plain)
    assert "/api/health HTTP/1.1" in formatter.format(plain)


def _serve(log: Path, command: list[str]) -> tuple[subprocess.Popen, str, object]:
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url_of_this_run(),
        "OPERATOR_NO_VENV": "1",
        "OPERATOR_RATE_LIMIT": "0",
    }
    out = open(log, "ab")  # noqa: SIM115 - closed after the process stops
    process = subprocess.Popen(
        [*command, "--port", str(port)], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, log.read_text()
        try:
            httpx2.get(f"http://127.0.0.1:{port}/api/health", timeout=2)
            break
        except httpx2.TransportError:
            time.sleep(0.2)
    return process, f"http://127.0.0.1:{port}", out


@pytest.mark.socket
@pytest.mark.parametrize(
    "command",
    [
        [sys.executable, "-m", "operator_site.serving", "--access-log", "--log-level", "info"],
        [
            *(sys.executable, "-m", "operator_site.serving", "--access-log", "--log-level", "info"),
            *("--workers", "2"),
        ],
        [sys.executable, "-m", "uvicorn", "operator_site.asgi:application", "--log-level", "info"],
    ],
    ids=["serve-1-worker", "serve-2-workers", "uvicorn-by-hand"],
)
def test_a_real_uvicorns_access_log_never_carries_the_query(
    transactional_db: None, tmp_path: Path, command: list[str]
) -> None:
    log = tmp_path / "uvicorn.log"
    process, url, out = _serve(log, command)
    try:
        with httpx2.Client(base_url=url, timeout=10) as http:
            for method, path in REQUESTS:
                http.request(method, path, headers={"Content-Type": "application/json"}, content=b"{}")
        time.sleep(1.0)  # the access log is written after each answer
    finally:
        process.terminate()
        process.wait(timeout=20)
        out.close()
    text = log.read_text(errors="replace")
    assert SECRET not in text
    assert "S3cr3tQueryStringToken" not in text
    # The lines are there — with the path, without the query.
    for method, path in REQUESTS:
        logged = path.split("?", 1)[0]
        assert f'"{method} {logged}{QUERY_OMITTED} HTTP/1.1"' in text, (method, path, text[-3000:])
