"""WAN throughput between datacenters: the single-TCP bound and the effective link bandwidth.

One TCP connection over a long, lossy path is bounded by its window and by loss (Mathis et al.,
"The macroscopic behavior of the TCP congestion avoidance algorithm", CCR 1997):
``rate <= MSS / RTT * C / sqrt(loss)`` with ``C = sqrt(3/2) ≈ 1.22``. Atlas (arXiv 2411.14458, via
``shared/background.md`` §2) opens many connections per DC pair, so the usable bandwidth is
``B_eff = min(B_link, n_conn × single_tcp(RTT, loss))``. Units: Gbit/s, seconds, bytes.
"""

from __future__ import annotations

import csv
import functools
import io
import math
from dataclasses import dataclass
from importlib import resources

__all__ = [
    "MATHIS_C",
    "MSS_BYTES",
    "TCP_WINDOW_BYTES",
    "EGRESS_USD_PER_GB_INTER_ZONE",
    "EGRESS_USD_PER_GB_INTER_REGION",
    "WanLink",
    "PublicLink",
    "mathis_gbps",
    "window_gbps",
    "single_tcp_gbps",
    "effective_gbps",
    "public_links",
]

#: sqrt(3/2): the constant of the Mathis bound for periodic loss with delayed ACKs off (Mathis 1997).
MATHIS_C = math.sqrt(1.5)
#: Ethernet MTU 1500 B minus 40 B of IPv4 + TCP headers (RFC 879 default MSS arithmetic).
MSS_BYTES = 1460
#: Linux default ceiling of the receive buffer, ``net.ipv4.tcp_rmem`` max = 6 MiB
#: (kernel Documentation/networking/ip-sysctl.rst). Caps one flow at window / RTT.
TCP_WINDOW_BYTES = 6 * 1024 * 1024
#: Egress between zones / regions of one cloud, $/GB (shared/background.md §2).
EGRESS_USD_PER_GB_INTER_ZONE = 0.01
EGRESS_USD_PER_GB_INTER_REGION = 0.02


@dataclass(frozen=True, kw_only=True)
class WanLink:
    """A full-duplex link between two DCs (each direction carries ``bandwidth_gbps``).

    ``rtt_ms`` is the round-trip time, ``loss`` the packet-loss probability, ``n_conn`` the number of
    parallel TCP connections the job opens, ``egress_usd_per_gb`` the price of bytes sent over it.
    """

    a: str
    b: str
    bandwidth_gbps: float
    rtt_ms: float
    loss: float = 0.0
    n_conn: int = 1
    egress_usd_per_gb: float = EGRESS_USD_PER_GB_INTER_REGION
    window_bytes: int = TCP_WINDOW_BYTES
    mss_bytes: int = MSS_BYTES

    @property
    def key(self) -> frozenset[str]:
        """The unordered DC pair."""
        return frozenset((self.a, self.b))

    @property
    def latency_s(self) -> float:
        """One-way latency, seconds (RTT / 2)."""
        return self.rtt_ms / 2000.0

    def single_tcp_gbps(self) -> float:
        """Throughput of one TCP connection on this path, Gbit/s (never above the link)."""
        return min(
            self.bandwidth_gbps, single_tcp_gbps(self.rtt_ms, self.loss, self.mss_bytes, self.window_bytes)
        )

    def effective_gbps(self, n_conn: int | None = None) -> float:
        """``min(B_link, n_conn × single_tcp)``, Gbit/s; ``n_conn`` defaults to the link's own."""
        n = self.n_conn if n_conn is None else n_conn
        return effective_gbps(
            self.bandwidth_gbps, self.rtt_ms, self.loss, n, self.mss_bytes, self.window_bytes
        )


def mathis_gbps(rtt_ms: float, loss: float, mss_bytes: int = MSS_BYTES) -> float:
    """Mathis loss bound of one TCP flow, Gbit/s: ``MSS·8 / RTT × 1.22 / sqrt(loss)``; inf if no loss."""
    if loss <= 0.0:
        return math.inf
    if rtt_ms <= 0.0:
        return math.inf
    return mss_bytes * 8.0 / (rtt_ms / 1000.0) * MATHIS_C / math.sqrt(loss) / 1e9


def window_gbps(rtt_ms: float, window_bytes: int = TCP_WINDOW_BYTES) -> float:
    """Window bound of one TCP flow, Gbit/s: ``window·8 / RTT``; inf at zero RTT."""
    if rtt_ms <= 0.0:
        return math.inf
    return window_bytes * 8.0 / (rtt_ms / 1000.0) / 1e9


def single_tcp_gbps(
    rtt_ms: float, loss: float, mss_bytes: int = MSS_BYTES, window_bytes: int = TCP_WINDOW_BYTES
) -> float:
    """One TCP connection: the lower of the loss (Mathis) and window bounds, Gbit/s."""
    return min(mathis_gbps(rtt_ms, loss, mss_bytes), window_gbps(rtt_ms, window_bytes))


def effective_gbps(
    bandwidth_gbps: float,
    rtt_ms: float,
    loss: float,
    n_conn: int,
    mss_bytes: int = MSS_BYTES,
    window_bytes: int = TCP_WINDOW_BYTES,
) -> float:
    """``B_eff = min(B_link, n_conn × single_tcp(RTT, loss))``, Gbit/s."""
    if n_conn < 1:
        raise ValueError(f"n_conn must be >= 1, got {n_conn}")
    return min(bandwidth_gbps, n_conn * single_tcp_gbps(rtt_ms, loss, mss_bytes, window_bytes))


@dataclass(frozen=True, kw_only=True)
class PublicLink:
    """A published WAN measurement (``planner/data/wan_links.csv``); NaN where the source gives none."""

    name: str
    a: str
    b: str
    rtt_ms: float
    gbps_low: float
    gbps_high: float
    source: str


@functools.cache
def public_links() -> dict[str, PublicLink]:
    """Published DC-pair figures by preset name (e.g. ``"aws-virginia-ohio"``)."""
    text = resources.files("cmdare.planner").joinpath("data/wan_links.csv").read_text("utf-8")
    out: dict[str, PublicLink] = {}
    for row in csv.DictReader(io.StringIO(text)):
        out[row["name"]] = PublicLink(
            name=row["name"],
            a=row["a"],
            b=row["b"],
            rtt_ms=float(row["rtt_ms"] or "nan"),
            gbps_low=float(row["gbps_low"]),
            gbps_high=float(row["gbps_high"]),
            source=row["source"],
        )
    return out
