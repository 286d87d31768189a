# SPDX-License-Identifier: GPL-3.0-or-later
"""Python's cyclic garbage collector held off while a frame solves."""

from __future__ import annotations

import contextlib
import gc
from typing import Iterator

__all__ = ["collection_deferred"]


@contextlib.contextmanager
def collection_deferred() -> Iterator[None]:
    """Hold off automatic garbage collection for one frame's work, and let it run again after (where it ran).

    A large rig's solve keeps thousands of objects alive at once, so the
    collector would run mid-frame and move them into its older generations,
    and every few dozen frames that sets off a full collection of all of
    Blender's Python objects (a visible hitch: docs/benchmarks.md). What a frame
    makes is freed by reference counting when the frame ends, so after it
    the collector finds little to do.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
