"""The ``plan --geo`` workload file: a typed TOML schema that rejects unknown keys.

Schema (units in the key names or noted)::

    [model]     layers, hidden, seq_len, micro_batch, params, precision_bytes (2), mfu (0.302),
                n_microbatches (8) | global_batch (sequences per iteration), activation_bytes
    [parallel]  tp (GPUs per server), pp, dp, placement (DC name per stage), schedule ("1f1b"|"gpipe"),
                sharing ("temporal"|"spatial"), stage_compute_s (fwd+bwd seconds per micro-batch per stage)
    [[dc]]      name, gpu (catalog name), gpus, usd_per_gpu_hour (0), region (""), intra_gbps
    [[link]]    a, b, preset (planner/data/wan_links.csv), bandwidth_gbps, rtt_ms, loss (0), n_conn (1),
                egress_usd_per_gb (0.01 same region, else 0.02)
    [prefill]   params, layers, hidden, prompt_tokens, efficiency (model mfu), precision_bytes (2),
                memory_limit_gb
    [search]    top (5), max_pp (32), max_orders (720)

Errors are :class:`GeoWorkloadError` naming the file, the line when found, and the key.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmdare.collectors.toml_lines import line_of
from cmdare.collectors.untrusted import MESSAGE_LIMIT, clean_text, clean_tree
from cmdare.planner.geo.bubbles import PrefillSpec
from cmdare.planner.geo.geo_model import DEFAULT_MFU, DataCenter, GeoJob, LanguageModel, Layout
from cmdare.planner.geo.wan import (
    EGRESS_USD_PER_GB_INTER_REGION,
    EGRESS_USD_PER_GB_INTER_ZONE,
    WanLink,
    public_links,
)
from cmdare.planner.speed.gpu_catalog import UnknownGpuError, get_gpu

__all__ = ["GeoWorkloadError", "GeoWorkload", "load_geo_workload", "parse_geo_workload"]

_KEYS: dict[str, set[str]] = {
    "model": {"layers", "hidden", "seq_len", "micro_batch", "params", "precision_bytes", "mfu",
              "n_microbatches", "global_batch", "activation_bytes"},
    "parallel": {"tp", "pp", "dp", "placement", "schedule", "sharing", "stage_compute_s"},
    "dc": {"name", "gpu", "gpus", "usd_per_gpu_hour", "region", "intra_gbps"},
    "link": {"a", "b", "preset", "bandwidth_gbps", "rtt_ms", "loss", "n_conn", "egress_usd_per_gb"},
    "prefill": {"params", "layers", "hidden", "prompt_tokens", "efficiency", "precision_bytes", "memory_limit_gb"},
    "search": {"top", "max_pp", "max_orders"},
}  # fmt: skip


MAX_NUMBER = 1e15  # any number in a geo file (larger ones only overflow the model)


class GeoWorkloadError(ValueError):
    """A geo workload file is malformed; the message names file, line (when known) and key."""


@dataclass(frozen=True, kw_only=True)
class GeoWorkload:
    """A parsed file: the job (its layout is the user's, or a placeholder when ``fixed_layout`` is
    False and the search picks it), the global batch and the search limits."""

    job: GeoJob
    fixed_layout: bool
    global_batch: int | None
    top: int
    max_pp: int
    max_orders: int
    source: str


class _Loc:
    """Finds the line of ``[table]`` (the ``index``-th for arrays) / ``key =`` for error messages."""

    def __init__(self, text: str, source: str) -> None:
        self.lines, self.source = text.splitlines(), source

    def line(self, table: str, index: int | None, key: str | None) -> int | None:
        return line_of(self.lines, table, key, index)

    def error(
        self, message: str, table: str, index: int | None = None, key: str | None = None
    ) -> GeoWorkloadError:
        where = f"[{table}]" if index is None else f"[[{table}]] #{index + 1}"
        name = f"{where} {key}" if key else where
        line = self.line(table, index, key)
        at = f"{self.source}:{line}" if line else self.source
        return GeoWorkloadError(f"{at}: {name}: {message}")


class _Table:
    """One table's values with typed getters that raise located errors."""

    def __init__(self, values: Any, table: str, loc: _Loc, index: int | None = None) -> None:
        if not isinstance(values, dict):
            raise loc.error("must be a table", table, index)
        self.v, self.table, self.loc, self.index = values, table, loc, index
        unknown = sorted(set(values) - _KEYS[table])
        if unknown:
            raise self.err(f"unknown key (allowed: {', '.join(sorted(_KEYS[table]))})", unknown[0])

    def err(self, message: str, key: str | None = None) -> GeoWorkloadError:
        return self.loc.error(message, self.table, self.index, key)

    def num(
        self, key: str, default: float | None = None, *, integer: bool = False, positive: bool = True
    ) -> Any:
        if key not in self.v:
            if default is None:
                raise self.err("missing required key", key)
            return default
        val = self.v[key]
        ok = isinstance(val, int) if integer else isinstance(val, int | float)
        if isinstance(val, bool) or not ok or not math.isfinite(val):
            raise self.err(f"must be {'an integer' if integer else 'a number'}, got {val!r}", key)
        if (positive and val <= 0) or val < 0:
            raise self.err(f"must be {'> 0' if positive else '>= 0'}, got {val!r}", key)
        if val > MAX_NUMBER:
            raise self.err(f"implausibly large (at most {MAX_NUMBER:g}), got {val!r}", key)
        return int(val) if integer else float(val)

    def opt(self, key: str, **kw: Any) -> Any:
        return self.num(key, **kw) if key in self.v else None

    def text(self, key: str, default: str | None = None, choices: tuple[str, ...] = ()) -> str:
        if key not in self.v:
            if default is None:
                raise self.err("missing required key", key)
            return default
        val = self.v[key]
        if not isinstance(val, str) or not val:
            raise self.err(f"must be a non-empty string, got {val!r}", key)
        if choices and val.lower() not in choices:
            raise self.err(f"must be one of {', '.join(choices)}, got {val!r}", key)
        return val.lower() if choices else clean_text(val)  # names are shown on a terminal


