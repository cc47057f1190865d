"""Credentials never leave the process: one redaction used by logs, recordings, statuses and errors.

Removes ``user:password@`` from URLs, bearer/basic ``Authorization`` values, Google OAuth access tokens
(``ya29.…``), ``token=`` / ``key=``-style parameters, and any secret string handed in explicitly.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

_USERINFO = re.compile(r"(?<=//)[^/@\s]*@")
_AUTH = re.compile(r"(?i)\b(bearer|basic)(\s+)[^\s'\"]+")
_GOOGLE_TOKEN = re.compile(r"ya29\.[\w.\-]+")
_SECRET_PARAM = re.compile(
    r"(?i)((?:[?&]|\b)(?:token|access_token|api_key|apikey|key|password|secret)=)[^&\s#'\"]*"
)

__all__ = ["redact", "redact_cut", "redact_optional", "RedactFilter", "install_log_filters"]

MAX_SCAN = 64 * 1024  # longer texts are cut to this before redaction (the final cut is far shorter)
_MIN_FRAGMENT = 4  # a cut secret is trimmed while its visible head is at least this long


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with every credential it carries replaced by ``***``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    text = _USERINFO.sub("", text)
    text = _AUTH.sub(r"\1\2***", text)
    text = _GOOGLE_TOKEN.sub("***", text)
    return _SECRET_PARAM.sub(r"\1***", text)


def redact_cut(text: str, limit: int = 160, secrets: Iterable[str | None] = ()) -> str:
    """``text`` redacted, *then* cut to ``limit`` characters: a secret at the cut never leaves its
    first characters behind. A text over :data:`MAX_SCAN` is cut to that first, and a secret's head
    left at that cut is trimmed as well."""
    secrets = [s for s in secrets if s]
    if len(text) > MAX_SCAN:
        text = _trim_secret_head(text[:MAX_SCAN], secrets)
    text = redact(text, secrets)
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def _trim_secret_head(text: str, secrets: list[str]) -> str:
    """``text`` without a trailing prefix (>= 4 characters) of any secret."""
    for secret in secrets:
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
