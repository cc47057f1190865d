"""node_exporter and DCGM detail through a Prometheus server, found by *host* whatever the selector.

The job selector (``--selector``) chooses the training tasks; their hosts (the ``instance`` labels'
host parts) then choose the detail: ``{instance=~"(host1|host2)(:[0-9]+)?"}`` whatever the job,
``exported_job`` or ``honor_labels`` of the node_exporter and DCGM scrape configs. node_exporter
series are aggregated on the server (``node_cpu_seconds_total`` alone is ~128 series a node); DCGM
series (a few a GPU) come raw, so the GPU model, the device and MIG instance labels survive and the
same fold as a scraped page applies (:mod:`hostdetail`). Pure functions: query text in, polls out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from cmdare.collectors import metrics as M
from cmdare.collectors.hostdetail import (
    DCGM_NAMES,
    HOST_JOB,
    MAX_DEVICES,
    DcgmFold,
    device_id,
    forget_memory,
    host_name,
)
from cmdare.collectors.prometheus.query_url import encoded
from cmdare.collectors.samples import TaskInfo, TaskPoll

KEY_LABEL = "cmdare_key"
T_KEY = "__scrape_time"
# the DCGM device indices read (0-99, or none): a page announcing 100,000 GPUs costs the server what 100 do
# (0.2 s instead of 10 s a query on a loaded test machine); no host has a hundred GPUs
GPU_INDEX = "[0-9]{0,2}"
# how many DCGM series an instance has (the answer holds at most MAX_DEVICES of each metric)
DCGM_COUNT_KEY = "__dcgm_series"

# characters of a node detail query's URL (the GET limit is 8,000: source.MAX_GET_URL; the rest is the
# server's address and the evaluation instant), as a large fleet's detail queries (fleet.DETAIL_URL_BUDGET).
# The query names its hosts in each of its nine selectors: ~1,800 characters of query, then ~50 a host
# (an IPv4 host among others of its subnet, as instance_matcher writes it): ~100 hosts a query
HOST_URL_BUDGET = 7000

# (series key, aggregation, metric, extra matchers)
_NODE_AGGREGATES = (
    (M.K_CPU_BUSY, "sum", M.NODE_CPU_SAMPLE, 'mode!="idle"'),
    (M.K_CPU_ALL, "sum", M.NODE_CPU_SAMPLE, ""),
    (M.K_NET_RX, "sum", M.K_NET_RX, 'device!="lo"'),
    (M.K_NET_TX, "sum", M.K_NET_TX, 'device!="lo"'),
    (M.K_MEM_TOTAL, "max", M.NODE_MEM_TOTAL.name, ""),
    (M.K_MEM_AVAIL, "max", M.NODE_MEM_AVAIL.name, ""),
)


def promql_string(regex: str) -> str:
    """A regex inside a PromQL double-quoted string (backslashes and quotes escaped)."""
    return regex.replace("\\", "\\\\").replace('"', '\\"')


def instance_matcher(hosts: Iterable[str]) -> str:
    """``instance=~"(h1|h2)(:[0-9]+)?"`` for the given hosts (exact host match, any port), as short as a
    URL can carry many: dots left unescaped (a dot matches itself too; an escaped one is ``%5C%5C.`` in
    a URL), and IPv4 hosts of one subnet written once (``10.0.3.(7|12|40)``): ~6 characters a host
    instead of ~30 escaped one by one, so five times as many hosts fit a GET (:func:`host_queries`).
    Another host that happens to match a loose dot is read as itself (its rows carry its own
    ``instance``)."""
    alts: list[str] = []
    for prefix, tails in _by_subnet(hosts).items():
        if prefix and len(tails) > 1:
            alts.append(f"{_host_regex(prefix)}({'|'.join(tails)})")
        else:
            alts += [_host_regex(prefix + t) for t in tails]
    regex = "(" + "|".join(alts) + ")(:[0-9]+)?"
    return f'instance=~"{promql_string(regex)}"'


def _by_subnet(hosts: Iterable[str]) -> dict[str, list[str]]:
    """``hosts`` (sorted, once each) by their part up to the last dot when what follows is a number (an
    IPv4 host's subnet: ``"10.0.3."``; ``""`` for any other name, whole), to their last parts."""
    out: dict[str, list[str]] = {}
    for host in sorted(set(hosts)):
        if host:
            prefix, tail = _split(host)
            out.setdefault(prefix, []).append(tail)
    return out


def _split(host: str) -> tuple[str, str]:
    """(``host``'s part up to its last dot, the number after it), or ("", ``host``) when no number ends it."""
    head, dot, tail = host.rpartition(".")
    return (head + dot, tail) if dot and tail.isascii() and tail.isdigit() else ("", host)


def _host_regex(host: str) -> str:
    """``host`` as a regex, its dots left as they are (see :func:`instance_matcher`)."""
    return re.escape(host).replace("\\.", ".")


def exact_instances(instances: Iterable[str], escape: Callable[[str], str] = re.escape) -> str:
    """``instance=~"a|b"`` matching exactly these instances (Prometheus anchors the regex);
    ``escape``: how each instance becomes a regex (``fleet`` leaves the dots as they are)."""
    alts = "|".join(escape(i) for i in sorted(set(instances)) if i)
    return f'instance=~"{promql_string(alts)}"'


def host_query(hosts: Iterable[str]) -> str:
    """One ``or`` query for the detail of ``hosts``: node aggregates by instance (tagged with
    ``cmdare_key``), raw DCGM series (device indices 0-99, at most :data:`MAX_DEVICES` of each metric an
    instance, and their count), and every instance's scrape time."""
    inst = instance_matcher(hosts)
    parts = []
    for key, agg, metric, extra in _NODE_AGGREGATES:
        sel = ",".join(x for x in (extra, inst) if x)
        parts.append(
            f'label_replace({agg} by (instance) ({metric}{{{sel}}}), "{KEY_LABEL}", "{key}", "", "")'
        )
    names = "|".join(sorted(DCGM_NAMES))
    dcgm = f'{{__name__=~"{names}",{inst},gpu=~"{GPU_INDEX}"}}'
    parts.append(f"topk by (instance, __name__) ({MAX_DEVICES}, {dcgm})")  # a 100,000-GPU page: bounded rows
    parts.append(f'label_replace(count by (instance) ({dcgm}), "{KEY_LABEL}", "{DCGM_COUNT_KEY}", "", "")')
    parts.append(
        f'label_replace(max by (instance) (timestamp(up{{{inst}}})), "{KEY_LABEL}", "{T_KEY}", "", "")'
    )
    return " or ".join(parts)


_MATCHERS = host_query([]).count("instance=~")  # the selectors that list the hosts (nine)
_BARE = len(encoded(host_query([])))  # a query's characters without its hosts (as sent: encoded)


def _host_cost(host: str, subnet: str) -> int:
    """The characters ``host`` adds to :func:`host_query`'s URL (its ``|`` too, in every selector) after
    a host of ``subnet`` (:func:`_split`): its last part alone when of the same subnet, else the whole
    host with a group's brackets (counted even when it stays alone: a bound, never short)."""
    prefix, tail = _split(host)
    if prefix and prefix == subnet:
        return _MATCHERS * len(encoded(tail + "|"))
    regex = f"{_host_regex(prefix)}({tail})" if prefix else _host_regex(host)
    return _MATCHERS * len(encoded(promql_string(regex) + "|"))


def fits_one_query(hosts: Iterable[str], budget: int = HOST_URL_BUDGET) -> bool:
    """Whether :func:`host_query` over ``hosts`` keeps its URL under ``budget`` characters (one GET)."""
    used, subnet = _BARE, ""
    for host in sorted(set(hosts)):
        used += _host_cost(host, subnet)
        subnet = _split(host)[0]
        if used > budget:
            return False
    return True


def host_queries(hosts: Iterable[str], budget: int = HOST_URL_BUDGET) -> list[str]:
    """:func:`host_query` over ``hosts`` (sorted) in as few queries as keep each one's URL (encoded as it
    is sent: :func:`~.query_url.encoded`) under ``budget`` characters, so each goes as a GET (read-only
    mode sends no POST); a host whose name alone is past the budget makes a query of its own."""
    out: list[str] = []
    chunk: list[str] = []
    used, subnet = _BARE, ""
    for host in sorted(set(hosts)):
        cost = _host_cost(host, subnet)
        if chunk and used + cost > budget:
            out.append(host_query(chunk))
            chunk, used, subnet = [], _BARE, ""
            cost = _host_cost(host, subnet)
        chunk.append(host)
        used += cost
        subnet = _split(host)[0]
    if chunk:
        out.append(host_query(chunk))
    return out


def _number(text: object) -> float | None:
    try:
        x = float(text)  # type: ignore[arg-type]  # any value: what float() refuses raises TypeError, caught below
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def host_polls(rows: list[dict[str, Any]], source: str, now: float, skew: float = 0.0) -> list[TaskPoll]:
    """One host-detail poll per host from the answer of :func:`host_query`, stamped with the
    node_exporter's own scrape time (else the newest of the host's instances, else ``now``)."""
    values: dict[str, dict[str, float]] = {}
    dcgm: dict[str, DcgmFold] = {}
    times: dict[str, dict[str, float]] = {}
    counters: dict[str, str] = {}  # host -> the instance its counters come from
    dcgm_series: dict[str, float] = {}  # host -> DCGM series its instances have (counted by the server)
    dcgm_read: dict[str, int] = {}  # host -> DCGM rows the answer holds
    refused: dict[str, list[str]] = {}  # host -> why each of its implausible values was refused
    bad_memory: dict[str, set[str]] = {}  # host -> DCGM devices with a value refused
    for r in rows:
        labels: Mapping[str, str] = r.get("metric", {})
        val = _number(r.get("value", [0, ""])[1])
        inst = labels.get("instance", "")
        host = host_name(inst)
        if val is None or not host:
            continue
        key, name = labels.get(KEY_LABEL, ""), labels.get("__name__", "")
        if key == T_KEY:
            times.setdefault(host, {})[inst] = val
        elif key == DCGM_COUNT_KEY:
            dcgm_series[host] = dcgm_series.get(host, 0.0) + val
        elif key or name in DCGM_NAMES:  # a bad value goes (said), never the host
            if not key:
                dcgm_read[host] = dcgm_read.get(host, 0) + 1
            why = M.value_refusal(key or M.device_key(name), val)  # a DCGM value: one device's
            if why is not None:
                refused.setdefault(host, []).append(why)
                if name in (M.GPU_FB_USED.name, M.GPU_FB_FREE.name):  # the device's memory goes whole
                    bad_memory.setdefault(host, set()).add(device_id(labels))
            elif key:
                values.setdefault(host, {})[key] = val
                counters.setdefault(host, inst)
            else:
                dcgm.setdefault(host, DcgmFold()).add(name, labels, val)
    out = []
    for host in sorted(set(values) | set(dcgm) | set(refused)):
        vals = dict(values.get(host, {}))
        fold = dcgm.get(host)
        if fold is not None:
            forget_memory(fold, bad_memory.get(host, set()))
            vals.update(fold.values())
        ts = times.get(host, {})
        t = ts.get(counters.get(host, ""), max(ts.values(), default=math.nan)) - skew
        info = TaskInfo(job=HOST_JOB, task=host, role="node", gpu=fold.model if fold else "")
        series, read = dcgm_series.get(host, 0.0), dcgm_read.get(host, 0)
        note = fold.note if fold is not None else None
        if series > read:  # the server held back past MAX_DEVICES of a metric
            note = f"GPU detail: {read:,} of {series:,.0f} DCGM series read (at most {MAX_DEVICES} devices a host)"
        out.append(
            TaskPoll(
                source=f"{source}#host/{host}",
                t=t if math.isfinite(t) else now,
                ok=True,
                info=info,
                values=vals,
                host=host,
                host_only=True,
                error="; ".join(n for n in (_refused_note(refused.get(host)), note) if n) or None,
            )
        )
    return out


def _refused_note(why: list[str] | None) -> str | None:
    """One line on a host's implausible values refused (the first named), or None."""
    if not why:
        return None
    return f"{len(why)} implausible value(s) refused: {why[0]}"
