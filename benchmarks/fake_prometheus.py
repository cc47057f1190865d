"""A synthetic Prometheus HTTP API answering for ``n`` tasks, in its own process (for
benchmarks/large_inputs.py: a real Prometheus cannot scrape 100,000 targets on this machine). It reads
the shape of the queries cmdare-tui sends and answers like a server that has every task:

* ``count(cmdare_task_info…)`` (and of its instances) → ``n``; the longest scrape → 12 ms;
  ``topk(k, …)`` anywhere → only ``k`` tasks (as Prometheus would); a "scraped since T" filter
  (``timestamp(…) > T``) → only the tasks whose last scrape is later than T;
* the ``or``-ed value queries (``label_replace(…, "cmdare_key", "KEY", …)``) → one row per task and
  key a data-parallel worker has (no PS, no pipeline series);
* ``cmdare_task_info`` → one identity row per task; ``cmdare_job_info`` → one job; ``up == 0`` → none;
* a large fleet's queries (collectors/prometheus/fleet.py): a per-task rate column → one row per task
  (counters grow at 1/s; compute seconds a step 0.1 s plus a little per task), preemptions (``== 1``)
  → none, a detail query → the raw series and scrape times of the instances it lists;
* node detail and range (backfill) queries → empty answers.

With ``scrape_s`` (benchmarks/prometheus_scale.py ``--synthetic``) it answers like a server scraping
every ``scrape_s`` seconds: each task's samples change once a scrape (tasks spread over the interval,
as Prometheus spreads its scrapes), counters grow at 1/s, no task is preempted. Without it (the
large-input case) every answer carries new values.

    with FakePrometheus(100_000) as prom: prom.url
"""

from __future__ import annotations

import asyncio
import math
import re
import sys
import time
from urllib.parse import parse_qs, urlsplit

import orjson
from child_server import ChildServer

_KEY = re.compile(r'"cmdare_key", "([^"]+?)"')
_TOPK = re.compile(r"topk\((\d+),")
# "scraped since T" (prometheus/aggregate.py changed_tasks)
_SINCE = re.compile(r"timestamp\([^()]*\) > ([0-9.]+)\)")


def _instance(i: int) -> str:
    return f"10.{i // 62500}.{i // 250 % 250}.{i % 250}:9400"


def _last_scrape(i: int, now: float, scrape_s: float) -> float:
    """When task ``i`` was last scraped (tasks spread over the interval, ``scrape_s`` apart)."""
    off = (i * 0.6180339887) % 1.0 * scrape_s
    return math.floor((now - off) / scrape_s) * scrape_s + off


def _scraped(i: int, key: str, now: float, scrape_s: float) -> str:
    """Task ``i``'s value of ``key`` as of its last scrape, ``scrape_s`` seconds apart."""
    t = _last_scrape(i, now, scrape_s)
    if key.startswith("__"):
        return repr(t)
    return "0" if "preempted" in key else repr(i + t - 1.7e9)


_DETAIL = re.compile(r'^\{__name__=~"([^"]+)",instance=~"([^"]*)"\}')
_RATE = re.compile(r"^\(?max by \(instance\) \(rate\(([a-z_]+)")
_INSTANCES: dict[str, int] = {}


def _index(inst: str, n: int) -> int | None:
    """Task ``i`` of an instance string (the inverse of :func:`_instance`), None past ``n``."""
    if not _INSTANCES:
        _INSTANCES.update({_instance(i): i for i in range(n)})
    return _INSTANCES.get(inst)


def _detail(m: re.Match, n: int, now: float, scrape_s: float) -> list[dict]:
    """A large fleet's detail query (prometheus/fleet.py detail_query): raw series of the listed
    instances, and their scrape times."""
    names = [x for x in m.group(1).split("|") if "ps_bytes" not in x and "stage" not in x]
    insts = [x.replace("\\\\", "") for x in m.group(2).split("|") if x]
    tasks = [i for i in (_index(x, n) for x in insts) if i is not None]
    rows = [
        {"metric": {"__name__": name, "instance": _instance(i), "job": "bench"},
         "value": [now, _scraped(i, name, now, scrape_s) if scrape_s else str(i + now % 100)]}
        for i in tasks for name in names
    ]  # fmt: skip
    rows += [{"metric": {"instance": _instance(i), "cmdare_key": "__scrape_time"},
              "value": [now, _scraped(i, "__t", now, scrape_s) if scrape_s else str(now - 1)]} for i in tasks]  # fmt: skip
    return rows


