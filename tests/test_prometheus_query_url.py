"""A query's GET URL is encoded once (``prometheus/query_url.py``): httpx sends it as it is, a query
string parser reads back the exact query, and Debian's Prometheus evaluates what was asked, whatever
characters the query holds; a large fleet's detail queries fit the GET limit as sent."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from cmdare.collectors.prometheus.fleet import detail_queries
from cmdare.collectors.prometheus.query_url import query_url
from cmdare.collectors.prometheus.source import MAX_GET_URL, PrometheusAPISource, _get_url
from tests.prom_server import prometheus_server  # noqa: F401 (fixture)

BASE = "http://127.0.0.1:9090/api/v1/query"
ODD = [
    'up{job="cmdare-test"} == 0',
    'label_replace(vector(1), "x", "a+b;c&d#e%f=g?h/i:j,k(l)m[n]o{p}q|r~s!t$u\'v*w@x y\\"z", "", "")',
    "sum by (instance) (rate(x[1m])) / ignoring(le) é ü 日本 \t\n\x7f",
]


@pytest.mark.parametrize("query", ODD, ids=range(len(ODD)))
def test_httpx_sends_the_url_as_made_and_the_query_reads_back_exactly(query: str) -> None:
    url = query_url(BASE, {"query": query, "time": "1796000000.000"})
    sent = httpx.URL(url)
    assert str(sent) == url  # nothing left for httpx to quote
    assert httpx.Request("GET", sent).url.raw_path.decode() == urlsplit(url).path + "?" + urlsplit(url).query
    assert parse_qs(urlsplit(url).query, keep_blank_values=True) == {
        "query": [query],
        "time": ["1796000000.000"],
    }
    got = _get_url(BASE, {"query": query})
    assert got is not None and got.params["query"] == query


def test_detail_queries_fit_the_get_limit_as_sent() -> None:
    instances = [f"10.{i // 250}.{i % 250}.7:9400" for i in range(1200)]
    queries = detail_queries(instances)
    named = []
    for q in queries:
        url = _get_url(BASE, {"query": q, "time": "1796000000.000"})
        assert url is not None and len(str(url)) <= MAX_GET_URL
        named += re.search(r'instance=~"([^"]*)"', q).group(1).replace("\\\\", "").split("|")  # type: ignore[union-attr]
    assert sorted(named) == sorted(instances)


@pytest.mark.slow
async def test_prometheus_evaluates_the_query_as_written(prometheus_server) -> None:  # noqa: F811
    prom = prometheus_server([], scrape_interval="1s")
    src = PrometheusAPISource(prom.url, timeout=10.0)
    value = "a+b;c&d#e%f=g?h/i:j,k(l)m[n]o{p}q|r~s!t$u'v*w@x y é"
    async with httpx.AsyncClient() as client:
        replacement = value.replace("$", "$$")  # label_replace expands $name: $$ is a dollar sign
        [row] = await src.query(client, f'label_replace(vector(1), "x", "{replacement}", "", "")')
    assert row["metric"] == {"x": value}
