"""The goals app: the board of tasks agents keep and the append-only log of strategic decisions.
(The goal model — goals, priorities, projects under the evidence gate — joins them here.)"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

from operator_site.models import AppendOnlyModel, Principal


class Task(models.Model):
    class Status(models.TextChoices):
        TODO = "todo", "to do"
        DOING = "doing", "doing"
        BLOCKED = "blocked", "blocked"
        DONE = "done", "done"
        DROPPED = "dropped", "dropped"

    class Priority(models.TextChoices):
        LOW = "low", "low"
        NORMAL = "normal", "normal"
        HIGH = "high", "high"
        URGENT = "urgent", "urgent"

    OPEN_STATUSES = ("todo", "doing", "blocked")
    # The fields a patch may change (and `changed` reports), in a stable order.
    PATCHABLE = ("title", "status", "priority", "owner", "blocker", "detail", "lane")

    key = models.SlugField(
        max_length=120,
        unique=True,
        null=True,
        blank=True,
        help_text="A stable slug agents use to put a task on the board and find it again.",
    )
    title = models.CharField(max_length=300)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.TODO)
    priority = models.CharField(max_length=8, choices=Priority.choices, default=Priority.NORMAL)
    owner = models.CharField(max_length=100, blank=True, default="")
    blocker = models.TextField(blank=True, default="")
    detail = models.TextField(blank=True, default="")
    lane = models.CharField(max_length=60, blank=True, default="")
    created_by = models.ForeignKey(Principal, on_delete=models.PROTECT, related_name="+")
    updated_by = models.ForeignKey(Principal, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["lane", "-updated_at"]
        indexes = [
            models.Index(fields=["lane", "status", "-updated_at"], name="task_board"),
            models.Index(
                fields=["-updated_at"],
                condition=Q(status__in=["todo", "doing", "blocked"]),
                name="task_open_recent",
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=~Q(status="blocked") | ~Q(blocker=""), name="task_blocked_has_blocker"
            ),
        ]

    def __str__(self) -> str:
        return f"[{self.status}] {self.title}"


class DecisionLogEntry(AppendOnlyModel):
    """One strategic decision, in a durable, human-readable, tamper-evident log.

    Each entry stores the SHA-256 of its own content chained to the previous entry's hash; the
    unique `prev_hash` means two writers can never both extend the same entry (the log never forks).
    """

    GENESIS = "0" * 64

    title = models.CharField(max_length=300)
    decision = models.TextField()
    rationale = models.TextField()
    alternatives = models.JSONField(default=list, blank=True)
    context = models.TextField(blank=True, default="")
    principal = models.ForeignKey(Principal, on_delete=models.PROTECT, related_name="+")
    actor = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)
    prev_hash = models.CharField(max_length=64, unique=True)
    entry_hash = models.CharField(max_length=64, unique=True)

    class Meta:
        ordering = ["id"]
        verbose_name = "decision log entry"
        verbose_name_plural = "decision log"

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d} {self.title}"
