"""Check 7 — the actor: a property test over every tool that takes `actor`. Whatever a caller sends
as its actor — the owner's name, another principal's, objects that look like identities, null,
numbers, megabytes — every stored actor (and every principal link) is the bearer's principal, and
the audit row keeps the claim (digested when huge, tokens masked) without trusting it."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beliefs.models import Belief, WorldModelVersion
from goals.models import DecisionLogEntry, GoalModelVersion, Task
from intents.models import Decision, Directive, Intent, IntentEvent
from operator_site.face import registry
from operator_site.models import AuditEvent, Instruction
from tests.fixtures import asgi_http
from tests.security.helpers import close_loop, envelope_of, message_of, post, tools_call

pytestmark = pytest.mark.django_db(transaction=True)

EXAMPLES = int(os.environ.get("OPERATOR_FUZZ_EXAMPLES", "24")) // 3 + 2

ACTORS = st.one_of(
    st.sampled_from(
        [
            "owner",
            "Owner",
            "human:owner",
            "other-human",
            "full-agent",
            "night-runner",
            "operator-executor",
            "admin",
            "system",
            "",
            " owner ",
        ]
    ),
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(max_size=80),
    st.just("x" * 60_000),
    st.fixed_dictionaries({"name": st.just("owner"), "kind": st.sampled_from(["human", "agent"])}),
    st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3),
    st.lists(st.sampled_from(["owner", "human"]), max_size=3),
)


def _fresh_intent(principal: Any, n: int) -> Intent:
    from intents.lifecycle import ActionInput, record_intent

    intent, _ = record_intent(
        principal=principal,
        action=ActionInput(type="spend", title=f"actor probe {n}", amount_cents=100 + n),
    )
    return intent


def _say(owner: Any, text: str) -> None:
    from beliefs import services

    services.record_instruction(principal=owner, text=text, channel="chat")


# tool → (arguments for call n, who stored it: [(model, filter, field)] checked against the caller)
def cases(owner: Any) -> dict[str, Callable[[int, Any], tuple[dict[str, Any], Callable[[], list[Any]]]]]:
    def task(n: int, p: Any) -> Any:
        return {"key": f"actor-{n}", "patch": {"title": f"t{n}"}}, lambda: [
            *Task.objects.filter(key=f"actor-{n}").values_list("created_by_id", "updated_by_id")[0]
        ]

    def decision(n: int, p: Any) -> Any:
        intent = _fresh_intent(owner, n)
        d = Decision.objects.get(intent=intent)
        return {"id": d.id, "status": "parked"}, lambda: list(
            IntentEvent.objects.filter(intent=intent)
            .exclude(event="recorded")
            .values_list("by_id", flat=True)
        )

    def instruction(n: int, p: Any) -> Any:
        return {"text": f"instruction {n}"}, lambda: list(
            Instruction.objects.filter(text=f"instruction {n}").values_list("principal_id", "actor")[0]
        )

    def directive(n: int, p: Any) -> Any:
        return {"kind": "topic_mute", "topic": f"topic{n}"}, lambda: list(
            Directive.objects.filter(topic=f"topic{n}").values_list("set_by_id", "actor")[0]
        )

    def clear(n: int, p: Any) -> Any:
        Directive.objects.create(kind="quiet", set_by=owner, actor=owner.name, expires_at=_later())
        return {"kind": "quiet"}, lambda: list(
            Directive.objects.filter(kind="quiet")
            .exclude(cleared_by=None)
            .values_list("cleared_by_id", flat=True)
        )[-1:]

    def world(n: int, p: Any) -> Any:
        change = {"op": "add", "kind": "note", "key": f"actor{n}", "value": f"v{n}"}
        return {"changes": [change]}, lambda: [
            *WorldModelVersion.objects.order_by("-number").values_list("principal_id", "actor")[0],
            *Belief.objects.filter(key=f"actor{n}").values_list("source_principal_id", "source_name")[0],
        ]

    def world_revert(n: int, p: Any) -> Any:
        from beliefs import services

        services.update_world_model(
            principal=p, changes=[{"op": "add", "kind": "note", "key": f"undo{n}", "value": "v"}]
        )
        return {}, lambda: list(
            WorldModelVersion.objects.order_by("-number").values_list("principal_id", "actor")[0]
        )

    def goal(n: int, p: Any) -> Any:
        _say(owner, f"Please add the goal Learn cello {n} to my goals.")
        arguments = {
            "action": "add",
            "title": f"Learn cello {n}",
            "confirmedInConversation": True,
            "confirmationQuote": f"Please add the goal Learn cello {n} to my goals.",
        }
        return arguments, lambda: list(
            GoalModelVersion.objects.order_by("-number").values_list("principal_id", "actor")[0]
        )

    def reconcile(n: int, p: Any) -> Any:
        change = {"entity": "project", "op": "add", "fields": {"title": f"project {n}"}}
        return {"changes": [change]}, lambda: list(
            GoalModelVersion.objects.order_by("-number").values_list("principal_id", "actor")[0]
        )

    def goal_revert(n: int, p: Any) -> Any:
        from goals import goal_model

        goal_model.reconcile_goal_model(
            principal=p, changes=[{"entity": "project", "op": "add", "fields": {"title": f"undo {n}"}}]
        )
        return {}, lambda: list(
            GoalModelVersion.objects.order_by("-number").values_list("principal_id", "actor")[0]
        )

    def log(n: int, p: Any) -> Any:
        return {"title": f"d{n}", "decision": "x", "rationale": "y"}, lambda: list(
            DecisionLogEntry.objects.filter(title=f"d{n}").values_list("principal_id", "actor")[0]
        )

    def record_intent(n: int, p: Any) -> Any:
        return {"action": {"type": "note", "title": f"note {n}"}}, lambda: list(
            Intent.objects.filter(title=f"note {n}").values_list("recorded_by_id", "actor")[0]
        )

    def move_intent(n: int, p: Any) -> Any:
        intent = _fresh_intent(owner, 10_000 + n)
        return {"id": intent.id, "to": "cancelled"}, lambda: list(
            IntentEvent.objects.filter(intent=intent, event="transition").values_list("by_id", flat=True)
        )

    return {
        "operator_update_task": task,
        "operator_update_decision": decision,
        "operator_record_instruction": instruction,
        "operator_set_directive": directive,
        "operator_clear_directive": clear,
        "operator_update_world_model": world,
        "operator_revert_world_model": world_revert,
        "operator_apply_goal_change": goal,
        "operator_reconcile_goal_model": reconcile,
        "operator_revert_goal_model": goal_revert,
        "operator_log_decision": log,
        "operator_record_action_intent": record_intent,
        "operator_update_action_intent": move_intent,
    }


def _later() -> Any:
    from datetime import timedelta

    from django.utils import timezone

    return timezone.now() + timedelta(hours=1)


def test_the_stored_actor_is_always_the_principal(principals, scorecard, no_rate_limit) -> None:
    owner = principals["owner"].principal
    table = cases(owner)
    assert set(table) == {s.name for s in registry.all_tools() if s.takes_actor}, "every tool with an actor"
    loop = asyncio.new_event_loop()
    holders = {
        "owner": principals["owner"],
        "agent": principals["full_agent"],
        "human": principals["other_human"],
    }
    clients = {who: asgi_http(h.token) for who, h in holders.items()}
    counter = itertools.count(1)
    wrong: list[str] = []
    tried = 0

    def one(tool: str, who: str, actor: Any) -> None:
        nonlocal tried
        tried += 1
        n = next(counter)
        holder = holders[who]
        arguments, stored = table[tool](n, holder.principal)
        audit_before = AuditEvent.objects.order_by("-id").values_list("id", flat=True).first() or 0
        response = loop.run_until_complete(
            post(clients[who], tools_call(tool, {**arguments, "actor": actor}))
        )
        body, _ = envelope_of(message_of(response))
        if body.get("ok") is False:
            wrong.append(f"{tool} as {who} with actor {json.dumps(actor)[:60]}: refused {body['error']}")
            return
        values = stored()
        expected = {holder.principal.id, holder.principal.name}
        if not values or any(v not in expected for v in values):
            wrong.append(f"{tool} as {who} with actor {json.dumps(actor)[:60]}: stored {values}")
        audit = AuditEvent.objects.filter(id__gt=audit_before).get()
        if audit.principal_id != holder.principal.id:
            wrong.append(f"{tool}: audit row of principal {audit.principal_id}")
        claimed = audit.claimed_actor
        if isinstance(actor, str) and len(actor) > 2000:
            if not (isinstance(claimed, dict) and claimed.get("truncated")):
                wrong.append(f"{tool}: a huge actor was stored whole in the audit row")
        elif claimed != actor:
            wrong.append(f"{tool}: the claim {actor!r} was audited as {claimed!r}")

    def prop_for(tool: str) -> Callable[[], None]:
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(actor=ACTORS, who=st.sampled_from(sorted(holders)))
        def prop(actor: Any, who: str) -> None:
            one(tool, who, actor)

        return prop

    try:
        for tool in table:
            prop_for(tool)()
    finally:
        for client in clients.values():
            loop.run_until_complete(client.aclose())
        close_loop(loop)
        scorecard(
            7,
            "stored actor is the principal, whatever actor is sent",
            cases=tried,
            bypasses=len(wrong),
            wrong=wrong[:20],
        )
    assert wrong == []
    assert tried >= EXAMPLES * len(table)
