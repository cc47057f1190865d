"""collectors/exporter/page_host.py: several exporters' /metrics pages served from one thread (the demo's
17), each on its own port, read by the real httpx client on 127.0.0.1."""

from __future__ import annotations

import socket
import threading

import httpx
import pytest

from cmdare.collectors.exporter import TrainingExporter, page_host
from cmdare.collectors.exporter.page_host import PageHost
from cmdare.demo.cluster import DemoCluster


def _page(port: int) -> str:
    return httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text


def test_each_exporter_answers_on_its_own_port_and_goes_when_stopped():
    host = PageHost()
    a = TrainingExporter("job", "worker", "worker-0")
    b = TrainingExporter("job", "ps", "ps-0")
    try:
        pa, pb = a.start(host=host), b.start(host=host)
        a.set_global_step(7)
        assert pa != pb
        assert 'task="worker-0"' in _page(pa) and "cmdare_global_step 7.0" in _page(pa)
        assert 'task="ps-0"' in _page(pb)
        a.stop()  # a revoked task: its port closes, the others still answer
        with pytest.raises(httpx.ConnectError):
            _page(pa)
        assert 'task="ps-0"' in _page(pb)
        again = TrainingExporter("job", "worker", "worker-0")  # its replacement, on the same port
        assert again.start(pa, host=host) == pa
        assert 'task="worker-0"' in _page(pa)
    finally:
        host.close()
    with pytest.raises(httpx.ConnectError):
        _page(pb)


def test_a_silent_client_is_dropped_and_the_pages_answer_again(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(page_host._QuietHandler, "timeout", 0.2)
    host = PageHost()
    try:
        port = TrainingExporter("job", "worker", "worker-0").start(host=host)
        with socket.create_connection(("127.0.0.1", port)):  # connects, says nothing
            assert 'task="worker-0"' in _page(port)  # answered once the silent one is dropped
    finally:
        host.close()


def test_the_demo_serves_every_exporter_from_one_thread():
    before = threading.active_count()
    demo = DemoCluster(geo=True, first_revocation_s=1000.0)
    try:
        targets = demo.start()
        assert len(targets) == 17
        assert threading.active_count() - before == 2  # the pages' thread and the simulation's
        assert all("cmdare_global_step" in _page(int(t.url.split(":")[2].split("/")[0])) for t in targets)
    finally:
        demo.stop()
    assert threading.active_count() == before
