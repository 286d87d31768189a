# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmarks: FABRIK live solving against Blender's own IK constraint on the same rigs, interleaved, over several runs.

Run with `python3 tools/dev.py bench` (options pass through), or directly:
`.venv/bin/python benchmarks/run.py [--runs 3] [--frames 200] [--rigs "chain 10,hand"] [--no-memory]`.

Machines here are shared and noisy, so every figure is a median over many
frames, measured against a baseline in the same process, and the table gives
the range (lowest to highest per-run median) over several runs, never one
lucky run. Each rig is built three times, each in its own scene of one file:

* "no IK": the rig with its animated targets and no solver at all (what a frame costs anyway);
* "Blender IK": Blender's IK constraint (legacy solver, default settings) on the same chains, limits and poles;
* "FABRIK": this add-on's live solving (frame_change_post handler).

The three are interleaved: the frames are played in blocks of BLOCK frames,
each block in every scene in turn (the order rotating from block to block),
so a change in the machine's load hits all three alike. The IK cost of a
frame is its time minus the "no IK" time; the add-on's status times its
solver apart, so each frame's cost is also given without it (what reading,
checking and writing the pose and Blender's second evaluation of the rig
cost: what a solver of no cost would still pay). The error is the distance from
each tip to its target, measured on the evaluated scene, relative to the
chain's reach.

After the table: memory over a long live playback (process RSS and Python's
heap blocks, read without tracemalloc, which would itself allocate), whether
the add-on's per-rig tables forget a deleted rig, and the paper's setting.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import bpy  # noqa: E402
import live_memory  # noqa: E402
import mocap  # noqa: E402
import numpy as np  # noqa: E402
from rigs import (  # noqa: E402
    ITERATIONS,
    chain_layout,
    chain_reach,
    class_rigs,
    convert_from_blender_ik,
    hand_layout,
    hinged_hand_rigs,
    humanoid_rigs,
    layout_rigs,
    live_layout,
    mocap_rigs,
    quiet,
    rigify_rigs,
    robot_arm_rigs,
    set_mode,
    tentacle_rigs,
)

import fabrik_addon  # noqa: E402
from fabrik_addon.blender.effectors import pins  # noqa: E402
from fabrik_addon.blender.rig import props  # noqa: E402
from fabrik_addon.blender.rig.status import statuses  # noqa: E402
from fabrik_addon.core import Goal, SolveSettings, skeleton_from_points, solve  # noqa: E402
from fabrik_addon.core.math.matrix_rows import quaternion_to_matrix  # noqa: E402

#: The three scenes of a rig, in their first order.
MODES = ("none", "blender", "fabrik")
#: Frames per interleaving block (each scene plays a block, then the next scene plays the same block).
BLOCK = 10
#: The 1000-bone chain has converged when every tip is this close to its target, relative to the reach.
CONVERGED = 1e-4
#: Every how many frames the jumping rows' targets jump (a block's first frame, so its untimed frame before it
#: is the last one before the jump).
JUMP_EVERY = 2 * BLOCK


@dataclass
class RigSpec:
    """One row of the table: how to build it, FABRIK's iteration cap, its target and how to check it."""

    key: str
    label: str
    make: Callable[[range], tuple[list, str]]
    #: FABRIK's iteration cap, None for the add-on's defaults (iterations and tolerance).
    iterations: int | None = ITERATIONS
    target: str = "–"
    #: From the row's ranges, whether the target is met (None: no target).
    check: Callable[[dict], bool] | None = None
    #: The project step (and its issue) that set the target.
    source: str = ""
    #: Whether FABRIK's rigs are built with Blender's IK constraints and converted (`convert_from_blender_ik`).
    converted: bool = False
    #: Where FABRIK's live solves start ("Start From": 'FK' this frame's pose, 'PREVIOUS' the previous solution);
    #: None: as the rig's builder sets it.
    start: str | None = None
    #: Whether FABRIK's rigs have their feet pinned while they stand (`mocap.pin_feet`).
    pinned: bool = False
    #: Whether FABRIK's rigs let their hips follow the pull as well (`mocap.free_root`).
    root: bool = False
    #: Every this many frames the targets jump (`rigs.add_layout`); the frames right after a jump are timed apart.
    jump_every: int = 0
    #: Other frames timed apart (given the frame number), and what they are; the jumps' when `jump_every` is set.
    apart: Callable[[int], bool] | None = None
    apart_label: str = ""
    #: Whether the frames timed apart are those where FABRIK's pose stretches some bone (read from the scene).
    apart_stretched: bool = False

    def __post_init__(self) -> None:
        if self.jump_every and self.apart is None:
            every = self.jump_every
            # (a run plays frames 1 to N)
            self.apart, self.apart_label = (lambda frame: frame > 1 and (frame - 1) % every == 0), "after a jump"


