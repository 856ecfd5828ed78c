"""World-model rules: plain functions taking the acting principal explicitly.

They run inside the caller's transaction (the MCP dispatcher opens one per call; the admin and the
one-tap link wrap theirs), so a `Refusal` raised here leaves nothing written. Every write goes
through `WORLD_MODEL` (an `operator_site.lineage.Lineage`): one version per write, the exact version
it superseded, the exact pre- and post-image of every belief it touched.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone
from pydantic import BaseModel

from beliefs.answers import BeliefAnswer, InstructionAnswer
from beliefs.models import (
    BELIEF_KINDS,
    HIGH_STAKES_KINDS,
    LOW_STAKES_KINDS,
    Belief,
    WorldModelChange,
    WorldModelVersion,
    stakes_of,
)
from beliefs.schemas import CHANGES
from operator_site import lookalikes, versioned, wording
from operator_site.display import Named, describe_char
from operator_site.evidence import GATE, Claim, Confirmation
from operator_site.lineage import (
    Committed,
    EntityChange,
    FieldTest,
    Image,
    Lineage,
    LiveRows,
    LiveStore,
    Plan,
    is_number,
    is_text,
    one_of,
    optional,
)
from operator_site.lineage_revert import Reverter
from operator_site.models import Instruction, Notification, Principal
from operator_site.proposals import ApprovalEvidence
from operator_site.refusals import Refusal
from operator_site.versioned import Grounds, VersionedModel, provenance, provenance_columns, provenance_of
from operator_site.wording import key_words

SCOPE = "world_model"  # notification subject kind, confirmation-use scope
MAX_SNAPSHOT_BELIEFS = 1000
DIFF_FIELDS = ("value", "confidence", "status")


# --- entities and images ---------------------------------------------------------------------------
entity_of = versioned.entity
split_entity = versioned.split


def normalise_key(key: str) -> str:
    """Keys compare case-insensitively with whitespace collapsed: "Home  City" is "home city". (Not in
    their plain form, NFKC: a key is stored as this gives it, under the unique constraint (kind, key),
    and a key written in full-width letters before the door refused it on add must stay reachable by
    exactly its stored text, to be corrected or retired. Normalising here would strand those rows or
    need every stored key migrated; the door refuses a new one instead: operator_site.display,
    "identifiers", and docs/world-model.md, "Keys".)"""
    return " ".join((key or "").split()).lower()


def image_of(row: Belief) -> Image:
    """A belief's live state as the JSON image the lineage records."""
    return {
        "kind": row.kind,
        "key": row.key,
        "value": row.value,
        "confidence": row.confidence,
        "status": row.status,
        **provenance_of(row),
    }


def _columns(image: Image, number: int) -> dict[str, Any]:
    """A belief row's columns (besides its kind and key) for an image written by version `number`."""
    return {
        "value": image["value"],
        "confidence": image["confidence"],
        "status": image["status"],
        "key_alike": lookalikes.fold(image["key"]),
        **provenance_columns(image, number),
        "updated_at": timezone.now(),
    }


def _reads_as(entity: str) -> tuple[str, str]:
    """The kind and key fold of the rows that read as `entity` (`LiveRows.alike`)."""
    kind, key = split_entity(entity)
    return kind, lookalikes.fold(key)


class BeliefStore(LiveStore):
    """The world model's live entities: one `Belief` row per (kind, key), there exactly when the
    belief has an image (a retired belief keeps its row; only an undo of its creation deletes it).
    A write reads its beliefs with the base version in one statement, and writes them with its
    claim (`operator_site.lineage.LiveRows`)."""

    def __init__(self) -> None:
        alike = (("kind", "key_alike"), _reads_as)  # the rows an added key reads as
        super().__init__(LiveRows(Belief, ("kind", "key"), split_entity, image_of, _columns, alike))


