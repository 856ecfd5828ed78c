"""The human console for any versioned model: a read-only version admin with a readable diff and
two confirmation pages, "undo this change" and "revert to here". GET shows what the revert would do
and changes nothing; POST acts, conditionally on the version the page showed, and records which
human did it. A model subclasses `LineageVersionAdmin` and sets its `reverter` (docs/lineage.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from operator_site.admin import ReadOnlyAdmin
from operator_site.display import visible_html
from operator_site.lineage import VersionRecord
from operator_site.lineage_revert import Reverter
from operator_site.refusals import Refusal
from operator_site.views import human_principal


def _shown(value: Any) -> SafeString | str:
    """A before/after value as the person must see it (operator_site.display); "—" for nothing."""
    return visible_html(value) if value else "—"


def diff_table(rows: list[dict[str, Any]], what_label: str = "what · field") -> SafeString:
    """Readable before/after rows ({"what", "before", "after"}) as an escaped HTML table."""
    if not rows:
        return format_html("<p>{}</p>", "No changes.")
    body = format_html_join(
        "",
        "<tr><td>{}</td><td><del>{}</del></td><td><ins>{}</ins></td></tr>",
        ((visible_html(r["what"]), _shown(r["before"]), _shown(r["after"])) for r in rows),
    )
    return format_html(
        "<table><thead><tr><th>{}</th><th>before</th><th>after</th></tr></thead><tbody>{}</tbody></table>",
        what_label,
        body,
    )


def history_table(reverter: Reverter, entity: str) -> SafeString:
    """Every version that changed one entity, oldest first: a row per changed field, linking to the
    version's admin page. For an entity's own admin page."""
    opts = reverter.lineage.version_model._meta
    url_name = f"admin:{opts.app_label}_{opts.model_name}_change"
    rows = []
    for change in reverter.lineage.history(entity):
        version = change.version
        url = reverse(url_name, args=[version.number])
        for diff in reverter.change_rows(change):
            rows.append(
                (
                    url,
                    version.number,
                    version.operation,
                    visible_html(version.actor),
                    visible_html(diff["what"]),
                    _shown(diff["before"]),
                    _shown(diff["after"]),
                    version.created_at,
                )
            )
    if not rows:
        return format_html("<p>{}</p>", "No recorded changes.")
    body = format_html_join(
        "",
        '<tr><td><a href="{}">v{}</a></td><td>{}</td><td>{}</td><td>{}</td><td><del>{}</del></td>'
        "<td><ins>{}</ins></td><td>{}</td></tr>",
        rows,
    )
    return format_html(
        "<table><thead><tr><th>version</th><th>operation</th><th>by</th><th>field</th><th>before</th>"
        "<th>after</th><th>when</th></tr></thead><tbody>{}</tbody></table>",
        body,
    )


class ConfirmRevertForm(forms.Form):
    """What a revert confirmation posts: the version the page showed (a whole number the database
    can hold; anything else — `²`, `-1`, 40 digits — is an incomplete form, never a 500)."""

    expected_version = forms.IntegerField(min_value=0, max_value=2**63 - 1)


class LineageVersionAdmin(ReadOnlyAdmin):
    """Versions of one lineage: read-only, with undo / revert-to-here confirmation pages."""

    change_form_template = "operator/lineage_version_form.html"
    confirm_template = "operator/lineage_confirm_revert.html"
    lineage_label = "model"  # e.g. "goal model"
    revert_permission = ""  # e.g. "goals.revert_goal_model"
    what_label = "what · field"
    reverter: Reverter  # the model's reverter, e.g. `goals.goal_model.REVERTER`
    actions = ("undo_selected", "revert_to_selected")

    # --- hooks --------------------------------------------------------------------------------------
    def describe_undo(self, number: int) -> dict[str, Any]:
        return self.reverter.describe_undo(number)

    def describe_restore(self, number: int) -> dict[str, Any]:
        return self.reverter.describe_restore(number)

    def perform_undo(self, *, number: int, principal: Any, expected_version: int) -> dict[str, Any]:
        return self.reverter.undo(number=number, principal=principal, expected_version=expected_version)

    def perform_restore(self, *, number: int, principal: Any, expected_version: int) -> dict[str, Any]:
        return self.reverter.restore(number=number, principal=principal, expected_version=expected_version)

    # --- columns ------------------------------------------------------------------------------------
    @admin.display(description="reverted")
    def reverted(self, obj: VersionRecord) -> str:
        return "yes" if self.reverter.lineage.is_reverted(obj) else ""

    @admin.display(description="what changed")
    def diff(self, obj: VersionRecord) -> SafeString:
        return diff_table(self.reverter.version_rows(obj), self.what_label)

    # --- urls and views -----------------------------------------------------------------------------
    def _url_name(self, action: str) -> str:
        opts = self.model._meta
        return f"{opts.app_label}_{opts.model_name}_{action}"

    def get_urls(self) -> list[Any]:
        wrap = self.admin_site.admin_view
        return [
            path("<int:number>/undo/", wrap(self.undo_view), name=self._url_name("undo")),
            path("<int:number>/restore/", wrap(self.restore_view), name=self._url_name("restore")),
            *super().get_urls(),
        ]

    def undo_view(self, request: HttpRequest, number: int) -> HttpResponse:
        return self._confirm(
            request, number, describe=self.describe_undo, act=self.perform_undo, button="Undo this change"
        )

    def restore_view(self, request: HttpRequest, number: int) -> HttpResponse:
        return self._confirm(
            request,
            number,
            describe=self.describe_restore,
            act=self.perform_restore,
            button=f"Revert the {self.lineage_label} to version {number}",
        )

    def _confirm(
        self,
        request: HttpRequest,
        number: int,
        *,
        describe: Callable[[int], dict[str, Any]],
        act: Callable[..., dict[str, Any]],
        button: str,
    ) -> HttpResponse:
        if request.method not in ("GET", "POST"):
            return HttpResponse(status=405, headers={"Allow": "GET, POST"})
        if number != 0:
            get_object_or_404(self.model, pk=number)
        if not self.has_view_permission(request):
            raise PermissionDenied
        principal = human_principal(request)
        may_act = principal is not None and request.user.has_perm(self.revert_permission)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"Confirm a {self.lineage_label} revert",
            "number": number,
            "button": button,
            "may_act": may_act,
            "what_label": self.what_label,
        }
        status = 200
        if request.method == "POST":
            status = self._act(request, number, act, principal, may_act, context)
            if status == 302:
                return HttpResponseRedirect(context["redirect"])
        context["description"] = describe(number)
        return render(request, self.confirm_template, context, status=status)

    def _act(
        self,
        request: HttpRequest,
        number: int,
        act: Callable[..., dict[str, Any]],
        principal: Any,
        may_act: bool,
        context: dict[str, Any],
    ) -> int:
        if not may_act:
            context["error"] = (
                "Only a person on the human allowlist can revert (this login is not linked to one, or lacks "
                "the revert permission). Nothing was changed."
            )
            return 403
        form = ConfirmRevertForm(request.POST)
        if not form.is_valid():
            context["error"] = "This form is incomplete; reload the page and confirm again."
            return 400
        expected = form.cleaned_data["expected_version"]
        try:
            with transaction.atomic():
                result = act(number=number, principal=principal, expected_version=expected)
        except Refusal as refusal:
            context["error"] = refusal.reason
            if refusal.extra.get("retry"):
                context["error"] = (
                    f"The {self.lineage_label} changed since this page was shown; nothing was changed. "
                    "Review the diff below (it is current) and confirm again."
                )
            return 409
        messages.success(
            request,
            f"Done: version {result['version']} ({result['operation']}) recorded, by {principal.name}.",
        )
        context["redirect"] = reverse(f"admin:{self._url_name('change')}", args=[result["version"]])
        return 302

    # --- list actions leading to the pages ------------------------------------------------------------
    def _one(self, request: HttpRequest, queryset: QuerySet) -> Any:
        if queryset.count() != 1:
            messages.error(request, "Select exactly one version.")
            return None
        return queryset.first()

    @admin.action(description="Undo the selected change…", permissions=["view"])
    def undo_selected(self, request: HttpRequest, queryset: QuerySet) -> HttpResponseRedirect | None:
        version = self._one(request, queryset)
        if version is None:
            return None
        return HttpResponseRedirect(reverse(f"admin:{self._url_name('undo')}", args=[version.pk]))

    @admin.action(description="Revert to the selected version…", permissions=["view"])
    def revert_to_selected(self, request: HttpRequest, queryset: QuerySet) -> HttpResponseRedirect | None:
        version = self._one(request, queryset)
        if version is None:
            return None
        return HttpResponseRedirect(reverse(f"admin:{self._url_name('restore')}", args=[version.pk]))
