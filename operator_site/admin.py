"""Admin for principals (read; tokens are issued and revoked with `manage.py operator_token`) and
the audit trail (read-only: nothing can edit or delete it)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.utils import unquote
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Max, Min, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from operator_site.calendar_edge import writable_here
from operator_site.display import visible_identifier_html
from operator_site.face import door
from operator_site.face.auth import revoke
from operator_site.models import AuditEvent, Instruction, Notification, Principal
from operator_site.revert_links import acknowledge, revert_handler, revert_token, revert_url
from operator_site.views import human_principal


def _last_int(query: QueryDict, name: str, default: int) -> int:
    values = query.getlist(name)
    if not values:
        return default
    text = values[-1].strip()
    if not text.isascii() or not text.isdigit() or len(text) > 5:
        raise IncorrectLookupParameters(f"{name} is not a number")
    return int(text)


class InputGuardMixin:
    """What the stock admin takes from the URL and the action form, checked before Django uses it,
    because Django does not — each was a 500:

    - the date hierarchy's year/month/day (Django computes the next year, month or day from them and
      converts them to UTC unbounded: `?created_at__year=9999`, or year 1 east of UTC);
    - a whole number in a filter beyond what the database holds (`?holder=99999999999999999999`:
      SQLite cannot bind it), and a NUL character in a filter or the search (PostgreSQL refuses it);
    - the ids an action is applied to (`_selected_action=abc`, or 40 digits).

    The first two are the admin's own "invalid lookup" answer (`?e=1`), the last a message. Used by
    every admin of the operator, and by the stock user and group admins (re-registered below).
    """

    date_hierarchy: str | None
    model: Any

    def get_changelist_instance(self, request: HttpRequest) -> Any:
        for name, values in request.GET.lists():
            for value in values:
                if door.unstorable_text(value) or door.unstorable_text(name):
                    raise IncorrectLookupParameters(f"{name}: a NUL character")  # PostgreSQL refuses it
                if name == "q":  # search text, never bound as a number
                    continue
                digits = value.strip().removeprefix("-")
                if digits.isascii() and digits.isdigit() and int(digits) > door.INT_MAX:
                    raise IncorrectLookupParameters(f"{name}: number out of range")
        if self.date_hierarchy:
            name = self.date_hierarchy
            try:
                year = _last_int(request.GET, f"{name}__year", 2000)
                month = _last_int(request.GET, f"{name}__month", 1)
                day = _last_int(request.GET, f"{name}__day", 1)
                date(year, month, day)
            except ValueError as exc:
                raise IncorrectLookupParameters(exc) from exc
            # A year away from each end of the calendar: the next day/month/year exists, and so does
            # the instant in UTC and in every time zone.
            if not door.EARLIEST_DATE.year < year < door.LATEST_DATE.year:
                raise IncorrectLookupParameters(f"{name}: year out of range")
        changelist = super().get_changelist_instance(request)  # type: ignore[misc]
        if changelist.date_hierarchy:
            self._hide_unwritable_drill_down(request, changelist)
        return changelist

    def _hide_unwritable_drill_down(self, request: HttpRequest, changelist: Any) -> None:
        """The date drill-down groups the list's rows by year, month and day in the operator's zone,
        in SQL: the database converts every instant there, and fails on one the zone cannot write (at
        an end of the calendar: `CalendarEdgeZone` keeps the page's own conversions from failing, not
        the database's). A list holding such an instant — only a damaged or hand-edited row does — is
        shown without the drill-down, and says why. One aggregate, as the drill-down reads first."""
        name = changelist.date_hierarchy
        bounds = changelist.queryset.aggregate(first=Min(name), last=Max(name))
        edges = [v for v in bounds.values() if isinstance(v, datetime) and not writable_here(v)]
        if not edges:
            return
        changelist.date_hierarchy = None
        if request.method == "GET":
            when = edges[0].astimezone(UTC).isoformat(sep=" ", timespec="minutes")
            messages.warning(
                request,
                f"The date drill-down is hidden: a row of this list has a {name} ({when}) that the "
                f"operator's time zone ({timezone.get_current_timezone_name()}) cannot write, at an end of "
                "the calendar. Only a damaged or hand-edited row holds one; it is shown in UTC.",
            )

    def response_action(self, request: HttpRequest, queryset: QuerySet) -> Any:
        selected = request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)
        pk = self.model._meta.pk
        for value in selected:
            try:
                key = pk.to_python(value)
            except ValidationError:
                key = None
            if key is None or (isinstance(key, int) and not 0 < key <= door.INT_MAX):
                messages.error(request, "That selection is not valid; nothing was done.")
                return HttpResponseRedirect(request.get_full_path())
        return super().response_action(request, queryset)  # type: ignore[misc]


def identifier_column(field: str, description: str | None = None) -> Callable[[Any, Any], SafeString | str]:
    """A list column or read-only field showing a model's `field` as the identifier it is (a belief's
    key, a title, a topic, a recipient): isolated, hidden characters as marked tokens, and, when it
    mixes directions, each right-to-left character a token, so it reads in the order it is stored
    (`operator_site.display.visible_identifier_html`). Set it on the admin under ``<field>_shown``
    and list that name where the field would be (and exclude the field from the form)."""

    @admin.display(description=description or field.replace("_", " "), ordering=field)
    def shown(model_admin: Any, obj: Any) -> SafeString | str:
        value = getattr(obj, field)
        return visible_identifier_html(value) if value not in (None, "") else "—"

    shown.__name__ = f"{field}_shown"
    return shown


class ReadOnlyAdmin(InputGuardMixin, admin.ModelAdmin):
    """For append-only and rule-bound tables: look, never touch."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


