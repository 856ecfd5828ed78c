"""Check 3 — credentials: every way to present a bad or borrowed credential gets 401 and writes
nothing; no token, token digest or secret ever shows up in logs, audit rows, stored rows or error
messages; and the project's own code never compares a secret with `==`.
"""

from __future__ import annotations

import ast
import asyncio
import itertools
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps

from operator_site.face.auth import digest, revoke
from tests.fixtures import ROOT, SEED_HEADERS, asgi_http, orm, stop_uvicorn
from tests.security.helpers import no_traceback, post, start_logged_uvicorn, tools_call

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

WRITE = tools_call("operator_set_directive", {"kind": "quiet", "reason": "credential probe"})
PROJECT_PACKAGES = ("operator_site", "beliefs", "goals", "intents", "runs")


def row_counts() -> dict[str, int]:
    """Rows in every table of the project (what "nothing written" is checked against)."""
    return {
        model._meta.label: model._default_manager.count()
        for model in apps.get_models()
        if model._meta.app_label in PROJECT_PACKAGES
        and model._meta.model_name not in {"ratecounter"}  # counted per authenticated request by design
    }


def credential_cases(token: str, other: str, digest_of_token: str) -> list[tuple[str, dict[str, Any]]]:
    """(name, request) — each request must be answered 401 and change nothing."""
    b = "Bearer "
    return [
        ("no authorization header", {}),
        ("empty header", {"headers": {"Authorization": ""}}),
        ("scheme only", {"headers": {"Authorization": "Bearer"}}),
        ("bearer and a space", {"headers": {"Authorization": "Bearer "}}),
        ("basic scheme with the token", {"headers": {"Authorization": f"Basic {token}"}}),
        ("token without a scheme", {"headers": {"Authorization": token}}),
        ("token scheme", {"headers": {"Authorization": f"Token {token}"}}),
        ("two spaces", {"headers": {"Authorization": f"Bearer  {token}"}}),
        ("two tokens", {"headers": {"Authorization": f"{b}{token} {token}"}}),
        ("comma-joined tokens", {"headers": {"Authorization": f"{b}{token},{b}{other}"}}),
        ("unknown token", {"headers": {"Authorization": b + "opk_" + "A" * 43}}),
        ("malformed characters", {"headers": {"Authorization": b + "opk_<script>!!$$%%^^&&**"}}),
        ("over-long token", {"headers": {"Authorization": b + "a" * 600}}),
        ("short token", {"headers": {"Authorization": b + "opk_x"}}),
        ("non-ascii token", {"headers": {"Authorization": (b + "opk_" + "é" * 20).encode()}}),
        ("prefix of a valid token", {"headers": {"Authorization": b + token[:-1]}}),
        ("half of a valid token", {"headers": {"Authorization": b + token[: len(token) // 2]}}),
        ("valid token with trailing junk", {"headers": {"Authorization": b + token + "x"}}),
        ("valid token with a trailing dot", {"headers": {"Authorization": b + token + "."}}),
        ("valid token upper-cased", {"headers": {"Authorization": b + token.upper()}}),
        ("the stored digest as a token", {"headers": {"Authorization": b + digest_of_token}}),
        ("revoked token", {"revoked": True, "headers": {"Authorization": b + other}}),
        ("token in the query string", {"path": f"/mcp?access_token={token}&token={token}"}),
        ("token in a cookie", {"headers": {"Cookie": f"token={token}; access_token={token}"}}),
        ("token in X-Api-Key", {"headers": {"X-Api-Key": token, "X-Auth-Token": token}}),
        ("token in the body", {"body": json.dumps({"jsonrpc": "2.0", "id": 1, "method": "m", "t": token})}),
        ("two authorization headers", {"header_list": [("Authorization", b + token)] * 2}),
        ("admin session cookie without a bearer", {"session": True}),
    ]  # fmt: skip


async def test_bad_credentials_get_401_and_write_nothing(principals, scorecard, client) -> None:
    owner, victim = principals["owner"], principals["other_human"]
    cases = credential_cases(owner.token, victim.token, digest(owner.token))
    await orm(revoke, victim.principal)
    assert await orm(lambda: client.login(username="owner", password="pw-owner-123"))
    session = client.cookies["sessionid"].value
    before = await orm(row_counts)
    bypasses: list[str] = []
    async with asgi_http() as http:
        for name, case in cases:
            headers = dict(case.get("headers", {}))
            if case.get("session"):
                headers["Cookie"] = f"sessionid={session}; csrftoken=x"
            if "header_list" in case:
                header_arg: Any = [*SEED_HEADERS.items(), *case["header_list"]]
            else:
                header_arg = headers
            response = await post(http, case.get("body", WRITE), header_arg, path=case.get("path", "/mcp"))
            ok = (
                response.status_code == 401
                and response.headers.get("www-authenticate", "").startswith("Bearer")
                and owner.token not in response.text
                and no_traceback(response.text)
            )
            if not ok:
                bypasses.append(f"{name}: HTTP {response.status_code} {response.text[:200]}")
        # The JSON API's bearer-protected catalogue and the human channel refuse the same way.
        for name, headers in [
            ("api/tools without a token", {}),
            ("api/tools with a prefix", {"Authorization": f"Bearer {owner.token[:-2]}"}),
            # The human API takes a person's token (the owner's is one) — never an agent's, a revoked
            # person's or a prefix of the owner's.
            (
                "api/intents with an agent's bearer",
                {"Authorization": f"Bearer {principals['full_agent'].token}"},
            ),
            ("api/intents with a revoked person's bearer", {"Authorization": f"Bearer {victim.token}"}),
            ("api/intents with a prefix", {"Authorization": f"Bearer {owner.token[:-2]}"}),
        ]:
            path = "/api/intents/pending" if "intents" in name else "/api/tools"
            response = await http.get(path, headers=headers)
            if response.status_code != 401:
                bypasses.append(f"{name}: HTTP {response.status_code}")
    after = await orm(row_counts)
    changed = {k: (before[k], after[k]) for k in before if before[k] != after[k]}
    scorecard(
        3,
        "bad credentials: 401 and nothing written",
        cases=len(cases) + 5,
        bypasses=len(bypasses) + len(changed),
        bypass_detail=bypasses,
        tables_changed=changed,
    )
    assert bypasses == []
    assert changed == {}


# --- no secret in logs, rows or messages ---------------------------------------------------------
def _all_stored_text() -> Iterator[tuple[str, str]]:
    """(table.column, text) of every value stored in every project table (and Django's own)."""
    for model in apps.get_models():
        fields = [f for f in model._meta.concrete_fields]
        for row in model._default_manager.all().values_list(*[f.attname for f in fields]):
            for field, value in zip(fields, row, strict=True):
                if value is not None:
                    yield f"{model._meta.db_table}.{field.column}", str(value)


class _Recorder(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def captured_logs() -> Iterator[_Recorder]:
    """Every log record at DEBUG and above, from every logger, for the duration of the test."""
    import operator_site.asgi  # noqa: F401 - its django.setup() re-applies LOGGING: do that first

    recorder, root = _Recorder(), logging.getLogger()
    level = root.level
    root.addHandler(recorder)
    root.setLevel(logging.DEBUG)
    try:
        yield recorder
    finally:
        root.removeHandler(recorder)
        root.setLevel(level)


async def test_no_secret_is_logged_stored_or_echoed(
    principals, scorecard, captured_logs, settings, no_rate_limit
) -> None:
    """A session with every kind of outcome (ok, refusals, invalid arguments, unknown tool, 401s,
    a run with its fencing token, a crash-free DB error path), captured logs at DEBUG, then every
    stored value of every table and every answer searched for every secret."""
    owner, agent = principals["owner"], principals["full_agent"]
    settings.OPERATOR_WEBHOOK_SECRET = "whsec-never-to-be-seen-0123456789"
    answers: list[str] = []
    run_tokens: list[str] = []
    handed_out: set[int] = set()  # the run_start answer hands its token to its caller, by design
    async with asgi_http(agent.token) as http:
        for name, arguments in [
            ("operator_list_directives", {}),
            ("operator_set_directive", {"kind": "topic_mute"}),  # refusal
            ("operator_set_directive", {"kind": "quiet", "minutes": 0}),  # invalid arguments
            ("operator_approve", {"token": agent.token}),  # unknown tool, token in the arguments
            ("operator_record_instruction", {"text": f"my token is {agent.token}", "actor": agent.token}),
            ("operator_run_start", {"kind": "probe"}),
            ("operator_record_observation", {"kind": "self", "summary": "probe", "data": {"t": agent.token}}),
        ]:
            response = await post(http, tools_call(name, arguments))
            answers.append(response.text)
            if name == "operator_run_start":
                body = json.loads(
                    json.loads(response.text.split("data: ", 1)[1])["result"]["content"][0]["text"]
                )
                run_tokens.append(body["token"])
                handed_out.add(len(answers) - 1)
                for run_call in (
                    ("operator_run_heartbeat", {"run_id": body["run_id"], "token": body["token"] + "x"}),
                    (
                        "operator_run_finish",
                        {"run_id": body["run_id"], "token": body["token"], "status": "ok"},
                    ),
                ):
                    answers.append((await post(http, tools_call(*run_call))).text)
    async with asgi_http() as http:
        for header in (f"Bearer {owner.token}x", f"Bearer {owner.token[:-3]}", f"Basic {owner.token}"):
            answers.append((await post(http, WRITE, {"Authorization": header})).text)
    # Something the operator certainly logs (going over the rate limit), so the capture is proven live.
    settings.OPERATOR_RATE_LIMIT = 1
    async with asgi_http(owner.token) as http:
        for _ in range(3):
            answers.append((await post(http, WRITE)).text)
    # Secrets the caller put in the arguments on purpose are the caller's data: the instruction and
    # observation rows hold what was sent. What must never appear anywhere is a secret the SYSTEM
    # holds for someone else: other principals' tokens and digests, run tokens, the webhook secret.
    never = {
        "owner token": owner.token,
        "owner digest": digest(owner.token),
        "other human token": principals["other_human"].token,
        "morning runner digest": digest(principals["morning_runner"].token),
        "webhook secret": settings.OPERATOR_WEBHOOK_SECRET,
        "SECRET_KEY": settings.SECRET_KEY,
        **{f"run token {i}": t for i, t in enumerate(run_tokens)},
    }
    agent_secrets = {"agent digest": digest(agent.token)}
    leaks: list[str] = []
    # The server's logs: the test's own HTTP client logs whole responses at DEBUG (it is the caller,
    # and the caller was handed its run token); every other logger is the operator's side.
    client_side = ("httpx2", "httpcore", "h11", "hpack")
    server_records = [r for r in captured_logs.records if not r.name.startswith(client_side)]
    logs = "\n".join(f"{r.name} {r.getMessage()} {r.exc_text or ''}" for r in server_records)
    for what, secret in {**never, **agent_secrets}.items():
        if secret in logs:
            leaks.append(f"{what} in the logs")
        for i, text in enumerate(answers):
            if secret in text and not (what.startswith("run token") and i in handed_out):
                leaks.append(f"{what} in answer #{i}")
    by_design = {"operator_site_principal.token_digest", "runs_run.token_digest"}
    stored = await orm(lambda: list(_all_stored_text()))
    for where, text in stored:
        for what, secret in never.items():
            if secret in text and where not in by_design:
                leaks.append(f"{what} stored in {where}")
        for what, secret in agent_secrets.items():
            if secret in text and where not in by_design:
                leaks.append(f"{what} stored in {where}")
    # The agent's own token, sent as data, must not have been copied into the audit trail.
    audit = [text for where, text in stored if where.startswith("operator_site_auditevent")]
    leaks += [f"the agent's token in the audit trail: {t[:80]}" for t in audit if agent.token in t]
    scorecard(
        3,
        "secrets in logs, stored rows and answers",
        cases=len(never) + len(agent_secrets),
        bypasses=len(leaks),
        log_records=len(server_records),
        stored_values=len(stored),
        answers=len(answers),
        leaks=leaks,
    )
    assert any(r.name == "operator.face" for r in server_records) and len(stored) > 100
    assert leaks == []


@pytest.mark.socket
async def test_no_secret_in_a_real_servers_logs(principals, scorecard, tmp_path) -> None:
    """The same over uvicorn at LOG_LEVEL=DEBUG (and uvicorn's own debug log): the server's whole
    output searched for every token, digest and run token after ok calls, refusals and 401s."""
    import httpx2

    owner, agent = principals["owner"], principals["full_agent"]
    log_file = tmp_path / "server.log"
    server = await orm(lambda: start_logged_uvicorn(log_file, {"LOG_LEVEL": "DEBUG"}))
    run_token = ""
    try:
        async with httpx2.AsyncClient(base_url=server.url, timeout=30) as http:
            auth = {**SEED_HEADERS, "Authorization": f"Bearer {agent.token}"}
            for header in (f"Bearer {agent.token}", f"Bearer {owner.token}z", f"Bearer {agent.token[:-1]}"):
                await http.post("/mcp", content=WRITE, headers={**SEED_HEADERS, "Authorization": header})
            await http.post(
                "/mcp", content=tools_call("operator_set_directive", {"kind": "focus"}), headers=auth
            )
            for _attempt in range(3):
                started = await http.post("/mcp", content=tools_call("operator_run_start", {}), headers=auth)
                if started.status_code not in (429, 503):
                    break
                # Retryable by contract (a loaded machine's SQLite lock past its busy timeout): as a
                # client would, after Retry-After. Anything else fails below, saying what came back.
                await asyncio.sleep(min(float(started.headers.get("Retry-After", "1")), 5))
            assert started.status_code == 200 and "data: " in started.text, (
                f"operator_run_start answered HTTP {started.status_code}: {started.text[:500]!r}"
            )
            message = json.loads(started.text.split("data: ", 1)[1])
            run_token = json.loads(message["result"]["content"][0]["text"])["token"]
            await http.post("/mcp", content=tools_call("operator_nope", {"x": agent.token}), headers=auth)
    finally:
        await orm(stop_uvicorn, server)
    output = log_file.read_text(errors="replace")
    secrets = {
        "agent token": agent.token,
        "agent digest": digest(agent.token),
        "owner token": owner.token,
        "owner digest": digest(owner.token),
        "run token": run_token,
    }
    leaks = [what for what, secret in secrets.items() if secret and secret in output]
    scorecard(3, "a real server's DEBUG output", cases=len(secrets), bypasses=len(leaks), leaks=leaks)
    assert run_token and output.strip(), "the server ran and wrote something"
    assert leaks == []


# --- a static check: secrets are never compared with == ------------------------------------------
SECRET_WORDS = ("token", "secret", "password", "passwd", "signature", "api_key", "apikey")
NOT_SECRET = ("_token_chars", "token_prefix", "tokens")


def _name_of(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call):
        return _name_of(node.func)
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return str(node.slice.value)
    return None


def _secret_named(node: ast.AST) -> bool:
    name = (_name_of(node) or "").lower()
    if not name or name in NOT_SECRET:
        return False
    return any(word in name for word in SECRET_WORDS) or name in {"digest", "token_digest", "hexdigest"}


def secret_comparisons(source: str, filename: str = "<src>") -> list[str]:
    """`==` / `!=` comparisons where one side names a secret and the other is not a literal."""
    found = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        for op, (a, b) in zip(node.ops, itertools.pairwise(operands), strict=True):
            if not isinstance(op, ast.Eq | ast.NotEq):
                continue
            if isinstance(a, ast.Constant) or isinstance(b, ast.Constant):
                continue  # against a literal (None, "", a scheme name): no secret is being matched
            if _secret_named(a) or _secret_named(b):
                found.append(f"{filename}:{node.lineno}: {ast.unparse(node)}")
    return found


def project_sources() -> list[Path]:
    return [
        path
        for package in PROJECT_PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if "tests" not in path.parts and "migrations" not in path.parts
    ]


def test_the_scanner_sees_a_secret_compared_with_equals() -> None:
    bad = "def check(token, stored):\n    return stored.token_digest == digest(token)\n"
    assert secret_comparisons(bad)
    assert secret_comparisons("if presented_token != expected:\n    pass\n")
    assert not secret_comparisons("if hmac.compare_digest(a.token_digest, b):\n    pass\n")
    assert not secret_comparisons("if scheme.lower() != 'bearer':\n    pass\n")


def test_no_secret_is_compared_with_equals(scorecard) -> None:
    sources = project_sources()
    found = [
        hit for path in sources for hit in secret_comparisons(path.read_text(), str(path.relative_to(ROOT)))
    ]
    scorecard(
        3, "static: no secret compared with == / !=", cases=len(sources), bypasses=len(found), hits=found
    )
    assert len(sources) > 40
    assert found == [], "compare secrets with hmac.compare_digest:\n" + "\n".join(found)
