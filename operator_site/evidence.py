"""Confirmation evidence: a high-stakes change is authorised only by the person's own words saying
this change. docs/world-model.md ("The evidence rule") states the six rules with examples; each
failure is its own refusal naming the rule. The words the rules read are in `operator_site.wording`,
the rows they read in `operator_site.models` (`Instruction`, `ConfirmationUse`). The world model and
the goal model (``scope="goal_model"``) run the same check, through `GATE`: it is the kernel's, so
no domain depends on another for it."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Annotated, Any, NoReturn

from django.conf import settings
from django.db.models import F, Q, QuerySet
from django.utils import timezone
from pydantic import Field

from operator_site import wording
from operator_site.models import ConfirmationUse, Instruction, Principal
from operator_site.proposals import ApprovalEvidence
from operator_site.refusals import Refusal
from operator_site.sql import insert_unless_conflict
from operator_site.versioned import EvidenceGate
from operator_site.wording import Sentence

# Rows examined per lookup, and characters read: bounded work whatever the history. The person's
# own fresh rows that hold the quote's longest word are read newest first, each cut into sentences,
# until one authorises the change or `_SCAN_CHARS` characters have been read; explaining a refusal
# (stale, revoked or agent-recorded rows) reads at most `_EXPLAIN_ROWS` rows and `_EXPLAIN_CHARS`
# characters in all, however many and however long the rows an agent recorded (where the budget
# ends, the refusal is the generic one). Cutting text into sentences costs 1 to 7 µs a character, so
# 400,000 characters (twenty instructions of the longest kind, each holding the quoted word, within
# the window) bound a lookup to a few seconds of CPU at worst; it was 5,000,000 (half a minute).
_SCAN = 5000
_SCAN_CHARS = 400_000
_EXPLAIN_ROWS = 50
_EXPLAIN_CHARS = 400_000
# Where a refused agent can go instead (issue: proposals). One sentence, appended to refusals of
# the person's words.
ASK_INSTEAD = (
    "If the person's words are not enough, ask them to say it plainly through a human channel, or "
    "propose the exact change for them to accept: operator_record_action_intent with action type "
    "world_model_change (goal_model_change for goals) and these same changes."
)

OPERATIONS = ("add", "update", "retire", "remove", "pause", "resume", "review", "rank")
_CUED = {"retire": "retire", "remove": "remove", "pause": "pause", "resume": "resume", "review": "review"}


# What a tool's `confirmationQuote` argument tells a model (both gated models' tools use it).
QUOTE_DESCRIPTION = (
    "The person's whole, firm sentences (no question, hedge or condition), copied from "
    "one instruction a human recorded (operator_record_instruction) in the last 72 h by "
    "default; never a fragment. Each high-stakes change in its own sentence, with its "
    "negations and every significant word of its key or title and new value (to retire, "
    "pause, resume, review, remove or re-rank: a word saying so). A sentence authorises "
    "one change, once."
)

# What a tool's `confirmedInConversation` argument is (both gated models' tools use it). Only JSON
# true or false: `ToolArgs` refuses "true", 1 and the like for every boolean argument.
Confirmed = Annotated[
    bool | None,
    Field(description="true only if the person confirmed it in conversation; alone it proves nothing."),
]


def window_hours() -> int:
    return int(getattr(settings, "OPERATOR_CONFIRMATION_WINDOW_HOURS", 72))


@dataclass(frozen=True)
class Claim:
    """One high-stakes change a quote must authorise.

    `subject`: what its use is recorded under (``identity/home_city``, ``goal/12``); `operation`:
    one of `OPERATIONS`; `target`: the key or title naming what changes; `value`: the new value
    (an add or update); for ``rank`` (or an add placed at a rank of its own): the new 1-based
    `rank`, the current one (`rank_from`, None for a new item) and how many are ranked (`ranked`);
    `cleared`: the fields an update empties (the words must say to remove them)."""

    subject: str
    operation: str
    target: str
    value: str | None = None
    rank: int | None = None
    rank_from: int | None = None
    ranked: int | None = None
    cleared: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.operation not in OPERATIONS:
            raise ValueError(f"unknown operation {self.operation!r}")

    @property
    def target_words(self) -> list[str]:
        return wording.key_words(self.target)

    @property
    def value_words(self) -> list[str]:
        return wording.value_words(self.value) if self.value else []

    @property
    def value_negations(self) -> list[str]:
        return [w for _, w in wording.negations_in(wording.words(self.value))] if self.value else []


@dataclass(frozen=True)
class Use:
    """Which sentence authorised which change."""

    claim: Claim
    sentence: Sentence


@dataclass(frozen=True)
class Confirmation:
    """A quote that passed: the instruction, the span it quoted (offsets into the instruction's
    text) and the sentence that authorised each change."""

    instruction: Instruction
    span: str
    start: int
    end: int
    scope: str
    uses: tuple[Use, ...]

    def sentence_for(self, subject: str) -> str:
        """The sentence that authorised the change of `subject` (the whole span if none did)."""
        for use in self.uses:
            if use.claim.subject == subject:
                return use.sentence.text
        return self.span

    def image_evidence(self, subject: str) -> dict[str, Any]:
        """What a belief (or goal) keeps of it: the instruction and the sentence that said it."""
        return {"instruction": self.instruction.id, "span": self.sentence_for(subject)}

    def notice_lines(self) -> list[str]:
        row = self.instruction
        return [
            f"Evidence: instruction #{row.id}, recorded by {row.actor} at "
            f"{row.created_at:%Y-%m-%d %H:%M} UTC:",
            f"  “{self.span}”",
        ]

    def as_evidence(self) -> dict[str, Any]:
        return {
            "instruction": self.instruction.id,
            "span": self.span,
            "start": self.start,
            "end": self.end,
            "sentences": [
                {"sentence": u.sentence.index, "text": u.sentence.text, "authorises": u.claim.subject}
                for u in self.uses
            ],
            "recorded_by": self.instruction.actor,
            "recorded_at": self.instruction.created_at.isoformat(),
        }


def evidence_summary(evidence: Confirmation | ApprovalEvidence | None) -> dict[str, Any] | None:
    """What a write's answer says of its evidence: the instruction and the span quoted, or the
    approval decision and its intent."""
    if isinstance(evidence, Confirmation):
        return {"instruction": evidence.instruction.id, "span": evidence.span}
    if isinstance(evidence, ApprovalEvidence):
        return {"approval": evidence.decision, "intent": evidence.intent}
    return None


# --- finding the person's words ----------------------------------------------------------------------
@dataclass
class _Match:
    """Where the quote's words are in one instruction: whole sentences first..last (`whole`), or
    only inside them (a fragment)."""

    row: Instruction
    sentences: list[Sentence]
    first: int
    last: int
    whole: bool

    @property
    def text(self) -> str:
        return self.row.text[self.sentences[self.first].start : self.sentences[self.last].end]


def _joined(found: Sequence[str]) -> tuple[str, list[int]]:
    """Words as one string, each between two NUL characters (a word never holds one), and where
    each word starts in it: a run of words is then one substring, found in linear time."""
    offsets = []
    at = 1
    for w in found:
        offsets.append(at)
        at += len(w) + 1
    return "\0" + "\0".join(found) + "\0", offsets


def _locate(row: Instruction, quote: tuple[str, ...]) -> _Match | None:
    """The quote's words in `row`: a run of whole sentences if they are one, else the sentences
    a fragment lies in; None if the words are not there in that order. Linear in the row's length
    (plus one comparison of the quote per sentence start): no per-position slicing."""
    sentences = wording.split_sentences(row.text)
    if not sentences:
        return None
    flat: list[str] = []
    owner: list[int] = []
    starts: list[int] = []
    for s in sentences:
        starts.append(len(flat))
        flat += s.words
        owner += [s.index] * len(s.words)
    n = len(quote)
    if n == 0 or n > len(flat):
        return None
    text, offsets = _joined(flat)
    needle = "\0" + "\0".join(quote) + "\0"
    ends = set(starts) | {len(flat)}
    for at in starts:  # whole sentences: the quote starts where one does and ends where one does
        if at + n in ends and text.startswith(needle, offsets[at] - 1):
            return _Match(row, sentences, owner[at], owner[at + n - 1], whole=True)
    found = text.find(needle)
    if found < 0:
        return None
    at = bisect.bisect_left(offsets, found + 1)
    return _Match(row, sentences, owner[at], owner[at + n - 1], whole=False)


def _holds(row: Instruction, needle: str) -> bool:
    """Whether a row's words hold the quote's words in order (a cheap test, no sentences)."""
    return needle in _joined(wording.words(row.text))[0]


def _evidence_rows(*, live: bool, human: bool = True) -> QuerySet[Instruction]:
    """Instructions recorded by humans (or, `human=False`, by agents). `live`: only those whose
    principal is still an active human and that were recorded since its token was last revoked or
    replaced; not `live`: the other human-recorded ones."""
    rows = Instruction.objects.filter(human_authored=human)
    if human:
        live_principal = Q(
            principal__active=True, principal__revoked_at__isnull=True, principal__kind=Principal.Kind.HUMAN
        ) & (Q(principal__evidence_since__isnull=True) | Q(created_at__gte=F("principal__evidence_since")))
        rows = rows.filter(live_principal) if live else rows.exclude(live_principal)
    return rows


def _prefiltered(
    rows: QuerySet[Instruction], quote: tuple[str, ...], limit: int = _SCAN
) -> list[Instruction]:
    """Rows that may hold the quote (a cheap SQL filter on its longest ASCII word), newest first."""
    ascii_words = [w for w in quote if w.isascii() and "'" not in w]
    if ascii_words:
        rows = rows.filter(text__icontains=max(ascii_words, key=len))
    return list(rows.select_related("principal").order_by("-created_at", "-id")[:limit])


def _budgeted(rows: Iterable[Instruction], chars: int) -> Iterable[Instruction]:
    """The rows, newest first, until `chars` characters have been read."""
    for row in rows:
        chars -= len(row.text)
        if chars < 0:
            return
        yield row


def _find(rows: Iterable[Instruction], quote: tuple[str, ...]) -> Iterator[_Match]:
    """The rows' matches of the quote, in the rows' order, each row located only when asked for."""
    return (m for m in (_locate(row, quote) for row in _budgeted(rows, _SCAN_CHARS)) if m is not None)


# --- the rules on one match ------------------------------------------------------------------------------
def _said(sentence: Sentence) -> str:
    return f"“{sentence.text}”"


def _reported(context: Sequence[Sentence]) -> Refusal | None:
    """Words that report what someone else said ("The bank's text says my city is Springfield",
    "The letter said:"): not the person deciding. Checked after the polarity rule, so that a
    denial ("The message saying X is fake") is refused as one."""
    for s in context:
        phrase = wording.REPORTED.first(s.words)
        reported = None if phrase is None else " ".join(phrase)
        if reported:
            return Refusal(
                "confirmation_not_firm",
                f"The person's words do not decide anything: it reports what someone said (“{reported}”): "
                f"{_said(s)}. A question, a hedge, a condition or reported words authorise no change; "
                f"nothing was written. {ASK_INSTEAD}",
                rule="firm",
                sentence=s.text,
            )
    return None


def _firmness(context: Sequence[Sentence]) -> Refusal | None:
    for s in context:
        if s.question:
            why = f"it asks a question: {_said(s)}"
        else:
            phrase = wording.HEDGES.first(s.words)
            hedge = None if phrase is None else " ".join(phrase)
            condition = wording.condition_in(s.words)
            if wording.sarcastic(s.text):
                why = f"it is marked as sarcasm: {_said(s)}"
            elif hedge:
                why = f"it hedges (“{hedge}”): {_said(s)}"
            elif condition:
                why = f"it is conditional (“{condition}”): {_said(s)}"
            else:
                continue
        return Refusal(
            "confirmation_not_firm",
            f"The person's words do not decide anything: {why}. A question, a hedge, a condition or "
            f"reported words authorise no change; nothing was written. {ASK_INSTEAD}",
            rule="firm",
            sentence=s.text,
        )
    return None


@dataclass
class _Fit:
    """How well one sentence binds one claim: what it lacks, and the cue phrases it matched."""

    sentence: Sentence
    missing_target: list[str] = field(default_factory=list)
    missing_value: list[str] = field(default_factory=list)
    missing_cue: bool = False
    wrong_position: str | None = None
    contrary: str | None = None
    unattached: bool = False
    cue_spans: list[tuple[int, int]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.lacks

    @property
    def lacks(self) -> int:
        return (
            len(self.missing_target)
            + len(self.missing_value)
            + self.missing_cue
            + bool(self.wrong_position)
            + bool(self.contrary)
            + self.unattached
        )


_RANK_NOUNS = frozenset({"number", "rank", "position", "place"})
_FRAME = frozenset(
    {w for phrase in (*wording.CUES["rank"], *wording.POSITIONS) for w in phrase}
    | _RANK_NOUNS
    | {"goal", "goals", "priority", "priorities"}
    # Linking words: how a value is said of its key ("has changed to", "is now officially").
    | {"change", "changed", "switch", "switched", "update", "updated", "become", "becomes", "became"}
    | {"officially", "actually", "definitely", "remember", "note"}
)
_PRONOUNS = frozenset({"it", "them", "this", "that", "one", "these", "those"})
_CLEAR = (*wording.CUES["remove"], ("clear",), ("empty",), ("blank",))


def _cue_phrases(claim: Claim) -> tuple[tuple[str, ...], ...]:
    """The phrases one of which must say the claim's operation (none for a plain add or update)."""
    if claim.operation == "rank":
        return wording.CUES["rank"]
    if claim.operation in _CUED:
        return wording.CUES[_CUED[claim.operation]]
    if claim.cleared:
        return _CLEAR
    return ()


