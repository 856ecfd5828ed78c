"""Admin for runs, operator days, progress and observations: read-only, with one action.

Runs change only through the lock's rules (start, heartbeat, finish, stale recovery); a hand edit
would bypass them. The one thing a person may do is **End this run** (`runs.lock.end_run`): a
confirmation page (GET shows the run, changes nothing; POST ends it, with an optional reason, only
for a staff login linked to an active human principal), recorded on the run and in the admin's
history; the old holder's later heartbeats and finish are refused. Observations are append-only
and untrusted: their stored text is shown as text (Django escapes it), never rendered as markup.
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html

from operator_site.admin import ReadOnlyAdmin
from operator_site.refusals import Refusal
from operator_site.views import human_principal
from runs import lock
from runs.models import Observation, OperatorDay, ProgressEntry, Run, Tick


def _pretty_json(value: object) -> str:
    return format_html("<pre>{}</pre>", json.dumps(value, indent=2, ensure_ascii=False, default=str))


class EndRunForm(forms.Form):
    reason = forms.CharField(max_length=lock.MAX_END_REASON_CHARS, required=False)


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "kind",
        "status",
        "holder",
        "started_at",
        "last_heartbeat_at",
        "stale_after_s",
        "overdue",
        "ended_at",
        "taken_over_by",
        "end",
    )
    list_filter = ("status", "kind", "holder")
    search_fields = ("kind", "note", "summary")
    date_hierarchy = "started_at"
    list_select_related = ("holder",)
    exclude = ("token_digest",)
    readonly_fields = [*(f.name for f in Run._meta.fields if f.name != "token_digest"), "end"]

    @admin.display(boolean=True, description="heartbeat overdue")
    def overdue(self, obj: Run) -> bool | None:
        if obj.status != Run.Status.RUNNING:
            return None
        return obj.overdue_s(timezone.now()) > 0

    @admin.display(description="end")
    def end(self, obj: Run) -> str:
        if obj.status != Run.Status.RUNNING:
            return "—"
        return format_html('<a href="{}">End this run…</a>', reverse("admin:runs_run_end", args=[obj.pk]))

    def get_urls(self) -> list[Any]:
        return [
            path("<int:run_id>/end/", self.admin_site.admin_view(self.end_view), name="runs_run_end"),
            *super().get_urls(),
        ]

    def end_view(self, request: HttpRequest, run_id: int) -> HttpResponse:
        """GET: the run and what ending it does (changes nothing). POST: end it, for a person."""
        if request.method not in {"GET", "POST"}:
            return HttpResponse(status=405, headers={"Allow": "GET, POST"})
        if not self.has_view_permission(request):
            raise PermissionDenied
        run = Run.objects.select_related("holder", "ended_by").filter(pk=run_id).first()
        if run is None:
            raise Http404("no such run")
        principal = human_principal(request)
        if request.method == "GET":
            return self._end_page(request, run, EndRunForm(), principal)
        if principal is None:
            error = "Only a person on the human allowlist can end a run (this login is not linked to one)."
            return self._end_page(request, run, EndRunForm(request.POST), principal, error, status=403)
        form = EndRunForm(request.POST)
        if not form.is_valid():
            errors = "; ".join(f"{name}: {' '.join(e)}" for name, e in form.errors.items())
            return self._end_page(
                request, run, form, principal, f"Nothing was changed — {errors}", status=400
            )
        try:
            with transaction.atomic():
                ended = lock.end_run(principal=principal, run_id=run.pk, reason=form.cleaned_data["reason"])
                self.log_change(request, ended, f"Ended the run: {ended.end_reason}")
        except Refusal as refusal:
            run.refresh_from_db()
            status = 403 if refusal.code == "not_human" else 409
            return self._end_page(request, run, form, principal, refusal.reason, status=status)
        messages.success(request, f"Ended run #{ended.pk} ({ended.kind}, held by {ended.holder.name}).")
        return redirect(reverse("admin:runs_run_change", args=[ended.pk]))

    def _end_page(
        self,
        request: HttpRequest,
        run: Run,
        form: EndRunForm,
        principal: Any,
        error: str | None = None,
        status: int = 200,
    ) -> HttpResponse:
        context = {
            **self.admin_site.each_context(request),
            "title": f"End run #{run.pk}",
            "opts": self.model._meta,
            "run": run,
            "overdue": run.overdue_s(timezone.now()) > 0 if run.status == Run.Status.RUNNING else None,
            "running": run.status == Run.Status.RUNNING,
            "may_end": principal is not None,
            "form": form,
            "error": error,
        }
        return render(request, "runs/end_run.html", context, status=status)


@admin.register(OperatorDay)
class OperatorDayAdmin(ReadOnlyAdmin):
    list_display = ("date", "state", "opened_at", "opened_by", "opened_via", "closed_at")
    list_filter = ("state",)
    date_hierarchy = "date"
    exclude = ("summary",)
    readonly_fields = [f.name for f in OperatorDay._meta.fields if f.name != "summary"] + ["day_summary"]

    @admin.display(description="summary")
    def day_summary(self, obj: OperatorDay) -> str:
        return _pretty_json(obj.summary)


@admin.register(ProgressEntry)
class ProgressEntryAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "day", "outcome", "summary", "tick", "run", "recorded_by")
    list_filter = ("outcome", "tick")
    search_fields = ("summary",)
    date_hierarchy = "created_at"
    list_select_related = ("day", "recorded_by")
    readonly_fields = [f.name for f in ProgressEntry._meta.fields]


@admin.register(Observation)
class ObservationAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "day", "kind", "tainted", "summary", "source", "recorded_by")
    list_filter = ("kind", "source")
    search_fields = ("summary", "source")
    date_hierarchy = "created_at"
    list_select_related = ("day", "recorded_by")
    exclude = ("data",)
    readonly_fields = [f.name for f in Observation._meta.fields if f.name != "data"] + ["data_json"]

    @admin.display(description="data (untrusted)")
    def data_json(self, obj: Observation) -> str:
        return _pretty_json(obj.data)


@admin.register(Tick)
class TickAdmin(ReadOnlyAdmin):
    """Append-only: the ticks that ran, per day, with what each found."""

    list_display = ("at", "day", "mode", "principal", "run")
    list_filter = ("mode",)
    date_hierarchy = "at"
    list_select_related = ("day", "principal", "run")
