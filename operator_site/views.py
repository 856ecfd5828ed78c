"""Human-facing pages outside the admin's own: the one-tap revert link from a notice."""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from operator_site.refusals import Refusal
from operator_site.revert_links import RevertLinkError, notice_from_token, revert_from_link, revert_handler


def human_principal(request: HttpRequest):
    """The active human principal behind this staff login, or None. A staff account that is not
    linked to a human principal can look, but cannot act."""
    principal = getattr(request.user, "principal", None)
    if principal is None or not principal.is_human or not principal.active:
        return None
    return principal


@staff_member_required
@require_http_methods(["GET", "POST"])
def revert_link(request: HttpRequest, token: str) -> HttpResponse:
    """GET shows what the revert would do (and changes nothing); POST does it, once."""
    context = {**admin.site.each_context(request), "title": "Undo a change"}
    try:
        notice = notice_from_token(token)
    except RevertLinkError as exc:
        return render(request, "operator/revert_link.html", {**context, "error": str(exc)}, status=410)
    handler = revert_handler(notice.subject_kind)
    context.update({"notice": notice, "description": handler.describe(notice.subject_id)})
    if request.method == "POST":
        principal = human_principal(request)
        if principal is None:
            context["error"] = (
                "Only a person on the human allowlist can revert (this login is not linked to one)."
            )
            return render(request, "operator/revert_link.html", context, status=403)
        try:
            message = revert_from_link(notice, by=principal)
        except (RevertLinkError, Refusal) as exc:
            context["error"] = getattr(exc, "reason", None) or str(exc)
            return render(request, "operator/revert_link.html", context, status=409)
        messages.success(request, message)
        return redirect(reverse("admin:operator_site_notification_change", args=[notice.pk]))
    return render(request, "operator/revert_link.html", context)
