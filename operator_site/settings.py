"""The operator's one settings file, driven by the environment.

Every variable is declared ONCE below, with its default and meaning (`config.<type>(NAME, default,
meaning, ...)`, operator_site/configuration.py): that declaration reads and checks it, and generates
docs/configuration.md; a test compares it with `.env.example` and with what the code reads. To add
a setting, add one line in the right section and run `python3 manage.py operator_docs`.

Defaults give a working local service on the embedded SQLite database; PostgreSQL is one
`DATABASE_URL` away. A value that does not fit stops with one line (`ConfigError`).
"""

from __future__ import annotations

import os
import zoneinfo
from pathlib import Path

import environ

from operator_site.configuration import Config

BASE_DIR = Path(__file__).resolve().parent.parent

config = Config(env_file=BASE_DIR / ".env")

# --- Where things live ------------------------------------------------------------------------------
config.section("Where things live")
DATA_DIR = config.path(
    "OPERATOR_DATA_DIR",
    BASE_DIR / "var",
    "The data folder: the embedded SQLite database, the generated SECRET_KEY, the SQLite test "
    "database. Must be writable by the service's user (with SQLite). Git-ignored.",
    attr="DATA_DIR",
    default_doc="var (next to manage.py)",
)
DATABASE_URL = config.url(
    "DATABASE_URL",
    f"sqlite:///{DATA_DIR / 'operator.sqlite3'}",
    "The database. SQLite (WAL, a busy timeout, IMMEDIATE transactions) by default; PostgreSQL "
    "(postgres://user:password@host:5432/name, or postgres://user@/name?host=/run/postgresql for a "
    "Unix socket) for production and for every guarantee across processes and hosts.",
    attr="DATABASES",
    default_doc="sqlite:///$OPERATOR_DATA_DIR/operator.sqlite3",
    example="postgres://operator:secret@127.0.0.1:5432/operator",
)
DATABASE_CONN_MAX_AGE = config.int(
    "DATABASE_CONN_MAX_AGE",
    300,
    "Seconds a database connection is kept for reuse (0: a new connection for every unit of work). "
    "SQLite, and PostgreSQL with DATABASE_POOL off; a pooled connection is kept by the pool.",
    min=0,
    attr="DATABASES",
)
DATABASE_POOL = config.bool(
    "DATABASE_POOL",
    True,
    "PostgreSQL: Django's built-in psycopg connection pool (at most OPERATOR_DB_THREADS + 2 "
    "connections per process) with server-side prepared statements. Off: one persistent, "
    "health-checked connection per thread, statements bound on the client.",
    attr="DATABASES",
)

# --- Security and access ----------------------------------------------------------------------------
config.section("Security and access")
DEBUG = config.bool("DEBUG", False, "Django's debug mode (detailed error pages). Never on in production.")
_SECRET_KEY = config.secret(
    "SECRET_KEY",
    "",
    "Django's secret (sessions, CSRF, signed revert links). Required unless DEBUG; `python3 manage.py "
    "serve` generates one into $OPERATOR_DATA_DIR/secret_key when it is not set.",
    attr="SECRET_KEY",
    default_doc="read from $OPERATOR_DATA_DIR/secret_key",
)
ALLOWED_HOSTS = config.list(
    "ALLOWED_HOSTS",
    ["127.0.0.1", "localhost", "[::1]"],
    "Host names this service answers to (Django's rules: .example.com matches subdomains). /mcp "
    "refuses other Host headers (421) and browser Origins whose host is not listed (403).",
)
OPERATOR_ALLOWED_ORIGINS = config.list(
    "OPERATOR_ALLOWED_ORIGINS", [], "Extra browser origins allowed to call /mcp (exact match)."
)
CSRF_TRUSTED_ORIGINS = config.list(
    "CSRF_TRUSTED_ORIGINS",
    [],
    "Origins trusted for the admin's CSRF checks behind a proxy on another origin.",
)
SESSION_COOKIE_SECURE = config.bool(
    "SESSION_COOKIE_SECURE", False, "Mark the session and CSRF cookies Secure (serve behind HTTPS)."
)
OPERATOR_TOKEN = config.secret(
    "OPERATOR_TOKEN",
    "",
    "Sets the bearer token of the built-in human principal `owner`, once: it becomes the owner's token "
    "only while the owner has none (the first request presenting it, or `serve`, adopts it). Changing "
    "it later changes nothing, and a rotated token never authenticates again whatever this says; rotate "
    "with `python3 manage.py operator_token create owner --rotate` (`serve` warns when this holds a "
    "token that is no longer the owner's).",
)
OPERATOR_OWNER_USERNAME = config.str(
    "OPERATOR_OWNER_USERNAME", "owner", "The admin username `serve` creates for the owner on first run."
)

