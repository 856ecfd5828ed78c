"""`python3 manage.py operator_token create|list|revoke`: issue and revoke bearer tokens.

    operator_token create NAME --human|--agent [--tools a,b,...] [--user USERNAME] [--rotate]
    operator_token create --runner morning|night     (agent "morning-runner"/"night-runner", its own list)
    operator_token create --onboarding               (agent "onboarding": read-only context tools)
    operator_token list
    operator_token revoke NAME

`create` prints the new token alone on the last line of its output (scripts can take `tail -n1`).
It is shown once; only its SHA-256 digest is stored.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from operator_site.face.auth import issue_token, revoke
from operator_site.face.registry import DECLARED_TOOLS
from operator_site.models import Principal
from operator_site.powers import ROLES


class Command(BaseCommand):
    help = "Create, list and revoke the bearer tokens of principals."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="create a principal (or --rotate an existing one's token)")
        create.add_argument("name", nargs="?")
        kind = create.add_mutually_exclusive_group()
        kind.add_argument("--human", action="store_true", help="a person on the human allowlist")
        kind.add_argument("--agent", action="store_true", help="an autonomous agent")
        kind.add_argument(
            "--runner", choices=["morning", "night"], help="a scoped autonomous runner (docs/powers.md)"
        )
        kind.add_argument(
            "--onboarding", action="store_true", help="the onboarding agent: read-only context tools"
        )
        create.add_argument("--tools", help="comma-separated tool allowlist (default: every tool)")
        create.add_argument("--user", help="link a human to this Django (admin) username")
        create.add_argument(
            "--rotate", action="store_true", help="issue a new token for an existing principal"
        )
        sub.add_parser("list", help="list principals")
        rev = sub.add_parser("revoke", help="revoke a principal's token")
        rev.add_argument("name")

    def handle(self, *args: Any, **opts: Any) -> None:
        getattr(self, f"_{opts['action']}")(opts)

    def _tools(self, raw: str | None) -> list[str] | None:
        if raw is None:
            return None
        tools = [t.strip() for t in raw.split(",") if t.strip()]
        unknown = [t for t in tools if t not in DECLARED_TOOLS]
        if unknown:
            raise CommandError(f"unknown tool(s): {', '.join(unknown)}")
        return tools

    @transaction.atomic
    def _create(self, opts: dict[str, Any]) -> None:
        role = (
            f"{opts['runner']}-runner" if opts["runner"] else ("onboarding" if opts["onboarding"] else None)
        )
        if role:
            if opts["tools"] is not None:
                raise CommandError("a scoped role's tools come from the power table; --tools does not apply")
            opts = {**opts, "agent": True, "tools": ",".join(ROLES[role]), "name": opts["name"] or role}
        if not opts["name"]:
            raise CommandError("give the principal a NAME")
        name = opts["name"]
        existing = Principal.objects.filter(name=name).first()
        if existing and not opts["rotate"]:
            raise CommandError(f"principal {name!r} exists; use --rotate to issue it a new token")
        if opts["rotate"]:
            if existing is None:
                raise CommandError(f"no principal named {name!r}")
            principal = existing
        else:
            if not (opts["human"] or opts["agent"]):
                raise CommandError("say --human or --agent")
            principal = Principal(
                name=name, kind=Principal.Kind.HUMAN if opts["human"] else Principal.Kind.AGENT
            )
            principal.full_clean(exclude=["token_digest", "user"])
        if opts["tools"] is not None:
            principal.tools = self._tools(opts["tools"])
        if opts["user"]:
            if principal.kind != Principal.Kind.HUMAN:
                raise CommandError("only a human principal can be linked to an admin login")
            user = get_user_model().objects.filter(username=opts["user"]).first()
            if user is None:
                raise CommandError(f"no user named {opts['user']!r}")
            principal.user = user
        principal.save()
        token = issue_token(principal)
        scope = "every tool" if principal.tools is None else ", ".join(principal.tools)
        self.stdout.write(
            f"{'rotated' if opts['rotate'] else 'created'} {principal.kind} principal "
            f"{principal.name!r} ({scope}); the token is shown once:"
        )
        self.stdout.write(token)

    def _list(self, opts: dict[str, Any]) -> None:
        for p in Principal.objects.select_related("user"):
            tools = "all tools" if p.tools is None else ",".join(p.tools) or "(no tools)"
            state = "active" if p.active else "revoked"
            user = f" user={p.user.get_username()}" if p.user else ""
            used = p.last_used_at.isoformat(timespec="seconds") if p.last_used_at else "never"
            self.stdout.write(f"{p.name}\t{p.kind}\t{state}\t{tools}\tlast used {used}{user}")

    def _revoke(self, opts: dict[str, Any]) -> None:
        principal = Principal.objects.filter(name=opts["name"]).first()
        if principal is None:
            raise CommandError(f"no principal named {opts['name']!r}")
        revoke(principal)
        self.stdout.write(f"revoked {principal.name!r}")
