"""Bearer tokens and principals: issue, digest, authenticate, revoke.

Tokens are random, shown once, and stored only as SHA-256 digests. Lookup is by digest (an
index probe reveals nothing about the token: finding a preimage of SHA-256 is infeasible), and the
stored digest is then compared with `hmac.compare_digest`.

**One source of truth for the owner's token: the database.** The `OPERATOR_TOKEN` setting only
*seeds* the built-in human principal `owner` — the first request presenting it (or `python3 manage.py
serve`) makes it the owner's token **only while the owner has none**. From then on the owner's token
changes only by rotation (`operator_token create owner --rotate`), which replaces the stored digest:
the old token matches no principal and, the owner having a token, is never seeded again — whatever
the environment still says. (An owner's digest is never cleared: revoking keeps it and sets the
owner inactive.) `serve` warns when the environment holds a token that is not the owner's.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from operator_site.models import Principal
from operator_site.sql import count_request, principal_and_count

TOKEN_PREFIX = "opk_"  # noqa: S105 - a recognisable prefix lets secret scanners find leaked tokens
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9._~+/=-]{16,512}")
# How stale `last_used_at` may get before a request refreshes it (saves a write on every call).
LAST_USED_RESOLUTION = timedelta(seconds=60)


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def parse_bearer(header_value: str | None) -> str | None:
    """`Authorization: Bearer <token>` → token; anything else (other schemes, junk) → None."""
    if not header_value:
        return None
    scheme, _, token = header_value.partition(" ")
    if scheme.lower() != "bearer" or not _TOKEN_CHARS.fullmatch(token):
        return None
    return token


def authenticate(token: str | None) -> Principal | None:
    """The active principal holding this token, or None. Never raises for bad input."""
    return authenticate_counted(token, None)[0]


def authenticate_counted(
    token: str | None, rate_window: int | None
) -> tuple[Principal | None, tuple[int, int] | None]:
    """`authenticate`, and — when `rate_window` is given — the request counted in that rate window
    for the principal found (count, window), in the same statement (`sql.principal_and_count`)."""
    if not token:
        return None, None
    presented = digest(token)
    principal, counted = principal_and_count(presented, rate_window)
    if (
        principal is None
        and settings.OPERATOR_TOKEN
        and hmac.compare_digest(presented, digest(settings.OPERATOR_TOKEN))
    ):
        principal = seed_owner_token()
        if principal is not None and rate_window is not None:
            counted = count_request(principal.pk, rate_window)
    if (
        principal is None
        or not principal.active
        or not hmac.compare_digest(principal.token_digest, presented)
    ):
        return None, None
    now = timezone.now()
    if principal.last_used_at is None or now - principal.last_used_at > LAST_USED_RESOLUTION:
        Principal.objects.filter(pk=principal.pk).update(last_used_at=now)
        principal.last_used_at = now
    return principal, counted


def seed_owner_token() -> Principal | None:
    """Make `OPERATOR_TOKEN` the owner's token if the owner has none yet (creating the owner if
    needed). Returns the owner when its token is now the setting's, else None: an owner who already
    has a token — the setting's, or one that replaced it by rotation — keeps it."""
    if not settings.OPERATOR_TOKEN:
        return None
    wanted = digest(settings.OPERATOR_TOKEN)
    try:
        with transaction.atomic():
            owner, _ = Principal.objects.get_or_create(
                name=Principal.OWNER_NAME, defaults={"kind": Principal.Kind.HUMAN}
            )
            # Conditional: only an owner without a token is seeded (two requests at once seed once).
            if Principal.objects.filter(pk=owner.pk, token_digest__isnull=True).update(token_digest=wanted):
                owner.token_digest = wanted
            else:
                owner.refresh_from_db(fields=["token_digest"])
    except IntegrityError:
        # Another principal holds this digest (the setting is some agent's token): never the owner's.
        return None
    return owner if hmac.compare_digest(owner.token_digest or "", wanted) else None


def environment_token_state() -> str:
    """How `OPERATOR_TOKEN` relates to the owner's stored token: "unset", "owner" (it is the owner's
    token), "unseeded" (the owner has no token yet: the setting will seed it) or "not_owner" (the
    owner's token is another one — rotated or issued since — so the setting authenticates nothing
    as the owner)."""
    if not settings.OPERATOR_TOKEN:
        return "unset"
    stored = (
        Principal.objects.filter(name=Principal.OWNER_NAME).values_list("token_digest", flat=True).first()
    )
    if stored is None:
        return "unseeded"
    return "owner" if hmac.compare_digest(stored, digest(settings.OPERATOR_TOKEN)) else "not_owner"


def issue_token(principal: Principal) -> str:
    """Give the principal a fresh token (replacing any old one) and return it; shown once."""
    token = new_token()
    fields = ["token_digest", "active", "revoked_at"]
    if principal.token_digest:
        # A replaced token may have leaked: what was recorded with it is no longer evidence.
        principal.evidence_since = timezone.now()
        fields.append("evidence_since")
    principal.token_digest = digest(token)
    principal.active = True
    principal.revoked_at = None
    principal.save(update_fields=fields)
    return token


def revoke(principal: Principal) -> None:
    """Stop the principal's token; what it recorded stops counting as the person's words, even if a
    new token is issued later."""
    principal.active = False
    principal.revoked_at = principal.evidence_since = timezone.now()
    principal.save(update_fields=["active", "revoked_at", "evidence_since"])