def _zones(claim: Claim, sentence: Sentence, clause: tuple[int, ...]) -> set[int]:
    """The clauses of the sentence that are about the claim's target: those holding one of its
    words, and a clause right after one that refers back to it ("... on hold and resume it")."""
    targets = {wording.stem(w) for w in claim.target_words}
    zones = {clause[i] for i, st in enumerate(sentence.stems) if st in targets}
    for i, w in enumerate(sentence.words):
        if w in _PRONOUNS and clause[i] - 1 in zones:
            zones.add(clause[i])
    return zones


def _positions(sentence: Sentence, within: Sequence[bool], last: int) -> set[int]:
    """The ranks the sentence names in the given words ("second", "top", "position 3"; -1 is
    `last`)."""
    found = sentence.words
    named: set[int] = set()
    for phrase, pos in wording.POSITIONS.items():
        for at in wording.find_phrase(found, phrase):
            if within[at]:
                named.add(pos)
    for at, w in enumerate(found[:-1]):
        if within[at] and w in ("number", "rank", "position", "place") and found[at + 1].isdigit():
            named.add(int(found[at + 1]))
    return {last if p == -1 else p for p in named}


def _attached(claim: Claim, sentence: Sentence, clause: Sequence[int]) -> bool:
    """Whether the new value is said of the target: one stretch of the sentence holds every word of
    the value and a word of the target, with no other significant word between them, and a word of
    the value shares a clause with a word of the target or stands in a clause that names nothing
    else ("My name is Robert and my brother is Bob" does not say the name is Bob; nor does "I call
    my dog Rex and my name is Sam" say it is Rex)."""
    wanted = {wording.stem(w) for w in claim.value_words}
    targets = {wording.stem(w) for w in claim.target_words}
    if not wanted:
        return True
    found = sentence.words

    def other(i: int, w: str, st: str) -> bool:
        """Word `i` names something else than the target and the value."""
        if st in wanted or st in targets:
            return False
        if w in _FRAME or (w.isdigit() and i > 0 and found[i - 1] in _RANK_NOUNS):
            return False  # words about the list, the rank or the link ("the goal", "at position 2",
            # "has changed to") name nothing else
        return wording.is_significant(w) or any(c.isdigit() for c in w)

    crowded = {
        clause[i] for i, (w, st) in enumerate(zip(found, sentence.stems, strict=True)) if other(i, w, st)
    }
    seen: set[str] = set()
    target_clauses: set[int] = set()
    value_clauses: set[int] = set()
    for i, (w, st) in enumerate(zip(found, sentence.stems, strict=True)):
        if other(i, w, st):
            seen, target_clauses, value_clauses = set(), set(), set()  # another thing named
            continue
        if st in wanted or st in targets:
            seen.add(st)
            if st in wanted:
                value_clauses.add(clause[i])
            if st in targets:
                target_clauses.add(clause[i])
        # The value shares a clause with the target, or sits in a clause naming nothing else
        # ("Please call me Iain from now on, that is my name").
        if wanted <= seen and target_clauses and (target_clauses & value_clauses or value_clauses - crowded):
            return True
    return False


