"""The intent path: record (stamped by the gate), move through the lifecycle, expire, read.

Approval is not here: it is the human-only library function in `intents/approval.py`, which no
tool imports (intents/tests/test_architecture.py holds every tools module and the MCP face to that).
docs/gate.md describes the gate, the intent row and its key, and the lifecycle.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from intents.answers import APPROVAL_AFFORDANCES, with_decisions
from intents.directives import normalise_topic
from intents.gate import Action, GateResult, Verdict, evaluate, normalise_type
from intents.models import (
    OPEN_DECISION_STATUSES,
    Decision,
    DecisionStatus,
    Intent,
    IntentEvent,
    IntentStatus,
)
from operator_site import proposals
from operator_site.calendar_edge import local_text
from operator_site.display import (
    identifier_text,
    lookalike_tokens,
    right_to_left_tokens,
    shown_start,
    visible_text,
)
from operator_site.errors import log_failure
from operator_site.models import Principal
from operator_site.notifications import notify, withdraw
from operator_site.refusals import Refusal
from operator_site.sql import insert_unless_conflict, insert_with_commit

logger = logging.getLogger("operator.intents")

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


def _escape(field: str) -> str:
    return field.replace("\\", "\\\\").replace("|", "\\|")


def idempotency_key(
    action_type: str, title: str, recipient: str | None, amount_cents: int | None, body: str | None
) -> str:
    """First 32 hex of sha1 over `type|title|recipient|amount|body` (docs/gate.md, "The intent row
    and its key").

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
    """Append a row to the intent's history. Nothing in a call reads its history back (the admin
    shows it), so on PostgreSQL the row travels with the call's last message
    (`sql.insert_with_commit`), in the same transaction."""
    insert_with_commit(
        IntentEvent(
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
        due = timezone.make_aware(due)
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
    day = timezone.localdate(now)
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
    decision = None
    if intent.status == IntentStatus.PENDING_APPROVAL:
        # The question put to the person, written with the intent (one statement on PostgreSQL)
        # and only if the intent is new.
        decision = Decision(
            title=f"Approve: {intent.title}"[:300],
            detail=describe_intent(intent),
            opened_by=principal,
            created_at=now,
            updated_at=now,
        )
    child = None if decision is None else (decision, "intent")
    if not insert_unless_conflict(intent, "idempotency_key", "local_day", child=child):
        return Intent.objects.get(idempotency_key=key, local_day=day), False

    log_event(intent, "recorded", by=principal, via="mcp", to_status=intent.status, now=now)
    if decision is not None:
        notify_approval_request(intent, decision)
        intent.opened_decision = decision
    elif intent.status == IntentStatus.BLOCKED:
        notify(
            kind="intent_blocked",
            title=f"Blocked: {principal.name} asked to {intent.action_type}: {intent.title}"[:300],
            body=describe_intent(intent, then=["", "The gate denied it; nothing will be done."]),
            topic=intent.topic,
            dedupe_key=f"intent-blocked:{intent.id}",
            safety=True,  # never held by a directive: the agent it is about could set one
            source=principal,  # the per-agent backstop (operator_site.notifications)
            with_commit=True,  # about the intent this call created: no notice has its key yet
        )
    return intent, True


def format_amount(amount_cents: int | None) -> str:
    if amount_cents is None:
        return ""
    return f"{amount_cents // 100:,}.{amount_cents % 100:02d} ({amount_cents} cents)"


# Characters and lines of what an agent wrote (an intent's body, a proposal) that a notice quotes; the
# approval page shows all of it.
QUOTED_SHOWN = 2_000
QUOTED_LINES = 40


def describe_intent(intent: Intent, *, then: Sequence[str] = ()) -> str:
    """The payload in plain text, as a notice shows it to the person.

    The operator's own lines come first — who asks, what, to whom, how much, when, why it needs the
    person — then ``then`` (a notice's own lines: the choices and their links, the expiry), and last
    what the agent wrote (the body, or a proposal's changes and reason), every line quoted with "> "
    and bounded to QUOTED_SHOWN characters. So nothing an agent writes can pose as the operator's own
    lines (a forged "Your choices" with links elsewhere), or push them out of sight."""
    title = visible_text(intent.title, single_line=True)
    lines = [f"{intent.actor} asks to {identifier_text(intent.action_type)}: {title}"]
    if intent.recipient:
        lines.append(f"To: {identifier_text(intent.recipient)}")
        shown_as = right_to_left_tokens(intent.recipient)
        if shown_as:
            lines.append(
                f"  (it mixes right-to-left and left-to-right characters: its right-to-left ones are shown "
                f"as {', '.join(shown_as)}, so it reads in the order it is stored)"
            )
        passes_for = lookalike_tokens(intent.recipient)
        if passes_for:
            lines.append(
                f"  (it is not the Latin name it reads as: a word of it is written in another "
                f"script's letters, shown as {', '.join(passes_for)})"
            )
    if intent.amount_cents is not None:
        lines.append(f"Amount: {format_amount(intent.amount_cents)}")
    if intent.due:
        lines.append(f"Due: {local_text(intent.due)}")
    if intent.topic:
        lines.append(f"Topic: {identifier_text(intent.topic)}")
    lines += ["", "Why it needs you:", *(f"- {reason}" for reason in intent.policy_reasons)]
    lines += then
    if proposals.kind_of(intent.action_type) is not None:
        written = "\n".join(proposals.describe(intent.action_type, intent.body))
        lines += ["", f"The proposal {intent.actor} wrote, quoted:", *quoted(written)]
    elif intent.body:
        lines += ["", f"The text {intent.actor} wrote ({len(intent.body):,} characters), quoted:"]
        lines += quoted(intent.body)
    return "\n".join(lines)


def quoted(text: str, *, limit: int = QUOTED_SHOWN, lines: int = QUOTED_LINES) -> list[str]:
    """An agent's text as quoted lines ("> "), cut where it would pass `limit` characters as a person
    is shown it (each hidden character as its token, which every surface puts in its place) or
    `lines` lines, with a note of how much more there is. The text itself stays as written: the
    surfaces mark its hidden characters and say that they do.
    The other characters a reader might take for a line break (a lone CR, the form feed, NEL, the
    Unicode line separator...) never reach one: every surface shows them as tokens
    (operator_site.display), so they cannot let the text out of the quote either."""
    text = text.replace("\r\n", "\n")
    keep = len(shown_start(text, limit))
    cut = text[:keep].split("\n")[:lines]
    rest = len(text) - (sum(len(line) + 1 for line in cut) - 1)
    out = [f"> {line}" for line in cut]
    if rest > 0:
        out.append(f"> … {rest:,} more characters: the whole text is on the approval page.")
    return out


def decide_url(intent: Intent) -> str:
    return settings.OPERATOR_PUBLIC_URL + reverse("admin:intents_intent_decide", args=[intent.pk])


def notify_approval_request(intent: Intent, decision: Decision) -> None:
    """One approval request per intent (dedupe key `intent:<id>`), held and released by directives."""
    url = decide_url(intent)
    choices = [f"- {affordance}: {url}{affordance}/" for affordance in APPROVAL_AFFORDANCES]
    then = ["", "Your choices (each opens a confirmation page):", *choices]
    if intent.expires_at:
        then += ["", f"Unless you decide, it expires {local_text(intent.expires_at)}."]
    body = describe_intent(intent, then=then) + "\n"
    notify(
        kind="approval_request",
        title=f"Approve: {intent.title}",
        body=body,
        topic=intent.topic,
        subject_kind="",  # not revertible: nothing has happened yet
        dedupe_key=f"intent:{intent.id}",
        # Asked once, when the intent is recorded (record_intent): no notice has its key yet.
        with_commit=True,
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


def pending_approvals(limit: int = 50) -> list[Intent]:
    """Intents awaiting the person, oldest first (what the context packet shows)."""
    return list(
        Intent.objects.filter(status=IntentStatus.PENDING_APPROVAL)
        .prefetch_related(with_decisions())  # intent_dict() reads the decision: no query per intent
        .order_by("created_at", "id")[:limit]
    )
