"""Transitional: the names modules outside this branch still import from here.

The runs app's rules live by aggregate — `runs.days`, `runs.lock` (the run lock), `runs.records`
(progress, observations) — and its answer shapes in `runs.answers`; import from those. This module
only keeps `operator_site/reads.py` and `operator_site/dashboard.py` working while they are changed
in parallel; it goes once they import from the modules above (and use `timezone.localdate()`).
"""

from __future__ import annotations

from django.utils.timezone import localdate as local_date

from runs.answers import day_dict, observation_dict, progress_dict, run_dict, run_status_of
from runs.days import find_day
from runs.lock import last_finished_query, running_run_query

__all__ = [
    "day_dict",
    "find_day",
    "last_finished_query",
    "local_date",
    "observation_dict",
    "progress_dict",
    "run_dict",
    "run_status_of",
    "running_run_query",
]