def _fit(claim: Claim, sentence: Sentence) -> _Fit:
    have = set(sentence.stems)
    fit = _Fit(sentence)
    fit.missing_target = [w for w in claim.target_words if wording.stem(w) not in have]
    fit.missing_value = [w for w in claim.value_words if wording.stem(w) not in have]
    clause = wording.clauses(sentence.text)
    if len(clause) != len(sentence.words):  # cannot happen: the same words, read the same way
        clause = tuple(0 for _ in sentence.words)
    zones = _zones(claim, sentence, clause)
    in_zone = [c in zones for c in clause]
    target_stems = {wording.stem(w) for w in claim.target_words}
    # A cue counts only in a clause about the target ("Drop the gym membership but keep running
    # the marathon" does not drop the marathon).
    phrases = _cue_phrases(claim)
    if phrases:
        for phrase in phrases:
            fit.cue_spans += [
                (i, i + len(phrase))
                for i in wording.find_said(sentence, phrase)
                if any(in_zone[i : i + len(phrase)])
            ]
        fit.missing_cue = not fit.cue_spans
    contrary = (
        wording.KEEP_WORDS
        if claim.operation in ("retire", "remove", "pause") or claim.cleared
        else frozenset()
    )
    for i, w in enumerate(sentence.words):
        if w in contrary and in_zone[i] and sentence.stems[i] not in target_stems:
            fit.contrary = w
            break
    if claim.rank is not None:
        last = claim.ranked or claim.rank
        named = _positions(sentence, in_zone, last)
        if len(named) > 1:
            fit.wrong_position = f"it names more than one position ({', '.join(map(str, sorted(named)))})"
        elif named and claim.rank not in named:
            fit.wrong_position = f"it says position {next(iter(named))}, not {claim.rank}"
        elif not named:
            fit.wrong_position = _direction(claim, sentence, in_zone)
    if claim.value_words and not fit.missing_value and not fit.missing_target:
        fit.unattached = not _attached(claim, sentence, clause)
    return fit


