"""The price book: per-unit GCP rates combined with host shapes into $/h of whole nodes.

Rates are keyed ``(kind, name, region, provisioning)``:

* ``("gpu", "V100", "us-central1", "standard")`` — USD per GPU-hour;
* ``("cpu", "n1", region, prov)`` — USD per vCPU-hour of a host series;
* ``("ram", "n1", region, prov)`` — USD per GiB-hour of a host series;
* ``("machine", "a4-highgpu-8g", region, prov)`` — optional flat USD per hour of a whole host
  machine type; when present it replaces vCPU × rate + GiB × rate for that machine.

``provisioning`` of a rate is ``standard`` (usageType OnDemand) or ``spot`` (usageType
Preemptible). GCP bills spot and (legacy) preemptible VMs from the same "Preemptible" SKUs, so a
node asked for as ``preemptible`` is priced exactly like ``spot``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from cmdare.collectors.pricing.shapes import DEFAULT_SHAPES, PS_SHAPE, HostShape
from cmdare.collectors.untrusted import MESSAGE_LIMIT, clean_optional, clean_text

__all__ = ["NodePrice", "PriceBook", "PriceNotFound", "RateKey", "PROVISIONINGS", "canonical_gpu"]

RateKey = tuple[str, str, str, str]
PROVISIONINGS: tuple[str, ...] = ("standard", "spot", "preemptible")
_PROV_ALIASES = {
    "standard": "standard",
    "on-demand": "standard",
    "ondemand": "standard",
    "spot": "spot",
    "preemptible": "preemptible",
}
_GPU_ALIASES = {"A100-40GB": "A100", "A10080GB": "A100-80GB", "A100_80GB": "A100-80GB"}


class PriceNotFound(KeyError):
    """No price for the requested node; ``str()`` is the human-readable reason."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "price not found"


@dataclass(frozen=True, kw_only=True)
class NodePrice:
    """Hourly list price (USD/h) of one node: ``count`` GPUs plus their host VM."""

    gpu: str
    count: int
    region: str
    provisioning: str
    usd_per_hour: float
    gpu_usd_per_hour: float
    host_usd_per_hour: float
    source: str  # "live" | "cache" | "offline"
    as_of: str  # ISO date/time of the prices

    def as_dict(self) -> dict[str, object]:
        """JSON-ready row with the public field names."""
        return {
            "gpu": self.gpu,
            "count": self.count,
            "region": self.region,
            "provisioning": self.provisioning,
            "usd_per_hour": round(self.usd_per_hour, 6),
            "gpu_usd_per_hour": round(self.gpu_usd_per_hour, 6),
            "host_usd_per_hour": round(self.host_usd_per_hour, 6),
            "source": self.source,
            "as_of": self.as_of,
        }


def _safe(text: object) -> bool:
    return type(text) is str and clean_text(text) is text


def canonical_gpu(name: str) -> str:
    """Normalise a GPU name: ``v100`` → ``V100``, ``nvidia-tesla-v100`` → ``V100``."""
    key = name.strip().upper().replace("NVIDIA-TESLA-", "").replace("NVIDIA-", "").replace(" ", "-")
    return _GPU_ALIASES.get(key, key)


def _where(region: str) -> str:
    """A region in a message; one not given is said so (never a blank)."""
    return region or "no region (none given)"


def _canonical_prov(provisioning: str) -> str:
    prov = _PROV_ALIASES.get(provisioning.strip().lower())
    if prov is None:
        raise PriceNotFound(f"unknown provisioning {provisioning!r}; use one of {', '.join(PROVISIONINGS)}")
    return prov