# What a belief's stored image must hold for its readers (the snapshot as of a version, the admin's
# rows) and for a revert that writes it back to the row's columns (`_columns`): a hand-edited change row
# that holds anything else is shown as damaged and refused by those reads (`Lineage.damage`).
_IMAGE_FIELDS: dict[str, FieldTest] = {
    "kind": one_of(BELIEF_KINDS),
    "key": is_text,
    "value": is_text,
    "confidence": optional(lambda v: is_number(v) and 0 <= v <= 1),
    "status": one_of(Belief.Status.values),
}


def _image_problem(entity: str, image: Image) -> str | None:
    return versioned.item_image_problem(image, _IMAGE_FIELDS)


WORLD_MODEL = Lineage(
    "world model",
    WorldModelVersion,
    WorldModelChange,
    BeliefStore(),
    check_image=_image_problem,
    kept=versioned.as_kept,
)


def _same_content(a: Image | None, b: Image | None) -> bool:
    if a is None or b is None:
        return a is b
    return all(a.get(f) == b.get(f) for f in DIFF_FIELDS)


def _is_high(entity: str) -> bool:
    return split_entity(entity)[0] in HIGH_STAKES_KINDS


# --- instructions --------------------------------------------------------------------------------
def record_instruction(
    *,
    principal: Principal,
    text: str,
    kind: str = Instruction.Kind.INSTRUCTION,
    channel: str | None = None,
    refs: Any = None,
    now: datetime | None = None,
) -> Instruction:
    """Store what was said. `human_authored` is true exactly when the recording principal is a
    human; an agent's row is kept (it is part of the record) but is never evidence."""
    if kind not in Instruction.Kind.values:
        raise Refusal("invalid_kind", f"Unknown instruction kind {kind!r}; use instruction or comment.")
    if not text or not text.strip():
        raise Refusal("text_required", "An instruction needs its text.")
    return Instruction.objects.create(
        text=text,
        kind=kind,
        channel=" ".join((channel or "").split()).lower()[:40],
        refs=refs,
        principal=principal,
        actor=principal.name,
        human_authored=principal.is_human,
        created_at=now or timezone.now(),
    )


def instruction_dict(row: Instruction) -> InstructionAnswer:
    return {
        "id": row.id,
        "kind": row.kind,
        "text": row.text,
        "channel": row.channel or None,
        "refs": row.refs,
        "recorded_by": row.actor,
        "human_authored": row.human_authored,
        "created": row.created_at,
    }


# --- updating the world model ----------------------------------------------------------------------
@dataclass(frozen=True)
class ChangeSpec:
    op: str
    kind: str
    key: str
    value: str | None = None
    confidence: float | None = None
    # The key as the caller wrote it (before case folding): its camelCase still splits into words.
    said_key: str = ""

    @property
    def entity(self) -> str:
        return entity_of(self.kind, self.key)


def _spec(change: Any) -> ChangeSpec:
    """A validated change (beliefs/schemas.py: its op, kind, key and values are typed, stripped and
    bounded) as a spec; the key case-folded, and a high-stakes key checked for a word the person's
    words can name it by (wording rules a JSON Schema cannot say)."""
    kind, said_key = change.kind, " ".join(change.key.split())
    key = normalise_key(said_key)
    if kind in HIGH_STAKES_KINDS and not key_words(said_key):
        raise Refusal(
            "invalid_key",
            f"{kind}/{key}: a high-stakes key needs a word that says what it is (3 letters or more, not a "
            "common word like 'the' or 'my'), so that the person's words can name it. Nothing was written.",
            kind=kind,
            key=key,
        )
    return ChangeSpec(
        change.op, kind, key, getattr(change, "value", None), getattr(change, "confidence", None), said_key
    )