# --- The MCP face -------------------------------------------------------------------------------------
config.section("The MCP face")
OPERATOR_MAX_BODY_BYTES = config.int(
    "OPERATOR_MAX_BODY_BYTES", 1024 * 1024, "Largest /mcp request body in bytes (413 beyond it).", min=1024
)
OPERATOR_RATE_LIMIT = config.int(
    "OPERATOR_RATE_LIMIT",
    1200,
    "Requests per principal per window on /mcp, counted in the database (holds across workers and "
    "hosts); beyond it HTTP 429 with Retry-After. 0 turns it off.",
    min=0,
)
OPERATOR_RATE_WINDOW_S = config.int(
    "OPERATOR_RATE_WINDOW_S", 60, "The rate limit's fixed window, in seconds.", min=1, max=86400
)
OPERATOR_DB_THREADS = config.int(
    "OPERATOR_DB_THREADS",
    8,
    "Database threads per worker process: bounds its database connections whatever the request concurrency.",
    min=1,
    max=256,
)
OPERATOR_DB_INLINE = config.choice(
    "OPERATOR_DB_INLINE",
    "auto",
    "Run the face's database work on the event-loop thread (auto: SQLite always, PostgreSQL while the "
    "worker serves no other request; true: always; false: never, a database thread). See "
    "operator_site/face/db.py.",
    choices=("auto", "true", "false"),
)
OPERATOR_OPENTELEMETRY = config.bool(
    "OPERATOR_OPENTELEMETRY",
    False,
    "Let the MCP SDK open an OpenTelemetry span per message (useful only with an exporter installed).",
)

# --- The person's day, approvals and evidence -------------------------------------------------------
config.section("The person's day, approvals and evidence")
OPERATOR_TIME_ZONE = config.str(
    "OPERATOR_TIME_ZONE",
    "UTC",
    "The person's local time zone (an IANA name such as Europe/London): operator days, and \"the same "
    'day" of intent de-duplication.',
    attr="TIME_ZONE",
)
OPERATOR_CONFIRMATION_WINDOW_HOURS = config.int(
    "OPERATOR_CONFIRMATION_WINDOW_HOURS",
    72,
    "Hours a human-authored instruction stays usable as confirmation evidence for a high-stakes change.",
    min=1,
)
OPERATOR_APPROVAL_EXPIRY_DAYS = config.int(
    "OPERATOR_APPROVAL_EXPIRY_DAYS",
    7,
    "Days an intent waits for the person's approval before it expires (ticks and `manage.py "
    "operator_expire` mark it).",
    min=1,
    max=365,
)
OPERATOR_RUN_MAX_STALE_MINUTES = config.int(
    "OPERATOR_RUN_MAX_STALE_MINUTES",
    15,
    "The longest a run may go without a heartbeat before the next start may take it over, in minutes: "
    "an agent's `stale_after_s` is capped at this, so no caller can hold the single-running lock (which "
    "stops the executor and every tick) for longer without proving it is alive.",
    min=1,
    max=120,
)

# --- Notices to the person ----------------------------------------------------------------------------
config.section(
    "Notices to the person",
    "Notices go by e-mail (Django's e-mail backend) and, if set, to a webhook that receives a signed "
    "JSON POST. With the default console backend an e-mail is printed on the server's standard "
    "output, not sent, and the notice records the channel as `console`.",
)
EMAIL_BACKEND = config.str(
    "EMAIL_BACKEND",
    "operator_site.mail.ConsoleBackend",
    "How e-mail goes out: django.core.mail.backends.smtp.EmailBackend sends through EMAIL_HOST; the "
    "default prints each e-mail to the console and sends nothing.",
)
EMAIL_HOST = config.str("EMAIL_HOST", "localhost", "The SMTP server (with the smtp backend).")
EMAIL_PORT = config.int("EMAIL_PORT", 25, "The SMTP port.", min=1, max=65535)
EMAIL_HOST_USER = config.str("EMAIL_HOST_USER", "", "The SMTP login (empty: none).")
EMAIL_HOST_PASSWORD = config.secret("EMAIL_HOST_PASSWORD", "", "The SMTP password.")
EMAIL_USE_TLS = config.bool("EMAIL_USE_TLS", False, "STARTTLS to the SMTP server.")
if EMAIL_BACKEND == "django.core.mail.backends.smtp.EmailBackend":
    # The same backend, with its sockets shut down when a send's total deadline runs out
    # (operator_site/outbound.py): a trickling SMTP server cannot hold the deliverer.
    EMAIL_BACKEND = "operator_site.outbound.SMTPBackend"
