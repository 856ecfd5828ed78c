"""The intents app's rules: directives, and the intent path (record, lifecycle, decisions, expiry).

Plain functions taking the acting principal explicitly. They run inside the caller's transaction
(the MCP dispatcher opens one per call; the admin wraps its actions in one), so a refusal raised
here leaves nothing written.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import math
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from intents.gate import Action, GateResult, Verdict, evaluate, normalise_type
from intents.models import (
    OPEN_DECISION_STATUSES,
    Decision,
    DecisionStatus,
    Directive,
    Intent,
    IntentEvent,
    IntentStatus,
)
from operator_site import proposals
from operator_site.errors import log_failure
from operator_site.models import Principal
from operator_site.notifications import notify, withdraw
from operator_site.refusals import Refusal
from operator_site.sql import create_row, in_force, insert_unless_conflict

logger = logging.getLogger("operator.intents")

MAX_DIRECTIVE_MINUTES = 1440  # a directive is short-lived: at most a day
DEFAULT_DIRECTIVE_MINUTES = 60


def normalise_topic(topic: str | None) -> str:
    return " ".join((topic or "").split()).lower()


def set_directive(
    *,
    principal: Principal,
    kind: str,
    topic: str | None,
    minutes: int,
    reason: str | None,
    now: datetime | None = None,
) -> tuple[Directive, list[int]]:
    """Put a directive in force for `minutes`. A newer directive of the same kind and topic
    replaces the one in force (the latest instruction wins); returns the new row and the ids it
    superseded."""
    if kind not in Directive.Kind.values:
        raise Refusal("invalid_kind", f"Unknown directive kind {kind!r}; use quiet, topic_mute or focus.")
    topic_norm = normalise_topic(topic)
    if kind in Directive.TOPIC_KINDS and not topic_norm:
        raise Refusal("topic_required", f"A {kind} directive needs a topic.")
    if kind == Directive.Kind.QUIET and topic_norm:
        raise Refusal("topic_not_allowed", "A quiet directive holds everything; it takes no topic.")
    if not 1 <= minutes <= MAX_DIRECTIVE_MINUTES:
        raise Refusal("minutes_out_of_range", f"minutes must be between 1 and {MAX_DIRECTIVE_MINUTES}.")
    now = now or timezone.now()
    in_force = Directive.objects.active(now).filter(kind=kind, topic=topic_norm)
    superseded = list(in_force.values_list("id", flat=True))
    in_force.update(cleared_at=now, cleared_by=principal, clear_reason=Directive.ClearReason.SUPERSEDED)
    directive = Directive.objects.create(
        kind=kind,
        topic=topic_norm,
        reason=(reason or "").strip(),
        set_by=principal,
        actor=principal.name,
        created_at=now,
        expires_at=now + timedelta(minutes=minutes),
    )
    return directive, superseded


def clear_directives(
    *,
    principal: Principal,
    directive_id: int | None = None,
    kind: str | None = None,
    everything: bool = False,
    now: datetime | None = None,
) -> list[Directive]:
    """Lift one directive (by id), every directive of one kind, or all of them."""
    if sum((directive_id is not None, kind is not None, everything)) != 1:
        raise Refusal("one_selector_required", "Give exactly one of id, kind, or all: true.")
    now = now or timezone.now()
    targets = Directive.objects.active(now)
    if directive_id is not None:
        targets = targets.filter(id=directive_id)
        if not targets.exists():
            raise Refusal(
                "not_found", f"No directive {directive_id} is in force (unknown, expired or cleared)."
            )
    elif kind is not None:
        targets = targets.filter(kind=kind)
    cleared = list(targets.order_by("expires_at", "id"))
    Directive.objects.filter(id__in=[d.id for d in cleared], cleared_at__isnull=True).update(
        cleared_at=now, cleared_by=principal, clear_reason=Directive.ClearReason.CLEARED
    )
    for directive in cleared:
        directive.cleared_at, directive.cleared_by, directive.clear_reason = now, principal, "cleared"
    return cleared


def active_directives(now: datetime | None = None) -> list[Directive]:
    """In force now, soonest expiry first.

    Read on every list call and (later) on every delivery decision; as a raw query it costs a fifth
    of the ORM's compiled one. `Directive.objects.active()` is the same rule for other callers.
    """
    return in_force(Directive, now or timezone.now())


def is_about(directive_topic: str, *texts: str) -> bool:
    """A notice is about a topic when the topic's words appear, whole, in its topic or title."""
    topic = normalise_topic(directive_topic)
    if not topic:
        return False
    text = " ".join(normalise_topic(t) for t in texts if t)
    return re.search(rf"(?<!\w){re.escape(topic)}(?!\w)", text) is not None


