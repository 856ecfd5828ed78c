"""The runs app's tables: runs (the single-running lock and its lease), operator days, and the day's
record (progress entries, observations). At most one run is `running` (the partial unique index
`run_single_running`); an observation is tainted at the sink (the model and the database refuse any
other value). docs/runs-and-ticks.md explains the lock, the day and its record.
"""

from __future__ import annotations

from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.db.models import Q
from django.utils import timezone

from operator_site.calendar_edge import local_text
from operator_site.models import AppendOnlyModel, Principal

MIN_STALE_AFTER_S = 30
MAX_STALE_AFTER_S = 86_400
DEFAULT_STALE_AFTER_S = 900


class OperatorDay(models.Model):
    class State(models.TextChoices):
        OPEN = "open", "open"
        CLOSED = "closed", "closed"

    date = models.DateField(unique=True, help_text="The local date (OPERATOR_TIME_ZONE).")
    state = models.CharField(max_length=8, choices=State.choices, default=State.OPEN)
    opened_at = models.DateTimeField(default=timezone.now)
    opened_by = models.ForeignKey(
        Principal, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    opened_via = models.CharField(
        max_length=64, blank=True, default="", help_text="What opened it: the morning tick or a first write."
    )
    closed_at = models.DateTimeField(null=True, blank=True)
    closed_by = models.ForeignKey(
        Principal, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    summary = models.JSONField(default=dict, blank=True, help_text="The night tick's summary of the day.")

    class Meta:
        ordering = ["-date"]
        constraints = [
            models.CheckConstraint(
                condition=Q(state="open", closed_at__isnull=True)
                | Q(state="closed", closed_at__isnull=False),
                name="operator_day_closed_iff_closed_at",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.date:%Y-%m-%d} ({self.state})"


class Run(models.Model):
    class Status(models.TextChoices):
        RUNNING = "running", "running"
        OK = "ok", "ok"
        ERROR = "error", "error"
        SKIPPED = "skipped", "skipped"
        CANCELLED = "cancelled", "cancelled"
        STALE = "stale", "stale"

    FINISH_STATUSES = ("ok", "error", "skipped", "cancelled", "stale")

    kind = models.CharField(max_length=64, default="run", help_text="What the run is, e.g. tick:morning.")
    holder = models.ForeignKey(Principal, on_delete=models.PROTECT, related_name="runs")
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.RUNNING)
    note = models.CharField(max_length=500, blank=True, default="")
    progress = models.CharField(
        max_length=1000, blank=True, default="", help_text="The latest progress sent with a heartbeat."
    )
    summary = models.TextField(blank=True, default="", help_text="Given when the run finished.")
    started_at = models.DateTimeField(default=timezone.now)
    last_heartbeat_at = models.DateTimeField()
    heartbeats = models.PositiveIntegerField(default=0)
    stale_after_s = models.PositiveIntegerField(default=DEFAULT_STALE_AFTER_S)
    # The fencing token is shown once, to the starter; only its digest is kept.
    token_digest = models.CharField(max_length=64, editable=False)
    ended_at = models.DateTimeField(null=True, blank=True)
    ended_by = models.ForeignKey(
        Principal,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="Who closed it: the holder (finish) or the principal whose start recovered it (stale).",
    )
    end_reason = models.CharField(max_length=300, blank=True, default="")
    taken_over_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="took_over"
    )
    day = models.ForeignKey(OperatorDay, on_delete=models.PROTECT, related_name="runs")

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["day", "-id"], name="run_by_day")]
        constraints = [
            # The single-running lock: a partial unique index over the one status value. Two
            # concurrent starts both try to insert a `running` row; the database lets exactly one in.
            models.UniqueConstraint(
                fields=["status"], condition=Q(status="running"), name="run_single_running"
            ),
            models.CheckConstraint(
                condition=Q(stale_after_s__gte=MIN_STALE_AFTER_S, stale_after_s__lte=MAX_STALE_AFTER_S),
                name="run_stale_after_in_bounds",
            ),
            models.CheckConstraint(
                condition=Q(status="running", ended_at__isnull=True)
                | (~Q(status="running") & Q(ended_at__isnull=False)),
                name="run_ended_iff_not_running",
            ),
        ]

    def __str__(self) -> str:
        return f"run #{self.pk} {self.kind} ({self.status})"

    def overdue_s(self, now: Any = None) -> float:
        """Seconds past the stale threshold (negative: still within it)."""
        now = now or timezone.now()
        return (now - self.last_heartbeat_at).total_seconds() - self.stale_after_s


