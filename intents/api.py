"""The human approval channel of the JSON API (django-ninja), mounted at /api/intents/.

The same library functions the admin approval queue calls (`intents/approval.py`), behind the same
rule: a Django session of an active staff login linked to an active human principal, with CSRF on
every unsafe request. A bearer token (any agent's, even the owner's) gets 401: tokens never reach
approval. docs/gate.md ("Approval: the withheld power") lists the channels.
"""

from __future__ import annotations

from typing import Any, Literal

from django.http import HttpRequest
from ninja import Field, Router, Schema
from ninja.security import SessionAuthIsStaff

from intents import approval
from intents.answers import decision_dict, intent_dict
from intents.lifecycle import pending_approvals
from intents.models import Intent
from operator_site.refusals import Refusal

router = Router(tags=["intents (human channel)"])

# Refusals that mean "the request itself is incomplete or malformed" rather than "the state says no".
_BAD_REQUEST = frozenset(
    {"seen_required", "text_required", "text_too_long", "title_required", "title_too_long", "invalid_amount"}
)


class StaffSession(SessionAuthIsStaff):
    """Django's session cookie of a staff login (CSRF checked by ninja for unsafe methods)."""


class Refused(Schema):
    ok: bool = False
    error: str
    reason: str


class DecideIn(Schema):
    decision: Literal["accept", "edit", "respond", "ignore", "reject"]
    seen: str | None = Field(
        None, max_length=64, description="The payload digest you were shown (required to accept or edit)."
    )
    title: str | None = Field(None, max_length=300, description="edit: the new title.")
    body: str | None = Field(None, max_length=20_000, description="edit: the new body.")
    amount_cents: int | None = Field(None, ge=0, description="edit: the new amount (null removes it).")
    text: str | None = Field(None, max_length=approval.MAX_RESPONSE_CHARS, description="respond: your words.")
    note: str = Field("", max_length=2000, description="accept/ignore/reject: a note for the record.")

    model_config = {"extra": "forbid"}


def _with_seen(intent: Intent) -> dict[str, Any]:
    decision = intent.decisions.first()
    return {
        **intent_dict(intent),
        "seen": intent.payload_digest,
        "decision": decision_dict(decision) if decision else None,
    }


def _refused(refusal: Refusal) -> tuple[int, dict[str, Any]]:
    if refusal.code == "not_found":
        status = 404
    elif refusal.code == "not_human":
        status = 403
    elif refusal.code in _BAD_REQUEST:
        status = 400
    else:
        status = 409
    return status, {"ok": False, "error": refusal.code, "reason": refusal.reason}


def _human_or_refused(request: HttpRequest) -> tuple[int, dict[str, Any]] | None:
    try:
        approval.human_principal_of(request.user)
    except Refusal as refusal:
        return _refused(refusal)
    return None


@router.get(
    "/pending",
    auth=StaffSession(),
    response={200: list[dict[str, Any]], 403: Refused},
    summary="The approval queue",
)
def pending(request: HttpRequest) -> Any:
    refused = _human_or_refused(request)
    if refused:
        return refused
    return [_with_seen(intent) for intent in pending_approvals(limit=200)]


@router.get(
    "/{intent_id}",
    auth=StaffSession(),
    response={200: dict[str, Any], 403: Refused, 404: Refused},
    summary="One intent, with the digest to decide on",
)
def show(request: HttpRequest, intent_id: int) -> Any:
    refused = _human_or_refused(request)
    if refused:
        return refused
    intent = Intent.objects.filter(pk=intent_id).first()
    if intent is None:
        return 404, {"ok": False, "error": "not_found", "reason": f"There is no intent {intent_id}."}
    return _with_seen(intent)


@router.post(
    "/{intent_id}/decide",
    auth=StaffSession(),
    response={200: dict[str, Any], 400: Refused, 403: Refused, 404: Refused, 409: Refused},
    summary="Decide on an intent: accept, edit (then approve), respond, ignore, reject",
)
def decide(request: HttpRequest, intent_id: int, payload: DecideIn) -> Any:
    edit: dict[str, Any] = {}
    if payload.decision == "edit":
        edit = {"title": payload.title, "body": payload.body}
        if "amount_cents" in payload.model_fields_set:
            edit["amount_cents"] = payload.amount_cents
    try:
        intent = approval.decide(
            intent_id,
            payload.decision,
            by=request.user,
            via="api",
            seen=payload.seen,
            text=payload.text,
            note=payload.note,
            **edit,
        )
    except Refusal as refusal:
        return _refused(refusal)
    return _with_seen(Intent.objects.get(pk=intent.pk))
