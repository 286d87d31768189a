# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmarks: FABRIK live solving against Blender's own IK constraint on the same rigs, in the same run.

Run with `python3 tools/dev.py bench`. Machines here are shared and noisy, so
every figure is a median over many frames and the comparison is a ratio
against a baseline measured in this same process:

* "no IK": the rig with its animated target and no solver at all (what a frame costs anyway);
* "Blender IK": Blender's IK constraint (legacy solver, default settings) on the same chains;
* "FABRIK": this add-on's live solving (frame_change_post handler).

The IK cost of a frame is its time minus the "no IK" time. The error is the
distance from each tip to its target, measured on the evaluated scene,
relative to the chain's reach.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "samples")]

import bpy  # noqa: E402

import fabrik_addon  # noqa: E402
import rigbuild  # noqa: E402
from fabrik_addon.blender import solving  # noqa: E402


def hand_layout():
    """Palm plus five four-bone fingers: bones, effector tips and chain lengths."""
    bones = [("palm", (0.0, 0.0, 0.0), (0.0, 1.0, 0.0), None, False)]
    tips = []
    for f in range(5):
        parent = "palm"
        for j in range(4):
            name = f"f{f}_{j}"
            x = (f - 2) * 0.25
            bones.append((name, (x, 1.1 + 0.3 * j, 0.0), (x, 1.1 + 0.3 * (j + 1), 0.0), parent, j > 0))
            parent = name
        tips.append(name)
    return bones, [(tip, 5) for tip in tips], 2.2


def chain_layout(count: int):
    """A connected chain of unit-reach-per-bone bones along +Z."""
    return rigbuild.chain_bones(count, 1.0 / count * 4.0), [(f"bone{count - 1}", 0)], 4.0


RIGS = {
    "chain 10": lambda: chain_layout(10),
    "chain 50": lambda: chain_layout(50),
    "hand (5 x 4 + palm)": hand_layout,
}


def build(layout, solver: str, frames: range):
    """A fresh scene with the rig, animated targets, and the chosen solver: 'none', 'blender' or 'fabrik'."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    bones, effectors, reach = layout
    rig = rigbuild.make_armature("Rig", bones)
    pairs = []
    for k, (tip, chain) in enumerate(effectors):
        tail = rig.data.bones[tip].tail_local
        target = rigbuild.make_target(f"T{k}", tuple(tail))
        # Reachable motion: circles well inside the reach, around a point pulled in from the rest tip.
        center = (tail[0] * 0.6, tail[1] * 0.6, tail[2] * 0.6)
        rigbuild.key_circle(target, center, 0.25 * reach, frames, axis="XY" if tail[2] > tail[1] else "XZ")
        pairs.append((tip, target))
        if solver == "blender":
            constraint = rig.pose.bones[tip].constraints.new("IK")
            constraint.target, constraint.chain_count = target, chain
        elif solver == "fabrik":
            rigbuild.add_effector(rig, tip, target, chain_length=chain)
    rig.fabrik.live = solver == "fabrik"
    rig.fabrik.iterations = 100
    return rig, pairs


def measure(name: str, layout, solver: str, frames: range) -> dict:
    """Median frame time, median solve time (FABRIK only) and worst relative error over the frames."""
    rig, pairs = build(layout, solver, frames)
    scene = bpy.context.scene
    scene.frame_set(frames.start)  # warm caches
    frame_times, solve_times, errors = [], [], []
    for frame in frames:
        began = time.perf_counter()
        scene.frame_set(frame)
        frame_times.append(time.perf_counter() - began)
        if solver == "fabrik":
            solve_times.append(solving.status[rig.name].seconds)
        depsgraph = bpy.context.evaluated_depsgraph_get()
        evaluated = rig.evaluated_get(depsgraph)
        for tip, target in pairs:
            tip_at = evaluated.matrix_world @ evaluated.pose.bones[tip].tail
            errors.append((tip_at - target.evaluated_get(depsgraph).matrix_world.translation).length / layout[2])
    return {
        "frame": statistics.median(frame_times),
        "solve": statistics.median(solve_times) if solve_times else None,
        "error": max(errors),
        "median_error": statistics.median(errors),
    }


def paper_setting(trials: int = 500) -> str:
    """The paper's own test: a 10-joint chain, random reachable targets, tolerance 0.01; core only, no Blender."""
    import numpy as np

    from fabrik_addon.core import Goal, SolveSettings, skeleton_from_points, solve
    from fabrik_addon.core.rotation import quaternion_to_matrix

    n = 10
    skeleton = skeleton_from_points([-1] + list(range(n - 1)), [(0, 0, i) for i in range(n)], [(0, 0, i + 1) for i in range(n)])
    rng = np.random.default_rng(2011)
    iterations, seconds = [], []
    for _ in range(trials):
        q = rng.normal(size=(n, 4))
        target = skeleton.pose_from_local(quaternion_to_matrix(q)).tails[n - 1]
        began = time.perf_counter()
        _, report = solve(skeleton, [Goal(n - 1, tuple(target))], settings=SolveSettings(tolerance=0.01, max_iterations=1000))
        seconds.append(time.perf_counter() - began)
        iterations.append(report.iterations)
    return (
        f"Paper setting (10-joint chain, unit bones, {trials} random reachable targets, tolerance 0.01, core only): "
        f"median {statistics.median(iterations):.0f} iterations, mean {statistics.mean(iterations):.1f}, "
        f"max {max(iterations)}; median solve {statistics.median(seconds) * 1e3:.3f} ms."
    )


def main() -> int:
    """Run every rig with every solver and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=200, help="frames per measurement")
    args = parser.parse_args()
    frames = range(1, args.frames + 1)
    fabrik_addon.register()
    rows = []
    try:
        for name, make in RIGS.items():
            layout = make()
            results = {solver: measure(name, layout, solver, frames) for solver in ("none", "blender", "fabrik")}
            base = results["none"]["frame"]
            blender_cost = max(results["blender"]["frame"] - base, 1e-9)
            fabrik_cost = max(results["fabrik"]["frame"] - base, 1e-9)
            rows.append(
                (
                    name,
                    f"{blender_cost * 1e3:.3f}",
                    f"{fabrik_cost * 1e3:.3f}",
                    f"{results['fabrik']['solve'] * 1e3:.3f}",
                    f"{blender_cost / fabrik_cost:.2f}x",
                    f"{results['blender']['error']:.1e}",
                    f"{results['fabrik']['error']:.1e}",
                )
            )
            print(f"[bench] {name}: done", flush=True)
    finally:
        fabrik_addon.unregister()
    header = (
        "rig",
        "Blender IK ms/frame",
        "FABRIK ms/frame",
        "FABRIK solve ms",
        "speed vs Blender",
        "Blender worst error",
        "FABRIK worst error",
    )
    print(f"\n{args.frames} frames each; medians; IK cost = frame time minus the same rig's frame time without IK;")
    print("errors are tip-to-target distances relative to the chain's reach (worst frame).\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print()
    print(paper_setting())
    return 0


if __name__ == "__main__":
    sys.exit(main())
