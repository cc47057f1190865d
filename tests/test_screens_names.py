"""Issue 28 item 3: names you can read. Columns are as wide as what they hold (an empty Flag column takes
no room), and a name cut to fit keeps what tells it from its neighbours. Three real exporters on 127.0.0.1
named ``trainer-worker-0N-us-central1-a`` and three targets on one host that never answer, watched by the
real app (Pilot) at 80x24, 120x40 and 200x50; and the cutting rules on their own."""

from __future__ import annotations

import pytest
from rich.text import Text

from cmdare.collectors.exporter import TrainingExporter
from cmdare.tui.app import CmdareApp
from cmdare.tui.options import SessionOptions
from cmdare.tui.widgets.column_fit import cut_text, distinct_spans, fit_widths, natural_widths
from cmdare.tui.widgets.table import FilterTable
from tests.pilot_app import wait_for
from tests.prom_server import free_port

pytestmark = pytest.mark.slow

NAMES = [f"trainer-worker-0{i}-us-central1-a" for i in (1, 2, 3)]


def test_a_cut_keeps_what_tells_the_names_apart():
    spans = distinct_spans(NAMES)
    for width, want in ((31, NAMES), (18, [f"trainer-worker-0{i}…" for i in (1, 2, 3)])):
        assert [cut_text(Text(n), width, spans[n]).plain for n in NAMES] == want
    for width in (9, 12, 16, 20):
        cut = [cut_text(Text(n), width, spans[n]).plain for n in NAMES]
        assert len(set(cut)) == 3 and all(len(c) <= width for c in cut), cut
    hosts = ["127.0.0.1:9101", "127.0.0.1:9102", "127.0.0.1:9111"]
    spans = distinct_spans(hosts)
    assert [cut_text(Text(h), 9, spans[h]).plain for h in hosts] == ["127.…9101", "127.…9102", "127.…9111"]
    alone = "pytorch-ddp-example"  # nothing to tell it from: the middle goes, both ends stay
    assert cut_text(Text(alone), 9, distinct_spans([alone])[alone]).plain == "pyto…mple"


def test_columns_take_their_content_and_the_widest_give_way():
    assert natural_widths(["Status", "Flag", "Task"], [("up", "", "a"), ("x", "–", "bbbbbbb")],
                          [False, True, False]) == [6, 0, 7]  # fmt: skip
    assert fit_widths([9, 31, 6], [9, 9, 6], 100, 1) == [9, 31, 6]  # room: nothing cut
    assert fit_widths([9, 31, 6], [9, 9, 6], 40, 1) == [9, 19, 6]
    assert fit_widths([9, 31, 6], [9, 9, 6], 10, 1) == [9, 9, 6]  # floors hold; the table scrolls
    assert fit_widths([9, 31, 40], [9, 9, 6], 40, 1, through=1) == [9, 27, 40]  # later columns scroll


def screen_rows(table: FilterTable) -> list[str]:
    """The table's lines as drawn (header first)."""
    return [table.render_line(y).text for y in range(table.size.height)]


@pytest.fixture(scope="module")
def trainers():
    exporters = [TrainingExporter(job="pytorch-ddp-example", role="worker", task=n, gpu="T4",
                                  region="us-central1") for n in NAMES]  # fmt: skip
    ports = [e.start(port=0) for e in exporters]
    for e in exporters:
        e.step(0.1, examples=32)
    silent = [free_port() for _ in range(3)]  # nothing listens there: pending targets on one host
    yield [f"http://127.0.0.1:{p}/metrics" for p in ports], [f"http://127.0.0.1:{p}/metrics" for p in silent]
    for e in exporters:
        e.stop()


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 50)])
async def test_the_real_app_shows_names_that_tell_tasks_apart(trainers, size):
    up, silent = trainers
    app = CmdareApp(SessionOptions.of(targets=up + silent, refresh=0.5, timeout=0.3), poll=True)
    async with app.run_test(size=size) as pilot:
        table = app.query_one("#cluster-table", FilterTable)
        await wait_for(pilot, lambda: sum("trainer" in k for k in table.visible_keys()) == 3 and len(
            table.visible_keys()) == 6)  # fmt: skip
        await pilot.pause()
        lines = screen_rows(table)
        header = lines[0]
        assert "Flag" not in header  # no flag raised: no room taken
        rows = [line for line in lines[1:] if line.strip()]
        trainer_rows = [line for line in rows if "● up" in line]
        task = table.columns["Task"]
        if size[0] >= 200:
            assert all(any(n in line for line in trainer_rows) for n in NAMES), trainer_rows
        else:
            assert task.width < len(NAMES[0])  # cut to fit the pane…
        for i in (1, 2, 3):  # …and each still tells which worker it is
            assert sum(f"0{i}" in line for line in trainer_rows) == 1, trainer_rows
        for address in silent:  # host:port, the port kept whatever the width
            port = address.rsplit(":", 1)[1].removesuffix("/metrics")
            assert sum(port in line for line in rows) == 1, rows
        assert all(len(line) <= table.size.width for line in lines)