def _ratio_at_most(limit: float) -> Callable[[dict], bool]:
    """Check: the worst run's FABRIK cost / Blender cost is at most `limit`."""
    return lambda row: bool(row["ratio"]) and max(row["ratio"]) <= limit


#: What every rig class users bring is held to: at most 3x Blender's IK cost, live from this frame's pose and
#: from the previous solution.
CLASS_TARGET = {"target": "≤ 3x Blender's cost", "check": _ratio_at_most(3.0), "source": "Step 11 (issue 30)"}
#: The rig classes users bring, each also built with Blender's IK constraints and converted, and each also solved
#: from the previous solution.
CLASSES = [
    (RigSpec(key, label, class_rigs(build, f"samples/rig_classes.py: {note}"), **CLASS_TARGET), build, note)
    for key, label, build, note in (
        ("finger", "finger, MCP 2 DOF + 2 hinges", "build_finger", "one finger, its knuckle in ranges and two hinges"),
        ("arm6", "6-axis arm, hinges", "build_arm6", "an industrial arm, six hinge joints"),
        ("ur5", "UR5, flange position", "build_ur5", "the UR5 from its DH table, hinges in its joint ranges"),
        ("ur5 rotation", "UR5, position + rotation", "build_ur5_rot", "the UR5 with a rotation goal on its flange"),
        ("tentacle 30", "tentacle 30, 15-degree cones", "build_tentacle", "30 bones in 15-degree swing cones"),
        ("arm pole straight", "arm, elbow hinge + pole, straight", "build_arm_pole_straight",
         "upper arm and forearm, elbow hinge, pole, straight at rest"),
        ("arm pole bent", "arm, elbow hinge + pole, bent 15°", "build_arm_pole_bent",
         "the same arm bent 15 degrees at rest"),
        ("leg pole straight", "leg, knee hinge + pole, straight", "build_leg_pole_straight",
         "thigh and shin, knee hinge, pole, straight at rest"),
        ("leg pole bent", "leg, knee hinge + pole, bent 15°", "build_leg_pole_bent",
         "the same leg bent 15 degrees at rest"),
    )
]
#: What a frame right after a jump of the target is held to: at most this many times a frame of smooth motion.
AFTER_JUMP = 3.0

