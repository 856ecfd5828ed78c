"""Serving under uvicorn: an access log that never carries a query string, and a listening socket
that is TCP however it is bound.

**The access log.** uvicorn writes each request's path *with its query string*. A caller who puts a
credential there (`/mcp?access_token=…`, refused, but sent all the same) would have it copied into
the log. `AccessLogQueryFilter` replaces every query string in an access-log line with
`?[query omitted]` before any handler sees the record. `serve` installs it through the log
configuration itself (`access_log_config()`, so every worker process has it from its start), and
the application installs it again when it loads (`install_access_log_filter()`), so a uvicorn
started by hand has it too.

**The listening socket.** With more than one worker (and with --reload) uvicorn binds the listening
socket itself. Before uvicorn 0.55 it did so as `socket.socket(family)`: protocol 0. Accepted
connections inherit that, and asyncio turns on TCP_NODELAY only for sockets whose protocol is
IPPROTO_TCP — so every keep-alive answer split into two writes (headers, then body) waited for the
client's delayed ACK: ~40 ms per request, a 2-worker operator 40x slower than a 1-worker one
(bench/perf.py found it; Kludex/uvicorn#3149). uvicorn 0.55 declares the protocol itself, so the
re-wrapping this module did until then is gone and pyproject.toml asks for uvicorn >= 0.55;
tests/test_serving.py checks that uvicorn's own socket is TCP and its connections get TCP_NODELAY.

**The collector.** `settle_heap()`, when the application starts serving (its lifespan's startup):
see its docstring.
"""

from __future__ import annotations

import copy
import gc
import logging
import socket
from typing import Any

import uvicorn
from uvicorn.config import LOGGING_CONFIG
from uvicorn.supervisors import Multiprocess

APPLICATION = "operator_site.asgi:application"


QUERY_OMITTED = "?[query omitted]"


class AccessLogQueryFilter(logging.Filter):
    """Drops the query string of uvicorn's access-log lines (`client - "METHOD path?query HTTP/x" status`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple):
            record.args = tuple(
                arg.partition("?")[0] + QUERY_OMITTED if isinstance(arg, str) and "?" in arg else arg
                for arg in args
            )
        if isinstance(record.msg, str) and "?" in record.msg and not args:
            record.msg = record.msg.split("?", 1)[0] + QUERY_OMITTED
        return True


def install_access_log_filter() -> None:
    """Put `AccessLogQueryFilter` on uvicorn's access logger in this process (once)."""
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, AccessLogQueryFilter) for f in access.filters):
        access.addFilter(AccessLogQueryFilter())


# The cyclic collector's first generation is examined once this many more container objects exist
# than at its last pass (CPython's default: 700).
FIRST_GENERATION_THRESHOLD = 10_000


def settle_heap() -> None:
    """Keep Python's cyclic garbage collector off the serving path (public `gc` API only).

    A worker holds ~160,000 objects once Django, the SDK and the registry are loaded; none of them
    ever becomes garbage, yet a full collection walks all of them: ~50 ms each, every few seconds
    under load (six in 11 s of packets over a 1,000-row history). And a call holds more than 700
    new objects at its peak (a packet's rows, the SDK's models) and frees them when it ends, so the
    first generation was examined in nearly every call, its live objects moved on to the older
    generations to be walked again. Measured on PostgreSQL, the packet over a 1,000-row history,
    one client: the collector took ~0.2 ms of a call's ~3.7 ms of CPU (docs/performance.md).

    So, once: collect what loading left, `gc.freeze()` every object alive (the collector never
    examines them again; they are still freed by reference counting, and what is created later is
    collected as before), and examine the first generation after `FIRST_GENERATION_THRESHOLD`
    objects instead of 700 — above a call's own peak, so a pass comes only as the cycles calls
    leave behind (the SDK's per-request server holds bound methods of itself, ~20 objects a call)
    add up. What that costs: such cycles wait a few hundred calls longer to be freed; and an object
    alive at the startup that later ends in an unreachable cycle is never freed — bounded by what
    existed then, each at most once (what loading made lives as long as the process anyway)."""
    gc.collect()
    gc.freeze()
    first, *older = gc.get_threshold()
    gc.set_threshold(max(first, FIRST_GENERATION_THRESHOLD), *older)


def access_log_config() -> dict[str, Any]:
    """uvicorn's own logging configuration, with `AccessLogQueryFilter` on its access logger."""
    config = copy.deepcopy(LOGGING_CONFIG)
    config.setdefault("filters", {})["omit_query"] = {"()": f"{__name__}.AccessLogQueryFilter"}
    config["loggers"].setdefault("uvicorn.access", {})["filters"] = ["omit_query"]
    config["handlers"]["access"]["filters"] = ["omit_query"]
    return config


def serve(
    *, host: str, port: int, workers: int = 1, sock: socket.socket | None = None, **options: Any
) -> None:
    """`uvicorn.run()` for the operator's application, with an access log without query strings.
    `sock`: a listening socket bound beforehand (`manage.py serve` binds it before
    setting anything up; see preflight.py)."""
    options.setdefault("log_config", access_log_config())
    config = uvicorn.Config(APPLICATION, host=host, port=port, workers=workers, **options)
    server = uvicorn.Server(config)
    if config.workers > 1:
        Multiprocess(config, sockets=[sock or config.bind_socket()]).run()
    elif sock is not None:
        server.run(sockets=[sock])
    else:
        server.run()


def main(argv: list[str] | None = None) -> None:
    """`python -m operator_site.serving --port N [--host H] [--workers N]`: uvicorn alone, as the
    systemd unit and the live-server tests start it (no migration, no owner token). A wrong setting
    or a port in use ends in one line (operator_site/preflight.py)."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--log-level", default="warning")
    parser.add_argument("--access-log", action="store_true", help="log each request (as `serve` does)")
    opts = parser.parse_args(argv)
    import os
    import sys

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "operator_site.settings")
    from operator_site.preflight import bind_listener, explain

    try:
        import django

        django.setup()  # a wrong setting ends here, in one line (exit 78), not in a worker's traceback
        sock = bind_listener(opts.host, opts.port)
    except Exception as exc:
        explained = explain(exc)
        if explained is None:
            raise
        print(explained[0], file=sys.stderr, flush=True)
        sys.exit(explained[1])
    serve(
        host=opts.host,
        port=opts.port,
        workers=opts.workers,
        sock=sock,
        access_log=opts.access_log,
        log_level=opts.log_level,
        lifespan="on",
    )


if __name__ == "__main__":
    main()