def load_geo_workload(path: str | Path) -> GeoWorkload:
    """Read and parse a geo workload TOML file (errors name the file)."""
    p = Path(path)
    from cmdare.collectors.textfile import TextFileError, read_small_text

    try:
        text = read_small_text(p)
    except TextFileError as exc:
        raise GeoWorkloadError(f"cannot read: {exc}") from exc
    return parse_geo_workload(text, str(p))


def parse_geo_workload(text: str, source: str = "<string>") -> GeoWorkload:
    """Parse TOML text into a :class:`GeoWorkload`."""
    source = clean_text(source, MESSAGE_LIMIT)
    loc = _Loc(text, source)
    try:
        data = clean_tree(tomllib.loads(text))  # every name shown on a terminal, cleaned where it enters
    except tomllib.TOMLDecodeError as exc:
        raise GeoWorkloadError(f"{source}: invalid TOML: {exc}") from exc
    except RecursionError:
        raise GeoWorkloadError(f"{source}: invalid TOML: nested too deeply") from None
    for key in sorted(set(data) - set(_KEYS)):
        raise GeoWorkloadError(f"{source}: unknown table [{key}] (allowed: {', '.join(sorted(_KEYS))})")
    for key in ("model", "parallel", "dc"):
        if key not in data:
            raise GeoWorkloadError(f"{source}: missing table [{key}]")
    model, mfu, m, gbatch, act = _model(_Table(data["model"], "model", loc))
    dcs = _dcs(data["dc"], loc)
    links = _links(data.get("link", []), dcs, loc)
    par = _Table(data["parallel"], "parallel", loc)
    layout, fixed, compute = _layout(par, model, dcs, m)
    prefill = _prefill(_Table(data["prefill"], "prefill", loc), mfu) if "prefill" in data else None
    srch = _Table(data.get("search", {}), "search", loc)
    job = GeoJob(
        model=model,
        dcs=dcs,
        links=links,
        layout=layout,
        mfu=mfu,
        stage_compute_s=compute,
        activation_bytes=act,
        prefill=prefill,
    )
    _check_links(job, par)
    return GeoWorkload(
        job=job,
        fixed_layout=fixed,
        global_batch=gbatch,
        top=srch.num("top", 5, integer=True),
        max_pp=srch.num("max_pp", 32, integer=True),
        max_orders=srch.num("max_orders", 720, integer=True),
        source=source,
    )


