"""Credentials never leave the process: one redaction used by logs, recordings, statuses and errors.

Removes ``user:password@`` from URLs, bearer/basic ``Authorization`` values, Google OAuth access tokens
(``ya29.…``), ``token=`` / ``key=``-style parameters, any secret string handed in explicitly, and every
credential this process holds (:func:`remember`, :func:`remember_basic`, :func:`remember_url`: a bearer
token, a URL's password or secret query parameter), in each form a server may echo it: as is,
URL-encoded (``%2F`` or ``%2f``, ``+`` for a space) and, for basic auth, the base64 of ``user:password``
(standard and URL-safe, with or without padding) without its ``Basic``.

Redaction always runs before a cut (:func:`redact_cut`; :func:`cmdare.collectors.untrusted.clean_text`
does the same for every label value, name and message it cuts), and a cut that would still leave the
head of a credential (4 characters or more) trims it: no fragment of a credential leaves the process.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from urllib.parse import parse_qsl, quote, quote_plus, unquote, urlsplit

_USERINFO = re.compile(r"(?<=//)[^/@\s]*@")
_AUTH = re.compile(r"(?i)\b(bearer|basic)(\s+)[^\s'\"]+")
_GOOGLE_TOKEN = re.compile(r"ya29\.[\w.\-]+")
_SECRET_PARAM = re.compile(
    r"(?i)((?:[?&]|\b)(?:token|access_token|api_key|apikey|key|password|secret)=)[^&\s#'\"]*"
)

__all__ = [
    "SECRET_FORMS",
    "RedactFilter",
    "holds_secret",
    "install_log_filters",
    "redact",
    "redact_cut",
    "redact_optional",
    "remember",
    "remember_basic",
    "remember_url",
    "trim_secret_head",
]

MAX_SCAN = 64 * 1024  # longer texts are cut to this before redaction (the final cut is far shorter)
_MIN_FRAGMENT = 4  # a cut secret is trimmed while its visible head is at least this long
# Every label value is checked against each form (a C-level substring search each): bounded.
MAX_FORMS = 256
_SECRET_PARAMS = frozenset({"token", "access_token", "api_key", "apikey", "key", "password", "secret"})

# Every form of every credential remembered, longest first (a form inside another is replaced after
# it). The list object never changes (cleared and refilled in place): importers read it directly.
SECRET_FORMS: list[str] = []
_remembered: set[str] = set()
_PERCENT = re.compile(r"%[0-9A-F]{2}")
_records_redacted = False  # the log record factory below is installed
_ANY_CASE: re.Pattern[str] | None = None  # every form, in any letter case (a server may fold it)


def _forms(secret: str) -> set[str]:
    """``secret`` as is and URL-encoded (every way a client or a server writes it)."""
    out = {secret, quote(secret, safe=""), quote(secret), quote_plus(secret), quote_plus(secret, safe="/")}
    out |= {_PERCENT.sub(lambda m: m.group().lower(), f) for f in out}
    return out


_ALNUM_RUN = re.compile(r"[A-Za-z0-9]+")
# A piece every form of a credential holds (its longest letters-and-digits run: URL-encoding and
# base64's two alphabets leave it alone), one or two a credential: a label is searched for these
# few, and for every form only when one is in it.
_NEEDLES: list[str] = []


def _needles(forms: set[str], raw: str) -> set[str]:
    run = max(_ALNUM_RUN.findall(raw), key=len, default="")
    if len(run) >= _MIN_FRAGMENT and all(run in f for f in forms):
        return {run}
    return forms


def _add(forms: set[str], raw: str) -> None:
    new = {f for f in forms if len(f) >= _MIN_FRAGMENT} - _remembered
    if new and len(_remembered) + len(new) > MAX_FORMS:  # thousands of per-target tokens: the rest
        if _remembered.isdisjoint(("",)):  # stay redacted by their shape (token=…) and in messages
            logging.getLogger(__name__).warning(
                "more than %d credential forms: the others are redacted by their shape only", MAX_FORMS
            )
            _remembered.add("")  # said once
        return
    if new:
        _remembered.update(new)
        SECRET_FORMS[:] = sorted(_remembered, key=lambda f: (-len(f), f))
        _NEEDLES[:] = sorted(set(_NEEDLES) | _needles(new, raw))
        global _ANY_CASE
        _ANY_CASE = re.compile("|".join(map(re.escape, SECRET_FORMS)), re.IGNORECASE)
        _redact_every_record()


def _redact_every_record() -> None:
    """From the first credential remembered on, every log record of every logger is redacted as it
    is made (a library's debug trace of response headers too; logger filters miss child loggers)."""
    global _records_redacted
    if _records_redacted:  # once a process (a factory installed later wraps this one)
        return
    _records_redacted = True
    make = logging.getLogRecordFactory()

    def factory(*args: object, **kwargs: object) -> logging.LogRecord:
        record = make(*args, **kwargs)
        msg = record.getMessage()
        clean = redact(msg)
        if clean != msg:
            record.msg, record.args = clean, None
        return record

    logging.setLogRecordFactory(factory)


def remember(secret: str | None) -> None:
    """Redact ``secret`` (and its URL-encoded forms) from every text from now on, wherever it comes
    from (an error body, a header, a label value). A secret shorter than 4 characters is redacted
    only where it is handed in explicitly (:func:`redact`'s ``secrets``): everywhere, it would blank
    ordinary words."""
    if secret:
        _add(_forms(secret), secret)


def remember_basic(user: str, password: str) -> None:
    """Basic-auth credentials: the password (:func:`remember`) and the base64 of ``user:password`` as
    the ``Authorization`` header carries it, which a server may echo bare (without ``Basic``)."""
    import base64

    remember(password)
    if not password:
        return
    raw = f"{user}:{password}".encode()
    std = base64.b64encode(raw).decode()
    b64 = {std, base64.urlsafe_b64encode(raw).decode()}
    _add(b64 | {b.rstrip("=") for b in b64} | {f for b in b64 for f in _forms(b)}, std)


def remember_url(url: str) -> None:
    """The credentials ``url`` carries: the password of its ``user:password@`` (and the base64 a
    client sends for it) and the values of its secret query parameters (``token=``, ``key=``…)."""
    try:
        parts = urlsplit(url)
        user, password = parts.username, parts.password
        query = parse_qsl(parts.query, keep_blank_values=False)
    except ValueError:  # not a URL: nothing to take from it
        return
    if password:
        remember_basic(unquote(user or ""), unquote(password))
    for name, value in query:
        if name.lower() in _SECRET_PARAMS:
            remember(value)


def holds_secret(text: str) -> bool:
    """Whether ``text`` holds a remembered credential in any of its forms (as remembered: a label
    is checked on every construction; messages and log lines are redacted in any letter case)."""
    for needle in _NEEDLES:
        if needle in text:
            return any(f in text for f in SECRET_FORMS)
    return False


def _all_forms(secrets: Iterable[str | None]) -> list[str]:
    given = [s for s in secrets if s]
    if not given:
        return SECRET_FORMS
    extra = {f for s in given for f in _forms(s)} - _remembered
    return sorted([*SECRET_FORMS, *extra], key=len, reverse=True)


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with every credential it carries replaced by ``***``: the ``secrets`` given and every
    credential remembered, in any of their forms, and the credential shapes above."""
    for form in _all_forms(secrets):
        if form in text:
            text = text.replace(form, "***")
    if _ANY_CASE is not None:
        text = _ANY_CASE.sub("***", text)
    text = _USERINFO.sub("", text)
    text = _AUTH.sub(r"\1\2***", text)
    text = _GOOGLE_TOKEN.sub("***", text)
    return _SECRET_PARAM.sub(r"\1***", text)


def redact_cut(text: str, limit: int = 160, secrets: Iterable[str | None] = ()) -> str:
    """``text`` redacted, *then* cut to ``limit`` characters: a secret at the cut never leaves its
    first characters behind. A text over :data:`MAX_SCAN` is cut to that first, and a secret's head
    left at that cut is trimmed as well."""
    forms = _all_forms(secrets)
    if len(text) > MAX_SCAN:
        text = trim_secret_head(text[:MAX_SCAN], forms)
    text = redact(text, forms)
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def trim_secret_head(text: str, secrets: Iterable[str] | None = None) -> str:
    """``text`` without a trailing prefix (>= 4 characters) of any secret (default: every form of
    every credential remembered): what a cut through the middle of one would leave."""
    for secret in SECRET_FORMS if secrets is None else secrets:
        for n in range(len(secret) - 1, _MIN_FRAGMENT - 1, -1):
            if text.endswith(secret[:n]):
                return text[:-n]
    return text


def redact_optional(text: str | None) -> str | None:
    return None if text is None else redact(text)


class RedactFilter(logging.Filter):
    """Redacts log records of libraries that log URLs (httpx logs every request at INFO)."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        clean = redact(msg)
        if clean != msg:
            record.msg, record.args = clean, None
        return True


def install_log_filters(names: Iterable[str] = ("httpx", "httpcore", "cmdare")) -> None:
    """Attach a :class:`RedactFilter` to these loggers (idempotent)."""
    for name in names:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactFilter) for f in logger.filters):
            logger.addFilter(RedactFilter())