def _candidates(kind: str, key: str) -> list[str]:
    """Keys a refused update or retire may have meant, first any that read as the same key
    (`operator_site.lookalikes`: written in full-width letters, a ligature or another script's
    look-alike letters, stored before the door refused them: each is updated or retired by exactly
    its stored key), then the close ones."""
    keys = list(
        Belief.objects.filter(kind=kind, status=Belief.Status.ACTIVE).values_list("key", flat=True)[:500]
    )
    reads = lookalikes.fold(key)
    close = [k for k in keys if k != key and lookalikes.fold(k) == reads]
    close += [k for k in wording.close_matches(key, keys) if k not in close]
    close += [k for k in keys if (key in k or k in key) and k not in close]
    return close[:5]


def _refuse_lookalikes(adds: Sequence[ChangeSpec], stored: Sequence[Image]) -> None:
    """An added key that reads as another active belief's key of its kind (the stored `alike` rows,
    or another add of the same call) is refused: the person would see two beliefs as one, and an
    agent could write beside a belief it appears to update (`operator_site.lookalikes`)."""
    active = _by_reading(
        (image["kind"], image["key"], None) for image in stored if image["status"] == Belief.Status.ACTIVE
    )
    seen: dict[tuple[str, str], ChangeSpec] = {}
    for spec in adds:
        reads = lookalikes.fold(spec.key)
        others = _twins(spec.kind, spec.key, reads, active)
        earlier = seen.setdefault((spec.kind, reads), spec)
        if earlier is not spec and earlier.key != spec.key:
            others.append(earlier.key)
        if others:
            other = sorted(others)[0]
            raise _looks_like(
                spec.kind, spec.key, other, in_this_call=entity_of(spec.kind, other) == earlier.entity
            )


def _by_reading(keys: Iterable[tuple[str, str, str | None]]) -> dict[tuple[str, str], list[str]]:
    """(kind, key, its fold or None) → the keys of each kind by what they read as, each key folded
    once (a stored row's fold is its `key_alike` column)."""
    out: dict[tuple[str, str], list[str]] = {}
    for kind, key, fold in keys:
        out.setdefault((kind, lookalikes.fold(key) if fold is None else fold), []).append(key)
    return out


def _twins(kind: str, key: str, reads: str, active: dict[tuple[str, str], list[str]]) -> list[str]:
    """The other keys of `kind` in `active` (`_by_reading`) that read as `key`, whose fold is `reads`."""
    return sorted(k for k in active.get((kind, reads), ()) if k != key)


def _looks_like(
    kind: str, key: str, other: str, *, in_this_call: bool = False, undo: bool = False
) -> Refusal:
    entity, existing = entity_of(kind, key), entity_of(kind, other)
    instead = (
        "An agent's revert never brings a belief back beside one that reads the same; the person may"
        if undo
        else "Update or retire that belief by its key, or choose a key that reads differently"
    )
    return Refusal(
        "looks_like_existing",
        f"{entity} reads as {existing}, another {'active ' if undo else ''}belief"
        f"{' in this call' if in_this_call else ''} ({_why_alike(key, other)}): two keys that read the same "
        f"would show the person two beliefs as one. {instead}. Nothing was written.",
        entity=entity,
        existing=existing,
    )


def _refuse_revived_lookalikes(plan: Plan) -> None:
    """An agent's undo or restore that would make a belief active again beside another active
    belief of its kind whose key reads the same is refused, as adding it would be
    (`_refuse_lookalikes`): a version may hold a key that had no twin when it was written. The
    person's own revert is never refused for it (`Reverter.check_agent_plan`): a later write
    naming either key is then refused as ambiguous, with both as candidates."""
    after = {c.entity: c.after for c in plan.changes}
    revived = [
        image
        for change in plan.changes
        if (image := change.after) is not None
        and image["status"] == Belief.Status.ACTIVE
        and (change.before is None or change.before["status"] != Belief.Status.ACTIVE)
    ]
    if not revived:
        return
    folds = {(image["kind"], lookalikes.fold(image["key"])) for image in revived}
    stored = Belief.objects.filter(
        status=Belief.Status.ACTIVE,
        kind__in={kind for kind, _ in folds},
        key_alike__in={fold for _, fold in folds},
    ).values_list("kind", "key", "key_alike")
    live = [
        (kind, key, fold)
        for kind, key, fold in stored
        if entity_of(kind, key) not in after  # the plan's own images say what becomes of those
    ]
    live += [
        (image["kind"], image["key"], None)
        for image in after.values()
        if image is not None and image["status"] == Belief.Status.ACTIVE
    ]
    by_reading = _by_reading(live)
    for image in revived:
        reads = lookalikes.fold(image["key"])
        if others := _twins(image["kind"], image["key"], reads, by_reading):
            raise _looks_like(image["kind"], image["key"], others[0], undo=True)


