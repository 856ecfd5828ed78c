from __future__ import annotations

from django.contrib import admin, messages
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from intents import services
from intents.models import Directive
from operator_site.admin import ReadOnlyAdmin
from operator_site.face.envelope import Refusal


@admin.register(Directive)
class DirectiveAdmin(ReadOnlyAdmin):
    list_display = (
        "kind",
        "topic",
        "reason",
        "actor",
        "created_at",
        "expires_at",
        "in_force",
        "clear_reason",
    )
    list_filter = ("kind", "clear_reason")
    search_fields = ("topic", "reason")
    actions = ("clear_selected",)

    @admin.display(boolean=True, description="in force")
    def in_force(self, obj: Directive) -> bool:
        return obj.cleared_at is None and obj.expires_at > timezone.now()

    @admin.action(description="Lift the selected directives", permissions=["view"])
    def clear_selected(self, request: HttpRequest, queryset: QuerySet[Directive]) -> None:
        principal = getattr(request.user, "principal", None)
        if principal is None or not principal.is_human or not principal.active:
            messages.error(request, "Only a person on the human allowlist can lift directives.")
            return
        lifted = 0
        for directive in queryset:
            try:
                with transaction.atomic():
                    lifted += len(services.clear_directives(principal=principal, directive_id=directive.id))
            except Refusal:
                continue  # already expired or cleared
        messages.success(request, f"Lifted {lifted} directive(s).")
