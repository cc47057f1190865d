"""The embedded demo (P100 + 1 PS, plateauing at the measured 1-PS curve) raises ps-saturation with its
evidence and the suggested extra PS through the real session, and flags its slow WAN link; no Pilot."""

from __future__ import annotations

import asyncio

import pytest

from cmdare.demo.cluster import DemoCluster
from cmdare.tui.options import SessionOptions
from cmdare.tui.session import MonitorSession

pytestmark = pytest.mark.slow


async def test_demo_raises_ps_saturation_with_evidence_and_fix():
    session = MonitorSession(
        SessionOptions(demo=True, refresh=0.5),
        demo_factory=lambda: DemoCluster(geo=True, first_revocation_s=600),
    )
    session.start()
    try:
        state = None
        for _ in range(
            40
        ):  # both raise after 3-9 refreshes (hysteresis, the WAN window); a busy machine takes more
            state = await session.refresh()
            if any(a.kind == "ps-saturation" for a in state.alerts) and any(
                a.kind == "wan-bound" for a in state.alerts
            ):
                break
            await asyncio.sleep(0.5)
    finally:
        await session.aclose()
    assert state is not None
    kinds = {a.kind: a for a in state.alerts}
    ps = kinds["ps-saturation"]
    assert ps.subject == "resnet32-p100/ps-0"
    ev = ps.evidence
    assert ev["efficiency"] < 0.8 and ev["ps_utilization"] >= 0.7 and ev["window_s"] > 0
    assert ev["workers_up"] == 8 and ev["worker_step_time_ratio"] < 1.3
    assert ps.fix and "add a parameter server" in ps.fix and "$" in ps.fix
    assert ev["fix_ps"] == 2 and ev["fix_predicted_gain"] > 0.3
    wan = kinds["wan-bound"]
    assert wan.subject == "lm-pipeline-3dc/5->6" and wan.evidence["capacity_known"]
    assert not [a for a in state.alerts if a.kind in ("straggler", "input-bound")]
    doc = state.to_json()
    assert {a["kind"] for a in doc["alerts"]} >= {"ps-saturation", "wan-bound"}
