"""Discovery from ``TF_CONFIG``: the chief/worker/ps host lists become scrape targets.

``TF_CONFIG`` (TensorFlow's cluster spec, JSON)::

    {"cluster": {"chief": ["host0:2222"], "worker": ["host1:2222", "host2:2222"], "ps": ["host3:2222"]},
     "task": {"type": "worker", "index": 0}}

Each ``host:port`` is a training endpoint, not a metrics endpoint: the metrics port is either one
fixed port on every host (``MetricsPort(9400)``) or the training port plus an offset
(``MetricsPort(offset=1000)``, written ``+1000`` on the command line — useful when several tasks
share a host). Evaluators do not train and are left out.

Accepted as TensorFlow writes them: ``chief`` or ``master`` (TF1 estimator) for the chief, an
evaluator-only or cluster-less TF_CONFIG (single-worker training) — both name no task to watch,
which :func:`targets` returns as an empty list rather than an error. Several tasks behind one
metrics URL (a fixed ``--metrics-port`` with tasks sharing a host) are scraped once and reported by
:func:`shared_urls`. TF_CONFIG from the environment is used only when no other source is given
(``tui/sources.py``); ``--tf-config`` always is.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from cmdare.collectors.redaction import redact_cut
from cmdare.collectors.samples import TaskInfo
from cmdare.collectors.scrape.source import ScrapeTarget

# Assumption: the exporter's documented example port (collectors/exporter/training.py); change with --metrics-port.
DEFAULT_METRICS_PORT = 9400
ROLES = {"chief": "chief", "master": "chief", "worker": "worker", "ps": "ps"}


class TFConfigError(ValueError):
    """TF_CONFIG is not a usable cluster spec (one-line message)."""


@dataclass(frozen=True)
class MetricsPort:
    port: int | None = DEFAULT_METRICS_PORT
    offset: int | None = None

    @classmethod
    def parse(cls, text: str) -> MetricsPort:
        """``"9400"`` → fixed port; ``"+1000"`` → training port + 1000."""
        s = text.strip()
        try:
            n = int(s)
        except ValueError:
            raise TFConfigError(f"metrics port must be a number or +OFFSET: {text!r}") from None
        if s.startswith("+"):
            return cls(port=None, offset=n)
        if not 0 < n < 65536:
            raise TFConfigError(f"metrics port out of range: {text!r}")
        return cls(port=n)

    def for_endpoint(self, port: int) -> int:
        p = port + self.offset if self.offset is not None else self.port
        if p is None or not 0 < p < 65536:
            raise TFConfigError(f"metrics port for training port {port} is out of range")
        return p


def load(text_or_path: str) -> dict[str, Any]:
    """Parse TF_CONFIG from JSON text, or from a file when the value is not JSON."""
    s = text_or_path.strip()
    if not s.startswith("{"):
        from cmdare.collectors.textfile import TextFileError, read_small_text

        try:
            s = read_small_text(s, limit=1024 * 1024)
        except TextFileError as exc:
            raise TFConfigError(f"TF_CONFIG is neither JSON nor a readable file: {exc}") from None
    try:
        spec = json.loads(s)
    except ValueError as exc:
        raise TFConfigError(f"TF_CONFIG is not valid JSON: {exc}") from None
    if not isinstance(spec, dict):
        raise TFConfigError("TF_CONFIG must be a JSON object")
    cluster = spec.setdefault("cluster", {})  # absent: single-worker training, nothing to discover
    if not isinstance(cluster, dict):
        raise TFConfigError("TF_CONFIG cluster must be an object of role: ['host:port', …]")
    for role, hosts in cluster.items():
        if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
            raise TFConfigError(f"TF_CONFIG cluster.{role} must be a list of 'host:port' strings")
    for hosts in cluster.values():  # one bad endpoint is refused here, never in every poll
        for endpoint in hosts:
            _split(endpoint)
    return spec


_HOST = re.compile(r"[A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+(?:%[A-Za-z0-9._-]+)?\]")  # a name, IPv4, or [IPv6]


def _split(endpoint: str) -> tuple[str, int]:
    host, sep, port = endpoint.rpartition(":")
    if not sep or not host or not port.isdigit() or not _HOST.fullmatch(host):
        raise TFConfigError(f"TF_CONFIG endpoint is not host:port: {redact_cut(endpoint, 200)!r}")
    return host.strip("[]"), int(port)


def targets(
    spec: dict[str, Any],
    *,
    job: str = "training",
    metrics_port: MetricsPort | None = None,
    path: str = "/metrics",
) -> list[ScrapeTarget]:
    """One scrape target per metrics URL of the chief/worker/ps endpoints, tasks named
    ``<type>-<index>`` (TF's per-role index). Several tasks behind one URL give one target without
    a configured identity: the page's own ``cmdare_task_info`` names it (see :func:`shared_urls`)."""
    mp = metrics_port or MetricsPort()
    out: list[ScrapeTarget] = []
    seen: dict[str, int] = {}
    for kind, hosts in spec["cluster"].items():
        role = ROLES.get(kind)
        if role is None:
            continue  # evaluator etc.: no training steps to watch
        for i, endpoint in enumerate(hosts):
            host, port = _split(endpoint)
            h = f"[{host}]" if ":" in host else host
            url = f"http://{h}:{mp.for_endpoint(port)}{path}"
            if url in seen:
                out[seen[url]] = ScrapeTarget(url, None)
                continue
            seen[url] = len(out)
            out.append(ScrapeTarget(url, TaskInfo(job=job, task=f"{kind}-{i}", role=role)))
    return out


def shared_urls(
    spec: dict[str, Any], *, metrics_port: MetricsPort | None = None, path: str = "/metrics"
) -> list[str]:
    """One line per metrics URL that several TF_CONFIG tasks map to (only one of them can be read)."""
    mp = metrics_port or MetricsPort()
    by_url: dict[str, list[str]] = {}
    for kind, hosts in spec["cluster"].items():
        if ROLES.get(kind) is None:
            continue
        for i, endpoint in enumerate(hosts):
            host, port = _split(endpoint)
            h = f"[{host}]" if ":" in host else host
            by_url.setdefault(f"http://{h}:{mp.for_endpoint(port)}{path}", []).append(f"{kind}-{i}")
    return [
        f"TF_CONFIG: {', '.join(tasks)} share {url}: one task is read; give each its own port "
        f"(--metrics-port +N)"
        for url, tasks in by_url.items()
        if len(tasks) > 1
    ]
