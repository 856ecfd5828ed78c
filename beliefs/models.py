"""The beliefs app's tables: what the operator believes about the person (beliefs), how that model
changed (world-model versions with exact lineage, see `operator_site.lineage`), and what the person
said (instructions: the only rows a confirmation quote may come from)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

from operator_site.lineage import ChangeRecord, VersionRecord
from operator_site.models import AppendOnlyModel, Principal

HIGH_STAKES_KINDS: tuple[str, ...] = ("identity", "goal", "behavior_policy", "constraint")
LOW_STAKES_KINDS: tuple[str, ...] = ("preference", "note", "project", "risk")
BELIEF_KINDS: tuple[str, ...] = HIGH_STAKES_KINDS + LOW_STAKES_KINDS


def stakes_of(kind: str) -> str:
    return "high" if kind in HIGH_STAKES_KINDS else "low"


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
        ordering = ["-id"]
        indexes = [models.Index(fields=["human_authored", "created_at"], name="instruction_evidence")]

    def __str__(self) -> str:
        text = " ".join(self.text.split())
        return f"#{self.pk} {self.kind} by {self.actor}: {text[:60]}{'…' if len(text) > 60 else ''}"


class Belief(models.Model):
    """The live state of one belief, (kind, key). Written only through the world-model lineage
    (`beliefs.services`), which records every change's exact pre- and post-image.

    A retired belief keeps its row (status `retired`); adding its key again reactivates it, so a key
    is unique among the active beliefs of its kind (and among all of them).
    """

    class Kind(models.TextChoices):
        IDENTITY = "identity", "identity (high stakes)"
        GOAL = "goal", "goal (high stakes)"
        BEHAVIOR_POLICY = "behavior_policy", "behavior policy (high stakes)"
        CONSTRAINT = "constraint", "constraint (high stakes)"
        PREFERENCE = "preference", "preference"
        NOTE = "note", "note"
        PROJECT = "project", "project"
        RISK = "risk", "risk"

    class Status(models.TextChoices):
        ACTIVE = "active", "active"
        RETIRED = "retired", "retired"

    kind = models.CharField(max_length=16, choices=Kind.choices)
    key = models.CharField(max_length=120)
    value = models.TextField(blank=True, default="")
    confidence = models.FloatField(null=True, blank=True)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.ACTIVE)
    source_principal = models.ForeignKey(Principal, on_delete=models.PROTECT, related_name="+")
    source_name = models.CharField(max_length=64)
    source_kind = models.CharField(max_length=8, choices=Principal.Kind.choices)
    set_in_version = models.PositiveBigIntegerField(help_text="The version that set this state.")
    evidence_instruction = models.ForeignKey(
        Instruction, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    evidence_span = models.TextField(blank=True, default="")
    evidence_approval = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="The approval decision that was its evidence (an accepted proposal)."
    )
    last_version = models.PositiveBigIntegerField(help_text="The last version that wrote this row.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["kind", "key"]
        constraints = [
            models.UniqueConstraint(fields=["kind", "key"], name="belief_one_row_per_kind_key"),
            models.CheckConstraint(
                condition=Q(confidence__isnull=True) | Q(confidence__gte=0, confidence__lte=1),
                name="belief_confidence_0_1",
            ),
            models.CheckConstraint(condition=Q(kind__in=BELIEF_KINDS), name="belief_known_kind"),
        ]
        indexes = [models.Index(fields=["status", "kind"], name="belief_status_kind")]

    def __str__(self) -> str:
        return f"{self.kind}/{self.key}"

    @property
    def entity(self) -> str:
        return f"{self.kind}/{self.key}"

    @property
    def stakes(self) -> str:
        return stakes_of(self.kind)


class WorldModelVersion(VersionRecord):
    """One version of the world model (lineage: `operator_site.lineage.VersionRecord`)."""

    high_stakes = models.BooleanField(default=False, help_text="Touched a high-stakes belief.")
    evidence_instruction = models.ForeignKey(
        Instruction, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    class Meta(VersionRecord.Meta):
        verbose_name = "world-model version"
        permissions = [("revert_world_model", "Can undo or revert world-model versions")]


class WorldModelChange(ChangeRecord):
    """What one world-model version did to one belief: its exact pre-image and post-image."""

    version = models.ForeignKey(WorldModelVersion, on_delete=models.PROTECT, related_name="changes")

    class Meta(ChangeRecord.Meta):
        verbose_name = "world-model change"


class ConfirmationUse(AppendOnlyModel):
    """One sentence of the person's authorises one change, once: the row that makes it so (UNIQUE
    on instruction and sentence, so two concurrent writers cannot both spend the same sentence).
    `sentence` is the sentence's position in the instruction (`beliefs.wording.split_sentences`);
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