def _direction(claim: Claim, sentence: Sentence, in_zone: Sequence[bool]) -> str | None:
    """For a rank the sentence does not name: why its words do not say the move (None when they do):
    up (to a smaller rank) needs "higher", "up", "ahead"...; down needs "lower", "down", "behind"...;
    a new item placed among the others, or words saying both ways, need the position itself."""
    assert claim.rank is not None
    if claim.rank_from is None:
        return f"it names no position, and the change puts it at {claim.rank}"
    said = {
        way
        for way, phrases in (("up", wording.RANK_UP), ("down", wording.RANK_DOWN))
        for phrase in phrases
        if any(any(in_zone[i : i + len(phrase)]) for i in wording.find_said(sentence, phrase))
    }
    wanted = "up" if claim.rank < claim.rank_from else "down"
    if said == {wanted}:
        return None
    if not said:
        return f"it names no position and no direction, and the change moves it {wanted} to {claim.rank}"
    if len(said) > 1:
        return "it says both higher and lower"
    way = next(iter(said))
    return f"it says {way}, but the change moves it {wanted} (from {claim.rank_from} to {claim.rank})"


def _unbound(claim: Claim, best: _Fit) -> Refusal:
    lacks = []
    if best.missing_target:
        lacks.append(f"the words {', '.join(map(repr, best.missing_target))} of {claim.target!r}")
    if best.missing_value:
        lacks.append(f"the words {', '.join(map(repr, best.missing_value))} of the new value")
    if best.missing_cue:
        cues = ", ".join(repr(" ".join(p)) for p in _cue_phrases(claim)[:6])
        what = "remove what the change empties" if claim.operation == "update" else f"{claim.operation} it"
        lacks.append(f"a word saying to {what}, in the same clause as {claim.target!r} (such as {cues})")
    if best.contrary:
        lacks.append(f"agreement: it says “{best.contrary}” of {claim.target!r}")
    if best.wrong_position:
        lacks.append(f"the position it asks for ({best.wrong_position})")
    if best.unattached:
        lacks.append(
            f"the new value said of {claim.target!r}: its words are apart from the target's, with other "
            "things named between them"
        )
    return Refusal(
        "confirmation_unbound",
        f"The person's words do not say this change of {claim.subject}: the closest sentence, "
        f"{_said(best.sentence)}, lacks {'; and '.join(lacks)}. A sentence authorises a change only when it "
        f"names the target and says the new value; nothing was written. {ASK_INSTEAD}",
        rule="bound",
        subject=claim.subject,
        sentence=best.sentence.text,
        missing={
            "target": best.missing_target,
            "value": best.missing_value,
            "cue": best.missing_cue,
            "position": best.wrong_position,
            "contrary": best.contrary,
            "attached": not best.unattached,
        },
    )


