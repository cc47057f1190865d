"""Discovery from ``TF_CONFIG``: the chief/worker/ps host lists become scrape targets.

``TF_CONFIG`` (TensorFlow's cluster spec, JSON)::

    {"cluster": {"chief": ["host0:2222"], "worker": ["host1:2222", "host2:2222"], "ps": ["host3:2222"]},
     "task": {"type": "worker", "index": 0}}

Each ``host:port`` is a training endpoint, not a metrics endpoint: the metrics port is either one
fixed port on every host (``MetricsPort(9400)``) or the training port plus an offset
(``MetricsPort(offset=1000)``, written ``+1000`` on the command line — useful when several tasks
share a host). Evaluators do not train and are left out.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from cmdare.collectors.samples import TaskInfo
from cmdare.collectors.scrape import ScrapeTarget

# Assumption: the exporter's documented example port (collectors/exporter.py); change with --metrics-port.
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


def load(text_or_path: str) -> dict:
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
    cluster = spec.get("cluster") if isinstance(spec, dict) else None
    if not isinstance(cluster, dict) or not any(r in cluster for r in ROLES):
        raise TFConfigError("TF_CONFIG has no cluster with chief/worker/ps hosts")
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
        raise TFConfigError(f"TF_CONFIG endpoint is not host:port: {endpoint[:200]!r}")
    return host.strip("[]"), int(port)


def targets(
    spec: dict, *, job: str = "training", metrics_port: MetricsPort | None = None, path: str = "/metrics"
) -> list[ScrapeTarget]:
    """One scrape target per chief/worker/ps endpoint, tasks named ``<type>-<index>``."""
    mp = metrics_port or MetricsPort()
    out: list[ScrapeTarget] = []
    for kind, hosts in spec["cluster"].items():
        role = ROLES.get(kind)
        if role is None:
            continue  # evaluator etc.: no training steps to watch
        for i, endpoint in enumerate(hosts):
            host, port = _split(endpoint)
            h = f"[{host}]" if ":" in host else host
            url = f"http://{h}:{mp.for_endpoint(port)}{path}"
            out.append(ScrapeTarget(url, TaskInfo(job=job, task=f"{kind}-{i}", role=role)))
    return out
