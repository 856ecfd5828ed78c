"""Check 18 — one source of truth for the owner's token: a rotated token never authenticates again.

`OPERATOR_TOKEN` only seeds the owner's token while the owner has none. After a rotation
(`operator_token create owner --rotate`) the old token is refused over /mcp whatever the environment
says — still exported, set back, set to an older one — and a token the owner never had is never
adopted. `serve` says so in one line when the environment holds a token that is not the owner's.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection

from operator_site.bootstrap import STALE_ENVIRONMENT_WARNING, ensure_owner
from operator_site.face.auth import authenticate, environment_token_state
from operator_site.models import Principal
from tests.fixtures import ROOT, SEED_HEADERS, asgi_http, database_url_of_this_run, free_port, orm

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

FIRST = "opk_" + "FirstOwnerTokenFromTheEnvironment" + "0" * 10
NEVER_ISSUED = "opk_" + "ATokenTheOwnerNeverHad" + "9" * 20
LIST = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'


async def _status(token: str) -> int:
    async with asgi_http(token) as http:
        response = await http.post("/mcp", content=LIST, headers=SEED_HEADERS)
        return response.status_code


def _rotate() -> str:
    out = io.StringIO()
    call_command("operator_token", "create", "owner", "--rotate", stdout=out)
    return out.getvalue().strip().splitlines()[-1]


async def test_a_rotated_owner_token_never_authenticates_again(settings, scorecard) -> None:
    found: list[str] = []
    cases = 0

    async def expect(token: str, status: int, why: str) -> None:
        nonlocal cases
        cases += 1
        got = await _status(token)
        if got != status:
            found.append(f"{why}: HTTP {got}, expected {status}")

    settings.OPERATOR_TOKEN = FIRST
    await expect(FIRST, 200, "the environment's token seeds an owner without one")
    await expect(FIRST, 200, "and keeps working")
    second = await orm(_rotate)
    await expect(FIRST, 401, "rotated away, still exported")
    await expect(second, 200, "the rotated token")
    third = await orm(_rotate)
    for old, why in ((FIRST, "the first, still exported"), (second, "the second")):
        await expect(old, 401, why)
    settings.OPERATOR_TOKEN = second  # the person exports an older token again
    await expect(second, 401, "an older token set back in the environment")
    await expect(FIRST, 401, "the first, with an older one in the environment")
    await expect(third, 200, "the current token, whatever the environment says")
    settings.OPERATOR_TOKEN = NEVER_ISSUED  # a token the owner never had
    await expect(NEVER_ISSUED, 401, "a new token in the environment of an owner who has one")
    settings.OPERATOR_TOKEN = third  # the current one in the environment: fine
    await expect(third, 200, "the current token in the environment")
    # Revoked: nothing brings it back, the environment least of all.
    await orm(lambda: Principal.objects.filter(name="owner").update(active=False))
    await expect(third, 401, "a revoked owner, its token in the environment")
    await orm(lambda: Principal.objects.filter(name="owner").update(active=True))
    # The digest on the owner's row is the only truth: it is the last rotation's.
    stored = await orm(lambda: Principal.objects.get(name="owner").token_digest)
    from operator_site.face.auth import digest

    if stored != digest(third):
        found.append("the owner's stored digest is not the last rotation's")
    scorecard(
        18,
        "token rotations: a rotated owner token never authenticates again",
        cases=cases + 1,
        bypasses=len(found),
        misses=found,
    )
    assert found == []


def test_the_environment_never_gives_the_owner_another_principals_token(settings, make_principal) -> None:
    agent = make_principal("scout")
    settings.OPERATOR_TOKEN = agent.token
    principal = authenticate(agent.token)
    assert principal.name == "scout"  # the agent's, as always
    assert not Principal.objects.filter(name="owner", token_digest__isnull=False).exists()
    err = io.StringIO()
    ensure_owner(io.StringIO(), err)
    assert Principal.objects.get(name="owner").token_digest is None
    assert "another principal's token" in err.getvalue() and err.getvalue().count("\n") == 1


def test_seeding_twice_at_once_seeds_once(settings) -> None:
    settings.OPERATOR_TOKEN = FIRST
    results: list[Any] = []

    def seed() -> None:
        try:
            results.append(authenticate(FIRST))
        finally:
            connection.close()

    threads = [threading.Thread(target=seed) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(results) == 6 and all(p is not None and p.name == "owner" for p in results)
    assert Principal.objects.filter(name="owner").count() == 1


@pytest.mark.parametrize(
    ("setup", "state"),
    [("none", "unseeded"), ("seeded", "owner"), ("rotated", "not_owner"), ("unset", "unset")],
)
def test_serve_says_in_one_line_when_the_environment_holds_a_token_that_is_not_the_owners(
    settings, setup: str, state: str
) -> None:
    settings.OPERATOR_TOKEN = "" if setup == "unset" else FIRST
    if setup in ("seeded", "rotated"):
        authenticate(FIRST)
    if setup == "rotated":
        _rotate()
    assert environment_token_state() == state
    out, err = io.StringIO(), io.StringIO()
    ensure_owner(out, err)
    if state == "not_owner":
        assert err.getvalue() == STALE_ENVIRONMENT_WARNING and err.getvalue().count("\n") == 1
        assert FIRST not in err.getvalue() + out.getvalue()
    else:
        assert "WARNING" not in err.getvalue() + out.getvalue()


def test_a_real_serve_warns_and_the_stale_token_is_refused(settings, scorecard) -> None:
    """`python3 manage.py serve` itself, with an owner whose token was rotated and the old token
    still in the environment: one warning line on stderr, and the old token gets 401 from the server
    it started."""
    settings.OPERATOR_TOKEN = FIRST
    authenticate(FIRST)
    current = _rotate()
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url_of_this_run(),
        "OPERATOR_NO_VENV": "1",
        "OPERATOR_TOKEN": FIRST,
        "OPERATOR_RATE_LIMIT": "0",
    }
    process = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port), "--no-access-log"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    found = []
    try:
        import httpx2

        deadline = time.monotonic() + 90
        statuses = {}
        while time.monotonic() < deadline and not statuses:
            assert process.poll() is None, process.stderr.read().decode()
            try:
                for name, token in (("old", FIRST), ("current", current)):
                    statuses[name] = httpx2.post(
                        f"http://127.0.0.1:{port}/mcp",
                        content=LIST,
                        headers={**SEED_HEADERS, "Authorization": f"Bearer {token}"},
                        timeout=5,
                    ).status_code
            except httpx2.TransportError:
                statuses = {}
                time.sleep(0.3)
        if statuses != {"old": 401, "current": 200}:
            found.append(f"statuses {statuses}")
    finally:
        process.terminate()
        try:
            _, stderr = process.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            _, stderr = process.communicate()
    warnings = [line for line in stderr.decode().splitlines() if "OPERATOR_TOKEN" in line]
    if warnings != [STALE_ENVIRONMENT_WARNING.strip()]:
        found.append(f"serve's warning lines: {warnings}")
    if FIRST in stderr.decode() or current in stderr.decode():
        found.append("a token was printed")
    scorecard(
        18,
        "token rotations: a real serve warns in one line, the old token gets 401",
        cases=3,
        bypasses=len(found),
        misses=found,
    )
    assert found == []