def _why_alike(key: str, other: str) -> str:
    chars = lookalikes.reads_as(key) + lookalikes.reads_as(other)
    if not chars:
        return "they differ only in case"
    shown = ", ".join(f"{describe_char(ch)} reads as {plain!r}" for ch, plain in chars[:4])
    return shown + (", …" if len(chars) > 4 else "")


def _planned_image(spec: ChangeSpec, before: Image | None, principal: Principal, number: int) -> Image:
    if spec.op == "add":
        if before is not None and before["status"] == Belief.Status.ACTIVE:
            raise Refusal(
                "belief_exists",
                f"{spec.entity} already exists (value {before['value']!r}); use op update. Nothing was "
                "written.",
                entity=spec.entity,
                current=before["value"],
            )
        value, confidence, status = spec.value, spec.confidence, Belief.Status.ACTIVE
    else:
        if before is None or before["status"] != Belief.Status.ACTIVE:
            state = "is retired" if before is not None else "does not exist"
            raise Refusal(
                "belief_not_found",
                f"{spec.entity} {state}, so it cannot be {'updated' if spec.op == 'update' else 'retired'}; "
                "nothing was written.",
                entity=spec.entity,
                candidates=_candidates(spec.kind, spec.key),
            )
        if spec.op == "update":
            value = spec.value if spec.value is not None else before["value"]
            confidence = spec.confidence if spec.confidence is not None else before["confidence"]
            status = Belief.Status.ACTIVE
        else:
            value, confidence, status = before["value"], before["confidence"], Belief.Status.RETIRED
    return {
        "kind": spec.kind,
        "key": spec.key,
        "value": value,
        "confidence": confidence,
        "status": status,
        **provenance(principal, number),
    }


def _claim(spec: ChangeSpec, after: Image) -> Claim:
    """What the person's words must say for this change: the key and, for an add or update, the
    value the belief will hold (an update of the confidence alone still names the value)."""
    target = spec.said_key or spec.key
    if spec.op == "retire":
        return Claim(subject=spec.entity, operation="retire", target=target)
    return Claim(subject=spec.entity, operation=spec.op, target=target, value=after["value"])


