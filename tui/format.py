"""Number formatting shared by the panes and the plain-text snapshot (one place for units)."""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cmdare.collectors.observed import JobView
    from cmdare.planner.risk_cost.checkpointing import WorkAtRisk

STATUS_SYMBOL = {"up": "●", "silent": "◌", "revoked": "✖", "pending": "○", "finished": "■"}
SEVERITY_SYMBOL = {"critical": "‼", "warning": "▲", "info": "ℹ"}


def num(x: float | None, digits: int = 1, dash: str = "–") -> str:
    """``x`` with thousands separators and ``digits`` decimals; ``dash`` when unknown or not finite."""
    if x is None or not math.isfinite(x):
        return dash
    return f"{x:,.{digits}f}"


def rate(x: float | None) -> str:
    """A rate (steps/s, examples/s) to one decimal; a dash when unknown."""
    return num(x, 1)


def bytes_rate(bps: float | None) -> str:
    """Bytes per second in the largest unit that keeps it >= 1 (GB/s, MB/s, kB/s, B/s)."""
    if bps is None or not math.isfinite(bps):
        return "–"
    for unit, div in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if bps >= div:
            return f"{bps / div:.1f} {unit}"
    return f"{bps:.0f} B/s"


MINUTE, HOUR, DAY = 60, 3600, 86400


def duration(seconds: float | None) -> str:
    """Seconds as the two largest units (``45s``, ``3m05s``, ``2h10m``, ``1d04h``)."""
    if seconds is None or not math.isfinite(seconds):
        return "–"
    s = int(round(seconds))
    if s < MINUTE:
        return f"{s}s"
    if s < HOUR:
        return f"{s // MINUTE}m{s % MINUTE:02d}s"
    if s < DAY:
        return f"{s // HOUR}h{(s % HOUR) // MINUTE:02d}m"
    return f"{s // DAY}d{(s % DAY) // HOUR:02d}h"


def duration_until(seconds: float) -> float:
    """The time until which :func:`duration` reads as it does at ``seconds`` (no later: it may read
    the same a little longer). It shows the rounded seconds: whole seconds under an hour, whole
    minutes under a day, whole hours beyond."""
    s = int(round(seconds))
    step = 1 if s < HOUR else MINUTE if s < DAY else HOUR
    return s // step * step + step - 0.5


def uptime(seconds: float | None) -> str:
    """An uptime as the Cluster pane shows it: whole minutes under an hour (``<1m``, ``3m``), then as
    :func:`duration` (``2h10m``, ``1d04h``). It reads the same for a minute at least: at seconds, every
    young task's row changed at every poll and a quiet job's table was repainted each time (issue 34)."""
    if seconds is None or not math.isfinite(seconds):
        return "–"
    s = int(round(seconds))
    if s >= HOUR:
        return duration(seconds)
    return f"{s // MINUTE}m" if s >= MINUTE else "<1m"


def uptime_until(seconds: float) -> float:
    """The time until which :func:`uptime` reads as it does at ``seconds`` (no later: it may read the same
    a little longer): whole minutes under a day, whole hours beyond."""
    s = int(round(seconds))
    step = MINUTE if s < DAY else HOUR
    return s // step * step + step - 0.5


def gpu_label(gpu: str, owns_gpu: bool, role: str) -> str:
    """What a task's GPU column says: its ``gpu`` label, "GPU" when DCGM saw GPUs it did not name,
    "CPU" for a parameter server that names none (a CPU node, as the planner prices it), else
    "unknown" (a pending target or a log that did not say is not a CPU task for all we know)."""
    return gpu or ("GPU" if owns_gpu else "CPU" if role == "ps" else "unknown")


def clock(t: float | None) -> str:
    """A Unix time as the local time of day, ``HH:MM`` (when something happened); ``?`` when unknown."""
    return "?" if t is None else time.strftime("%H:%M", time.localtime(t))


def stalled_phrase(job: JobView) -> str:
    """'stalled since 10:42 (no task up; last measured 9.6 steps/s)': a stalled job's speed is a past
    figure, said as one (the Job pane, the snapshot); a job past its target step says it finished."""
    last = f"; last measured {rate(job.last_steps_per_sec)} steps/s" if job.last_steps_per_sec else ""
    if job.finished:  # its target step reached: it ended rather than died
        return f"finished: target step reached, no task up since {clock(job.stalled_since)}{last}"
    return f"stalled since {clock(job.stalled_since)} (no task up{last})"


def money(usd: float | None) -> str:
    """US dollars with cents (``$1,234.50``)."""
    if usd is None or not math.isfinite(usd):
        return "–"
    return f"${usd:,.2f}"


def pct(x: float | None, digits: int = 0) -> str:
    """A fraction (0.25) as a percentage (``25%``)."""
    if x is None or not math.isfinite(x):
        return "–"
    return f"{100 * x:.{digits}f}%"


