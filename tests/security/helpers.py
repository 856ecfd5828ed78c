"""Helpers of the security suite: raw requests, answer checks, and the database invariants that must
hold after anything an attacker tried."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx2

from tests.fixtures import SEED_HEADERS, parse_sse

TRACEBACK_MARKERS = ("Traceback (most recent call last)", 'File "/', "site-packages", '.py", line ')


def no_traceback(text: str) -> bool:
    return not any(marker in text for marker in TRACEBACK_MARKERS)


async def post(
    http: httpx2.AsyncClient,
    body: bytes | str | Any,
    headers: dict[str, str] | list[tuple[str, str]] | None = None,
    path: str = "/mcp",
) -> httpx2.Response:
    """POST a raw body to /mcp with the runners' headers (docs/client.md) unless `headers` overrides them."""
    if isinstance(headers, list):
        merged: Any = headers
    else:
        merged = {**SEED_HEADERS, **(headers or {})}
    return await http.post(path, content=body, headers=merged)


def message_of(response: httpx2.Response) -> dict[str, Any] | None:
    """The JSON-RPC message of an answer, whether sent as SSE or as plain JSON; None if neither."""
    text = response.text
    if not text.strip():
        return None
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return parse_sse(text)
    try:
        return json.loads(text)
    except ValueError:
        return None


def envelope_of(message: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The decoded single text block of a tools/call result, and its isError flag. Asserts the shape:
    exactly one text block holding indented JSON (docs/architecture.md, "A request to `/mcp`")."""
    result = message["result"]
    content = result["content"]
    assert isinstance(content, list) and len(content) == 1, message
    block = content[0]
    assert block["type"] == "text", message
    text = block["text"]
    body = json.loads(text)
    assert isinstance(body, dict), text
    assert text == json.dumps(body, indent=2, ensure_ascii=False, default=str) or text.startswith("{\n"), text
    if body.get("ok") is False:
        assert isinstance(body.get("error"), str) and body["error"], body
        assert isinstance(body.get("reason"), str) and body["reason"], body
    return body, bool(result.get("isError"))


def tools_call(name: str, arguments: Any, id_: Any = 1) -> bytes:
    params = {"name": name, "arguments": arguments}
    return json.dumps({"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": params}).encode()


# --- database invariants ------------------------------------------------------------------------
def invariant_violations() -> list[str]:
    """Everything that must be true of the stored state whatever callers sent. Empty: all hold.

    - each versioned model (world model, goal model): versions 1..N each superseding the one before
      (no fork, no gap), the version counter equals the number of version rows, no version without
      a change row (no orphan), and every entity's live state equals its newest post-image (no half
      write, no write outside the lineage);
    - every belief row is accounted for by the lineage;
    - intents and decisions: nothing approved except by a person through a human channel, every
      intent awaiting approval has its one open question, every approved intent its approval;
    - observations: all tainted.
    """
    from beliefs.models import Belief
    from beliefs.services import WORLD_MODEL
    from goals.goal_model import GOAL_MODEL
    from intents.models import Decision, Intent, IntentEvent
    from runs.models import Observation

    problems: list[str] = []
    for lineage in (WORLD_MODEL, GOAL_MODEL):
        versions = lineage.version_model.objects
        chain = list(versions.order_by("number").values_list("number", "supersedes"))
        if chain != [(n, n - 1) for n in range(1, len(chain) + 1)]:
            problems.append(f"{lineage.label}: the lineage forked or has gaps: {chain[:20]}")
        if lineage.current_version() != len(chain):
            counter = lineage.current_version()
            problems.append(f"{lineage.label}: counter {counter} != {len(chain)} version rows")
        orphans = list(versions.filter(changes__isnull=True).values_list("number", flat=True))
        if orphans:
            problems.append(f"{lineage.label}: versions without any change row: {orphans}")
        newest: dict[str, Any] = {}
        for entity, after in lineage.change_model.objects.order_by("version_id", "id").values_list(
            "entity", "after"
        ):
            newest[entity] = after
        for entity, after in newest.items():
            live = lineage.store.snapshot(entity)
            if live != after:
                problems.append(f"{lineage.label}: {entity} is {live!r}, its newest version says {after!r}")
        if lineage is WORLD_MODEL:
            for belief in Belief.objects.all():
                if belief.entity not in newest:
                    problems.append(f"belief {belief.entity} exists without any version")

    approved_not_by_person = Decision.objects.filter(status="approved").exclude(
        decided_via__in=["admin", "api"]
    )
    if approved_not_by_person.exists():
        problems.append(f"decisions approved outside a human channel: {list(approved_not_by_person)}")
    agent_approvals = IntentEvent.objects.filter(to_status="approved").exclude(via__in=["admin", "api"])
    if agent_approvals.exists():
        problems.append(f"intents moved to approved outside a human channel: {list(agent_approvals)}")
    for intent in Intent.objects.filter(status="approved"):
        if intent.approval_decision_id is None or intent.approved_by_id is None:
            problems.append(f"intent {intent.id} approved without an approval decision and a person")
    for intent in Intent.objects.filter(status="pending_approval"):
        if not Decision.objects.filter(intent=intent, status__in=["pending", "parked"]).exists():
            problems.append(f"intent {intent.id} awaits approval without an open question")
    if Observation.objects.exclude(tainted=True).exists():
        problems.append("an observation is stored untainted")
    return problems


# --- a uvicorn server whose output is kept ------------------------------------------------------------
def start_logged_uvicorn(log_path: Any, extra_env: dict[str, str] | None = None, workers: int = 1) -> Any:
    """Like tests.fixtures.start_uvicorn, with the server's stdout and stderr written to `log_path`."""
    import os
    import socket
    import subprocess
    import sys
    import time

    from tests.fixtures import ROOT, LiveServer, database_url_of_this_run, free_port

    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url_of_this_run(),
        "OPERATOR_NO_VENV": "1",
        **(extra_env or {}),
    }
    log = open(log_path, "ab")  # noqa: SIM115 - closed with the process by the caller's stop
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "uvicorn", "operator_site.asgi:application"),
            *("--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)),
            *("--no-access-log", "--log-level", "debug"),
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=log,
    )
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
    return LiveServer(f"http://127.0.0.1:{port}", process)