def update_world_model(
    *,
    principal: Principal,
    changes: Sequence[Mapping[str, Any] | BaseModel],
    confirmed: bool | None = None,
    quote: str | None = None,
    expected_version: int | None = None,
    now: datetime | None = None,
    approval: ApprovalEvidence | None = None,
    unchanged_since: int | None = None,
) -> dict[str, Any]:
    """Add, update or retire beliefs: all of the changes or none. High-stakes kinds need evidence
    (`operator_site.evidence`): the person's words (`confirmed`, `quote`), or — for a proposal the person
    accepted on the approval page — their `approval`, with `unchanged_since` the version it was
    proposed against (a target changed since refuses it). Every high-stakes write notifies the
    person. `changes` are plain dicts or the tool's validated models, checked by the published
    schema (beliefs/schemas.py) either way: a bad shape is refused naming the change and the field."""
    specs = [_spec(c) for c in CHANGES.validate(changes)]
    entities = [s.entity for s in specs]
    duplicates = sorted({e for e in entities if entities.count(e) > 1})
    if duplicates:
        raise Refusal(
            "duplicate_target",
            f"{', '.join(duplicates)} appear(s) more than once in one call: ambiguous, nothing was written.",
            entities=duplicates,
        )

    grounds = Grounds(
        confirmed=confirmed,
        quote=quote,
        expected_version=expected_version,
        now=now,
        approval=approval,
        unchanged_since=unchanged_since,
    )
    # The base version, the live images of the beliefs it touches and of those an added key reads
    # as, from one snapshot.
    adds = [spec for spec in specs if spec.op == "add"]
    draft = WORLD_MODEL.begin(grounds.expected_version, entities, alike=[spec.entity for spec in adds])
    with WORLD_MODEL.stable(draft):
        if grounds.unchanged_since is not None:  # before anything else: what was shown must still hold
            WORLD_MODEL.refuse_if_touched_since(grounds.unchanged_since, entities)
        _refuse_lookalikes(adds, draft.alike)
        planned: list[tuple[ChangeSpec, Image | None, Image]] = []
        unchanged: list[str] = []
        for spec in specs:
            before = draft.images[spec.entity]
            after = _planned_image(spec, before, principal, draft.number)
            if _same_content(before, after):
                unchanged.append(spec.entity)
            else:
                planned.append((spec, before, after))
        if not planned:
            raise Refusal(
                "nothing_changed",
                f"The world model already says exactly that ({', '.join(unchanged)}); nothing was written.",
                unchanged=unchanged,
                current_version=draft.base,
            )

        written = VERSIONED.commit(
            draft,
            principal=principal,
            images={spec.entity: after for spec, _, after in planned},
            summary=_summary([(spec.op, spec.entity) for spec, _, _ in planned], principal),
            claims=lambda: [_claim(spec, after) for spec, _, after in planned if _is_high(spec.entity)],
            grounds=grounds,
        )
    committed = written.committed
    notice = _notify_write(committed, written.evidence) if written.high_stakes else None
    ops = {spec.entity: spec.op for spec, _, _ in planned}
    return {
        "ok": True,
        "version": committed.version.number,
        "supersedes": committed.version.supersedes,
        "changes": [_change_dict(c, op=ops[c.entity]) for c in committed.changes],
        "unchanged": unchanged,
        "high_stakes": written.high_stakes,
        "evidence": GATE.summary(written.evidence),
        "notification": notice.id if notice else None,
    }


def _summary(ops: Sequence[tuple[str, str]], principal: Principal) -> str:
    verbs = {"add": "added", "update": "updated", "retire": "retired"}
    parts = [(named(entity).then(f" {verbs.get(op, op)}"), _is_high(entity)) for op, entity in ops]
    return versioned.summary_text(parts, principal, shown=6)


def named(entity: str) -> Named:
    """A belief as the person reads it, ``kind/key``, its key shown as an identifier."""
    kind, key = split_entity(entity)
    return Named(f"{kind}/", key)


def _value_text(image: Image | None) -> str:
    if image is None:
        return "(absent)"
    text = image["value"]
    if image.get("confidence") is not None:
        text += f" (confidence {image['confidence']})"
    if image["status"] != Belief.Status.ACTIVE:
        text += f" [{image['status']}]"
    return text


def _change_dict(change: EntityChange, op: str | None = None) -> dict[str, Any]:
    kind, key = split_entity(change.entity)
    out = {
        "kind": kind,
        "key": key,
        "stakes": stakes_of(kind),
        "before": versioned.side(change.before, DIFF_FIELDS),
        "after": versioned.side(change.after, DIFF_FIELDS),
    }
    if op:
        out = {"op": op, **out}
    return out


# --- notices ---------------------------------------------------------------------------------------
def _notice_lines(changes: Sequence[EntityChange]) -> list[str]:
    return versioned.notice_lines(
        [(named(c.entity), _value_text(c.before), _value_text(c.after), _is_high(c.entity)) for c in changes]
    )


def _notify_write(committed: Committed, confirmation: Confirmation | ApprovalEvidence | None) -> Notification:
    return VERSIONED.notify(committed, _notice_lines(committed.changes), evidence=confirmation)


