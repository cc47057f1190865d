"""Where a table or key stands in a TOML file a user wrote, so that an error names ``file:line``.

``tomllib`` gives values, not places; every reader of a user's TOML (the config, a workload, a geo plan)
finds the line here, by the same reading of the text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?")


def line_of(lines: Sequence[str], table: str, key: str | None = None, index: int | None = None) -> int | None:
    """The 1-based line of ``key =`` inside ``[table]`` (``table`` ``""``: the top level, where ``key`` may
    also be written as a table ``[key]``); with ``index``, inside the ``index``-th ``[[table]]`` only. The
    table's header line when ``key`` is None or not written there; None when the table is not written."""
    key_re = re.compile(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=") if key is not None else None
    inside, seen, header_line = table == "", -1, None
    for no, line in enumerate(lines, 1):
        header = _HEADER.match(line)
        if header:
            name = header.group(1)
            if not table and name == key:
                return no
            inside = False
            if name == table:
                seen += 1
                if index is None or seen == index:
                    if key_re is None:
                        return no
                    inside, header_line = True, header_line or no
            continue
        if inside and key_re is not None and key_re.match(line):
            return no
    return header_line