def hold_reason(*, topic: str, title: str, now: datetime | None = None) -> str | None:
    """Why the directives in force hold a (non-safety) notice about `topic`/`title`, or None.

    `quiet` holds everything; `topic_mute` holds notices about its topic; `focus` holds notices
    about anything else (several focus directives: on-topic for any of them passes).
    """
    directives = active_directives(now)
    focus_topics = []
    for directive in directives:
        if directive.kind == Directive.Kind.QUIET:
            return f"quiet until {directive.expires_at:%Y-%m-%d %H:%M} UTC"
        if directive.kind == Directive.Kind.TOPIC_MUTE and is_about(directive.topic, topic, title):
            return f"topic {directive.topic!r} is muted"
        if directive.kind == Directive.Kind.FOCUS:
            focus_topics.append(directive.topic)
    if focus_topics and not any(is_about(f, topic, title) for f in focus_topics):
        return f"focus on {', '.join(repr(f) for f in focus_topics)}"
    return None


def directive_dict(directive: Directive, now: datetime | None = None) -> dict[str, Any]:
    now = now or timezone.now()
    seconds_left = (directive.expires_at - now).total_seconds()
    return {
        "id": directive.id,
        "kind": directive.kind,
        "topic": directive.topic or None,
        "reason": directive.reason or None,
        "set_by": directive.actor,
        "created": directive.created_at,
        "expires": directive.expires_at,
        "minutes_left": max(0, math.ceil(seconds_left / 60)),
        "cleared": directive.cleared_at,
    }


# =================================================================================================
# The intent path (seed §4.5): record, transition, decide (never approve), expire, read.
# Approval is NOT here: it is the human-only library function in `intents/approval.py`, which no
# tool imports (an architecture test holds every tools module and the MCP face to that).
# =================================================================================================
APPROVAL_AFFORDANCES = ("accept", "edit", "respond", "ignore")

STATUS_BY_VERDICT = {
    Verdict.ALLOW: IntentStatus.QUEUED,
    Verdict.REQUIRES_APPROVAL: IntentStatus.PENDING_APPROVAL,
    Verdict.DENY: IntentStatus.BLOCKED,
}

# What `operator_update_action_intent` may do (any principal): lifecycle moves only.
TOOL_TRANSITIONS: dict[str, frozenset[str]] = {
    "pending_approval": frozenset({"cancelled", "expired"}),
    "approved": frozenset({"executing", "cancelled"}),
    "queued": frozenset({"executing", "cancelled"}),
    "executing": frozenset({"executed", "failed"}),
}
TOOL_TARGETS = frozenset().union(*TOOL_TRANSITIONS.values())
HUMAN_ONLY_STATUSES = frozenset({"approved", "rejected"})
APPROVAL_IS_HUMAN = (
    "Approval is a human act: only the person approves, in the admin approval queue or through the "
    "human API. No tool can approve."
)
# Rejecting is not this tool's move: it is a decision (`operator_update_decision` may reject the
# intent's open question, which rejects the intent), and a caller withdrawing its own request
# cancels it.
NOT_A_LIFECYCLE_REJECT = (
    "operator_update_action_intent does not reject: to decline an intent awaiting approval, set its "
    "open decision to rejected with operator_update_decision (the intent is rejected with it); to "
    "withdraw your own request, move the intent to cancelled."
)

