"""The human approval channel of the JSON API (django-ninja), mounted at /api/intents/.

For the person's own scripts, phone shortcuts and future human channels: the same library functions
the admin approval queue calls (`intents/approval.py`), behind the same rule — a person. Two ways in:

- **a human principal's bearer token** (`Authorization: Bearer …`, looked up as the MCP door looks it
  up: `operator_site/face/auth.py`, counted against the same per-token rate limit). An agent's token
  is refused (401) — tokens of agents never reach approval, whatever their allowlist says. No CSRF
  check: a browser never attaches a bearer header on its own, so a foreign page cannot forge one;
- **a Django session** of an active staff login linked to an active human principal, with Django's
  CSRF check on every unsafe request (a cookie is sent by the browser on its own: CSRF applies).

- `GET  /api/intents/pending`        the approval queue (each intent with `seen`, its payload digest)
- `GET  /api/intents/{id}`           one intent, with `seen` and `follow_through` (what Accept leads to)
- `POST /api/intents/{id}/decide`    `{"decision": "accept"|"edit"|"respond"|"ignore"|"reject",
                                       "seen": <digest>, ...}` → the intent after the decision
- `POST /api/intents/{id}/withdraw`  take back an approved intent the executor has not claimed yet
"""

from __future__ import annotations

from typing import Any, Literal

from django.http import HttpRequest
from ninja import Field, Router, Schema
from ninja.errors import HttpError
from ninja.security import HttpBearer, SessionAuthIsStaff

from intents import approval
from intents.answers import decision_dict, first_decision, intent_dict
from intents.handlers import follow_through
from intents.lifecycle import pending_approvals
from intents.models import MAX_AMOUNT_CENTS, Intent
from operator_site.face.ratelimit import authenticate_and_admit
from operator_site.models import Principal
from operator_site.refusals import Refusal

router = Router(tags=["intents (human channel)"])

# Refusals that mean "the request itself is incomplete or malformed" rather than "the state says no".
_BAD_REQUEST = frozenset(
    {"seen_required", "text_required", "text_too_long", "title_required", "title_too_long", "invalid_amount"}
)


class StaffSession(SessionAuthIsStaff):
    """Django's session cookie of a staff login (CSRF checked by ninja for unsafe methods)."""


class HumanBearer(HttpBearer):
    """`Authorization: Bearer <token>` of an active *human* principal. An agent's token, a revoked
    token or junk authenticates nothing here (401); over the token's rate limit: 429."""

    openapi_description = "A human principal's token (`manage.py operator_token create <name> --human`)."

    def authenticate(self, request: HttpRequest, token: str) -> Principal | None:
        principal, rate = authenticate_and_admit(token)
        if principal is None or not principal.is_human:
            # A caller that chose a bearer token is answered about that token (not passed on to the
            # session check, whose CSRF refusal would only confuse it).
            raise HttpError(401, "This bearer token is not an active person's: agents never reach approval.")
        if rate is not None and not rate.allowed:
            raise HttpError(429, f"Too many requests with this token; retry in {rate.retry_after_s} s.")
        return principal


# A person, either way: the bearer first (no CSRF: see the module docstring), then the session.
HUMAN = [HumanBearer(), StaffSession()]


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
    amount_cents: int | None = Field(
        None, ge=0, le=MAX_AMOUNT_CENTS, description="edit: the new amount (null removes it)."
    )
    text: str | None = Field(None, max_length=approval.MAX_RESPONSE_CHARS, description="respond: your words.")
    note: str = Field("", max_length=2000, description="accept/ignore/reject: a note for the record.")

    model_config = {"extra": "forbid"}


class WithdrawIn(Schema):
    note: str = Field("", max_length=2000, description="Why, for the record (optional).")

    model_config = {"extra": "forbid"}


def _with_seen(intent: Intent) -> dict[str, Any]:
    decision = first_decision(intent)
    return {
        **intent_dict(intent),
        "seen": intent.payload_digest,
        "decision": decision_dict(decision) if decision else None,
        # What Accept leads to (which handler carries it out, or that nothing will): see handlers.
        "follow_through": follow_through(intent.action_type),
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
        approval.human_principal_of(request.auth)  # type: ignore[attr-defined]
    except Refusal as refusal:
        return _refused(refusal)
    return None


@router.get(
    "/pending",
    auth=HUMAN,
    response={200: list[dict[str, Any]], 403: Refused},
    summary="The approval queue",
    description="The intents awaiting the person's approval, oldest first (at most 200). Each carries "
    "`seen` (the payload digest to send back with accept or edit) and `follow_through` (what Accept "
    "leads to). 403 `not_human`: a staff login not linked to an active human principal.",
)
def pending(request: HttpRequest) -> Any:
    refused = _human_or_refused(request)
    if refused:
        return refused
    return [_with_seen(intent) for intent in pending_approvals(limit=200)]


@router.get(
    "/{intent_id}",
    auth=HUMAN,
    response={200: dict[str, Any], 403: Refused, 404: Refused},
    summary="One intent, with the digest to decide on",
    description="The intent in any status, with `seen`, its open question (`decision`) and "
    "`follow_through`: which handler carries it out after Accept, or that nothing will (no handler for "
    "its type, or no brain configured). 404 `not_found`.",
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
    auth=HUMAN,
    response={200: dict[str, Any], 400: Refused, 403: Refused, 404: Refused, 409: Refused},
    summary="Decide on an intent: accept, edit (then approve), respond, ignore, reject",
    description="Acts once, only on an intent still pending approval and — for accept and edit — still "
    "the payload you saw (`seen`). Answers the intent after the decision, with `follow_through` (after "
    "an accept: what happens next, plainly, including that nothing will run until a brain is "
    "configured). 400: the request is incomplete (`seen_required`, ...); 409: the state says no "
    "(`not_pending`, `payload_changed`, `expired`, `denied_by_gate`, `conflict`, ...).",
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
            by=request.auth,  # type: ignore[attr-defined]  # a staff user or a human principal
            via="api",
            seen=payload.seen,
            text=payload.text,
            note=payload.note,
            **edit,
        )
    except Refusal as refusal:
        return _refused(refusal)
    return _with_seen(Intent.objects.get(pk=intent.pk))


@router.post(
    "/{intent_id}/withdraw",
    auth=HUMAN,
    response={200: dict[str, Any], 403: Refused, 404: Refused, 409: Refused},
    summary="Withdraw an approved intent before the executor claims it",
    description="An approved intent (or one the gate queued) that the executor has not claimed yet "
    "becomes `cancelled`; its approval decision `withdrawn`; the history records who withdrew it. "
    "409 `already_claimed` once the executor has claimed it (it is executing: only the executor "
    "finishes it), `not_withdrawable` in any other status. Race-free: one conditional update.",
)
def withdraw(request: HttpRequest, intent_id: int, payload: WithdrawIn) -> Any:
    try:
        intent = approval.withdraw_intent(intent_id, by=request.auth, via="api", note=payload.note)  # type: ignore[attr-defined]
    except Refusal as refusal:
        return _refused(refusal)
    return _with_seen(intent)
