"""The beliefs app's tables: what the operator believes about the person (beliefs), how that model
changed (world-model versions with exact lineage, see `operator_site.lineage`). What the person said
(`Instruction`) is the kernel's (`operator_site.models`): goals and intents rely on it too."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from operator_site.display import identifier_text
from operator_site.lineage import ChangeRecord, VersionRecord
from operator_site.models import Instruction, Principal

HIGH_STAKES_KINDS: tuple[str, ...] = ("identity", "goal", "behavior_policy", "constraint")
LOW_STAKES_KINDS: tuple[str, ...] = ("preference", "note", "project", "risk")
BELIEF_KINDS: tuple[str, ...] = HIGH_STAKES_KINDS + LOW_STAKES_KINDS


def stakes_of(kind: str) -> str:
    return "high" if kind in HIGH_STAKES_KINDS else "low"


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
    # What the key reads as (`operator_site.lookalikes.fold`), written with every row: an add is
    # refused when an active belief of its kind reads the same under another key, found by the
    # write's own snapshot statement (`Lineage.begin(alike=...)`). Never shown, never a name.
    key_alike = models.CharField(max_length=480, default="", editable=False)
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
        indexes = [
            models.Index(fields=["status", "kind"], name="belief_status_kind"),
            models.Index(fields=["kind", "key_alike"], name="belief_kind_key_alike"),
        ]

    def __str__(self) -> str:
        return f"{self.kind}/{identifier_text(self.key)}"  # as it is stored (operator_site.display)

    @property
    def entity(self) -> str:
        return f"{self.kind}/{identifier_text(self.key)}"  # as it is stored (operator_site.display)

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