def _negated(
    text: str, found: Sequence[str], stems: Sequence[str], skip: Sequence[tuple[int, int]] = ()
) -> dict[str, set[bool]]:
    """For each word (by its stem) whether a negation reaches it, once per occurrence
    (`wording.negated`)."""
    skipped = frozenset(i for lo, hi in skip for i in range(lo, hi))
    clause = wording.clauses(text)
    if len(clause) != len(found):  # cannot happen: the same words, read the same way
        clause = tuple(0 for _ in found)
    reached = wording.negated(tuple(found), clause, skipped)
    out: dict[str, set[bool]] = {}
    for st, hit in zip(stems, reached, strict=True):
        out.setdefault(st, set()).add(hit)
    return out


def _scope(claim: Claim, fit: _Fit) -> str | None:
    """Why the negations of the sentence and of the new value reach different words (None when they
    reach the same ones, `wording.negated`): "Never auto-approve payments, always ask me" does not
    say "Always auto-approve payments, never ask me" though both hold one "never"."""
    if not claim.value:
        return None
    value = wording.words(claim.value)
    said = _negated(fit.sentence.text, fit.sentence.words, fit.sentence.stems, fit.cue_spans)
    meant = _negated(claim.value, value, [wording.stem(w) for w in value])
    for w in claim.value_words:
        st = wording.stem(w)
        if st in said and said[st] != meant.get(st):
            if said[st] == {True}:
                return f"the sentence negates “{w}” but the change does not"
            if meant.get(st) == {True}:
                return f"the change negates “{w}” but the sentence does not"
            return f"the sentence says “{w}” both with and without a negation"
    return None


