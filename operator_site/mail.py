"""The default e-mail backend: Django's console backend, saying plainly that nothing was sent.

With it a notice's e-mail is printed on the server's standard output, preceded by one line that
says so; `operator_site.notifications` records the channel as `console`, not `email`, so nobody
reads "delivered" as "sent". Set EMAIL_BACKEND (and EMAIL_HOST...) to send for real.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.mail.backends.console import EmailBackend as DjangoConsoleBackend

NOT_SENT = (
    "operator: this e-mail was printed to the console, not sent "
    "(EMAIL_BACKEND is the console backend; docs/configuration.md says how to send)"
)
CONSOLE_BACKENDS = frozenset(
    {"operator_site.mail.ConsoleBackend", "django.core.mail.backends.console.EmailBackend"}
)


def prints_to_console() -> bool:
    """True when e-mail is printed to the console rather than sent."""
    return settings.EMAIL_BACKEND in CONSOLE_BACKENDS


class ConsoleBackend(DjangoConsoleBackend):
    def write_message(self, message: Any) -> None:
        self.stream.write(NOT_SENT + "\n")
        super().write_message(message)


def delivery_summary(delivery: dict[str, list[int]]) -> str:
    """What happened to the notices of one delivery pass, in words (`operator_deliver`, the ticks):
    with the console backend, delivered e-mail is said to be printed, not sent."""
    delivered = len(delivery.get("delivered", []))
    parts = []
    if delivered:
        parts.append(
            f"{delivered} printed to the console, not sent"
            if prints_to_console()
            else f"{delivered} delivered"
        )
    for key, words in (("released", "released from a directive"), ("held", "held"), ("failed", "failed")):
        if delivery.get(key):
            parts.append(f"{len(delivery[key])} {words}")
    return "notices: " + (", ".join(parts) if parts else "none due")
