"""Directives: the person's short-lived instructions (quiet, topic_mute, focus) that hold notices.

Plain functions taking the acting principal explicitly, run inside the caller's transaction. The
rule of a directive in force is `intents.models.in_force`; docs/architecture.md ("Decisions worth
knowing") states it, and how directives hold notices.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from django.db.models import QuerySet
from django.utils import timezone

from intents.models import Directive
from operator_site import lookalikes
from operator_site.models import Principal
from operator_site.refusals import Refusal
from operator_site.sql import instances, tuples

MAX_DIRECTIVE_MINUTES = 1440  # a directive is short-lived: at most a day
DEFAULT_DIRECTIVE_MINUTES = 60


def normalise_topic(topic: str | None) -> str:
    """A topic as it is stored and compared: whitespace collapsed, lower-cased, in its plain form
    (NFKC). A topic given as an argument is in that form already (the door refuses one that is not:
    operator_site.display, "identifiers"); a notice's title is free text, so a mute or a focus on
    "newsletters" still finds it written in full-width letters or with a ligature."""
    return " ".join(unicodedata.normalize("NFKC", topic or "").split()).lower()


def set_directive(
    *,
    principal: Principal,
    kind: str,
    topic: str | None,
    minutes: int,
    reason: str | None,
    now: datetime | None = None,
) -> tuple[Directive, list[int]]:
    """Put a directive in force for `minutes`. A newer directive of the same kind and topic
    replaces the one in force (the latest instruction wins); returns the new row and the ids it
    superseded."""
    if kind not in Directive.Kind.values:
        raise Refusal("invalid_kind", f"Unknown directive kind {kind!r}; use quiet, topic_mute or focus.")
    topic_norm = normalise_topic(topic)
    if kind in Directive.TOPIC_KINDS and not topic_norm:
        raise Refusal("topic_required", f"A {kind} directive needs a topic.")
    if kind == Directive.Kind.QUIET and topic_norm:
        raise Refusal("topic_not_allowed", "A quiet directive holds everything; it takes no topic.")
    if not 1 <= minutes <= MAX_DIRECTIVE_MINUTES:
        raise Refusal("minutes_out_of_range", f"minutes must be between 1 and {MAX_DIRECTIVE_MINUTES}.")
    now = now or timezone.now()
    in_force = Directive.objects.active(now).filter(kind=kind, topic=topic_norm)
    superseded = list(in_force.values_list("id", flat=True))
    in_force.update(cleared_at=now, cleared_by=principal, clear_reason=Directive.ClearReason.SUPERSEDED)
    directive = Directive.objects.create(
        kind=kind,
        topic=topic_norm,
        reason=(reason or "").strip(),
        set_by=principal,
        actor=principal.name,
        created_at=now,
        expires_at=now + timedelta(minutes=minutes),
    )
    return directive, superseded


def clear_directives(
    *,
    principal: Principal,
    directive_id: int | None = None,
    kind: str | None = None,
    everything: bool = False,
    now: datetime | None = None,
) -> list[Directive]:
    """Lift one directive (by id), every directive of one kind, or all of them."""
    if sum((directive_id is not None, kind is not None, everything)) != 1:
        raise Refusal("one_selector_required", "Give exactly one of id, kind, or all: true.")
    now = now or timezone.now()
    targets = Directive.objects.active(now)
    if directive_id is not None:
        targets = targets.filter(id=directive_id)
        if not targets.exists():
            raise Refusal(
                "not_found", f"No directive {directive_id} is in force (unknown, expired or cleared)."
            )
    elif kind is not None:
        targets = targets.filter(kind=kind)
    cleared = list(targets.order_by("expires_at", "id"))
    Directive.objects.filter(id__in=[d.id for d in cleared], cleared_at__isnull=True).update(
        cleared_at=now, cleared_by=principal, clear_reason=Directive.ClearReason.CLEARED
    )
    for directive in cleared:
        directive.cleared_at, directive.cleared_by, directive.clear_reason = now, principal, "cleared"
    return cleared


def _in_force(now: datetime) -> QuerySet[Directive]:
    return Directive.objects.active(now).order_by("expires_at", "id")


def _in_force_rows(now: datetime) -> QuerySet[Directive, tuple[int, str, str]]:
    return _in_force(now).values_list("id", "kind", "topic")


def active_directives(now: datetime | None = None) -> list[Directive]:
    """In force now, soonest expiry first. Read on every list call and every delivery decision, so it
    runs the ORM's rule compiled once per connection (`sql.instances`)."""
    return instances(_in_force, now=now or timezone.now())


def _reads(text: str) -> str:
    """What a topic or a notice's text reads as: its invisible characters dropped (a zero-width space
    or a soft hyphen inside "paypal" is shown as a token, but must not split the word a mute looks
    for), then folded (`operator_site.lookalikes.fold`: plain form, each look-alike letter as the
    ASCII one it reads as, lower case, spaces collapsed). A notice's title is free text, so it may
    hold either."""
    return lookalikes.fold(lookalikes.as_seen(text))


