"""A query's GET URL, percent-encoded here in one C-level pass (``str.translate``) with only what a query
string must escape, so that httpx, which checks and re-quotes every character of a URL in Python, parses
it once and finds little to do: a large fleet's ~6 kB detail query cost ~2.5 ms to build as
``httpx.URL(url, params=…)`` (the parameters quoted, then the whole URL parsed twice), ~15 ms a refresh.

Kept as they are: letters, digits, ``-._~`` and ``!$'()*,:@/?`` (characters RFC 3986 allows in a query,
which httpx leaves alone and Go's ``url.ParseQuery`` reads as themselves); a space is ``+``; every other
character (``"{}|[]=;&+%#``, controls, anything past ASCII as UTF-8) is ``%XX``."""

from __future__ import annotations

import string
from collections.abc import Mapping
from urllib.parse import quote_plus

QUERY_SAFE = string.ascii_letters + string.digits + "-._~" + "!$'()*,:@/?"
_ESCAPES = str.maketrans({c: f"%{c:02X}" for c in range(128) if chr(c) not in QUERY_SAFE} | {ord(" "): "+"})


def encoded(text: str) -> str:
    """``text`` as a query-string value (see the module docstring)."""
    return text.translate(_ESCAPES) if text.isascii() else quote_plus(text, safe=QUERY_SAFE)


def query_url(url: str, form: Mapping[str, str]) -> str:
    """``url`` with ``form`` as its query string (``url`` has none of its own)."""
    return url + "?" + "&".join(f"{encoded(k)}={encoded(v)}" for k, v in form.items())
