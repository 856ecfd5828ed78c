"""`python3 manage.py serve`: migrate, make sure the owner can get in, and serve with uvicorn."""

from __future__ import annotations

from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from operator_site.bootstrap import ensure_owner
from operator_site.serving import serve


class Command(BaseCommand):
    help = "Migrate the database, ensure the owner's token and login, and serve the operator with uvicorn."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--workers", type=int, default=1)
        parser.add_argument("--no-access-log", action="store_true")

    def handle(self, *args: Any, **opts: Any) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        self.stdout.write("operator: database migrated")
        ensure_owner(self.stdout, self.stderr)
        self.stdout.write(
            f"operator: serving MCP at http://{opts['host']}:{opts['port']}/mcp, "
            f"the admin at http://{opts['host']}:{opts['port']}/admin/"
        )
        self.stdout.flush()
        serve(
            host=opts["host"],
            port=opts["port"],
            workers=opts["workers"],
            access_log=not opts["no_access_log"],
            log_level="info",
            lifespan="on",
        )