def _polarity(claim: Claim, fit: _Fit, context: Sequence[Sentence]) -> str | None:
    """Why the negations of the context and of the change disagree, or None when they agree."""
    value_negations = list(claim.value_negations)
    target_negations = [w for w in wording.words(claim.target) if wording.is_negation(w)]
    own = [
        at
        for at, _ in wording.negations_in(fit.sentence.words)
        if not any(lo <= at < hi for lo, hi in fit.cue_spans)
    ]
    stray: list[str] = []
    stray_around: list[str] = []
    for s in context:
        if s is not fit.sentence and own and value_negations and wording.bare_negation(s):
            continue  # "No! Never auto-approve payments.": the "No!" says what the sentence says
        for at, word in wording.negations_in(s.words):
            if s is fit.sentence and any(lo <= at < hi for lo, hi in fit.cue_spans):
                continue  # a negative cue ("no longer") is the change itself
            if s is fit.sentence and word in value_negations:
                value_negations.remove(word)
                continue
            if s is fit.sentence and word in target_negations:
                target_negations.remove(word)
                continue
            (stray if s is fit.sentence else stray_around).append(word)
    stray += stray_around
    if stray:
        return f"the sentence says “{stray[0]}” but the change does not"
    if value_negations:
        return f"the new value says “{value_negations[0]}” but the sentence does not"
    return _scope(claim, fit)


def _assign(claims: Sequence[Claim], options: dict[int, list[Sentence]]) -> dict[int, Sentence] | None:
    """A distinct sentence for every claim (bipartite matching; a few claims, a few sentences)."""
    taken: dict[int, int] = {}  # sentence index -> claim number

    def place(c: int, seen: set[int]) -> bool:
        for s in options[c]:
            if s.index in seen:
                continue
            seen.add(s.index)
            if s.index not in taken or place(taken[s.index], seen):
                taken[s.index] = c
                return True
        return False

    for c in range(len(claims)):
        if not place(c, set()):
            return None
    by_claim = {c: s for s, c in taken.items()}
    sentences = {s.index: s for opts in options.values() for s in opts}
    return {c: sentences[i] for c, i in by_claim.items()}


def _unreadable(found: Sequence[str], sentence: str | None = None) -> Refusal | None:
    """A refusal when words mix the letters of two scripts ("never" written with a Cyrillic "e"): a
    look-alike letter can hide a negation or change a name, so such words are evidence of nothing."""
    mixed = wording.mixed_script(found)
    if not mixed:
        return None
    where = f" in {_said_text(sentence)}" if sentence else ""
    return Refusal(
        "confirmation_unreadable",
        f"The words{where} mix the letters of different scripts inside one word (“{mixed[0]}”): a "
        "look-alike letter can hide a negation or change a name, so they authorise no change; nothing "
        f"was written. {ASK_INSTEAD}",
        rule="whole_statements",
        words=mixed[:10],
    )


def _foreign(context: Sequence[Sentence], claims: Sequence[Claim]) -> Refusal | None:
    """A refusal when the sentences hold a word in another script than the Latin one that is not a
    word of the change itself: the rules read English only, and cannot tell whether "нет" says no.
    (A name in its own script, as the new value or the key, is fine.)"""
    own = {w for c in claims for w in (*wording.words(c.value or ""), *wording.words(c.target))}
    for s in context:
        for w in s.words:
            if w not in own and any(wording.script(ch) not in (None, "LATIN") for ch in w):
                return Refusal(
                    "confirmation_unreadable",
                    f"The words in {_said_text(s.text)} hold “{w}”, in a script these rules cannot read "
                    "(they read English only), and it is not part of the change: it could say no. Nothing "
                    f"was written. {ASK_INSTEAD}",
                    rule="whole_statements",
                    words=[w],
                )
    return None


def _said_text(text: str) -> str:
    return f"“{text}”"


