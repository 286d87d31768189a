# SPDX-License-Identifier: GPL-3.0-or-later
"""What the GUI drivers share: their result, the timer-driven run of their steps, and a few lookups.

Runs inside Debian's Blender 3.4 (not under pytest): `gui_session.run_driver` copies this file beside the
driver, which puts its own folder on sys.path to import it. A driver is a list of steps, one called per timer
tick (the UI redraws between ticks); a step returns the delay before the next step, or None to be called again
(waiting for something). The result is written as JSON once, and Blender quits, when the steps end, when one
raises, when a wait takes too many ticks, or when the watchdog runs out.
"""

from __future__ import annotations

import json
import sys
import time
import traceback

import bpy

#: The legacy add-on's module name.
MODULE = "fabrik_ik"


class Session:
    """One driver run: its result dict, and its steps run from a timer."""

    def __init__(self, result_path: str, watchdog: float, poll: float, wait_ticks: int, **fields) -> None:
        self.result: dict = {"stage": "start", "blender": bpy.app.version_string,
                             "background": bpy.app.background, **fields}
        self.result_path, self.watchdog, self.poll, self.wait_ticks = result_path, watchdog, poll, wait_ticks
        self.started = time.monotonic()
        self.finished = False
        self.steps: list = []
        self.index = self.waits = 0

    def finish(self) -> None:
        """Write the result once and quit Blender."""
        if self.finished:
            return
        self.finished = True
        self.result["seconds"] = round(time.monotonic() - self.started, 2)
        with open(self.result_path, "w", encoding="utf-8") as handle:
            json.dump(self.result, handle, indent=1)
        bpy.ops.wm.quit_blender()

    def fail(self, message: str) -> None:
        """End the run with an error."""
        self.result["error"] = message
        self.finish()

    def run(self, steps: list, first_interval: float = 0.5) -> None:
        """Start calling the steps from a timer."""
        self.steps, self.index, self.waits = list(steps), 0, 0
        bpy.app.timers.register(self._tick, first_interval=first_interval)

    def _tick(self):
        if self.finished:
            return None
        stage = self.result["stage"]
        try:
            if time.monotonic() - self.started > self.watchdog:
                self.fail(f"the GUI did not answer in {self.watchdog:.0f} s at stage '{stage}'")
                return None
            delay = self.steps[self.index]()
            if delay is None:
                self.waits += 1
                if self.waits > self.wait_ticks:
                    self.fail(f"gave up waiting at stage '{self.result['stage']}'")
                    return None
                return self.poll
            self.index, self.waits = self.index + 1, 0
            return delay if self.index < len(self.steps) else None
        except Exception:
            self.fail(traceback.format_exc())
            return None


def addon():
    """The add-on's `fabrik_addon` package inside the installed legacy add-on."""
    return sys.modules[MODULE + ".fabrik_addon"]


def view3d() -> tuple:
    """The first window's 3D viewport: (window, screen, area, WINDOW region, UI region)."""
    window = bpy.context.window_manager.windows[0]
    area = next(a for a in window.screen.areas if a.type == 'VIEW_3D')
    regions = {region.type: region for region in area.regions}
    return window, window.screen, area, regions['WINDOW'], regions['UI']


def clear_startup_scene() -> None:
    """Remove the default startup file's cube, camera and light: they would only clutter the framing."""
    for name in ("Cube", "Camera", "Light"):
        if name in bpy.data.objects:
            bpy.data.objects.remove(bpy.data.objects[name])


def next_sidebar_tab(window, ui_region) -> None:
    """Ctrl+Tab on the sidebar's first panel header, which shows its next tab: inside the overlapping sidebar,
    so the UI region's panel handler gets the event, but not over a number field, which would keep it."""
    x = ui_region.x + ui_region.width // 2
    y = ui_region.y + ui_region.height - 15
    window.event_simulate('MOUSEMOVE', 'NOTHING', x=x, y=y)
    window.event_simulate('TAB', 'PRESS', x=x, y=y, ctrl=True)
    window.event_simulate('TAB', 'RELEASE', x=x, y=y, ctrl=True)


def load_rgba(path: str):
    """An image file's pixels as a (height, width, channels) float array, rows from the bottom (as window
    coordinates)."""
    import numpy

    image = bpy.data.images.load(path)
    width, height = image.size
    pixels = numpy.empty(width * height * image.channels, dtype=numpy.float32)
    image.pixels.foreach_get(pixels)
    channels = image.channels
    bpy.data.images.remove(image)
    return pixels.reshape(height, width, channels)