def _column(metric: str, n: int, now: float) -> list[dict]:
    """A per-task rate column (prometheus/fleet.py column_queries): counters grow at 1/s; task i's step
    time is 0.1 s plus a little per task (so the slowest are distinct)."""
    step_time = {"cmdare_step_seconds_sum": lambda i: 0.1 + i % 97 / 970}  # sum / count: count grows at 1/s
    value = step_time.get(metric, lambda i: 1.0)
    return [{"metric": {"instance": _instance(i)}, "value": [now, repr(value(i))]} for i in range(n)]


def answer(query: str, n: int, scrape_s: float = 0.0) -> bytes:
    """The JSON body for ``query`` over ``n`` tasks (``scrape_s``: see the module's docstring)."""
    now = time.time()
    m = _TOPK.search(query)
    k = min(n, int(m.group(1))) if m else n
    if "[" in query and "s]" in query:  # backfill: a range selector
        return b'{"status":"success","data":{"resultType":"matrix","result":[]}}'
    detail, rate = _DETAIL.match(query), _RATE.match(query)
    if detail or rate or ") == 1" in query:
        rows = _detail(detail, k, now, scrape_s) if detail else _column(rate.group(1), k, now) if rate else []
    elif query.startswith("vector(time())"):
        rows = [{"metric": {}, "value": [now, str(now)]}]
    elif query.startswith("count("):
        rows = [{"metric": {}, "value": [now, str(n)]}]
    elif "node_" in query or "DCGM" in query or "== 0" in query:
        rows = []
    elif "scrape_duration_seconds" in query:
        rows = [{"metric": {}, "value": [now, "0.012"]}]
    elif "cmdare_job_info" in query:
        rows = [
            {"metric": {"job": "bench", "exported_job": "big", "model": "ResNet-50"}, "value": [now, "1"]}
        ]
    elif "cmdare_key" in query:
        since = _SINCE.search(query)
        tasks = range(k)
        if since and scrape_s:  # only the tasks scraped after ``since``
            tasks = [i for i in tasks if _last_scrape(i, now, scrape_s) > float(since.group(1))]
        rows = [
            {
                "metric": {"instance": _instance(i), "cmdare_key": key},
                "value": [
                    now,
                    _scraped(i, key, now, scrape_s)
                    if scrape_s
                    else str(now - 1 if key.startswith("__") else i + now % 100),
                ],
            }
            for key in _KEY.findall(query)
            if "ps_bytes" not in key and "stage" not in key  # a worker has no PS or pipeline series
            for i in tasks
        ]
    else:  # identities
        rows = [
            {"metric": {"__name__": "cmdare_task_info", "instance": _instance(i), "job": "bench", "exported_job": "big",
                        "task": f"worker-{i}", "role": "worker", "gpu": "K80"}, "value": [now, "1"]}
            for i in range(k)
        ]  # fmt: skip
    return orjson.dumps({"status": "success", "data": {"resultType": "vector", "result": rows}})


async def _handle(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int, scrape_s: float
) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            line = head.split(b"\r\n", 1)[0].decode()
            length = re.search(rb"(?i)content-length: *(\d+)", head)
            body = await reader.readexactly(int(length.group(1))) if length else b""
            target = line.split(" ")[1]
            params = parse_qs(urlsplit(target).query) | parse_qs(body.decode())
            out = answer(params.get("query", [""])[0], n, scrape_s)
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(out)
                + out
            )
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def serve(n: int, scrape_s: float = 0.0) -> None:
    srv = await asyncio.start_server(lambda r, w: _handle(r, w, n, scrape_s), "127.0.0.1", 0, limit=1 << 20)
    print(srv.sockets[0].getsockname()[1], flush=True)
    async with srv:
        await srv.serve_forever()


class FakePrometheus(ChildServer):
    """``with FakePrometheus(n, scrape_s) as prom: prom.url`` (the API server in a child process)."""

    def __init__(self, n: int, scrape_s: float = 0.0) -> None:
        super().__init__(__file__, str(n), str(scrape_s))
        self.n, self.scrape_s = n, scrape_s

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else 0.0))
