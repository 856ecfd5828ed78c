"""The one declaration of every setting: how `operator_site/settings.py` reads the environment, and
what `docs/configuration.md` and `.env.example` say about it.

settings.py declares each setting once, in one line::

    OPERATOR_RATE_LIMIT = config.int("OPERATOR_RATE_LIMIT", 1200, "Requests per token per window.", min=0)

The call reads the variable (the environment first, then a `.env` file next to manage.py), checks
it, and returns the value; the declaration (name, type, default, meaning, bounds) is kept, in order,
for `render_markdown()` (docs/configuration.md, `python3 manage.py operator_docs`) and for the test
that compares it with what the code reads (tests/test_configuration.py).

A value that does not fit ends in ONE line naming the variable, what was wrong and what to do
(`ConfigError`, which `manage.py` prints without a traceback).

Variables read before Django exists (by manage.py's bootstrap) or only by the test suite are
declared too, with `config.declare(...)`: nothing is read then, the entry is only documented.

This module imports nothing from Django at import time beyond the exception type, so manage.py can
turn a ConfigError into one line.
"""

from __future__ import annotations

import builtins
import json
import os
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured

DOCS = "docs/configuration.md"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


class ConfigError(ImproperlyConfigured):
    """A setting that does not fit: its message is the one line a person reads."""


@dataclass(frozen=True)
class Setting:
    name: str  # the environment variable
    kind: str  # bool, int, float, str, choice, list, json, path, url, secret
    default: Any
    meaning: str
    section: str
    attr: str  # the settings attribute it becomes (usually the same name)
    default_doc: str = ""  # the default as the docs say it, where the value is not self-explanatory
    read_by: str = "settings"  # settings | manage.py | tests
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    example: str = ""  # shown in .env.example instead of the default, where that helps

    @property
    def default_text(self) -> str:
        if self.default_doc:
            return self.default_doc
        if self.kind == "bool":
            return "true" if self.default else "false"
        if self.kind == "list":
            return ",".join(self.default) if self.default else "(empty)"
        if self.kind == "json":
            return json.dumps(self.default)
        if self.default in ("", None):
            return "(empty)"
        return str(self.default)

    @property
    def allowed(self) -> str:
        if self.choices:
            return " | ".join(self.choices)
        if self.minimum is not None and self.maximum is not None:
            return f"{self.minimum:g} to {self.maximum:g}"
        if self.minimum is not None:
            return f"at least {self.minimum:g}"
        return {
            "bool": "true | false",
            "int": "a whole number",
            "float": "a number",
            "list": "comma-separated",
            "json": "JSON",
            "path": "a folder",
            "url": "a URL",
            "secret": "text (secret)",
        }.get(self.kind, "text")


def read_dotenv(path: Path) -> dict[str, str]:
    """`.env`: NAME=value lines; `#` comments; optional single or double quotes around the value."""
    values: dict[str, str] = {}
    if not path.exists():
        return values
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        name, _, value = line.partition("=")
        name = name.strip().removeprefix("export ").strip()
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[name] = value
    return values


