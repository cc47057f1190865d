"""The app's writes carry a style's code once per run of it (tui/compact_driver.py, issue 28): the terminal
shows every character in the style it had, on the real app's frames, in fewer bytes (a fifth fewer at least
here; the demo's help-close frame at 120×40 through tmux: 22.4 → 11.0 kB)."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from cmdare.tui.app import CmdareApp
from cmdare.tui.compact_driver import CompactDriver, compact_styles
from tests.test_tui_keys import settled
from tests.test_tui_snapshots import fixed_app

ESCAPE = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])|\x1b|[^\x1b]")


def painted(data: str) -> list[tuple[int, int, str, tuple[str, ...]]]:
    """What a terminal shows for ``data``: each character written, where, with the style codes in force
    (the codes since the last reset). Cursor moves (``ESC[y;xH``) and newlines move; other escapes are
    kept as they are, in order."""
    out: list[tuple[int, int, str, tuple[str, ...]]] = []
    style: list[str] = []
    x = y = 0
    for m in ESCAPE.finditer(data):
        params, final = m.group(1), m.group(2)
        if final == "m":
            style = [] if params in ("", "0") else [*style, params]
        elif final == "H":
            y, x = (int(v) - 1 for v in params.split(";"))
        elif final is not None or m.group() == "\x1b":
            out.append((-1, -1, m.group(), tuple(style)))
        elif m.group() == "\n":
            y, x = y + 1, 0
        else:
            out.append((y, x, m.group(), tuple(style)))
            x += 1
    return out


def test_a_reset_and_the_same_style_again_are_left_out_and_nothing_else():
    a, b = "\x1b[1;38;5;253;48;5;233m", "\x1b[38;5;253;48;5;233m"
    row = f"\x1b[0m{a}Job \x1b[0m{a}resnet\x1b[0m\x1b[3;72H{a}│\x1b[0m{b}x\x1b[0m"
    assert compact_styles(row) == f"\x1b[0m{a}Job resnet\x1b[3;72H│\x1b[0m{b}x\x1b[0m"
    # at the start of a write the codes in force are unknown: the first style is taken as stacked
    assert compact_styles(row[4:]) == f"{a}Job \x1b[0m{a}resnet\x1b[3;72H│\x1b[0m{b}x\x1b[0m"
    # two codes in force (not one): a reset before the second is not the same state
    stacked = "\x1b[0m\x1b[1m\x1b[31mred\x1b[0m\x1b[31mred"
    assert painted(compact_styles(stacked)) == painted(stacked)
    assert "\x1b[1m" in compact_styles(stacked) and compact_styles(stacked).count("\x1b[0m") == 2
    # a newline, text without a style and any other escape come after the held reset
    for after in ("\n", "plain", "PATH", "\x1b[?25l", "\x1b]8;;https://x\x1b\\"):
        data = f"{a}x\x1b[0m{after}{a}y\x1b[0m"
        assert painted(compact_styles(data)) == painted(data), after
    assert compact_styles("\x1b[?1000h") == "\x1b[?1000h" and compact_styles(f"{a}x\x1b[0m").endswith(
        "\x1b[0m"
    )


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_the_apps_frames_paint_the_same_in_fewer_bytes(size: tuple[int, int]):
    """Whole frames of the app on fixed data (help open, the Job pane, help closed) and the frames the
    help's close writes (the cells under the box: cursor moves between runs of cells), in the codes of a
    256-colour terminal (tmux's) and of a true-colour one."""
    terminals = [
        Console(file=io.StringIO(), force_terminal=True, color_system=c) for c in ("256", "truecolor")
    ]
    app, before = fixed_app()
    assert issubclass(CmdareApp().get_driver_class(), CompactDriver)  # (tests run without TEXTUAL_DRIVER)
    async with app.run_test(size=size) as pilot:
        await before(pilot)
        await settled(app, pilot)
        compositor = app.screen._compositor
        frames: list[str] = []
        for key in ("question_mark", "2", "escape", "1", "question_mark"):
            await pilot.press(key)
            await pilot.pause()
            update = compositor.render_update(full=True)
            frames += [update.render_segments(terminal) for terminal in terminals]
        real_render = compositor.render_update

        def render_update(*args: object, **kw: object):  # noqa: ANN202 (a spy on the real method)
            update = real_render(*args, **kw)  # type: ignore[arg-type]
            if update is not None:
                frames.extend(update.render_segments(terminal) for terminal in terminals)
            return update

        compositor.render_update = render_update  # type: ignore[method-assign]
        await pilot.press("escape")
        await pilot.pause()
    assert len(frames) > 10
    for frame in frames:
        assert painted(compact_styles(frame)) == painted(frame)
    whole, partial = frames[:10], frames[10:]  # (the partial ones: the close's frame and small ones after it)
    for written in (whole[0::2], whole[1::2], partial[:1], partial[1:2]):  # (0.58-0.75 on this fixed data)
        assert sum(len(compact_styles(f).encode()) for f in written) <= 0.8 * sum(
            len(f.encode()) for f in written
        )