class ProgressEntry(models.Model):
    class Outcome(models.TextChoices):
        DONE = "done", "done"
        PARTIAL = "partial", "partial"
        BLOCKED = "blocked", "blocked"
        FAILED = "failed", "failed"

    day = models.ForeignKey(OperatorDay, on_delete=models.PROTECT, related_name="progress")
    run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.PROTECT, related_name="progress_entries"
    )
    tick = models.CharField(max_length=64, blank=True, default="", help_text="The tick it belongs to.")
    summary = models.TextField()
    outcome = models.CharField(max_length=8, choices=Outcome.choices)
    tried = models.JSONField(default=list, blank=True)
    failed = models.JSONField(default=list, blank=True)
    recorded_by = models.ForeignKey(Principal, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-id"]
        verbose_name_plural = "progress entries"
        indexes = [models.Index(fields=["day", "-id"], name="progress_by_day")]

    def __str__(self) -> str:
        return f"{local_text(self.created_at)} {self.outcome}: {self.summary[:60]}"


class Observation(AppendOnlyModel):
    """Untrusted data, whoever recorded it: never evidence, never an instruction."""

    class Kind(models.TextChoices):
        WORLD = "world", "world"
        SELF = "self", "self"

    day = models.ForeignKey(OperatorDay, on_delete=models.PROTECT, related_name="observations")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    summary = models.TextField()
    source = models.CharField(max_length=200, blank=True, default="")
    data = models.JSONField(null=True, blank=True)
    # Tainted at the sink, always: forced in save(), refused otherwise by a check constraint.
    tainted = models.BooleanField(default=True, editable=False)
    # What the caller said about taint, if anything (kept for audit; it changes nothing).
    claimed_tainted = models.JSONField(null=True, blank=True, editable=False)
    recorded_by = models.ForeignKey(Principal, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["day", "-id"], name="observation_by_day")]
        constraints = [models.CheckConstraint(condition=Q(tainted=True), name="observation_always_tainted")]

    def __str__(self) -> str:
        return f"{local_text(self.created_at)} {self.kind} (tainted): {self.summary[:60]}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.tainted = True
        super().save(*args, **kwargs)


class Tick(AppendOnlyModel):
    """One tick that ran (morning, start, check-in, night): when, for which day, by whom, under which
    run, and what it did or found. `status` ticks write nothing, so they leave no row. At most one
    morning and one night tick per day (a repeated one changes nothing and records nothing)."""

    class Mode(models.TextChoices):
        MORNING = "morning", "morning"
        START = "start", "start"
        CHECK_IN = "check-in", "check-in"
        NIGHT = "night", "night"

    ONCE_PER_DAY = ("morning", "night")

    day = models.ForeignKey(OperatorDay, on_delete=models.PROTECT, related_name="ticks")
    mode = models.CharField(max_length=8, choices=Mode.choices)
    principal = models.ForeignKey(Principal, on_delete=models.PROTECT, related_name="+")
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.PROTECT, related_name="ticks")
    progress = models.OneToOneField(
        ProgressEntry,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="tick_record",
        help_text="The progress entry a start or check-in tick recorded.",
    )
    at = models.DateTimeField(default=timezone.now)
    since = models.DateTimeField(
        null=True, blank=True, help_text="Start of the window its 'what changed' covers (the previous tick)."
    )
    report = models.JSONField(
        default=dict, blank=True, encoder=DjangoJSONEncoder, help_text="What the tick did or found (bounded)."
    )

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["day", "-id"], name="tick_by_day")]
        constraints = [
            models.UniqueConstraint(
                fields=["day", "mode"], condition=Q(mode__in=["morning", "night"]), name="tick_once_per_day"
            ),
            models.CheckConstraint(
                condition=Q(mode__in=["morning", "start", "check-in", "night"]), name="tick_mode_known"
            ),
        ]

    def __str__(self) -> str:
        return f"{local_text(self.at)} {self.mode} tick"
