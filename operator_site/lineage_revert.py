"""Reverting a versioned model, written once: undo one version, go back to a version, "undo my
last change", and what each would do for a confirmation page. A model binds a `Reverter` with its
own parts (docs/lineage.md, "Reverting")."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from operator_site.lineage import (
    ChangeRecord,
    Committed,
    Damage,
    Draft,
    EntityChange,
    Lineage,
    Operation,
    Plan,
    VersionRecord,
    evidence_sentence,
)
from operator_site.models import Notification, Principal
from operator_site.refusals import Refusal

# --- reverting, and what a revert would do ------------------------------------------------------------
Rows = list[dict[str, Any]]


def _no_check(plan: Plan) -> None:
    return None


def _nothing_to_verify() -> None:
    return None


@dataclass(frozen=True)
class Reverter:
    """Undo one version, bring the model back to a version, "undo my last change", and describe
    either for a confirmation page: the same for every lineage, written once. An app binds one
    with what is its own (docs/lineage.md, "Reverting")."""

    lineage: Lineage
    rows: Callable[[Sequence[EntityChange]], Rows]  # readable rows {"what", "before", "after", "stakes"}
    change_dict: Callable[[EntityChange], dict[str, Any]]  # one change, as a tool's answer shows it
    is_high: Callable[[str], bool]  # is this entity high-stakes
    notify: Callable[[Committed, bool], Notification | None]  # the notice after a revert (or None)
    undo_note: str  # the confirmation page of an undo, what happens: "... before version {number} ..."
    restore_noop_note: str = "The {label} already holds the state of version {number}."
    check_plan: Callable[[Plan], None] = _no_check  # raise Refusal to refuse a plan (before committing)
    verify: Callable[[], None] = _nothing_to_verify  # invariants checked after a revert is applied
    # What else an agent may not revert (raise Refusal); the person may revert anything: an agent
    # must never be able to stand in the way of the person's one-tap undo.
    check_agent_plan: Callable[[Plan], None] = _no_check
    savepoint: bool = False  # run each undo / restore / revert in a savepoint of its own

    # --- acting ---------------------------------------------------------------------------------------
    def undo(
        self, *, number: int, principal: Principal, expected_version: int | None = None
    ) -> dict[str, Any]:
        """Undo one version: what it touched goes back to its exact pre-image."""
        return self._act(
            principal, expected_version, lambda draft: self.lineage.plan_undo(self.lineage.get(number))
        )

    def restore(
        self, *, number: int, principal: Principal, expected_version: int | None = None
    ) -> dict[str, Any]:
        """Bring the whole model back to its state at version `number` (itself a new version)."""
        return self._act(principal, expected_version, lambda draft: self.lineage.plan_restore(number))

    def revert(
        self, *, principal: Principal, to_version: int | None = None, expected_version: int | None = None
    ) -> dict[str, Any]:
        """A revert tool: without `to_version`, undo the last change that has not been reverted —
        anyone's for the person (a human principal), the caller's own for an agent; with it,
        `restore` that version."""
        if to_version is not None:
            return self.restore(number=to_version, principal=principal, expected_version=expected_version)
        return self._act(
            principal,
            expected_version,
            lambda draft: self.lineage.plan_undo(self._last_change(principal, draft)),
        )

    def _act(
        self, principal: Principal, expected_version: int | None, plan_of: Callable[[Draft], Plan]
    ) -> dict[str, Any]:
        with self._atomic():
            draft = self.lineage.begin(expected_version)
            with self.lineage.stable(draft):
                plan = plan_of(draft)
                self.check_powers(plan, principal)
                return self._commit(draft, plan, principal)

    def _last_change(self, principal: Principal, draft: Draft) -> VersionRecord:
        target = self.lineage.last_unreverted(None if principal.is_human else principal)
        if target is None:
            label = self.lineage.label.replace(" ", "-")
            raise Refusal(
                "nothing_to_revert",
                f"There is no {label} change that is not already reverted."
                if principal.is_human
                else f"{principal.name} has no {label} change that is not already reverted. An "
                "agent undoes only its own changes; the person reverts anything.",
                current_version=draft.base,
            )
        return target

    def check_powers(self, plan: Plan, principal: Principal) -> None:
        """What an agent may not revert (the person may revert anything): anyone else's change
        (`revert_not_own`), what the model's own `check_agent_plan` refuses, and an undo or restore
        that puts back a high-stakes change that was itself undone (`reapply_needs_evidence`: that is
        a new high-stakes write, which needs the person's fresh words like any other)."""
        if principal.is_human:
            return
        others = sorted(v for v, who in plan.undone_principals.items() if who != principal.id)
        if others:
            raise Refusal(
                "revert_not_own",
                f"That would undo version(s) {', '.join(map(str, others))}, written by someone else. An "
                "agent can only undo its own changes; the person can revert anything. Nothing was written.",
                versions=others,
            )
        self.check_agent_plan(plan)
        high = [c.entity for c in plan.changes if self.is_high(c.entity)]
        if not high or not plan.undoes:
            return
        lineage = self.lineage
        reverts = lineage.version_model.objects.filter(number__in=plan.undoes).exclude(
            operation=Operation.CHANGE
        )
        replayed = sorted(
            set(
                lineage.change_model.objects.filter(version__in=reverts, entity__in=high).values_list(
                    "entity", flat=True
                )
            )
        )
        if replayed:
            raise Refusal(
                "reapply_needs_evidence",
                f"That would put back high-stakes change(s) to {', '.join(replayed)} that were undone. "
                "Re-applying an undone high-stakes change is a new high-stakes write: make it again with "
                "the person's fresh words (confirmedInConversation and confirmationQuote), or propose it "
                "with operator_record_action_intent for them to approve. Nothing was written.",
                entities=replayed,
            )

    def _atomic(self) -> AbstractContextManager[Any]:
        return transaction.atomic() if self.savepoint else nullcontext()

    def _commit(self, draft: Draft, plan: Plan, principal: Principal) -> dict[str, Any]:
        if not plan.changes:
            raise Refusal(
                "nothing_to_revert",
                f"The {self.lineage.label} already holds the state of version {plan.restores_to}; nothing "
                "was written.",
                current_version=draft.base,
            )
        self.check_plan(plan)
        high = any(self.is_high(c.entity) for c in plan.changes)
        what = f"undo of v{plan.reverts.number}" if plan.reverts else f"restore to v{plan.restores_to}"
        committed = self.lineage.commit_plan(
            draft,
            plan,
            principal=principal,
            summary=f"{what} (by {principal.name})",
            fields={"high_stakes": high},
        )
        self.verify()
        notice = self.notify(committed, high)
        version = committed.version
        return {
            "ok": True,
            "version": version.number,
            "supersedes": version.supersedes,
            "operation": version.operation,
            "reverted_version": version.reverts_id,
            "restored_to": version.restores_to,
            "undid_versions": plan.undoes,
            "changes": [self.change_dict(c) for c in committed.changes],
            "high_stakes": high,
            "notification": notice.id if notice else None,
        }

    # --- describing (admin pages, the one-tap link) ---------------------------------------------------
    def version_rows(self, version: VersionRecord) -> Rows:
        """What a version did, as readable before/after rows."""
        return self.stored_rows(self.lineage.changes_of(version))

    def change_rows(self, change: ChangeRecord) -> Rows:
        """What a version did to one entity, as readable before/after rows."""
        return self.stored_rows([change])

    def stored_rows(self, stored: Sequence[ChangeRecord]) -> Rows:
        """Stored change rows as readable before/after rows. A damaged row (a damaged or hand-edited
        database: `Lineage.damage`) is never read as an image: it is one row saying so, first, naming
        the row and what is wrong with it; the others read as usual."""
        damaged: Rows = []
        readable: list[EntityChange] = []
        for row in stored:
            damage = self.lineage.damage(row)
            if damage is None:
                readable.append(EntityChange(row.entity, row.before, row.after))
            else:
                damaged.append(self.damaged_row(damage))
        return [*damaged, *(self.rows(readable) if readable else [])]

    def damaged_row(self, damage: Damage) -> dict[str, Any]:
        """The row a page shows for a damaged change row: the entity, and the damage as its before
        (the after left empty: nothing of the row is shown as if it were read)."""
        try:
            stakes = "high" if self.is_high(damage.entity) else "low"
        except (KeyError, ValueError):  # an entity name that is not the model's: say high, to be seen
            stakes = "high"
        return {"what": damage.entity, "before": damage.text, "after": "", "stakes": stakes, "damaged": True}

    def describe_undo(self, number: int) -> dict[str, Any]:
        """For a confirmation page: what undoing version `number` would change now, or why it cannot."""
        try:
            version = self.lineage.get(number)
            plan = self.lineage.plan_undo(version)
            self.check_plan(plan)
        except Refusal as refusal:
            return {
                "title": f"Undo version {number} of the {self.lineage.label}",
                "changes": [],
                "note": refusal.reason,
                "error": refusal.reason,
                "refusal": refusal.as_result(),
            }
        return {
            "title": f"Undo version {number}: {version.summary}",
            "changes": self.rows(plan.changes),
            "note": self.undo_note.format(number=number),
            "current_version": self.lineage.current_version(),
        }

    def describe_restore(self, number: int) -> dict[str, Any]:
        """For a confirmation page: what bringing the model back to version `number` would change."""
        try:
            plan = self.lineage.plan_restore(number)
        except Refusal as refusal:
            return {"title": f"Revert to version {number}", "changes": [], "error": refusal.reason}
        out: dict[str, Any] = {
            "title": f"Revert the {self.lineage.label} to version {number}",
            "changes": self.rows(plan.changes),
            "undoes": plan.undoes,
            "current_version": self.lineage.current_version(),
            "note": (
                f"Undoes the effect of version(s) {', '.join(map(str, plan.undoes))}."
                if plan.undoes
                else self.restore_noop_note.format(label=self.lineage.label, number=number)
            ),
        }
        if not plan.changes:
            out["error"] = (
                f"Nothing to revert: the {self.lineage.label} already holds the state of version {number}."
            )
        return out


@dataclass(frozen=True)
class LineageRevertHandler:
    """The one-tap link behind a notice (`operator_site.revert_links.RevertHandler`): undo the
    version the notice reports (registered by `operator_site.versioned.VersionedModel.register`)."""

    reverter: Reverter

    def describe(self, subject_id: int) -> dict[str, Any]:
        return self.reverter.describe_undo(subject_id)

    def review(self, subject_id: int) -> dict[str, Any] | None:
        """For the notice page: what the version did (before → after rows), who did it and when, and
        the evidence it relied on as one sentence; None if there is no such version."""
        lineage = self.reverter.lineage
        version = lineage.version_model.objects.filter(number=subject_id).select_related("principal").first()
        if version is None:
            return None
        return {
            "version": version.number,
            "operation": version.operation,
            "summary": version.summary,
            "who": version.actor,
            "who_is_person": version.principal.is_human,
            "at": version.created_at,
            "changes": self.reverter.version_rows(version),
            "evidence": evidence_sentence(version),
            "label": lineage.label,
        }

    def revert(self, subject_id: int, *, by: Principal) -> str:
        result = self.reverter.undo(number=subject_id, principal=by)
        return (
            f"Undid version {subject_id} of the {self.reverter.lineage.label} (now at version "
            f"{result['version']})."
        )