def _model(t: _Table) -> tuple[LanguageModel, float, int, int | None, float | None]:
    pb = t.num("precision_bytes", 2, integer=True)
    if pb not in (1, 2, 4):
        raise t.err(f"must be 1, 2 or 4, got {pb}", "precision_bytes")
    mfu = t.num("mfu", DEFAULT_MFU)
    if mfu > 1:
        raise t.err(f"must be a fraction in (0, 1], got {mfu}", "mfu")
    model = LanguageModel(
        layers=t.num("layers", integer=True),
        hidden=t.num("hidden", integer=True),
        seq_len=t.num("seq_len", integer=True),
        micro_batch=t.num("micro_batch", 1, integer=True),
        params=t.num("params"),
        precision_bytes=pb,
    )
    gbatch = t.opt("global_batch", integer=True)
    m = t.num("n_microbatches", 8, integer=True)
    return model, mfu, m, gbatch, t.opt("activation_bytes")


def _dcs(raw: Any, loc: _Loc) -> tuple[DataCenter, ...]:
    if not isinstance(raw, list) or not raw:
        raise loc.error("must be an array of tables [[dc]]", "dc")
    out: list[DataCenter] = []
    for i, values in enumerate(raw):
        t = _Table(values, "dc", loc, i)
        name, gpu = t.text("name"), t.text("gpu")
        if name in {d.name for d in out}:
            raise t.err(f"duplicate DC name {name!r}", "name")
        try:
            get_gpu(gpu)
        except UnknownGpuError as exc:
            raise t.err(str(exc), "gpu") from exc
        out.append(
            DataCenter(
                name=name,
                gpu=gpu,
                gpus=t.num("gpus", integer=True),
                usd_per_gpu_hour=t.num("usd_per_gpu_hour", 0.0, positive=False),
                region=t.text("region", "") if "region" in t.v else "",
                intra_gbps=t.opt("intra_gbps"),
            )
        )
    return tuple(out)


def _links(raw: Any, dcs: tuple[DataCenter, ...], loc: _Loc) -> tuple[WanLink, ...]:
    if not isinstance(raw, list):
        raise loc.error("must be an array of tables [[link]]", "link")
    regions = {d.name: d.region for d in dcs}
    out = []
    for i, values in enumerate(raw):
        t = _Table(values, "link", loc, i)
        a, b = t.text("a"), t.text("b")
        for key, name in (("a", a), ("b", b)):
            if name not in regions:
                raise t.err(f"unknown DC {name!r} (known: {', '.join(regions)})", key)
        bw, rtt = t.opt("bandwidth_gbps"), t.opt("rtt_ms", positive=False)
        if "preset" in t.v:
            preset = public_links().get(t.text("preset"))
            if preset is None:
                raise t.err(f"unknown preset (known: {', '.join(public_links())})", "preset")
            bw = bw if bw is not None else preset.gbps_low
            rtt = rtt if rtt is not None else (None if math.isnan(preset.rtt_ms) else preset.rtt_ms)
        if bw is None:
            raise t.err("missing required key", "bandwidth_gbps")
        if rtt is None:
            raise t.err("missing required key (the preset gives no RTT)", "rtt_ms")
        same = regions[a] and regions[a] == regions[b]
        egress = EGRESS_USD_PER_GB_INTER_ZONE if same else EGRESS_USD_PER_GB_INTER_REGION
        loss = t.num("loss", 0.0, positive=False)
        if loss >= 1:
            raise t.err(f"must be a probability < 1, got {loss}", "loss")
        out.append(
            WanLink(
                a=a,
                b=b,
                bandwidth_gbps=bw,
                rtt_ms=rtt,
                loss=loss,
                n_conn=t.num("n_conn", 1, integer=True),
                egress_usd_per_gb=t.num("egress_usd_per_gb", egress, positive=False),
            )
        )
    return tuple(out)


