# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: reach under joint limits, FABRIK against Blender's IK (Standard and iTaSC) on the same targets.

Run with `.venv/bin/python benchmarks/limits.py [--count 100] [--rigs finger hand ...]`.

For every rig class of `samples/rig_classes.py`, random targets are made by
forward kinematics from random poses inside the joint limits, so every one
is reachable. Each sample is solved by every solver in turn (interleaved, in
the same process), each solve starting from the rest pose:

* Blender Standard: IK constraints on a copy of the rig (`pose.ik_solver`
  'LEGACY', constraint defaults: 500 iterations), targets are empties;
* Blender iTaSC: the same on another copy (`pose.ik_solver` 'ITASC',
  Animation mode, reiterating until converged on every evaluation, at most
  500 iterations, precision half the tolerance);
* FABRIK: the add-on's core solver on the skeleton read from the rig
  (`fabrik_addon.blender.rig.armature.skeleton_of`), tolerance half the tolerance.

A sample is reached when every effector's tail is within `1e-3 * reach` of
its target (reach: the summed bone lengths of the rig's longest effector
chain) and, for rotation goals, the tip bone within 1 degree of the target's
orientation. The pole miss (reported, not part of "reached") is how far the
chain is turned about its base-to-target line from where the pole asks, by
Blender's definition of the pole angle. Limits are checked with
`rig_classes.limit_violation` (written independently of the add-on) on each
moving bone's solved local rotation; a solve counts as a violation when some
bone lies more than 1e-4 rad outside.
Times are wall-clock medians per solve: for Blender, the `view_layer.update()`
that re-evaluates the rig after its targets moved (about 0.05 ms of it is the
plain armature update, without IK); for FABRIK, `core.solve` (the plan's).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path
from typing import NamedTuple, Sequence

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

import bpy  # noqa: E402
import numpy as np  # noqa: E402
from mathutils import Matrix  # noqa: E402

import fabrik_addon  # noqa: E402
from fabrik_addon.blender.rig import armature, props  # noqa: E402
from fabrik_addon.core import Goal, SolveSettings, solve  # noqa: E402
from samples.rig_classes import RIG_CLASSES, RigCase, ik_limits, limit_violation, random_targets  # noqa: E402

#: Solver keys in the order they run on each sample, and their names in the table.
SOLVERS = ("standard", "itasc", "fabrik")
LABELS = {"standard": "Blender Standard", "itasc": "Blender iTaSC", "fabrik": "FABRIK"}
#: Reached: within this fraction of the rig's reach, and (rotation goals) within this angle.
RELATIVE_TOLERANCE = 1e-3
ANGLE_TOLERANCE = math.radians(1.0)
#: A bone further than this (radians) outside its limits counts as a broken limit.
VIOLATION = 1e-4
#: Iteration cap given to iTaSC, as the Standard solver's default.
ITASC_ITERATIONS = 500


class Solved(NamedTuple):
    """One solve's outcome in armature space: per effector its tail, tip frame and chain base; bone rotations."""

    tails: list[np.ndarray]
    #: The tip bones' 3x3 frames (columns X, Y, Z).
    rotations: list[np.ndarray]
    #: Per effector, the head and X axis of the chain's first bone (what a pole turns).
    bases: list[tuple[np.ndarray, np.ndarray]]
    #: Per moving bone, its 3x3 rotation relative to rest and parent (the rotation part of matrix_basis).
    local: dict[str, np.ndarray]
    seconds: float


def pole_points(case: RigCase) -> list[tuple[float, float, float] | None]:
    """Each effector's pole location in armature space (None without a pole), as evaluated now."""
    bpy.context.view_layer.update()
    to_armature = case.obj.matrix_world.inverted()
    return [
        tuple(to_armature @ bpy.data.objects[e.pole].matrix_world.translation) if e.pole else None
        for e in case.effectors
    ]


def register_addon() -> None:
    """Register the add-on from this source tree (once)."""
    if not hasattr(bpy.types.Object, "fabrik"):
        fabrik_addon.register()


class BlenderSolver:
    """A copy of the rig with Blender IK constraints on its effectors, aimed at empties."""

    def __init__(self, case: RigCase, solver: str, tolerance: float) -> None:
        """Copy the rig for `solver` ('standard' or 'itasc'); iTaSC stops within `tolerance` of its targets."""
        scene = bpy.context.scene
        # A copy per solver: pose.ik_solver is per object, and switching it rebuilds the IK trees.
        self.obj = case.obj.copy()
        self.obj.name = f"{case.name}_{solver}"
        scene.collection.objects.link(self.obj)
        pose = self.obj.pose
        pose.ik_solver = 'ITASC' if solver == "itasc" else 'LEGACY'
        if solver == "itasc":
            # Animation mode with reiteration on every evaluation: each solve is stateless and runs to convergence.
            pose.ik_param.mode = 'ANIMATION'
            pose.ik_param.reiteration_method = 'ALWAYS'
            pose.ik_param.iterations = ITASC_ITERATIONS
            pose.ik_param.precision = tolerance
        self.effectors = case.effectors
        self.tops = [case.chain(e)[-1] for e in case.effectors]
        self.targets = []
        for k, effector in enumerate(case.effectors):
            target = bpy.data.objects.new(f"{self.obj.name}_target{k}", None)
            target.rotation_mode = 'QUATERNION'
            scene.collection.objects.link(target)
            constraint = self.obj.pose.bones[effector.bone].constraints.new('IK')
            constraint.target = target
            constraint.chain_count = effector.chain_length
            constraint.use_tail = True
            constraint.use_stretch = False
            constraint.use_rotation = effector.rotation
            if effector.pole:
                constraint.pole_target = bpy.data.objects[effector.pole]
                constraint.pole_angle = effector.pole_angle
            self.targets.append(target)

    def solve(self, sample, moving: Sequence[str]) -> Solved:
        """Move the empties to the sample and evaluate."""
        world = self.obj.matrix_world
        for target, (location, rotation) in zip(self.targets, sample):
            frame = Matrix(rotation).to_4x4() if rotation is not None else Matrix.Identity(4)
            frame.translation = location
            target.matrix_world = world @ frame
        began = time.perf_counter()
        bpy.context.view_layer.update()
        seconds = time.perf_counter() - began
        pose_bones = self.obj.evaluated_get(bpy.context.evaluated_depsgraph_get()).pose.bones
        return Solved(
            [np.array(pose_bones[e.bone].tail) for e in self.effectors],
            [np.array(pose_bones[e.bone].matrix.to_3x3().normalized()) for e in self.effectors],
            [(np.array(pose_bones[top].head), np.array(pose_bones[top].matrix.to_3x3().col[0])) for top in self.tops],
            {name: self.local_rotation(pose_bones, name) for name in moving},
            seconds,
        )

    def local_rotation(self, pose_bones, name: str) -> np.ndarray:
        """A bone's evaluated rotation relative to rest and parent: (parent_pose parent_rest^-1 rest)^-1 pose."""
        bone = self.obj.data.bones[name]
        rest = bone.matrix_local.to_3x3()
        pose = pose_bones[name].matrix.to_3x3().normalized()
        if bone.parent is not None:
            parent_pose = pose_bones[bone.parent.name].matrix.to_3x3().normalized()
            rest = parent_pose @ bone.parent.matrix_local.to_3x3().inverted() @ rest
        return np.array(rest.inverted() @ pose)


class FabrikSolver:
    """The add-on's core solver on the skeleton read from the rig."""

    def __init__(self, case: RigCase, settings: SolveSettings) -> None:
        """Read the rig's skeleton (rest pose and limits) and its effectors' goals' fixed parts."""
        self.skeleton = armature.skeleton_of(case.obj)
        self.settings = settings
        self.effectors = case.effectors
        self.tips = [self.skeleton.index(e.bone) for e in case.effectors]
        self.tops = [self.skeleton.index(case.chain(e)[-1]) for e in case.effectors]
        self.poles = pole_points(case)

    def goals(self, sample) -> list[Goal]:
        """A sample's goals (`rig_classes.random_targets`) on the skeleton read from the rig."""
        return [
            Goal(
                bone=tip, target=tuple(location), chain_length=effector.chain_length,
                rotation=tuple(Matrix(rotation).to_quaternion().normalized()) if rotation is not None else None,
                pole=pole, pole_angle=effector.pole_angle,
            )
            for tip, effector, pole, (location, rotation) in zip(self.tips, self.effectors, self.poles, sample)
        ]

    def solve(self, sample, moving: Sequence[str]) -> Solved:
        """Solve from the rest pose."""
        goals = self.goals(sample)
        began = time.perf_counter()
        pose, _ = solve(self.skeleton, goals, self.skeleton.rest_pose(), self.settings)
        seconds = time.perf_counter() - began
        local = self.skeleton.local_rotations(pose)
        return Solved(
            [pose.tails[tip] for tip in self.tips],
            [pose.frames[tip] for tip in self.tips],
            [(pose.heads[top], pose.frames[top][:, 0]) for top in self.tops],
            {name: local[self.skeleton.index(name)] for name in moving},
            seconds,
        )


def rotation_angle(a: np.ndarray, b) -> float:
    """The angle (radians) of the rotation taking frame a to frame b."""
    cosine = (np.trace(np.asarray(a).T @ np.asarray(b)) - 1.0) / 2.0
    return math.acos(min(1.0, max(-1.0, cosine)))


def pole_miss(base: np.ndarray, x_axis: np.ndarray, target, pole, pole_angle: float) -> float:
    """How far (radians) the chain is turned from where its pole asks, by Blender's definition of the pole angle.

    Blender turns the chain about the line from its base to the target until
    the first bone's X axis, turned by the pole angle about that line, faces
    the pole; this is the remaining turn between the two, wrapped to [0, pi].
    """
    axis = np.asarray(target) - base
    axis = axis / np.linalg.norm(axis)
    x = x_axis - axis * axis.dot(x_axis)
    towards = np.asarray(pole) - base
    towards = towards - axis * axis.dot(towards)
    angle = math.atan2(axis.dot(np.cross(towards, x)), towards.dot(x))
    return abs(math.remainder(angle - pole_angle, 2.0 * math.pi))


def measure(
    rig_name: str, count: int = 20, seed: int = 0, solvers: Sequence[str] = SOLVERS, max_iterations: int | None = None
) -> dict:
    """Build the rig class in an empty scene and solve `count` seeded reachable targets with each solver.

    Returns {"rig", "count", "reach", "tolerance", "solvers": {key: results}}
    where results hold per-sample lists ("reached", "miss" in armature units,
    "angle_miss" and "pole_miss" in radians or None when the rig has no
    rotation goal or pole, "violation" in radians, "seconds") and their
    summary ("reached_share", "median_miss", "worst_miss", "worst_angle_miss",
    "median_pole_miss", "violations", "worst_violation", "median_ms").
    """
    register_addon()
    bpy.ops.wm.read_factory_settings(use_empty=True)
    case = RIG_CLASSES[rig_name]()
    samples = random_targets(case, np.random.default_rng(seed), count)
    reach = case.reach()
    tolerance = RELATIVE_TOLERANCE * reach
    # The solvers stop at half the tolerance, so that one stopping right at it still counts as reached.
    settings = SolveSettings(max_iterations=max_iterations or SolveSettings().max_iterations, tolerance=tolerance / 2.0)
    runners = {
        key: FabrikSolver(case, settings) if key == "fabrik" else BlenderSolver(case, key, tolerance / 2.0)
        for key in solvers
    }
    moving = case.moving_bones()
    limits = {name: ik_limits(case.obj.pose.bones[name]) for name in moving}
    poles = pole_points(case)
    keys = ("reached", "miss", "angle_miss", "pole_miss", "violation", "seconds")
    results = {solver: {key: [] for key in keys} for solver in solvers}
    for sample in samples:
        # Interleaved: every solver takes this sample before the next one, so load changes hit them all alike.
        for solver, runner in runners.items():
            solved = runner.solve(sample, moving)
            targets = [np.array(location) for location, _ in sample]
            miss = max(float(np.linalg.norm(tail - target)) for tail, target in zip(solved.tails, targets))
            angles = [rotation_angle(r, goal) for r, (_, goal) in zip(solved.rotations, sample) if goal is not None]
            turns = [
                pole_miss(base, x_axis, target, pole, effector.pole_angle)
                for (base, x_axis), target, pole, effector in zip(solved.bases, targets, poles, case.effectors)
                if pole is not None
            ]
            row = results[solver]
            row["miss"].append(miss)
            row["angle_miss"].append(max(angles) if angles else None)
            row["pole_miss"].append(max(turns) if turns else None)
            row["reached"].append(miss <= tolerance and all(a <= ANGLE_TOLERANCE for a in angles))
            row["violation"].append(max(limit_violation(limits[name], solved.local[name]) for name in moving))
            row["seconds"].append(solved.seconds)
    for row in results.values():
        angles = [a for a in row["angle_miss"] if a is not None]
        turns = [t for t in row["pole_miss"] if t is not None]
        row.update(
            reached_share=sum(row["reached"]) / count,
            median_miss=statistics.median(row["miss"]),
            worst_miss=max(row["miss"]),
            worst_angle_miss=max(angles) if angles else None,
            median_pole_miss=statistics.median(turns) if turns else None,
            violations=sum(v > VIOLATION for v in row["violation"]),
            worst_violation=max(row["violation"]),
            median_ms=1000.0 * statistics.median(row["seconds"]),
        )
    return {"rig": rig_name, "count": count, "reach": reach, "tolerance": tolerance, "solvers": results}


def _degrees(radians: float | None) -> str:
    """An angle for the table, '–' when there is none."""
    return "–" if radians is None else f"{math.degrees(radians):.1f}°"


def table_rows(measured: dict) -> list[str]:
    """Markdown rows for one rig: misses relative to the reach, violations with the worst one in degrees."""
    rows = []
    reach = measured["reach"]
    for key, row in measured["solvers"].items():
        violations = f"{row['violations']}"
        if row["violations"]:
            violations += f" (worst {_degrees(row['worst_violation'])})"
        rows.append(
            f"| {measured['rig']} | {LABELS[key]} | {100 * row['reached_share']:.0f} % "
            f"| {row['median_miss'] / reach:.1e} | {row['worst_miss'] / reach:.1e} "
            f"| {_degrees(row['worst_angle_miss'])} | {_degrees(row['median_pole_miss'])} "
            f"| {violations} | {row['median_ms']:.2f} |"
        )
    return rows


def main() -> None:
    """Measure the chosen rig classes and print one markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100, help="random reachable targets per rig")
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--rigs", nargs="+", choices=list(RIG_CLASSES), default=list(RIG_CLASSES))
    parser.add_argument("--solvers", nargs="+", choices=SOLVERS, default=list(SOLVERS))
    parser.add_argument("--iterations", type=int, default=props.DEFAULT_ITERATIONS,
                        help="FABRIK's iteration cap (the add-on's default unless given)")
    args = parser.parse_args()
    print(f"{args.count} random reachable targets per rig (seed {args.seed}), every solve from the rest pose.")
    print(f"Reached: every effector within {RELATIVE_TOLERANCE:g} x reach of its target (reach = summed bone lengths "
          f"of the longest effector chain) and rotation goals within {math.degrees(ANGLE_TOLERANCE):g}°; "
          f"misses are given as fractions of the reach.")
    print("Angle miss: the tip's orientation against a rotation goal. Pole miss: how far the chain is turned about "
          "its base-to-target line from where its pole asks (Blender's definition of the pole angle).")
    print(f"Limit violations: solves with a bone more than {VIOLATION:g} rad outside its IK limits. "
          f"FABRIK: at most {args.iterations} iterations; Blender Standard: 500 (default); iTaSC: "
          f"{ITASC_ITERATIONS}, reiterating every evaluation. Times: median wall time per solve (for Blender, "
          f"the depsgraph update after moving the targets).\n")
    print("| rig | solver | reached | median miss | worst miss | worst angle miss | median pole miss "
          "| limit violations | median ms |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in args.rigs:
        measured = measure(name, args.count, args.seed, args.solvers, args.iterations)
        for row in table_rows(measured):
            print(row, flush=True)


if __name__ == "__main__":
    main()
