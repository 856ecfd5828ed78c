"""Transitional: the names modules outside this branch still import from here.

The intents app's rules live by aggregate — `intents.directives`, `intents.lifecycle`,
`intents.decisions` — and its answer shapes in `intents.answers`; import from those. This module
only keeps `operator_site/reads.py`, `operator_site/notifications.py` and the goals and beliefs tests
working while they are changed in parallel; it goes once they import from the modules above.
"""

from __future__ import annotations

from intents.answers import decision_dict, directive_dict, intent_dict
from intents.directives import hold_reason, set_directive

__all__ = ["decision_dict", "directive_dict", "hold_reason", "intent_dict", "set_directive"]
