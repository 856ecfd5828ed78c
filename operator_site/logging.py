"""A small JSON formatter on stdlib logging: one object per line, easy to ship and to grep. A request
attached to a record is written as its method and path only (never its query string)."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

_RESERVED = set(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}


def _request_line(request: object) -> object:
    """Django attaches the request to its log records; its repr carries the query string (where a
    careless caller may have put a credential). Only the method and the path are kept."""
    method, path = getattr(request, "method", None), getattr(request, "path", None)
    if isinstance(path, str):
        return f"{method} {path}"
    return type(request).__name__


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _RESERVED and not key.startswith("_"):
                entry[key] = _request_line(value) if key == "request" else value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False)