EMAIL_TIMEOUT = config.int("EMAIL_TIMEOUT", 10, "Seconds per SMTP socket operation.", min=1)
OPERATOR_EMAIL_DEADLINE_S = config.float(
    "OPERATOR_EMAIL_DEADLINE_S",
    20.0,
    "Total seconds sending one e-mail may take (connect, TLS, login, the SMTP dialogue); EMAIL_TIMEOUT "
    "bounds each socket operation only, and a server that trickles never trips it.",
    min=0.1,
    max=300,
)
DEFAULT_FROM_EMAIL = config.str("DEFAULT_FROM_EMAIL", "operator@localhost", "The From address of notices.")
OPERATOR_NOTIFY_EMAIL = config.str(
    "OPERATOR_NOTIFY_EMAIL", "owner@localhost", "Where notices are e-mailed (empty: no e-mail channel)."
)
OPERATOR_WEBHOOK_URL = config.str(
    "OPERATOR_WEBHOOK_URL", "", "A URL that receives each notice as a signed JSON POST (empty: none)."
)
OPERATOR_WEBHOOK_SECRET = config.secret(
    "OPERATOR_WEBHOOK_SECRET", "", "The HMAC key of the webhook's signature header."
)
OPERATOR_WEBHOOK_TIMEOUT_S = config.float(
    "OPERATOR_WEBHOOK_TIMEOUT_S",
    5.0,
    "Total seconds a webhook delivery may take: one wall-clock deadline for connect, send and every "
    "read (a receiver that trickles bytes is abandoned on time).",
    min=0.1,
    max=300,
)
OPERATOR_SAFETY_ESCALATE_MINUTES = config.float(
    "OPERATOR_SAFETY_ESCALATE_MINUTES",
    5.0,
    "A safety notice still not delivered this many minutes after it was made is escalated: a banner on "
    "the admin dashboard, an ERROR log line, and an alert on every channel that works.",
    min=0.1,
    max=1440,
)
OPERATOR_PUBLIC_URL = config.url(
    "OPERATOR_PUBLIC_URL",
    "http://127.0.0.1:8000",
    "The address the person reaches this service at, for links in notices (one-tap revert).",
).rstrip("/")
OPERATOR_DELIVERY = config.choice(
    "OPERATOR_DELIVERY",
    "background",
    "After a commit that creates a notice: deliver on a background thread, in the committing thread "
    "(sync), or not at all (off: only ticks and `manage.py operator_deliver` deliver).",
    choices=("background", "sync", "off"),
)
OPERATOR_NOTIFY_CAP_PER_HOUR = config.int(
    "OPERATOR_NOTIFY_CAP_PER_HOUR",
    60,
    "Ordinary notices of one kind delivered on their own per clock hour (UTC); the excess is coalesced "
    "into one digest at the end of the hour, never dropped. Safety notices never count against it and "
    "are never coalesced. 0: no cap.",
    min=0,
)
OPERATOR_BLOCKED_NOTICE_CAP_PER_HOUR = config.int(
    "OPERATOR_BLOCKED_NOTICE_CAP_PER_HOUR",
    60,
    'The one backstop on safety notices, per agent: an agent can cause "blocked" notices without any '
    "evidence (each intent the gate denies), so at most this many of one agent's go out on their own per "
    "hour; the rest of that hour go out together in one safety digest no directive holds. 0: none.",
    min=0,
)
OPERATOR_REVERT_LINK_HOURS = config.int(
    "OPERATOR_REVERT_LINK_HOURS", 72, "Hours a one-tap revert link stays valid.", min=1
)

