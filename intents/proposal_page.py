"""What the approval page shows of a proposal (`operator_site.proposals`), and how its Edit form
becomes an edited proposal: the diff before → after as accepting would apply it now, who proposed
it and why, and one field per value the person may adjust."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from intents.models import Intent
from operator_site import proposals
from operator_site.display import Named
from operator_site.refusals import Refusal

# Per kind of change, the values a person may adjust on the Edit form (the rest is what the change
# is: its operation and its target, which an edit does not move).
_EDITABLE = ("value", "confidence")
_EDITABLE_FIELDS = ("title", "name", "detail", "importance", "position", "status", "goal")
MAX_EDITED_CHARS = 4000


def proposal_context(intent: Intent) -> dict[str, Any] | None:
    """The proposal part of the approval page, or None for any other intent."""
    if proposals.kind_of(intent.action_type) is None:
        return None
    try:
        proposal = proposals.parse(intent.action_type, intent.body)
    except Refusal as refusal:
        return {"error": refusal.reason, "rows": [], "edits": []}
    seen = proposals.preview(proposal, principal=intent.recorded_by)
    return {
        "label": proposal.kind.label,
        "proposed_by": intent.actor,
        "reason": proposal.reason,
        "proposed_against": proposal.proposed_against,
        "current_version": proposal.kind.current_version(),
        "rows": seen["rows"],
        "high_stakes": seen.get("high_stakes", False),
        "error": None if seen["ok"] else seen["reason"],
        "edits": list(_editable(proposal.changes)),
    }


def _editable(changes: list[dict[str, Any]]) -> Any:
    """(name, label, value) per adjustable value: `change-<n>-<field>`; the label names the change's
    target as an identifier (`operator_site.display.Named`)."""
    for n, change in enumerate(changes):
        what = change.get("kind") or change.get("entity")
        target = change.get("key") or change.get("target") or "(new)"
        for name in _EDITABLE:
            if name in change:
                yield f"change-{n}-{name}", _label(change, what, target, name), change[name]
        for name, value in (change.get("fields") or {}).items():
            if name in _EDITABLE_FIELDS:
                yield f"change-{n}-fields-{name}", _label(change, what, target, name), value


def _label(change: dict[str, Any], what: Any, target: Any, name: str) -> Named:
    return Named(f"{change['op']} {what} ", target, f" · {name}")


def edited_body(intent: Intent, posted: Mapping[str, str]) -> str:
    """The proposal's body with the values the person typed (each of the type it had); raises
    ValueError naming the field when one cannot be read. The result is validated again by the
    approval (`operator_site.proposals.parse`)."""
    proposal = proposals.parse(intent.action_type, intent.body)
    changes = json.loads(json.dumps(proposal.changes))  # a deep copy
    for name, label, old in _editable(proposal.changes):
        if name not in posted:
            continue
        raw = posted[name].strip()
        if len(raw) > MAX_EDITED_CHARS:
            raise ValueError(f"{label}: at most {MAX_EDITED_CHARS} characters")
        n, field = int(name.split("-")[1]), name.split("-", 2)[2]
        holder = changes[n]["fields"] if field.startswith("fields-") else changes[n]
        key = field.removeprefix("fields-")
        holder[key] = _typed(raw, old, label)
    payload = {"changes": changes, "proposed_against": proposal.proposed_against, "reason": proposal.reason}
    return json.dumps(payload, ensure_ascii=False)


def _typed(raw: str, old: Any, label: str) -> Any:
    if raw == "" and old is None:
        return None
    if isinstance(old, bool):
        raise ValueError(f"{label} cannot be edited here")
    if isinstance(old, int):
        if not raw.isascii() or not raw.isdigit():
            raise ValueError(f"{label}: a whole number")
        return int(raw)
    if isinstance(old, float):
        try:
            value = float(raw)
        except ValueError:
            raise ValueError(f"{label}: a number") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"{label}: a number")
        return value
    return raw
