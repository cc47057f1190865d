"""The Prometheus-API source's contract: a Prometheus server (or VictoriaMetrics) that scrapes the
job's tasks, asked through instant queries (:class:`~cmdare.collectors.prometheus.source.PrometheusAPISource`)."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from cmdare.collectors.source_contract import (
    BuildContext,
    Option,
    OptionError,
    SourceSpec,
    SourceValues,
    http_url,
    readable_file,
)

if TYPE_CHECKING:
    from cmdare.collectors.poller import Source

_MATCHER = r'\s*[A-Za-z_][A-Za-z0-9_]*\s*(=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"\s*'
_SELECTOR = re.compile(rf"^\{{?(?:{_MATCHER}(?:,{_MATCHER})*)?,?\s*\}}?$")


def selector(value: str) -> str:
    """A PromQL label selector such as ``job="resnet",env!="dev"`` (braces optional)."""
    v = value.strip()
    if not _SELECTOR.match(v) or (v.startswith("{") != v.endswith("}")):
        raise OptionError(f'not a label selector (want e.g. job="resnet"): {value!r}')
    return v


URL: Option[str | None] = Option(
    name="prometheus", flag="--prometheus", default=None, noun="http(s) URL", source=True, check=http_url,
    metavar="URL", env="PROMETHEUS_URL", help="a Prometheus server to query (also PROMETHEUS_URL)",
)  # fmt: skip
SELECTOR: Option[str] = Option(
    name="selector", flag="--selector", default="", noun="label selector", check=selector, metavar="LABELS",
    help='label selector choosing the job in Prometheus, e.g. job="resnet"',
)  # fmt: skip
TOKEN_FILE: Option[str | None] = Option(
    name="prometheus_token_file", flag="--prometheus-token-file", default=None,
    noun="file path (the token itself never goes in the config)", probe=readable_file, metavar="FILE",
    help="file holding a bearer token for Prometheus (else PROMETHEUS_TOKEN)",
)  # fmt: skip


def build(values: SourceValues, ctx: BuildContext) -> list[Source]:
    """One source for the server, its token read now (from the file, else ``$PROMETHEUS_TOKEN``)."""
    url = values[URL]
    if not url:
        return []
    from cmdare.collectors.prometheus.auth import read_token
    from cmdare.collectors.prometheus.source import PrometheusAPISource

    token = read_token(values[TOKEN_FILE], os.environ)
    return [PrometheusAPISource(url, values[SELECTOR], token=token, timeout=ctx.timeout)]


def check(values: SourceValues) -> None:
    """The token file holds a token that can be read (its content is never shown)."""
    if not values[TOKEN_FILE]:
        return
    from cmdare.collectors.prometheus.auth import read_token
    from cmdare.collectors.textfile import TextFileError

    try:
        read_token(values[TOKEN_FILE], {})
    except TextFileError as exc:
        raise OptionError(f"{TOKEN_FILE.flag}: {exc}") from None


SPEC = SourceSpec(
    name="prometheus",
    summary="a Prometheus server (or VictoriaMetrics) that scrapes the job's tasks, asked by instant queries",
    order=20,
    options=(URL, SELECTOR, TOKEN_FILE),
    build=build,
    check=check,
)