# The stock user and group admins get the same guards.
for _model in (get_user_model(), Group):
    if admin.site.is_registered(_model):
        _stock = type(admin.site.get_model_admin(_model))
        admin.site.unregister(_model)
        admin.site.register(_model, type(_stock.__name__, (InputGuardMixin, _stock), {}))


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
    """Notices to the person. A notice's page is a review page, not a database row: what changed
    (before → after), who changed it, the evidence it relied on, and two one-click buttons — Undo
    (the one-tap revert, posted straight from this page) and Looks right (acknowledge). The raw
    delivery fields are folded away at the bottom (`templates/operator/notice.html`)."""

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
        principal = human_principal(request)
        if principal is None:
            messages.error(request, "Only a person on the human allowlist can acknowledge notices.")
            return
        done = sum(acknowledge(n, by=principal) for n in queryset)
        messages.success(request, f"Acknowledged {done} notice(s).")

    def get_urls(self) -> list[Any]:
        return [
            path(
                "<int:notice_id>/acknowledge/",
                self.admin_site.admin_view(self.acknowledge_view),
                name="operator_site_notification_acknowledge",
            ),
            *super().get_urls(),
        ]

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: Any = None
    ) -> HttpResponse:
        """The review page of one notice (GET only: every action on it is its own POST)."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        if request.method != "GET":
            return HttpResponse(status=405, headers={"Allow": "GET"})
        notice_id = unquote(object_id)
        if not (notice_id.isascii() and notice_id.isdigit() and 0 < int(notice_id) <= door.INT_MAX):
            raise Http404("no such notice")
        notice = (
            Notification.objects.select_related("acknowledged_by", "revert_used_by")
            .filter(pk=int(notice_id))
            .first()
        )
        if notice is None:
            raise Http404("no such notice")
        return render(request, "operator/notice.html", self.notice_context(request, notice))

    def notice_context(self, request: HttpRequest, notice: Notification) -> dict[str, Any]:
        handler = revert_handler(notice.subject_kind) if notice.subject_kind else None
        review = None
        undo_blocked = ""
        if handler is not None and notice.subject_id is not None:
            review_of = getattr(handler, "review", None)
            review = review_of(notice.subject_id) if review_of else None
            if notice.revertible:
                undo_blocked = handler.describe(notice.subject_id).get("error") or ""
        principal = human_principal(request)
        return {
            **self.admin_site.each_context(request),
            "title": f"Notice #{notice.pk}",
            "opts": self.model._meta,
            "notice": notice,
            "review": review,
            "intent_link": _intent_link(notice),
            "undo_path": (
                reverse("revert-link", kwargs={"token": revert_token(notice)})
                if notice.revertible and handler is not None and not undo_blocked
                else None
            ),
            "undo_blocked": undo_blocked,
            "is_human": principal is not None,
        }

    def acknowledge_view(self, request: HttpRequest, notice_id: int) -> HttpResponse:
        """POST: "Looks right" — the person acknowledges one notice (one click, CSRF-checked by the
        admin). Only a staff login linked to an active human principal may; acknowledging twice says
        who did it first and changes nothing."""
        if request.method != "POST":
            return HttpResponse(status=405, headers={"Allow": "POST"})
        if not self.has_view_permission(request):
            raise PermissionDenied
        notice = Notification.objects.filter(pk=notice_id).first() if notice_id <= door.INT_MAX else None
        if notice is None:
            raise Http404("no such notice")
        principal = human_principal(request)
        if principal is None:
            context = self.notice_context(request, notice)
            context["error"] = (
                "Only a person on the human allowlist can acknowledge a notice (this login is not linked "
                "to one); nothing was changed."
            )
            return render(request, "operator/notice.html", context, status=403)
        if acknowledge(notice, by=principal):
            messages.success(request, f"Notice #{notice.pk} acknowledged: it looks right.")
        else:
            notice.refresh_from_db()
            who = notice.acknowledged_by.name if notice.acknowledged_by else "someone"
            messages.info(request, f"Notice #{notice.pk} was already acknowledged (by {who}).")
        return redirect(reverse("admin:index"))


def _intent_link(notice: Notification) -> str | None:
    """A notice about an intent (an approval request, a blocked intent) links to that intent."""
    key = notice.dedupe_key or ""
    prefix, _, number = key.partition(":")
    if prefix not in {"intent", "intent-blocked"} or not number.isdigit() or int(number) > door.INT_MAX:
        return None
    name = "admin:intents_intent_decide" if prefix == "intent" else "admin:intents_intent_change"
    return reverse(name, args=[int(number)])


# --- what the person said (the evidence rows, `operator_site.evidence`) ------------------------------
def instruction_link(instruction_id: int | None, span: str) -> str:
    """The evidence a version or an item relied on: a link to the instruction, and the quoted span."""
    if not instruction_id:
        return "—"
    url = reverse("admin:operator_site_instruction_change", args=[instruction_id])
    return format_html('instruction <a href="{}">#{}</a>: “{}”', url, instruction_id, span)


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
        return human_principal(request) is not None and request.user.has_perm("operator_site.add_instruction")

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
