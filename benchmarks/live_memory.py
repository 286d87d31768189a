# SPDX-License-Identifier: GPL-3.0-or-later
"""Memory checks of live solving, for benchmarks/run.py: growth over a long playback, and a deleted rig forgotten.

Memory is read without tracemalloc (which would allocate as it traces and
slow every frame): the process's resident set from /proc/self/statm, and
the blocks Python's allocator holds (`sys.getallocatedblocks`), each after a
full garbage collection. A leak shows as growth that keeps going; caches
filling up show as growth in the first half only, so the two halves are
reported apart.
"""

from __future__ import annotations

import gc
import os
import sys
from typing import Callable

import bpy

from fabrik_addon.blender.rig import memory
from fabrik_addon.blender.rig.status import statuses

#: The animation each long playback loops over (as Blender's playback does), frames.
LOOP = range(1, 201)
#: Flat: the second half grew the resident set by less than this (bytes) and Python's heap by fewer blocks.
FLAT_RSS = 1 << 20
FLAT_BLOCKS = 1000


def resident_bytes() -> int:
    """The process's resident set size now, from /proc/self/statm (resource gives only the peak)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def sample() -> tuple[int, int]:
    """(resident bytes, Python heap blocks) after a full collection."""
    gc.collect()
    return resident_bytes(), sys.getallocatedblocks()


def play(scene, count: int) -> None:
    """Play `count` frames, looping over LOOP."""
    for k in range(count):
        scene.frame_set(LOOP.start + k % len(LOOP))


def playback_growth(name: str, make: Callable[[range], object], frames: int) -> str:
    """One markdown row: resident set and heap growth over the two halves of a long live playback of one rig."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = LOOP.start, LOOP.stop - 1
    obj = make(LOOP)
    play(scene, len(LOOP))  # once round first: caches, the held pose and Blender's own buffers fill up
    start = sample()
    play(scene, frames // 2)
    middle = sample()
    play(scene, frames - frames // 2)
    end = sample()
    first = (middle[0] - start[0], middle[1] - start[1])
    second = (end[0] - middle[0], end[1] - middle[1])
    flat = second[0] < FLAT_RSS and second[1] < FLAT_BLOCKS
    ok = obj.name in statuses and statuses[obj.name].ok
    return (
        f"| {name} | {frames} | {start[0] / 2**20:.1f} MiB | {first[0] / 2**10:+.0f} KiB "
        f"| {second[0] / 2**10:+.0f} KiB | {first[1]:+d} | {second[1]:+d} "
        f"| {'yes' if flat else 'no'}{'' if ok else ' (live solving stopped!)'} |"
    )


def per_rig_tables() -> dict[str, object]:
    """What the add-on keeps keyed by rig name: its memory of each rig (`memory`), one object per rig."""
    return {"memory": set(memory.names()), "statuses": statuses}


def forgets_deleted_rig(make: Callable[[range], object]) -> str:
    """Whether, after a live rig is deleted and frames change, no per-rig table holds an entry for it."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    obj = make(LOOP)
    play(scene, 3)
    name = obj.name
    before = [label for label, table in per_rig_tables().items() if name in table]
    bpy.data.objects.remove(obj, do_unlink=True)
    for frame in (10, 11, 12):
        scene.frame_set(frame)
    bpy.context.view_layer.update()
    after = [label for label, table in per_rig_tables().items() if name in table]
    main = ("memory", "statuses")
    forgot = not any(label in main for label in after)
    lines = [f"per-rig tables forget deleted rigs: {'yes' if forgot else 'no'}"]
    lines.append(f"  (live rig '{name}': before deleting it, held by {', '.join(before) or 'none'}; after deleting it "
                 f"and 3 frame changes, still held by {', '.join(after) or 'none'})")
    if not before:
        lines.append("  (the rig was in no table before deletion, so this check proves nothing)")
    return "\n".join(lines)


def report(frames: int, rigs: dict[str, Callable[[range], object]], deleted: Callable[[range], object]) -> str:
    """The memory table for each rig, then the deleted-rig check."""
    lines = [
        f"Memory over a long live playback ({frames} frames looping over {len(LOOP)}, after one untimed loop), read "
        f"without tracemalloc after a full gc: resident set (/proc/self/statm) and Python heap blocks "
        f"(sys.getallocatedblocks), growth over the first and the second half. Flat: second half under "
        f"{FLAT_RSS >> 10} KiB and {FLAT_BLOCKS} blocks.",
        "",
        "| rig | frames | RSS at start | RSS growth, 1st half | RSS growth, 2nd half | heap blocks, 1st half "
        "| heap blocks, 2nd half | flat |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, make in rigs.items():
        lines.append(playback_growth(name, make, frames))
    lines.append("")
    lines.append(forgets_deleted_rig(deleted))
    return "\n".join(lines)
