"""The human console for the world model: beliefs (with each belief's history), versions (a readable
diff, "undo this change" and "revert to here", `operator_site.lineage_admin`); the instructions they
rely on are the kernel's (`operator_site.admin`). `GatedItemAdmin` and `GatedVersionAdmin` serve every
model written under the evidence gate; the goal model's admin uses them too."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.safestring import SafeString

from beliefs import services
from beliefs.models import HIGH_STAKES_KINDS, Belief, WorldModelVersion
from operator_site.admin import ReadOnlyAdmin, identifier_column, instruction_link
from operator_site.lineage import json_kind
from operator_site.lineage_admin import LineageVersionAdmin, history_table

REVERT_PERMISSION = "beliefs.revert_world_model"


class StakesFilter(admin.SimpleListFilter):
    title = "stakes"
    parameter_name = "stakes"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("high", "high stakes"), ("low", "low stakes")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == "high":
            return queryset.filter(kind__in=HIGH_STAKES_KINDS)
        if self.value() == "low":
            return queryset.exclude(kind__in=HIGH_STAKES_KINDS)
        return queryset


class GatedItemAdmin(ReadOnlyAdmin):
    """Rows written under the evidence gate (`operator_site.evidence`): beliefs, and the goal model's goals,
    priorities and projects. Read-only, with who set each and the instruction it relied on."""

    @admin.display(description="source")
    def source(self, obj: Any) -> str:
        return f"{obj.source_name} ({obj.source_kind})"

    @admin.display(description="evidence")
    def evidence(self, obj: Any) -> str:
        return instruction_link(obj.evidence_instruction_id, obj.evidence_span)


@admin.register(Belief)
class BeliefAdmin(GatedItemAdmin):
    list_display = (
        "kind",
        "key_shown",
        "short_value",
        "stakes",
        "status",
        "confidence",
        "source",
        "set_in_version",
    )
    list_filter = ("kind", StakesFilter, "status", "source_kind", "source_name")
    search_fields = ("key", "value")
    readonly_fields = (
        "kind",
        "key_shown",
        "value",
        "confidence",
        "status",
        "stakes",
        "source",
        "set_in_version",
        "evidence",
        "last_version",
        "updated_at",
        "history",
    )
    exclude = (
        "key",
        "source_principal",
        "source_name",
        "source_kind",
        "evidence_instruction",
        "evidence_span",
    )
    key_shown = identifier_column("key")

    @admin.display(description="value")
    def short_value(self, obj: Belief) -> str:
        return obj.value if len(obj.value) <= 80 else obj.value[:79] + "…"

    @admin.display(description="stakes")
    def stakes(self, obj: Belief) -> str:
        return obj.stakes

    @admin.display(description="history (every version that changed this belief)")
    def history(self, obj: Belief) -> SafeString:
        return history_table(services.REVERTER, obj.entity)


class GatedVersionAdmin(LineageVersionAdmin):
    """Versions of a model written under the evidence gate (`operator_site.evidence`): each says whether it
    was high-stakes and which instruction it relied on. The world model's and the goal model's."""

    list_display = ("number", "operation", "summary", "actor", "high_stakes", "reverted", "created_at")
    list_filter = ("operation", "high_stakes", "actor")
    search_fields = ("summary", "actor")
    date_hierarchy = "created_at"
    readonly_fields = (
        "number",
        "supersedes",
        "operation",
        "summary",
        "actor",
        "created_at",
        "reverts",
        "restores_to",
        "high_stakes",
        "evidence_shown",
        "diff",
    )
    fields = readonly_fields

    @admin.display(description="evidence")
    def evidence_shown(self, obj: Any) -> str:
        if obj.evidence is not None and not isinstance(obj.evidence, dict):  # only a hand-edited row
            return f"damaged: the evidence recorded with it is not an object ({json_kind(obj.evidence)})"
        return instruction_link(obj.evidence_instruction_id, (obj.evidence or {}).get("span", ""))


@admin.register(WorldModelVersion)
class WorldModelVersionAdmin(GatedVersionAdmin):
    """World-model versions on the shared lineage console: diff, undo and revert-to-here pages."""

    lineage_label = "world model"
    reverter = services.REVERTER
    revert_permission = REVERT_PERMISSION
    what_label = "belief · field"
