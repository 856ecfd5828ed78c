"""The layers hold (docs/architecture.md, "Layers"): the import-linter contracts in pyproject.toml
pass, and the kernel's contract names every kernel module, so a new one cannot slip outside it."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from tests.fixtures import ROOT


def _contracts() -> list[dict]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def test_the_import_contracts_are_kept() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout


def test_every_kernel_module_is_under_the_kernel_contract() -> None:
    kernel = next(c for c in _contracts() if c["type"] == "forbidden")
    listed = set(kernel["source_modules"])
    site = ROOT / "operator_site"
    top_level = {
        "operator_site." + (p.stem if p.is_file() else p.name)
        for p in site.iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p.is_dir() and (p / "__init__.py").exists())
    }
    missing = top_level - listed - {"operator_site.cross_domain", "operator_site.migrations"}
    assert missing == set(), f"kernel modules outside the contract: {sorted(missing)}"
    assert "operator_site.cross_domain" in kernel["forbidden_modules"]
    assert {"beliefs", "goals", "intents", "runs"} <= set(kernel["forbidden_modules"])


def test_the_domain_layers_are_declared_top_down() -> None:
    layers = next(c for c in _contracts() if c["type"] == "layers")["layers"]
    assert layers == ["operator_site.cross_domain", "intents", "goals | runs", "beliefs"]
