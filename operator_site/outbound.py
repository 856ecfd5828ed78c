"""Every outbound call under ONE wall-clock deadline: connect, send and every read together.

Per-operation timeouts (httpx's, smtplib's ``timeout=``) restart on every byte, so a peer that
trickles one byte a second never trips them and can hold the caller for as long as it likes — and a
deliverer held past its claim lets another deliverer take the notice and send it again. Here:

- `call_with_deadline(fn, seconds, what)` runs ``fn`` on a short-lived worker thread and waits for it
  at most ``seconds``. When the budget runs out the caller gets `OutboundDeadline` at once, and every
  socket the call registered (`watch`) is shut down, which ends a blocked read in the worker too.
- `post(url, body, headers, seconds)`: the webhook's HTTP POST, on the async client under
  ``anyio.fail_after`` (cancellation closes the connection), inside `call_with_deadline`. The answer's
  body is never read: only its status matters.
- `SMTPBackend`: Django's SMTP email backend whose sockets are registered with the deadline of the
  call in progress (settings map Django's stock SMTP backend to this one). The notice deliverer sends
  every email through `call_with_deadline`, so any backend is bounded; with this one the abandoned
  worker also stops at once.

The brain client (`runs/brain.py`) bounds its calls the same way (``anyio.fail_after``).
"""

from __future__ import annotations

import asyncio
import contextlib
import smtplib
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import anyio
import httpx2
from django.core.mail.backends.smtp import EmailBackend

T = TypeVar("T")


class OutboundDeadline(TimeoutError):
    """The whole exchange did not finish within its deadline; it was abandoned."""


class Deadline:
    """One wall-clock budget, and the sockets to shut down when it runs out."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expires = time.monotonic() + seconds
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    def remaining(self) -> float:
        return max(0.0, self.expires - time.monotonic())

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            if not self.expired:
                self._sockets.append(sock)
                return
        _shut(sock)

    def expire(self) -> None:
        with self._lock:
            self.expired = True
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            _shut(sock)


def _shut(sock: socket.socket) -> None:
    # shutdown() (unlike close()) wakes a thread blocked in recv() on the same socket.
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


_local = threading.local()


def current_deadline() -> Deadline | None:
    """The deadline of the call running on this thread (inside `call_with_deadline`), if any."""
    return getattr(_local, "deadline", None)


def call_with_deadline(fn: Callable[[], T], seconds: float, what: str) -> T:
    """Run ``fn()`` and return its result, or raise `OutboundDeadline` once ``seconds`` have passed
    (the caller is never held longer). ``fn`` runs on its own thread: it must not use the database."""
    deadline = Deadline(seconds)
    outcome: dict[str, Any] = {}

    def run() -> None:
        _local.deadline = deadline
        try:
            outcome["value"] = fn()
        except BaseException as exc:  # handed to the caller as it is
            outcome["error"] = exc

    worker = threading.Thread(target=run, name=f"operator-outbound-{what}", daemon=True)
    worker.start()
    worker.join(seconds)
    message = f"{what} did not finish within {seconds:g} s (total deadline); abandoned"
    if worker.is_alive():
        deadline.expire()
        raise OutboundDeadline(message)
    if "error" in outcome:
        error = outcome["error"]
        if isinstance(error, OSError) and deadline.remaining() == 0:
            # A socket timeout clamped to the deadline can end the call a moment before join()
            # returns on a loaded machine: the time is up all the same, and it is said so.
            deadline.expire()
            raise OutboundDeadline(message) from error
        raise error
    return outcome["value"]


# --- HTTP (the webhook) ---------------------------------------------------------------------------------
def post(url: str, body: bytes, headers: Mapping[str, str], seconds: float) -> int:
    """POST ``body`` to ``url``; returns the HTTP status. One deadline for the whole exchange."""

    async def exchange() -> int:
        with anyio.fail_after(seconds):
            async with (
                httpx2.AsyncClient(timeout=seconds, follow_redirects=False) as http,
                http.stream("POST", url, content=body, headers=dict(headers)) as response,
            ):
                return response.status_code

    try:
        return call_with_deadline(lambda: asyncio.run(exchange()), seconds, "webhook")
    except TimeoutError as exc:  # anyio's own, or ours
        raise OutboundDeadline(
            f"webhook did not answer within {seconds:g} s (total deadline); abandoned"
        ) from exc


# --- SMTP ---------------------------------------------------------------------------------------------------
class _WatchedSMTP(smtplib.SMTP):
    def _get_socket(self, host: str, port: int, timeout: float) -> socket.socket:
        deadline = current_deadline()
        if deadline is not None:
            timeout = min(timeout, max(deadline.remaining(), 0.001)) if timeout else deadline.remaining()
        sock = super()._get_socket(host, port, timeout)
        if deadline is not None:
            deadline.watch(sock)
        return sock

    def starttls(self, *args: Any, **kwargs: Any) -> tuple[int, bytes]:
        reply = super().starttls(*args, **kwargs)
        deadline = current_deadline()
        if deadline is not None and self.sock is not None:
            deadline.watch(self.sock)  # the TLS socket replaced the plain one
        return reply


class _WatchedSMTPSSL(smtplib.SMTP_SSL):
    def _get_socket(self, host: str, port: int, timeout: float) -> socket.socket:
        sock = super()._get_socket(host, port, timeout)
        deadline = current_deadline()
        if deadline is not None:
            deadline.watch(sock)
        return sock


class SMTPBackend(EmailBackend):
    """Django's SMTP backend, its sockets shut down when the deadline of the send runs out."""

    @property
    def connection_class(self) -> type[smtplib.SMTP]:
        return _WatchedSMTPSSL if self.use_ssl else _WatchedSMTP
