# SPDX-License-Identifier: GPL-3.0-or-later
"""Python's cyclic garbage collector held off while a frame solves."""

from __future__ import annotations

import contextlib
import gc
from typing import Iterator

__all__ = ["collection_deferred"]


@contextlib.contextmanager
def collection_deferred() -> Iterator[None]:
    """Hold off automatic garbage collection for one frame's work, and let it run again after: mid-frame, the
    objects a large solve keeps alive would set off full collections of all of Blender's Python objects, a visible
    hitch."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