# --- The brain --------------------------------------------------------------------------------------
config.section(
    "The brain",
    "The brain is the person's own MCP server (their files, memory and machines). The operator calls it "
    "only to carry out approved intents (the executor) and for the observe probes, each through an "
    "enumerated allowlist (docs/powers.md). Without it nothing is carried out, and those steps report "
    "`brain_not_configured`.",
)
BRAIN_URL = config.str(
    "BRAIN_URL", "", "The brain's MCP endpoint (empty: no brain).", example="http://127.0.0.1:3400/mcp"
)
BRAIN_TOKEN = config.secret("BRAIN_TOKEN", "", "The bearer token sent to the brain (and only to it).")
BRAIN_TIMEOUT_S = config.float(
    "BRAIN_TIMEOUT_S", 60.0, "One total deadline per brain call, in seconds.", min=0.1, max=3600
)
OPERATOR_OBSERVE_PROBES = config.json(
    "OPERATOR_OBSERVE_PROBES",
    [],
    'What the observe step asks the brain: a JSON list (at most 20) of {"name", "tool", '
    '"arguments", "kind"} through the observe allowlist; each answer is one tainted observation.',
    example='[{"name": "uptime", "tool": "actions_shell_run", "arguments": {"command": "uptime"}}]',
)
if not isinstance(OPERATOR_OBSERVE_PROBES, list) or not all(
    isinstance(p, dict) for p in OPERATOR_OBSERVE_PROBES
):
    raise config.fail("OPERATOR_OBSERVE_PROBES", "must be a JSON list of objects")

# --- Health and metrics -----------------------------------------------------------------------------
config.section(
    "Health and metrics",
    "GET /api/health is open (it says what is degraded, nothing private). GET /metrics (Prometheus) "
    "answers only a bearer OPERATOR_METRICS_TOKEN or an address in OPERATOR_METRICS_ALLOW; with "
    "neither set it is off (403). See docs/deploy.md.",
)
OPERATOR_METRICS_TOKEN = config.secret(
    "OPERATOR_METRICS_TOKEN", "", "A bearer token that may read /metrics (Authorization: Bearer ...)."
)
OPERATOR_METRICS_ALLOW = config.list(
    "OPERATOR_METRICS_ALLOW",
    [],
    "Client addresses or networks (CIDR) that may read /metrics without a token, e.g. 127.0.0.1/32. "
    "Behind a reverse proxy on the same host, do not list 127.0.0.1 unless the proxy refuses /metrics.",
)
config.declare(
    "PROMETHEUS_MULTIPROC_DIR",
    "path",
    "",
    "With several uvicorn workers: an empty folder, writable by the service, where each worker keeps its "
    "counters so /metrics adds them up (prometheus-client's multiprocess mode; read from the real "
    "environment only, not .env). Empty it at each start.",
    read_by="prometheus-client",
    default_doc="(unset: one process's counters)",
)
OPERATOR_HEALTH_BACKLOG = config.int(
    "OPERATOR_HEALTH_BACKLOG",
    100,
    "/api/health reports the deliverer degraded when more notices than this are due and not delivered.",
    min=1,
)
OPERATOR_HEALTH_UNDELIVERED_S = config.int(
    "OPERATOR_HEALTH_UNDELIVERED_S",
    300,
    "/api/health reports a safety notice still undelivered after this many seconds.",
    min=1,
)

# --- Logging ---------------------------------------------------------------------------------------
config.section("Logging")
LOG_LEVEL = config.choice(
    "LOG_LEVEL",
    "info",
    "The level of the JSON logs on standard error.",
    choices=("debug", "info", "warning", "error", "critical"),
    attr="LOGGING",
).upper()

