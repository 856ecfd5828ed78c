"""Admin for principals (read; tokens are issued and revoked with `manage.py operator_token`) and
the audit trail (read-only: nothing can edit or delete it)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html

from operator_site.face.auth import revoke
from operator_site.models import AuditEvent, Notification, Principal
from operator_site.notifications import acknowledge, revert_url


class ReadOnlyAdmin(admin.ModelAdmin):
    """For append-only and rule-bound tables: look, never touch."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Principal)
class PrincipalAdmin(ReadOnlyAdmin):
    list_display = ("name", "kind", "active", "allowlist", "user", "last_used_at", "created_at")
    list_filter = ("kind", "active")
    search_fields = ("name",)
    readonly_fields = ("name", "kind", "tools", "active", "user", "created_at", "last_used_at", "revoked_at")
    exclude = ("token_digest",)
    actions = ("revoke_tokens",)

    @admin.display(description="tool allowlist")
    def allowlist(self, obj: Principal) -> str:
        return "every tool" if obj.tools is None else ", ".join(obj.tools) or "(none)"

    @admin.action(description="Revoke the selected principals' tokens", permissions=["revoke"])
    def revoke_tokens(self, request: HttpRequest, queryset: QuerySet[Principal]) -> None:
        for principal in queryset:
            revoke(principal)
        messages.success(request, f"Revoked {queryset.count()} principal(s).")

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        return request.user.is_superuser


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "principal", "tool", "outcome", "error_code", "duration_ms")
    list_filter = ("outcome", "tool", "principal")
    search_fields = ("tool", "error_code")
    date_hierarchy = "created_at"
    list_select_related = ("principal",)


@admin.register(Notification)
class NotificationAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "kind", "title", "safety", "state", "acknowledged_at", "revert")
    list_filter = (
        "safety",
        "state",
        "kind",
        ("acknowledged_at", admin.EmptyFieldListFilter),
        ("delivered_at", admin.EmptyFieldListFilter),
        ("escalated_at", admin.EmptyFieldListFilter),
    )
    search_fields = ("title", "body", "topic")
    date_hierarchy = "created_at"
    actions = ("acknowledge_selected",)
    readonly_fields = [f.name for f in Notification._meta.fields] + ["revert"]

    @admin.display(description="one-tap revert")
    def revert(self, obj: Notification) -> str:
        if not obj.revertible:
            return "used" if obj.revert_used_at else "—"
        return format_html('<a href="{}">revert…</a>', revert_url(obj))

    @admin.action(description="Acknowledge the selected notices", permissions=["view"])
    def acknowledge_selected(self, request: HttpRequest, queryset: QuerySet[Notification]) -> None:
        from operator_site.views import human_principal

        principal = human_principal(request)
        if principal is None:
            messages.error(request, "Only a person on the human allowlist can acknowledge notices.")
            return
        done = sum(acknowledge(n, by=principal) for n in queryset)
        messages.success(request, f"Acknowledged {done} notice(s).")
