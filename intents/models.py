"""The intents app's tables.

- Directives: the person's short-lived voice instructions (`quiet`, `topic_mute`, `focus`) that
  shape which notifications reach them and when.
- Intents: typed actions toward the outside world, stamped by the gate (`intents/gate.py`).
- Decisions: the questions put to the person (approve this intent?); approval itself is the
  human-only function in `intents/approval.py`.
- Intent events: the append-only history of every intent (who moved it, from what, to what, how).
"""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models import Q
from django.utils import timezone

from operator_site.calendar_edge import local_text
from operator_site.display import identifier_text
from operator_site.models import AppendOnlyModel, Principal


def in_force(now: Any) -> Q:
    """The rule of a directive in force at `now`: not cleared and not yet expired (an expired
    directive is never in force, swept or not). The one definition: `Directive.objects.active()`, the
    admin's "in force" column and the fast read (`intents.directives.active_directives`) all use it."""
    return Q(cleared_at__isnull=True, expires_at__gt=now)


class DirectiveQuerySet(models.QuerySet):
    def active(self, now: Any = None) -> DirectiveQuerySet:
        """The directives in force at `now` (default: now)."""
        return self.filter(in_force(now or timezone.now()))


class Directive(models.Model):
    class Kind(models.TextChoices):
        QUIET = "quiet", "quiet (hold everything but safety notices)"
        TOPIC_MUTE = "topic_mute", "mute a topic"
        FOCUS = "focus", "focus on a topic (hold everything off-topic)"

    class ClearReason(models.TextChoices):
        CLEARED = "cleared", "cleared"
        SUPERSEDED = "superseded", "superseded by a newer directive of the same kind and topic"

    TOPIC_KINDS = frozenset({"topic_mute", "focus"})

    kind = models.CharField(max_length=16, choices=Kind.choices)
    topic = models.CharField(max_length=100, blank=True, default="")
    reason = models.CharField(max_length=500, blank=True, default="")
    set_by = models.ForeignKey(Principal, on_delete=models.PROTECT, related_name="+")
    actor = models.CharField(max_length=64, help_text="The acting principal (never the caller's claim).")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    cleared_at = models.DateTimeField(null=True, blank=True)
    cleared_by = models.ForeignKey(
        Principal, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    clear_reason = models.CharField(max_length=16, choices=ClearReason.choices, blank=True, default="")

    objects = DirectiveQuerySet.as_manager()

    class Meta:
        ordering = ["expires_at", "id"]
        indexes = [
            models.Index(
                fields=["expires_at"], condition=Q(cleared_at__isnull=True), name="directive_open_by_expiry"
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(expires_at__gt=models.F("created_at")), name="directive_expires_after_set"
            ),
            models.CheckConstraint(
                condition=Q(kind="quiet", topic="") | (Q(kind__in=["topic_mute", "focus"]) & ~Q(topic="")),
                name="directive_topic_iff_topic_kind",
            ),
        ]

    def __str__(self) -> str:
        topic = f" “{identifier_text(self.topic)}”" if self.topic else ""  # as stored (operator_site.display)
        return f"{self.kind}{topic} until {local_text(self.expires_at)}"


# --- the intent path -------------------------------------------------------------------------------
class IntentStatus(models.TextChoices):
    PENDING_APPROVAL = "pending_approval", "pending approval"
    APPROVED = "approved", "approved (by a person)"
    QUEUED = "queued", "queued (allowed by the gate)"
    EXECUTING = "executing", "executing"
    EXECUTED = "executed", "executed"
    FAILED = "failed", "failed"
    REJECTED = "rejected", "rejected (by a person)"
    CANCELLED = "cancelled", "cancelled"
    EXPIRED = "expired", "expired (never decided)"
    BLOCKED = "blocked", "blocked (denied by the gate)"


TERMINAL_STATUSES = frozenset({"executed", "failed", "rejected", "cancelled", "expired", "blocked"})


class PolicyDecision(models.TextChoices):
    ALLOW = "allow", "allow"
    REQUIRES_APPROVAL = "requires_approval", "requires approval"
    DENY = "deny", "deny"


# The largest amount an intent may carry, in cents (a hundred billion in any currency): the bound of
# every door that takes one — the agent's tool, the admin's edit form, the human API's edit — and of
# the edit itself (intents.approval), well inside the 64-bit column on both databases.
MAX_AMOUNT_CENTS = 10**13


class Intent(models.Model):
    """A typed action an agent wants done in the outside world, stamped by the gate (docs/gate.md).

    The row is the whole story: the payload, the gate's verdict and reasons, where it is in its
    lifecycle, and — for an approved one — the decision that approved it. The database itself
    refuses an approved or executing intent that needed approval and has no approval decision, and
    a denied intent in any status but `blocked`.
    """

    # Not a column: the decision record_intent opened for this row, handed to intent_dict() with
    # the row it returns (so describing a new intent asks the database nothing more).
    opened_decision: Decision | None = None

    action_type = models.CharField(max_length=64)
    title = models.CharField(max_length=300)
    recipient = models.CharField(max_length=300, blank=True, default="")
    amount_cents = models.BigIntegerField(null=True, blank=True)
    body = models.TextField(blank=True, default="")
    topic = models.CharField(max_length=100, blank=True, default="", help_text="What directives match.")
    due = models.DateTimeField(null=True, blank=True)

    status = models.CharField(max_length=20, choices=IntentStatus.choices, db_index=True)
    policy_decision = models.CharField(max_length=20, choices=PolicyDecision.choices)
    policy_reasons = models.JSONField(default=list)
    policy_rules = models.JSONField(default=list, help_text="Ids of the gate rules that matched.")

    # sha1 of the escaped `type|title|recipient|amount|body`, first 32 hex (docs/gate.md,
    # "The intent row and its key").
    idempotency_key = models.CharField(max_length=32)
    local_day = models.DateField(help_text="The day (OPERATOR_TIME_ZONE) the key is unique within.")
    # sha256 of every payload field: what the person saw is what the person approves.
    payload_digest = models.CharField(max_length=64)

    approval_decision = models.ForeignKey(
        "Decision", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    approved_by = models.ForeignKey(
        Principal, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    approved_at = models.DateTimeField(null=True, blank=True)

    recorded_by = models.ForeignKey(Principal, on_delete=models.PROTECT, related_name="+")
    actor = models.CharField(max_length=64, help_text="The recording principal (never the caller's claim).")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    updated_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(
        null=True, blank=True, help_text="A pending approval expires here (OPERATOR_APPROVAL_EXPIRY_DAYS)."
    )

    # --- the executor's claim (intents/executor.py) ---------------------------------------------------
    # A claim is a lease: the executor that moved the intent to `executing` holds it until
    # `lease_expires_at`; after that another executor may reclaim it. `attempted_at` is set, once and
    # never cleared, in a committed conditional update BEFORE the brain is called: at most one
    # process ever calls the brain for an intent, and a reclaimed intent that was already attempted
    # is failed, never called again.
    lease_token = models.CharField(max_length=64, blank=True, default="", editable=False)
    lease_holder = models.CharField(max_length=200, blank=True, default="", help_text="Who holds the claim.")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    claims = models.PositiveIntegerField(default=0, help_text="How many times an executor claimed it.")
    attempted_at = models.DateTimeField(
        null=True, blank=True, help_text="When the executor called the brain for it (at most once)."
    )
    execution_key = models.CharField(
        max_length=64,
        blank=True,
        default="",
        help_text="The idempotency key sent to the brain with the call.",
    )
    execution_result = models.JSONField(
        null=True, blank=True, help_text="What the brain answered (tainted data), or why nothing was called."
    )

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["idempotency_key", "local_day"], name="intent_once_per_key_per_day"
            ),
            # The executor calls the brain only after recording the attempt, with its key.
            models.CheckConstraint(
                condition=Q(attempted_at__isnull=True) | ~Q(execution_key=""),
                name="intent_attempt_has_key",
            ),
            models.CheckConstraint(condition=Q(status__in=IntentStatus.values), name="intent_status_known"),
            models.CheckConstraint(
                condition=~Q(policy_decision="deny") | Q(status="blocked"), name="intent_denied_is_blocked"
            ),
            models.CheckConstraint(
                condition=~Q(status__in=["approved", "executing", "executed", "failed"])
                | Q(policy_decision="allow", status__in=["executing", "executed", "failed"])
                | Q(approval_decision__isnull=False),
                name="intent_acts_only_allowed_or_approved",
            ),
        ]
        indexes = [
            models.Index(fields=["status", "expires_at"], name="intent_status_expiry"),
            models.Index(
                fields=["lease_expires_at"], condition=Q(status="executing"), name="intent_executing_lease"
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {identifier_text(self.action_type)}: {self.title} [{self.status}]"

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES


class DecisionStatus(models.TextChoices):
    PENDING = "pending", "pending"
    APPROVED = "approved", "approved"
    REJECTED = "rejected", "rejected"
    PARKED = "parked", "parked (ignored for now)"
    WITHDRAWN = "withdrawn", "withdrawn (the intent was cancelled)"
    EXPIRED = "expired", "expired (the intent expired undecided)"


OPEN_DECISION_STATUSES = frozenset({"pending", "parked"})


class Decision(models.Model):
    """A question put to the person: usually "may the operator do this intent?".

    `pending` and `parked` are open; `approved` (only through the human approval function),
    `rejected`, `withdrawn` and `expired` are final.
    """

    title = models.CharField(max_length=300)
    detail = models.TextField(blank=True, default="")
    status = models.CharField(
        max_length=12, choices=DecisionStatus.choices, default=DecisionStatus.PENDING, db_index=True
    )
    intent = models.ForeignKey(
        Intent, null=True, blank=True, on_delete=models.PROTECT, related_name="decisions"
    )
    opened_by = models.ForeignKey(Principal, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    decided_by = models.ForeignKey(
        Principal, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_via = models.CharField(
        max_length=16, blank=True, default="", help_text="admin, api, mcp or expiry."
    )
    note = models.TextField(blank=True, default="")
    # The person's latest reply ("respond"): human-authored, leaves the question open.
    response = models.TextField(blank=True, default="")
    responded_by = models.ForeignKey(
        Principal, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    responded_at = models.DateTimeField(null=True, blank=True)
    # The same words as a human-authored `operator_site.Instruction` row (append-only, so a plain id is a
    # stable reference; refs on that row point back here as "intent:<id>" and "decision:<id>").
    response_instruction_id = models.BigIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["intent"], condition=Q(intent__isnull=False), name="decision_one_per_intent"
            ),
            models.CheckConstraint(
                condition=~Q(status="approved") | Q(decided_by__isnull=False),
                name="decision_approved_by_someone",
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.title} [{self.status}]"

    @property
    def open(self) -> bool:
        return self.status in OPEN_DECISION_STATUSES


class IntentEvent(AppendOnlyModel):
    """What happened to an intent and its decision, who did it and through which channel. Append-only."""

    intent = models.ForeignKey(Intent, on_delete=models.PROTECT, related_name="events")
    event = models.CharField(max_length=24)
    from_status = models.CharField(max_length=20, blank=True, default="")
    to_status = models.CharField(max_length=20, blank=True, default="")
    by = models.ForeignKey(Principal, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    via = models.CharField(max_length=16, blank=True, default="")
    note = models.TextField(blank=True, default="")
    data = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"intent #{self.intent_id}: {self.event} {self.from_status}→{self.to_status}"
