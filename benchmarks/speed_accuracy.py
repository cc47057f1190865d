"""Accuracy of the speed model on the CM-DARE data, beside the study's baselines computed in this run.

    python benchmarks/speed_accuracy.py [--shared DIR]

Splits (every model is re-fitted without the held-out data):
* leave-one-network-out (LONO): single-worker speed of each network on K80 and P100, fitted on the
  other 15 networks; the held-out network is given by name, FLOPs and parameters only.
  Baselines: per-GPU SVR (poly-2, C=100, eps=0.01) on min-max normalised FLOPs; the GPU-agnostic
  linear model on FLOPs/TFLOPS.
* leave-one-GPU-out (LOGO): fit on K80 only, predict P100 single-worker speeds, and the reverse. The model
  sees the training GPU's single-worker rows (as the baselines do), its +30 ms rows and multi-worker
  cluster rows, but no second single-worker measurement (speed_data_base, 1-worker cluster points).
  Without the +30 ms rows K80->P100 reads 31 %: from one GPU, a per-step constant cannot be told apart
  from latency, and the two scale differently to another GPU.
  Baselines: the GPU-agnostic linear model and an SVR (same settings) on FLOPs/TFLOPS.
* cluster curves, 1-8 workers, leave-one-curve-out (the curve's own points removed from the fit).
  Baseline: N x single-worker speed.
* the study's own protocol: a random 80/20 split (``random_state=0``) of the rows of
  ``0latency_k80_new.csv`` / ``0latency_p100_new2.csv`` (per-GPU baselines) and of
  ``0latency_norm_computation.csv`` (GPU-agnostic baseline), MAPE of step time on the test rows,
  printed beside the figures the study reports (background.md). Nearly every network has rows on
  both sides of such a split, so it measures interpolation; the splits above measure generalisation.
* prediction intervals, nested: for each split of ``planner/speed/speed_cv.py`` (same domain, unseen network,
  unseen GPU, more workers, more PS — the 7 visible 2-PS rows, ICAC'19 K80 ResNet-32), the model *and its
  P10–P90 band* are fitted on the training part only (the band's residual quantiles come from inner splits
  of that training part; where the training part cannot hold an inner split of the same kind — one GPU
  left, no 2-PS rows — the widest inner band is used, as the shipped model does). Printed: MAPE, the share
  of held-out points inside P10–P90 (70–90 % is honest for an 80 % band) and the mean band width; for the
  2-PS rows also the "a second PS adds nothing" baseline. The model's structure (terms, placement
  periods, bounds) was fixed beforehand, partly while looking at earlier runs of the leave-out splits, so
  those splits are not fully independent of the model's design; the withheld measurements are.
Errors are MAPE of steps/s over (network, GPU) means unless said otherwise; ratios are baseline MAPE /
model MAPE.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

from fit_speed_model import SINGLE_TABLES, SPEED, domain, latency_pairs, load_observations  # noqa: E402

from cmdare.collectors.samples import ModelSpec  # noqa: E402
from cmdare.planner.speed.gpu_catalog import get_gpu  # noqa: E402
from cmdare.planner.speed.network_catalog import KnownNetwork, canonical_network_name, family_of  # noqa: E402
from cmdare.planner.speed.speed_model import Observation, SpeedModel  # noqa: E402

GPUS = ("K80", "P100")
BOTH_TABLE = "speed_data/0latency_norm_computation.csv"  # both GPUs, 'Model/GPU' feature
# Test MAPE of step time the study reports for its random 80/20 split (background.md, section 1).
STUDY = {"K80": {"svr": 10.0, "lin": 19.1}, "P100": {"svr": 13.8, "lin": 22.3}, "both": {"lin": 38.2}}


def _singles(obs):
    return {(o.name, o.gpu): o for o in obs if o.source == "0latency"}


def _known(obs, gpus=GPUS) -> dict[str, KnownNetwork]:
    out: dict[str, KnownNetwork] = {}
    for (name, gpu), o in sorted(_singles(obs).items()):
        if gpu not in gpus:
            continue
        k = out.get(name) or KnownNetwork(
            name=name,
            family=family_of(name) or "",
            model_flops=o.model_flops,
            params=o.params,
            tensors=int(o.tensors),
            batch_size=128,
        )
        out[name] = replace(k, measured={**k.measured, gpu: o.steps_per_sec})
    return out


def _mape(pred, meas) -> float:
    pred, meas = np.asarray(pred, float), np.asarray(meas, float)
    return float(np.mean(np.abs(pred / meas - 1)) * 100)


def _svr(x_train, y_train, x_test):
    from sklearn.svm import SVR

    lo, hi = x_train.min(), x_train.max()
    norm = lambda x: (x - lo) / (hi - lo)  # noqa: E731
    svr = SVR(kernel="poly", degree=2, C=100, epsilon=0.01).fit(norm(x_train)[:, None], y_train)
    return svr.predict(norm(x_test)[:, None])


def _linear(x_train, y_train, x_test):
    b, a = np.polyfit(x_train, y_train, 1)
    return a + b * x_test


def _fit(obs, known) -> SpeedModel:
    return SpeedModel(known=known).fit(obs)


def lono(obs) -> None:
    singles = _singles(obs)
    names = sorted({n for n, _ in singles})
    res = {g: {"model": [], "svr": [], "lin": [], "meas": []} for g in GPUS}
    for held in names:
        train = [o for o in obs if o.name != held]
        model = _fit(train, _known(train))
        for g in GPUS:
            o = singles[(held, g)]
            net = ModelSpec(name=held, model_flops=o.model_flops, params=o.params)
            res[g]["model"].append(model.predict(net, {g: 1}).steps_per_sec)
            tr = [singles[(n, g)] for n in names if n != held]
            f = np.array([t.model_flops for t in tr])
            st = np.array([1 / t.steps_per_sec for t in tr])
            res[g]["svr"].append(1 / _svr(f, st, np.array([o.model_flops]))[0])
            both = [singles[(n, gg)] for n in names if n != held for gg in GPUS]
            x = np.array([t.model_flops / get_gpu(t.gpu).fp32_tflops for t in both])
            y = np.array([1 / t.steps_per_sec for t in both])
            res[g]["lin"].append(1 / _linear(x, y, np.array([o.model_flops / get_gpu(g).fp32_tflops]))[0])
            res[g]["meas"].append(o.steps_per_sec)
    print("Leave-one-network-out, single-worker steps/s (MAPE %)")
    for g in GPUS:
        r = res[g]
        m, s, lin = (_mape(r[k], r["meas"]) for k in ("model", "svr", "lin"))
        print(
            f"  {g:5s} model {m:5.1f} | SVR poly-2 {s:5.1f} ({s / m:4.1f}x) | linear FLOPs/TFLOPS {lin:5.1f} ({lin / m:4.1f}x)"
        )
        worst = int(np.argmax(np.abs(np.array(r["model"]) / np.array(r["meas"]) - 1)))
        print(f"        worst: {names[worst]} {100 * (r['model'][worst] / r['meas'][worst] - 1):+.1f}%")


def _single_cluster(o) -> bool:
    """A 1-worker point of a cluster curve: another single-worker measurement of the network."""
    return o.source.startswith("cluster") and o.workers == 1


def logo(obs) -> None:
    singles = _singles(obs)
    names = sorted({n for n, _ in singles})
    print("Leave-one-GPU-out, single-worker steps/s (MAPE %)")
    for train_gpu, test_gpu in (("K80", "P100"), ("P100", "K80")):
        # the single-worker rows the baselines see, plus what they cannot use: +30 ms and multi-worker rows
        # (not speed_data_base: more single-worker measurements of the same networks)
        train = [
            o for o in obs if o.gpu == train_gpu and o.source != "speed_data_base" and not _single_cluster(o)
        ]
        model = _fit(train, _known(train, (train_gpu,)))
        feat_model = replace(model, known={})
        test = [singles[(n, test_gpu)] for n in names]
        meas = [o.steps_per_sec for o in test]
        pred = [
            model.predict(
                ModelSpec(name=o.name, model_flops=o.model_flops, params=o.params), {test_gpu: 1}
            ).steps_per_sec
            for o in test
        ]
        pred_f = [
            feat_model.predict(
                ModelSpec(name=o.name, model_flops=o.model_flops, params=o.params), {test_gpu: 1}
            ).steps_per_sec
            for o in test
        ]
        tr = [singles[(n, train_gpu)] for n in names]
        x = np.array([o.model_flops / get_gpu(train_gpu).fp32_tflops for o in tr])
        y = np.array([1 / o.steps_per_sec for o in tr])
        xt = np.array([o.model_flops / get_gpu(test_gpu).fp32_tflops for o in test])
        lin = _mape(1 / _linear(x, y, xt), meas)
        svr = _mape(1 / _svr(x, y, xt), meas)
        m = _mape(pred, meas)
        print(
            f"  {train_gpu}->{test_gpu}: model {m:5.1f} (features only {_mape(pred_f, meas):5.1f}) | "
            f"linear FLOPs/TFLOPS {lin:5.1f} ({lin / m:4.1f}x) | SVR FLOPs/TFLOPS {svr:5.1f} ({svr / m:4.1f}x)"
        )


def clusters(obs) -> None:
    singles = _singles(obs)
    curves = sorted({(o.name, o.gpu) for o in obs if o.source == "cluster"})
    print("Cluster curves 1-8 workers, leave-one-curve-out (MAPE %)")
    per_gpu: dict[str, list[tuple[float, float]]] = {g: [] for g in GPUS}
    for name, gpu in curves:
        pts = [o for o in obs if o.source == "cluster" and (o.name, o.gpu) == (name, gpu)]
        train = [o for o in obs if o not in pts]
        model = _fit(train, _known(train))
        single = singles[(name, gpu)].steps_per_sec
        net = ModelSpec(name=name, model_flops=pts[0].model_flops, params=pts[0].params)
        pred = [model.predict(net, {gpu: o.workers}).steps_per_sec for o in pts]
        meas = [o.steps_per_sec for o in pts]
        base = [o.workers * single for o in pts]
        m, b = _mape(pred, meas), _mape(base, meas)
        per_gpu[gpu].append((m, b))
        tail = [f"{p:.1f}/{y:.1f}" for p, y in zip(pred[4:], meas[4:], strict=True)]
        print(
            f"  {gpu:5s} {name:11s} model {m:5.1f} | N x single {b:5.1f}   N=5..8 pred/meas {' '.join(tail)}"
        )
    for g, v in per_gpu.items():
        m, b = np.mean([x[0] for x in v]), np.mean([x[1] for x in v])
        print(f"  {g:5s} mean: model {m:5.1f} | N x single {b:5.1f} ({b / m:4.1f}x)")


def _table(shared: Path, rel: str):
    import pandas as pd

    return pd.read_csv(shared / SPEED / rel)


def _split(df):
    """The study's split: random 80/20 of the table's rows with ``random_state=0``."""
    from sklearn.model_selection import train_test_split

    return train_test_split(df, test_size=0.2, random_state=0)


def _row_obs(df) -> list[Observation]:
    """Per-(GPU, network) mean speed of table rows, as single-worker observations at 0.3 ms."""
    out = []
    for (gpu, name), g in df.groupby(["GPU (temp)", "Model (temp)"]):
        r = g.iloc[0]
        out.append(
            Observation(
                name=canonical_network_name(name),
                model_flops=float(r["Model FLOPs"]),
                params=float(r["Number of Parameters"]),
                tensors=float(r["Number of Tensors"]),
                gpu=str(gpu),
                workers=1,
                ps=1,
                latency_ms=0.3,
                steps_per_sec=float(g["Speed (steps/sec)"].mean()),
                source="0latency",
            )
        )
    return out


def _model_step_times(obs, train_rows, test) -> tuple[np.ndarray, np.ndarray]:
    """Our model fitted on the training rows and the multi-worker cluster rows (which the single-worker
    baselines cannot use; no other single-worker measurement of any network, so the model sees no more
    of the test networks' single-worker speed than the baselines do): step time (s) of the test rows,
    features only and with the network's measured training-row speed."""
    cluster = [o for o in obs if o.source.startswith("cluster") and o.workers > 1]
    train = cluster + _row_obs(train_rows)
    model = _fit(train, _known(train))
    feat = replace(model, known={})
    out = []
    for m in (feat, model):
        out.append(
            np.array(
                [
                    1.0
                    / m.predict(
                        ModelSpec(
                            name=canonical_network_name(r["Model (temp)"]),
                            model_flops=r["Model FLOPs"],
                            params=r["Number of Parameters"],
                        ),
                        {r["GPU (temp)"]: 1},
                    ).steps_per_sec
                    for _, r in test.iterrows()
                ]
            )
        )
    return out[0], out[1]


def study_split(shared: Path, obs) -> None:
    """The study's protocol (random 80/20 row split, random_state=0), beside the figures it reports."""
    from sklearn.linear_model import LinearRegression
    from sklearn.svm import SVR

    print("Study protocol: random 80/20 row split (random_state=0), test MAPE of step time (%)")
    print(
        "  note: the shared tables hold 16 of the study's 20 CNNs (4 withheld, SOURCE.md), so the rows and\n"
        "  the split differ from the study's; FLOPs-only baselines suffer most from shake16 (ResNet-15's FLOPs)"
    )
    splits = {g: _split(_table(shared, t)) for g, t in SINGLE_TABLES.items()}
    import pandas as pd

    train_rows = pd.concat([tr for tr, _ in splits.values()])
    for g, (tr, te) in splits.items():
        x, y, xt, yt = (
            tr[["Normalized Model"]],
            tr["Step Time (s)"],
            te[["Normalized Model"]],
            te["Step Time (s)"],
        )
        svr = _mape(SVR(kernel="poly", degree=2, C=100, epsilon=0.01).fit(x, y).predict(xt), yt)
        lin = _mape(LinearRegression().fit(x, y).predict(xt), yt)
        feat, known = _model_step_times(obs, train_rows, te)
        print(
            f"  {g:5s} SVR poly-2 {svr:5.1f} (study {STUDY[g]['svr']:4.1f}) | linear {lin:5.1f} "
            f"(study {STUDY[g]['lin']:4.1f}) | model {_mape(feat, yt):5.1f} features only, "
            f"{_mape(known, yt):5.1f} with measured train rows  ({len(te)} test rows)"
        )
    tr, te = _split(_table(shared, BOTH_TABLE))
    lin = _mape(
        LinearRegression().fit(tr[["Model/GPU"]], tr["Step Time (s)"]).predict(te[["Model/GPU"]]),
        te["Step Time (s)"],
    )
    feat, known = _model_step_times(obs, tr, te)
    yt = te["Step Time (s)"]
    print(
        f"  both  linear Model/GPU {lin:5.1f} (study {STUDY['both']['lin']:4.1f}) | model {_mape(feat, yt):5.1f} "
        f"features only, {_mape(known, yt):5.1f} with measured train rows  ({len(te)} test rows)"
    )


def latency(shared: Path, obs) -> None:
    model = SpeedModel.load()
    singles = _singles(obs)
    lat30 = {(o.name, o.gpu): o.steps_per_sec for o in obs if o.source == "supertable+30ms"}
    print(
        "Latency +30 ms, step-time ratio: derived/step_time_ms_latency_0_vs_30.csv (not fitted) and "
        "speed_data_supertable.csv (fitted); the two sources disagree on P100"
    )
    for gpu, name, t0, t30 in latency_pairs(shared):
        k = model._lookup(name)
        net = ModelSpec(name=name, model_flops=k.model_flops, params=k.params)
        r = (
            model.predict(net, {gpu: 1}).steps_per_sec
            / model.predict(net, {gpu: 1}, latency_ms=30.3).steps_per_sec
        )
        sup = singles[(name, gpu)].steps_per_sec / lat30[(name, gpu)]
        print(f"  {gpu:5s} {name:9s} measured x{t30 / t0:4.2f} (supertable x{sup:4.2f})  model x{r:4.2f}")


def _banded(train) -> SpeedModel:
    """A model fitted on ``train`` whose band comes from inner splits of ``train`` only (nested)."""
    from cmdare.planner.speed.speed_cv import fit_on, interval_table

    model = fit_on(train)
    model.intervals_ = interval_table(train)
    model.domain_ = domain(list(train))
    return model


def intervals(obs) -> None:
    """MAPE and P10–P90 coverage of held-out points for every split, nested (see the module docstring)."""
    from cmdare.planner.speed.speed_band import speed_band
    from cmdare.planner.speed.speed_cv import SCHEMES, predict_obs

    print("Prediction intervals, nested (model and band fitted on each training part only)")
    print("  split     points  MAPE %  inside P10-P90 %  mean width %   labels of the held-out points")
    for cat, scheme in SCHEMES.items():
        pred, meas, inside, width, labels, flat = [], [], [], [], {}, []
        for train, test in scheme(obs):
            model = _banded(train)
            for o in test:
                net = ModelSpec(name=o.name, model_flops=o.model_flops, params=o.params)
                band = speed_band(model, net, {o.gpu: o.workers}, o.ps, latency_ms=o.latency_ms)
                pred.append(band.steps_per_sec)
                meas.append(o.steps_per_sec)
                inside.append(band.p10 <= o.steps_per_sec <= band.p90)
                width.append(band.p90 / band.p10 - 1)
                labels[band.extrapolation] = labels.get(band.extrapolation, 0) + 1
                if o.ps > 1 and cat == "ps":
                    flat.append((predict_obs(model, replace(o, ps=1)), o.steps_per_sec))
        label_text = " ".join(f"{k}={v}" for k, v in sorted(labels.items()))
        print(
            f"  {cat:9s} {len(meas):6d}  {_mape(pred, meas):6.1f}  {100 * np.mean(inside):16.0f}  "
            f"{100 * np.mean(width):12.0f}   {label_text}"
        )
        if flat:
            base, y = zip(*flat, strict=True)
            print(f"            baseline 'the 2nd PS adds nothing': MAPE {_mape(base, y):.1f}")
    print(
        "  study (background.md): unseen-network error of its regression ~10 %; it gives no intervals and no\n"
        "  2-PS model. The visible 2-PS rows are compute-bound K80 runs: they cannot show PS-bound 2-PS error."
    )


def main() -> int:
    parser = argparse.ArgumentParser(description="speed model accuracy vs CM-DARE baselines")
    parser.add_argument(
        "--shared", type=Path, default=REPO, help="directory holding data/cmdare (default: the vendored copy)"
    )
    parser.add_argument("--intervals-only", action="store_true", help="print only the nested interval table")
    args = parser.parse_args()
    obs = load_observations(args.shared)
    if args.intervals_only:
        intervals(obs)
        return 0
    lono(obs)
    logo(obs)
    clusters(obs)
    study_split(args.shared, obs)
    latency(args.shared, obs)
    intervals(obs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
