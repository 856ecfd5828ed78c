"""`python3 manage.py operator_deliver`: deliver every due notice, release those whose directive
lapsed, retry failures that are due. Safe to run from cron at any rate, and beside the server."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand

from operator_site.notifications import deliver_due


class Command(BaseCommand):
    help = "Deliver due notices (email/webhook), release held ones whose directive lapsed, retry failures."

    def handle(self, *args: Any, **opts: Any) -> None:
        self.stdout.write(json.dumps(deliver_due().as_dict()))
