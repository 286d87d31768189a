# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: the code's choices of how to compute, each measured against the way not taken.

Run with `python3 tools/dev.py bench` (it runs this with the others) or
directly with the venv's Python. Each variant runs in the same process, the
variants interleaved in every run; ranges are over the runs, each a median.

* Plain floats or numpy. The limited solve's small systems (the refinement's
  and settling's steps, their damped least squares) are worked out in plain
  floats where they are small and on numpy where they grow (more than
  `refine.PLAIN_COORDINATES` coordinates; a Gram matrix of more than
  `lsq.PLAIN_ENTRIES` entries; more than `lsq.PLAIN_STEP_ROWS` rows). Each rig
  class is solved to the same reachable targets, from rest and from the last
  target's pose, as the code chooses, all in plain floats, and all on numpy.
* Many frames at once. A per-frame bake of a rig that FABRIK alone solves takes
  every frame's passes together on numpy rows (`many_frames.solve_rows`); the same
  bake with each frame solved alone is the way not taken.
* The bridge: the tag a pose write gives the rig (its transform, against its
  data) and Blender's evaluation after it; the live handler's scene scan (the
  armatures from the last scan while the object count holds, against every
  object each time); the structure check of a frame whose evaluation updated
  neither the rig's bones nor its IK settings (against reading both again);
  and the full collection of Python's garbage that the live frame holds off.
"""

from __future__ import annotations

import argparse
import gc
import math
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]  # (run as a script: the add-on and the rig builders)

import bpy  # noqa: E402
import numpy as np  # noqa: E402
import rigs  # noqa: E402
from limits import FabrikSolver  # noqa: E402

import fabrik_addon  # noqa: E402
from fabrik_addon.blender.bake import baking  # noqa: E402
from fabrik_addon.blender.live import handlers  # noqa: E402
from fabrik_addon.blender.rig import armature  # noqa: E402
from fabrik_addon.core import SolveSettings, solve  # noqa: E402
from fabrik_addon.core.joints import refine  # noqa: E402
from fabrik_addon.core.math import lsq  # noqa: E402
from fabrik_addon.core.solving import many_frames  # noqa: E402
from fabrik_addon.core.solving.plan import plan_for  # noqa: E402
from samples import humanoid  # noqa: E402
from samples.rig_classes import RIG_CLASSES, random_targets  # noqa: E402

#: How the small systems are worked out: (refine.PLAIN_COORDINATES, lsq.PLAIN_ENTRIES, lsq.PLAIN_STEP_ROWS).
VARIANTS = {
    "as chosen": (refine.PLAIN_COORDINATES, lsq.PLAIN_ENTRIES, lsq.PLAIN_STEP_ROWS),
    "plain floats": (math.inf, math.inf, math.inf),
    "numpy": (-1, -1, -1),
}
#: The rig classes the limited solve is timed on.
LIMITED = ("finger", "arm6", "ur5", "ur5_rot", "tentacle", "hand", "arm_hand_pole")


def _set(variant: tuple) -> None:
    """Work the small systems out as `variant` says."""
    refine.PLAIN_COORDINATES, lsq.PLAIN_ENTRIES, lsq.PLAIN_STEP_ROWS = variant


def _timed_solves(skeleton, goal_sets, settings: SolveSettings) -> tuple[float, float]:
    """Median milliseconds of a solve from rest, and of one from the last target's pose (its search off)."""
    from_rest, onwards = [], []
    warm = replace(settings, explore=False)
    pose = skeleton.rest_pose()
    for goals in goal_sets:
        began = time.perf_counter()
        solve(skeleton, goals, skeleton.rest_pose(), settings)
        from_rest.append(time.perf_counter() - began)
        began = time.perf_counter()
        pose, _ = solve(skeleton, goals, pose, warm)
        onwards.append(time.perf_counter() - began)
    return statistics.median(from_rest) * 1e3, statistics.median(onwards) * 1e3


def limited_rows(runs: int, count: int) -> list[list[str]]:
    """Per rig class: its largest part's coordinates and rows, and each variant's times."""
    rows = []
    for name in LIMITED:
        with rigs.quiet():
            bpy.ops.wm.read_factory_settings(use_empty=True)
            case = RIG_CLASSES[name]()
        fabrik = FabrikSolver(case, SolveSettings())
        skeleton = fabrik.skeleton
        goal_sets = [fabrik.goals(s) for s in random_targets(case, np.random.default_rng(3), count)]
        reach = max(np.linalg.norm(np.asarray(g.target)) for goals in goal_sets for g in goals)
        settings = SolveSettings(tolerance=5e-4 * reach, max_iterations=100)
        plan = plan_for(skeleton, goal_sets[0])
        largest = max(plan.parts, key=lambda p: len(p.nodes))
        times = {key: [] for key in VARIANTS}
        for _ in range(runs):
            for key, variant in VARIANTS.items():
                _set(variant)
                times[key].append(_timed_solves(skeleton, goal_sets, settings))
        _set(VARIANTS["as chosen"])
        cells = []
        for key in VARIANTS:
            rest, onwards = zip(*times[key])
            cells.append(f"{_span(rest)} / {_span(onwards)}")
        rows.append([name, f"{len(largest.nodes)} bones, {len(largest.goals)} goals", *cells])
    return rows