def _check_match(match: _Match, claims: Sequence[Claim], scope: str) -> Confirmation:
    context = wording.context_of(match.sentences, match.first, match.last)
    for s in context:
        refusal = _unreadable(s.words, s.text)
        if refusal:
            raise refusal
    refusal = _firmness(context)
    if refusal:
        raise refusal
    quoted = match.sentences[match.first : match.last + 1]
    options: dict[int, list[Sentence]] = {}
    for c, claim in enumerate(claims):
        fits = [_fit(claim, s) for s in quoted]
        bound = [f for f in fits if f.ok]
        if not bound:
            raise _unbound(claim, min(fits, key=lambda f: f.lacks))
        agreeing = []
        problem = None
        for fit in bound:
            problem = _polarity(claim, fit, context)
            if problem is None:
                agreeing.append(fit.sentence)
        if not agreeing:
            raise Refusal(
                "confirmation_polarity",
                f"The person's words and the change of {claim.subject} point opposite ways: {problem} "
                f"({_said(bound[0].sentence)}). A negation must be in both the words and the new value or "
                f"in neither; nothing was written. {ASK_INSTEAD}",
                rule="same_polarity",
                subject=claim.subject,
                sentence=bound[0].sentence.text,
            )
        options[c] = agreeing
    refusal = _reported(context) or _foreign(context, claims)
    if refusal:
        raise refusal
    used = set(
        ConfirmationUse.objects.filter(instruction=match.row, sentence__isnull=False).values_list(
            "sentence", flat=True
        )
    )
    fresh = {c: [s for s in opts if s.index not in used] for c, opts in options.items()}
    assigned = _assign(claims, fresh)
    if assigned is None:
        spent = [claims[c].subject for c, opts in fresh.items() if not opts]
        if spent:
            reason = (
                f"The sentence that says the change of {', '.join(spent)} has already authorised a change: "
                "one sentence authorises one change, once. Ask the person again; nothing was written."
            )
        else:
            reason = (
                f"These {len(claims)} changes rest on fewer sentences than changes: one sentence authorises "
                "one change to one target. Quote a sentence for each change (or make one change per "
                "call); nothing was written."
            )
        raise Refusal(
            "confirmation_reused",
            f"{reason} {ASK_INSTEAD}",
            rule="once",
            instruction=match.row.id,
            subjects=[c.subject for c in claims],
        )
    first, last = match.sentences[match.first], match.sentences[match.last]
    return Confirmation(
        instruction=match.row,
        span=match.text,
        start=first.start,
        end=last.end,
        scope=scope,
        uses=tuple(Use(claims[c], s) for c, s in sorted(assigned.items())),
    )


# --- the check ----------------------------------------------------------------------------------------
def check_confirmation(
    *,
    confirmed: bool | None,
    quote: str | None,
    scope: str,
    claims: Sequence[Claim],
    now: datetime | None = None,
) -> Confirmation:
    """Validate a confirmation against the stored instructions; raise `Refusal` (a
    ``confirmation_*`` code, or ``invalid_key``) or return what matched. Writes nothing (see
    `record_confirmation_use`)."""
    subjects = [c.subject for c in claims]
    nameless = [c for c in claims if not c.target_words]
    if nameless:
        raise Refusal(
            "invalid_key",
            f"{nameless[0].subject}: {nameless[0].target!r} has no significant word (only short or common "
            "words), so no sentence could name it. Give a high-stakes key or title a word that says what "
            "it is; nothing was written.",
            subject=nameless[0].subject,
        )
    if confirmed is not True or quote is None or not quote.strip():
        missing = []
        if confirmed is not True:
            missing.append("confirmedInConversation: true")
        if quote is None or not quote.strip():
            missing.append("a confirmationQuote")
        raise Refusal(
            "confirmation_required",
            f"Changing high-stakes entries ({', '.join(subjects)}) needs both confirmedInConversation: "
            "true and a confirmationQuote: whole sentences the person said (recorded with "
            f"operator_record_instruction by the person). Missing: {' and '.join(missing)}. The flag alone "
            f"proves nothing; nothing was written. {ASK_INSTEAD}",
            rule="required",
            missing=missing,
            subjects=subjects,
        )
    words = wording.words(quote)
    if not words:
        raise Refusal(
            "confirmation_not_found",
            "The quote has no words. Copy whole sentences the person said; nothing was written.",
            rule="persons_words",
        )

    refusal = _unreadable(words)
    if refusal:
        raise refusal
    now = now or timezone.now()
    hours = window_hours()
    since = now - timedelta(hours=hours)
    fresh = _evidence_rows(live=True).filter(created_at__gte=since, created_at__lte=now)
    fragments: list[_Match] = []
    first_refusal: Refusal | None = None
    # Newest first: the person may have said the same thing twice. The first match that authorises
    # the change ends the lookup, so the rows older than it are never cut into sentences.
    for match in _find(_prefiltered(fresh, words), words):
        if not match.whole:
            fragments.append(match)
            continue
        try:
            return _check_match(match, claims, scope)
        except Refusal as refusal:
            first_refusal = first_refusal or refusal
    if first_refusal is not None:
        raise first_refusal
    _explain_missing(fragments, words, since, hours)