# --- Read before Django exists, or only by the test suite ---------------------------------------------
config.section(
    "Bootstrap (manage.py)",
    "Read by manage.py before Django starts (so not available as Django settings).",
)
config.declare(
    "OPERATOR_VENV",
    "path",
    ".venv",
    "The virtual environment manage.py creates, installs into and re-executes in.",
    default_doc=".venv (next to manage.py)",
)
config.declare(
    "OPERATOR_NO_VENV",
    "flag",
    "",
    "Set to 1 to run manage.py in the current interpreter (it must have the dependencies), not in .venv.",
    choices=("1",),
)
config.section(
    "Test suite and CI",
    "Read by the tests (`python3 manage.py runtests`); .ci/run sets the OPERATOR_REQUIRE_* ones so a "
    "missing peer fails instead of skipping.",
)
config.declare(
    "OPERATOR_REQUIRE_POSTGRES",
    "flag",
    "",
    "Set to 1: PostgreSQL-only tests fail (not skip) on SQLite.",
    choices=("1",),
    read_by="tests",
)
config.declare(
    "OPERATOR_REQUIRE_INTEROP",
    "flag",
    "",
    "Set to 1: the Node.js interop tests fail (not skip) without Node.",
    choices=("1",),
    read_by="tests",
)
config.declare(
    "OPERATOR_REQUIRE_BROWSER",
    "flag",
    "",
    "Set to 1: the browser tests fail (not skip) without Chromium.",
    choices=("1",),
    read_by="tests",
)
config.declare(
    "OPERATOR_REQUIRE_SYSTEMD",
    "flag",
    "",
    "Set to 1: the `systemd-analyze verify` test of the unit files fails (not skips) without it.",
    choices=("1",),
    read_by="tests",
)
config.declare(
    "OPERATOR_TEST_POSTGRES_URL",
    "url",
    "",
    "A PostgreSQL server (any database on it) for the SQLite run's backup round trip; it creates and "
    "drops its own databases there.",
    read_by="tests",
    default_doc="postgres://postgres@127.0.0.1:5432/postgres",
)
config.declare(
    "OPERATOR_WRITE_SCREENSHOTS",
    "flag",
    "",
    "Set to 1: the browser tests write docs/screenshots/ (otherwise $OPERATOR_DATA_DIR/screenshots).",
    choices=("1",),
    read_by="tests",
)
config.declare(
    "OPERATOR_FUZZ_EXAMPLES",
    "int",
    0,
    "Examples per property in the security fuzzing tests.",
    read_by="tests",
    default_doc="(each test's own)",
)

# --- Derived from the declarations above --------------------------------------------------------------


