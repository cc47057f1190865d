"""The headless core, proved: collectors and planner never import Textual or Rich, heavy libraries load
lazily, and imports flow one way (tui → planner → collectors). Also: the code passes ruff."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LAYERS = {"collectors": 0, "planner": 1, "tui": 2}


def _modules(folder: str) -> list[str]:
    out = []
    for path in sorted((REPO / folder).rglob("*.py")):
        rel = path.relative_to(REPO / folder).with_suffix("")
        parts = [p for p in rel.parts if p != "__init__"]
        out.append(".".join(["cmdare", folder, *parts]))
    return out


def test_core_imports_no_ui_and_no_heavy_libraries_at_import_time():
    mods = _modules("collectors") + _modules("planner")
    code = (
        "import importlib, sys\n"
        f"for m in {mods!r}: importlib.import_module(m)\n"
        "bad = sorted(m for m in ('textual', 'rich', 'pandas', 'sklearn') if m in sys.modules)\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"imported at module level: {out.stdout.strip()}"


def test_app_module_does_not_load_pandas_or_sklearn():
    code = "import sys, cmdare.tui.app, cmdare.tui.cli; print(','.join(m for m in ('pandas','sklearn') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


@pytest.mark.parametrize("folder", ["collectors", "planner"])
def test_imports_flow_one_way(folder: str):
    for path in (REPO / folder).rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                parts = name.split(".")
                if parts[0] == "cmdare" and len(parts) > 1 and parts[1] in LAYERS:
                    assert LAYERS[parts[1]] <= LAYERS[folder], f"{path.relative_to(REPO)} imports {name}"


def test_ruff_passes():
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(ruff).exists():
        pytest.skip("ruff not installed")
    out = subprocess.run([ruff, "check", "--output-format", "concise", str(REPO)], capture_output=True, text=True,
                         cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stdout[-3000:]
