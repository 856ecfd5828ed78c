"""First-run set-up that `python3 manage.py serve` performs: the owner principal, its token and its
staff login. Idempotent; prints each secret exactly once, when it is created, and never stores one
in plain text."""

from __future__ import annotations

import secrets
from typing import TextIO

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from operator_site.face.auth import environment_token_state, issue_token, seed_owner_token
from operator_site.models import Principal

STALE_ENVIRONMENT_WARNING = (
    "operator: WARNING: OPERATOR_TOKEN in the environment is not the owner's token (it was rotated "
    "or replaced) and authenticates nothing; remove it, or export the current token instead.\n"
)


@transaction.atomic
def ensure_owner(out: TextIO, err: TextIO | None = None) -> Principal:
    owner, _ = Principal.objects.get_or_create(
        name=Principal.OWNER_NAME, defaults={"kind": Principal.Kind.HUMAN}
    )
    state = environment_token_state()
    if state == "unseeded":
        seeded = seed_owner_token()
        if seeded is None:  # the setting is another principal's token: never the owner's
            (err or out).write(
                "operator: WARNING: OPERATOR_TOKEN is another principal's token; it was not given to the "
                "owner (unset it, and serve again to have the owner's token made).\n"
            )
        else:
            owner = seeded
            out.write(
                "operator: owner token: seeded from OPERATOR_TOKEN (rotate it with: python3 manage.py "
                "operator_token create owner --rotate)\n"
            )
    elif state == "owner":
        out.write("operator: owner token: the value of OPERATOR_TOKEN\n")
    elif state == "not_owner":
        # One line, on stderr: the person's shell (or .env) still holds a token that no longer works.
        (err or out).write(STALE_ENVIRONMENT_WARNING)
    elif owner.token_digest is None:
        token = issue_token(owner)
        out.write(
            "operator: created the owner's bearer token. It is shown this once; keep it secret:\n"
            f"    export OPERATOR_TOKEN={token}\n"
            "  (a new one any time: python3 manage.py operator_token create owner --rotate)\n"
        )
    else:
        out.write(
            "operator: owner token: issued earlier "
            "(rotate: python3 manage.py operator_token create owner --rotate)\n"
        )

    if owner.user is None:
        User = get_user_model()
        username = settings.OPERATOR_OWNER_USERNAME
        user = User.objects.filter(username=username).first()
        if user is None:
            password = secrets.token_urlsafe(12)
            user = User.objects.create_superuser(username=username, email="", password=password)
            out.write(
                f"operator: created the admin login {username!r} with password {password}\n"
                "  (shown this once; change it with: python3 manage.py changepassword "
                f"{username})\n"
            )
        owner.user = user
        owner.save(update_fields=["user"])
    return owner
