"""The one boundary for text from outside: label values, job and task names, error bodies, file
contents, recordings. Every such string passes :func:`clean_text` once, where it enters (the value
types of :mod:`cmdare.collectors.samples` call it), so nothing further in can put a byte on the
operator's terminal that the terminal would obey.

What it does, character by character (one character in, one out, so lengths and columns hold):

* C0 controls become their visible Control Pictures: ESC → ``␛``, BEL → ``␇``, LF → ``␊``, TAB →
  ``␉``, DEL → ``␡``. An escape sequence (CSI ``ESC [``, OSC ``ESC ]`` such as OSC 52 clipboard or
  OSC 8 hyperlinks, DCS ``ESC P``) is left as harmless visible text: without its ESC no terminal
  starts a sequence.
* C1 controls (U+0080–U+009F, the 8-bit CSI/OSC/DCS), bidi overrides and isolates (Trojan Source),
  zero-width and other format characters, line/paragraph separators and lone surrogates (from
  undecodable bytes) become ``�``.
* The result is at most ``limit`` characters; a longer text is cut and ends with ``…``.
* A credential this process holds (:data:`cmdare.collectors.redaction.SECRET_FORMS`: a token
  reflected into a label value, say) becomes ``***`` *before* the cut, and a cut through one trims
  its head: no fragment of 4 characters or more is left.

Markup is *not* escaped here: ``[link=…]`` is plain text to everything that renders data as
``rich.text.Text`` (the TUI and ``snapshot`` never parse markup from data).

Cost: pure printable ASCII within the limit (almost every label) is returned as is after two C-level
scans; other text is cut to the limit first, so a hostile 10 MB value costs what a ``limit``-long one
does, and results are memoised.
"""

from __future__ import annotations

import functools
import logging
import re
from typing import Any, TypeVar

from cmdare.collectors.redaction import SECRET_FORMS, holds_secret, redact, trim_secret_head

__all__ = [
    "LABEL_LIMIT",
    "MESSAGE_LIMIT",
    "CleanLogFilter",
    "clean_keys",
    "clean_optional",
    "clean_text",
    "clean_tree",
    "install_log_cleaning",
    "label_limit",
    "set_label_limit",
]

T = TypeVar("T")

LABEL_LIMIT = 200  # a label value, job/task name, tag or series key (default; ``[caps] label_length``)
MESSAGE_LIMIT = 500  # an error or status message
ELLIPSIS = "…"

# Cc, Cf, Zl, Zp and Cs code points (Unicode 14, Python 3.11's unicodedata; a test checks the
# running interpreter's table is covered). C0, DEL and C1 go through a translation table; the rest
# (format characters, separators, surrogates) through one regex.
_REPLACEMENT = "\ufffd"
_CONTROLS = (
    {c: chr(0x2400 + c) for c in range(0x20)}
    | {0x7F: "\u2421"}
    | {c: _REPLACEMENT for c in range(0x80, 0xA0)}
)
_FORMAT = re.compile(
    "[\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e"
    "\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ud800-\udfff\ufeff\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U00013438\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0001\U000e0020-\U000e007f]"
)


@functools.lru_cache(maxsize=8192)
def _clean_slow(text: str) -> str:
    """``text`` (already within its limit) with every unsafe character made visible or replaced."""
    return _FORMAT.sub(_REPLACEMENT, text.translate(_CONTROLS))


_label_limit = LABEL_LIMIT


def set_label_limit(limit: int) -> None:
    """The length labels, names, tags and series keys are cut to from now on (``[caps]``)."""
    global _label_limit
    _label_limit = max(1, int(limit))


def label_limit() -> int:
    """The length labels, names, tags and series keys are cut to."""
    return _label_limit


