"""MCP tools of the intents app. Thin: validate, call a service, shape the answer."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from django.utils import timezone
from pydantic import BaseModel, ConfigDict, Field, field_validator

from intents import answers, decisions, directives, lifecycle
from intents.models import MAX_AMOUNT_CENTS
from operator_site.display import Identifier
from operator_site.face.dispatch import ToolCall
from operator_site.face.registry import CLAIMED_ACTOR, ToolArgs, ToolClass, tool

DirectiveKind = Literal["quiet", "topic_mute", "focus"]


class SetDirectiveArgs(ToolArgs):
    kind: DirectiveKind = Field(
        description="quiet: hold all notifications; topic_mute: those about topic; focus: all not about it."
    )
    topic: Identifier | None = Field(
        None, min_length=1, max_length=100, description="For topic_mute and focus (required); not quiet."
    )
    minutes: int = Field(
        directives.DEFAULT_DIRECTIVE_MINUTES,
        ge=1,
        le=directives.MAX_DIRECTIVE_MINUTES,
        description="How long it lasts.",
    )
    reason: str | None = Field(None, max_length=500, description="Why, in the person's words.")
    actor: Any = CLAIMED_ACTOR


@tool(
    "operator_set_directive",
    tool_class=ToolClass.WRITE,
    args=SetDirectiveArgs,
    title="Set a directive",
    examples=[
        {"kind": "quiet", "minutes": 90, "reason": "deep work until lunch"},
        {"kind": "topic_mute", "topic": "newsletters", "minutes": 1440},
        {"kind": "focus", "topic": "tax return"},
    ],
)
def set_directive(call: ToolCall, args: SetDirectiveArgs) -> dict[str, Any]:
    """Set a short-lived voice directive shaping outbound contact; a newer one of the same kind and
    topic replaces it. Safety notices are never held."""
    now = timezone.now()
    directive, superseded = directives.set_directive(
        principal=call.principal,
        kind=args.kind,
        topic=args.topic,
        minutes=args.minutes,
        reason=args.reason,
        now=now,
    )
    return {"ok": True, "directive": answers.directive_dict(directive, now), "superseded": superseded}


class ClearDirectiveArgs(ToolArgs):
    id: int | None = Field(None, ge=1, description="One directive.")
    kind: DirectiveKind | None = Field(None, description="All of this kind.")
    all: bool | None = Field(None, description="true: all in force.")
    actor: Any = CLAIMED_ACTOR


@tool(
    "operator_clear_directive",
    tool_class=ToolClass.WRITE,
    args=ClearDirectiveArgs,
    title="Clear directives",
    examples=[{"kind": "quiet"}, {"all": True}, {"id": 12}],
)
def clear_directive(call: ToolCall, args: ClearDirectiveArgs) -> dict[str, Any]:
    """Lift directives: exactly one of id, kind, all."""
    now = timezone.now()
    cleared = directives.clear_directives(
        principal=call.principal, directive_id=args.id, kind=args.kind, everything=bool(args.all), now=now
    )
    return {"ok": True, "cleared": [answers.directive_dict(d, now) for d in cleared], "count": len(cleared)}


class ListDirectivesArgs(ToolArgs):
    pass


@tool(
    "operator_list_directives",
    tool_class=ToolClass.READ,
    args=ListDirectivesArgs,
    title="List directives",
    examples=[{}],
)
def list_directives(call: ToolCall, args: ListDirectivesArgs) -> dict[str, Any]:
    """The directives in force, soonest expiry first."""
    now = timezone.now()
    items = [answers.directive_dict(d, now) for d in directives.active_directives(now)]
    return {"ok": True, "now": now, "directives": items, "count": len(items)}


# --- the intent path (docs/gate.md) -------------------------------------------------------------------
class ActionSpec(BaseModel):
    """The action an agent wants done. Unknown fields are refused, naming the field."""

    model_config = ConfigDict(extra="forbid")

    type: Identifier = Field(
        min_length=1,
        max_length=64,
        description="e.g. spend, purchase, subscribe, send, email, publish, delete, note, reminder, draft.",
    )
    title: str = Field(min_length=1, max_length=300, description="One line to decide on.")
    recipient: Identifier | None = Field(
        None, max_length=300, description="Who receives it; omit (or self) for the person."
    )
    amount_cents: int | None = Field(
        None,
        ge=0,
        le=MAX_AMOUNT_CENTS,
        description="Money, in cents; any positive amount needs approval.",
    )
    body: str | None = Field(None, max_length=20_000, description="Text to send, publish or keep.")
    topic: Identifier | None = Field(
        None, max_length=100, description="What it is about (topic_mute and focus match it)."
    )
    due: datetime | None = Field(None, description="When, ISO 8601 (no offset: the person's time zone).")
    changes: list[dict[str, Any]] | None = Field(
        None,
        max_length=50,
        description=(
            "A proposal's changes: exactly what operator_update_world_model / "
            "operator_reconcile_goal_model take."
        ),
    )
    proposed_against: int | None = Field(
        None, ge=0, description="A proposal: the version you read (default current)."
    )
    reason: str | None = Field(None, max_length=2000, description="A proposal: why, for the person.")

    @field_validator("amount_cents", mode="before")
    @classmethod
    def _whole_cents(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("amount_cents is a number of cents, not true/false")
        return value

    @field_validator("due", mode="before")
    @classmethod
    def _iso_text(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, str):
            raise ValueError("due is an ISO 8601 date or date-time string")
        return value


class RecordActionIntentArgs(ToolArgs):
    action: ActionSpec = Field(description="The typed action.")
    actor: Any = CLAIMED_ACTOR


@tool(
    "operator_record_action_intent",
    tool_class=ToolClass.INTENT,
    args=RecordActionIntentArgs,
    title="Record an action intent",
    examples=[
        {"action": {"type": "spend", "title": "Annual plan renewal", "amount_cents": 4900}},
        {"action": {"type": "email", "title": "Reply to the landlord", "recipient": "landlord@example.com"}},
        {"action": {"type": "reminder", "title": "Call the dentist", "due": "2026-12-01T09:00"}},
        {
            "action": {
                "type": "world_model_change",
                "title": "Home city: Lisbon",
                "changes": [{"op": "update", "kind": "identity", "key": "home_city", "value": "Lisbon"}],
                "proposed_against": 12,
                "reason": "You mentioned moving to Lisbon by voice; I could not quote it.",
            }
        },
    ],
)
def record_action_intent(call: ToolCall, args: RecordActionIntentArgs) -> dict[str, Any]:
    """The only route toward the outside world: record a typed action intent; a deterministic gate
    stamps it. allow (only self-directed, reversible types: note, reminder to the person, draft) →
    queued; requires_approval (spending, sending to others, publishing, deleting, anything
    irreversible, unknown types) → pending_approval, the person asked once (accept, edit, respond,
    ignore); deny (sharing credentials or secrets) → blocked. This call sends, spends, publishes
    nothing; only the person approves. The same call again the same day returns the same row,
    created: false, asking nothing new. Proposals: if your evidence for a high-stakes change is
    refused, use type world_model_change (or goal_model_change) with the exact changes and a reason;
    the person accepting the diff applies it, their approval the evidence."""
    action = args.action
    intent, created = lifecycle.record_intent(
        principal=call.principal,
        action=lifecycle.ActionInput(
            type=action.type,
            title=action.title,
            recipient=action.recipient,
            amount_cents=action.amount_cents,
            body=action.body,
            topic=action.topic,
            due=action.due,
            changes=action.changes,
            proposed_against=action.proposed_against,
            reason=action.reason,
        ),
    )
    return answers.intent_dict(intent, created=created)


class UpdateActionIntentArgs(ToolArgs):
    id: int = Field(ge=1, description="Intent id.")
    to: str = Field(
        min_length=1,
        max_length=32,
        description="New status.",
    )
    note: str | None = Field(None, max_length=2000, description="Why, for its history.")
    actor: Any = CLAIMED_ACTOR


@tool(
    "operator_update_action_intent",
    tool_class=ToolClass.WRITE,
    args=UpdateActionIntentArgs,
    title="Move an intent along its lifecycle",
    examples=[
        {"id": 41, "to": "cancelled", "note": "no longer needed"},
        {"id": 41, "to": "executing"},
        {"id": 41, "to": "executed", "note": "renewed, receipt filed"},
    ],
)
def update_action_intent(call: ToolCall, args: UpdateActionIntentArgs) -> dict[str, Any]:
    """Lifecycle moves only: pending_approval → cancelled | expired; approved or queued → executing
    | cancelled; executing → executed | failed. Never to approved (a human act) or rejected
    (operator_update_decision on its open decision); never out of a terminal status (executed,
    failed, rejected, cancelled, expired, blocked). An intent the executor leases is finished by it
    only (claimed_by_executor). If another call moved it first, nothing changes, as the answer says."""
    intent, was = lifecycle.transition_intent(
        principal=call.principal, intent_id=args.id, to=args.to, note=args.note
    )
    return {"ok": True, "from": was, "to": intent.status, "intent": answers.intent_dict(intent)}


class UpdateDecisionArgs(ToolArgs):
    id: int = Field(ge=1, description="Decision id (an intent's decision_id).")
    status: str = Field(
        min_length=1,
        max_length=32,
        description="pending, parked or rejected; approved is refused.",
    )
    note: str | None = Field(None, max_length=2000, description="Why.")
    actor: Any = CLAIMED_ACTOR


@tool(
    "operator_update_decision",
    tool_class=ToolClass.WRITE,
    args=UpdateDecisionArgs,
    title="Flip a decision",
    examples=[
        {"id": 7, "status": "parked", "note": "waiting for the invoice"},
        {"id": 7, "status": "rejected"},
    ],
)
def update_decision(call: ToolCall, args: UpdateDecisionArgs) -> dict[str, Any]:
    """Flip an open decision (a question put to the person). Never approves: that is a human act
    outside any tool. Rejecting an intent's decision rejects the intent. Closed decisions (approved,
    rejected, withdrawn, expired) never move. Returns `changed`."""
    decision, changed = decisions.update_decision(
        principal=call.principal, decision_id=args.id, status=args.status, note=args.note
    )
    intent = decision.intent
    return {
        "ok": True,
        "changed": changed,
        "decision": answers.decision_dict(decision),
        "intent": answers.intent_dict(intent) if intent else None,
    }
