"""The operator's one settings file, driven by the environment (django-environ).

Every variable is documented in `.env.example`. Defaults give a working local service on the
embedded SQLite database; PostgreSQL is one `DATABASE_URL` away.
"""

from __future__ import annotations

from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
# A `.env` file next to manage.py is read if present; real environment variables win.
if (BASE_DIR / ".env").exists():
    environ.Env.read_env(BASE_DIR / ".env", overwrite=False)


def _strict_bool(name: str, default: bool) -> bool:
    """A bool env var must say yes or no: a typo like DEBUG=ture is an error, not False."""
    raw = env.str(name, default="")
    if raw == "":
        return default
    lowered = raw.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, not {raw!r}")


DEBUG = _strict_bool("DEBUG", False)

DATA_DIR = Path(env.str("OPERATOR_DATA_DIR", default=str(BASE_DIR / "var"))).resolve()
DATA_DIR.mkdir(parents=True, exist_ok=True)


def _secret_key() -> str:
    key = env.str("SECRET_KEY", default="")
    if key:
        return key
    key_file = DATA_DIR / "secret_key"
    if key_file.exists():
        return key_file.read_text().strip()
    if DEBUG:
        return "insecure-debug-only-key-do-not-use-in-production"
    raise ImproperlyConfigured(
        "SECRET_KEY is required: set it in the environment, or run `python3 manage.py serve` once "
        f"to generate {key_file}."
    )


SECRET_KEY = _secret_key()

ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])
# Browser origins allowed to call /mcp besides those whose host is in ALLOWED_HOSTS.
OPERATOR_ALLOWED_ORIGINS = env.list("OPERATOR_ALLOWED_ORIGINS", default=[])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

# The bootstrap token of the built-in human principal `owner` (see operator_site/face/auth.py).
OPERATOR_TOKEN = env.str("OPERATOR_TOKEN", default="")
OPERATOR_OWNER_USERNAME = env.str("OPERATOR_OWNER_USERNAME", default="owner")
OPERATOR_MAX_BODY_BYTES = env.int("OPERATOR_MAX_BODY_BYTES", default=1024 * 1024)
if OPERATOR_MAX_BODY_BYTES < 1024:
    raise ImproperlyConfigured("OPERATOR_MAX_BODY_BYTES must be at least 1024")
# How many tool calls may touch the database at once per worker process: bounds the number of
# database connections a worker holds (one per worker thread), whatever the request concurrency.
OPERATOR_DB_THREADS = env.int("OPERATOR_DB_THREADS", default=8)
# Run the face's database work on the event-loop thread (SQLite's natural mode) or on the database
# threads (PostgreSQL's): auto | true | false. See operator_site/face/db.py.
OPERATOR_DB_INLINE = env.str("OPERATOR_DB_INLINE", default="auto").lower()
if OPERATOR_DB_INLINE not in {"auto", "true", "false"}:
    raise ImproperlyConfigured("OPERATOR_DB_INLINE must be auto, true or false")
# The per-token request rate limit on /mcp, enforced in the database (so it holds across workers and
# hosts): at most OPERATOR_RATE_LIMIT requests per principal in each fixed window of
# OPERATOR_RATE_WINDOW_S seconds; beyond it, HTTP 429 with Retry-After. 0 turns it off.
OPERATOR_RATE_LIMIT = env.int("OPERATOR_RATE_LIMIT", default=1200)
OPERATOR_RATE_WINDOW_S = env.int("OPERATOR_RATE_WINDOW_S", default=60)
if OPERATOR_RATE_LIMIT < 0:
    raise ImproperlyConfigured("OPERATOR_RATE_LIMIT must be 0 (off) or a positive number of requests")
if not 1 <= OPERATOR_RATE_WINDOW_S <= 86400:
    raise ImproperlyConfigured("OPERATOR_RATE_WINDOW_S must be between 1 and 86400")
# The SDK can open an OpenTelemetry span per MCP message; off unless you export traces.
OPERATOR_OPENTELEMETRY = _strict_bool("OPERATOR_OPENTELEMETRY", False)

TIME_ZONE = env.str("OPERATOR_TIME_ZONE", default="UTC")
OPERATOR_TIME_ZONE = TIME_ZONE
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
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "operator_site.urls"

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
DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{DATA_DIR / 'operator.sqlite3'}")}
_db = DATABASES["default"]
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
else:
    _db.setdefault("OPTIONS", {}).setdefault("connect_timeout", 5)
