"""The person's answer to a notice: acknowledging it, and the one-tap revert link behind a
high-stakes one (signed, single-use, expiring; an app registers how its notices are undone).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Protocol

from django.conf import settings
from django.core import signing
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from operator_site.models import Notification, Principal

_REVERT_SALT = "operator.revert-link"


# --- acknowledging -------------------------------------------------------------------------------
def acknowledge(notice: Notification, *, by: Principal) -> bool:
    """The person has seen it. Returns False if it was already acknowledged."""
    return bool(
        Notification.objects.filter(id=notice.id, acknowledged_at__isnull=True).update(
            acknowledged_at=timezone.now(), acknowledged_by=by
        )
    )


def unacknowledged_safety_notices() -> Any:
    return Notification.objects.filter(safety=True, acknowledged_at__isnull=True).order_by("-id")


# --- the one-tap revert link ---------------------------------------------------------------------
class RevertHandler(Protocol):
    """What an app registers to make its notices revertible (see `register_revert_handler`)."""

    def describe(self, subject_id: int) -> dict[str, Any]:
        """For the confirmation page: {"title": str, "changes": [{"what", "before", "after"}], ...}."""

    def revert(self, subject_id: int, *, by: Principal) -> str:
        """Undo the change (in the caller's transaction) and say what was done; raise Refusal to refuse."""


_REVERT_HANDLERS: dict[str, RevertHandler] = {}


def register_revert_handler(subject_kind: str, handler: RevertHandler) -> None:
    _REVERT_HANDLERS[subject_kind] = handler


def revert_handler(subject_kind: str) -> RevertHandler | None:
    return _REVERT_HANDLERS.get(subject_kind)


class RevertLinkError(Exception):
    """The link cannot be used: forged, expired, already used, or nothing to revert."""


def revert_token(notice: Notification) -> str:
    return signing.dumps({"n": notice.id}, salt=_REVERT_SALT, compress=True)


def revert_url(notice: Notification) -> str | None:
    if not notice.subject_kind or notice.subject_id is None or notice.pk is None:
        return None
    path = reverse("revert-link", kwargs={"token": revert_token(notice)})
    return f"{settings.OPERATOR_PUBLIC_URL}{path}"


def notice_from_token(token: str) -> Notification:
    try:
        data = signing.loads(
            token, salt=_REVERT_SALT, max_age=timedelta(hours=settings.OPERATOR_REVERT_LINK_HOURS)
        )
    except signing.SignatureExpired as exc:
        raise RevertLinkError("This link has expired; revert from the admin instead.") from exc
    except signing.BadSignature as exc:
        raise RevertLinkError("This link is not valid.") from exc
    notice = Notification.objects.filter(id=data.get("n")).first()
    if notice is None or not notice.subject_kind or notice.subject_id is None:
        raise RevertLinkError("There is nothing to revert behind this link.")
    if notice.revert_used_at is not None:
        raise RevertLinkError("This link has already been used.")
    if revert_handler(notice.subject_kind) is None:
        raise RevertLinkError(f"Changes of kind {notice.subject_kind!r} cannot be reverted from a link.")
    return notice


@transaction.atomic
def revert_from_link(notice: Notification, *, by: Principal) -> str:
    """Perform the revert behind a notice's link, once. Raises RevertLinkError if it was used."""
    if not Notification.objects.filter(id=notice.id, revert_used_at__isnull=True).update(
        revert_used_at=timezone.now(), revert_used_by=by
    ):
        raise RevertLinkError("This link has already been used.")
    handler = revert_handler(notice.subject_kind)
    if handler is None:
        raise RevertLinkError(f"Changes of kind {notice.subject_kind!r} cannot be reverted from a link.")
    message = handler.revert(notice.subject_id, by=by)
    if not notice.acknowledged_at:
        acknowledge(notice, by=by)
    return message