def _notify_revert(committed: Committed, high_stakes: bool) -> Notification | None:
    """Only a revert that touched a high-stakes belief is announced (as only such a write is)."""
    if not high_stakes:
        return None
    closing = "If this is not what you meant, undo this revert: it is one tap away."
    return VERSIONED.notify(committed, _notice_lines(committed.changes), closing=closing)


# --- reverting (`operator_site.lineage_revert.Reverter`: the admin, the one-tap link, the tool) ---
def _rows(changes: Sequence[EntityChange]) -> list[dict[str, Any]]:
    """Readable before/after rows: one per changed field of each belief."""
    return [
        row
        for c in changes
        for row in versioned.diff_rows(
            named(c.entity), c.before, c.after, DIFF_FIELDS, stakes_of(split_entity(c.entity)[0])
        )
    ]


REVERTER = Reverter(
    WORLD_MODEL,
    rows=_rows,
    change_dict=_change_dict,
    is_high=_is_high,
    notify=_notify_revert,
    undo_note=(
        "The beliefs it touched go back to exactly what they were before version {number}; later versions "
        "that changed other beliefs keep their changes."
    ),
    restore_noop_note="The model already holds the state of version {number}.",
    check_agent_plan=_refuse_revived_lookalikes,
)
VERSIONED = VersionedModel(SCOPE, REVERTER, GATE)


# --- reading ----------------------------------------------------------------------------------------
def belief_dict(image: Image) -> BeliefAnswer:
    return {
        "key": image["key"],
        "value": image["value"],
        "confidence": image["confidence"],
        "status": image["status"],
        "stakes": stakes_of(image["kind"]),
        "source": {"principal": image["source"]["name"], "kind": image["source"]["kind"]},
        "version": image["set_in_version"],
        "evidence": image.get("evidence"),
    }


def pending_notices(limit: int = 20) -> list[dict[str, Any]]:
    return VERSIONED.pending_notices(limit, delivery=True)


def world_model_snapshot(
    *, as_of_version: int | None = None, include_retired: bool = False, kind: str | None = None
) -> dict[str, Any]:
    """The reviewable snapshot: active beliefs grouped by kind with value, confidence, source, the
    version that set them and their evidence; pending high-stakes notices."""
    current = WORLD_MODEL.current_version()
    if kind is not None and kind not in BELIEF_KINDS:
        raise Refusal("invalid_kind", f"Unknown belief kind {kind!r}; kinds: {', '.join(BELIEF_KINDS)}.")
    if as_of_version is None:
        rows = Belief.objects.all()
        if not include_retired:
            rows = rows.filter(status=Belief.Status.ACTIVE)
        if kind:
            rows = rows.filter(kind=kind)
        images = [image_of(b) for b in rows.order_by("kind", "key")[: MAX_SNAPSHOT_BELIEFS + 1]]
    else:
        VERSIONED.check_as_of(as_of_version, current)
        images = [
            image
            for image in WORLD_MODEL.state_as_of(as_of_version).values()
            if (include_retired or image["status"] == Belief.Status.ACTIVE)
            and (not kind or image["kind"] == kind)
        ][: MAX_SNAPSHOT_BELIEFS + 1]
    truncated = len(images) > MAX_SNAPSHOT_BELIEFS
    images = images[:MAX_SNAPSHOT_BELIEFS]
    grouped: dict[str, list[dict[str, Any]]] = {k: [] for k in BELIEF_KINDS if not kind or k == kind}
    for image in images:
        grouped[image["kind"]].append(belief_dict(image))
    return {
        "ok": True,
        "version": current,
        "as_of_version": as_of_version,
        "beliefs": grouped,
        "count": len(images),
        "truncated": truncated,
        "high_stakes_kinds": list(HIGH_STAKES_KINDS),
        "low_stakes_kinds": list(LOW_STAKES_KINDS),
        "pending_notices": pending_notices(),
    }