def _explain_missing(
    fragments: Sequence[_Match], words: tuple[str, ...], since: datetime, hours: int
) -> NoReturn:
    """No live, fresh instruction holds the quote as whole sentences: say why (rules 1 and 2)."""
    if fragments:
        match = fragments[0]
        raise Refusal(
            "confirmation_fragment",
            f"The quote is part of a sentence, not a whole one. Quote the whole sentence: “{match.text}”. "
            "A piece cut from inside a sentence can say the opposite of the sentence; nothing was "
            "written.",
            rule="whole_statements",
            instruction=match.row.id,
            sentence=match.text,
        )
    needle = _joined(words)[0]
    budget = [_EXPLAIN_CHARS]

    def holding(rows: QuerySet[Instruction]) -> list[Instruction]:
        """The rows (at most `_EXPLAIN_ROWS`, within what is left of the budget) holding the
        words."""
        found = []
        for row in _prefiltered(rows, words, limit=_EXPLAIN_ROWS):
            budget[0] -= len(row.text)
            if budget[0] < 0:
                break
            if _holds(row, needle):
                found.append(row)
        return found

    stale = holding(_evidence_rows(live=True).filter(created_at__lt=since))
    if stale:
        newest = max(row.created_at for row in stale)
        raise Refusal(
            "confirmation_stale",
            f"The quote matches what the person said at {newest:%Y-%m-%d %H:%M} UTC, which is older than the "
            f"{hours}-hour confirmation window. Ask again and record the new answer; nothing was written.",
            rule="persons_words",
            instructions=[row.id for row in stale][:10],
            window_hours=hours,
        )
    revoked = holding(_evidence_rows(live=False))
    if revoked:
        raise Refusal(
            "confirmation_not_found",
            "The quote matches only words recorded by a human principal whose access was revoked (or "
            "deactivated): they are no longer evidence. Nothing was written.",
            rule="persons_words",
            revoked=[row.id for row in revoked][:10],
        )
    by_agents = holding(_evidence_rows(live=True, human=False))
    if by_agents:
        raise Refusal(
            "confirmation_not_found",
            "The quote matches only instruction rows recorded by an agent, which are never evidence: only "
            f"rows a human principal recorded count. Nothing was written. {ASK_INSTEAD}",
            rule="persons_words",
            agent_recorded=[row.id for row in by_agents][:10],
        )
    raise Refusal(
        "confirmation_not_found",
        "No instruction the person recorded holds these words (compared ignoring case, spacing and "
        f"punctuation). Copy the person's whole sentences exactly; nothing was written. {ASK_INSTEAD}",
        rule="persons_words",
    )


def record_confirmation_use(confirmation: Confirmation, *, version: int) -> None:
    """Spend each authorising sentence (inside the write's transaction). The unique (instruction,
    sentence) key decides a race: a concurrent writer that spent a sentence first makes this a
    `confirmation_reused` refusal, and the dispatcher rolls the write back."""
    for use in confirmation.uses:
        row = ConfirmationUse(
            instruction=confirmation.instruction,
            sentence=use.sentence.index,
            scope=confirmation.scope,
            subject=use.claim.subject[:250],
            version=version,
            span=use.sentence.text,
        )
        if not insert_unless_conflict(row, "instruction", "sentence"):
            raise Refusal(
                "confirmation_reused",
                f"The sentence {_said(use.sentence)} of instruction #{confirmation.instruction.id} was just "
                "used by another write: one sentence authorises one change, once. Nothing was written.",
                rule="once",
                instruction=confirmation.instruction.id,
            )


def _record_use(evidence: Any, version: int) -> None:
    if isinstance(evidence, Confirmation):  # an approval is spent by its decision, not here
        record_confirmation_use(evidence, version=version)


# The gate every versioned model's high-stakes writes pass (`operator_site.versioned`).
GATE = EvidenceGate(check=check_confirmation, record_use=_record_use, summary=evidence_summary)
