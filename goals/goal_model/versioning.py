"""The goal model as a versioned model (`operator_site.versioned`): its reverter, the notice every
version sends, and `VERSIONED`, which its writes commit through and its AppConfig registers."""

from __future__ import annotations

from goals.goal_model.describing import change_dict, readable_rows
from goals.goal_model.kinds import PROJECT, SCOPE, entity_of, is_high_stakes, split_entity
from goals.goal_model.state import GOAL_MODEL, verify_consistency
from goals.models import Project
from operator_site import versioned
from operator_site.evidence import GATE
from operator_site.lineage import Committed, Plan
from operator_site.lineage_revert import Reverter
from operator_site.models import Notification
from operator_site.refusals import Refusal
from operator_site.versioned import Evidence, VersionedModel


# --- reverting (`operator_site.lineage_revert.Reverter`: the admin, the one-tap link, the tool) ---
def _refuse_dangling(plan: Plan) -> None:
    """A revert that would take away a goal a present project still links to (linked by a version
    the revert does not undo) is a conflict: refuse rather than leave a dangling link."""
    absent = {
        split_entity(c.entity)[1] for c in plan.changes if c.entity.startswith("goal/") and c.after is None
    }
    if not absent:
        return
    planned = {split_entity(c.entity)[1]: c.after for c in plan.changes if c.entity.startswith("project/")}
    linked = {
        p for p in Project.objects.filter(goal__in=absent).values_list("id", flat=True) if p not in planned
    }
    linked |= {p for p, after in planned.items() if after is not None and after.get("goal") in absent}
    if not linked:
        return
    versions = sorted(
        set(
            GOAL_MODEL.change_model.objects.filter(
                entity__in=[entity_of(PROJECT, p) for p in linked]
            ).values_list("version_id", flat=True)
        )
    )
    raise Refusal(
        "revert_conflict",
        f"That would take away goal(s) {', '.join(f'#{g}' for g in sorted(absent))} while project(s) "
        f"{', '.join(f'#{p}' for p in sorted(linked))} still link to them (written by version(s) "
        f"{', '.join(map(str, versions))}). Unlink or undo those first, or revert to a version as a "
        "whole. Nothing was written.",
        projects=sorted(linked),
        versions=versions,
    )


def announce(committed: Committed, evidence: Evidence | None) -> Notification:
    """Every version — a change or a revert, whatever its stakes — notifies the person: with a safety
    notice if it touched anything high-stakes (goals, priorities, their rankings), else with an
    ordinary one (projects only: held, capped and digested like any other, so free edits can never
    bury a safety notice)."""
    rows = readable_rows(committed.changes)
    lines = versioned.notice_lines(
        [(r["what"], r["before"] or "—", r["after"] or "—", r["stakes"] == "high") for r in rows]
    )
    high = any(r["stakes"] == "high" for r in rows)
    return VERSIONED.notify(committed, lines, evidence=evidence, safety=high)


def _notify_revert(committed: Committed, high_stakes: bool) -> Notification:
    """Every revert is announced, whatever its stakes (as every goal-model write is)."""
    return announce(committed, None)


REVERTER = Reverter(
    GOAL_MODEL,
    rows=readable_rows,
    change_dict=change_dict,
    is_high=is_high_stakes,
    notify=_notify_revert,
    undo_note=(
        "What it touched goes back to exactly what it was before version {number}; later versions that "
        "changed other goals, priorities or projects keep their changes."
    ),
    check_plan=_refuse_dangling,
    verify=verify_consistency,
    savepoint=True,  # like every write of the goal model: a Refusal leaves nothing written
)
VERSIONED = VersionedModel(SCOPE, REVERTER, GATE)
