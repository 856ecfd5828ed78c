"""Starting up, or failing in one line.

A person who mistypes a setting, starts the service with PostgreSQL down, points the data folder at
a place they cannot write, or runs a second `serve` on a port in use should read ONE line saying
which setting, what was wrong and what to do — not a 98-line traceback, and not after a one-time
credential was printed for nothing.

- `explain(exc)`: the line (and exit status) for an exception that reached manage.py, or None for
  a real bug (which keeps its traceback).
- `check_database()`: connect once and say what is wrong in those terms.
- `bind_listener(host, port)`: the listening socket for `serve`, bound BEFORE anything is created
  or printed, so "port in use" ends the command with nothing set up.
"""

from __future__ import annotations

import errno
import socket
from urllib.parse import quote

from django.core.exceptions import ImproperlyConfigured

DOCS = "docs/configuration.md"
# sysexits.h: a configuration error is not retried by systemd (RestartPreventExitStatus=78); an
# unavailable service (the database, the port) may be.
EX_UNAVAILABLE = 69
EX_CONFIG = 78


class StartupError(Exception):
    """A condition outside the code that stops a command: its message is the line a person reads."""

    def __init__(self, message: str, status: int = EX_UNAVAILABLE) -> None:
        super().__init__(message)
        self.status = status


def explain(exc: BaseException) -> tuple[str, int] | None:
    """The one line (and exit status) for an exception a person can fix, else None."""
    from django.db import utils as db_utils

    if isinstance(exc, StartupError):
        return f"operator: {exc}", exc.status
    if isinstance(exc, ImproperlyConfigured):
        return f"operator: configuration error: {exc}", EX_CONFIG
    if isinstance(exc, db_utils.OperationalError | db_utils.InterfaceError):
        return f"operator: {database_problem(_cause(exc))}", EX_UNAVAILABLE
    if isinstance(exc, db_utils.ProgrammingError) and _unmigrated(str(exc)):
        return f"operator: {database_problem(exc)}", EX_UNAVAILABLE
    return None


def _cause(exc: BaseException) -> BaseException:
    """What stopped the connection: a pool that timed out waiting for one says only that, so the
    database is asked directly, outside the pool, for the reason (connection refused, ...)."""
    import psycopg_pool

    if not isinstance(exc.__cause__, psycopg_pool.PoolTimeout):
        return exc
    from django.db import utils as db_utils

    from operator_site.sql import probe

    try:
        probe()
    except (db_utils.OperationalError, db_utils.InterfaceError) as direct:
        return direct
    return exc


def _unmigrated(message: str) -> bool:
    lowered = message.lower()
    return "no such table" in lowered or ("relation" in lowered and "does not exist" in lowered)


def database_label() -> str:
    """The database as a person configured it, without its password."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        return f"the SQLite database {db['NAME']}"
    user = quote(db.get("USER") or "", safe="")
    host = db.get("HOST") or "localhost"
    port = db.get("PORT") or 5432
    where = f"{host}:{port}" if not str(host).startswith("/") else f"socket {host}"
    return f"postgres://{user + '@' if user else ''}{where}/{db.get('NAME')}"


def database_problem(exc: BaseException) -> str:
    """What is wrong with the database connection, and what to do, in one line."""
    from django.conf import settings

    message = str(exc).strip()
    lowered = message.lower()
    label = database_label()
    db = settings.DATABASES["default"]
    if _unmigrated(message):
        return f"{label} is not set up (missing tables): run `python3 manage.py migrate` first."
    if "unable to open database file" in lowered:
        return (
            f"cannot open {label} (DATABASE_URL / OPERATOR_DATA_DIR): its folder is missing or not "
            "writable by this user. Make it writable, or point OPERATOR_DATA_DIR at a writable folder."
        )
    if "connection refused" in lowered:
        why = "connection refused (nothing is listening there)"
        fix = "start PostgreSQL, or fix the host and port in DATABASE_URL"
    elif "does not exist" in lowered and "database" in lowered:
        why = f'the database "{db.get("NAME")}" does not exist'
        fix = f"create it (createdb {db.get('NAME')}), or fix the name in DATABASE_URL"
    elif "password authentication failed" in lowered or "authentication" in lowered:
        why = "the server refused the user name or password"
        fix = "fix the credentials in DATABASE_URL"
    elif "could not translate host name" in lowered or "name or service not known" in lowered:
        why = "the host name is unknown"
        fix = "fix the host in DATABASE_URL"
    elif "timeout" in lowered:
        why = "the server did not answer in time"
        fix = "check that PostgreSQL is up and reachable (firewall, host, port)"
    else:
        first = message.splitlines()[0] if message else type(exc).__name__
        why = first[:300]
        fix = "check DATABASE_URL and that the database server is up"
    return f"cannot reach {label} (DATABASE_URL): {why}. {fix[0].upper() + fix[1:]} (see {DOCS})."


def check_database() -> None:
    """Connect once; a database that cannot be reached raises StartupError with the line."""
    from django.db import utils as db_utils

    from operator_site.sql import probe

    try:
        probe()
    except (db_utils.OperationalError, db_utils.InterfaceError) as exc:
        raise StartupError(database_problem(exc)) from None


def bind_listener(host: str, port: int) -> socket.socket:
    """The listening socket `serve` hands to uvicorn, bound now so a port in use is found before
    anything is set up. Declared as TCP (see operator_site/serving.py: TCP_NODELAY on accepted
    sockets)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        # As uvicorn does: a restart may rebind while old connections sit in TIME_WAIT.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        shown = f"[{host.strip('[]')}]" if family == socket.AF_INET6 else host
        if exc.errno == errno.EADDRINUSE:
            raise StartupError(
                f"port {port} on {shown} is already in use (another program, or another `serve`, is "
                f"listening there). Nothing was set up. Stop that program, or choose another port: "
                f"python3 manage.py serve --port {port + 1}"
            ) from None
        if exc.errno == errno.EACCES:
            raise StartupError(
                f"not allowed to listen on port {port} (ports below 1024 need privileges). Use a port "
                "above 1024 (--port 8000) behind a reverse proxy (docs/deploy.md)."
            ) from None
        if exc.errno == errno.EADDRNOTAVAIL or isinstance(exc, socket.gaierror):
            raise StartupError(
                f"cannot listen on {shown}: it is not an address of this machine. Use --host 127.0.0.1 "
                "(this machine only) or --host 0.0.0.0 (every interface)."
            ) from None
        raise StartupError(f"cannot listen on {shown}:{port}: {exc.strerror or exc}.") from None
    sock.set_inheritable(True)
    return sock