@dataclass
class PriceBook:
    """Node prices from per-unit ``rates`` (see module docstring) and host ``shapes``."""

    rates: Mapping[RateKey, float]
    source: str
    as_of: str
    reason: str | None = None
    shapes: Mapping[str, Mapping[int, HostShape]] = field(default_factory=lambda: DEFAULT_SHAPES)
    ps_shape: HostShape = PS_SHAPE
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """Region and SKU names, dates and reasons come from the Catalog API or a cache file:
        text from outside, cleaned once here (see :mod:`cmdare.collectors.untrusted`)."""
        if any(not all(map(_safe, key)) for key in self.rates):
            self.rates = {
                (clean_text(g), clean_text(r), clean_text(p), clean_text(u)): v
                for (g, r, p, u), v in self.rates.items()
            }
        self.source, self.as_of = clean_text(self.source), clean_text(self.as_of)
        self.reason = clean_optional(self.reason, MESSAGE_LIMIT)
        self.notes = tuple(clean_text(n, MESSAGE_LIMIT) for n in self.notes)

    def node_price(self, gpu: str, count: int, region: str, provisioning: str) -> NodePrice:
        """$/h of a node with ``count`` × ``gpu`` in ``region``; raises :class:`PriceNotFound`."""
        name = canonical_gpu(gpu)
        prov = _canonical_prov(provisioning)
        by_count = self.shapes.get(name)
        if by_count is None:
            raise PriceNotFound(f"unknown GPU {gpu!r}; this book knows {', '.join(self.gpus()) or 'no GPUs'}")
        shape = by_count.get(int(count))
        if shape is None:
            counts = ", ".join(str(c) for c in sorted(by_count))
            raise PriceNotFound(f"GCP offers {name} nodes with {counts} GPUs, not {count}")
        rate_prov = "standard" if prov == "standard" else "spot"
        gpu_rate = self.rates.get(("gpu", name, region, rate_prov))
        if gpu_rate is None:
            where = self._gpu_regions(name)
            if not where:
                raise PriceNotFound(
                    f"{name} has no prices in the {self.source} book (try load_study_era_book())"
                )
            raise PriceNotFound(
                f"no {rate_prov} price for {name} in {_where(region)}; the {self.source} book has {', '.join(where)}"
            )
        host = self._host_price(shape, region, rate_prov)
        gpu_cost = gpu_rate * count
        return NodePrice(
            gpu=name,
            count=int(count),
            region=region,
            provisioning=prov,
            usd_per_hour=gpu_cost + host,
            gpu_usd_per_hour=gpu_cost,
            host_usd_per_hour=host,
            source=self.source,
            as_of=self.as_of,
        )

    def ps_node_price(self, region: str, provisioning: str = "standard") -> NodePrice:
        """$/h of the CPU-only parameter-server node (``ps_shape``, n1-standard-8 by default)."""
        prov = _canonical_prov(provisioning)
        host = self._host_price(self.ps_shape, region, "standard" if prov == "standard" else "spot")
        return NodePrice(
            gpu="CPU",
            count=0,
            region=region,
            provisioning=prov,
            usd_per_hour=host,
            gpu_usd_per_hour=0.0,
            host_usd_per_hour=host,
            source=self.source,
            as_of=self.as_of,
        )

    def rows(self) -> list[NodePrice]:
        """Every priced node: each GPU shape × region × provisioning (standard, spot, preemptible)."""
        out: list[NodePrice] = []
        for name in self.gpus():
            for count in sorted(self.shapes[name]):
                for region in self._gpu_regions(name):
                    for prov in PROVISIONINGS:
                        try:
                            out.append(self.node_price(name, count, region, prov))
                        except PriceNotFound:
                            continue
        return out

    def regions(self) -> list[str]:
        """Regions with at least one GPU price."""
        return sorted({k[2] for k in self.rates if k[0] == "gpu"})

    def gpus(self) -> list[str]:
        """GPU types with a price and a known host shape."""
        return sorted({k[1] for k in self.rates if k[0] == "gpu" and k[1] in self.shapes})

    def _gpu_regions(self, name: str) -> list[str]:
        return sorted({k[2] for k in self.rates if k[0] == "gpu" and k[1] == name})

    def _host_price(self, shape: HostShape, region: str, rate_prov: str) -> float:
        flat = self.rates.get(("machine", shape.machine_type, region, rate_prov))
        if flat is not None:
            return flat
        cpu = self.rates.get(("cpu", shape.series, region, rate_prov))
        ram = self.rates.get(("ram", shape.series, region, rate_prov))
        if cpu is None or ram is None:
            raise PriceNotFound(
                f"no {rate_prov} vCPU/RAM price for host series {shape.series} "
                f"({shape.machine_type}) in {_where(region)} in the {self.source} book"
            )
        return shape.vcpus * cpu + shape.memory_gib * ram
