"""Admin for the intents app: directives (read; lift), the intent approval queue with its four
affordances as confirmation pages, decisions and the intents' history (read-only).

The approval queue calls the human-only library function (`intents/approval.py`): GET shows the
intent exactly as it would be approved (and changes nothing), POST acts — only if the intent is
still pending and still the payload shown (its digest travels with the form), only for a staff
login linked to an active human principal, and recording who decided.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import BooleanField, ExpressionWrapper, QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html

from intents import approval, proposal_page
from intents.directives import clear_directives
from intents.handlers import follow_through
from intents.lifecycle import format_amount
from intents.models import (
    MAX_AMOUNT_CENTS,
    Decision,
    Directive,
    Intent,
    IntentEvent,
    IntentStatus,
    in_force,
)
from operator_site import proposals
from operator_site.admin import ReadOnlyAdmin, identifier_column
from operator_site.calendar_edge import local_text
from operator_site.refusals import Refusal
from operator_site.views import human_principal


@admin.register(Directive)
class DirectiveAdmin(ReadOnlyAdmin):
    list_display = (
        "kind",
        "topic_shown",
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
    exclude = ("topic",)
    readonly_fields = ("topic_shown",)
    topic_shown = identifier_column("topic")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Directive]:
        # The one rule of a directive in force (intents.models.in_force), evaluated by the database.
        rule = ExpressionWrapper(in_force(timezone.now()), output_field=BooleanField())
        return super().get_queryset(request).annotate(is_in_force=rule)

    @admin.display(boolean=True, description="in force")
    def in_force(self, obj: Directive) -> bool:
        return obj.is_in_force

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
                    lifted += len(clear_directives(principal=principal, directive_id=directive.id))
            except Refusal:
                continue  # already expired or cleared
        messages.success(request, f"Lifted {lifted} directive(s).")


# --- intents: the approval queue --------------------------------------------------------------------
class _DecideForm(forms.Form):
    """What every affordance posts: the digest of the payload the page showed, and a note. Django's
    CharField refuses NUL characters; lengths are bounded; nothing a person types can make a 500."""

    seen = forms.CharField(max_length=64, required=False)
    note = forms.CharField(max_length=2000, required=False)


class EditApproveForm(_DecideForm):
    """ "Edit, then approve": the edited title, body and amount. The amount is a whole number of cents
    within what an agent may record (0..10^13); `²`, `1e5`, `-1` or a 40-digit number are refused."""

    title = forms.CharField(max_length=300)
    body = forms.CharField(max_length=20_000, required=False, strip=False)
    amount_cents = forms.IntegerField(min_value=0, max_value=MAX_AMOUNT_CENTS, required=False)


class RespondForm(_DecideForm):
    text = forms.CharField(max_length=approval.MAX_RESPONSE_CHARS)


DECIDE_FORMS: dict[str, type[_DecideForm]] = {"edit": EditApproveForm, "respond": RespondForm}


def form_errors(form: forms.Form) -> str:
    """A form's errors as one sentence for the page (field: message; …)."""
    return "; ".join(
        f"{name}: {' '.join(str(m) for m in errors)}" if name != "__all__" else " ".join(errors)
        for name, errors in form.errors.items()
    )


AFFORDANCE_LABELS = {
    "accept": "Accept — approve it exactly as shown",
    "edit": "Edit, then approve the edited version",
    "respond": "Respond — reply in your own words; it stays pending",
    "ignore": "Ignore — park the question; it stays pending until it expires",
    "reject": "Reject — say no; it will never be done",
}


class IntentEventInline(admin.TabularInline):
    model = IntentEvent
    extra = 0
    can_delete = False
    fields = ("created_at", "event", "from_status", "to_status", "by", "via", "note")
    readonly_fields = fields
    ordering = ("id",)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class PendingFirst(admin.SimpleListFilter):
    title = "queue"
    parameter_name = "queue"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("pending", "awaiting your approval")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Intent]) -> QuerySet[Intent]:
        if self.value() == "pending":
            return queryset.filter(status=IntentStatus.PENDING_APPROVAL)
        return queryset


_INTENT_IDENTIFIERS = ("action_type", "recipient", "topic")