@dataclass
class Config:
    """Reads and declares settings, in order. One instance: `operator_site.settings.config`."""

    env_file: Path | None = None
    environ: Any = None
    declared: list[Setting] = field(default_factory=list)
    _section: str = "General"
    _section_notes: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.environ is None:
            self.environ = os.environ
        self._dotenv = read_dotenv(self.env_file) if self.env_file else {}

    # --- declaring ----------------------------------------------------------------------------
    def section(self, title: str, note: str = "") -> None:
        """Start a section of docs/configuration.md (the settings declared next belong to it)."""
        self._section = title
        self._section_notes[title] = note

    @property
    def section_notes(self) -> dict[str, str]:
        return dict(self._section_notes)

    def _declare(self, name: str, kind: str, default: Any, meaning: str, **extra: Any) -> Setting:
        if any(s.name == name for s in self.declared):
            raise ValueError(f"setting {name} is declared twice")
        attr = extra.pop("attr", None) or name
        if "min" in extra:
            extra["minimum"] = extra.pop("min")
        if "max" in extra:
            extra["maximum"] = extra.pop("max")
        setting = Setting(name, kind, default, " ".join(meaning.split()), self._section, attr, **extra)
        self.declared.append(setting)
        return setting

    def raw(self, name: str, *, empty_is_unset: bool = True) -> str | None:
        """The variable's text: the real environment wins over `.env`; None when unset (or empty,
        for typed values: `OPERATOR_RATE_LIMIT=` means the default, while `OPERATOR_NOTIFY_EMAIL=`
        means no address)."""
        value = self.environ.get(name)
        if value is None:
            value = self._dotenv.get(name)
        if value is None or (empty_is_unset and value.strip() == ""):
            return None
        return value

    @staticmethod
    def fail(setting: Setting | str, problem: str, fix: str = "") -> ConfigError:
        name = setting.name if isinstance(setting, Setting) else setting
        advice = fix or f"set it in the environment or in .env (see {DOCS})"
        return ConfigError(f"{name}: {problem}; {advice}.")

    def _bounded(self, setting: Setting, value: float, raw: str) -> None:
        low, high = setting.minimum, setting.maximum
        if (low is not None and value < low) or (high is not None and value > high):
            raise self.fail(setting, f"{raw!r} is out of range (allowed: {setting.allowed})")

    # --- typed readers: each declares the setting and returns its value ----------------------------
    def str(self, name: str, default: str, meaning: str, **extra: Any) -> str:
        self._declare(name, "str", default, meaning, **extra)
        raw = self.raw(name, empty_is_unset=False)
        return default if raw is None else raw.strip()

    def secret(self, name: str, default: str, meaning: str, **extra: Any) -> str:
        self._declare(name, "secret", default, meaning, **extra)
        raw = self.raw(name, empty_is_unset=False)
        return default if raw is None else raw.strip()

    def url(self, name: str, default: str, meaning: str, **extra: Any) -> str:
        setting = self._declare(name, "url", default, meaning, **extra)
        raw = self.raw(name)
        if raw is None:
            return default
        value = raw.strip()
        if "://" not in value:
            raise self.fail(setting, f"{value!r} is not a URL (scheme://host...)")
        return value

    def path(self, name: str, default: Path, meaning: str, **extra: Any) -> Path:
        self._declare(name, "path", default, meaning, **extra)
        raw = self.raw(name)
        return Path(raw.strip() if raw is not None else default).expanduser().resolve()

    def bool(self, name: str, default: bool, meaning: str, **extra: Any) -> bool:
        """A bool must say yes or no: a typo like DEBUG=ture is an error, not False."""
        setting = self._declare(name, "bool", default, meaning, **extra)
        raw = self.raw(name)
        if raw is None:
            return default
        lowered = raw.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise self.fail(
            setting, f"{raw!r} is not true or false (allowed: true, false, 1, 0, yes, no, on, off)"
        )

    def int(self, name: str, default: int, meaning: str, **extra: Any) -> int:
        setting = self._declare(name, "int", default, meaning, **extra)
        raw = self.raw(name)
        if raw is None:
            return default
        try:
            value = builtins.int(raw.strip())
        except ValueError:
            raise self.fail(setting, f"{raw!r} is not a whole number") from None
        self._bounded(setting, value, raw)
        return value

    def float(self, name: str, default: float, meaning: str, **extra: Any) -> float:
        setting = self._declare(name, "float", default, meaning, **extra)
        raw = self.raw(name)
        if raw is None:
            return default
        try:
            value = builtins.float(raw.strip())
        except ValueError:
            raise self.fail(setting, f"{raw!r} is not a number") from None
        if value != value or value in (builtins.float("inf"), builtins.float("-inf")):
            raise self.fail(setting, f"{raw!r} is not a finite number")
        self._bounded(setting, value, raw)
        return value

    def choice(self, name: str, default: str, meaning: str, choices: Iterable[str], **extra: Any) -> str:
        setting = self._declare(name, "choice", default, meaning, choices=tuple(choices), **extra)
        raw = self.raw(name)
        if raw is None:
            return default
        value = raw.strip().lower()
        if value not in setting.choices:
            raise self.fail(setting, f"{raw!r} is not one of {', '.join(setting.choices)}")
        return value

    def list(self, name: str, default: Iterable[str], meaning: str, **extra: Any) -> list[str]:
        self._declare(name, "list", builtins.list(default), meaning, **extra)
        raw = self.raw(name, empty_is_unset=False)
        if raw is None:
            return builtins.list(default)
        return [item.strip() for item in raw.split(",") if item.strip()]

    def json(self, name: str, default: Any, meaning: str, **extra: Any) -> Any:
        setting = self._declare(name, "json", default, meaning, **extra)
        raw = self.raw(name)
        if raw is None:
            return default
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise self.fail(setting, f"is not valid JSON ({exc})") from None

    def declare(self, name: str, kind: str, default: Any, meaning: str, **extra: Any) -> None:
        """Document a variable read elsewhere (manage.py before Django exists, or the test suite)."""
        extra.setdefault("read_by", "manage.py")
        self._declare(name, kind, default, meaning, **extra)

    # --- the documents ---------------------------------------------------------------------------
    def render_markdown(self) -> str:
        lines = [
            "# Configuration",
            "",
            "Every setting the operator reads, with its default and meaning. Generated from the one",
            "declaration in `operator_site/settings.py` by `python3 manage.py operator_docs`; a test",
            "fails when this page, `.env.example` or the code disagree.",
            "",
            "Settings come from the environment, or from a `.env` file next to `manage.py` (real",
            "environment variables win; `.env.example` is a complete template). A value that does not",
            "fit stops every command with one line naming the variable, what was wrong and what to do.",
            "A variable set to nothing (`NAME=`) means the default for numbers, flags and choices, and",
            "empty for text and lists (`OPERATOR_NOTIFY_EMAIL=` turns the e-mail channel off).",
            "",
        ]
        sections: dict[str, list[Setting]] = {}
        for setting in self.declared:
            sections.setdefault(setting.section, []).append(setting)
        for title, settings in sections.items():
            lines += [f"## {title}", ""]
            if self._section_notes.get(title):
                lines += [" ".join(self._section_notes[title].split()), ""]
            lines += ["| variable | default | allowed | meaning |", "|---|---|---|---|"]
            for s in settings:
                where = "" if s.read_by == "settings" else f" (read by {s.read_by})"
                meaning = s.meaning.replace("|", "\\|") + where
                default = s.default_text.replace("|", "\\|")
                allowed = s.allowed.replace("|", "\\|")
                lines.append(f"| `{s.name}` | `{default}` | {allowed} | {meaning} |")
            lines.append("")
        return "\n".join(lines)