SPECS = [
    RigSpec("chain 10", "chain 10", layout_rigs(lambda: chain_layout(10), "10 connected bones"),
            target="≤ 1.5x Blender's cost", check=_ratio_at_most(1.5), source="Step 7 (issue 13)"),
    RigSpec("chain 10 converted", "chain 10, converted", layout_rigs(lambda: chain_layout(10), "10 connected bones, "
            "built with Blender's IK constraint and converted (Convert IK Constraints)"),
            target="as chain 10", converted=True, source="Step 15 (issue 47)"),
    RigSpec("chain 50", "chain 50", layout_rigs(lambda: chain_layout(50), "50 connected bones"),
            target="≤ 1.5x Blender's cost", check=_ratio_at_most(1.5), source="Step 7 (issue 13)"),
    RigSpec("chain 200", "chain 200", layout_rigs(lambda: chain_layout(200), "200 connected bones")),
    RigSpec("chain 1000", "chain 1000", layout_rigs(lambda: chain_layout(1000), "1000 connected bones"),
            iterations=None, target="converged, frame < 50 ms", source="Step 11 (issue 30)",
            check=lambda row: row["converged"] and max(row["fabrik_frame"]) < 0.050),
    *(
        RigSpec(f"chain 1000 jumps{suffix}", f"chain 1000, target jumping{label}",
                layout_rigs(lambda: chain_layout(1000), f"1000 connected bones, the target jumping across its circle "
                            f"every {JUMP_EVERY} frames", jump_every=JUMP_EVERY),
                iterations=None, target="converged, frame and slowest frame after a jump < 50 ms", start=start,
                source="Step 11 (issue 30)",
                check=lambda row: row["converged"] and max(row["fabrik_frame"] + row["after_jump"]) < 0.050,
                jump_every=JUMP_EVERY)
        for suffix, label, start in (("", "", None), (" previous", ", Previous Solution", "PREVIOUS"))
    ),
    RigSpec("hand", "hand (palm + 5 x 4)",
            layout_rigs(hand_layout, "palm + 5 four-bone fingers, chains through the palm"),
            target="≤ 0.33x Blender's cost", check=_ratio_at_most(1.0 / 3.0), source="Step 7 (issue 13)"),
    RigSpec("tentacle", "tentacle 40, cones", tentacle_rigs, target="≤ 8x Blender's cost", check=_ratio_at_most(8.0),
            source="Step 7 (issue 13)"),
    RigSpec("hinged hand", "hand, finger hinges", hinged_hand_rigs),
    RigSpec("robot arm", "robot arm, 6 hinges", robot_arm_rigs),
    *(spec for spec, _, _ in CLASSES),
    *[replace(spec, key=f"{spec.key} converted", label=f"{spec.label}, converted", converted=True)
      for spec, _, _ in CLASSES],
    *[replace(spec, key=f"{spec.key} previous", label=f"{spec.label}, Previous Solution", start="PREVIOUS")
      for spec, _, _ in CLASSES],
    *[RigSpec(f"{spec.key} jumps", f"{spec.label}, target jumping, Previous Solution",
              class_rigs(build, f"samples/rig_classes.py: {note}", JUMP_EVERY), start="PREVIOUS",
              jump_every=JUMP_EVERY, target=f"after a jump ≤ {AFTER_JUMP:g}x a smooth frame", source="Step 15 (issue 47)",
              check=lambda row: bool(row["apart_ratio"]) and max(row["apart_ratio"]) <= AFTER_JUMP)
      for spec, build, note in CLASSES],
    RigSpec("humanoid", "humanoid (Rigify, 5 eff., poles)", humanoid_rigs,
            target="FABRIK cost < 1.5 ms", check=lambda row: max(row["fabrik"]) < 0.0015, source="Step 7 (issue 13)"),
    RigSpec("rigify stretch", "Rigify human, converted, IK Stretch", rigify_rigs, apart_stretched=True,
            apart_label="stretched", target="stretched frame as one within reach", source="Step 15 (issue 47)",
            check=lambda row: bool(row["apart_ratio"]) and max(row["apart_ratio"]) <= 1.25),
    RigSpec("mocap", "captured motion, 52 bones (5 eff., 4 poles)", mocap_rigs, **CLASS_TARGET),
    RigSpec("mocap previous", "captured motion, Previous Solution", mocap_rigs, start="PREVIOUS", **CLASS_TARGET),
    RigSpec("mocap converted", "captured motion, converted", mocap_rigs, converted=True, **CLASS_TARGET),
    RigSpec("mocap pinned", "captured motion, feet pinned", mocap_rigs, pinned=True),
    RigSpec("mocap root", "captured motion, feet pinned, root free", mocap_rigs, pinned=True, root=True),
    RigSpec("20 hands", "20 hands live at once", layout_rigs(hand_layout, "20 hand rigs in one scene", copies=20),
            target="frame < 40 ms", check=lambda row: max(row["fabrik_frame"]) < 0.040, source="Step 7 (issue 13)"),
]


# Measuring one rig: three scenes, played in interleaved blocks.

@dataclass
class Scene:
    """One mode's scene: its rigs, the (rig, tip, target, subtarget, reach) tips to measure, what was measured."""

    mode: str
    scene: object
    rigs: list
    pairs: list
    frame_times: list = field(default_factory=list)
    solve_times: list = field(default_factory=list)
    #: Per timed frame, the solver's own part of `solve_times` (the plan's solve, without reading and writing).
    solver_times: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    #: Per timed frame, the largest turn of any joint since the frame before (degrees).
    turns: list = field(default_factory=list)
    #: Why FABRIK's solves stopped ("converged", "max_iterations", ...), counted over rigs and frames.
    stopped: Counter = field(default_factory=Counter)
    #: FABRIK's iterations per rig and frame.
    iterations: list = field(default_factory=list)
    #: Per timed frame, whether some bone of the rigs is scaled (IK stretch), where that is asked for.
    stretched: list = field(default_factory=list)
    track_stretch: bool = False


