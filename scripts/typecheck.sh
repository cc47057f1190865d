#!/usr/bin/env bash
# Type-check the installed packages with mypy ([tool.mypy] in pyproject.toml: strict on cmdare.collectors and
# cmdare.planner, mypy's defaults on cmdare.tui and cmdare.demo). Exit status is mypy's (1 on any error).
#
# mypy finds modules by path; the editable install maps cmdare.<name> to the folder <name>/ with an import hook
# mypy cannot follow. So the package-dir mapping is read from pyproject.toml and laid out as symbolic links
# under build/mypy/cmdare (mypy_path), and mypy sees the same names the code imports. Messages name the source
# files (collectors/…, planner/…), not the links.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python

links=build/mypy/cmdare
rm -rf "$links" && mkdir -p "$links"
"$PY" - "$links" <<'PYEOF'
import os, sys, tomllib

links = sys.argv[1]
with open("pyproject.toml", "rb") as f:
    mapping = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
for name, folder in mapping.items():
    top, _, sub = name.partition(".")
    if top == "cmdare" and "." not in sub:
        os.symlink(os.path.relpath(folder, links), os.path.join(links, sub))
PYEOF

"$PY" -m mypy "$@" 2>&1 | sed -e "s#^$links/##" -e "s#^\(\S*\)$links/#\1#"