@admin.register(Intent)
class IntentAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "created_at",
        "action_type_shown",
        "title",
        "recipient_shown",
        "amount",
        "status",
        "policy_decision",
        "actor",
        "decide",
    )
    list_filter = (PendingFirst, "status", "policy_decision", "action_type")
    search_fields = ("title", "recipient", "body", "idempotency_key")
    date_hierarchy = "created_at"
    inlines = (IntentEventInline,)
    # `due` is shown through `due_local`: an instant at the edge of the calendar (stored before the
    # door refused such values) cannot be written in every zone, and must not make the page a 500.
    # The identifiers (action type, recipient, topic) through `identifier_column`: one that mixes
    # directions shows each right-to-left character as a token, so it reads in the order it is stored.
    readonly_fields = (
        *(f.name for f in Intent._meta.fields if f.name not in ("due", *_INTENT_IDENTIFIERS)),
        *(f"{name}_shown" for name in _INTENT_IDENTIFIERS),
        "due_local",
        "decide",
    )
    exclude = ("due", *_INTENT_IDENTIFIERS)
    action_type_shown = identifier_column("action_type", "type")
    recipient_shown = identifier_column("recipient")
    topic_shown = identifier_column("topic")

    @admin.display(description="due")
    def due_local(self, obj: Intent) -> str:
        return local_text(obj.due) if obj.due else "—"

    @admin.display(description="amount")
    def amount(self, obj: Intent) -> str:
        return format_amount(obj.amount_cents) or "—"

    @admin.display(description="decide")
    def decide(self, obj: Intent) -> str:
        if obj.status == IntentStatus.PENDING_APPROVAL:
            label = "decide…"
        elif obj.status in approval.WITHDRAWABLE:
            label = "withdraw…"
        else:
            return "—"
        url = reverse("admin:intents_intent_decide", args=[obj.pk])
        return format_html('<a href="{}">{}</a>', url, label)

    def get_urls(self) -> list[Any]:
        view = self.admin_site.admin_view(self.decide_view)
        return [
            path("<int:intent_id>/decide/", view, name="intents_intent_decide"),
            path("<int:intent_id>/decide/<str:affordance>/", view, name="intents_intent_decide_one"),
            path(
                "<int:intent_id>/withdraw/",
                self.admin_site.admin_view(self.withdraw_view),
                name="intents_intent_withdraw",
            ),
            *super().get_urls(),
        ]

    def withdraw_view(self, request: HttpRequest, intent_id: int) -> HttpResponse:
        """POST: take back an approved intent the executor has not claimed yet (one click, CSRF)."""
        if request.method != "POST":
            return HttpResponse(status=405, headers={"Allow": "POST"})
        if not self.has_view_permission(request):
            raise PermissionDenied
        intent = Intent.objects.filter(pk=intent_id).first()
        if intent is None:
            raise Http404("no such intent")
        form = _DecideForm(request.POST)
        note = form.cleaned_data["note"] if form.is_valid() else ""
        try:
            withdrawn = approval.withdraw_intent(intent.pk, by=request.user, via="admin", note=note)
        except Refusal as refusal:
            status = 403 if refusal.code == "not_human" else 409
            intent.refresh_from_db()
            return self._page(request, intent, None, refusal.reason, status=status)
        messages.success(
            request, f"Withdrew intent #{withdrawn.pk}: it is cancelled and will not be carried out."
        )
        return redirect(reverse("admin:intents_intent_change", args=[withdrawn.pk]))

    def decide_view(
        self, request: HttpRequest, intent_id: int, affordance: str | None = None
    ) -> HttpResponse:
        """GET: the intent as it would be decided, and the affordances (changes nothing).
        POST to `<affordance>/`: do it, if still pending and still what was shown."""
        if request.method not in {"GET", "POST"}:
            return HttpResponse(status=405, headers={"Allow": "GET, POST"})
        if not self.has_view_permission(request):
            raise PermissionDenied
        if affordance is not None and affordance not in approval.AFFORDANCES:
            raise Http404("no such affordance")
        intent = Intent.objects.filter(pk=intent_id).first()
        if intent is None:
            raise Http404("no such intent")
        if request.method == "POST":
            if affordance is None:
                return self._page(request, intent, None, "Choose what to do with this intent.", status=400)
            return self._act(request, intent, affordance)
        return self._page(request, intent, affordance)

    def _act(self, request: HttpRequest, intent: Intent, affordance: str) -> HttpResponse:
        form = DECIDE_FORMS.get(affordance, _DecideForm)(request.POST)
        if not form.is_valid():
            return self._page(
                request, intent, affordance, f"Nothing was changed — {form_errors(form)}", status=400
            )
        data = form.cleaned_data
        fields: dict[str, Any] = {}
        if affordance == "edit" and proposals.kind_of(intent.action_type) is not None:
            try:  # a proposal's Edit form carries one field per value (intents/proposal_page.py)
                fields = {"title": data["title"], "body": proposal_page.edited_body(intent, request.POST)}
            except (ValueError, Refusal) as exc:
                reason = exc.reason if isinstance(exc, Refusal) else str(exc)
                return self._page(request, intent, affordance, f"Nothing was changed — {reason}", status=400)
        elif affordance == "edit":
            fields = {"title": data["title"], "body": data["body"], "amount_cents": data["amount_cents"]}
        try:
            decided = approval.decide(
                intent.pk,
                affordance,
                by=request.user,
                via="admin",
                seen=data["seen"] or None,
                text=data.get("text"),
                note=data["note"],
                **fields,
            )
        except Refusal as refusal:
            status = 403 if refusal.code == "not_human" else 409
            intent.refresh_from_db()
            return self._page(request, intent, affordance, refusal.reason, status=status)
        messages.success(request, _done_message(affordance, decided))
        return redirect(reverse("admin:intents_intent_change", args=[decided.pk]))

    def _page(
        self,
        request: HttpRequest,
        intent: Intent,
        affordance: str | None,
        error: str | None = None,
        status: int = 200,
    ) -> HttpResponse:
        decision = intent.decisions.select_related("decided_by", "responded_by").first()
        pending = intent.status == IntentStatus.PENDING_APPROVAL
        shown = [affordance] if affordance else list(approval.AFFORDANCES)
        context = {
            **self.admin_site.each_context(request),
            "title": f"Decide on intent #{intent.pk}",
            "opts": self.model._meta,
            "intent": intent,
            "decision": decision,
            "amount": format_amount(intent.amount_cents),
            "due": local_text(intent.due) if intent.due else None,
            "events": intent.events.select_related("by").order_by("id"),
            "affordances": [(name, AFFORDANCE_LABELS[name]) for name in shown],
            "pending": pending,
            "can_decide": pending and human_principal(request) is not None,
            "is_human": human_principal(request) is not None,
            # What Accept leads to — or, once approved, what is about to happen (intents/executor.py).
            "follow_through": follow_through(intent.action_type),
            "withdrawable": intent.status in approval.WITHDRAWABLE,
            "error": error,
            # A proposed change to the person's model: its diff, computed now (see proposal_page).
            "proposal": proposal_page.proposal_context(intent) if pending else None,
        }
        return render(request, "intents/decide.html", context, status=status)