def _layout(
    t: _Table, model: LanguageModel, dcs: tuple[DataCenter, ...], m: int
) -> tuple[Layout, bool, tuple[float, ...] | None]:
    tp = t.num("tp", integer=True)
    schedule = t.text("schedule", "1f1b", ("1f1b", "gpipe"))
    sharing = t.text("sharing", "temporal", ("temporal", "spatial"))
    pp, dp = t.opt("pp", integer=True), t.opt("dp", integer=True)
    placement = t.v.get("placement")
    fixed = pp is not None or placement is not None
    if placement is not None:
        names = {d.name for d in dcs}
        if not isinstance(placement, list) or not all(isinstance(x, str) for x in placement):
            raise t.err("must be a list of DC names, one per stage", "placement")
        placement = [clean_text(x) for x in placement]  # as the DC names themselves
        bad = [x for x in placement if x not in names]
        if bad:
            raise t.err(f"unknown DC {bad[0]!r} (known: {', '.join(sorted(names))})", "placement")
        if pp is not None and pp != len(placement):
            raise t.err(f"names {len(placement)} stages but pp = {pp}", "placement")
        pp = len(placement)
    pp, dp = pp or 1, dp or 1
    if pp > model.layers:
        raise t.err(f"pp = {pp} exceeds the model's {model.layers} layers", "pp")
    if placement is None:
        placement = _largest_first(dcs, pp, dp * tp) if fixed else [dcs[0].name]
        if placement is None:
            raise t.err(f"the DCs cannot hold {pp} stages of dp×tp = {dp * tp} GPUs", "pp")
    compute = None
    if "stage_compute_s" in t.v:
        raw = t.v["stage_compute_s"]
        if (
            not isinstance(raw, list)
            or len(raw) != pp
            or not all(isinstance(x, int | float) and x > 0 for x in raw)
        ):
            raise t.err(f"must be {pp} positive numbers (one per stage)", "stage_compute_s")
        compute = tuple(float(x) for x in raw)
    return (
        Layout(
            pp=pp,
            dp=dp,
            tp=tp,
            placement=tuple(placement),
            n_microbatches=m,
            schedule=schedule,
            sharing=sharing,
        ),
        fixed,
        compute,
    )


def _largest_first(dcs: tuple[DataCenter, ...], pp: int, stage_gpus: int) -> list[str] | None:
    out: list[str] = []
    for dc in sorted(dcs, key=lambda d: -d.gpus):
        out += [dc.name] * min(dc.gpus // stage_gpus, pp - len(out))
    return out if len(out) == pp else None


def _prefill(t: _Table, mfu: float) -> PrefillSpec:
    eff = t.num("efficiency", mfu)
    if eff > 1:
        raise t.err(f"must be a fraction in (0, 1], got {eff}", "efficiency")
    return PrefillSpec(
        params=t.num("params"),
        layers=t.num("layers", integer=True),
        hidden=t.num("hidden", integer=True),
        prompt_tokens=t.num("prompt_tokens", integer=True),
        efficiency=eff,
        precision_bytes=t.num("precision_bytes", 2, integer=True),
        memory_limit_gb=t.opt("memory_limit_gb"),
    )


def _check_links(job: GeoJob, par: _Table) -> None:
    """Every DC pair the fixed placement crosses needs a [[link]]."""
    lay = job.layout
    dcs = {d.name: d for d in job.dcs}
    for k in range(lay.pp - 1):
        a, b = lay.placement[k], lay.placement[k + 1]
        if a != b and not any(link.key == frozenset((a, b)) for link in job.links):
            raise par.err(f"stages {k}→{k + 1} cross {a!r}→{b!r} but no [[link]] joins them", "placement")
    for name in set(lay.placement):
        if dcs[name].gpus < lay.dp * lay.tp * lay.placement.count(name):
            raise par.err(f"DC {name!r} has {dcs[name].gpus} GPUs, fewer than its stages need", "placement")
