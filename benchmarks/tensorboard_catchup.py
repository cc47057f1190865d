"""TensorBoard catch-up: a 48 MB event file (250,000 steps, 3 scalars each) tailed from the start while
the event loop keeps polling, against a baseline measured in the same run: one blocking read and decode
of the whole file (what a poll would block for if it read everything at once).

    python benchmarks/tensorboard_catchup.py [--quick] [--mb 48]

Prints: the baseline, the time to catch up (ratio to the baseline: the price of reading in a thread,
chunk by chunk), the longest poll and the event loop's worst lateness during catch-up (a 10 ms
ticker), the progress notes seen, and whether the final step is the file's last.
Targets: poll p95 <= 100 ms, loop lateness p95 <= 100 ms, catch-up <= 2x the baseline. Maxima are
printed too, next to the idle loop's own lateness in the same run (on a shared machine the OS alone
delays a 10 ms timer by up to ~100 ms).
"""

from __future__ import annotations

import argparse
import asyncio
import struct
import tempfile
import time
from pathlib import Path

from cmdare.collectors import metrics as M  # noqa: E402
from cmdare.collectors.clock import ManualClock  # noqa: E402
from cmdare.collectors.tensorboard.proto import decode_event  # noqa: E402
from cmdare.collectors.tensorboard.source import TensorBoardSource  # noqa: E402
from cmdare.collectors.tensorboard.tfrecord import frame, read_records  # noqa: E402

TARGET_POLL_S = 0.100
TARGET_LAG_S = 0.100
TARGET_RATIO = 2.0
BYTES_PER_STEP = 152  # 3 framed events of ~51 bytes


def scalar_event(wall: float, step: int, tag: bytes, value: float) -> bytes:
    """One scalar event, as torch's SummaryWriter writes it (simple_value)."""

    def varint(n: int) -> bytes:
        out = bytearray()
        while True:
            b, n = n & 0x7F, n >> 7
            out.append(b | (0x80 if n else 0))
            if not n:
                return bytes(out)

    val = b"\x0a" + varint(len(tag)) + tag + b"\x15" + struct.pack("<f", value)
    summ = b"\x0a" + varint(len(val)) + val
    return b"\x09" + struct.pack("<d", wall) + b"\x10" + varint(step) + b"\x2a" + varint(len(summ)) + summ


def write_file(path: Path, mb: float) -> int:
    """Write about ``mb`` MB of events; returns the last step."""
    steps = int(mb * 1e6 / BYTES_PER_STEP)
    with path.open("wb") as fh:
        chunk = []
        for i in range(steps):
            for tag in (b"loss", b"learning_rate", b"global_step/sec"):
                chunk.append(frame(scalar_event(1.7e9 + i / 50, i, tag, 1.0 / (i + 1))))
            if len(chunk) > 30_000:
                fh.write(b"".join(chunk))
                chunk = []
        fh.write(b"".join(chunk))
    return steps - 1


def baseline(path: Path) -> float:
    t = time.perf_counter()
    res = read_records(path.read_bytes())
    for rec in res.records:
        decode_event(rec)
    return time.perf_counter() - t


def _p(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else 0.0


async def idle_lag(seconds: float = 3.0) -> list[float]:
    """The event loop's lateness on a 10 ms ticker with nothing else running (this machine's noise)."""
    lags, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end:
        t = time.perf_counter()
        await asyncio.sleep(0.01)
        lags.append(time.perf_counter() - t - 0.01)
    return lags


async def catch_up(logdir: Path, last: int, refresh: float) -> dict:
    src, clock = TensorBoardSource(logdir, job="bench"), ManualClock()
    lags: list[float] = []
    stop = asyncio.Event()

    async def ticker() -> None:
        while not stop.is_set():
            t = time.perf_counter()
            await asyncio.sleep(0.01)
            lags.append(time.perf_counter() - t - 0.01)

    tick = asyncio.ensure_future(ticker())
    t0, times, notes = time.perf_counter(), [], []
    while True:
        t = time.perf_counter()
        (p,) = await src.poll(None, clock)  # type: ignore[arg-type]
        times.append(time.perf_counter() - t)
        if p.catching_up and p.error and len(notes) < 3:
            notes.append(p.error)
        if p.ok and not p.catching_up and p.values.get(M.K_GLOBAL_STEP) == last:
            break
        await asyncio.sleep(refresh)
    total = time.perf_counter() - t0
    stop.set()
    await tick
    await src.aclose()
    return {"total": total, "polls": times, "lags": lags, "notes": notes}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=48.0)
    ap.add_argument("--quick", action="store_true", help="a 12 MB file")
    ap.add_argument("--refresh", type=float, default=0.25, help="seconds between polls (default 0.25)")
    args = ap.parse_args()
    mb = 12.0 if args.quick else args.mb
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        run.mkdir()
        path = run / "events.out.tfevents.1.bench"
        last = write_file(path, mb)
        size = path.stat().st_size / 1e6
        base = baseline(path)
        quiet = asyncio.run(idle_lag())
        r = asyncio.run(catch_up(Path(tmp), last, args.refresh))
    ratio = r["total"] / base
    polls, lags = r["polls"], r["lags"]
    print(f"event file: {size:.1f} MB, {last + 1:,} steps")
    print(f"baseline (one blocking read + decode of the whole file): {base:.2f} s")
    print(
        f"catch-up in the background: {r['total']:.2f} s over {len(polls)} polls, ratio {ratio:.2f} "
        f"(target <= {TARGET_RATIO}) {'PASS' if ratio <= TARGET_RATIO else 'MISS'}"
    )
    p95 = _p(polls, 0.95)
    print(
        f"poll: median {1000 * _p(polls, 0.5):.0f} ms, p95 {1000 * p95:.0f} ms, max {1000 * max(polls):.0f} ms "
        f"(target p95 <= {1000 * TARGET_POLL_S:.0f} ms) {'PASS' if p95 <= TARGET_POLL_S else 'MISS'}; "
        f"max / baseline ratio {max(polls) / base:.3f}"
    )
    lag95 = _p(lags, 0.95)
    print(
        f"event loop lateness during catch-up: p95 {1000 * lag95:.0f} ms, max {1000 * max(lags):.0f} ms "
        f"(target p95 <= {1000 * TARGET_LAG_S:.0f} ms) {'PASS' if lag95 <= TARGET_LAG_S else 'MISS'}; "
        f"idle loop in the same run: p95 {1000 * _p(quiet, 0.95):.0f} ms, max {1000 * max(quiet):.0f} ms"
    )
    print("progress notes: " + " | ".join(r["notes"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
