"""Confirmation evidence (seed §4.4): a high-stakes write must show that the person said it.

"High-stakes kinds require two things at once: the flag confirmedInConversation, and a
confirmationQuote copied from a recent human-authored instruction. The advisor validates the quote
against the stored comment rows rather than trusting the flag."

The check, in order — each failure is its own refusal code and nothing is written:

1. ``confirmation_required`` — the flag is not ``true``, or there is no quote. The flag alone proves
   nothing; a quote without the flag is not a confirmation either.
2. ``confirmation_not_found`` — after normalising case and whitespace (and typographic quotes), the
   quote is shorter than 12 characters or 3 words ("yes" matches nothing), or it is not a
   contiguous, word-aligned span of any human-authored instruction. A span that only an
   agent-recorded row contains is named as such: agent rows are never evidence, and neither are
   observations (they are not instruction rows at all).
3. ``confirmation_stale`` — only human-authored rows recorded before the window
   (``OPERATOR_CONFIRMATION_WINDOW_HOURS``, default 72) contain it.
4. ``confirmation_unbound`` — the quote does not mention what it authorises. Each binding (one per
   high-stakes change) needs its key as a whole phrase (``home_city`` → "home city") or a
   significant word of its value (the new value; for a retirement, the value being retired).
5. ``confirmation_reused`` — every matching instruction already authorised one of these keys: one
   instruction authorises a given key once (``ConfirmationUse``, UNIQUE per instruction, scope and
   subject).

Reusable as is by any gated model (the goal model calls it with ``scope="goal_model"``)::

    confirmation = check_confirmation(
        confirmed=args.confirmedInConversation,
        quote=args.confirmationQuote,
        scope="goal_model",
        bindings=[Binding(subject="goal/marathon", key="marathon", values=("run a marathon",))],
    )
    ...  # claim the version, write
    record_confirmation_use(confirmation, version=new_version_number)
    confirmation.as_evidence()  # {"instruction": id, "span": "...", ...} for the version row
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from beliefs.models import ConfirmationUse, Instruction
from operator_site.face.envelope import Refusal

MIN_QUOTE_CHARS = 12
MIN_QUOTE_WORDS = 3
# Rows examined when explaining why nothing matched (stale or agent-recorded): bounded work.
_DIAGNOSTIC_SCAN = 5000

_TYPOGRAPHIC = str.maketrans(
    {
        "\u2018": "'",  # left single quotation mark
        "\u2019": "'",  # right single quotation mark (the typographic apostrophe)
        "\u201a": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u00a0": " ",  # no-break space
    }
)

# Words too common to bind a quote to a value ("the", "not" and friends mention nothing).
_STOPWORD_TEXT = """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i i'm if in into is it its itself
    just let me more most my myself no nor not now of off on once only or other our ours ourselves
    out over own please same she should so some such than that the their theirs them themselves then
    there these they this those through to too under until up very was we were what when where which
    while who whom why will with would yes you your yours yourself yourselves also okay ok yeah sure
    thing things want like really get got make made use used call called"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def window_hours() -> int:
    return int(getattr(settings, "OPERATOR_CONFIRMATION_WINDOW_HOURS", 72))


def normalise(text: str) -> str:
    """Case-folded, typographic quotes straightened, whitespace runs collapsed to one space."""
    return " ".join(text.translate(_TYPOGRAPHIC).casefold().split())


def _normalise_with_map(text: str) -> tuple[str, list[int]]:
    """`normalise(text)` plus, for each of its characters, the index it came from in `text`."""
    out: list[str] = []
    where: list[int] = []
    pending_space = False
    for i, ch in enumerate(text.translate(_TYPOGRAPHIC)):
        if ch.isspace():
            pending_space = bool(out)
            continue
        if pending_space:
            out.append(" ")
            where.append(i - 1)
            pending_space = False
        for folded in ch.casefold():
            out.append(folded)
            where.append(i)
    return "".join(out), where


def words(text: str) -> list[str]:
    return re.findall(r"\w+(?:'\w+)?", normalise(text))


