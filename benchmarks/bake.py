# SPDX-License-Identifier: GPL-3.0-or-later
"""Bake benchmark: FABRIK's bake against Blender's `nla.bake(visual_keying=True)` of the same rig under its IK constraint.

Run with `python3 tools/dev.py bench` (it runs this after benchmarks/run.py)
or directly with the venv's Python. Both bakes are timed in the same process,
on the same rig and animated targets; the ratio is Blender's time divided by
ours (above 1: we are faster). "Per frame" solves every frame from its own
pose, as live solving does by default (and as the default bake of such a rig
does); "continuous" starts each frame from the previous frame's solution (the
default bake of a rig whose live solving starts from the previous solution).
"Without the solver" is Blender's time over ours less the time the rig's plan
spent solving (`BakeResult.solver_seconds`): what going to each frame, reading
it and writing the keys cost, which a solver of no cost would still pay.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import bpy  # noqa: E402
import rigs  # noqa: E402

import fabrik_addon  # noqa: E402
from fabrik_addon.blender.bake import baking  # noqa: E402

#: The rigs that are not layouts, by builder (`rigs`): the tentacle of samples/tentacle.py, the rig classes of
#: samples/rig_classes.py and the motion-capture character, each a rig with joint limits or poles.
BUILT = {
    "tentacle 40, cones (limits)": rigs.tentacle_rigs,
    "finger, MCP 2 DOF + 2 hinges": rigs.class_rigs("build_finger", ""),
    "6-axis arm, hinges": rigs.class_rigs("build_arm6", ""),
    "UR5, flange position": rigs.class_rigs("build_ur5", ""),
    "UR5, position + rotation": rigs.class_rigs("build_ur5_rot", ""),
    "tentacle 30, 15-degree cones": rigs.class_rigs("build_tentacle", ""),
    "arm, elbow hinge + pole, straight": rigs.class_rigs("build_arm_pole_straight", ""),
    "leg, knee hinge + pole, bent 15°": rigs.class_rigs("build_leg_pole_bent", ""),
    "captured motion, 52 bones": rigs.mocap_rigs,
    "captured motion, feet pinned": rigs.mocap_pinned_rigs,
    "captured motion, feet pinned, root free": rigs.mocap_root_rigs,
}


def time_ours(layout, frames: range, continuous: bool) -> tuple[float, float]:
    """Seconds for FABRIK's bake of the rig, and the part of them its solver took."""
    rig = rigs.built(layout, "fabrik", frames)
    began = time.perf_counter()
    result = baking.bake_object(rig, frames, warm_start=continuous)
    return time.perf_counter() - began, result.solver_seconds


def time_blender(layout, frames: range) -> float:
    """Seconds for Blender's visual-keying bake of the rig driven by its own IK constraint."""
    rig = rigs.built(layout, "blender", frames)
    bpy.context.view_layer.objects.active = rig
    bpy.ops.object.mode_set(mode="POSE")
    bpy.ops.pose.select_all(action="SELECT")
    began = time.perf_counter()
    bpy.ops.nla.bake(
        frame_start=frames.start, frame_end=frames.stop - 1, only_selected=True, visual_keying=True, bake_types={"POSE"}
    )
    seconds = time.perf_counter() - began
    bpy.ops.object.mode_set(mode="OBJECT")
    return seconds


#: Targets: at least this many times as fast as nla.bake (the continuous bake; both bakes for the rig classes),
#: and the project step (with its issue) that set each.
TARGETS = {"chain 50": 2.0, "hand (5 x 4 + palm)": 2.0, "tentacle 40, cones (limits)": 1.0}
TARGETS_SET_BY = "Step 7 (issue 13)"
CLASS_TARGET = 2.0
CLASS_TARGET_SET_BY = "Step 11 (issue 30)"


def seconds_range(values: list[float]) -> str:
    """A range of times over the runs, in seconds."""
    return f"{min(values):.2f}–{max(values):.2f} s" if len(values) > 1 else f"{values[0]:.2f} s"


def ratio_range(blender: list[float], ours: list[float]) -> list[float]:
    """Per run, Blender's time over ours (the runs were interleaved, so each pair shares the machine's mood)."""
    return [b / o for b, o in zip(blender, ours)]


def span(ratios: list[float], digits: int) -> str:
    """A range of ratios."""
    low, high = min(ratios), max(ratios)
    return f"{low:.{digits}f}x" if f"{low:.{digits}f}" == f"{high:.{digits}f}" else f"{low:.{digits}f}–{high:.{digits}f}x"


def main() -> int:
    """Time both bakes a few times per rig, interleaved run by run, and print ranges and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rigs", help="comma-separated parts of the rigs' names (default: all)")
    args = parser.parse_args()
    frames = range(1, args.frames + 1)
    fabrik_addon.register()
    rows = []
    try:
        named = [("chain 50", rigs.RIGS["chain 50"]()), ("hand (5 x 4 + palm)", rigs.RIGS["hand (5 x 4 + palm)"]())]
        for name, layout in named + list(BUILT.items()):
            if args.rigs and not any(part in name for part in args.rigs.split(",")):
                continue
            blender, continuous, per_frame, without_solver = [], [], [], []
            for _ in range(args.repeats):  # interleaved: each run times all three bakes back to back
                blender.append(time_blender(layout, frames))
                (seconds, solver), (own_seconds, own_solver) = (
                    time_ours(layout, frames, True), time_ours(layout, frames, False)
                )
                continuous.append(seconds)
                per_frame.append(own_seconds)
                without_solver.append((own_seconds - own_solver, seconds - solver))
            rows.append((name, blender, continuous, per_frame, without_solver))
            print(f"[bench] bake {name}: done", flush=True)
    finally:
        fabrik_addon.unregister()
    print(
        f"\nBake of {args.frames} frames, {args.repeats} runs, the three bakes interleaved in each run, same "
        "process; ranges over the runs; ratio = Blender's time / ours, per run:\n"
    )
    print(
        "| rig | Blender nla.bake (IK constraint) | FABRIK bake, per frame | ratio, per frame | FABRIK bake, continuous "
        "| ratio, continuous | ratio without the solver, per frame / continuous | target | met | set by |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, blender, continuous, per_frame, without_solver in rows:
        ratios, per_frame_ratios = ratio_range(blender, continuous), ratio_range(blender, per_frame)
        if name in TARGETS:
            target, judged, which, set_by = TARGETS[name], ratios, "continuous", TARGETS_SET_BY
        else:
            target, judged, which, set_by = CLASS_TARGET, ratios + per_frame_ratios, "both", CLASS_TARGET_SET_BY
        met = "PASS" if min(judged) >= target else "MISS"
        print(
            f"| {name} | {seconds_range(blender)} | {seconds_range(per_frame)} | {span(per_frame_ratios, 1)} "
            f"| {seconds_range(continuous)} | {span(ratios, 2)} "
            f"| {span(ratio_range(blender, [own for own, _ in without_solver]), 1)} / "
            f"{span(ratio_range(blender, [warm for _, warm in without_solver]), 1)} | {which} ≥ {target:g}x | {met} | {set_by} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
