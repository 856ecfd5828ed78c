"""The human console for the world model: beliefs (with each belief's history), versions (a readable
diff, "undo this change" and "revert to here", `operator_site.lineage_admin`) and instructions (a
person may add one: it is human-authored). `GatedItemAdmin` and `GatedVersionAdmin` serve every
model written under the evidence gate; the goal model's admin uses them too."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from beliefs import services
from beliefs.models import HIGH_STAKES_KINDS, Belief, Instruction, WorldModelVersion
from operator_site.admin import ReadOnlyAdmin
from operator_site.lineage_admin import LineageVersionAdmin, history_table
from operator_site.views import human_principal

REVERT_PERMISSION = "beliefs.revert_world_model"


def instruction_link(instruction_id: int | None, span: str) -> str:
    """The evidence a version or an item relied on: a link to the instruction, and the quoted span."""
    if not instruction_id:
        return "—"
    url = reverse("admin:beliefs_instruction_change", args=[instruction_id])
    return format_html('instruction <a href="{}">#{}</a>: “{}”', url, instruction_id, span)


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
    """Rows written under the evidence gate (`beliefs.evidence`): beliefs, and the goal model's goals,
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
        "key",
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
        "key",
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
    exclude = ("source_principal", "source_name", "source_kind", "evidence_instruction", "evidence_span")

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
    """Versions of a model written under the evidence gate (`beliefs.evidence`): each says whether it
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
        return instruction_link(obj.evidence_instruction_id, (obj.evidence or {}).get("span", ""))


@admin.register(WorldModelVersion)
class WorldModelVersionAdmin(GatedVersionAdmin):
    """World-model versions on the shared lineage console: diff, undo and revert-to-here pages."""

    lineage_label = "world model"
    reverter = services.REVERTER
    revert_permission = REVERT_PERMISSION
    what_label = "belief · field"


@admin.register(Instruction)
class InstructionAdmin(ReadOnlyAdmin):
    """Read-only, except that a person on the human allowlist may add one (human-authored)."""

    list_display = ("created_at", "kind", "short_text", "actor", "human_authored", "channel")
    list_filter = ("kind", "human_authored", "channel")
    search_fields = ("text",)
    date_hierarchy = "created_at"
    readonly_fields = ("text", "kind", "channel", "refs", "actor", "human_authored", "created_at")

    @admin.display(description="text")
    def short_text(self, obj: Instruction) -> str:
        text = " ".join(obj.text.split())
        return text if len(text) <= 80 else text[:79] + "…"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return human_principal(request) is not None and request.user.has_perm("beliefs.add_instruction")

    def get_fields(self, request: HttpRequest, obj: Instruction | None = None) -> list[str]:
        if obj is None:
            return ["text", "kind", "channel"]
        return list(self.readonly_fields)

    def get_readonly_fields(self, request: HttpRequest, obj: Instruction | None = None) -> tuple[str, ...]:
        return () if obj is None else self.readonly_fields

    def save_model(self, request: HttpRequest, obj: Instruction, form: Any, change: bool) -> None:
        principal = human_principal(request)
        if change or principal is None:
            raise PermissionDenied
        # The row is the person's own words, recorded by the person: human-authored evidence.
        obj.principal, obj.actor, obj.human_authored = principal, principal.name, True
        obj.channel = " ".join((obj.channel or "admin").split()).lower()[:40]
        super().save_model(request, obj, form, change)
