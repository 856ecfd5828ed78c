"""Who may call the operator (principals), what every call did (the audit trail), the notices to the
person, and what the person said (instructions: the only evidence a high-stakes change may rest on,
and which sentence of theirs authorised which change; the rules are `operator_site.evidence`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import models
from django.db.models import Q
from django.utils import timezone

from operator_site.calendar_edge import local_text
from operator_site.sql import insert_async_commit, insert_row


class AppendOnlyError(Exception):
    """Raised on any attempt to change or remove a row of an append-only table."""


class AppendOnlyQuerySet(models.QuerySet):
    def update(self, **kwargs: Any) -> int:
        raise AppendOnlyError(f"{self.model.__name__} is append-only: rows cannot be updated")

    def delete(self) -> tuple[int, dict[str, int]]:
        raise AppendOnlyError(f"{self.model.__name__} is append-only: rows cannot be deleted")


class AppendOnlyModel(models.Model):
    """A table you can only add to: no update or delete path through the ORM or the admin.

    Used by the audit trail here and by every other append-only record (decision log,
    observations). The admin registers these read-only as well.
    """

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        abstract = True

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.pk is not None and not self._state.adding:
            raise AppendOnlyError(f"{type(self).__name__} is append-only: rows cannot be updated")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise AppendOnlyError(f"{type(self).__name__} is append-only: rows cannot be deleted")


class PrincipalManager(models.Manager["Principal"]):
    def service(self, name: str) -> Principal:
        """The token-less agent principal one of the operator's own workers acts as (the executor,
        the observe step, scheduled ticks), created on first use. It may call no tool (`tools = []`)
        and has no token, so nobody can act as it over /mcp. A principal of that name that has a
        token, tools or is human is refused (ImproperlyConfigured), never borrowed."""
        principal, _ = self.get_or_create(name=name, defaults={"kind": Principal.Kind.AGENT, "tools": []})
        if principal.kind != Principal.Kind.AGENT or principal.token_digest or principal.tools != []:
            raise ImproperlyConfigured(
                f"Principal {name!r} exists with a token, tools or as a human; the operator's own "
                "worker of that name acts as a token-less agent. Rename that principal."
            )
        return principal


class Principal(models.Model):
    """A bearer-token identity: a human on the allowlist, or an autonomous agent.

    Only the SHA-256 digest of the token is stored. `tools` is the principal's tool allowlist
    (null: every tool). A human principal may be linked to the Django user the person logs into
    the admin with; that link is what lets a staff login act as this human.
    """

    class Kind(models.TextChoices):
        HUMAN = "human", "human"
        AGENT = "agent", "autonomous agent"

    OWNER_NAME = "owner"

    name = models.SlugField(max_length=64, unique=True)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    token_digest = models.CharField(max_length=64, unique=True, null=True, blank=True, editable=False)
    tools = models.JSONField(null=True, blank=True, help_text="Tool allowlist; empty means every tool.")
    active = models.BooleanField(default=True)
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="principal",
        help_text="The staff login of this human in the admin.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    evidence_since = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="Instructions this principal recorded before this moment are no longer evidence: set "
        "when its token is revoked or replaced (a stolen token's words stop counting).",
    )

    objects = PrincipalManager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"

    @property
    def is_human(self) -> bool:
        return self.kind == self.Kind.HUMAN

    def may_call(self, tool_name: str) -> bool:
        return self.tools is None or tool_name in self.tools


class AuditEvent(AppendOnlyModel):
    """One row per `tools/call`, whatever its outcome. Append-only.

    Holds a digest of the arguments, never the arguments themselves (they may carry text the
    person would not want copied around), and what the caller *claimed* as actor.
    """

    class Outcome(models.TextChoices):
        OK = "ok", "ok"
        REFUSED = "refused", "refused"
        ERROR = "error", "error"

    principal = models.ForeignKey(Principal, on_delete=models.PROTECT, related_name="audit_events")
    tool = models.CharField(max_length=200)
    outcome = models.CharField(max_length=8, choices=Outcome.choices)
    error_code = models.CharField(max_length=64, blank=True, default="")
    duration_ms = models.FloatField()
    args_sha256 = models.CharField(max_length=64)
    claimed_actor = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["principal", "-id"]), models.Index(fields=["tool", "-id"])]

    def __str__(self) -> str:
        when = local_text(self.created_at, "%Y-%m-%d %H:%M:%S %Z")
        return f"{when} {self.principal_id} {self.tool} {self.outcome}"

    @classmethod
    def append(
        cls,
        *,
        principal: int,
        durable: bool = True,
        insert: Callable[[AuditEvent], Any] | None = None,
        **values: Any,
    ) -> None:
        """Insert one row (`principal` is the principal's id). This runs on every tools/call, so it
        goes through the compiled-once insert (`operator_site/sql/`): the row is what
        `objects.create()` would write, without compiling the statement per call. `insert`: how
        (the dispatcher's unit of work inserts it as its transaction's last row)."""
        row = cls(principal_id=principal, **values)
        if insert is not None:
            insert(row)
        elif durable:
            insert_row(row)
        else:  # a read's row: see sql.insert_async_commit
            insert_async_commit(row)


class Notification(models.Model):
    """A notice to the person: created in the same transaction as the change it reports (an
    outbox), delivered after commit by email and/or webhook, retried until delivered, never lost.

    Safety notices (every high-stakes world- or goal-model write, every revert or restore of one,
    every intent the gate blocks) are never held by directives, never coalesced into a digest (one
    per-agent backstop on "blocked" aside: see notifications.py), never capped by anything ordinary
    notices fill, and escalated when still undelivered after a few minutes. Versions carry a one-tap
    revert link. Ordinary notices (approval requests, low-stakes goal-model edits, digests) are held
    while a directive says so, capped per kind and hour, and released when the directive lapses.
    """

    class State(models.TextChoices):
        PENDING = "pending", "pending delivery"
        SENDING = "sending", "being delivered"
        DELIVERED = "delivered", "delivered"
        HELD = "held", "held by a directive"
        WITHDRAWN = "withdrawn", "withdrawn before delivery (no longer relevant)"
        COALESCED = "coalesced", "coalesced into a digest (over the hourly cap of its kind)"
        FAILED = "failed", "undeliverable (every channel failed for a reason retrying cannot fix)"

    kind = models.CharField(max_length=48, db_index=True)
    title = models.CharField(max_length=300)
    body = models.TextField(blank=True, default="")
    topic = models.CharField(
        max_length=100, blank=True, default="", help_text="What directives match against."
    )
    safety = models.BooleanField(default=False, help_text="Safety notices are never held by directives.")
    # What the notice reports, e.g. subject_kind="world_model", subject_id=12 (the version).
    subject_kind = models.CharField(max_length=48, blank=True, default="")
    subject_id = models.BigIntegerField(null=True, blank=True)
    # At most one notice per dedupe key (e.g. one approval request per intent).
    dedupe_key = models.CharField(max_length=128, null=True, blank=True, unique=True)
    state = models.CharField(max_length=12, choices=State.choices, default=State.PENDING)
    held_reason = models.CharField(max_length=200, blank=True, default="")
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(default=timezone.now)
    claimed_until = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    channels = models.JSONField(
        default=list, blank=True, help_text="Where it was delivered (recorded as each channel takes it)."
    )
    failed_channels = models.JSONField(
        default=list, blank=True, help_text="Channels that refused it for a reason retrying cannot fix."
    )
    # Who caused it, where that bounds a flood (an agent's blocked intents): the per-source backstop.
    source = models.ForeignKey(Principal, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    # The deliverer holding the claim (a fencing token): a deliverer that lost its claim writes nothing.
    claim = models.CharField(max_length=32, blank=True, default="", editable=False)
    escalated_at = models.DateTimeField(
        null=True, blank=True, help_text="A safety notice undelivered after a few minutes: escalated."
    )
    escalation = models.TextField(blank=True, default="", help_text="What the escalation did.")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.ForeignKey(
        Principal, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    revert_used_at = models.DateTimeField(null=True, blank=True)
    revert_used_by = models.ForeignKey(
        Principal, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    # Over the hourly cap of its kind (OPERATOR_NOTIFY_CAP_PER_HOUR): the digest that carries it.
    digest = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="coalesced_notices",
        help_text="The digest this notice was coalesced into (it went over its kind's hourly cap).",
    )

    class Meta:
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["state", "next_attempt_at"], name="notification_due"),
            models.Index(fields=["subject_kind", "subject_id"], name="notification_subject"),
            # The safety notices the person has not acknowledged yet (counted by every packet and
            # goal-model write): a partial index, so the count reads those, not every notice.
            models.Index(
                fields=["id"],
                condition=Q(safety=True, acknowledged_at__isnull=True),
                name="notification_safety_open",
            ),
            # The safety notices not delivered yet: what every delivery run's escalation check and
            # the dashboard's banner look for (`notifications.overdue_safety_notices`). A partial
            # index, so that check reads those few, not every notice ever delivered.
            models.Index(
                fields=["id"],
                condition=Q(safety=True) & ~Q(state="delivered"),
                name="notification_safety_unsent",
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.kind}: {self.title}"

    @property
    def revertible(self) -> bool:
        return bool(self.subject_kind) and self.subject_id is not None and self.revert_used_at is None


class NotificationBudget(models.Model):
    """How many notices of one kind went out in one clock hour (UTC): the hourly cap's counter.

    A deliverer takes a slot with one conditional upsert (`notifications.take_slot`), so the cap
    holds across processes and hosts; a notice that finds no slot is coalesced into the hour's
    digest instead of being sent on its own (never dropped)."""

    kind = models.CharField(max_length=48)
    hour = models.BigIntegerField(help_text="Hours since the Unix epoch (UTC).")
    used = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["kind", "hour"], name="notification_budget_once")]

    def __str__(self) -> str:
        return f"{self.kind} @ hour {self.hour}: {self.used}"


class RateCounter(models.Model):
    """The per-token request rate limit's counter: requests of one principal in its current fixed
    window. One row per principal, moved forward by one atomic upsert per request
    (`operator_site/face/ratelimit.py`), so the limit holds across workers and hosts. On PostgreSQL
    the table is UNLOGGED (no WAL flush per request; a crash forgets the current window's counts)."""

    principal = models.OneToOneField(
        Principal, on_delete=models.CASCADE, primary_key=True, related_name="rate_counter"
    )
    window_no = models.BigIntegerField(help_text="Unix time // OPERATOR_RATE_WINDOW_S.")
    count = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"principal {self.principal_id}: {self.count} in window {self.window_no}"


# --- evidence: what the person said, and which sentence authorised which change ---------------------
# (the rules: `operator_site.evidence`; docs/world-model.md, "The evidence rule")
class Instruction(AppendOnlyModel):
    """Something said to the operator: an instruction or a comment. Append-only (evidence must not
    be editable after the fact). Only rows recorded by a human principal are `human_authored`, and
    only those can ever back a confirmation quote; rows an agent records are kept, never evidence."""

    class Kind(models.TextChoices):
        INSTRUCTION = "instruction", "instruction"
        COMMENT = "comment", "comment"

    text = models.TextField()
    kind = models.CharField(max_length=12, choices=Kind.choices, default=Kind.INSTRUCTION)
    channel = models.CharField(
        max_length=40, blank=True, default="", help_text="Where it was said (chat, voice, admin…)."
    )
    refs = models.JSONField(null=True, blank=True, help_text="What it refers to (task ids, links…).")
    principal = models.ForeignKey(Principal, on_delete=models.PROTECT, related_name="+")
    actor = models.CharField(max_length=64, help_text="The recording principal (never a claim).")
    human_authored = models.BooleanField(
        default=False, help_text="Recorded by a human principal: the only rows that can be evidence."
    )
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        db_table = "beliefs_instruction"  # the table it was created as (it moved from beliefs)
        ordering = ["-id"]
        indexes = [models.Index(fields=["human_authored", "created_at"], name="instruction_evidence")]

    def __str__(self) -> str:
        text = " ".join(self.text.split())
        return f"#{self.pk} {self.kind} by {self.actor}: {text[:60]}{'…' if len(text) > 60 else ''}"


class ConfirmationUse(AppendOnlyModel):
    """One sentence of the person's authorises one change, once: the row that makes it so (UNIQUE
    on instruction and sentence, so two concurrent writers cannot both spend the same sentence).
    `sentence` is the sentence's position in the instruction (`operator_site.wording.split_sentences`);
    `scope` names the model (`world_model`, `goal_model`), `subject` what the sentence authorised."""

    instruction = models.ForeignKey(Instruction, on_delete=models.PROTECT, related_name="uses")
    sentence = models.PositiveIntegerField(
        null=True, blank=True, help_text="The sentence's position in the instruction (0: the first)."
    )
    scope = models.CharField(max_length=32)
    subject = models.CharField(max_length=250)
    version = models.PositiveBigIntegerField(help_text="The version of `scope` it authorised.")
    span = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "beliefs_confirmationuse"  # the table it was created as (it moved from beliefs)
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["instruction", "sentence"], name="confirmation_once_per_sentence"
            ),
        ]

    def __str__(self) -> str:
        return (
            f"instruction #{self.instruction_id} sentence {self.sentence} → {self.scope}:{self.subject} "
            f"(v{self.version})"
        )
