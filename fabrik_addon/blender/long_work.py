# SPDX-License-Identifier: GPL-3.0-or-later
"""Long work in steps: progress in the status bar, Esc cancels and changes nothing.

An operator that mixes in `SteppedOperator` hands it a piece of work with
`step()`, `done`, `progress` ((done, total)), `cancel()` and `abandoned`
(set by `drop_running` when a file load drops the work, which puts itself in
`running` while it may be dropped). From a dialog or
a button it runs modal from timer events, a slice at a time; from a script,
or re-run from the redo panel, it runs to the end at once (Blender handles
no events meanwhile, so only the progress shows).
"""

from __future__ import annotations

import time

import bpy
from bpy.app.handlers import persistent

from . import app_handlers

__all__ = ["SceneWork", "SteppedOperator", "drop_running", "running"]

#: Seconds of work between two looks at the events.
SLICE = 0.1
#: Work in progress between a modal operator's timer events (a bake, Find Contacts): a file load drops it.
running: set = set()


class SceneWork:
    """What long work over a rig's frames shares: it takes the frame and live solving over (`hold`), checks it
    has not been dropped by a file load before each step (`check`), and puts them back when it lets go
    (`let_go`); dropped, it touches nothing of the file it worked on."""

    #: What the work is called in the message a dropped one raises.
    noun = "the work"
    abandoned = False

    def hold(self, scene: bpy.types.Scene, obj: bpy.types.Object, live_off: bool) -> None:
        """Remember the frame and live solving to put back (switched off where `live_off`) and be droppable."""
        self.scene, self.obj = scene, obj
        self._frame_before, self._live_before = scene.frame_current, obj.fabrik.live
        #: Set when a file load drops the work (`drop_running`): its data is gone, so it touches nothing more.
        self.abandoned = False
        if live_off:
            obj.fabrik.live = False
        running.add(self)

    def check(self) -> None:
        """Raise where a file load has dropped the work."""
        if self.abandoned:
            raise RuntimeError(f"{self.noun} was dropped (another file was loaded)")

    def let_go(self, live: bool | None = None) -> None:
        """Put the frame back, and live solving as it was (or `live`); nothing where the work was dropped."""
        running.discard(self)
        if self.abandoned:
            return
        self.obj.fabrik.live = self._live_before if live is None else live
        self.scene.frame_set(self._frame_before)


@persistent
def drop_running(_filepath: str | None = None) -> None:
    """Before a file loads: work in progress refers to data about to go; it must not touch it again."""
    for work in list(running):
        work.abandoned = True
    running.clear()


class SteppedOperator:
    """Runs `self._work` in steps (see the module). Subclasses set `_noun` ("Bake") and `_doing` ("Baking
    FABRIK"), and define `_start(context) -> bool` (sets `_work`, reports and returns False where there is
    nothing to do) and `_finish(context)` (the operator's result, once the work is done)."""

    _noun = "Work"
    _doing = "Working"
    _work = None
    _timer = None

    def run_at_once(self, context: bpy.types.Context):
        """Start the work and run it to the end in this call."""
        if not self._start(context):
            return {'CANCELLED'}
        wm = context.window_manager
        wm.progress_begin(0, self._work.progress[1])
        try:
            while not self._work.done:
                self._work.step()
                wm.progress_update(self._work.progress[0])
        except Exception as exc:  # never raise into Blender; the work puts back what it set up
            self._drop()
            self.report({'ERROR'}, f"{self._noun} stopped: {exc}")
            return {'CANCELLED'}
        finally:
            wm.progress_end()
        return self._finish(context)

    def run_modal(self, context: bpy.types.Context):
        """Start the work and run it from timer events, a slice at a time."""
        if not self._start(context):
            return {'CANCELLED'}
        wm = context.window_manager
        wm.progress_begin(0, self._work.progress[1])
        self._timer = wm.event_timer_add(0.001, window=context.window)
        wm.modal_handler_add(self)
        return {'RUNNING_MODAL'}

    def modal(self, context: bpy.types.Context, event: bpy.types.Event):
        if event.type == 'ESC':
            self._stop(context)
            self._drop()
            self.report({'INFO'}, f"{self._noun} cancelled; nothing was changed")
            return {'CANCELLED'}
        if event.type != 'TIMER':
            return {'RUNNING_MODAL'}
        try:
            began = time.perf_counter()
            while not self._work.done and time.perf_counter() - began < SLICE:
                self._work.step()
        except Exception as exc:
            self._stop(context)
            self._drop()
            self.report({'ERROR'}, f"{self._noun} stopped: {exc}")
            return {'CANCELLED'}
        done, total = self._work.progress
        context.window_manager.progress_update(done)
        context.workspace.status_text_set(f"{self._doing}: {100 * done // max(total, 1)}% (Esc to cancel)")
        if not self._work.done:
            return {'RUNNING_MODAL'}
        self._stop(context)
        return self._finish(context)

    def cancel(self, context: bpy.types.Context) -> None:
        """Blender ends the modal work (a file load, the window closing): put back what it set up."""
        try:
            self._stop(context)
        except (AttributeError, ReferenceError):
            pass  # no window or workspace left to tidy
        if self._work is not None:
            self._drop()

    def _drop(self) -> None:
        """Cancel the work and let go of it."""
        work, self._work = self._work, None
        work.cancel()

    def _stop(self, context: bpy.types.Context) -> None:
        """Remove the timer and the progress display."""
        wm = context.window_manager
        if self._timer is not None:
            wm.event_timer_remove(self._timer)
            self._timer = None
        wm.progress_end()
        if context.workspace is not None:
            context.workspace.status_text_set(None)


def register() -> None:
    """Watch file loads: work in progress must let go of the file it works on."""
    app_handlers.install([(bpy.app.handlers.load_pre, drop_running)])


def unregister() -> None:
    """Stop watching file loads."""
    app_handlers.remove([(bpy.app.handlers.load_pre, drop_running)])
