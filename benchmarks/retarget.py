# SPDX-License-Identifier: GPL-3.0-or-later
"""Retarget benchmark: a captured walk of 1000 frames put on a rig of other proportions, end to end.

Run with `python3 tools/dev.py bench` (it runs this with the others) or directly with the venv's Python:
`.venv/bin/python benchmarks/retarget.py [--frames 1000] [--runs 3]`.

The clip is the tests' walk (tests/walk_clip.py: written as BVH, its feet standing with a captured foot's
jitter, imported with Blender's own BVH importer); the rig is the tests' rig of other proportions. Each run
times the one click (Retarget: map the bones, set up the followers, effectors and poles, find the feet's
contacts and pin them, bake the hips with Blender's Bake Action and the chains with FABRIK's bake), phase by
phase, and, interleaved in the same run as the baseline, Blender's Bake Action (visual keying) of the clip's own
skeleton over the same frames: what keying that motion costs at all. Then it measures how far a pinned foot
slides (the tip's largest move within a pinned range, from the keys alone) against how far the clip's foot
moved meanwhile.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "samples"), str(ROOT / "tests")]  # (the walk is the tests' clip)

import bpy  # noqa: E402
import numpy as np  # noqa: E402

import fabrik_addon  # noqa: E402
import walk_clip  # noqa: E402
from rigs import quiet  # noqa: E402
from fabrik_addon.blender import bake, pins, retarget  # noqa: E402


def one_run(folder: Path, frames: int) -> dict:
    """One retarget, phase by phase, and the baseline; seconds, and the feet's slide."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    walk_clip.FRAMES = frames
    began = time.perf_counter()
    with quiet():
        clip = walk_clip.import_walk(folder)
    imported = time.perf_counter() - began
    clip.select_set(True)
    bpy.context.view_layer.objects.active = clip
    bpy.ops.object.mode_set(mode="POSE")
    bpy.ops.pose.select_all(action="SELECT")
    began = time.perf_counter()
    bpy.ops.nla.bake(frame_start=1, frame_end=frames, only_selected=True, visual_keying=True, bake_types={"POSE"},
                     use_current_action=False)
    baseline = time.perf_counter() - began
    bpy.ops.object.mode_set(mode="OBJECT")
    rig = walk_clip.stocky_rig()
    rig.fabrik.retarget_source = clip
    scene = bpy.context.scene
    times = {"import": imported, "baseline": baseline}
    began = time.perf_counter()
    retarget.map_bones(rig)
    retarget.setup(rig, scene)
    scene.frame_start, scene.frame_end = 1, frames
    rig.fabrik.live = True
    times["set up"] = time.perf_counter() - began
    began = time.perf_counter()
    retarget.pin_feet(rig, scene, (1, frames))
    feet = [i for i, e in enumerate(rig.fabrik.effectors) if e.name.startswith("foot")]
    times["contacts"] = time.perf_counter() - began
    began = time.perf_counter()
    retarget.bake_hips(rig, 1, frames)
    times["hips bake"] = time.perf_counter() - began
    began = time.perf_counter()
    bake.bake_object(rig, range(1, frames + 1))
    times["chains bake"] = time.perf_counter() - began
    times["retarget"] = sum(times[k] for k in ("set up", "contacts", "hips bake", "chains bake"))
    slide, moved, spans = 0.0, 0.0, 0
    for effector in (rig.fabrik.effectors[i] for i in feet):
        for first, last in pins.spans(rig, effector)[:6]:
            spans += 1
            tips, targets = [], []
            for frame in range(first, last + 1):
                scene.frame_set(frame)
                tips.append(np.array(rig.matrix_world @ rig.pose.bones[effector.bone].tail))
                targets.append(np.array(effector.target.matrix_world.translation))
            slide = max(slide, max(np.linalg.norm(t - tips[0]) for t in tips))
            moved = max(moved, max(np.linalg.norm(t - targets[0]) for t in targets))
    times.update(slide=slide, moved=moved, spans=spans)
    return times


def span_of(values: list[float], unit: str = "s", digits: int = 2) -> str:
    return f"{min(values):.{digits}f}–{max(values):.{digits}f} {unit}" if len(values) > 1 else f"{values[0]:.{digits}f} {unit}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    fabrik_addon.register()
    runs = []
    try:
        with tempfile.TemporaryDirectory() as folder:
            for _ in range(args.runs):
                runs.append(one_run(Path(folder), args.frames))
                print(f"[bench] retarget run {len(runs)}: done", flush=True)
    finally:
        fabrik_addon.unregister()
    print(f"\nRetarget of a {args.frames}-frame walk, {args.runs} runs; ranges over the runs:\n")
    print("| phase | seconds | ms a frame |")
    print("|---|---|---|")
    for phase in ("import", "set up", "contacts", "hips bake", "chains bake", "retarget", "baseline"):
        values = [run[phase] for run in runs]
        label = {"retarget": "**Retarget, end to end** (set up, contacts, hips bake, chains bake)",
                 "baseline": "baseline: Bake Action of the clip's own skeleton (visual keying)",
                 "import": "BVH import (Blender's importer)"}.get(phase, phase)
        print(f"| {label} | {span_of(values)} | {span_of([1000 * v / args.frames for v in values], 'ms', 3)} |")
    ratios = [run["retarget"] / run["baseline"] for run in runs]
    print(f"\nRetarget end to end / the clip's own Bake Action, per run: {min(ratios):.2f}–{max(ratios):.2f}x")
    print(f"Pinned feet: {runs[0]['spans']} ranges checked; the tip moved at most "
          f"{max(r['slide'] for r in runs):.2g} within a range, the clip's foot (scaled) {min(r['moved'] for r in runs):.2g}"
          f"–{max(r['moved'] for r in runs):.2g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
