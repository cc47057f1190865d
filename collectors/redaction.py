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

__all__ = ["redact", "redact_optional", "RedactFilter", "install_log_filters"]


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with every credential it carries replaced by ``***``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    text = _USERINFO.sub("", text)
    text = _AUTH.sub(r"\1\2***", text)
    text = _GOOGLE_TOKEN.sub("***", text)
    return _SECRET_PARAM.sub(r"\1***", text)


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
