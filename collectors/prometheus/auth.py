"""Credentials for a Prometheus server: a bearer token (from a file or ``$PROMETHEUS_TOKEN``) or
user:password from the URL, each sent only in the ``Authorization`` header, hidden from reprs,
tracebacks and logs, and remembered for redaction (:mod:`cmdare.collectors.redaction`); and the server's URL as it may be shown (no credentials, no query)."""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from cmdare.collectors.redaction import remember, remember_basic
from cmdare.collectors.textfile import read_small_text

TOKEN_ENV = "PROMETHEUS_TOKEN"
TOKEN_FILE_LIMIT = 64 * 1024  # a bearer token file larger than this is refused


class BearerToken:
    """A bearer token that does not show itself in reprs, tracebacks or logs."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value
        remember(value)  # redacted from every text from now on, whatever field a server echoes it in

    def header(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._value}"}

    def secret(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "<token hidden>"


class BasicAuth:
    """user:password from the URL, sent as HTTP basic auth; hidden from reprs."""

    __slots__ = ("_user", "_password")

    def __init__(self, user: str, password: str) -> None:
        self._user, self._password = user, password
        remember_basic(unquote(user), unquote(password))  # and the base64 a server may echo bare

    def header(self) -> dict[str, str]:
        raw = f"{unquote(self._user)}:{unquote(self._password)}".encode()
        return {"Authorization": "Basic " + base64.b64encode(raw).decode()}

    def secret(self) -> str:
        return unquote(self._password)

    def __repr__(self) -> str:
        return "<credentials hidden>"


def read_token(token_file: str | Path | None = None, env: Mapping[str, str] | None = None) -> str | None:
    """The bearer token from ``token_file`` (first), else ``$PROMETHEUS_TOKEN``; None when neither."""
    if token_file:  # bounded, regular files only; a TextFileError names the file, never its content
        return read_small_text(token_file, limit=TOKEN_FILE_LIMIT).strip() or None
    return (env if env is not None else os.environ).get(TOKEN_ENV, "").strip() or None


def public_url(url: str) -> str:
    """``url`` without user:password and query (safe to show and record)."""
    p = urlsplit(url)
    host = p.hostname or ""
    netloc = f"{host}:{p.port}" if p.port else host
    return urlunsplit((p.scheme, netloc, p.path, "", ""))