def _done_message(affordance: str, intent: Intent) -> str:
    """The confirmation after a decision. After an approval it says plainly what happens next — which
    handler carries it out, or that nothing will (no handler, or no brain configured)."""
    if affordance in {"accept", "edit"} and intent.status == IntentStatus.EXECUTED:
        return f"Approved intent #{intent.pk}: the change is applied ({_result_note(intent)})."
    after = follow_through(intent.action_type)["text"]
    return {
        "accept": f"Approved intent #{intent.pk}. {after}",
        "edit": f"Edited and approved intent #{intent.pk}. {after}",
        "respond": f"Your response to intent #{intent.pk} is recorded; it stays pending.",
        "ignore": f"Parked the question about intent #{intent.pk}; it stays pending until it expires.",
        "reject": f"Rejected intent #{intent.pk}.",
    }[affordance]


def _result_note(intent: Intent) -> str:
    result = intent.execution_result if isinstance(intent.execution_result, dict) else {}
    if result.get("version"):
        return f"version {result['version']} of the {result.get('model', 'model')}"
    return "done"


@admin.register(Decision)
class DecisionAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "created_at",
        "title",
        "status",
        "intent_link",
        "decided_by",
        "decided_via",
        "decided_at",
    )
    list_filter = ("status", "decided_via")
    search_fields = ("title", "detail", "response", "note")
    readonly_fields = [f.name for f in Decision._meta.fields]
    list_select_related = ("intent", "decided_by")

    @admin.display(description="intent")
    def intent_link(self, obj: Decision) -> str:
        if obj.intent_id is None:
            return "—"
        return format_html(
            '<a href="{}">#{}</a>',
            reverse("admin:intents_intent_change", args=[obj.intent_id]),
            obj.intent_id,
        )


@admin.register(IntentEvent)
class IntentEventAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "intent", "event", "from_status", "to_status", "by", "via")
    list_filter = ("event", "via")
    list_select_related = ("intent", "by")
