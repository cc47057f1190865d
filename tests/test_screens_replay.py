"""Issue 18 (screens): at the end of a replay the status says the recording ended cleanly, with no
exception class name. A real recording (SQLite) replayed through the real poller."""

from __future__ import annotations

from cmdare.collectors.clock import ManualClock
from cmdare.collectors.lifecycle import Lifecycle
from cmdare.collectors.poller import Poller
from cmdare.collectors.recording.replay import ReplaySource
from cmdare.collectors.store import Store
from tests.test_collect_record import record_live


async def test_replay_end_is_a_clean_status_not_a_class_name(tmp_path):
    path = tmp_path / "rec.sqlite"
    await record_live(path)
    clock = ManualClock()
    src = ReplaySource(path, clock, speed=0.0)
    poller = Poller([src], Store(), lifecycle=Lifecycle(), clock=clock, interval=2.0)
    while (msg := (await poller.poll_once()).source_errors.get("replay")) is None:
        pass
    await poller.aclose()
    assert msg.startswith("recording ended cleanly (") and "ReplayFinished" not in msg
