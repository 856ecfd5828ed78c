"""Check 5 — the permission matrix: every principal kind x every tool, against the table below
(kept here by hand, not derived from the code, so a change of powers has to change this table on
purpose). Each cell is tried with a real call; `tools/list` (both protocol eras) and the JSON API
catalogue must list exactly the allowed tools; a refused call writes nothing but its audit row."""

from __future__ import annotations

import pytest
from django.apps import apps

from operator_site.face import registry
from operator_site.models import AuditEvent
from tests.fixtures import asgi_http, mcp_client, orm
from tests.security.helpers import envelope_of, message_of, post, tools_call

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

OWN, H, A, M, N, B = "owner", "other_human", "full_agent", "morning_runner", "night_runner", "onboarding"
KIND_ORDER = (OWN, H, A, M, N, B)
#                                    owner other full  morning night onboarding
MATRIX: dict[str, tuple[int, ...]] = {
    "operator_context_packet":        (1, 1, 1, 1, 1, 1),
    "operator_state":                 (1, 1, 1, 0, 0, 0),
    "operator_user_world_model":      (1, 1, 1, 0, 0, 1),
    "operator_tick":                  (1, 1, 1, 0, 0, 0),
    "operator_update_task":           (1, 1, 1, 1, 1, 0),
    "operator_update_decision":       (1, 1, 1, 0, 1, 0),
    "operator_record_instruction":    (1, 1, 1, 0, 1, 0),
    "operator_set_directive":         (1, 1, 1, 0, 0, 0),
    "operator_clear_directive":       (1, 1, 1, 0, 0, 0),
    "operator_list_directives":       (1, 1, 1, 0, 0, 1),
    "operator_update_world_model":    (1, 1, 1, 0, 0, 0),
    "operator_revert_world_model":    (1, 1, 1, 0, 0, 0),
    "operator_apply_goal_change":     (1, 1, 1, 0, 0, 0),
    "operator_reconcile_goal_model":  (1, 1, 1, 0, 0, 0),
    "operator_revert_goal_model":     (1, 1, 1, 0, 0, 0),
    "operator_log_decision":          (1, 1, 1, 0, 0, 0),
    "operator_record_progress":       (1, 1, 1, 0, 0, 0),
    "operator_record_observation":    (1, 1, 1, 0, 0, 0),
    "operator_record_action_intent":  (1, 1, 1, 1, 0, 0),
    "operator_update_action_intent":  (1, 1, 1, 0, 0, 0),
    "operator_history":               (1, 1, 1, 0, 0, 1),
    "operator_run_start":             (1, 1, 1, 0, 0, 0),
    "operator_run_heartbeat":         (1, 1, 1, 0, 0, 0),
    "operator_run_finish":            (1, 1, 1, 0, 0, 0),
}  # fmt: skip


def allowed(kind: str) -> list[str]:
    return [tool for tool, row in MATRIX.items() if row[KIND_ORDER.index(kind)]]


def domain_rows() -> int:
    """Rows in every project table except the audit trail and the rate counter."""
    return sum(
        model._default_manager.count()
        for model in apps.get_models()
        if model._meta.app_label in {"operator_site", "beliefs", "goals", "intents", "runs"}
        and model not in (AuditEvent,)
        and model._meta.model_name != "ratecounter"
    )


def test_the_matrix_covers_every_tool_and_the_runners_never_touch_an_intents_lifecycle() -> None:
    assert list(MATRIX) == list(registry.DECLARED_TOOLS) == registry.names()
    assert not MATRIX["operator_update_action_intent"][KIND_ORDER.index(M)]
    assert not MATRIX["operator_update_action_intent"][KIND_ORDER.index(N)]
    assert all(registry.get(t).read_only for t in allowed(B)), "onboarding reads only"


async def test_every_principal_kind_times_every_tool(principals, scorecard, no_rate_limit) -> None:
    wrong: list[str] = []
    cells = 0
    for kind in KIND_ORDER:
        holder = principals[kind]
        permitted = set(allowed(kind))
        async with asgi_http(holder.token) as http:
            for spec in registry.all_tools():
                cells += 1
                rows_before = await orm(domain_rows)
                audit_before = await orm(AuditEvent.objects.count)
                response = await post(http, tools_call(spec.name, spec.examples[0]))
                body, is_error = envelope_of(message_of(response))
                refused = body.get("error") == "tool_not_allowed"
                if spec.name in permitted and refused:
                    wrong.append(f"{kind} x {spec.name}: refused, the table allows it")
                if spec.name not in permitted:
                    if not (refused and is_error and body.get("tool") == spec.name):
                        wrong.append(f"{kind} x {spec.name}: {body.get('error')!r}, the table refuses it")
                    if await orm(domain_rows) != rows_before:
                        wrong.append(f"{kind} x {spec.name}: a refused call wrote a row")
                    if await orm(AuditEvent.objects.count) != audit_before + 1:
                        wrong.append(f"{kind} x {spec.name}: the refusal was not audited once")
    scorecard(
        5, "permission matrix: 6 principal kinds x 24 tools", cases=cells, bypasses=len(wrong), wrong=wrong
    )
    assert cells == 6 * 24
    assert wrong == []


async def test_tools_list_and_the_catalogue_agree_with_the_matrix(principals, scorecard) -> None:
    disagreements: list[str] = []
    lists = 0
    for kind in KIND_ORDER:
        holder = principals[kind]
        expected = allowed(kind)
        for mode in ("legacy", "auto"):
            lists += 1
            async with mcp_client(holder.token, mode=mode) as client:
                names = [t.name for t in (await client.list_tools()).tools]
            if names != expected:
                disagreements.append(f"{kind} ({mode}): tools/list {names} != {expected}")
        async with asgi_http(holder.token) as http:
            lists += 1
            catalogue = [t["name"] for t in (await http.get("/api/tools")).json()]
        if catalogue != expected:
            disagreements.append(f"{kind}: /api/tools {catalogue} != {expected}")
    scorecard(5, "tools/list (both eras) and /api/tools agree", cases=lists, bypasses=len(disagreements))
    assert disagreements == []