# What `operator_update_decision` may set, from where.
DECISION_TOOL_MOVES: dict[str, frozenset[str]] = {
    "pending": frozenset({"pending", "parked", "rejected"}),
    "parked": frozenset({"parked", "pending", "rejected"}),
}
DECISION_TOOL_TARGETS = frozenset({"pending", "parked", "rejected"})


@dataclass(frozen=True)
class ActionInput:
    """An action as an agent describes it (the tool's `action` argument)."""

    type: str
    title: str
    recipient: str | None = None
    amount_cents: int | None = None
    body: str | None = None
    topic: str | None = None
    due: datetime | None = None
    # A proposal (`operator_site.proposals`): the changes, the version read, why.
    changes: list[dict[str, Any]] | None = None
    proposed_against: int | None = None
    reason: str | None = None


def operator_tz() -> ZoneInfo:
    return ZoneInfo(settings.OPERATOR_TIME_ZONE)


def local_text(when: datetime, fmt: str = "%Y-%m-%d %H:%M %Z") -> str:
    """`when` written in the operator's zone — or in UTC when it cannot be written there: an instant
    at the very edge of the calendar (stored before the door refused such values, or under another
    OPERATOR_TIME_ZONE) must not stop a page, a notice or a worker that shows it."""
    try:
        return when.astimezone(operator_tz()).strftime(fmt)
    except (OverflowError, ValueError):
        return when.astimezone(UTC).strftime(fmt)


def local_day(now: datetime) -> date:
    """The person's calendar day at `now` (OPERATOR_TIME_ZONE): the scope of intent de-duplication."""
    return timezone.localdate(now, timezone=operator_tz())


def _escape(field: str) -> str:
    return field.replace("\\", "\\\\").replace("|", "\\|")


def idempotency_key(
    action_type: str, title: str, recipient: str | None, amount_cents: int | None, body: str | None
) -> str:
    """First 32 hex of sha1 over `type|title|recipient|amount|body` (seed §4.5).

    `\\` and `|` inside a field are escaped, so the joined text can be split back into exactly one
    tuple of fields: two different intents never share a key. The amount is integer cents (absent:
    empty).
    """
    amount = "" if amount_cents is None else str(int(amount_cents))
    fields = [_escape(action_type), _escape(title), _escape(recipient or ""), amount, _escape(body or "")]
    return hashlib.sha1("|".join(fields).encode("utf-8"), usedforsecurity=False).hexdigest()[:32]