def significant_words(text: str) -> list[str]:
    """Words of a value that can bind a quote to it: not a stopword, 3+ letters or 2+ digits."""
    out = []
    for word in words(text):
        if word in STOPWORDS:
            continue
        if (word.isdigit() and len(word) >= 2) or (not word.isdigit() and len(word) >= 3):
            out.append(word)
    return list(dict.fromkeys(out))


def key_phrase(key: str) -> str:
    """How a key is said: separators become spaces (`home_city` → "home city")."""
    return " ".join(re.split(r"[\W_]+", normalise(key))).strip()


def _contains_phrase(haystack: str, phrase: str) -> bool:
    if not phrase:
        return False
    return re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)", haystack) is not None


def find_span(text: str, quote_norm: str) -> tuple[int, int] | None:
    """Where `quote_norm` (already normalised) occurs in `text` as a word-aligned contiguous span,
    as (start, end) indices into the ORIGINAL text; None if it does not."""
    norm, where = _normalise_with_map(text)
    start = 0
    while True:
        at = norm.find(quote_norm, start)
        if at < 0:
            return None
        end = at + len(quote_norm)
        left_ok = at == 0 or not (norm[at - 1].isalnum() and quote_norm[0].isalnum())
        right_ok = end == len(norm) or not (norm[end].isalnum() and quote_norm[-1].isalnum())
        if left_ok and right_ok:
            return where[at], where[end - 1] + 1
        start = at + 1


@dataclass(frozen=True)
class Binding:
    """One thing a confirmation must authorise: `subject` is the key a use is recorded under (one
    instruction authorises it once); the quote must mention `key` as a phrase or a significant word
    of one of `values`."""

    subject: str
    key: str
    values: tuple[str, ...] = ()

    def mentioned_in(self, quote_norm: str) -> bool:
        if _contains_phrase(quote_norm, key_phrase(self.key)):
            return True
        return any(_contains_phrase(quote_norm, w) for v in self.values for w in significant_words(v))


@dataclass(frozen=True)
class Confirmation:
    """A quote that passed: the instruction it came from and the exact span (original text)."""

    instruction: Instruction
    span: str
    start: int
    end: int
    scope: str
    bindings: tuple[Binding, ...]

    def as_evidence(self) -> dict[str, Any]:
        return {
            "instruction": self.instruction.id,
            "span": self.span,
            "start": self.start,
            "end": self.end,
            "recorded_by": self.instruction.actor,
            "recorded_at": self.instruction.created_at.isoformat(),
        }


def _matches(rows: Sequence[Instruction], quote_norm: str) -> list[tuple[Instruction, tuple[int, int]]]:
    found = []
    for row in rows:
        span = find_span(row.text, quote_norm)
        if span is not None:
            found.append((row, span))
    return found


def _prefiltered(queryset: Any, quote_norm: str) -> list[Instruction]:
    """Rows that might contain the quote (a cheap SQL filter on its longest ASCII word), bounded."""
    ascii_words = [w for w in re.findall(r"\w+", quote_norm) if w.isascii()]
    if ascii_words:
        queryset = queryset.filter(text__icontains=max(ascii_words, key=len))
    return list(queryset.order_by("-id")[:_DIAGNOSTIC_SCAN])


