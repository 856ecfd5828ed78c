"""How a notice goes out: its text, the e-mail and the webhook, and which failures are permanent.

The deliverer (`operator_site/notifications.py`) claims a notice and calls these; every outbound
call is bounded by one total deadline (`operator_site/outbound.py`). docs/architecture.md has the
flow.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import smtplib
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.mail import BadHeaderError, EmailMessage

from operator_site import outbound
from operator_site.display import describe_char, header_text, hidden_chars, visible_text
from operator_site.mail import prints_to_console
from operator_site.models import Notification
from operator_site.revert_links import revert_url


# --- what is permanent ---------------------------------------------------------------------------
class PermanentDeliveryError(Exception):
    """A channel refused the notice for a reason retrying the same notice cannot fix."""


def is_permanent(exc: BaseException) -> bool:
    """Would retrying the same notice on this channel fail the same way? A refused header, text that
    cannot be encoded, a message or recipient the mail server rejects for good (5xx), a webhook that
    answers 4xx (but 408/425/429): yes. Timeouts, refused connections, 5xx from a webhook, 4xx SMTP
    replies: no (retried with backoff)."""
    if isinstance(exc, PermanentDeliveryError | BadHeaderError | UnicodeError):
        return True
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        return all(code >= 500 for code, _msg in exc.recipients.values())
    if isinstance(exc, smtplib.SMTPSenderRefused | smtplib.SMTPDataError):
        return exc.smtp_code >= 500
    return False


def channels() -> list[tuple[str, Callable[[Notification], None]]]:
    channels: list[tuple[str, Callable[[Notification], None]]] = []
    if settings.OPERATOR_NOTIFY_EMAIL:
        # With the console backend the e-mail is printed, not sent: the notice says "console".
        channels.append(("console" if prints_to_console() else "email", _send_email))
    if settings.OPERATOR_WEBHOOK_URL:
        channels.append(("webhook", _send_webhook))
    return channels


HIDDEN_NOTE = (
    "Note: this notice holds hidden characters (controls, direction overrides, zero-width or other "
    "invisible characters) in text an agent wrote: {chars}. Each is shown where it is as [U+XXXX]."
)


def hidden_in(notice: Notification) -> list[str]:
    """The hidden characters of a notice's text, described (``U+202E RIGHT-TO-LEFT OVERRIDE``)."""
    return [describe_char(ch) for ch in hidden_chars(f"{notice.title}\n{notice.body}")]


def notice_text(notice: Notification) -> str:
    """The notice as plain text for a person: hidden characters shown as tokens, flagged at the top."""
    lines = []
    hidden = hidden_in(notice)
    if hidden:
        lines += [HIDDEN_NOTE.format(chars=", ".join(hidden[:12])), ""]
    lines.append(visible_text(notice.title, single_line=True))
    if notice.body:
        lines += ["", visible_text(notice.body)]
    url = revert_url(notice)
    if url:
        lines += ["", f"Undo this change (one tap, asks you to confirm): {url}"]
    return "\n".join(lines).strip() + "\n"


def email_subject(notice: Notification, *, prefix: str | None = None) -> str:
    """Fixed words, then the notice's title made one line, control-free and bounded."""
    if prefix is None:
        prefix = "[operator: safety] " if notice.safety else "[operator] "
    return header_text(prefix, agent=[notice.title])


def send_email(subject: str, text: str) -> None:
    message = EmailMessage(subject, text, settings.DEFAULT_FROM_EMAIL, [settings.OPERATOR_NOTIFY_EMAIL])
    message.message()  # build it here: a header the backend would refuse fails now, recognisably
    outbound.call_with_deadline(
        lambda: message.send(fail_silently=False), settings.OPERATOR_EMAIL_DEADLINE_S, "email"
    )


def _send_email(notice: Notification) -> None:
    send_email(email_subject(notice), notice_text(notice))


def webhook_payload(notice: Notification) -> dict[str, Any]:
    """What the webhook receives: the notice as the person is shown it (hidden characters as tokens;
    `hidden_characters` lists them), so a receiver that displays it cannot be made to show a lie."""
    return {
        "id": notice.id,
        "kind": notice.kind,
        "title": visible_text(notice.title, single_line=True),
        "body": visible_text(notice.body),
        "topic": visible_text(notice.topic, single_line=True) or None,
        "safety": notice.safety,
        "subject": {"kind": notice.subject_kind, "id": notice.subject_id} if notice.subject_kind else None,
        "revert_url": revert_url(notice),
        "hidden_characters": hidden_in(notice),
        "created": notice.created_at.isoformat(),
    }


def webhook_signature(body: bytes) -> str:
    return "sha256=" + hmac.new(settings.OPERATOR_WEBHOOK_SECRET.encode(), body, hashlib.sha256).hexdigest()


def post_webhook(payload: dict[str, Any], *, notice_id: int, kind: str, safety: bool) -> None:
    body = json.dumps(payload).encode()
    headers = {
        "Content-Type": "application/json",
        # Fixed words only (and through header_text all the same: a header can never break).
        "X-Operator-Notification": header_text(str(notice_id)),
        "X-Operator-Kind": header_text(kind).encode("ascii", "replace").decode(),
        "X-Operator-Safety": "yes" if safety else "no",
    }
    if settings.OPERATOR_WEBHOOK_SECRET:
        headers["X-Operator-Signature"] = webhook_signature(body)
    status = outbound.post(settings.OPERATOR_WEBHOOK_URL, body, headers, settings.OPERATOR_WEBHOOK_TIMEOUT_S)
    if 400 <= status < 500 and status not in (408, 425, 429):
        raise PermanentDeliveryError(f"webhook answered HTTP {status}")
    if status >= 300:
        raise RuntimeError(f"webhook answered HTTP {status}")


def _send_webhook(notice: Notification) -> None:
    post_webhook(webhook_payload(notice), notice_id=notice.id, kind=notice.kind, safety=notice.safety)
