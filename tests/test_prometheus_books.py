"""The Prometheus source's books of targets hold one instance string a target: a target named again by
a later identity read, or read in a fleet's detail, is filed under the string its books already hold, not
under the copy each answer's parse makes (one more string a task at 100,000 tasks, ~6 MB). What the books
say is unchanged. No server: the rows are what decoding hands on."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from cmdare.collectors.prometheus.fleet import FleetReader, FoldedDetail
from cmdare.collectors.prometheus.source import PrometheusAPISource
from cmdare.collectors.samples import TaskInfo


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


def _named(*tasks: tuple[str, str]) -> list[dict[str, object]]:
    """Identity rows of (instance, task) pairs."""
    return [
        {"metric": {"instance": inst, "job": "bench", "exported_job": "big", "task": task}, "value": [0, "1"]}
        for inst, task in tasks
    ]


def test_source_names_are_made_once_and_never_given_twice():
    """A target's source name is its own (``display#instance``, not listed) and the same string at each
    ask; a name carried on to a task's new address stays the same string, and the address it left, or a
    target whose own name it would be, is numbered."""
    src = PrometheusAPISource("http://127.0.0.1:9")
    src._targets(_named(("h:1", "a"), ("h:2", "b")), 100.0)
    first = src._source("h:1")
    assert first == "http://127.0.0.1:9#h:1" and src._source("h:1") is first
    assert src._source("h:2") == "http://127.0.0.1:9#h:2" and not src._in_use  # own names: not listed
    # a moves to h:3 (new); h:1 now answers for c
    src._targets(_named(("h:3", "a"), ("h:1", "c"), ("h:2", "b")), 102.0)
    assert src._source("h:3") is first and src.replaced == 1  # the same string: the same task
    assert src._source("h:1") == "http://127.0.0.1:9#h:1#2"
    # a target whose own name is the one h:1 holds now
    src._targets(_named(("h:3", "a"), ("h:1", "c"), ("h:2", "b"), ("h:1#2", "d")), 104.0)
    assert src._source("h:1#2") == "http://127.0.0.1:9#h:1#2#2"
    names = [src._source(i) for i in src._known]
    assert len(set(names)) == len(names)
    assert src._known["h:3"].backfilled  # its history is the task's, read at the old address


@settings(max_examples=60, deadline=None)
@given(
    tasks=st.dictionaries(st.text(min_size=1, max_size=6), st.text(min_size=1, max_size=6), max_size=40),
    extra=st.lists(st.text(max_size=6), max_size=10),
)
def test_the_focus_keys_find_the_instances_a_dict_of_keys_would(tasks: dict[str, str], extra: list[str]):
    """The fleet reader's look-up of the focus's task keys (by hash, in a sorted array) finds what a dict
    of task key → instance found (the dict it replaces)."""
    reader = FleetReader("")
    infos = {inst: TaskInfo(job="j", task=task) for inst, task in tasks.items()}
    reader.know(infos)
    by_key = {info.key: inst for inst, info in infos.items()}
    focus = {*[info.key for info in infos.values()][::2], *[f"j/{x}" for x in extra]}
    assert sorted(reader._keyed(focus)) == sorted({by_key[k] for k in focus if k in by_key})
    assert sorted(reader._keyed(set(focus))) == sorted({by_key[k] for k in focus if k in by_key})  # again
    reader.know({f"new-{inst}": info for inst, info in infos.items()})  # other instances: looked up anew
    assert sorted(reader._keyed(focus)) == sorted({f"new-{by_key[k]}" for k in focus if k in by_key})


def test_a_host_is_its_instance_string_when_they_are_equal():
    """An instance without a port is its own host: the books keep that one string, not an equal copy."""
    from cmdare.collectors.hostdetail import host_name

    inst = "".join(["node-", "7"])
    assert host_name(inst) is inst
    assert host_name("Node-7:9100") == "node-7" and host_name("[::1]:9100") == "::1"
    assert host_name("http://u@Gpu-1:9400/metrics") == "gpu-1"
    src = PrometheusAPISource("http://127.0.0.1:9")
    src._targets(_named((inst, "a"), ("10.0.0.1:9400", "b")), 100.0)
    assert src._host(inst) is inst and src._host("10.0.0.1:9400") == "10.0.0.1"


def test_a_scrape_time_handed_on_is_not_handed_on_again_until_a_new_one_or_a_new_naming():
    """Above ``detail_tasks`` tasks a target whose scrape time is the one handed on last is dropped (no
    poll); a new scrape is handed on; a target an identity read no longer names, or one that answers for
    another task now, is handed on afresh when read again."""
    from cmdare.collectors.prometheus.source import _Target

    src = PrometheusAPISource("http://127.0.0.1:9", detail_tasks=1)
    tasks = [(f"h:{i}", f"t{i}") for i in range(4)]
    src._targets(_named(*tasks), 100.0)

    def handed(times: dict[str, float], full: bool = False) -> list[str]:
        targets = {i: _Target(src._known[i].info, scrape_time=t) for i, t in times.items()}
        src._unchanged_targets(targets, full)  # full: the refresh read the identities
        return list(targets)

    assert handed({"h:0": 1.0, "h:1": 1.0, "h:2": math.nan}, True) == ["h:0", "h:1", "h:2"]
    assert handed({"h:0": 1.0, "h:1": 2.0, "h:2": math.nan}) == ["h:1", "h:2"]  # NaN is never "the same"
    src._targets(_named(tasks[1], tasks[0], tasks[3]), 102.0)  # h:2 no longer named
    assert handed({"h:0": 1.0, "h:1": 2.0}, True) == []
    src._targets(_named(*tasks), 104.0)  # h:2 named again
    assert handed({"h:0": 1.0, "h:2": 5.0}, True) == ["h:2"] and handed({"h:2": 5.0}) == []
    src._targets(_named(("h:0", "other"), *tasks[1:]), 106.0)  # h:0 answers for another task now
    assert handed({"h:0": 1.0, "h:1": 2.0}, True) == ["h:0"]