# Persistent connections, one per database worker thread (so at most OPERATOR_DB_THREADS per
# process), health-checked before reuse. Opening a connection per call costs more than the call.
_db["CONN_MAX_AGE"] = env.int("DATABASE_CONN_MAX_AGE", default=300)
_db["CONN_HEALTH_CHECKS"] = True

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
SESSION_COOKIE_SECURE = _strict_bool("SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE

# --- Notifications to the person -------------------------------------------------------------------
# Delivery goes through Django's email backend (console by default: the notice is printed by the
# server) and, if set, a webhook that receives a signed JSON POST.
EMAIL_BACKEND = env.str("EMAIL_BACKEND", default="django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = env.str("EMAIL_HOST", default="localhost")
EMAIL_PORT = env.int("EMAIL_PORT", default=25)
EMAIL_HOST_USER = env.str("EMAIL_HOST_USER", default="")
EMAIL_HOST_PASSWORD = env.str("EMAIL_HOST_PASSWORD", default="")
EMAIL_USE_TLS = _strict_bool("EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = env.int("EMAIL_TIMEOUT", default=10)
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="operator@localhost")
OPERATOR_NOTIFY_EMAIL = env.str("OPERATOR_NOTIFY_EMAIL", default="owner@localhost")
OPERATOR_WEBHOOK_URL = env.str("OPERATOR_WEBHOOK_URL", default="")
OPERATOR_WEBHOOK_SECRET = env.str("OPERATOR_WEBHOOK_SECRET", default="")
OPERATOR_WEBHOOK_TIMEOUT_S = env.float("OPERATOR_WEBHOOK_TIMEOUT_S", default=5.0)
# The address the person reaches this service at, for links in notices (one-tap revert).
OPERATOR_PUBLIC_URL = env.str("OPERATOR_PUBLIC_URL", default="http://127.0.0.1:8000").rstrip("/")
# After a commit that creates a notice: background (deliver on a thread), sync (in the committing
# thread), or off (only ticks and `manage.py operator_deliver` deliver).
OPERATOR_DELIVERY = env.str("OPERATOR_DELIVERY", default="background").lower()
if OPERATOR_DELIVERY not in {"background", "sync", "off"}:
    raise ImproperlyConfigured("OPERATOR_DELIVERY must be background, sync or off")
# At most this many notices of one kind are delivered on their own per clock hour (UTC); the rest of
# that hour are coalesced into one digest delivered when the hour ends (never dropped). Safety
# notices are capped too; their digest is itself a safety notice, with every revert link. 0: no cap.
OPERATOR_NOTIFY_CAP_PER_HOUR = env.int("OPERATOR_NOTIFY_CAP_PER_HOUR", default=60)
if OPERATOR_NOTIFY_CAP_PER_HOUR < 0:
    raise ImproperlyConfigured("OPERATOR_NOTIFY_CAP_PER_HOUR must be 0 (no cap) or positive")
# How long a one-tap revert link stays valid.
OPERATOR_REVERT_LINK_HOURS = env.int("OPERATOR_REVERT_LINK_HOURS", default=72)
# How recent a human-authored instruction must be to back a high-stakes belief change (its
# confirmationQuote), in hours.
OPERATOR_CONFIRMATION_WINDOW_HOURS = env.int("OPERATOR_CONFIRMATION_WINDOW_HOURS", default=72)
if OPERATOR_CONFIRMATION_WINDOW_HOURS < 1:
    raise ImproperlyConfigured("OPERATOR_CONFIRMATION_WINDOW_HOURS must be at least 1")
# How long an intent may wait for the person's approval before it expires (ticks and
# `manage.py operator_expire` mark it expired; an expired approval is never approvable, swept or not).
OPERATOR_APPROVAL_EXPIRY_DAYS = env.int("OPERATOR_APPROVAL_EXPIRY_DAYS", default=7)
if not 1 <= OPERATOR_APPROVAL_EXPIRY_DAYS <= 365:
    raise ImproperlyConfigured("OPERATOR_APPROVAL_EXPIRY_DAYS must be between 1 and 365")
# The longest a run may go without a heartbeat before the next start may take it over, in minutes: an
# agent's `stale_after_s` is capped at this, so no caller can hold the single-running lock (which
# stops the executor and every tick) for longer without proving it is alive. Default 15; 1..120.
OPERATOR_RUN_MAX_STALE_MINUTES = env.int("OPERATOR_RUN_MAX_STALE_MINUTES", default=15)
if not 1 <= OPERATOR_RUN_MAX_STALE_MINUTES <= 120:
    raise ImproperlyConfigured("OPERATOR_RUN_MAX_STALE_MINUTES must be between 1 and 120 (minutes)")

# --- The person's "brain": another MCP server the operator calls, through enumerated allowlists ----
BRAIN_URL = env.str("BRAIN_URL", default="")
BRAIN_TOKEN = env.str("BRAIN_TOKEN", default="")
BRAIN_TIMEOUT_S = env.float("BRAIN_TIMEOUT_S", default=60.0)
# The observe step's probes (runs/observe.py): a short JSON list of brain calls through the observe
# allowlist, each {"tool": ..., "arguments": {...}, "name": ..., "kind": "world"|"self"}; every
# answer is recorded as a tainted observation. Checked in full by runs.observe.load_probes().
try:
    OPERATOR_OBSERVE_PROBES = env.json("OPERATOR_OBSERVE_PROBES", default=[])
except ValueError as _exc:
    raise ImproperlyConfigured(f"OPERATOR_OBSERVE_PROBES must be a JSON list: {_exc}") from _exc
if not isinstance(OPERATOR_OBSERVE_PROBES, list) or not all(
    isinstance(p, dict) for p in OPERATOR_OBSERVE_PROBES
):
    raise ImproperlyConfigured("OPERATOR_OBSERVE_PROBES must be a JSON list of objects")

# --- Logging: one line of JSON per record on stderr ------------------------------------------------
LOG_LEVEL = env.str("LOG_LEVEL", default="INFO").upper()
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
    },
}