def is_about(directive_topic: str, *texts: str) -> bool:
    """A notice is about a topic when the topic's words appear, whole, in its topic or title, as the
    person reads them (`_reads`): a mute on "paypal" holds a title that spells it in Cyrillic
    letters or with a zero-width space inside; a focus on it lets such a title through."""
    return _about(directive_topic, _read_all(texts))


def _read_all(texts: tuple[str, ...]) -> str:
    return " ".join(_reads(t) for t in texts if t)


def _about(directive_topic: str, text: str) -> bool:
    """`is_about`, with the notice's texts already read (`_read_all`): once per notice, not once
    per directive. The topic's reading, whole: no word character (`\\w`: a letter, a digit or "_")
    right before or after it."""
    topic = _topic_read(directive_topic)
    if not topic:
        return False
    at = text.find(topic)
    while at >= 0:
        end = at + len(topic)
        if not (at and _word_char(text[at - 1])) and not (end < len(text) and _word_char(text[end])):
            return True
        at = text.find(topic, at + 1)
    return False


def _word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"  # what `\w` matches in a str pattern


@functools.lru_cache(maxsize=1024)
def _topic_read(directive_topic: str) -> str:
    """A directive's topic as it reads (`_reads`), read once per process: a topic is stored text."""
    return _reads(directive_topic)


@functools.lru_cache(maxsize=16)
def _any_about(directive_topics: tuple[str, ...]) -> re.Pattern[str]:
    """One pattern finding any of the topics, whole, in a notice's read text: a notice is matched
    against all the directives in force in one search, not one search per directive (1,000 mutes
    in force made each notice cost 157 ms: 31 s for a pass over 200 held notices). Compiled once
    per set of topics. A topic that reads as nothing matches nothing."""
    read = sorted({t for t in map(_topic_read, directive_topics) if t}, key=len, reverse=True)
    if not read:
        return re.compile(r"(?!)")
    return re.compile(rf"(?<!\w)(?:{'|'.join(map(re.escape, read))})(?!\w)")


def _first_about(directive_topics: Sequence[str], text: str) -> int | None:
    """Where in `directive_topics` the first topic the text is about is, or None: one search when
    none is (the usual case), one per topic only when one is."""
    if not directive_topics or _any_about(tuple(directive_topics)).search(text) is None:
        return None
    return next((at for at, t in enumerate(directive_topics) if _about(t, text)), None)


Judge = Callable[[str, str], "str | None"]


def hold_judge(now: datetime | None = None) -> Judge:
    """The directives in force at `now`, read once, as a judge of notices: `judge(topic, title)`
    says why they hold a (non-safety) notice, or None. A pass over many notices reads them once
    (their id, kind and topic: no model instances) and matches each notice against all of them in
    one search.

    `quiet` holds everything; `topic_mute` holds notices about its topic; `focus` holds notices
    about anything else (several focus directives: on-topic for any of them passes). Where a quiet
    and a mute both hold a notice, the reason given is the one of the directive first in force
    order (soonest expiry first)."""
    rows = tuples(_in_force_rows, now=now or timezone.now())
    quiet_at = next((at for at, (_, kind, _) in enumerate(rows) if kind == Directive.Kind.QUIET), None)
    mutes = [(at, topic) for at, (_, kind, topic) in enumerate(rows) if kind == Directive.Kind.TOPIC_MUTE]
    focus_topics = [topic for _, kind, topic in rows if kind == Directive.Kind.FOCUS]

    def quiet_reason() -> str:
        expires = Directive.objects.values_list("expires_at", flat=True).get(id=rows[quiet_at][0])
        return f"quiet until {expires:%Y-%m-%d %H:%M} UTC"

    def judge(topic: str, title: str) -> str | None:
        if not rows:
            return None
        text = _read_all((topic, title)) if mutes or focus_topics else ""
        muted = _first_about([t for _, t in mutes], text) if mutes else None
        mute_at = None if muted is None else mutes[muted][0]
        if quiet_at is not None and (mute_at is None or quiet_at < mute_at):
            return quiet_reason()
        if mute_at is not None:
            return f"topic {rows[mute_at][2]!r} is muted"
        if focus_topics and _first_about(focus_topics, text) is None:
            return f"focus on {', '.join(repr(f) for f in focus_topics)}"
        return None

    return judge


def hold_reason(*, topic: str, title: str, now: datetime | None = None) -> str | None:
    """Why the directives in force at `now` hold a (non-safety) notice about `topic`/`title`, or
    None (`hold_judge`, for one notice)."""
    return hold_judge(now)(topic, title)