def payload_digest(intent: Intent) -> str:
    """Every field of the payload the person is asked about; approval must present the same digest."""
    payload = {
        "type": intent.action_type,
        "title": intent.title,
        "recipient": intent.recipient,
        "amount_cents": intent.amount_cents,
        "body": intent.body,
        "topic": intent.topic,
        "due": intent.due.astimezone(UTC).isoformat() if intent.due else None,  # same instant, same text
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def gate_action(intent: Intent) -> Action:
    return Action(
        type=intent.action_type,
        title=intent.title,
        recipient=intent.recipient,
        amount_cents=intent.amount_cents,
        body=intent.body,
    )


def stamp(intent: Intent) -> GateResult:
    """Run the gate on the intent's payload and write its verdict, key and digest onto the row."""
    result = evaluate(gate_action(intent))
    intent.policy_decision = str(result.decision)
    intent.policy_reasons = list(result.reasons)
    intent.policy_rules = list(result.rule_ids)
    intent.idempotency_key = idempotency_key(
        intent.action_type, intent.title, intent.recipient, intent.amount_cents, intent.body
    )
    intent.payload_digest = payload_digest(intent)
    return result


def log_event(
    intent: Intent,
    event: str,
    *,
    by: Principal | None,
    via: str,
    from_status: str = "",
    to_status: str = "",
    note: str = "",
    data: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> None:
    create_row(
        IntentEvent,
        intent=intent,
        event=event,
        from_status=from_status,
        to_status=to_status,
        by=by,
        via=via,
        note=note,
        data=data,
        created_at=now or timezone.now(),
    )


def _proposal_body(principal: Principal, action_type: str, action: ActionInput) -> str:
    """A proposal's body: its changes validated by the gated tool's schema and tried against the
    model now (in a savepoint, rolled back), so a proposal the person is asked about can be
    applied as it stands. Refuses what could not be."""
    extra = [
        name
        for name, value in (
            ("recipient", action.recipient),
            ("amount_cents", action.amount_cents),
            ("body", action.body),
            ("due", action.due),
        )
        if value not in (None, "")
    ]
    if extra:
        raise Refusal(
            "unexpected_argument",
            f"A {action_type} proposal carries no {extra[0]}: only title, changes, proposed_against, reason "
            "and topic.",
            field=extra[0],
        )
    proposal = proposals.make(action_type, action.changes, action.proposed_against, action.reason)
    preview = proposals.preview(proposal, principal=principal)
    if not preview["ok"]:
        raise Refusal(
            preview["error"],
            "This proposal could not be applied as it stands, so the person is not asked: "
            + preview["reason"],
        )
    if not preview["rows"]:
        raise Refusal(
            "nothing_changed",
            f"The {proposal.kind.label} already says exactly that; there is nothing to propose.",
        )
    return proposal.body()


def _clean_action(action: ActionInput, principal: Principal) -> ActionInput:
    action_type = normalise_type(action.type)
    if not action_type:
        raise Refusal("type_required", "action.type is empty; say what kind of action this is.")
    title = " ".join(action.title.split())
    if not title:
        raise Refusal("title_required", "action.title is empty; give the action a title the person can read.")
    body = action.body or ""
    if proposals.kind_of(action_type) is not None:
        body = _proposal_body(principal, action_type, action)
    elif action.changes is not None or action.proposed_against is not None or action.reason:
        raise Refusal(
            "unexpected_argument",
            "changes, proposed_against and reason belong to proposals (type world_model_change or "
            f"goal_model_change), not to a {action_type}.",
            field="changes",
        )
    due = action.due
    if due is not None and timezone.is_naive(due):
        due = timezone.make_aware(due, operator_tz())
    return ActionInput(
        type=action_type,
        title=title,
        recipient=(action.recipient or "").strip(),
        amount_cents=action.amount_cents,
        body=body,
        topic=normalise_topic(action.topic),
        due=due,
    )


# No savepoint inside a caller's transaction (the dispatcher's): a refusal or error rolls the
# caller's whole transaction back anyway, and a savepoint is two more statements on every intent.
@transaction.atomic(savepoint=False)
def record_intent(
    *, principal: Principal, action: ActionInput, now: datetime | None = None
) -> tuple[Intent, bool]:
    """Record an action intent, stamped by the gate; returns (intent, created).

    The identical action (same key) on the same local day returns the existing row and
    `created=False`, and sends nothing — also when identical calls race: the unique (key, day)
    constraint decides the insert (`ON CONFLICT DO NOTHING`), and the loser reads the winner's row.
    A new intent that needs approval gets its decision row and one approval request notice.
    """
    now = now or timezone.now()
    action = _clean_action(action, principal)
    key = idempotency_key(action.type, action.title, action.recipient, action.amount_cents, action.body)
    day = local_day(now)
    # No look-up first: the unique (key, day) constraint decides, and only a duplicate reads the
    # existing row (one query fewer for every new intent).

    intent = Intent(
        action_type=action.type,
        title=action.title,
        recipient=action.recipient or "",
        amount_cents=action.amount_cents,
        body=action.body or "",
        topic=action.topic or "",
        due=action.due,
        local_day=day,
        recorded_by=principal,
        actor=principal.name,
        created_at=now,
        updated_at=now,
    )
    result = stamp(intent)
    intent.status = STATUS_BY_VERDICT[result.decision]
    if intent.status == IntentStatus.PENDING_APPROVAL:
        intent.expires_at = now + timedelta(days=settings.OPERATOR_APPROVAL_EXPIRY_DAYS)
    if not insert_unless_conflict(intent, "idempotency_key", "local_day"):
        return Intent.objects.get(idempotency_key=key, local_day=day), False

    log_event(intent, "recorded", by=principal, via="mcp", to_status=intent.status, now=now)
    if intent.status == IntentStatus.PENDING_APPROVAL:
        decision = create_row(
            Decision,
            title=f"Approve: {intent.title}"[:300],
            detail=describe_intent(intent),
            intent=intent,
            opened_by=principal,
            created_at=now,
            updated_at=now,
        )
        notify_approval_request(intent, decision)
        intent.opened_decision = decision
    elif intent.status == IntentStatus.BLOCKED:
        notify(
            kind="intent_blocked",
            title=f"Blocked: {principal.name} asked to {intent.action_type}: {intent.title}"[:300],
            body=describe_intent(intent) + "\n\nThe gate denied it; nothing will be done.",
            topic=intent.topic,
            dedupe_key=f"intent-blocked:{intent.id}",
            safety=True,  # never held by a directive: the agent it is about could set one
            source=principal,  # the per-agent backstop (operator_site.notifications)
        )
    return intent, True


def format_amount(amount_cents: int | None) -> str:
    if amount_cents is None:
        return ""
    return f"{amount_cents // 100:,}.{amount_cents % 100:02d} ({amount_cents} cents)"


def describe_intent(intent: Intent) -> str:
    """The payload in plain text, as the person is shown it."""
    lines = [f"{intent.actor} asks to {intent.action_type}: {intent.title}"]
    if intent.recipient:
        lines.append(f"To: {intent.recipient}")
    if intent.amount_cents is not None:
        lines.append(f"Amount: {format_amount(intent.amount_cents)}")
    if intent.due:
        lines.append(f"Due: {local_text(intent.due)}")
    if intent.topic:
        lines.append(f"Topic: {intent.topic}")
    if proposals.kind_of(intent.action_type) is not None:
        lines += ["", *proposals.describe(intent.action_type, intent.body)]
    elif intent.body:
        lines += ["", intent.body]
    lines += ["", "Why it needs you:", *(f"- {reason}" for reason in intent.policy_reasons)]
    return "\n".join(lines)


def decide_url(intent: Intent) -> str:
    return settings.OPERATOR_PUBLIC_URL + reverse("admin:intents_intent_decide", args=[intent.pk])


def notify_approval_request(intent: Intent, decision: Decision) -> None:
    """One approval request per intent (dedupe key `intent:<id>`), held and released by directives."""
    url = decide_url(intent)
    choices = "\n".join(f"- {affordance}: {url}{affordance}/" for affordance in APPROVAL_AFFORDANCES)
    expires = local_text(intent.expires_at) if intent.expires_at else None
    body = f"{describe_intent(intent)}\n\nYour choices (each opens a confirmation page):\n{choices}\n" + (
        f"\nUnless you decide, it expires {expires}.\n" if expires else ""
    )
    notify(
        kind="approval_request",
        title=f"Approve: {intent.title}",
        body=body,
        topic=intent.topic,
        subject_kind="",  # not revertible: nothing has happened yet
        dedupe_key=f"intent:{intent.id}",
    )


def _get_intent(intent_id: int) -> Intent:
    intent = Intent.objects.filter(id=intent_id).first()
    if intent is None:
        raise Refusal("not_found", f"There is no intent {intent_id}.")
    return intent


def close_decision(
    intent: Intent, status: str, *, by: Principal | None, via: str, note: str = "", now: datetime
) -> None:
    """The intent left pending_approval without a person deciding: its open question closes too."""
    Decision.objects.filter(intent=intent, status__in=OPEN_DECISION_STATUSES).update(
        status=status, updated_at=now, decided_by=by, decided_at=now, decided_via=via, note=note
    )


def withdraw_approval_notice(intent_id: int, status: str) -> None:
    """The question is settled (approved, rejected, cancelled, expired): an approval request that a
    directive still holds, or that has not gone out yet, is withdrawn instead of delivered late."""
    withdraw(dedupe_key=f"intent:{intent_id}", reason=f"the intent is now {status}")


def move_intent(
    intent: Intent,
    to: str,
    *,
    by: Principal | None,
    via: str,
    note: str = "",
    now: datetime,
    where: dict[str, Any] | None = None,
    data: dict[str, Any] | None = None,
    **fields: Any,
) -> Intent:
    """Compare-and-set: move `intent` from the status it was read in to `to`, or refuse if it moved.

    `where` adds conditions to the compare-and-set (the executor's lease token); `data` goes on the
    history row (the executor's downstream result)."""
    was = intent.status
    moved = Intent.objects.filter(id=intent.id, status=was, **(where or {})).update(
        status=to, updated_at=now, **fields
    )
    if not moved:
        current = Intent.objects.filter(id=intent.id).values_list("status", flat=True).first()
        if current == was:  # the status held but an extra condition (`where`) did not
            raise Refusal(
                "conflict",
                f"Intent {intent.id} is still {was}, but it changed hands while this call ran; nothing "
                "was changed.",
                status=current,
            )
        raise Refusal(
            "conflict",
            f"Intent {intent.id} moved from {was} to {current} while this call ran; nothing was changed. "
            "Re-read it before trying again.",
            status=current,
        )
    if was == IntentStatus.PENDING_APPROVAL:
        withdraw_approval_notice(intent.id, to)
    if was == IntentStatus.PENDING_APPROVAL and to in {"cancelled", "expired"}:
        close_decision(
            intent,
            DecisionStatus.WITHDRAWN if to == "cancelled" else DecisionStatus.EXPIRED,
            by=by,
            via=via,
            note=note,
            now=now,
        )
    log_event(
        intent, "transition", by=by, via=via, from_status=was, to_status=to, note=note, data=data, now=now
    )
    intent.refresh_from_db()
    return intent


@transaction.atomic
def transition_intent(
    *,
    principal: Principal,
    intent_id: int,
    to: str,
    note: str | None = None,
    now: datetime | None = None,
    via: str = "mcp",
    where: dict[str, Any] | None = None,
    fields: dict[str, Any] | None = None,
    data: dict[str, Any] | None = None,
) -> tuple[Intent, str]:
    """A lifecycle move by `operator_update_action_intent`; returns (intent, previous status).

    Never to approved or rejected (a human act), never out of a terminal status, only the legal
    moves of `TOOL_TRANSITIONS`, and conditional so two concurrent moves cannot both win.
    The executor passes `where` (extra compare-and-set conditions: its lease), `fields` (columns
    written with the move: the lease, the result) and `data` (kept on the history row).
    """
    now = now or timezone.now()
    if to == "rejected":
        raise Refusal("use_the_decision_tool", NOT_A_LIFECYCLE_REJECT)
    if to in HUMAN_ONLY_STATUSES:
        raise Refusal("approval_is_human", APPROVAL_IS_HUMAN)
    if to not in TOOL_TARGETS:
        raise Refusal(
            "invalid_status",
            f"{to!r} is not a status this tool sets; use one of {', '.join(sorted(TOOL_TARGETS))}.",
        )
    intent = _get_intent(intent_id)
    if intent.terminal:
        raise Refusal(
            "terminal_status",
            f"Intent {intent.id} is {intent.status}, a terminal status: it never moves again.",
            status=intent.status,
        )
    legal = TOOL_TRANSITIONS.get(intent.status, frozenset())
    if to not in legal:
        raise Refusal(
            "illegal_transition",
            f"Intent {intent.id} is {intent.status}; from there it can move to "
            f"{', '.join(sorted(legal)) or 'nothing by this tool'}, not {to}.",
            status=intent.status,
        )
    was = intent.status
    leased = was == IntentStatus.EXECUTING and intent.lease_token
    if leased and not hmac.compare_digest(str((where or {}).get("lease_token") or ""), intent.lease_token):
        # Being carried out by the executor (intents/executor.py): only the holder of the lease
        # finishes it — an agent saying `executed` or `failed` now would speak for a brain call it
        # did not make. An intent an agent moved to `executing` itself holds no lease.
        raise Refusal(
            "claimed_by_executor",
            f"Intent {intent.id} is being carried out by the executor ({intent.lease_holder or 'a holder'}"
            f", lease until {intent.lease_expires_at:%Y-%m-%d %H:%M:%S} UTC); only the executor "
            "finishes it. Nothing was changed.",
            status=was,
            lease_holder=intent.lease_holder,
            lease_expires_at=intent.lease_expires_at,
        )
    if was == IntentStatus.EXECUTING and where is None:
        # ...and the move itself checks there is still no lease (an executor cannot claim an
        # agent's `executing` intent today; this keeps it so if that ever changes).
        where = {"lease_token": ""}
    intent = move_intent(
        intent,
        to,
        by=principal,
        via=via,
        note=(note or "").strip(),
        now=now,
        where=where,
        data=data,
        **(fields or {}),
    )
    return intent, was


@transaction.atomic
def update_decision(
    *,
    principal: Principal,
    decision_id: int,
    status: str,
    note: str | None = None,
    now: datetime | None = None,
) -> tuple[Decision, bool]:
    """`operator_update_decision`: to pending, parked or rejected; never approved. Returns (decision,
    changed). Rejecting a decision about an intent rejects the intent (conditionally)."""
    now = now or timezone.now()
    if status == DecisionStatus.APPROVED:
        raise Refusal("approval_is_human", APPROVAL_IS_HUMAN)
    if status not in DECISION_TOOL_TARGETS:
        raise Refusal(
            "invalid_status",
            f"{status!r} is not a status this tool sets; use pending, parked or rejected.",
        )
    decision = Decision.objects.filter(id=decision_id).first()
    if decision is None:
        raise Refusal("not_found", f"There is no decision {decision_id}.")
    if decision.intent_id is not None:
        # Lock order on the intent path: the intent's row first, then its decision's (as every
        # other writer does), then read the decision again as it is now.
        Intent.objects.select_for_update().filter(id=decision.intent_id).first()
        decision = Decision.objects.select_related("intent").get(id=decision_id)
    legal = DECISION_TOOL_MOVES.get(decision.status)
    if legal is None:
        raise Refusal(
            "decision_closed",
            f"Decision {decision.id} is {decision.status}; a closed decision never moves again.",
            status=decision.status,
        )
    if status == decision.status:
        return decision, False
    intent = decision.intent
    if (
        status == DecisionStatus.REJECTED
        and intent is not None
        and intent.status != IntentStatus.PENDING_APPROVAL
    ):
        raise Refusal(
            "intent_not_pending",
            f"Intent {intent.id} is {intent.status}, not pending approval: it cannot be rejected.",
            status=intent.status,
        )
    note = (note or "").strip()
    fields: dict[str, Any] = {"status": status, "updated_at": now}
    if note:
        fields["note"] = note
    if status == DecisionStatus.REJECTED:
        fields.update(decided_by=principal, decided_at=now, decided_via="mcp")
    if not Decision.objects.filter(id=decision.id, status=decision.status).update(**fields):
        raise Refusal(
            "conflict",
            f"Decision {decision.id} changed while this call ran; nothing was changed. Re-read it first.",
        )
    if intent is not None:
        if status == DecisionStatus.REJECTED:
            move_intent(intent, IntentStatus.REJECTED, by=principal, via="mcp", note=note, now=now)
        else:
            log_event(
                intent,
                f"decision_{status}",
                by=principal,
                via="mcp",
                from_status=decision.status,
                to_status=status,
                note=note,
                now=now,
            )
    decision.refresh_from_db()
    return decision, True


def expire_pending(now: datetime | None = None) -> list[int]:
    """Mark every pending approval past its expiry `expired` (its decision too). Returns their ids.

    Ticks and `manage.py operator_expire` call it; each intent moves in its own transaction with a
    conditional update, so a person approving at the same moment and the sweep cannot both win.
    """
    now = now or timezone.now()
    expired = []
    due = Intent.objects.filter(status=IntentStatus.PENDING_APPROVAL, expires_at__lte=now).order_by("id")
    for intent in due:
        try:
            with transaction.atomic():
                move_intent(
                    intent, IntentStatus.EXPIRED, by=None, via="expiry", note="expired undecided", now=now
                )
        except Refusal:
            continue  # decided (or cancelled) meanwhile
        except Exception:
            # One intent that cannot be expired (a poisoned row) stays as it is, logged; the sweep
            # goes on (and an expired approval is never approvable, swept or not).
            log_failure(logger, "expiring intent %s", intent.id)
            continue
        expired.append(intent.id)
    return expired


# --- reads, for the tools and for other apps (context packet, state, history) ----------------------
def pending_approvals(limit: int = 50) -> list[Intent]:
    """Intents awaiting the person, oldest first (what the context packet shows)."""
    return list(
        Intent.objects.filter(status=IntentStatus.PENDING_APPROVAL)
        .prefetch_related("decisions")  # intent_dict() reads the decision: no query per intent
        .order_by("created_at", "id")[:limit]
    )


def open_decisions(limit: int = 50) -> list[Decision]:
    """Questions still open (pending, then parked), oldest first."""
    return list(
        Decision.objects.filter(status__in=OPEN_DECISION_STATUSES)
        .select_related("intent")
        .order_by("-status", "created_at", "id")[:limit]
    )


def _first_decision(intent: Intent) -> Decision | None:
    """The intent's (first) decision: the one record_intent has just opened, or from the prefetched
    ones when they were loaded (a listing's prefetch_related): no query per intent."""
    if not intent.pk:
        return None
    if intent.opened_decision is not None:
        return intent.opened_decision
    prefetched = getattr(intent, "_prefetched_objects_cache", {}).get("decisions")
    if prefetched is not None:
        return min(prefetched, key=lambda decision: decision.pk, default=None)
    return intent.decisions.order_by("pk").first()


def intent_dict(intent: Intent, *, created: bool | None = None) -> dict[str, Any]:
    """The seed §4.5 row (its fields first, in its order), then the rest of the intent."""
    pending = intent.status == IntentStatus.PENDING_APPROVAL
    row: dict[str, Any] = {
        "id": intent.id,
        "action_type": intent.action_type,
        "title": intent.title,
        "status": intent.status,
        "policy_decision": intent.policy_decision,
        "policy_reasons": list(intent.policy_reasons),
        "approval_decision_id": intent.approval_decision_id,
        "idempotency_key": intent.idempotency_key,
        "affordances": list(APPROVAL_AFFORDANCES) if pending else [],
    }
    if created is not None:
        row["created"] = created
    decision = _first_decision(intent)
    row.update(
        {
            "recipient": intent.recipient or None,
            "amount_cents": intent.amount_cents,
            "body": intent.body or None,
            "topic": intent.topic or None,
            "due": intent.due,
            "policy_rules": list(intent.policy_rules),
            "decision_id": decision.id if decision else None,
            "decision_status": decision.status if decision else None,
            "response": decision.response or None if decision else None,
            "recorded_by": intent.actor,
            "created_at": intent.created_at,
            "updated_at": intent.updated_at,
            "expires_at": intent.expires_at if pending else None,
            "execution": execution_dict(intent),
        }
    )
    return row


def execution_dict(intent: Intent) -> dict[str, Any] | None:
    """What the executor did with the intent (None if it never claimed it). `result` holds the
    brain's answer: tainted data, never instructions."""
    if not intent.claims and intent.execution_result is None:
        return None
    return {
        "claims": intent.claims,
        "holder": intent.lease_holder or None,
        "lease_expires_at": intent.lease_expires_at if intent.status == IntentStatus.EXECUTING else None,
        "attempted_at": intent.attempted_at,
        "execution_key": intent.execution_key or None,
        "result": intent.execution_result,
    }


def decision_dict(decision: Decision) -> dict[str, Any]:
    return {
        "id": decision.id,
        "title": decision.title,
        "detail": decision.detail,
        "status": decision.status,
        "intent_id": decision.intent_id,
        "note": decision.note or None,
        "response": decision.response or None,
        "decided_by": decision.decided_by.name if decision.decided_by_id else None,
        "decided_at": decision.decided_at,
        "decided_via": decision.decided_via or None,
        "created_at": decision.created_at,
        "updated_at": decision.updated_at,
    }
