"""Fit the planner's speed model on the CM-DARE measurements and write the shipped parameters.

Reads ``<shared>/data/cmdare`` (default: this repository's vendored ``data/cmdare``), writes
``planner/data/speed_model.json`` (fitted parameters + provenance) and ``planner/data/networks.csv``
(per-network facts and measured single-worker speeds). Deterministic: same inputs, same bytes.

    python scripts/fit_speed_model.py [--shared DIR] [--check]

``--check`` compares with the shipped files instead of writing (exit 1 on a difference). Numbers are compared
with a relative tolerance of ``REPRO_RTOL`` (1e-4): another numpy/scipy may differ in the last bits of a fit,
and the shipped parameters are rounded to 6 significant digits, so such a difference can move the 6th digit
(up to 1e-5 relative); a real change of the data or the model moves parameters by far more.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from cmdare.planner.speed.network_catalog import (
    NETWORK_FIELDS,
    canonical_network_name,
    family_of,
    spellings_of,
)
from cmdare.planner.speed.speed_model import Observation, SpeedModel

REPO = Path(__file__).resolve().parents[1]
SPEED = "data/cmdare/data/processed_data"
SINGLE_TABLES = {"K80": "speed_data/0latency_k80_new.csv", "P100": "speed_data/0latency_p100_new2.csv"}
SUPERTABLE = "speed_data/speed_data_supertable.csv"
BASE_DIR = "speed_data_base"
CLUSTER = "data/cmdare/derived/cluster_speed_vs_workers.csv"
LATENCY = "data/cmdare/derived/step_time_ms_latency_0_vs_30.csv"
# ICAC'19 ResNet-32 / CIFAR-10 on K80 workers, 1 vs 2 PS, 2-8 workers (64k steps; 1 run at 1 PS, 5 at 2 PS)
PS_RUNS = "data/cmdare/icac2019_transient-deep-learning/data/training/experiment_1ps_vs_2ps"
BASE_GPU = {"k80": "K80", "p100": "P100", "v100": "V100"}
BATCH = 128  # CM-DARE: batch 128 per worker (background.md)
REPRO_RTOL = 1e-4  # reproducibility tolerance of --check (relative; absolute floor REPRO_ATOL)
REPRO_ATOL = 1e-15


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def load_networks(shared: Path) -> dict[str, dict[str, float]]:
    """Per-network facts (FLOPs, params, tensors) from the 0latency tables, keyed by canonical name."""
    nets: dict[str, dict[str, float]] = {}
    for table in SINGLE_TABLES.values():
        for r in _rows(shared / SPEED / table):
            name = canonical_network_name(r["Model (temp)"])
            facts = nets.setdefault(
                name,
                {
                    "model_flops": float(r["Model FLOPs"]),
                    "params": float(r["Number of Parameters"]),
                    "tensors": float(r["Number of Tensors"]),
                    "max_tensor": 0.0,
                },
            )
            if r["Max Tensor Size (MB)"].strip():  # blank in some rows; float32 parameters of 4 B
                facts["max_tensor"] = float(r["Max Tensor Size (MB)"]) * 2**20 / 4
    return dict(sorted(nets.items()))


def _single_worker(shared: Path, nets: dict[str, dict[str, float]]) -> list[Observation]:
    """Mean single-worker speed per (GPU, network) at 0.3 ms, from the 0latency tables (13 samples each)."""
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for gpu, table in SINGLE_TABLES.items():
        for r in _rows(shared / SPEED / table):
            groups[(gpu, canonical_network_name(r["Model (temp)"]))].append(float(r["Speed (steps/sec)"]))
    return [
        _obs(nets, name, gpu, 1, 1, 0.3, float(np.mean(v)), "0latency")
        for (gpu, name), v in sorted(groups.items())
    ]


def _latency(shared: Path, nets: dict[str, dict[str, float]]) -> list[Observation]:
    """Mean single-worker speed with +30 ms injected latency (30.3 ms) from the supertable."""
    by_params = {int(v["params"]): k for k, v in nets.items()}
    tflops_gpu = {"4.113": "K80", "9.526": "P100"}
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in _rows(shared / SPEED / SUPERTABLE):
        if float(r["Latency (ms)"]) > 1.0:
            key = (tflops_gpu[r["GPU TFLOPS"]], by_params[int(r["Number of Parameters"])])
            groups[key].append(float(r["Speed (steps/sec)"]))
    return [
        _obs(nets, name, gpu, 1, 1, 30.3, float(np.mean(v)), "supertable+30ms")
        for (gpu, name), v in sorted(groups.items())
    ]


def _base(shared: Path, nets: dict[str, dict[str, float]]) -> list[Observation]:
    """speed_data_base single-worker series (first 100-step sample is warm-up and dropped)."""
    out = []
    for d in sorted((shared / SPEED / BASE_DIR).iterdir()):
        gpu = next(g for k, g in BASE_GPU.items() if d.name.endswith(k))
        if gpu not in SINGLE_TABLES:
            continue
        vals = [float(r["Value"]) for r in _rows(d / "data.csv") if r["Step"]][1:]
        name = canonical_network_name(d.name[: -len(next(k for k in BASE_GPU if d.name.endswith(k)))])
        out.append(_obs(nets, name, gpu, 1, 1, 0.3, float(np.mean(vals)), "speed_data_base"))
    return out


def _cluster(shared: Path, nets: dict[str, dict[str, float]]) -> list[Observation]:
    """Mean cluster speed vs workers (derived/cluster_speed_vs_workers.csv)."""
    return [
        _obs(
            nets,
            canonical_network_name(r["model"]),
            r["gpu"],
            int(r["num_workers"]),
            int(r["num_ps"]),
            0.3,
            float(r["speed_steps_per_sec_mean"]),
            "cluster",
        )
        for r in _rows(shared / CLUSTER)
    ]


def _run_speed(rows: list[dict[str, str]]) -> float:
    """Global steps/s of one run from its (wall time, step) samples, the first 4k-step segment (start-up,
    first evaluation) left out."""
    w = [float(r["Wall Time"]) for r in rows]
    s = [float(r["Step"]) for r in rows]
    return (s[-1] - s[1]) / (w[-1] - w[1])


def ps_runs(shared: Path, nets: dict[str, dict[str, float]]) -> list[Observation]:
    """K80 ResNet-32 cluster speeds with 1 and 2 PS (experiment_1ps_vs_2ps): mean over runs per shape."""
    root, out = shared / PS_RUNS, []
    for n in range(2, 9):
        one = _rows(root / "1ps_k80" / f"{n}_data.csv")
        two: dict[str, list[dict[str, str]]] = defaultdict(list)
        for r in _rows(root / f"2ps{n}k" / "train_data.csv"):
            two[r["Run"]].append(r)
        for ps, speeds in ((1, [_run_speed(one)]), (2, [_run_speed(v) for _, v in sorted(two.items())])):
            out.append(_obs(nets, "resnet32", "K80", n, ps, 0.3, float(np.mean(speeds)), "cluster-icac2019"))
    return out


def _obs(nets, name, gpu, workers, ps, lat, speed, src) -> Observation:
    n = nets[name]
    return Observation(
        name=name,
        model_flops=n["model_flops"],
        params=n["params"],
        tensors=n["tensors"],
        gpu=gpu,
        workers=workers,
        ps=ps,
        latency_ms=lat,
        steps_per_sec=speed,
        source=src,
        max_tensor=n["max_tensor"],
    )


def load_observations(shared: Path) -> list[Observation]:
    """Every speed observation the model is fitted on."""
    nets = load_networks(shared)
    return (
        _single_worker(shared, nets)
        + _base(shared, nets)
        + _latency(shared, nets)
        + _cluster(shared, nets)
        + ps_runs(shared, nets)
    )


def latency_pairs(shared: Path) -> list[tuple[str, str, float, float]]:
    """(gpu, network, step ms at +0, step ms at +30) means from derived/step_time_ms_latency_0_vs_30.csv."""
    groups: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    for r in _rows(shared / LATENCY):
        groups[(r["gpu"], canonical_network_name(r["model"]), int(r["added_latency_ms"]))].append(
            float(r["step_time_ms"])
        )
    keys = sorted({(g, m) for g, m, _ in groups})
    return [(g, m, float(np.mean(groups[(g, m, 0)])), float(np.mean(groups[(g, m, 30)]))) for g, m in keys]


def networks_csv(shared: Path) -> str:
    """networks.csv text: facts + mean/std single-worker speed per measured GPU (0latency tables)."""
    nets = load_networks(shared)
    speeds: dict[tuple[str, str], list[float]] = defaultdict(list)
    for gpu, table in SINGLE_TABLES.items():
        for r in _rows(shared / SPEED / table):
            speeds[(canonical_network_name(r["Model (temp)"]), gpu)].append(float(r["Speed (steps/sec)"]))
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=NETWORK_FIELDS, lineterminator="\n")
    writer.writeheader()
    for name, facts in nets.items():
        row = {
            "name": name,
            "aliases": "|".join(sorted(spellings_of(name))),
            "family": family_of(name) or "",
            "model_flops": int(facts["model_flops"]),
            "params": int(facts["params"]),
            "tensors": int(facts["tensors"]),
            "batch_size": BATCH,
            "source": "CM-DARE speed_data/" + "+".join(Path(t).name for t in SINGLE_TABLES.values()),
        }
        for gpu in SINGLE_TABLES:
            vals = speeds.get((name, gpu), [])
            row[f"steps_per_sec_{gpu}"] = f"{np.mean(vals):.4f}" if vals else ""
            row[f"std_{gpu}"] = f"{np.std(vals, ddof=1):.4f}" if len(vals) > 1 else ""
        writer.writerow(row)
    return out.getvalue()


def _git_commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True)
        return out.stdout.strip() or "uncommitted"
    except OSError:
        return "unknown"


def fitted_model_json(shared: Path) -> str:
    """speed_model.json text: fitted params, tensor rules and provenance."""
    obs = load_observations(shared)
    model = SpeedModel().fit(obs)
    model.provenance_ = {
        "script": "scripts/fit_speed_model.py",
        "repo_commit": _git_commit(),
        "data": "cake-lab/CM-DARE @ 263b7f14951c0645cacdfeadbef8546d4a742632 (data/cmdare/SOURCE.md)",
        "files": sorted(
            {
                *(f"{SPEED}/{t}" for t in SINGLE_TABLES.values()),
                f"{SPEED}/{SUPERTABLE}",
                f"{SPEED}/{BASE_DIR}/*",
                CLUSTER,
                f"{PS_RUNS}/{{1ps_k80,2ps*k}}/*_data.csv",
            }
        ),
        "observations": len(obs),
        "units": "seconds per step; peak in TFLOPS, mem_bw in GB/s, latency in ms",
        "intervals": "P10/P90 of log(measured/predicted), out of sample (planner/speed/speed_cv.py)",
    }
    model.intervals_ = intervals(obs)
    model.domain_ = domain(obs)
    return json.dumps(model.to_dict(), indent=2, sort_keys=True) + "\n"


def intervals(obs: list[Observation]) -> dict[str, dict[str, float]]:
    """Out-of-sample log-residual P10/P90 per extrapolation category (speed_cv.SCHEMES)."""
    from cmdare.planner.speed.speed_cv import interval_table

    return interval_table(obs)


def domain(obs: list[Observation]) -> dict[str, object]:
    """What was measured: GPUs, the most workers, and the most PS per (GPU, network) (default 1)."""
    max_ps: dict[str, int] = {}
    for o in obs:
        if o.ps > 1:
            key = f"{o.gpu}/{o.name}"
            max_ps[key] = max(max_ps.get(key, 1), o.ps)
    return {
        "gpus": sorted({o.gpu for o in obs}),
        "max_workers": max(o.workers for o in obs),
        "max_ps": dict(sorted(max_ps.items())),
        "default_max_ps": 1,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--shared", type=Path, default=REPO, help="directory holding data/cmdare (default: the vendored copy)"
    )
    parser.add_argument("--check", action="store_true", help="compare with the shipped files, write nothing")
    args = parser.parse_args(argv)
    data = REPO / "planner" / "data"
    outputs = {data / "networks.csv": networks_csv(args.shared)}
    # networks.csv first: the model JSON does not depend on it, but the catalog import reads it.
    outputs[data / "speed_model.json"] = fitted_model_json(args.shared)
    if args.check:
        bad = [p for p, text in outputs.items() if not _same(p, text)]
        for p in bad:
            print(f"differs: {p}", file=sys.stderr)
        return 1 if bad else 0
    from cmdare.collectors.writes import write_text

    for path, text in outputs.items():
        write_text(path, text)
        print(f"wrote {path}")
    return 0


def close(a: object, b: object, rtol: float = REPRO_RTOL, atol: float = REPRO_ATOL) -> bool:
    """Structural equality with numbers (and numeric strings) compared within ``rtol``/``atol``."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k], rtol, atol) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y, rtol, atol) for x, y in zip(a, b, strict=True))
    fa, fb = _number(a), _number(b)
    if fa is not None and fb is not None:
        return abs(fa - fb) <= atol + rtol * max(abs(fa), abs(fb))
    return a == b


def _number(v: object) -> float | None:
    """``v`` as a float when it is a number or a numeric string, else None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int | float):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return None
    return None


def csv_cells(text: str) -> list[list[str]]:
    """A CSV text as rows of cells (for a tolerant comparison)."""
    return list(csv.reader(io.StringIO(text)))


def _same(path: Path, text: str) -> bool:
    """Equal up to provenance (commit/date may differ between runs) and ``REPRO_RTOL`` on numbers."""
    if not path.is_file():
        return False
    if path.suffix != ".json":
        return close(csv_cells(path.read_text()), csv_cells(text))
    old, new = json.loads(path.read_text()), json.loads(text)
    return all(close(old.get(k), new.get(k)) for k in new if k != "provenance")


if __name__ == "__main__":
    sys.exit(main())
