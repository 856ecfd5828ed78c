"""Bearer tokens and principals: issue, digest, authenticate, revoke.

Tokens are random, shown once, and stored only as SHA-256 digests. Lookup is by digest (an
index probe reveals nothing about the token: finding a preimage of SHA-256 is infeasible), and the
stored digest is then compared with `hmac.compare_digest`. The built-in human principal `owner`
takes its token from the `OPERATOR_TOKEN` setting: the first request presenting that token (or
`python3 manage.py serve`) adopts its digest, so rotating the setting rotates the token.
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

from operator_site.compiled_sql import row_where
from operator_site.models import Principal

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
    if not token:
        return None
    presented = digest(token)
    principal = _by_digest(presented)
    if (
        principal is None
        and settings.OPERATOR_TOKEN
        and hmac.compare_digest(presented, digest(settings.OPERATOR_TOKEN))
    ):
        principal = adopt_owner_token()
    if (
        principal is None
        or not principal.active
        or not hmac.compare_digest(principal.token_digest, presented)
    ):
        return None
    now = timezone.now()
    if principal.last_used_at is None or now - principal.last_used_at > LAST_USED_RESOLUTION:
        Principal.objects.filter(pk=principal.pk).update(last_used_at=now)
        principal.last_used_at = now
    return principal


def _by_digest(token_digest: str) -> Principal | None:
    """The principal holding this digest. It runs before every request: the compiled-once lookup
    (the ORM's query compilation costs several times the lookup itself)."""
    return row_where(Principal, token_digest=token_digest)


def adopt_owner_token() -> Principal | None:
    """Make `OPERATOR_TOKEN` the owner's token (creating the owner if needed). Returns the owner."""
    if not settings.OPERATOR_TOKEN:
        return None
    wanted = digest(settings.OPERATOR_TOKEN)
    try:
        with transaction.atomic():
            owner, _ = Principal.objects.get_or_create(
                name=Principal.OWNER_NAME, defaults={"kind": Principal.Kind.HUMAN}
            )
            if not hmac.compare_digest(owner.token_digest or "", wanted):
                owner.token_digest = wanted
                owner.save(update_fields=["token_digest"])
    except IntegrityError:
        # Another request adopted it at the same moment, or another principal holds this token.
        owner = Principal.objects.filter(name=Principal.OWNER_NAME, token_digest=wanted).first()
    return owner


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
