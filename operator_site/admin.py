"""Admin for principals (read; tokens are issued and revoked with `manage.py operator_token`) and
the audit trail (read-only: nothing can edit or delete it)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from operator_site.face.auth import revoke
from operator_site.models import AuditEvent, Principal


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
