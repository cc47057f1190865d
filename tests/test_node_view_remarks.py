"""A task's view holds its ten rarely set figures (:class:`NodeRemarks`) in one shared object when they
are their defaults, and reads, compares, copies and prints exactly as a view holding every figure in a
slot of its own did (the overview's views cost ~7 MB less at 100,000 tasks). (The views' own slots of
what they were made from, and their task's number in its job, are held by test_refresh_reuse.py: a
session's overview equals a one-off build, refresh after refresh.)"""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from cmdare.collectors.observed import NO_REMARKS, NodeRemarks, NodeView

_TEXT = st.sampled_from(["", "a", "us-central1", "worker-3"])
_NUM = st.none() | st.floats(allow_nan=False, min_value=-1e12, max_value=1e12)
# every figure of a view, by name, in the order the JSON has always listed them
FIGURES = {
    "name": _TEXT, "role": _TEXT, "gpu": _TEXT, "region": _TEXT, "zone": _TEXT, "provisioning": _TEXT,
    "status": st.sampled_from(["up", "silent", "revoked", "finished"]), "steps_per_sec": _NUM,
    "step_seconds": _NUM, "gpu_util": _NUM, "net_in_bps": _NUM, "net_out_bps": _NUM, "started_at": _NUM,
    "last_error": st.none() | _TEXT, "restarts": st.integers(0, 3), "cause": _TEXT, "stage": _TEXT,
    "dc": _TEXT, "host": _TEXT, "owns_gpu": st.booleans(), "gpu_model": _TEXT, "cpu_pct": _NUM,
    "mem_used_bytes": _NUM, "mem_total_bytes": _NUM, "gpu_mem_used_mib": _NUM, "gpu_mem_total_mib": _NUM,
    "flags": st.sampled_from([(), ("duplicate-identity",), ("duplicate-identity", "duplicate-rank")]),
    "allreduce_seconds": _NUM, "rank": _TEXT, "local_rank": _TEXT, "last_checkpoint_at": _NUM,
    "checkpoint_seconds": _NUM, "checkpoint_interval_s": _NUM, "ended_at": _NUM,
}  # fmt: skip
REMARKS = [f.name for f in dataclasses.fields(NodeRemarks)]
DEFAULTS = {f.name: f.default for f in dataclasses.fields(NodeRemarks)}


@settings(max_examples=150, deadline=None)
@given(
    st.fixed_dictionaries(FIGURES), st.fixed_dictionaries(FIGURES), st.sets(st.sampled_from(list(FIGURES)))
)
def test_a_view_reads_compares_copies_and_prints_every_figure_it_was_made_with(
    figures: dict, other: dict, changed: set[str]
) -> None:
    view = NodeView(**figures)
    assert {k: getattr(view, k) for k in FIGURES} == figures
    plain = all(figures[k] == DEFAULTS[k] for k in REMARKS)
    assert (view.remarks is NO_REMARKS) == plain  # the shared object exactly when every remark is its default
    out = view.to_json(100.0)
    expected = {k: v for k, v in figures.items() if k != "started_at"}
    expected |= {"uptime_s": None if figures["started_at"] is None else 100.0 - figures["started_at"]}
    assert out == expected | {"flags": list(figures["flags"])}
    assert list(out) == [k for k in FIGURES if k != "started_at"] + ["uptime_s"]  # the JSON's order kept
    assert view == NodeView(**figures) and hash(view) == hash(NodeView(**figures))
    mixed = figures | {k: other[k] for k in changed}
    copy = dataclasses.replace(view, **{k: other[k] for k in changed})  # any figure, remarks too
    assert {k: getattr(copy, k) for k in FIGURES} == mixed
    assert copy == NodeView(**mixed) and (copy == view) == (mixed == figures)


def test_a_remark_set_back_to_its_default_in_a_copy_is_the_default():
    view = NodeView(name="w", role="worker", gpu="", region="", zone="", provisioning="", status="silent",
                    steps_per_sec=None, step_seconds=None, gpu_util=None, net_in_bps=None, net_out_bps=None,
                    started_at=None, last_error="timeout", restarts=2, flags=("duplicate-identity",))  # fmt: skip
    assert view.remarks is not NO_REMARKS and view.restarts == 2
    cleared = dataclasses.replace(view, last_error=None, restarts=0, flags=(), status="up")
    assert cleared.remarks is NO_REMARKS and (cleared.last_error, cleared.restarts, cleared.flags) == (
        None,
        0,
        (),
    )
    kept = dataclasses.replace(view, status="up")
    assert kept.remarks is view.remarks  # a copy that changes none of them shares them