def clean_text(value: object, limit: int | None = None) -> str:
    """``value`` as text that is safe on a terminal and at most ``limit`` (>= 1; default
    :func:`label_limit`) characters long.

    Bytes are decoded as UTF-8 with invalid sequences replaced; anything else goes through ``str``.
    Idempotent: ``clean_text(clean_text(x, n), n) == clean_text(x, n)``."""
    if limit is None:
        limit = _label_limit
    if type(value) is not str:
        if isinstance(value, bytes | bytearray):
            value = bytes(value[: limit * 4]).decode("utf-8", errors="replace")
        else:
            value = str(value)  # numbers, str subclasses (StrEnum): a plain str from here on
    if SECRET_FORMS and holds_secret(value[: limit + len(SECRET_FORMS[0])]):
        return _without_secrets(value, limit)
    if len(value) <= limit:
        if value.isascii() and value.isprintable():
            return value
        return _clean_slow(value)
    return _clean_slow(value[: max(limit - 1, 0)]) + ELLIPSIS  # cut first: cost and cache bounded


def _without_secrets(value: str, limit: int) -> str:
    """:func:`clean_text` of a ``value`` holding a credential: redacted first, then cut. Only the
    part that can show is read (the limit plus the longest credential form: every credential that
    starts before the cut lies within it); the head of one cut at that window's end is trimmed."""
    window = value[: limit + len(SECRET_FORMS[0])]
    text = redact(window)
    if len(window) < len(value):  # more follows: the window's end may cut a credential
        text = trim_secret_head(text)
    if len(window) < len(value) or len(text) > limit:
        return _clean_slow(text[: max(limit - 1, 0)]) + ELLIPSIS
    return _clean_slow(text)


def clean_optional(value: object | None, limit: int = MESSAGE_LIMIT) -> str | None:
    """:func:`clean_text`, passing None through."""
    return None if value is None else clean_text(value, limit)


def clean_tree(value: T, limit: int | None = None) -> T:
    """``value`` (a parsed file: TOML, JSON) with every string in it, keys included, passed through
    :func:`clean_text`; numbers, booleans and dates as they are. Nesting is bounded by the parser
    that made ``value`` (each one here refuses a deep file before this is called)."""
    if isinstance(value, str):
        return clean_text(value, limit)  # type: ignore[return-value]  # T is str here: a str comes back
    if isinstance(value, dict):
        return {clean_text(k, limit): clean_tree(v, limit) for k, v in value.items()}  # type: ignore[return-value]  # a dict, as T
    if isinstance(value, list):
        return [clean_tree(v, limit) for v in value]  # type: ignore[return-value]  # a list, as T
    return value


def clean_keys(values: dict[str, float], limit: int | None = None) -> dict[str, float]:
    """``values`` with every key cleaned; the same dict when every key already was (the usual case,
    told by one C-level scan of the keys joined)."""
    if limit is None:
        limit = _label_limit
    try:
        joined = "".join(values)
    except TypeError:  # a key that is not text (a hostile recording)
        joined = "\x00"
    if (
        joined.isascii()
        and joined.isprintable()
        and (len(joined) <= limit or max(map(len, values)) <= limit)
        and not (SECRET_FORMS and holds_secret(joined))
    ):
        return values
    return {clean_text(k, limit): v for k, v in values.items()}


class CleanLogFilter(logging.Filter):
    """Log lines never carry a control character (a log tailed in a terminal is a terminal too);
    credentials are redacted before, as control characters would hide them from the redaction."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        clean = clean_text(redact(msg), max(len(msg), 1))  # redacted first: "Bearer\tX" must still match
        if clean != msg:
            record.msg, record.args = clean, None
        return True


def install_log_cleaning() -> None:
    """Clean every log record as it is made, whichever handler (stderr, the log file) gets it
    and whenever that handler was added. Idempotent."""
    make = logging.getLogRecordFactory()
    if getattr(make, "cleans_text", False):
        return
    clean = CleanLogFilter()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make(*args, **kwargs)
        clean.filter(record)
        return record

    factory.cleans_text = True  # type: ignore[attr-defined]  # a mark on the function, read by getattr
    logging.setLogRecordFactory(factory)
