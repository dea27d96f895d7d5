"""Run detail of the check's job, as the app draws it: the real app, headless, opened on the run;
its Logs, Metrics and Resources tabs saved as SVG, and their text searched for the numbers the
run's own files hold (its peak GPU memory, its GPU in the Resources table)."""

from __future__ import annotations

import asyncio
import html
import re
from typing import Any

from .context import Context
from .report import Step

SIZE = (132, 40)
# Each tab, by its key and the name of its screenshot.
TABS = (("1", "detail-logs"), ("2", "detail-metrics"), ("4", "detail-resources"))
WAIT_SEC = 30.0


def svg_text(svg: str) -> str:
    """The characters of a Rich/Textual SVG screenshot, line by line as drawn."""
    spans = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    return html.unescape(" ".join(spans)).replace("\xa0", " ")


async def _until(pilot: Any, app: Any, shown: str) -> str:
    """The screen's text once it shows ``shown`` (or, after WAIT_SEC, whatever it shows):
    the screenshot waits for the data, so a slow machine gets the same picture as a fast one."""
    text = ""
    for _ in range(int(WAIT_SEC / 0.25)):
        await pilot.pause()
        text = svg_text(app.export_screenshot())
        if shown in text:
            break
        await asyncio.sleep(0.25)
    return text


async def _shoot(ctx: Context, run_id: str, shown: dict[str, str]) -> dict[str, str]:
    """The tabs' texts; ``shown``: per tab, a text that says its data has arrived."""
    from ddp_tui.config import Profile
    from ddp_tui.remote.cluster import Cluster
    from ddp_tui.tui.app import DdpTuiApp

    profile = Profile(scheduler="local", runs_root=str(ctx.runs_root))
    app = DdpTuiApp(lambda _prompter: Cluster.open(profile), profile=profile)
    texts: dict[str, str] = {}
    async with app.run_test(size=SIZE) as pilot:
        # The Jobs table lists the newest run first: the check's job, submitted last.
        for _ in range(int(WAIT_SEC / 0.25)):
            await asyncio.sleep(0.25)
            if app.snapshot is not None and any(r.run_id == run_id for r in app.snapshot.runs):
                break
        await pilot.press("enter")
        for key, name in TABS:
            await pilot.press(key)
            texts[name] = await _until(pilot, app, shown[name])
            app.save_screenshot(f"{name}.svg", str(ctx.out))
    return texts


def run(ctx: Context, step: Step, run_id: str, peak: str) -> None:
    """Screenshots of Run detail, and the checks of what they show (``peak``: the peak GPU
    MiB of the run's metrics.csv, empty on a CPU)."""
    shown = {
        "detail-logs": "[ddp-tui] launcher exited",
        # On a GPU the run's own peak; on a CPU the column has no figure to wait for.
        "detail-metrics": f"{float(peak):.0f}" if ctx.cuda and peak else "Peak MiB",
        "detail-resources": "samples over",
    }
    texts = asyncio.run(_shoot(ctx, run_id, shown))
    step.details["screenshots"] = [f"{name}.svg" for _, name in TABS]
    shown = " ".join(texts.values())
    if run_id not in shown:
        step.fail(f"Run detail did not show {run_id}")
        return
    metrics = texts.get("detail-metrics", "")
    if "Peak MiB" not in metrics:
        step.fail("the Metrics tab has no Peak MiB column")
    if ctx.cuda and peak:
        figure = f"{float(peak):.0f}"
        if figure not in metrics:
            step.fail(f"the Metrics tab does not show the peak GPU memory {figure} MiB")
        else:
            step.details["Run detail shows peak GPU MiB"] = figure
    resources = texts.get("detail-resources", "")
    # The plot is drawn only when the run has GPU samples.
    if ctx.cuda and "GPU memory MiB" not in resources:
        step.fail("the Resources tab draws no GPU memory")