# --- one tools/call on this thread, as the dispatcher runs it (no HTTP) ------------------------------
def run_tool(principal: Any, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Validation, the actor overwrite, one transaction with its audit row, the envelope — what
    `dispatch()` does after the allowlist — on the calling thread (each thread its own connection)."""
    import time

    from operator_site.face import registry
    from operator_site.face.dispatch import ToolCall, _run_in_transaction, canonical_digest

    spec = registry.get(name)
    assert spec is not None, name
    args = spec.args.model_validate(arguments)
    if spec.takes_actor:
        args.actor = principal.name
    result = _run_in_transaction(
        spec, ToolCall(principal, spec), args, time.perf_counter(), canonical_digest(arguments), None
    )
    assert len(result.content) == 1
    return json.loads(result.content[0].text)


def run_threads(count: int, target: Any, timeout: float = 300) -> list[BaseException]:
    """Run target(i) on `count` threads (each closes its own database connection); the errors."""
    import threading

    from django.db import connection

    errors: list[BaseException] = []

    def guarded(i: int) -> None:
        try:
            target(i)
        except BaseException as exc:  # surfaced by the caller's assertion
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    if any(t.is_alive() for t in threads):
        errors.append(TimeoutError("a worker thread hung"))
    return errors


def close_loop(loop: Any) -> None:
    """Cancel what is still pending on a test's own event loop (the SDK's SSE watchers), then close."""
    import asyncio

    pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    loop.close()


def email_of(notice: Any) -> str:
    """The text of the one email a notice was delivered as (Django's locmem outbox), found by its
    subject."""
    from django.core import mail

    from operator_site import notice_channels

    subject = notice_channels.email_subject(notice)
    [email] = [m for m in mail.outbox if m.subject == subject]
    return email.body


def look_alike_letters(script: str, upper: bool = False) -> dict[str, str]:
    """A script's lower-case letters that read as a lower-case Latin one (the fold's own table,
    operator_site.lookalike_table): {"a": "\\u0430", ...} for "CYRILLIC"; with `upper`, its capitals
    that read as a Latin capital. Checks 14, 23 and 24 build words from them that one script writes
    and that read as a Latin word ("paypal")."""
    import unicodedata

    from operator_site.lookalike_table import READS_AS

    out: dict[str, str] = {}
    for code, plain in sorted(READS_AS.items()):
        ch = chr(code)
        same_case = plain.isupper() and ch.upper() == ch if upper else plain.islower() and ch.lower() == ch
        if unicodedata.name(ch, "").startswith(script) and same_case:
            out.setdefault(plain, ch)
    return out


def whole_word_twin(word: str, script: str) -> str | None:
    """`word` (lower case) written wholly in `script`'s look-alike letters, if it has one for every
    letter: one script, so past the door, and it reads as `word`."""
    letters = look_alike_letters(script)
    return "".join(letters[ch] for ch in word) if all(ch in letters for ch in word) else None


@dataclass
class Tally:
    """A check's cases and what got past it: `expect(what, ok, body)` counts a case, and keeps
    `what` with the start of `body` when `ok` is false (a bypass)."""

    cases: int = 0
    problems: list[str] = field(default_factory=list)

    def expect(self, what: str, ok: bool, body: Any) -> None:
        self.cases += 1
        if not ok:
            self.problems.append(f"{what}: {str(body)[:300]}")

    def record(self, scorecard: Any, check: int, title: str, **detail: Any) -> None:
        """Put the tally on the scorecard as check `check`, then fail the test if anything got past."""
        scorecard(
            check, title, cases=self.cases, bypasses=len(self.problems), problems=self.problems[:20], **detail
        )
        assert self.problems == [], self.problems


@dataclass
class IntentRecorder:
    """Records action intents through the real tool (`operator_record_action_intent`) and returns
    each answer's envelope. A call without a title gets a distinct one ("Case N"): the same call
    again the same day would return the same row. Checks 24 and 25 drive the gate with it."""

    http: Any
    calls: int = 0

    async def __call__(self, **action: Any) -> dict[str, Any]:
        self.calls += 1
        action = {"title": f"Case {self.calls}", **action}
        message = message_of(
            await post(self.http, tools_call("operator_record_action_intent", {"action": action}))
        )
        body, _ = envelope_of(message)
        return body
