"""operator_state: the full rows, paged newest first."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from goals.models import Task
from goals.services import task_dict
from intents.answers import decision_dict, intent_dict, with_decisions
from intents.models import Decision, Intent
from operator_site.cross_domain.reads.common import (
    STATE_DEFAULT_LIMIT,
    STATE_MAX_LIMIT,
    STATE_SECTIONS,
)
from operator_site.models import AuditEvent
from operator_site.refusals import Refusal
from runs.answers import answered_runs, run_dict


# --- operator_state: the full rows, paged ------------------------------------------------------------
def _page(queryset: QuerySet, before_id: int | None, limit: int) -> tuple[list[Any], int | None]:
    if before_id is not None:
        queryset = queryset.filter(id__lt=before_id)
    rows = list(queryset.order_by("-id")[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, (rows[-1].id if more and rows else None)


def audit_dict(event: AuditEvent) -> dict[str, Any]:
    return {
        "id": event.id,
        "principal": event.principal.name,
        "tool": event.tool,
        "outcome": event.outcome,
        "error_code": event.error_code or None,
        "duration_ms": event.duration_ms,
        "args_sha256": event.args_sha256,
        "claimed_actor": event.claimed_actor,
        "created": event.created_at,
    }


def state(
    *,
    sections: Iterable[str] | None = None,
    limit: int = STATE_DEFAULT_LIMIT,
    before_id: int | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Tasks, decisions, audit, intents and runs: each newest first, `limit` rows (at most
    STATE_MAX_LIMIT) with ids below `before_id`; `next_before_id` continues a section."""
    chosen = list(dict.fromkeys(sections or STATE_SECTIONS))
    unknown = [s for s in chosen if s not in STATE_SECTIONS]
    if unknown:
        raise Refusal(
            "unknown_section",
            f"Unknown section {unknown[0]!r}; sections: {', '.join(STATE_SECTIONS)}.",
            sections=list(STATE_SECTIONS),
        )
    if not 1 <= limit <= STATE_MAX_LIMIT:
        raise Refusal("out_of_range", f"limit must be between 1 and {STATE_MAX_LIMIT}.")
    now = now or timezone.now()
    readers = {
        "tasks": (Task.objects.select_related("updated_by", "goal", "project"), task_dict),
        "decisions": (Decision.objects.select_related("decided_by"), decision_dict),
        "audit": (AuditEvent.objects.select_related("principal"), audit_dict),
        "intents": (Intent.objects.prefetch_related(with_decisions()), intent_dict),
        "runs": (answered_runs(), lambda r: run_dict(r, now)),
    }
    out: dict[str, Any] = {}
    for name in chosen:
        queryset, render = readers[name]
        rows, next_before = _page(queryset, before_id, limit)
        out[name] = {"items": [render(r) for r in rows], "count": len(rows), "next_before_id": next_before}
    return {
        "ok": True,
        "order": "newest first (by id)",
        "limit": limit,
        "before_id": before_id,
        "sections": out,
    }
