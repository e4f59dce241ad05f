"""Regenerate docs/screenshot.svg and docs/screen.txt: the UI on the spmv-u demo, as Textual
exports it (`python docs/screenshot.py`; about a minute on a warm cache)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tuiprof.config import RunConfig  # noqa: E402
from tuiprof.session import Session  # noqa: E402
from tuiprof.tui.app import TuiprofApp  # noqa: E402

SIZE = (190, 48)


async def main() -> None:
    session = Session.open("spmv-u", RunConfig(trials=16, seed=0, sweep_trials=4))
    analysis = session.run()
    app = TuiprofApp(session=session, analysis=analysis, show_timing=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.5)
        await pilot.pause(0.5)
        app.save_screenshot(filename="screenshot.svg", path=str(HERE))
        strips = app.screen._compositor.render_strips()
        text = "\n".join("".join(seg.text for seg in strip).rstrip() for strip in strips)
        (HERE / "screen.txt").write_text(text + "\n")


if __name__ == "__main__":
    asyncio.run(main())
