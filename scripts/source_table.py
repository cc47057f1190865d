"""Rewrite the ``[sources]`` table of docs/config.md from the declared options (``--check``: exit 1 if
it is out of date instead). Run it after adding or changing a source's spec."""

from __future__ import annotations

import sys
from pathlib import Path

from cmdare.tui.source_docs import with_table

DOC = Path(__file__).resolve().parents[1] / "docs" / "config.md"


def main(argv: list[str]) -> int:
    """Write the table (or, with ``--check``, say whether it is current)."""
    text = DOC.read_text()
    new = with_table(text)
    if "--check" in argv:
        print("docs/config.md: [sources] table up to date" if new == text else "docs/config.md: out of date")
        return 0 if new == text else 1
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
