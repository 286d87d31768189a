# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: how a chain bends, FABRIK against Blender's IK on the same targets.

Run with `.venv/bin/python benchmarks/bend.py [--count 200] [--seed 1]`.

Chains of 3 to 8 connected bones, one unit long, up +Z at rest with every
joint bent REST_BEND degrees towards -Y (a rig's chains are modelled a
little bent: Blender's IK cannot bend a chain that lies straight with its
pole), without and with a pole (an empty on the bent side, the pole angle
that keeps the rest pose as it is). Each random target lies between 0.3 and 0.9
of the reach from the chain's base, anywhere above its base's level, so
every one is reachable. Both solvers start every solve from the rest pose:
Blender's IK constraint (legacy solver, constraint defaults) on the rig,
evaluated; FABRIK's core solver (`core.solve`, the plan's, with the add-on's
default iteration cap) on the skeleton read from the same rig.

A joint's bend is the angle between the bones that meet at it; a chain's
largest bend says whether the turn is spread along it (Blender's IK spreads
it, a smooth C) or piled onto one joint. The table gives, per chain and pole
setting, the median largest bend of each solver and the median over targets
of FABRIK's largest bend over Blender's (the target: at most 1.25x), and how
many targets each reached (within 1e-3 of the reach).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

import bpy  # noqa: E402
import numpy as np  # noqa: E402

import fabrik_addon  # noqa: E402
from fabrik_addon.blender.rig import armature, props  # noqa: E402
from fabrik_addon.core import Goal, SolveSettings, solve  # noqa: E402
from samples import rigbuild  # noqa: E402
from samples.rig_classes import planar_chain  # noqa: E402

#: A solve reaches when its tip is within this fraction of the reach.
REACHED = 1e-3
#: FABRIK's largest bend may be at most this many times Blender's (median over targets).
TARGET = 1.25
POLE = (0.0, -0.6, 0.5)
#: Each joint's bend at rest (degrees), towards the pole's side.
REST_BEND = 5.0


def chain(count: int, pole: bool):
    """A fresh file with the chain, its target empty, Blender's IK constraint on its tip, and a pole or none."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    names = [f"bone{k}" for k in range(count)]
    bones = planar_chain(names, (0.0, 0.0, 0.0), (0.0, 0.0, 1.0), (0.0, -1.0, 0.0), [1.0 / count] * count,
                         [0.0] + [REST_BEND] * (count - 1))
    rig = rigbuild.make_armature("Chain", bones)
    target = rigbuild.make_target("Target", (0.0, 0.0, 1.0))
    tip = f"bone{count - 1}"
    constraint = rig.pose.bones[tip].constraints.new("IK")
    constraint.target, constraint.chain_count = target, count
    angle = None
    if pole:
        empty = rigbuild.make_target("Pole", POLE)
        angle = rigbuild.rest_pole_angle(rig, "bone0", tip, POLE)
        constraint.pole_target, constraint.pole_angle = empty, angle
    return rig, target, tip, angle


def targets(rng: np.random.Generator, count: int) -> np.ndarray:
    """Reachable targets: 0.3 to 0.9 of the reach from the base, above its level."""
    direction = rng.normal(size=(count, 3))
    direction[:, 2] = np.abs(direction[:, 2])
    direction /= np.linalg.norm(direction, axis=1)[:, None]
    return direction * rng.uniform(0.3, 0.9, size=(count, 1))


def largest_bend(heads: np.ndarray, tails: np.ndarray) -> float:
    """The largest angle (degrees) between consecutive bones of a chain, from their heads and tails."""
    d = tails - heads
    d /= np.linalg.norm(d, axis=1)[:, None]
    cosines = np.clip((d[:-1] * d[1:]).sum(axis=1), -1.0, 1.0)
    return math.degrees(float(np.arccos(cosines).max()))


def measure(count: int, pole: bool, points: np.ndarray) -> dict:
    """Both solvers on every target of one chain: largest bends, reached counts."""
    rig, target, tip, angle = chain(count, pole)
    skeleton = armature.skeleton_of(rig)
    tip_index = skeleton.index(tip)
    names = [f"bone{k}" for k in range(count)]
    indices = [skeleton.index(n) for n in names]
    settings = SolveSettings(tolerance=REACHED / 2.0, max_iterations=props.DEFAULT_ITERATIONS)
    out = {"blender": [], "fabrik": [], "blender_reached": 0, "fabrik_reached": 0}
    for point in points:
        target.location = tuple(point)
        bpy.context.view_layer.update()
        bones = rig.evaluated_get(bpy.context.evaluated_depsgraph_get()).pose.bones
        heads = np.array([bones[n].head for n in names])
        tails = np.array([bones[n].tail for n in names])
        out["blender"].append(largest_bend(heads, tails))
        out["blender_reached"] += np.linalg.norm(tails[-1] - point) <= REACHED
        goal = Goal(tip_index, tuple(point), chain_length=count, pole=POLE if pole else None,
                    pole_angle=angle if pole else 0.0)
        solved, _ = solve(skeleton, [goal], skeleton.rest_pose(), settings)
        out["fabrik"].append(largest_bend(solved.heads[indices], solved.tails[indices]))
        out["fabrik_reached"] += np.linalg.norm(solved.tails[tip_index] - point) <= REACHED
    ratios = [f / b for f, b in zip(out["fabrik"], out["blender"]) if b > 1.0]
    out["ratio"] = statistics.median(ratios) if ratios else float("nan")
    return out


def main() -> int:
    """Measure every chain length with and without a pole; print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200, help="targets per chain and pole setting")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    fabrik_addon.register()
    try:
        points = targets(np.random.default_rng(args.seed), args.count)
        rows = [(n, pole, measure(n, pole, points)) for n in range(3, 9) for pole in (False, True)]
    finally:
        fabrik_addon.unregister()
    print(f"\n{args.count} random reachable targets per row, every solve from the rest pose; bends in degrees.\n")
    print("| chain | pole | Blender: median largest bend | FABRIK: median largest bend | FABRIK / Blender (median) "
          "| target | met | reached: Blender | reached: FABRIK |")
    print("|---|---|---:|---:|---:|---|---|---:|---:|")
    for n, pole, r in rows:
        met = "PASS" if r["ratio"] <= TARGET else "MISS"
        print(f"| {n} bones | {'yes' if pole else 'no'} | {statistics.median(r['blender']):.1f} | "
              f"{statistics.median(r['fabrik']):.1f} | {r['ratio']:.2f}x | ≤ {TARGET:g}x | {met} | "
              f"{r['blender_reached']}/{args.count} | {r['fabrik_reached']}/{args.count} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