def _data_dir_ready(path: Path) -> Path:
    """The data folder exists and (with SQLite in it) is writable, or one line says what to do."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise config.fail(
            "OPERATOR_DATA_DIR",
            f"cannot create the data folder {path} ({exc.strerror or exc})",
            "create it writable by this user, or set OPERATOR_DATA_DIR to a writable folder",
        ) from None
    return path


DATA_DIR = _data_dir_ready(DATA_DIR)


def _secret_key() -> str:
    if _SECRET_KEY:
        return _SECRET_KEY
    key_file = DATA_DIR / "secret_key"
    if key_file.exists():
        return key_file.read_text().strip()
    if DEBUG:
        return "insecure-debug-only-key-do-not-use-in-production"
    raise config.fail(
        "SECRET_KEY",
        f"is not set and {key_file} does not exist",
        "set it in the environment, or run `python3 manage.py serve` once to generate that file",
    )


SECRET_KEY = _secret_key()

try:
    zoneinfo.ZoneInfo(OPERATOR_TIME_ZONE)
except (zoneinfo.ZoneInfoNotFoundError, ValueError):
    raise config.fail(
        "OPERATOR_TIME_ZONE",
        f"{OPERATOR_TIME_ZONE!r} is not a known time zone",
        "use an IANA name such as Europe/London",
    ) from None
TIME_ZONE = OPERATOR_TIME_ZONE
USE_TZ = True
USE_I18N = False
LANGUAGE_CODE = "en-us"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "ninja",
    "operator_site",
    "beliefs",
    "goals",
    "intents",
    "runs",
    "operator_site.cross_domain",  # the top layer (docs/architecture.md, "Layers")
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # A Content-Security-Policy on every page Django serves (admin, revert links, /api/): see below.
    "csp.middleware.CSPMiddleware",
    # Every HTML page shows hidden characters of agent text visibly and says when it has any
    # (operator_site/display.py, operator_site/middleware.py).
    "operator_site.middleware.VisibleTextMiddleware",
    # A date-time the operator's zone cannot write (year 1 west of UTC, 9999 east: only a damaged row
    # holds one) is shown in UTC rather than failing the page (operator_site/calendar_edge.py).
    "operator_site.calendar_edge.CalendarEdgeZoneMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "operator_site.cross_domain.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

ASGI_APPLICATION = "operator_site.asgi.application"

# --- Database -----------------------------------------------------------------------------------
try:
    DATABASES = {"default": environ.Env.db_url_config(DATABASE_URL)}
except Exception as _exc:  # an unknown scheme, a malformed URL
    raise config.fail("DATABASE_URL", f"cannot be read as a database URL ({_exc})") from None
_db = DATABASES["default"]
if _db["ENGINE"] not in {"django.db.backends.sqlite3", "django.db.backends.postgresql"}:
    raise config.fail(
        "DATABASE_URL",
        f"{DATABASE_URL.partition(':')[0]!r} is not a supported database",
        "use sqlite:///path/to/file or postgres://user@host:5432/name",
    )
if _db["ENGINE"] == "django.db.backends.sqlite3":
    # IMMEDIATE transactions take the write lock at BEGIN, so concurrent writers queue on the busy
    # timeout instead of failing with "database is locked" half-way; WAL lets readers run alongside.
    _db.setdefault("OPTIONS", {}).update(
        {
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=20000;",
        }
    )
    # pytest-django's default in-memory shared-cache database breaks threaded tests; use a file.
    _db["TEST"] = {"NAME": str(DATA_DIR / "test-operator.sqlite3")}
    # SQLite writes its file and the -wal/-shm files beside it: the folder must be writable.
    _sqlite_dir = Path(_db["NAME"]).resolve().parent
    if _db["NAME"] != ":memory:" and not (_sqlite_dir.is_dir() and os.access(_sqlite_dir, os.W_OK)):
        raise config.fail(
            "OPERATOR_DATA_DIR" if _sqlite_dir == DATA_DIR else "DATABASE_URL",
            f"the SQLite database's folder {_sqlite_dir} is missing or not writable by this user",
            "make it writable (chown/chmod), or point OPERATOR_DATA_DIR (or DATABASE_URL) elsewhere",
        )
else:
    _db.setdefault("OPTIONS", {}).setdefault("connect_timeout", 5)
# Persistent connections, one per database worker thread (so at most OPERATOR_DB_THREADS per
# process), health-checked before reuse. Opening a connection per call costs more than the call.
_db["CONN_MAX_AGE"] = DATABASE_CONN_MAX_AGE
_db["CONN_HEALTH_CHECKS"] = True
if _db["ENGINE"] == "django.db.backends.postgresql" and DATABASE_POOL:
    # Django's psycopg pool (docs/performance.md): a unit of work borrows a connection and gives it
    # back; the pool keeps it open. The pool holds no more than the face's database threads plus the
    # admin's and a command's. Server-side binding lets psycopg prepare a statement the third time a
    # connection runs it (the hot path's statements are the same text on every call), so the
    # server plans it once per connection. No health check on borrowing (it would be a round trip
    # per unit of work): a connection the server dropped while it idled fails its statement, the
    # call answers `database_unavailable` (retryable), and the pool discards it when it comes back.
    _db["OPTIONS"].update(
        {
            "pool": {"min_size": 1, "max_size": OPERATOR_DB_THREADS + 2, "timeout": 10},
            "server_side_binding": True,
            "prepare_threshold": 2,
        }
    )
    _db["CONN_MAX_AGE"] = 0  # Django: a pooled connection is not also a persistent one
    _db["CONN_HEALTH_CHECKS"] = False

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

STATIC_URL = "/static/"
STATIC_ROOT = DATA_DIR / "static"

# --- Security headers (the service is usually behind TLS termination in production) -------------
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
# Content-Security-Policy (django-csp 4.x) on the admin, the revert pages and /api/: scripts, styles,
# images and fonts only from this origin, no inline script or style (the console's own styling is
# operator/console.css), no plugins, no framing, forms post only here. Agent text that slipped past
# escaping still could not run a script. The admin works under it (checked in tests/browser/).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'none'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
        "base-uri": ["'none'"],
        "object-src": ["'none'"],
    }
}

# --- Logging: one line of JSON per record on stderr ------------------------------------------------
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"json": {"()": "operator_site.logging.JsonFormatter"}},
    "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "json"}},
    "root": {"handlers": ["stderr"], "level": LOG_LEVEL},
    "loggers": {
        # The SDK logs every stateless request at INFO; one line per call is noise, not signal.
        "mcp": {"level": "WARNING"},
        "httpx2": {"level": "WARNING"},
        # At DEBUG it logs every SSE chunk, i.e. every answer in full (run tokens, the person's data).
        "sse_starlette": {"level": "WARNING"},
        "django.db.backends": {"level": "INFO"},
        # The pool logs each failed connection attempt of its background workers; a database that
        # cannot be reached surfaces as the caller's error (one line at start-up, a retryable
        # answer on a call), not as a warning per retry.
        "psycopg.pool": {"level": "ERROR"},
    },
}
