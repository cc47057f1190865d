"""Issue 18 (screens): the Planner's answer is readable at 120x40 and 80x24 — Δ as three short columns,
compact region codes that are never cut, Region/Prov/Bound on screen — and a narrow sorted column keeps its
arrow. The real app on the real demo cluster, driven by its Pilot."""

from __future__ import annotations

import pytest

from cmdare.tui.format import region_code
from cmdare.tui.panes.planner import RANKED_COLUMNS
from cmdare.tui.widgets.table import FilterTable
from tests.pilot_app import fast_demo_app, wait_for

pytestmark = pytest.mark.slow

REGIONS = ["us-east1", "us-central1", "us-west1", "europe-west1", "europe-west4", "asia-east1", "us-east4",
           "us-east-1", "us-east-2", "eu-central-1", "ap-northeast-1", "asia-southeast1"]  # fmt: skip


def test_region_codes_are_short_distinct_and_never_cut_names():
    codes = [region_code(r) for r in REGIONS]
    assert codes[:6] == ["use1", "usc1", "usw1", "euw1", "euw4", "ase1"]
    assert len(set(codes)) == len(codes) and all(len(c) <= 6 for c in codes)
    assert region_code("moon-base7") == "moon-base7"  # unknown words: the whole name, not a cut one


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_planner_answer_fits_with_region_prov_bound_on_screen(size):
    app = fast_demo_app(first_revocation_s=1000)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.state is not None and getattr(app.state.planner.job("resnet32-p100"), "ranked", None) is not None,
                       timeout=30)  # fmt: skip
        await pilot.press("3")
        await pilot.pause(0.5)
        table = app.query_one("#ranked-table", FilterTable)
        visible = table.scrollable_content_region.width
        widths = [c.get_render_width(table) for c in table.ordered_columns]
        labels = [label for label, _ in RANKED_COLUMNS]
        assert sum(widths[: labels.index("Bound") + 1]) <= visible  # Shape … Region, Prov, Bound on screen
        for i in range(table.row_count):
            row = [str(c) for c in table.get_row_at(i)]
            for (label, width), cell in zip(RANKED_COLUMNS, row, strict=True):
                assert len(cell) <= width, (label, cell)  # nothing is cut
        rows = [[str(c) for c in table.get_row_at(i)] for i in range(1, table.row_count)]
        assert rows and all(r[3].endswith("%") and r[4].endswith("%") for r in rows if r[4] != "–")
        for _ in range(labels.index("Bound") + 1):
            await pilot.press("s")
        await pilot.pause(0.2)
        assert str(table.columns["Bound"].label).endswith("▲")  # the narrow column keeps its arrow


def test_a_boundary_says_which_capacity_its_wire_time_divides_by():
    from cmdare.planner.geo.geo_live import wan_bound_from_live
    from cmdare.tui.panes.planner import PIPELINE_COLUMNS, pipeline_rows
    from cmdare.tui.widgets.explain import boundary_wire_rows

    sent = {("2", "3"): 45e6, ("5", "6"): 45e6}  # the same bytes/s on both: the pipeline's pace
    known, unknown = wan_bound_from_live({"2": 0.21, "5": 0.21}, sent, 0.45, None, {("2", "3"): 5.0})
    assert (known.link_gbps, unknown.link_gbps) == (5.0, None)
    assert known.transfer_seconds == pytest.approx(100e6 * 8 / 5e9)
    assert unknown.transfer_seconds == pytest.approx(100e6 * 8 / (unknown.measured_gbps * 1e9))
    labels = [label for label, _ in PIPELINE_COLUMNS]
    rows = [dict(zip(labels, map(str, r.values()), strict=True)) for r in pipeline_rows([known, unknown], {})]
    assert (rows[0]["Link Gb/s"], rows[0]["Wire s/mb"]) == ("5.00", "0.160")
    assert (rows[1]["Link Gb/s"], rows[1]["Wire s/mb"]) == ("≥0.36", "≤2.222")  # bounds, not figures
    assert rows[0]["Sent Gb/s"] == rows[1]["Sent Gb/s"] == "0.36"
    said = dict(boundary_wire_rows(unknown))
    assert "unknown" in said["Capacity"] and "upper bound" in said["Capacity"]
    assert said["Wire s/mb"] == "100.0 MB × 8 ÷ 0.36 Gbit/s = 2.222 s"