def signed_pct(x: float | None) -> str:
    """A fraction as a signed whole percentage (``+12%``, ``-3%``)."""
    if x is None or not math.isfinite(x):
        return "–"
    return f"{100 * x:+.0f}%"


PROVISIONING_SHORT = {"preemptible": "preempt", "standard": "on-dem", "on-demand": "on-dem", "spot": "spot"}


def provisioning(p: str | None) -> str:
    """Short word for a provisioning model (fits a 7-column cell): spot, preempt, on-dem."""
    if not p:
        return "–"
    return PROVISIONING_SHORT.get(p, p[:7])


def hours(h: float | None) -> str:
    """Hours as a duration (``3h05m``)."""
    return duration(h * 3600 if h is not None else None)


# Fixed region abbreviations (issue 18): a region never shows cut (``us-ce``, ``europ``); its code is built
# from these words only, so two regions never share a code (``us-central1`` → ``usc1``, ``europe-west4`` →
# ``euw4``, ``asia-east1`` → ``ase1``, AWS ``us-east-1`` → ``use-1``). A region of other words keeps its name.
REGION_AREAS = {"us": "us", "europe": "eu", "eu": "eu", "asia": "as", "ap": "ap", "northamerica": "na",
                "southamerica": "sa", "australia": "au", "me": "me", "africa": "af", "ca": "ca", "sa": "sa"}  # fmt: skip
REGION_WORDS = {"central": "c", "east": "e", "west": "w", "north": "n", "south": "s", "northeast": "ne",
                "southeast": "se", "northwest": "nw", "southwest": "sw"}  # fmt: skip


def region_code(region: str | None) -> str:
    """The compact code of a cloud region (``us-central1`` → ``usc1``), or the name itself when its words
    are not in the fixed table (never a cut name)."""
    if not region:
        return "–"
    parts = region.split("-")
    if len(parts) < 2 or parts[0] not in REGION_AREAS:
        return region
    out = REGION_AREAS[parts[0]]
    for part in parts[1:]:
        word, digits = part.rstrip("0123456789"), part[len(part.rstrip("0123456789")) :]
        if word and word not in REGION_WORDS:
            return region
        out += REGION_WORDS.get(word, "") + ("-" + digits if digits and not word else digits)
    return out


PROVISIONING_CODE = {"preemptible": "pre", "standard": "od", "on-demand": "od", "spot": "spot"}


def provisioning_code(p: str | None) -> str:
    """Provisioning in at most 5 characters: spot, pre (preemptible), od (on-demand)."""
    return PROVISIONING_CODE.get(p or "", (p or "–")[:5])


def delta_pct(x: float | None) -> str:
    """A relative change in at most 5 characters: ``−65%``, ``+120%``, ``×12`` beyond +999%."""
    if x is None or not math.isfinite(x):
        return "–"
    if x >= 9.995:
        return f"×{1 + x:.0f}"
    return f"{100 * x:+.0f}%".replace("-", "−")


def scale(x: float) -> str:
    """A multiplier in at most 5 significant characters: ``0.31×``, ``2.4×``, ``8,123×``."""
    return f"{x:,.0f}×" if x >= 100 else f"{x:.2g}×"


def calibration_words(plan: Any) -> str:
    """What a live plan's model is calibrated on: the PS model's samples and residual, or a sync job's
    measured compute / all-reduce split (ranks, and the wire time it implies against the link figures)."""
    if plan is None or not plan.calibration_samples:
        return "model not yet calibrated on this job"
    if plan.comm_scale is not None:
        return (
            f"calibrated on {plan.calibration_samples} ranks' measured split "
            f"(all-reduce wire time {scale(plan.comm_scale)} link figures)"
        )
    if plan.calibration_residual is None:
        return "model not yet calibrated on this job"
    return (
        f"calibrated on {plan.calibration_samples} samples (residual {100 * plan.calibration_residual:.0f}%)"
    )


def risk_words(risk: WorkAtRisk) -> tuple[str, str]:
    """(value, note) of a job's work at risk: '4m12s · revocation now 6m40s $0.31' (time since the last
    checkpoint, what a revocation now costs) and 'checkpoint every 3m18s (optimum, Daly), now every 10m00s';
    the same words in the Job pane and the plain report."""
    if risk.since_s is None:
        value = "no checkpoint seen"
    else:
        usd = f" {money(risk.revocation_now_usd)}" if risk.revocation_now_usd is not None else ""
        value = f"{duration(risk.since_s)} · revocation now {duration(risk.revocation_now_s)}{usd}"
    if risk.optimal_s is None:
        note = "optimum interval: after the first ranking"
    elif not math.isfinite(risk.optimal_s):
        note = "never revoked: no optimum from revocations"
    else:
        note = f"checkpoint every {duration(risk.optimal_s)} (optimum, Daly), now every {duration(risk.interval_s)}"
    if risk.since_s is None:
        note = "exporter.checkpoint() or a log field marks one · " + note
        if risk.overdue:
            note = f"overdue (> {risk.overdue_factor:g}× optimum) · " + note
    return value, note