def render_env_example(config: Config) -> str:
    """`.env.example`: every setting a deployment may set (not the test suite's), commented out at its
    default (or an example), under its meaning."""
    out = [
        "# The operator's settings. Copy this file to `.env` next to manage.py (real environment",
        "# variables win) and uncomment what you change. Generated from operator_site/settings.py by",
        f"# `python3 manage.py operator_docs`; {DOCS} explains each one.",
    ]
    section = None
    for s in config.declared:
        if s.read_by == "tests":
            continue
        if s.section != section:
            section = s.section
            out += ["", f"# === {section} " + "=" * max(3, 96 - len(section))]
        out.append("")
        out += textwrap.wrap(s.meaning, width=98, initial_indent="# ", subsequent_indent="# ")
        if s.allowed not in {"text", "text (secret)"}:
            out.append(f"# Allowed: {s.allowed}.")
        value = s.example or ("" if s.default_doc or s.kind == "secret" else s.default_text)
        if value == "(empty)":
            value = ""
        if s.default_doc:
            out.append(f"# Default: {s.default_doc}.")
        out.append(f"# {s.name}={value}")
    return "\n".join(out) + "\n"


def env_example_names(text: str) -> set[str]:
    """The variable names `.env.example` mentions as `NAME=` or `# NAME=` lines."""
    names = set()
    for raw in text.splitlines():
        line = raw.strip().lstrip("#").strip()
        name, sep, _ = line.partition("=")
        if sep and name and name.replace("_", "").isalnum() and name.upper() == name and " " not in name:
            names.add(name)
    return names