def bake_rows(runs: int, frames: int) -> list[list[str]]:
    """Per rig: milliseconds a frame of its per-frame bake with the frames on numpy rows, one by one, and the ratio."""
    cases = [
        ("chain 50", rigs.RIGS["chain 50"]()), ("hand (5 x 4 + palm)", rigs.RIGS["hand (5 x 4 + palm)"]()),
        ("tentacle 40, cones", rigs.tentacle_rigs),
    ]
    span = range(1, frames + 1)
    chosen = many_frames.on_rows
    out = []
    for label, layout in cases:
        together, alone = [], []
        for _ in range(runs):
            for rows, times in ((chosen, together), (lambda plan: False, alone)):
                many_frames.on_rows = rows
                try:
                    with rigs.quiet():  # (the samples' operators print a line per target)
                        rig = rigs.built(layout, "fabrik", span)
                    began = time.perf_counter()
                    baking.bake_object(rig, span, warm_start=False)
                    times.append((time.perf_counter() - began) / frames * 1e3)
                finally:
                    many_frames.on_rows = chosen
        out.append([label, _span(together), _span(alone), _span([a / t for a, t in zip(alone, together)], "x")])
    return out


def bridge_rows(runs: int) -> list[list[str]]:
    """The bridge's choices on the humanoid sample (159 bones) and in a scene of 3000 objects."""
    with rigs.quiet():  # (Rigify and the samples' operators print a line a step)
        bpy.ops.wm.read_factory_settings(use_empty=True)
        rig = humanoid.build(range(1, 3))
    rig.fabrik.live = False
    bpy.context.view_layer.update()
    depsgraph = bpy.context.evaluated_depsgraph_get()
    out = []

    def evaluation(refresh) -> float:
        """Milliseconds of Blender's evaluation after a tag (`refresh`: the tag's kinds, None for the data's)."""
        times = []
        for _ in range(40):
            rig.update_tag(refresh=refresh) if refresh else rig.update_tag()
            began = time.perf_counter()
            depsgraph.update()
            times.append(time.perf_counter() - began)
        return statistics.median(times) * 1e3

    tags = [(evaluation({'OBJECT'}), evaluation(None)) for _ in range(runs)]
    out.append(["evaluation after a pose write: the transform tagged / the data tagged",
                _span([t for t, _ in tags]), _span([d for _, d in tags])])

    def check(unchanged) -> float:
        """Milliseconds of the structure check, with `unchanged` parts taken as they were."""
        times = []
        for _ in range(200):
            began = time.perf_counter()
            armature.skeleton_of(rig, unchanged)
            times.append(time.perf_counter() - began)
        return statistics.median(times) * 1e3

    both = frozenset({armature.BONES, armature.SETTINGS})
    checks = [(check(both), check(frozenset())) for _ in range(runs)]
    out.append(["structure check of a frame that updated neither bones nor IK settings / both read again",
                _span([c for c, _ in checks]), _span([f for _, f in checks])])

    scene = bpy.context.scene
    for i in range(3000):
        scene.collection.objects.link(bpy.data.objects.new(f"Empty{i}", None))

    def scan(rescan: bool) -> float:
        """Milliseconds of the live handler's look for armatures."""
        times = []
        for _ in range(200):
            began = time.perf_counter()
            handlers.live_rigs(scene, rescan=rescan, objects=len(bpy.data.objects))
            times.append(time.perf_counter() - began)
        return statistics.median(times) * 1e3

    scans = [(scan(False), scan(True)) for _ in range(runs)]
    out.append(["scene scan with 3000 objects: the last scan's armatures / every object again",
                _span([s for s, _ in scans]), _span([a for _, a in scans])])

    def collection() -> float:
        """Milliseconds of a full collection of Python's garbage, with Blender's objects alive."""
        began = time.perf_counter()
        gc.collect()
        return (time.perf_counter() - began) * 1e3

    collections = [collection() for _ in range(runs)]
    out.append(["a full garbage collection (what live solving holds off while a frame solves)", _span(collections), "–"])
    return out


def _span(values, unit: str = "") -> str:
    """A range over runs, as the tables print it."""
    low, high = min(values), max(values)
    digits = 2 if unit else 3
    return f"{low:.{digits}f}{unit}" if f"{low:.{digits}f}" == f"{high:.{digits}f}" else f"{low:.{digits}f}–{high:.{digits}f}{unit}"


def table(header: list[str], rows: list[list[str]]) -> None:
    """Print a markdown table."""
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print()


def main(argv: list[str] | None = None) -> None:
    """Run the three parts and print their tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--count", type=int, default=40, help="targets per rig class (the limited solves)")
    parser.add_argument("--frames", type=int, default=300, help="frames per bake (many frames at once)")
    args = parser.parse_args(argv)
    if not hasattr(bpy.types.Object, "fabrik"):
        fabrik_addon.register()
    print(f"Plain floats or numpy: milliseconds a solve (median of {args.count} targets) from rest / from the last "
          f"target's pose, {args.runs} runs interleaved:\n")
    table(["rig class", "largest part", *VARIANTS], limited_rows(args.runs, args.count))
    print(f"Many frames at once: milliseconds a frame of a per-frame bake ({args.frames} frames), {args.runs} runs:\n")
    table(["rig", "on numpy rows", "one by one", "one by one / rows"], bake_rows(args.runs, args.frames))
    print(f"The bridge's choices, milliseconds, {args.runs} runs:\n")
    table(["what", "as chosen", "the way not taken"], bridge_rows(args.runs))


if __name__ == "__main__":
    main()
