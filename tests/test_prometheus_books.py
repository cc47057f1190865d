"""The Prometheus source's books of targets hold one instance string a target: a target named again by
a later identity read, or read in a fleet's detail, is filed under the string its books already hold, not
under the copy each answer's parse makes (one more string a task at 100,000 tasks, ~6 MB). What the books
say is unchanged. No server: the rows are what decoding hands on."""

from __future__ import annotations

from cmdare.collectors.prometheus.fleet import FoldedDetail
from cmdare.collectors.prometheus.source import PrometheusAPISource


def _identities(n: int) -> list[dict[str, object]]:
    """One identity row a task, every label a new string (as each answer's parse makes them)."""
    return [
        {"metric": {"instance": "".join(["10.0.0.", str(i), ":9400"]), "job": "bench",
                    "exported_job": "big", "task": f"worker-{i}", "role": "worker", "gpu": "K80"},
         "value": [0, "1"]}
        for i in range(n)
    ]  # fmt: skip


def test_a_target_read_again_is_filed_under_the_string_its_books_hold():
    src = PrometheusAPISource("http://127.0.0.1:9", focus_from=2)
    first = src._targets(_identities(5), 100.0)
    again = src._targets(_identities(5), 102.0)
    assert list(again) == list(first)  # the same targets, in the same order
    held = {k: k for k in src._known}
    for ident in again:
        assert ident is held[ident]  # the string the books hold, not this answer's
        assert src._slots[src._current[ident]] is ident
    assert [src._known[i].info.key for i in again] == [f"big/worker-{i}" for i in range(5)]
    # the fleet reader is handed the instance strings the books hold
    assert all(inst is held[inst] for inst in src.fleet_reader._order)
    # and lays its columns out over the source's slots: the same list and dict, not copies
    columns = src.fleet_reader._columns
    assert columns is not None and columns.instances is src._slots and columns.index is src._current

    detail = FoldedDetail(
        times={"".join(["10.0.0.", str(i), ":9400"]): "101" for i in (1, 3)},
        values={"".join(["10.0.0.", str(i), ":9400"]): {"k": 1.0} for i in (1, 3)},
    )
    read = src._reuse_folded(detail, [])
    assert read is not None and list(read) == ["10.0.0.1:9400", "10.0.0.3:9400"]
    assert all(ident is held[ident] for ident in read)
    assert all(tg.info is src._known[i].info for i, tg in read.items())
