"""First-run set-up that `python3 manage.py serve` performs: the owner principal, its token and its
staff login. Idempotent; prints each secret exactly once, when it is created, and never stores one
in plain text."""

from __future__ import annotations

import secrets
from typing import TextIO

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from operator_site.face.auth import adopt_owner_token, issue_token
from operator_site.models import Principal


@transaction.atomic
def ensure_owner(out: TextIO) -> Principal:
    owner, _ = Principal.objects.get_or_create(
        name=Principal.OWNER_NAME, defaults={"kind": Principal.Kind.HUMAN}
    )
    if settings.OPERATOR_TOKEN:
        owner = adopt_owner_token() or owner
        out.write("operator: owner token: the value of OPERATOR_TOKEN\n")
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