def build_scenes(spec: RigSpec, frames: range) -> tuple[list[Scene], str]:
    """A fresh file with one scene per mode, each holding the spec's rigs set up for its mode."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    window = bpy.context.window
    scenes, note = [], ""
    for mode in MODES:
        scene = bpy.context.scene if not scenes else bpy.data.scenes.new(mode)
        scene.name = mode
        # The samples' builders (and bpy.ops) work on the context's scene: make it this one.
        window.scene = scene
        scene.frame_start, scene.frame_end = frames.start, frames.stop - 1
        rigs, note = spec.make(frames)
        pairs = []
        for rig in rigs:
            for effector in rig.fabrik.effectors:
                reach = chain_reach(rig, effector.bone, effector.chain_length)
                pairs.append((rig, effector.bone, effector.target, effector.subtarget, reach))
            if mode == "fabrik" and spec.converted:
                convert_from_blender_ik(rig)
            set_mode(rig, mode)
            if mode == "fabrik" and spec.iterations is not None:
                rig.fabrik.iterations = spec.iterations
            if mode == "fabrik" and spec.start is not None:
                rig.fabrik.start = spec.start
            if mode == "fabrik" and spec.pinned:
                mocap.pin_feet(rig, frames)
            if mode == "fabrik" and spec.root:
                mocap.free_root(rig)
        scenes.append(Scene(mode, scene, rigs, pairs, track_stretch=spec.apart_stretched and mode == "fabrik"))
    return scenes, note


def play_block(entry: Scene, block: range, warm: int) -> None:
    """Play a block of frames in one scene: an untimed frame first (the switch's own costs), then timed ones."""
    bpy.context.window.scene = entry.scene
    entry.scene.frame_set(warm)
    # (the first block's warm frame is the last frame, not a neighbour: its first frame has no turn)
    before = local_rotations(entry) if entry.mode != "none" and warm == block.start - 1 else None
    for frame in block:
        began = time.perf_counter()
        entry.scene.frame_set(frame)
        entry.frame_times.append(time.perf_counter() - began)
        if entry.mode == "fabrik":
            shown = [statuses[rig.name] for rig in entry.rigs if rig.name in statuses]
            entry.solve_times.append(sum(status.seconds for status in shown))
            entry.solver_times.append(sum(status.solver_seconds for status in shown))
            entry.stopped.update(
                getattr(status.report, "stopped_by", None) or f"no solve ({status.message})" for status in shown
            )
            entry.iterations.extend(status.report.iterations for status in shown if status.report is not None)
        if entry.track_stretch:
            entry.stretched.append(any_stretched(entry))
        if entry.mode != "none":
            entry.errors.append(worst_error(entry))
            now = local_rotations(entry)
            if before is not None:
                entry.turns.append(largest_turn(before, now))
            before = now


def any_stretched(entry: Scene) -> bool:
    """Whether some pose bone of the scene's rigs has a scale off 1 (IK stretch wrote one)."""
    for rig in entry.rigs:
        scales = np.empty(3 * len(rig.pose.bones), dtype=np.float32)
        rig.pose.bones.foreach_get("scale", scales)
        if np.abs(scales - 1.0).max(initial=0.0) > 1e-4:
            return True
    return False


def local_rotations(entry: Scene) -> np.ndarray:
    """Every bone's evaluated rotation relative to its parent's, all rigs of a scene: (bones, 3, 3)."""
    depsgraph = bpy.context.evaluated_depsgraph_get()
    out = []
    for rig in entry.rigs:
        bones = rig.evaluated_get(depsgraph).pose.bones
        frames = np.array([b.matrix.to_3x3().normalized() for b in bones])
        parents = [bones.find(b.parent.name) if b.parent else -1 for b in bones]
        above = np.array([frames[p] if p >= 0 else np.eye(3) for p in parents])
        out.append(np.swapaxes(above, 1, 2) @ frames)
    return np.concatenate(out)


def largest_turn(before: np.ndarray, now: np.ndarray) -> float:
    """The largest angle (degrees) any joint turned between two frames' local rotations."""
    cosine = (np.einsum("bij,bij->b", before, now) - 1.0) / 2.0
    return math.degrees(float(np.arccos(np.clip(cosine, -1.0, 1.0)).max()))


def worst_error(entry: Scene) -> float:
    """The largest tip-to-target distance relative to its chain's reach, on the evaluated scene (a pinned target
    where its pin holds it)."""
    depsgraph = bpy.context.evaluated_depsgraph_get()
    worst = 0.0
    for rig, tip, target, subtarget, reach in entry.pairs:
        evaluated = rig.evaluated_get(depsgraph)
        tip_at = evaluated.matrix_world @ evaluated.pose.bones[tip].tail
        goal = target.evaluated_get(depsgraph).matrix_world
        if subtarget:
            goal = goal @ target.evaluated_get(depsgraph).pose.bones[subtarget].matrix
        for effector in rig.fabrik.effectors:
            if effector.bone == tip and effector.target == target:
                goal = pins.held_world(goal, effector)
        worst = max(worst, (tip_at - goal.translation).length / reach)
    return worst


def measure_run(spec: RigSpec, frames: range) -> tuple[dict, str]:
    """One run of a rig: medians per mode, the IK costs and the worst errors."""
    with quiet():  # the samples' operators and Rigify print a line per target and rig
        scenes, note = build_scenes(spec, frames)
    for entry in scenes:  # warm caches (skeletons, IK trees) before anything is timed
        bpy.context.window.scene = entry.scene
        entry.scene.frame_set(frames.start)
    blocks = [frames[i:i + BLOCK] for i in range(0, len(frames), BLOCK)]
    for b, block in enumerate(blocks):
        # The order rotates, so that no mode always plays right after another.
        for k in range(len(scenes)):
            entry = scenes[(b + k) % len(scenes)]
            play_block(entry, block, block.start - 1 if block.start > frames.start else frames.stop - 1)
    by_mode = {entry.mode: entry for entry in scenes}
    frame = {mode: statistics.median(entry.frame_times) for mode, entry in by_mode.items()}

    def left(parts: list[float]) -> float:
        """FABRIK's median frame less a part of each frame, as an IK cost (less the frame without IK)."""
        return statistics.median(t - p for t, p in zip(by_mode["fabrik"].frame_times, parts)) - frame["none"]

    result = {
        "none": frame["none"],
        "blender": frame["blender"] - frame["none"],
        "fabrik": frame["fabrik"] - frame["none"],
        "fabrik_frame": frame["fabrik"],
        "solve": statistics.median(by_mode["fabrik"].solve_times),
        "solver": statistics.median(by_mode["fabrik"].solver_times),
        # What a frame costs beyond Blender's frame without IK when the solver's own time is taken out of it:
        # reading, checking and writing the pose, and Blender's evaluation of the pose written.
        "outside": left(by_mode["fabrik"].solver_times),
        # What is left of it when the live solve's own time (reading, solving, writing) is taken out too: Blender's
        # evaluation of the pose written, which no change inside the handler can take away.
        "after_write": left(by_mode["fabrik"].solve_times),
        # The slowest of the frames right after a jump (the frame times come in the frames' order).
        "after_jump": max(
            (t for f, t in zip(frames, by_mode["fabrik"].frame_times) if spec.jump_every and spec.apart(f)),
            default=None,
        ),
        # Each frame less the solver's own time: what the frame costs without the solver.
        "rest": statistics.median(t - p for t, p in zip(by_mode["fabrik"].frame_times, by_mode["fabrik"].solver_times)),
        **apart_costs(spec, frames, by_mode),
        "blender_error": max(by_mode["blender"].errors),
        "blender_turn": max(by_mode["blender"].turns),
        "fabrik_turn": max(by_mode["fabrik"].turns),
        "fabrik_error": max(by_mode["fabrik"].errors),
        "fabrik_converged": sum(error <= CONVERGED for error in by_mode["fabrik"].errors),
        "stopped": by_mode["fabrik"].stopped,
        "iterations": by_mode["fabrik"].iterations,
        "pairs": len(by_mode["fabrik"].pairs),
        "bones": sum(len(rig.data.bones) for rig in by_mode["fabrik"].rigs),
    }
    bpy.context.window.scene = scenes[0].scene
    return result, note


def apart_costs(spec: RigSpec, frames: range, by_mode: dict[str, Scene]) -> dict:
    """FABRIK's median IK cost (its frame less the frame without IK) over the frames timed apart, and over the
    others; {} where the spec times none apart."""
    if spec.apart_stretched:
        chosen = by_mode["fabrik"].stretched
    elif spec.apart is not None:
        chosen = [spec.apart(f) for f in frames]
    else:
        return {}
    if all(chosen) or not any(chosen):
        return {}  # (too few frames to time any apart, or none like the others)

    def median(times: list[float], apart: bool) -> float:
        return statistics.median(t for t, c in zip(times, chosen) if c == apart)

    frame, none, solver = by_mode["fabrik"].frame_times, by_mode["none"].frame_times, by_mode["fabrik"].solver_times
    return {
        "apart": median(frame, True) - median(none, True), "together": median(frame, False) - median(none, False),
        "apart_solver": median(solver, True), "together_solver": median(solver, False),
    }


def summarize(spec: RigSpec, runs: list[dict], frames: int) -> dict:
    """Ranges over the runs: per-run values gathered per quantity, the ratio per run, convergence, the check."""
    row = {
        key: [run[key] for run in runs] for key in ("none", "blender", "fabrik", "fabrik_frame", "solve", "solver")
    }
    row["after_jump"] = [run["after_jump"] for run in runs if run["after_jump"] is not None]
    # The solver's own time over the rest of the frame, and the frames apart's cost over the others', per run.
    row["solver_share"] = [run["solver"] / run["rest"] for run in runs]
    row["rest"] = [run["rest"] for run in runs]
    row["apart"] = [run["apart"] for run in runs if "apart" in run]
    row["together"] = [run["together"] for run in runs if "together" in run]
    row["apart_ratio"] = [a / t for a, t in zip(row["apart"], row["together"]) if t > 0.0]
    row["apart_solver_ratio"] = [
        run["apart_solver"] / run["together_solver"] for run in runs if run.get("together_solver", 0.0) > 0.0
    ]
    # FABRIK's cost over Blender's, per run (a run whose Blender cost vanished in the noise has no ratio).
    row["ratio"] = [run["fabrik"] / run["blender"] for run in runs if run["blender"] > 0.0]
    for key in ("outside", "after_write"):
        row[f"{key}_ratio"] = [run[key] / run["blender"] for run in runs if run["blender"] > 0.0]
    row["blender_error"] = max(run["blender_error"] for run in runs)
    row["fabrik_error"] = max(run["fabrik_error"] for run in runs)
    row["blender_turn"] = max(run["blender_turn"] for run in runs)
    row["fabrik_turn"] = max(run["fabrik_turn"] for run in runs)
    row["converged"] = row["fabrik_error"] <= CONVERGED
    row["frames_converged"] = sum(run["fabrik_converged"] for run in runs)
    row["stopped"] = sum((run["stopped"] for run in runs), Counter())
    row["iterations"] = [n for run in runs for n in run["iterations"]]
    row["frames"], row["bones"] = frames, runs[0]["bones"]
    row["met"] = None if spec.check is None else spec.check(row)
    return row


# Output.

def ms_range(values: list[float]) -> str:
    """min–max of seconds, in milliseconds."""
    high = max(values) * 1e3
    return span(min(values) * 1e3, high, 3 if high < 10 else 1)


def span(low: float, high: float, digits: int) -> str:
    """'low–high' to `digits` decimals, one number when both read the same."""
    low_text, high_text = f"{low:.{digits}f}", f"{high:.{digits}f}"
    return low_text if low_text == high_text else f"{low_text}–{high_text}"


def ratio_range(values: list[float]) -> str:
    """min–max of FABRIK cost / Blender cost, as 'N.NNx Blender's cost'."""
    if not values:
        return "– (Blender's cost below the noise)"
    low, high = min(values), max(values)
    # Two decimals where targets are judged (1/3, 1.5, 8), fewer where they would only be noise.
    digits = 2 if high < 10 else 1 if high < 100 else 0
    return f"{span(low, high, digits)}x Blender's cost"


def print_table(specs: list[RigSpec], rows: dict[str, dict], runs: int) -> None:
    """The markdown table, with the legend above it."""
    def table(header: tuple[str, ...], cells_of: Callable[[RigSpec, dict], tuple[str, ...]], right: int) -> None:
        """One markdown table, a row per measured rig; its first `right` columns after the rig's are numbers."""
        print("| " + " | ".join(header) + " |")
        print("|---|" + "---:|" * right + "---|" * (len(header) - 1 - right))
        for spec in specs:
            row = rows.get(spec.key)
            if row is not None:
                print("| " + " | ".join((spec.label, *cells_of(spec, row))) + " |")
        print()

    def targets(spec: RigSpec, row: dict) -> tuple[str, ...]:
        met = "–" if row["met"] is None else ("PASS" if row["met"] else "MISS")
        return (ms_range(row["blender"]), ms_range(row["fabrik"]), ratio_range(row["ratio"]), spec.target, met,
                spec.source or "–")

    def costs(spec: RigSpec, row: dict) -> tuple[str, ...]:
        fabrik_frame = ms_range(row["fabrik_frame"])
        if row["after_jump"]:
            fabrik_frame += f" (slowest after a jump: {ms_range(row['after_jump'])})"
        return (str(row["bones"]), str(row["frames"]), ms_range(row["none"]), fabrik_frame, ms_range(row["solve"]),
                ms_range(row["solver"]), ratio_range(row["outside_ratio"]), ratio_range(row["after_write_ratio"]))

    def errors(spec: RigSpec, row: dict) -> tuple[str, ...]:
        fabrik_error = f"{row['fabrik_error']:.1e}"
        if spec.key.startswith("chain 1000"):
            frames = f"{row['frames_converged']}/{row['frames'] * runs} frames"
            fabrik_error += f" ({'converged' if row['converged'] else 'not converged'}: {frames} within {CONVERGED:g})"
        return (f"{row['blender_error']:.1e}", fabrik_error, f"{row['blender_turn']:.1f}°", f"{row['fabrik_turn']:.1f}°")

    print("Targets (each set by a step of the project, named with its issue; a MISS is a target not met yet):\n")
    table(("rig", "Blender IK cost ms/frame", "FABRIK cost ms/frame", "FABRIK cost / Blender cost", "target", "met",
           "set by"), targets, 3)
    print("Where a frame's time goes:\n")
    table(("rig", "bones", "frames", "no IK ms/frame", "FABRIK frame ms", "FABRIK solve ms", "FABRIK solver ms",
           "FABRIK cost without the solver / Blender cost", "Blender's evaluation after the write / Blender cost"),
          costs, 8)
    print("Errors and continuity:\n")
    table(("rig", "Blender worst error", "FABRIK worst error", "Blender largest joint turn a frame",
           "FABRIK largest joint turn a frame"), errors, 4)


def print_split(specs: list[RigSpec], rows: dict[str, dict]) -> None:
    """The second table: the solver's part of a frame, and frames timed apart against the others."""
    print("| rig | FABRIK solver ms | FABRIK frame without the solver ms | solver / frame without it "
          "| frames timed apart | their IK cost ms | the others' IK cost ms | apart / others | solver, apart / others |")
    print("|---|---:|---:|---:|---|---:|---:|---:|---:|")
    for spec in specs:
        row = rows.get(spec.key)
        if row is None:
            continue
        share = span(min(row["solver_share"]), max(row["solver_share"]), 2) + "x"
        if row["apart"]:
            ratio = span(min(row["apart_ratio"]), max(row["apart_ratio"]), 2) + "x" if row["apart_ratio"] else "–"
            solver = row["apart_solver_ratio"]
            solver = span(min(solver), max(solver), 2) + "x" if solver else "–"
            apart = (spec.apart_label, ms_range(row["apart"]), ms_range(row["together"]), ratio, solver)
        else:
            apart = ("–",) * 5
        print("| " + " | ".join((spec.label, ms_range(row["solver"]), ms_range(row["rest"]), share, *apart)) + " |")


def pick(specs: list[RigSpec], wanted: str | None) -> list[RigSpec]:
    """The specs named by comma-separated words: an exact key picks that rig alone, other words all holding them."""
    if not wanted:
        return specs
    chosen = set()
    for word in (w.strip().lower() for w in wanted.split(",") if w.strip()):
        # Exact first: "chain 10" must not also pick "chain 1000", nor "hand" the 20 hands.
        matched = [spec.key for spec in specs if spec.key == word] or [
            spec.key for spec in specs if word in spec.key or word in spec.label.lower()
        ]
        if not matched:
            raise SystemExit(f"--rigs: no rig matches '{word}' (rigs: {', '.join(spec.key for spec in specs)})")
        chosen.update(matched)
    return [spec for spec in specs if spec.key in chosen]


def paper_setting(trials: int = 500) -> str:
    """The paper's own test: a 10-joint chain, random reachable targets, tolerance 0.01; core only, no Blender."""
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
    """Run the chosen rigs in every mode, interleaved, several times; print the table, memory checks, paper setting."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=200, help="frames per run and mode")
    parser.add_argument("--runs", type=int, default=3, help="runs; the table gives the range of the per-run medians")
    parser.add_argument("--rigs", help="comma-separated rig names or parts of names (default: all): "
                        + ", ".join(spec.key for spec in SPECS))
    parser.add_argument("--memory-frames", type=int, default=2000, help="frames of the long live playback")
    parser.add_argument("--no-memory", action="store_true", help="skip the memory and deleted-rig checks")
    parser.add_argument("--no-paper", action="store_true", help="skip the paper's setting (core only)")
    args = parser.parse_args()
    specs = pick(SPECS, args.rigs)
    fabrik_addon.register()
    # Read from the registered properties, so that the legend follows the add-on's defaults.
    defaults = {key: props.FabrikSettings.bl_rna.properties[key].default for key in ("iterations", "tolerance")}
    rows, notes = {}, {}
    began = time.perf_counter()
    try:
        runs: dict[str, list[dict]] = {spec.key: [] for spec in specs}
        for r in range(args.runs):
            for spec in specs:
                started = time.perf_counter()
                result, notes[spec.key] = measure_run(spec, range(1, args.frames + 1))
                runs[spec.key].append(result)
                print(f"[bench] run {r + 1}/{args.runs} {spec.key}: {time.perf_counter() - started:.1f} s", flush=True)
        for spec in specs:
            rows[spec.key] = summarize(spec, runs[spec.key], args.frames)
        memory = None if args.no_memory else live_memory.report(
            args.memory_frames,
            {"hand (palm + 5 x 4)": live_layout(hand_layout), "chain 50": live_layout(lambda: chain_layout(50))},
            live_layout(hand_layout),
        )
    finally:
        fabrik_addon.unregister()
    seconds = time.perf_counter() - began
    print(
        f"\n{args.runs} runs, each playing every rig's frames in three scenes (no IK, Blender IK, FABRIK live) "
        f"interleaved in blocks of {BLOCK} frames; {args.frames} frames per run and mode."
    )
    print("Figures are min–max over the runs of each run's median. IK cost = frame time minus the same rig's frame "
          "time without IK (where only the targets move, so Blender need not evaluate the rig again: that evaluation "
          "counts in both IK costs alike). FABRIK frame = the whole frame with live solving (the scene's total).")
    print("\"FABRIK cost / Blender cost\": FABRIK's IK cost divided by Blender's per run (below 1: FABRIK is cheaper). "
          "\"met\" is judged on the range's worst end.")
    print("FABRIK solve = the live solve's status time (reading the targets, the solver, writing the pose); FABRIK "
          "solver = the solver's own part of it (the plan's solve). \"FABRIK cost without the solver\": each frame's "
          "time less its solver time, as an IK cost (less the frame without IK), over Blender's: what reading, "
          "checking and writing the pose and Blender's second evaluation of the rig cost, which a solver of no "
          "cost would still pay. \"Blender's evaluation after the write\": each frame's time less the whole live "
          "solve's, the same way: Blender's evaluation of the pose written, which neither a faster solver nor faster "
          "reading and writing can take away, and the handler's bookkeeping around the solve (which rigs are live, "
          "what the evaluation updated).")
    print(f"FABRIK at {ITERATIONS} iterations and the default tolerance on every rig but the 1000-bone chain, which "
          f"keeps the add-on's defaults ({defaults['iterations']} iterations, tolerance {defaults['tolerance']:g} of "
          f"the rig's size); converged = every frame's tip within {CONVERGED:g} of the reach. Blender IK: legacy "
          f"solver, constraint defaults (500 iterations), same chains, limits and poles.")
    print("Largest joint turn a frame: the largest angle any joint of the rig turned from one frame to the next, "
          "over all frames and runs (evaluated local rotations): where a solver's pose jumps between neighbouring "
          "frames, it shows here.")
    print("Errors: worst tip-to-target distance over all frames and runs, relative to the chain's reach, on the "
          "evaluated scene. Where Blender's error is large its solver stopped short, so the ratio there compares "
          "with a solve that did not reach.")
    print()
    for spec in specs:
        stopped = ", ".join(f"{reason} {count}" for reason, count in rows[spec.key]["stopped"].most_common())
        iterations = rows[spec.key]["iterations"]
        median = f"{statistics.median(iterations):g}" if iterations else "–"
        print(f"- {spec.label}: {notes[spec.key]}; FABRIK's solves stopped by: {stopped}; median iterations {median}")
    print()
    print_table(specs, rows, args.runs)
    print()
    print("Where a frame's time goes: the solver's own time against the rest of the frame with live solving (each "
          "frame less its solver time: reading, checking and writing the pose, and Blender's evaluation), medians "
          "per run, min–max over the runs. Frames timed apart: the frames right after a jump of the target, or the "
          "frames where the limbs stretch; their IK cost (FABRIK's frame less the frame without IK, medians over "
          "those frames) against the other frames', and the solver's own time likewise.")
    print()
    print_split(specs, rows)
    if memory is not None:
        print()
        print(memory)
    if not args.no_paper:
        print()
        print(paper_setting())
    print(f"\n(benchmark took {seconds:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
