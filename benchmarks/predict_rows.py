"""``predict`` on large files: CPU per row of the real ``cmdare-tui predict`` (its own process, CPU from
``wait4``) on 100,000 and 1,000,000 rows, against the per-row path it replaced (``_predict_before.py``,
in this process on a sample of the same rows, same run), with peak RSS.

    python benchmarks/predict_rows.py [--quick]      # --quick: 100,000 rows only

The rows: three networks (ResNet-32 as measured, an unnamed one, Shake-Shake), every GPU of the
catalogue, 1-64 workers and 1-8 PS; 5 % GPU mixes and 5 % synchronous rows (a seeded draw); then 20,000
distinct GPU mixes (each one a shape of its own: no memo helps). Issue 27
measured 41.7 CPU-s for 100,000 rows and 696 s for 1,000,000 before; target: vectorised again (the
per-row path's CPU per row ≥ 10× the new one's), peak RSS ≤ 300 MB.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
EXE = str(Path(sys.executable).with_name("cmdare-tui"))
HEADER = "model,model_flops,params,batch_size,gpu,workers,ps,mode,gpus_per_node\n"
NETWORKS = (("ResNet-32", "1658696889", "1857722", "128"), ("", "3e9", "4e6", "64"),
            ("shake-shake-small", "2e10", "2e7", "128"))  # fmt: skip
SAMPLE = 5_000  # rows the per-row baseline predicts
RSS_LIMIT_MB = 300.0


def rows(n: int, seed: int = 27) -> str:
    """``n`` data rows (see the module's docstring)."""
    from cmdare.planner.speed.gpu_catalog import gpu_names

    rng, gpus, out = random.Random(seed), gpu_names(), io.StringIO()
    for _ in range(n):
        net, r = ",".join(rng.choice(NETWORKS)), rng.random()
        if r < 0.05:
            out.write(f"{net},V100:1+P100:1+K80:2,4,{rng.randint(1, 4)},,\n")
        elif r < 0.10:
            g = rng.choice((1, 2, 4, 8))
            out.write(f"{net},{rng.choice(('V100', 'A100', 'T4'))},{g * rng.randint(1, 8)},0,sync,{g}\n")
        else:
            out.write(f"{net},{rng.choice(gpus)},{rng.randint(1, 64)},{rng.randint(1, 8)},,\n")
    return out.getvalue()


def mixed_rows(n: int, seed: int = 28) -> str:
    """``n`` rows of distinct three-GPU mixes (ResNet-32)."""
    rng, out = random.Random(seed), io.StringIO()
    for i in range(n):
        a, b, c = rng.randint(1, 30), rng.randint(1, 30), rng.randint(1, 30)
        out.write(f"ResNet-32,1658696889,1857722,128,V100:{a}+P100:{b}+K80:{c},{a + b + c},{1 + i % 8},,\n")
    return out.getvalue()


def baseline_cpu_per_row(data: str | None = None) -> float:
    """CPU seconds per row of the per-row path, on ``data`` (default :data:`SAMPLE` rows), after one warm-up row."""
    import _predict_before

    text = HEADER + (data if data is not None else rows(SAMPLE))
    _predict_before.predict_csv_text(HEADER + text.splitlines()[1] + "\n")
    t0 = time.process_time()
    _predict_before.predict_csv_text(text)
    return (time.process_time() - t0) / (len(text.splitlines()) - 1)


def run_cli(path: Path) -> tuple[int, float, float, float, int]:
    """(status, CPU s, wall s, peak RSS MB, output bytes) of ``cmdare-tui predict --input path``."""
    with tempfile.TemporaryFile() as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen([EXE, "predict", "--input", str(path)], stdout=out, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        size = out.tell()
    return proc.returncode, usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024, size


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100,000 rows only")
    args = ap.parse_args(argv)
    sizes = (100_000,) if args.quick else (100_000, 1_000_000)
    base = baseline_cpu_per_row()
    print(f"baseline (per-row path, {SAMPLE:,} rows in this process): {base * 1e6:.0f} µs CPU a row")
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        small = Path(tmp) / "one.csv"
        small.write_text(HEADER + rows(1))
        _, start_cpu, _, start_mb, _ = run_cli(small)  # the process's own start, to take off
        print(f"`predict` on 1 row: {start_cpu:.2f} s CPU, {start_mb:.0f} MB (start-up, subtracted below)")
        for n in sizes:
            path = Path(tmp) / f"rows-{n}.csv"
            path.write_text(HEADER + rows(n))
            code, cpu, wall, mb, size = run_cli(path)
            per_row = max(cpu - start_cpu, 1e-9) / n
            ratio = base / per_row
            ok = code == 0 and ratio >= 10 and mb <= RSS_LIMIT_MB
            failed += not ok
            print(f"{n:>9,} rows ({path.stat().st_size / 2**20:.0f} MiB in, {size / 2**20:.0f} MiB out): exit {code}, "
                  f"{cpu:.1f} s CPU ({wall:.1f} s wall), {per_row * 1e6:.1f} µs a row; ratio per row "
                  f"baseline/new {ratio:.1f}× (target ≥ 10×); peak RSS {mb:.0f} MB (target ≤ {RSS_LIMIT_MB:.0f}): "
                  f"{'PASS' if ok else 'MISS'}")  # fmt: skip
            path.unlink()
        mixes = Path(tmp) / "mixes.csv"
        mixes.write_text(HEADER + mixed_rows(20_000))
        base_mix = baseline_cpu_per_row(mixed_rows(2_000))
        code, cpu, wall, mb, _ = run_cli(mixes)
        per_row = max(cpu - start_cpu, 1e-9) / 20_000
        ok = code == 0 and base_mix / per_row >= 10
        failed += not ok
        print(f"   20,000 distinct GPU mixes: exit {code}, {cpu:.1f} s CPU ({wall:.1f} s wall), {per_row * 1e6:.1f} µs a row "
              f"vs {base_mix * 1e6:.0f} µs per row before: {base_mix / per_row:.1f}× (target ≥ 10×); peak RSS {mb:.0f} MB: "
              f"{'PASS' if ok else 'MISS'}")  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
