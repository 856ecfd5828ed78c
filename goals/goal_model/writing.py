"""The goal model's two gated writes: one goal's change (`apply_goal_change`) and a reconciliation
across goals, priorities and projects (`reconcile_goal_model`), each one version or nothing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from pydantic import BaseModel

from goals.goal_model.describing import change_dict
from goals.goal_model.planning import (
    Planned,
    allocate,
    claims_of,
    plan_write,
    post_images,
    summary_of,
    targets_of,
)
from goals.goal_model.reading import goal_dict, goal_image, ranked_goals
from goals.goal_model.state import GOAL_MODEL, State, current_version, verify_consistency
from goals.goal_model.validation import Op, clean_ops, goal_action_op
from goals.goal_model.versioning import VERSIONED, announce
from operator_site.evidence import GATE
from operator_site.lineage import Committed
from operator_site.models import Notification, Principal
from operator_site.proposals import ApprovalEvidence
from operator_site.refusals import Refusal
from operator_site.versioned import Evidence, Grounds


@dataclass
class Outcome:
    committed: Committed | None
    planned: Planned
    confirmation: Evidence | None
    high_stakes: bool
    notice: Notification | None = None


def _write(
    *,
    principal: Principal,
    ops: Sequence[Op],
    grounds: Grounds,
    refuse_unchanged: bool,
) -> Outcome:
    """Plan, check and commit one goal-model write; `committed` is None when it changes nothing
    (or, with `refuse_unchanged`, that is refused as `nothing_changed`)."""
    draft = GOAL_MODEL.begin(grounds.expected_version)
    with GOAL_MODEL.stable(draft):
        base = State.load()
        if grounds.unchanged_since is not None:  # before anything else: what was shown must still hold
            GOAL_MODEL.refuse_if_touched_since(grounds.unchanged_since, targets_of(base.copy(), ops))
        planned = plan_write(base.copy(), ops)
        if not any(effect.changed for effect in planned.effects):
            # "Already so" was decided on a read that another writer may have just changed: only a
            # model still at the base version may answer it (else `stable` turns it into a retry).
            unchanged = Refusal(
                "nothing_changed",
                "The goal model already says exactly that; nothing was written.",
                current_version=draft.base,
            )
            if refuse_unchanged or GOAL_MODEL.current_version() != draft.base:
                raise unchanged
            return Outcome(None, planned, None, False)
        allocate(planned, principal, draft.number)
        images = post_images(base, planned, principal, draft.number)
        written = VERSIONED.commit(
            draft,
            principal=principal,
            images=images,
            summary=summary_of(planned, principal),
            claims=lambda: claims_of(planned),
            grounds=grounds,
        )
        verify_consistency()
    outcome = Outcome(written.committed, planned, written.evidence, written.high_stakes)
    outcome.notice = announce(written.committed, written.evidence)
    return outcome


# --- the two gated tools -----------------------------------------------------------------------------
@transaction.atomic
def apply_goal_change(
    *,
    principal: Principal,
    action: str,
    goal: int | str | None = None,
    title: str | None = None,
    detail: str | None = None,
    importance: int | None = None,
    confirmed: bool | None = None,
    quote: str | None = None,
    expected_version: int | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Pause, resume, add, remove, mark under review, or re-rank one goal (high-stakes: confirmation
    evidence required). Invalid transitions are refused with the goal's current status."""
    ops = [goal_action_op(action, goal=goal, title=title, detail=detail, importance=importance)]
    try:
        outcome = _write(
            principal=principal,
            ops=ops,
            grounds=Grounds(confirmed=confirmed, quote=quote, expected_version=expected_version, now=now),
            refuse_unchanged=True,
        )
    except Refusal as refusal:
        _flatten_single(refusal)
        if refusal.code == "nothing_changed":
            refusal.reason = f"The goal is already at importance {importance}; nothing was written."
        raise
    assert outcome.committed is not None
    effect = outcome.planned.effects[0]
    committed = outcome.committed
    return {
        "ok": True,
        "version": committed.version.number,
        "supersedes": committed.version.supersedes,
        "action": action,
        "goal": goal_dict(goal_image(effect.item_id)),
        "ranking": ranked_goals(statuses=None),
        "changes": [change_dict(c) for c in committed.changes],
        "high_stakes": outcome.high_stakes,
        "evidence": GATE.summary(outcome.confirmation),
        "notification": outcome.notice.id if outcome.notice else None,
    }


def _flatten_single(refusal: Refusal) -> None:
    """For the one-goal tool, say the candidates at the top level too (there is only one target)."""
    resolution = refusal.extra.get("resolution")
    if refusal.code in ("ambiguous_target", "target_not_found") and resolution:
        refusal.extra["candidates"] = resolution[0].get("candidates", [])
        refusal.extra["goal"] = resolution[0].get("target")


@transaction.atomic
def reconcile_goal_model(
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
    """Apply changes across goals, priorities and projects all together or not at all. Fails closed:
    a missing or ambiguous target (or goal link) anywhere refuses the whole call before anything is
    written, listing how each change resolved. `changes` are plain dicts or the tool's validated
    models, checked by the published schema either way. A reconciliation that changes nothing writes no
    version (and needs no confirmation). `approval` and `unchanged_since`: an accepted proposal
    (see `beliefs.services.update_world_model`)."""
    ops = clean_ops(changes)
    outcome = _write(
        principal=principal,
        ops=ops,
        grounds=Grounds(
            confirmed=confirmed,
            quote=quote,
            expected_version=expected_version,
            now=now,
            approval=approval,
            unchanged_since=unchanged_since,
        ),
        refuse_unchanged=False,
    )
    if outcome.committed is None:
        return {
            "ok": True,
            "written": False,
            "version": current_version(),
            "note": "The goal model already says exactly that; no version was written.",
            "resolution": outcome.planned.resolution,
            "changes": [],
            "high_stakes": False,
            "evidence": None,
            "notification": None,
        }
    committed = outcome.committed
    return {
        "ok": True,
        "written": True,
        "version": committed.version.number,
        "supersedes": committed.version.supersedes,
        "resolution": outcome.planned.resolution,
        "changes": [change_dict(c) for c in committed.changes],
        "high_stakes": outcome.high_stakes,
        "evidence": GATE.summary(outcome.confirmation),
        "notification": outcome.notice.id if outcome.notice else None,
    }
