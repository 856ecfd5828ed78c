# ruff: noqa: E501  (the tables read best one row per line)
"""Check 1 — the bad-input table: every malformed thing a caller can send to /mcp gets a clear
answer with its exact HTTP status and JSON-RPC code (or refusal code), never a 5xx, never a
traceback, and nothing written.

Rows come in three groups: the request itself (headers, body, framing, JSON-RPC shape); wrong
argument types for every tool (generated from the registry); and hostile text (unicode, SQL,
markup, format strings) in every free-text field, which must be stored byte for byte — proof that
nothing is interpolated into SQL — or refused by name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings

from operator_site.face import registry
from operator_site.models import AuditEvent, Principal
from tests.fixtures import SEED_HEADERS, asgi_http, orm, start_uvicorn, stop_uvicorn
from tests.security.helpers import envelope_of, message_of, no_traceback, post, tools_call

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
LIST_BYTES = json.dumps(LIST).encode()
MB20 = 20 * 1024 * 1024


@dataclass(frozen=True)
class Row:
    name: str
    body: bytes | None
    status: int
    code: int | None = None  # the JSON-RPC error code expected, if any
    headers: tuple[tuple[str, str], ...] = ()
    drop: tuple[str, ...] = ()  # seed headers to leave out
    chunked: bool = False
    writes: bool = False  # the row is a valid call that may write (its audit row)


def _msg(**fields: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **fields}).encode()


def _modern(version: str) -> bytes:
    meta = {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    return _msg(id=1, method="tools/list", params={"_meta": meta})


def _deep_object(depth: int) -> bytes:
    return (
        b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":'
        + b'{"a":' * depth
        + b"1"
        + b"}" * depth
        + b"}"
    )


def _deep_arguments(depth: int) -> bytes:
    head = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"operator_list_directives",'
    return head + b'"arguments":' + b"[" * depth + b"]" * depth + b"}}"


ROWS: list[Row] = [
    # --- headers -----------------------------------------------------------------------------------
    Row("content-type missing", LIST_BYTES, 400, -32600, drop=("Content-Type",)),
    Row("content-type text/plain", LIST_BYTES, 400, -32600, headers=(("Content-Type", "text/plain"),)),
    Row("content-type form", LIST_BYTES, 400, -32600, headers=(("Content-Type", "application/x-www-form-urlencoded"),)),
    Row("content-type json with charset", LIST_BYTES, 200, headers=(("Content-Type", "application/json; charset=utf-8"),)),
    # HTTP: no Accept header means any type is acceptable; the SDK answers as it would to both.
    Row("accept missing", LIST_BYTES, 200, drop=("Accept",)),
    Row("accept text/html", LIST_BYTES, 406, -32600, headers=(("Accept", "text/html"),)),
    Row("accept json only", LIST_BYTES, 406, -32600, headers=(("Accept", "application/json"),)),
    Row("accept event-stream only", LIST_BYTES, 406, -32600, headers=(("Accept", "text/event-stream"),)),
    # An unknown version goes to the 2026 era, which first wants its per-request envelope ...
    Row("unsupported MCP-Protocol-Version", LIST_BYTES, 400, -32602, headers=(("MCP-Protocol-Version", "1999-01-01"),)),
    # ... and, given the envelope, names the versions it serves.
    Row("unsupported version, 2026 envelope", _modern("1999-01-01"), 400, -32022, headers=(("MCP-Protocol-Version", "1999-01-01"), ("Mcp-Method", "tools/list"))),
    # --- body --------------------------------------------------------------------------------------
    Row("empty body", b"", 400, -32700),
    Row("whitespace body", b" \r\n\t ", 400, -32700),
    Row("not json", b"{not json", 400, -32700),
    Row("truncated json", LIST_BYTES[:-1], 400, -32700),
    Row("invalid utf-8", b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":"\xff\xfe\xc3"}}', 400, -32700),
    Row("utf-16 body", json.dumps(LIST).encode("utf-16"), 400, -32700),
    Row("byte-order mark", b"\xef\xbb\xbf" + LIST_BYTES, 400, -32700),
    Row("100,000-deep object nesting", _deep_object(100_000), 400, -32700),
    Row("100,000-deep array in arguments", _deep_arguments(100_000), 400, -32700),
    Row("100,000-deep array body", b"[" * 100_000 + b"]" * 100_000, 400, -32700),
    Row("20 MB body with Content-Length", b'{"jsonrpc":"2.0","id":1,"method":"tools/list","x":"' + b"a" * MB20 + b'"}', 413, -32600),
    Row("20 MB body chunked", b'{"jsonrpc":"2.0","id":1,"method":"tools/list","x":"' + b"a" * MB20 + b'"}', 413, -32600, chunked=True),
    # Not Unicode: the SDK's parser refuses JSON that escapes half a surrogate pair (I-JSON, RFC 7493).
    Row("lone surrogate in a text argument", b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"operator_record_instruction","arguments":{"text":"a\\ud800b"}}}', 400, -32700),
    Row("lone surrogate in a tool name", b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"operator_\\udfffx","arguments":{}}}', 400, -32700),
    Row("NUL bytes in body", b'{"jsonrpc":"2.0","id":1,\x00"method":"tools/list"}', 400, -32700),
    # --- JSON-RPC shape ------------------------------------------------------------------------------
    Row("batch of two", json.dumps([LIST, {**LIST, "id": 2}]).encode(), 400, -32600),
    Row("empty batch", b"[]", 400, -32600),
    Row("json string", b'"tools/list"', 400, -32600),
    Row("json number", b"42", 400, -32600),
    Row("json null", b"null", 400, -32600),
    Row("json true", b"true", 400, -32600),
    Row("params is an array", _msg(id=1, method="tools/list", params=[1, 2]), 400, -32600),
    Row("params is a string", _msg(id=1, method="tools/call", params="operator_state"), 400, -32600),
    Row("jsonrpc 1.0", json.dumps({**LIST, "jsonrpc": "1.0"}).encode(), 400, -32600),
    Row("jsonrpc missing", json.dumps({"id": 1, "method": "tools/list"}).encode(), 400, -32600),
    Row("jsonrpc as number", json.dumps({**LIST, "jsonrpc": 2.0}).encode(), 400, -32600),
    Row("method missing", _msg(id=1), 400, -32600),
    Row("method not a string", _msg(id=1, method=42), 400, -32600),
    Row("id null", _msg(id=None, method="tools/list"), 400, -32600),
    Row("id an object", _msg(id={"a": 1}, method="tools/list"), 400, -32600),
    Row("id an array", _msg(id=[1], method="tools/list"), 400, -32600),
    Row("id true", _msg(id=True, method="tools/list"), 400, -32600),
    Row("id a float", _msg(id=1.5, method="tools/list"), 400, -32600),
    Row("id a 10,000-char string", _msg(id="i" * 10_000, method="tools/list"), 200),
    Row("id a negative number", _msg(id=-7, method="tools/list"), 200),
    Row("notification (no id)", _msg(method="notifications/initialized"), 202),
    Row("unknown notification", _msg(method="notifications/approve_everything"), 202),
    Row("a response from the client", _msg(id=1, result={}), 202),
    Row("an error from the client", _msg(id=1, error={"code": -1, "message": "x"}), 202),
    Row("unknown method", _msg(id=1, method="intents/approve"), 200, -32601),
    Row("unknown method with slash games", _msg(id=1, method="../../admin"), 200, -32601),
    Row("unknown tool", tools_call("operator_approve_intent", {"id": 41}), 200, -32602),
    Row("tool name not a string", _msg(id=1, method="tools/call", params={"name": 7, "arguments": {}}), 200, -32602),
    Row("tool name missing", _msg(id=1, method="tools/call", params={"arguments": {}}), 200, -32602),
    Row("arguments a string", _msg(id=1, method="tools/call", params={"name": "operator_state", "arguments": "x"}), 200, -32602),
    Row("arguments an array", _msg(id=1, method="tools/call", params={"name": "operator_state", "arguments": [1]}), 200, -32602),
]  # fmt: skip


async def _send(http: Any, row: Row) -> Any:
    headers = [(k, v) for k, v in SEED_HEADERS.items() if k not in row.drop]
    overridden = {k.lower() for k, _ in row.headers}
    headers = [(k, v) for k, v in headers if k.lower() not in overridden] + list(row.headers)
    body: Any = row.body
    if row.chunked:
        data = row.body or b""

        async def chunks() -> Any:
            for i in range(0, len(data), 1 << 20):
                yield data[i : i + (1 << 20)]

        body = chunks()
    return await post(http, body, headers)


def _outcome(response: Any) -> tuple[int, int | None]:
    message = message_of(response)
    code = None
    if isinstance(message, dict) and isinstance(message.get("error"), dict):
        code = message["error"].get("code")
    return response.status_code, code


async def test_the_bad_input_table(principals, scorecard) -> None:
    owner = principals["owner"]
    assert len(ROWS) >= 30
    mismatches: list[str] = []
    fivexx = tracebacks = 0
    before = await orm(AuditEvent.objects.count)
    async with asgi_http(owner.token) as http:
        for row in ROWS:
            response = await _send(http, row)
            status, code = _outcome(response)
            if status >= 500:
                fivexx += 1
            if not no_traceback(response.text):
                tracebacks += 1
            if (status, code) != (row.status, row.code):
                mismatches.append(f"{row.name}: got {status}/{code}, expected {row.status}/{row.code}")
    # Only rows that reached tools/call can have written (their audit row); nothing else.
    audited = await orm(lambda: list(AuditEvent.objects.order_by("id").values_list("tool", "error_code")))
    audited = audited[before:]
    unexpected = [a for a in audited if a[1] != "unknown_tool"]
    scorecard(
        1,
        "bad-input table: headers, body, framing, JSON-RPC shape",
        cases=len(ROWS),
        bypasses=len(mismatches) + fivexx + tracebacks + len(unexpected),
        five_xx=fivexx,
        tracebacks=tracebacks,
        mismatches=mismatches,
    )
    assert mismatches == []
    assert fivexx == 0 and tracebacks == 0
    assert unexpected == [], audited


# --- wrong argument types, every tool -----------------------------------------------------------------------
def _wrong_values(schema: dict[str, Any]) -> list[Any]:
    """Values of the wrong JSON type for a property of this schema."""
    types: set[str] = set()
    if not {"type", "anyOf", "$ref", "properties", "enum", "const", "allOf"} & set(schema):
        return []  # `actor` and `tainted` accept anything by design
    for part in [schema, *schema.get("anyOf", [])]:
        if "type" in part:  # a string, or a list (`["string", "null"]`: the compact schema)
            types.update(part["type"] if isinstance(part["type"], list) else [part["type"]])
        if "$ref" in part or "properties" in part:
            types.add("object")
        if "enum" in part or "const" in part:
            types.add("string")
    candidates = [{"nested": True}, [1, 2], 3.5, True, "text"]
    out = []
    for value in candidates:
        kind = {dict: "object", list: "array", float: "number", bool: "boolean", str: "string"}[type(value)]
        if kind in types:
            continue
        if kind == "boolean" and types & {"integer", "number"}:
            out.append(value)  # a bool is not a number here either
            continue
        out.append(value)
    if types == {"boolean"} or types == {"boolean", "null"}:
        # What pydantic's lax mode would read as true or false: a flag is JSON true or false only.
        out += ["true", "false", "yes", "on", "1", 1, 0, 1.0]
    return out


def wrong_type_cases() -> list[tuple[str, str, dict[str, Any]]]:
    cases = []
    for spec in registry.all_tools():
        schema = spec.mcp_tool.input_schema
        example = dict(spec.examples[0])
        for prop, prop_schema in schema.get("properties", {}).items():
            for value in _wrong_values(prop_schema):
                cases.append((spec.name, prop, {**example, prop: value}))
    return cases


async def test_wrong_argument_types_for_every_tool(principals, scorecard, no_rate_limit) -> None:
    owner = principals["owner"]
    cases = wrong_type_cases()
    tools_covered = {name for name, _, _ in cases}
    misses: list[str] = []
    async with asgi_http(owner.token) as http:
        for name, prop, arguments in cases:
            response = await post(http, tools_call(name, arguments))
            message = message_of(response)
            if response.status_code != 200 or not no_traceback(response.text) or "result" not in message:
                misses.append(f"{name}.{prop}: HTTP {response.status_code} {response.text[:200]}")
                continue
            body, is_error = envelope_of(message)
            if (body.get("error"), is_error) != ("invalid_arguments", True):
                misses.append(f"{name}.{prop}={arguments[prop]!r}: {body.get('error')} (isError {is_error})")
                continue
            if not any(f["field"].split(".")[0] == prop for f in body["fields"]):
                misses.append(f"{name}.{prop}: the refusal names {body['fields']}, not {prop}")
    scorecard(
        1,
        "wrong argument types, every property of every tool",
        cases=len(cases),
        bypasses=len(misses),
        tools=len(tools_covered),
        misses=misses,
    )
    assert tools_covered >= {
        s.name for s in registry.all_tools() if s.mcp_tool.input_schema.get("properties")
    }
    assert misses == []


# --- hostile text, every free-text field ------------------------------------------------------------------------
HOSTILE = [
    "'; DROP TABLE operator_site_principal; --",
    "Robert'); DELETE FROM beliefs_belief WHERE ('1'='1",
    '" OR 1=1 -- ',
    "1; UPDATE intents_intent SET status='approved'",
    "%s %d %(x)s {0} {{7*7}} ${7*7} \\x00 \\u0000",
    "<script>alert('x')</script><img src=x onerror=alert(1)>",
    "\u202eevil.exe\u202c ‮ right-to-left",
    "zero\u200bwidth\u200djoiner\ufeffbom",
    "emoji 🧨💥👩‍👩‍👧‍👦 and 𝕮𝖔𝖒𝖇𝖎𝖓𝖎𝖓𝖌 and 中文 and عربى",
    "e\u0301\u0301\u0301\u0301 combining" + "\u0300" * 60,
    "back\\slash \"quote\" 'single' `tick` | pipe \\| escaped",
    "line\nbreak\r\nand\ttab",
]

# (tool, arguments with "{}" standing for the hostile text, where the text is stored, how to read it back)
TEXT_SINKS: list[tuple[str, dict[str, Any], str]] = [
    ("operator_record_instruction", {"text": "{}", "channel": "chat"}, "operator_site.Instruction.text"),
    ("operator_record_observation", {"kind": "world", "summary": "{}", "source": "{}"}, "runs.Observation.summary"),
    ("operator_update_task", {"patch": {"title": "{}", "detail": "{}", "lane": "x", "owner": "{}"}}, "goals.Task.title"),
    ("operator_log_decision", {"title": "{}", "decision": "{}", "rationale": "{}", "alternatives": ["{}"]}, "goals.DecisionLogEntry.decision"),
    ("operator_set_directive", {"kind": "topic_mute", "topic": "t{n}", "reason": "{}"}, "intents.Directive.reason"),  # a topic is an identifier (check 14)
    ("operator_record_progress", {"summary": "{}", "outcome": "partial", "tried": ["{}"], "failed": ["{}"]}, "runs.ProgressEntry.summary"),
    ("operator_record_action_intent", {"action": {"type": "note", "title": "{}", "body": "{}"}}, "intents.Intent.body"),
    ("operator_update_world_model", {"changes": [{"op": "add", "kind": "note", "key": "k{n}", "value": "{}"}]}, "beliefs.Belief.value"),
    ("operator_run_start", {"kind": "k{n}", "note": "{}"}, "runs.Run.note"),
]  # fmt: skip


def _fill(template: Any, text: str, n: int) -> Any:
    if isinstance(template, str):
        return text if template == "{}" else template.replace("{n}", str(n))
    if isinstance(template, dict):
        return {k: _fill(v, text, n) for k, v in template.items()}
    if isinstance(template, list):
        return [_fill(v, text, n) for v in template]
    return template


def _stored(path: str, text: str) -> bool:
    from django.apps import apps

    app, model, field = path.split(".")
    rows = apps.get_model(app, model).objects
    # Surrounding whitespace is trimmed by the tools; everything else must be byte for byte.
    return rows.filter(**{field: text}).exists() or rows.filter(**{field: text.strip()}).exists()


async def test_hostile_text_in_every_free_text_field_is_stored_verbatim(
    principals, scorecard, no_rate_limit
) -> None:
    owner = principals["owner"]
    tables_before = await orm(lambda: sorted(connection.introspection.table_names()))
    cases = 0
    misses: list[str] = []
    async with asgi_http(owner.token) as http:
        for n, text in enumerate(HOSTILE):
            for tool, template, sink in TEXT_SINKS:
                cases += 1
                arguments = _fill(template, text, n)
                if tool == "operator_update_task":
                    arguments["key"] = f"hostile-{n}"
                response = await post(http, tools_call(tool, arguments))
                message = message_of(response)
                if response.status_code != 200 or not no_traceback(response.text) or "result" not in message:
                    misses.append(f"{tool} #{n}: HTTP {response.status_code} {response.text[:200]}")
                    continue
                body, _ = envelope_of(message)
                if body.get("ok") is False or "error" in body:
                    misses.append(f"{tool} #{n}: {body.get('error')}: {body.get('reason')}")
                    continue
                if not await orm(_stored, sink, text):
                    misses.append(f"{tool} #{n}: the text was not stored byte for byte in {sink}")
                if tool == "operator_run_start":
                    finish = {"run_id": body["run_id"], "token": body["token"], "status": "ok"}
                    await post(http, tools_call("operator_run_finish", finish))
    tables_after = await orm(lambda: sorted(connection.introspection.table_names()))
    principals_left = await orm(Principal.objects.count)
    broken = int(tables_after != tables_before) + int(principals_left != len(principals))
    scorecard(
        1,
        "hostile text (SQL, unicode, markup, format strings) in every free-text sink",
        cases=cases,
        bypasses=len(misses) + broken,
        misses=misses,
    )
    assert misses == []
    assert broken == 0


# --- the same over a real socket --------------------------------------------------------------------------------
@pytest.mark.socket
async def test_the_largest_rows_over_a_real_uvicorn_socket(principals, scorecard) -> None:
    """Content-Length and chunked 20 MB bodies, and the deep nesting, through uvicorn's own HTTP parser."""
    import httpx2

    owner = principals["owner"]
    server = await orm(start_uvicorn)
    picked = [r for r in ROWS if r.name.startswith(("20 MB", "100,000-deep", "invalid utf-8", "empty body"))]
    mismatches = []
    try:
        async with httpx2.AsyncClient(
            base_url=server.url, headers={"Authorization": f"Bearer {owner.token}"}, timeout=60
        ) as http:
            for row in picked:
                try:
                    response = await _send(http, row)
                except httpx2.HTTPError as exc:  # the server may close early on a refused 20 MB body
                    mismatches.append(f"{row.name}: {type(exc).__name__}")
                    continue
                outcome = _outcome(response)
                if outcome != (row.status, row.code) or not no_traceback(response.text):
                    mismatches.append(f"{row.name}: got {outcome}, expected {(row.status, row.code)}")
            alive = await http.post("/mcp", content=LIST_BYTES, headers=SEED_HEADERS)
    finally:
        await orm(stop_uvicorn, server)
    scorecard(1, "largest rows over a real socket", cases=len(picked) + 1, bypasses=len(mismatches))
    assert mismatches == []
    assert alive.status_code == 200


@override_settings(OPERATOR_MAX_BODY_BYTES=4096)
async def test_a_body_limit_of_four_kilobytes_is_honoured(principals) -> None:
    async with asgi_http(principals["owner"].token) as http:
        response = await post(http, json.dumps({**LIST, "pad": "x" * 5000}))
    assert response.status_code == 413
