"""Rules of the board and the decision log. Plain functions taking the acting principal explicitly;
they run inside the caller's transaction (the MCP dispatcher opens one per call)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from goals.answers import DecisionLogAnswer, LinkAnswer, TaskAnswer
from goals.models import DecisionLogEntry, Task
from operator_site.models import Principal
from operator_site.refusals import Refusal
from operator_site.sql import advisory_xact_lock


# --- the board -------------------------------------------------------------------------------------
@dataclass
class TaskPatchResult:
    task: Task
    changed: list[str]
    created: bool


def _locked(queryset: Any) -> Any:
    # PostgreSQL: lock the row so two concurrent patches apply one after the other, each to the
    # other's result (both land). SQLite's IMMEDIATE transactions already serialise writers.
    return queryset.select_for_update()


@transaction.atomic
def update_task(
    *,
    principal: Principal,
    task_id: int | None = None,
    key: str | None = None,
    patch: dict[str, Any],
    goal: int | str | None = None,
    project: int | str | None = None,
) -> TaskPatchResult:
    """Patch a task found by id or key; an unknown key creates it (that is how agents put work on
    the board). Only fields whose value actually changes are written, and `changed` lists them;
    a patch that changes nothing writes nothing. `goal` / `project` link the task to an item of
    the goal model (an id, or a title matching exactly one; "" unlinks; None leaves the link)."""
    if (task_id is None) == (key is None):
        raise Refusal("one_selector_required", "Give exactly one of id or key.")
    unknown = sorted(set(patch) - set(Task.PATCHABLE))
    if unknown:
        raise Refusal("unknown_field", f"Tasks have no field {unknown[0]!r}.", field=unknown[0])
    nulls = sorted(f for f, value in patch.items() if value is None)
    if nulls:
        raise Refusal(
            "invalid_value",
            f'{nulls[0]} cannot be null; send a value ("" clears a text field).',
            field=nulls[0],
        )
    links = _links(goal=goal, project=project)
    now = timezone.now()
    created = False
    if task_id is not None:
        task = _locked(Task.objects.filter(pk=task_id)).first()
        if task is None:
            raise Refusal("not_found", f"No task {task_id}.")
    else:
        task = _locked(Task.objects.filter(key=key)).first()
        if task is None:
            task, created = _create_by_key(principal=principal, key=key, patch=patch, links=links, now=now)
            if created:
                changed = [f for f in Task.PATCHABLE if f in patch]
                changed += [f for f in Task.LINKS if links.get(f"{f}_id") is not None]
                return TaskPatchResult(task, changed, True)
    changed = [f for f in Task.PATCHABLE if f in patch and getattr(task, f) != patch[f]]
    changed += [f for f in Task.LINKS if f"{f}_id" in links and getattr(task, f"{f}_id") != links[f"{f}_id"]]
    if not changed:
        return TaskPatchResult(task, [], False)
    for name in changed:
        if name in Task.LINKS:
            setattr(task, f"{name}_id", links[f"{name}_id"])
        else:
            setattr(task, name, patch[name])
    _check(task)
    task.updated_by = principal
    task.updated_at = now
    task.save(update_fields=[*changed, "updated_by", "updated_at"])
    return TaskPatchResult(task, changed, False)


def _links(*, goal: int | str | None, project: int | str | None) -> dict[str, int | None]:
    """The link columns a call sets: {"goal_id": id | None (unlink)}; absent when not given."""
    from goals.goal_model import resolve_link

    out: dict[str, int | None] = {}
    for name, target in (("goal", goal), ("project", project)):
        if target is None:
            continue
        out[f"{name}_id"] = None if target == "" else resolve_link(name, target).pk
    return out


def _check(task: Task) -> None:
    if task.status == Task.Status.BLOCKED and not task.blocker.strip():
        raise Refusal(
            "blocker_required", "A blocked task needs a blocker: say what it is waiting on.", field="blocker"
        )
    if not task.title.strip():
        raise Refusal("title_required", "A task needs a title.", field="title")


def _create_by_key(
    *, principal: Principal, key: str, patch: dict[str, Any], links: dict[str, int | None], now: datetime
) -> tuple[Task, bool]:
    if not str(patch.get("title", "")).strip():
        raise Refusal(
            "title_required", f"There is no task {key!r} yet; a new task needs a title.", field="title"
        )
    task = Task(
        key=key, created_by=principal, updated_by=principal, created_at=now, updated_at=now, **patch, **links
    )
    _check(task)
    try:
        with transaction.atomic():
            task.save()
    except IntegrityError:
        # Another agent created this key a moment ago: patch theirs instead.
        return _locked(Task.objects.filter(key=key)).get(), False
    return task, True


def task_dict(task: Task) -> TaskAnswer:
    return {
        "id": task.id,
        "key": task.key,
        "title": task.title,
        "status": task.status,
        "priority": task.priority,
        "owner": task.owner or None,
        "blocker": task.blocker or None,
        "detail": task.detail or None,
        "lane": task.lane or None,
        "goal": _linked(task.goal) if task.goal_id else None,
        "project": _linked(task.project) if task.project_id else None,
        "updated": task.updated_at,
        "updated_by": task.updated_by.name if task.updated_by_id else None,
    }


def _linked(item: Any) -> LinkAnswer:
    """A task's goal or project, briefly. A link to an item whose addition was undone shows as
    status "absent" (the link comes back to life if that undo is undone)."""
    label = getattr(item, "title", None) or getattr(item, "name", "")
    return {"id": item.pk, "title": label, "status": item.status if item.present else "absent"}


# --- the decision log ------------------------------------------------------------------------------
def entry_hash(
    *,
    prev_hash: str,
    title: str,
    decision: str,
    rationale: str,
    alternatives: list[str],
    context: str,
    actor: str,
    created_at: datetime,
) -> str:
    content = json.dumps(
        {
            "prev": prev_hash,
            "title": title,
            "decision": decision,
            "rationale": rationale,
            "alternatives": alternatives,
            "context": context,
            "actor": actor,
            "created": created_at.isoformat(),
        },
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


# The decision log's head is taken under one advisory lock (a name, like every lock: sql.lock_key).
_LOG_LOCK = "operator.decision_log"


@transaction.atomic
def log_decision(
    *,
    principal: Principal,
    title: str,
    decision: str,
    rationale: str,
    alternatives: list[str] | None = None,
    context: str = "",
) -> DecisionLogEntry:
    """Append one entry, chained to the last.

    Appends are serialised by the database for the length of the appending transaction — on
    PostgreSQL a transaction-level advisory lock (released at commit or rollback, so a hung client
    cannot hold it past its transaction), on SQLite the IMMEDIATE write lock — so each append reads
    the true head. The unique `prev_hash` is the backstop: a fork cannot be stored at all.

    An entry is kept for good, so one with nothing to read in its title, decision or rationale
    (whitespace alone) is refused before anything is written.
    """
    for field, value in (("title", title), ("decision", decision), ("rationale", rationale)):
        if not value.strip():
            raise Refusal(
                f"{field}_required",
                f"{field} is blank; the decision log keeps every entry for good, so say it in words.",
                field=field,
            )
    advisory_xact_lock(_LOG_LOCK)
    head = DecisionLogEntry.objects.order_by("-id").values_list("entry_hash", flat=True).first()
    prev = head or DecisionLogEntry.GENESIS
    fields = {
        "title": title,
        "decision": decision,
        "rationale": rationale,
        "alternatives": list(alternatives or []),
        "context": context,
        "actor": principal.name,
        "created_at": timezone.now(),
    }
    return DecisionLogEntry.objects.create(
        principal=principal, prev_hash=prev, entry_hash=entry_hash(prev_hash=prev, **fields), **fields
    )


@dataclass
class ChainCheck:
    entries: int
    broken_at: int | None = None  # the id of the first entry whose link or content does not verify
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.broken_at is None


def verify_log() -> ChainCheck:
    prev = DecisionLogEntry.GENESIS
    count = 0
    for entry in DecisionLogEntry.objects.order_by("id").iterator():
        count += 1
        if entry.prev_hash != prev:
            return ChainCheck(count, entry.id, "its link to the previous entry does not match")
        expected = entry_hash(
            prev_hash=entry.prev_hash,
            title=entry.title,
            decision=entry.decision,
            rationale=entry.rationale,
            alternatives=entry.alternatives,
            context=entry.context,
            actor=entry.actor,
            created_at=entry.created_at,
        )
        if entry.entry_hash != expected:
            return ChainCheck(
                count, entry.id, "its content does not match its hash (changed after it was written)"
            )
        prev = entry.entry_hash
    return ChainCheck(count)


def entry_dict(entry: DecisionLogEntry) -> DecisionLogAnswer:
    return {
        "id": entry.id,
        "title": entry.title,
        "decision": entry.decision,
        "rationale": entry.rationale,
        "alternatives": entry.alternatives,
        "context": entry.context or None,
        "actor": entry.actor,
        "created": entry.created_at,
        "hash": entry.entry_hash,
    }


def render_markdown(entries: Any) -> str:
    """The log as Markdown, oldest first (newest last)."""
    out = ["# Decision log", ""]
    for entry in entries:
        out += [
            f"## {entry.created_at:%Y-%m-%d %H:%M} — {entry.title}",
            "",
            f"**Decision.** {entry.decision}",
            "",
            f"**Why.** {entry.rationale}",
            "",
        ]
        if entry.alternatives:
            out += ["**Alternatives considered.**", *[f"- {a}" for a in entry.alternatives], ""]
        if entry.context:
            out += [f"**Context.** {entry.context}", ""]
        out += [f"*Logged by {entry.actor} · entry {entry.id} · {entry.entry_hash[:12]}*", ""]
    return "\n".join(out)
