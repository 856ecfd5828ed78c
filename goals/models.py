"""The goals app: the person's direction (the goal model: goals, priorities, projects, versioned
with exact lineage under the evidence gate), the board of tasks agents keep, and the append-only
log of strategic decisions.

Goal-model rows are written only through the goal-model lineage (`goals.goal_model`), which
records every change's exact pre- and post-image. Rows are never deleted: a row whose addition
was undone stays as a tombstone (`present=False`), so its id is never reused and links to it
(tasks, projects) come back intact if the undo is itself undone. The default manager hides
tombstones; `everything` sees them."""

from __future__ import annotations

from django.db import models
from django.db.models import Manager, Q
from django.utils import timezone

from operator_site.calendar_edge import local_text
from operator_site.display import identifier_text
from operator_site.lineage import ChangeRecord, VersionRecord
from operator_site.models import AppendOnlyModel, Instruction, Principal


# --- the goal model ----------------------------------------------------------------------------------
class PresentManager(models.Manager):
    """Rows that are part of the goal model (not tombstones of undone additions)."""

    def get_queryset(self) -> models.QuerySet:
        return super().get_queryset().filter(present=True)


class GoalModelItem(models.Model):
    """What goals, priorities and projects share: detail, provenance and the tombstone flag."""

    detail = models.TextField(blank=True, default="")
    present = models.BooleanField(
        default=True, help_text="False: a tombstone (its addition was undone, or it is being added)."
    )
    source_principal = models.ForeignKey(Principal, on_delete=models.PROTECT, related_name="+")
    source_name = models.CharField(max_length=64)
    source_kind = models.CharField(max_length=8, choices=Principal.Kind.choices)
    set_in_version = models.PositiveBigIntegerField(help_text="The goal-model version that set this state.")
    evidence_instruction = models.ForeignKey(
        Instruction, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    evidence_span = models.TextField(blank=True, default="")
    evidence_approval = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="The approval decision that was its evidence (an accepted proposal)."
    )
    last_version = models.PositiveBigIntegerField(help_text="The last version that wrote this row.")
    updated_at = models.DateTimeField(auto_now=True)

    everything = Manager()
    objects = PresentManager()

    class Meta:
        abstract = True
        default_manager_name = "objects"
        base_manager_name = "everything"


class Goal(GoalModelItem):
    """One of the person's goals. `importance` is its rank (1 = most important), dense and unique
    among ranked goals: every goal that is not removed. It is written only by the ranking entity of
    the lineage, never with the rest of the row."""

    class Status(models.TextChoices):
        ACTIVE = "active", "active"
        PAUSED = "paused", "paused"
        UNDER_REVIEW = "under_review", "under review"
        REMOVED = "removed", "removed"

    title = models.CharField(max_length=300)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.ACTIVE)
    importance = models.PositiveIntegerField(
        null=True, blank=True, help_text="Rank by importance, 1 = most important (none when removed)."
    )

    class Meta(GoalModelItem.Meta):
        ordering = [models.F("importance").asc(nulls_last=True), "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["importance"], condition=Q(importance__isnull=False), name="goal_rank_unique"
            ),
            models.CheckConstraint(
                condition=Q(importance__isnull=True) | Q(importance__gte=1), name="goal_rank_from_one"
            ),
            models.CheckConstraint(
                condition=Q(status__in=["active", "paused", "under_review", "removed"]),
                name="goal_known_status",
            ),
        ]
        indexes = [models.Index(fields=["present", "status"], name="goal_present_status")]

    def __str__(self) -> str:
        return f"#{self.pk} {identifier_text(self.title)}"  # as it is stored (operator_site.display)


class Priority(GoalModelItem):
    """One of the person's ordered, named priorities (`position` 1 = first), dense and unique among
    active priorities; written only by the lineage's priority-order entity."""

    class Status(models.TextChoices):
        ACTIVE = "active", "active"
        REMOVED = "removed", "removed"

    name = models.CharField(max_length=300)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.ACTIVE)
    position = models.PositiveIntegerField(null=True, blank=True, help_text="1 = first (none when removed).")

    class Meta(GoalModelItem.Meta):
        ordering = [models.F("position").asc(nulls_last=True), "id"]
        verbose_name_plural = "priorities"
        constraints = [
            models.UniqueConstraint(
                fields=["position"], condition=Q(position__isnull=False), name="priority_position_unique"
            ),
            models.CheckConstraint(
                condition=Q(position__isnull=True) | Q(position__gte=1), name="priority_position_from_one"
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {identifier_text(self.name)}"  # as it is stored (operator_site.display)


class Project(GoalModelItem):
    """A project: a title, a status, and optionally the goal it serves."""

    class Status(models.TextChoices):
        ACTIVE = "active", "active"
        PAUSED = "paused", "paused"
        DONE = "done", "done"
        REMOVED = "removed", "removed"

    title = models.CharField(max_length=300)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.ACTIVE)
    goal = models.ForeignKey(Goal, null=True, blank=True, on_delete=models.PROTECT, related_name="projects")

    class Meta(GoalModelItem.Meta):
        ordering = ["title", "id"]
        indexes = [models.Index(fields=["present", "status"], name="project_present_status")]

    def __str__(self) -> str:
        return f"#{self.pk} {identifier_text(self.title)}"  # as it is stored (operator_site.display)


class GoalModelVersion(VersionRecord):
    """One version of the goal model (lineage: `operator_site.lineage.VersionRecord`)."""

    high_stakes = models.BooleanField(default=False, help_text="Touched a goal or a priority.")
    evidence_instruction = models.ForeignKey(
        Instruction, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    class Meta(VersionRecord.Meta):
        verbose_name = "goal-model version"
        permissions = [("revert_goal_model", "Can undo or revert goal-model versions")]


class GoalModelChange(ChangeRecord):
    """What one goal-model version did to one entity: its exact pre-image and post-image."""

    version = models.ForeignKey(GoalModelVersion, on_delete=models.PROTECT, related_name="changes")

    class Meta(ChangeRecord.Meta):
        verbose_name = "goal-model change"


# --- the board ---------------------------------------------------------------------------------------


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
    # The links `changed` also reports, after the patchable fields.
    LINKS = ("goal", "project")

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
    goal = models.ForeignKey(
        Goal,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="tasks",
        help_text="The goal it serves.",
    )
    project = models.ForeignKey(
        Project,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="tasks",
        help_text="Its project.",
    )
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


# --- the decision log --------------------------------------------------------------------------------
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
        return f"{local_text(self.created_at, '%Y-%m-%d')} {self.title}"
