"""`python3 manage.py serve [--host H] [--port N] [--workers N]`: check what can be checked, migrate,
make sure the owner can get in, and serve with uvicorn.

The order matters: the listening port is bound and the database reached BEFORE the owner's token
or admin password is created, since those are printed only once. A port in use or a database that
cannot be reached ends the command with one line (operator_site/preflight.py) and nothing set up.
"""

from __future__ import annotations

from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from operator_site.bootstrap import ensure_owner
from operator_site.mail import prints_to_console
from operator_site.preflight import bind_listener, check_database
from operator_site.serving import serve


class Command(BaseCommand):
    help = "Migrate the database, ensure the owner's token and login, and serve the operator with uvicorn."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="the address to listen on (127.0.0.1)")
        parser.add_argument("--port", type=int, default=8000, help="the port to listen on (default 8000)")
        parser.add_argument("--workers", type=int, default=1, help="uvicorn worker processes (default 1)")
        parser.add_argument("--no-access-log", action="store_true")

    def handle(self, *args: Any, **opts: Any) -> None:
        host, port = opts["host"], opts["port"]
        sock = bind_listener(host, port)  # a port in use stops here, before anything is created
        try:
            check_database()
            call_command("migrate", interactive=False, verbosity=0)
            self.stdout.write("operator: database migrated")
            ensure_owner(self.stdout, self.stderr)
        except BaseException:
            sock.close()
            raise
        if prints_to_console():
            self.stdout.write(
                "operator: notices are e-mailed to the console — printed here, not sent "
                "(set EMAIL_BACKEND and EMAIL_HOST to send; docs/configuration.md)"
            )
        shown = f"[{host.strip('[]')}]" if ":" in host else host
        self.stdout.write(
            f"operator: serving MCP at http://{shown}:{port}/mcp, the admin at http://{shown}:{port}/admin/"
        )
        self.stdout.flush()
        serve(
            host=host,
            port=port,
            workers=opts["workers"],
            sock=sock,
            access_log=not opts["no_access_log"],
            log_level="info",
            lifespan="on",
        )
