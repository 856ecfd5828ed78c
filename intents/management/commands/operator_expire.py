"""`python3 manage.py operator_expire`: mark pending approvals past their expiry `expired`.

Safe to run from cron at any rate and beside the server and the ticks: each intent moves with a
conditional update, so a person approving at the same moment and the sweep never both win.
Prints `{"expired": [ids]}`.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand

from intents.lifecycle import expire_pending


class Command(BaseCommand):
    help = "Expire pending approvals older than OPERATOR_APPROVAL_EXPIRY_DAYS (their decisions too)."

    def handle(self, *args: Any, **opts: Any) -> None:
        self.stdout.write(json.dumps({"expired": expire_pending()}))
