"""The per-swept-task work's fast paths hold to their definitions (issue 34: 100,000 tasks, growth
10,000 -> 100,000 <= 3x): each one computes what the slower definition it stands for computes."""

from __future__ import annotations

import math

from cmdare.collectors import metrics as M


def _keys() -> list[str]:
    """Every kind of series key a source checks: bounded, folded, counters, devices, stages, unknown."""
    return sorted(
        {
            *M.VALUE_BOUNDS,
            *M.COUNTER_KEYS,
            *M.RATE_BOUNDS,
            M.device_key(M.K_GPU_UTIL, "0"),
            M.device_key(M.K_GPU_FB_USED, "3"),
            M.device_key("unbounded_name", "1"),
            M.stage_bytes_key("stage-1"),
            "a_gauge_no_bound_names",
        }
    )


def test_value_range_accepts_exactly_what_valid_value_accepts() -> None:
    edges = [-math.inf, -1e31, -M.MAX_ABS_VALUE, -1.0, -0.0, 0.0, 5e-324, 0.5, 1.0, 100.0, 1e30, 1e31, math.inf]
    for key in _keys():
        low, high = M.value_range(key)
        values = [*edges, math.nan]
        for b in (low, high):  # each end, and the floats either side of it
            values += [b, math.nextafter(b, -math.inf), math.nextafter(b, math.inf)]
        for x in values:
            assert (low <= x <= high) == M.valid_value(key, x), (key, x)


def test_a_large_fleets_folded_detail_drops_each_implausible_value_and_keeps_a_good_tasks_dict() -> None:
    from cmdare.collectors.prometheus.fleet import FoldedDetail
    from cmdare.collectors.prometheus.source import PrometheusAPISource, _Target
    from cmdare.collectors.samples import TaskInfo

    good = {M.K_WORKER_STEPS: 10.0, M.K_PROCESS_CPU: 3.5, M.K_GLOBAL_STEP: 7.0}
    bad = {M.K_WORKER_STEPS: -1.0, M.K_PROCESS_CPU: 3.5, M.K_NET_RX: 1e31, M.K_GLOBAL_STEP: 7.0}
    folded = FoldedDetail({"a:1": "1700000000.5", "b:1": "1700000001"}, {"a:1": good, "b:1": bad})
    targets = {("", i): _Target(TaskInfo(job="j", task=i)) for i in ("a:1", "b:1")}
    # no query is sent: the source only folds what it is given (a closed port, never reached)
    PrometheusAPISource("http://127.0.0.1:9")._fill_folded(targets, folded)
    a, b = targets[("", "a:1")], targets[("", "b:1")]
    assert a.values is good and a.dropped == 0 and a.scrape_time == 1700000000.5
    want = {k: v for k, v in bad.items() if M.valid_value(k, v)}
    assert b.values == want == {M.K_PROCESS_CPU: 3.5, M.K_GLOBAL_STEP: 7.0}
    assert b.dropped == 2
