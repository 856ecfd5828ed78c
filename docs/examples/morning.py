#!/usr/bin/env python3
"""An example runner: the `morning` runner, cron-able, using only its enumerated allowlist.

    OPERATOR_URL=http://127.0.0.1:8000/mcp OPERATOR_TOKEN=opk_... .venv/bin/python docs/examples/morning.py

Give it a token made for it (`python3 manage.py operator_token create --runner morning`): the
operator then refuses anything outside the morning runner's tools as well. It reads the
orientation packet, puts one task on the board for today ("Morning review", a stable key, so a
second run the same day changes nothing), and prints a few lines. It never tries a tool outside its
allowlist: `runs.client` would refuse it locally, before any request is built.

Exit status: 0 done; 1 the operator refused a call (the reason is printed); 69 the operator could
not be reached or did not answer within the deadline (try again later); 2 bad usage.
"""

from __future__ import annotations

import datetime
import os
import sys
from pathlib import Path

# The repository's root, so `runs.client` imports when this file is run from a checkout.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from runs.client import ClientError, OperatorClient, Refused


def main() -> int:
    url = os.environ.get("OPERATOR_URL", "http://127.0.0.1:8000/mcp")
    token = os.environ.get("OPERATOR_TOKEN", "")
    if not token:
        print("morning: set OPERATOR_TOKEN (python3 manage.py operator_token create --runner morning)")
        return 2
    client = OperatorClient.for_runner("morning", url, token, deadline_s=30)
    try:
        packet = client.call("operator_context_packet", {})
        today = packet["day"]["date"]
        task = client.call(
            "operator_update_task",
            {
                "key": f"morning-review-{today}",
                "patch": {
                    "title": "Morning review",
                    "detail": "Read the packet; approve or park what waits for you.",
                    "lane": "today",
                },
            },
        )
    except Refused as no:
        print(f"morning: {no}", file=sys.stderr)
        return 1
    except ClientError as exc:
        print(f"morning: {exc}", file=sys.stderr)
        return 69
    waiting = packet["awaiting_approval"]["total"]
    print(f"morning {today} ({datetime.datetime.now():%H:%M}): day {packet['day']['state']}")
    print(f"  intents awaiting your approval: {waiting}")
    state = "created" if task["created"] else ("updated" if task["changed"] else "already there")
    print(f"  task #{task['task']['id']} {task['task']['title']!r}: {state}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
