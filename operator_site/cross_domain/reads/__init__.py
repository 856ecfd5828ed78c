"""Cross-domain reads, one module per tool: the orientation packet (packet.py), the paged state
(paged_state.py), what changed and the recent days (days.py), and their shared rules (common.py).

Read-only, bounded and cheap: every list is capped and says how many it left out, every count is
capped, each read is a fixed number of statements, and observations stay fenced as untrusted data.
docs/architecture.md ("The reads") says why and how.
"""

from __future__ import annotations

from operator_site.cross_domain.reads.common import (
    CHANGE_ITEMS,
    COUNT_CAP,
    HISTORY_DEFAULT_DAYS,
    HISTORY_ITEMS,
    HISTORY_MAX_DAYS,
    LIMITS,
    LIST_CLIP,
    OBSERVATION_DATA_CLIP,
    STATE_DEFAULT_LIMIT,
    STATE_MAX_LIMIT,
    STATE_SECTIONS,
    TAINT_FENCE_NOTE,
    TEXT_CLIP,
    PacketLimits,
    check_date,
    clip,
    counted,
    day_bounds,
    fenced,
    fenced_observation,
    operator_tz,
    scalar_figures,
)
from operator_site.cross_domain.reads.days import (
    _top_per,
    changes_between,
    day_figures,
    headline,
    history,
)
from operator_site.cross_domain.reads.packet import (
    _board,
    _day_row,
    _decisions_of_pending_approvals,
    _directives_in_force,
    _high_stakes_beliefs,
    _low_stakes_beliefs,
    _open_decisions,
    _pending_approvals,
    _recent_observations,
    _recent_progress,
    _shown_tasks,
    context_packet,
    is_proposal,
)
from operator_site.cross_domain.reads.paged_state import (
    audit_dict,
    state,
)

__all__ = [
    "CHANGE_ITEMS",
    "COUNT_CAP",
    "HISTORY_DEFAULT_DAYS",
    "HISTORY_ITEMS",
    "HISTORY_MAX_DAYS",
    "LIMITS",
    "LIST_CLIP",
    "OBSERVATION_DATA_CLIP",
    "STATE_DEFAULT_LIMIT",
    "STATE_MAX_LIMIT",
    "STATE_SECTIONS",
    "TAINT_FENCE_NOTE",
    "TEXT_CLIP",
    "PacketLimits",
    "_board",
    "_day_row",
    "_decisions_of_pending_approvals",
    "_directives_in_force",
    "_high_stakes_beliefs",
    "_low_stakes_beliefs",
    "_open_decisions",
    "_pending_approvals",
    "_recent_observations",
    "_recent_progress",
    "_shown_tasks",
    "_top_per",
    "audit_dict",
    "changes_between",
    "check_date",
    "clip",
    "context_packet",
    "counted",
    "day_bounds",
    "day_figures",
    "fenced",
    "fenced_observation",
    "headline",
    "history",
    "is_proposal",
    "operator_tz",
    "scalar_figures",
    "state",
]