def check_confirmation(
    *,
    confirmed: bool | None,
    quote: str | None,
    scope: str,
    bindings: Sequence[Binding],
    now: datetime | None = None,
) -> Confirmation:
    """Validate a confirmation against the stored instruction rows; raise `Refusal` (one of the five
    `confirmation_*` codes) or return what matched. Writes nothing (see `record_confirmation_use`)."""
    subjects = [b.subject for b in bindings]
    if confirmed is not True or quote is None or not quote.strip():
        missing = []
        if confirmed is not True:
            missing.append("confirmedInConversation: true")
        if quote is None or not quote.strip():
            missing.append("a confirmationQuote")
        raise Refusal(
            "confirmation_required",
            f"Changing high-stakes beliefs ({', '.join(subjects)}) needs both confirmedInConversation: "
            "true and a confirmationQuote copied from something the person said (recorded with "
            f"operator_record_instruction). Missing: {' and '.join(missing)}. The flag alone proves "
            "nothing; nothing was written.",
            missing=missing,
            subjects=subjects,
        )
    quote_norm = normalise(quote)
    if len(quote_norm) < MIN_QUOTE_CHARS or len(words(quote_norm)) < MIN_QUOTE_WORDS:
        raise Refusal(
            "confirmation_not_found",
            f"The quote {quote.strip()[:40]!r} is too short to identify anything the person said: a "
            f"confirmation quote needs at least {MIN_QUOTE_CHARS} characters and {MIN_QUOTE_WORDS} "
            "words, copied from a human-authored instruction. Nothing was written.",
            minimum={"chars": MIN_QUOTE_CHARS, "words": MIN_QUOTE_WORDS},
        )

    now = now or timezone.now()
    hours = window_hours()
    since = now - timedelta(hours=hours)
    fresh_rows = Instruction.objects.filter(human_authored=True, created_at__gte=since, created_at__lte=now)
    fresh = _matches(list(fresh_rows.order_by("-created_at", "-id")), quote_norm)
    if not fresh:
        stale = _matches(
            _prefiltered(Instruction.objects.filter(human_authored=True, created_at__lt=since), quote_norm),
            quote_norm,
        )
        if stale:
            newest = max(row.created_at for row, _ in stale)
            raise Refusal(
                "confirmation_stale",
                f"The quote matches what the person said at {newest:%Y-%m-%d %H:%M} UTC, which is older "
                f"than the {hours}-hour confirmation window. Ask again and record the new answer; nothing "
                "was written.",
                instructions=[row.id for row, _ in stale][:10],
                window_hours=hours,
            )
        by_agents = _matches(
            _prefiltered(Instruction.objects.filter(human_authored=False), quote_norm), quote_norm
        )
        if by_agents:
            raise Refusal(
                "confirmation_not_found",
                "The quote matches only instruction rows recorded by an agent, which are never evidence: "
                "only rows a human principal recorded count. Nothing was written.",
                agent_recorded=[row.id for row, _ in by_agents][:10],
            )
        raise Refusal(
            "confirmation_not_found",
            "No human-authored instruction contains this quote (compared ignoring case and spacing, as "
            "a contiguous run of whole words). Copy the person's words exactly; nothing was written.",
        )

    unbound = [b.subject for b in bindings if not b.mentioned_in(quote_norm)]
    if unbound:
        raise Refusal(
            "confirmation_unbound",
            f"The quote is the person's, but it does not mention {', '.join(unbound)}: a confirmation "
            "must name what it authorises (the key, or a significant word of the new value). Nothing "
            "was written.",
            unbound=unbound,
        )

    used_for: dict[int, list[dict[str, Any]]] = {}
    rows = [row for row, _ in fresh]
    for use in ConfirmationUse.objects.filter(instruction__in=rows, scope=scope, subject__in=subjects):
        used_for.setdefault(use.instruction_id, []).append({"subject": use.subject, "version": use.version})
    for row, (start, end) in fresh:
        if row.id not in used_for:
            return Confirmation(row, row.text[start:end], start, end, scope, tuple(bindings))
    uses = [{"instruction": row.id, "used_for": used_for[row.id]} for row, _ in fresh]
    raise Refusal(
        "confirmation_reused",
        "Every instruction matching this quote has already authorised a change of "
        f"{', '.join(sorted({u['subject'] for r in uses for u in r['used_for']}))}: one instruction "
        "authorises a given key once. Ask the person again; nothing was written.",
        uses=uses,
    )


def record_confirmation_use(confirmation: Confirmation, *, version: int) -> None:
    """Spend the instruction on each bound subject (inside the write's transaction). A concurrent
    writer that spent it first makes this a `confirmation_reused` refusal."""
    try:
        with transaction.atomic():
            ConfirmationUse.objects.bulk_create(
                [
                    ConfirmationUse(
                        instruction=confirmation.instruction,
                        scope=confirmation.scope,
                        subject=b.subject,
                        version=version,
                        span=confirmation.span,
                    )
                    for b in confirmation.bindings
                ]
            )
    except IntegrityError as exc:
        raise Refusal(
            "confirmation_reused",
            f"Instruction #{confirmation.instruction.id} was just used for the same key by another "
            "write: one instruction authorises a given key once. Nothing was written.",
            uses=[{"instruction": confirmation.instruction.id}],
        ) from exc
