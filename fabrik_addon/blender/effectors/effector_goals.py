# SPDX-License-Identifier: GPL-3.0-or-later
"""A rig's effectors as the solver's goals: read in armature space, checked, and the ones that cannot be solved
set aside with the reason, per effector.

Bad input never raises into Blender and never loses anything: an effector
whose target is missing, not a number or parented to its own chain, whose
bone or chain is wrong, or whose chain has a channel that is not a number or
hangs from a bone scaled to zero, is left out of the solve with a line that
says why; the others are solved.
"""

from __future__ import annotations

import math
import time
from typing import NamedTuple

import bpy
import numpy as np
from mathutils import Matrix

from ...core import Goal, Skeleton
from ...core.math import quat
from ...core.model.tree import MovingTree
from ..rig import armature
from ..rig.armature import finite_matrix, usable_frame
from ..rig.channels import PoseRead
from ..rig.floor import floor_problem
from ..rig.held_bones import finite, held_bones, same
from ..rig.props import FabrikEffector, tolerance_problem
from ..rig.status import DISABLED
from . import integrity, pins
from .effector_values import EffectorValues

#: Blender's rotation_mode enum values of 'QUATERNION' and 'AXIS_ANGLE' (`armature.rotation_modes`).
_QUATERNION_MODE = armature.MODE_VALUES['QUATERNION']
_AXIS_ANGLE_MODE = armature.MODE_VALUES['AXIS_ANGLE']


#: Where a goal stands before `goal_at` places it.
ORIGIN = (0.0, 0.0, 0.0)


class EffectorError(ValueError):
    """An effector that cannot be solved, with a message for the user."""


def gather_goals(
    obj: bpy.types.Object, depsgraph: bpy.types.Depsgraph, skeleton: Skeleton,
    checked: list[EffectorValues] | None = None
) -> tuple[list[Goal], list[int], dict[int, str]]:
    """Goals (armature space) for the enabled effectors; problems are reported per effector, not raised.
    `checked` is the effectors as live solving read and checked them (with their problems and matrices), where
    it has."""
    to_armature = armature.world_to_armature(obj.evaluated_get(depsgraph) if depsgraph else obj)
    goals, used, problems = [], [], {}
    for index, effector in enumerate(checked if checked is not None else obj.fabrik.effectors):
        if not effector.enabled:
            problems[index] = DISABLED
            continue
        problem = effector.problem if checked is not None else integrity.effector_problem(obj, index, depsgraph)
        if problem:
            problems[index] = problem
            continue
        try:
            goals.append(_goal_of(obj, effector, depsgraph, skeleton, to_armature))
            used.append(index)
        except EffectorError as exc:
            problems[index] = str(exc)
    return goals, used, problems


def _goal_of(
    obj: bpy.types.Object, effector: FabrikEffector, depsgraph: bpy.types.Depsgraph, skeleton: Skeleton,
    to_armature: Matrix
) -> Goal:
    """One effector as a core goal, or EffectorError saying what is wrong."""
    if not effector.bone:
        raise EffectorError("no tip bone set")
    if effector.bone not in skeleton.names:
        raise EffectorError(f"no bone '{effector.bone}' in '{obj.data.name}'")
    target = effector.target
    if target is None:
        raise EffectorError("no target object")
    bone = skeleton.index(effector.bone)
    chain = skeleton.path_to_root(bone)
    if effector.chain_length > len(chain):
        raise EffectorError(f"chain length {effector.chain_length} is longer than the {len(chain)} bones up to the root")
    moving = chain if effector.chain_length == 0 else chain[: effector.chain_length]
    moving_names = {skeleton.names[i] for i in moving}
    if target == obj:
        if not effector.subtarget:
            raise EffectorError("the target is the rig itself; pick one of its bones outside the chain")
        if effector.subtarget in moving_names:
            raise EffectorError(f"target bone '{effector.subtarget}' is part of the chain it should pull")
    elif _parented_to_chain(target, obj, moving_names):
        raise EffectorError(f"target '{target.name}' is parented to a bone of its own chain")
    pinned = pins.problem(effector)
    if pinned:
        raise EffectorError(pinned)
    world = pins.held_world(_world_of(effector, "target", depsgraph), effector)
    poled = effector.pole_target is not None
    # (the goal as the effector asks for it, placed where its target and pole stand: `goal_at`)
    asked = Goal(
        bone, ORIGIN, float(effector.weight), int(effector.chain_length),
        quat.IDENTITY if effector.use_rotation else None, float(effector.rotation_weight), ORIGIN if poled else None,
        float(effector.pole_angle), bool(effector.use_stretch),
    )
    goal = goal_at(
        asked, world, _world_of(effector, "pole", depsgraph) if poled else None, to_armature,
        (target.name, effector.pole_target.name if poled else ""),
    )
    if poled and not math.isfinite(effector.pole_angle):
        raise EffectorError("its pole angle is not a number")
    # Typed or scripted, NaN passes a property's min and max: this effector says so, the others solve.
    if not (math.isfinite(effector.weight) and effector.weight >= 0.0):
        raise EffectorError("its weight is not a number of 0 or more")
    if effector.use_rotation and not 0.0 <= effector.rotation_weight <= 1.0:
        raise EffectorError("its rotation weight is not a number from 0 to 1")
    return goal


def goal_at(goal: Goal, world: Matrix, pole_world: Matrix | None, to_armature: Matrix, names=("", "")) -> Goal:
    """The goal where its target (`world`, as its pins hold it) and its pole stand, in armature space: the one read
    of a goal the live frame, the next frames and the bake share. EffectorError where a place is not finite or the
    rotation has no frame (`names` for the message)."""
    point = (to_armature @ world.translation)[:]
    if not math.isfinite(sum(point)):
        raise EffectorError(f"target '{names[0]}' is not at a finite location")
    rotation = goal.rotation
    if rotation is not None:
        turned = (to_armature @ world).to_3x3()
        if not (finite_matrix(turned) and abs(turned.determinant()) >= 1e-12):
            raise EffectorError(f"target '{names[0]}' has no usable rotation (zero scale?)")
        rotation = tuple(turned.normalized().to_quaternion().normalized())
    pole = None
    if pole_world is not None:
        pole = (to_armature @ pole_world.translation)[:]
        if not math.isfinite(sum(pole)):
            raise EffectorError(f"pole target '{names[1]}' is not at a finite location")
    # (`dataclasses.replace`, spelled out: it runs per effector every frame)
    return Goal(
        goal.bone, point, goal.weight, goal.chain_length, rotation, goal.rotation_weight, pole, goal.pole_angle,
        goal.stretch,
    )


def _world_of(effector: FabrikEffector, role: str, depsgraph: bpy.types.Depsgraph) -> Matrix:
    """`world_matrix` of an effector's target (`role` "target") or pole ("pole"): as live solving read it with
    the effector's values (`EffectorValues`), else read now. (Attribute names spelled out: with a name built on
    each call the heap grew by about 40 blocks every 1000 frames in `benchmarks/live_memory.py`.)"""
    if role == "target":
        world = getattr(effector, "target_world", None)
        return world if world is not None else world_matrix(effector.target, effector.subtarget, depsgraph)
    world = getattr(effector, "pole_world", None)
    return world if world is not None else world_matrix(effector.pole_target, effector.pole_subtarget, depsgraph)


def world_matrix(target, subtarget: str, depsgraph: bpy.types.Depsgraph) -> Matrix:
    """World matrix of an object, or of one of its bones (at the bone's head); EffectorError if the bone is missing."""
    evaluated = target.evaluated_get(depsgraph) if depsgraph else target
    world = evaluated.matrix_world
    if subtarget:
        if target.type != 'ARMATURE' or subtarget not in evaluated.pose.bones:
            raise EffectorError(f"'{target.name}' has no bone '{subtarget}'")
        world = world @ evaluated.pose.bones[subtarget].matrix
    return world


def _parented_to_chain(target, obj: bpy.types.Object, moving_names: set[str]) -> bool:
    """True when target hangs (directly or through other objects) from a moving bone of obj."""
    child = target
    while child.parent is not None:
        if child.parent == obj and child.parent_type == 'BONE' and child.parent_bone in moving_names:
            return True
        child = child.parent
    return False


class Gathered(NamedTuple):
    """What every solve of a rig reads first: its skeleton and goals (`gather_goals`), and when reading began."""

    skeleton: object
    goals: list[Goal]
    used: list[int]
    problems: dict[int, str]
    began: float


def gather(
    obj: bpy.types.Object, depsgraph: bpy.types.Depsgraph | None = None,
    checked: list[EffectorValues] | None = None
) -> Gathered:
    """Read a rig's skeleton and goals (raises ValueError for problems with the rig as a whole); `checked` as for
    `gather_goals`."""
    began = time.perf_counter()
    skeleton = armature.skeleton_of(obj)
    return Gathered(skeleton, *gather_goals(obj, depsgraph, skeleton, checked), began)


def influences(
    obj: bpy.types.Object, depsgraph: bpy.types.Depsgraph, tree: MovingTree, used: list[int]
) -> list[float] | None:
    """Per moving node, how much of the solve it takes: the rig's influence times the largest influence of the
    effectors whose chains hold it (evaluated: animation and drivers count); None when every node takes all."""
    settings = (obj.evaluated_get(depsgraph) if depsgraph is not None else obj).fabrik
    effectors = settings.effectors
    weights = [effectors[i].influence if i < len(effectors) else 1.0 for i in used]
    if settings.influence >= 1.0 and all(w >= 1.0 for w in weights):
        return None
    node = [0.0] * len(tree.bones)
    for g, chain in enumerate(tree.goal_chain):
        for k in chain:
            node[k] = max(node[k], weights[g])
    return [settings.influence * w for w in node]


def unusable_rig(obj: bpy.types.Object, depsgraph: bpy.types.Depsgraph) -> str | None:
    """Why no effector of the rig can be solved before anything is read (its transform is not a number), or None."""
    world = (obj.evaluated_get(depsgraph) if depsgraph else obj).matrix_world
    if not finite_matrix(world):
        return f"'{obj.name}' has a transform that is not a number: nothing to solve"
    if abs(world.to_3x3().determinant()) < 1e-12:
        return f"'{obj.name}' has zero scale on some axis, so its space is undefined: nothing to solve"
    tolerance = tolerance_problem(obj)
    if tolerance:
        return f"{tolerance}: nothing to solve"
    floor = floor_problem(obj, depsgraph)
    if floor:
        return f"{floor}: nothing to solve"
    return None


def usable_goals(obj: bpy.types.Object, gathered: Gathered, pose: PoseRead) -> tuple[Gathered, list[str]]:
    """The gathered goals without those whose chain has a channel that is not a number, or hangs from a bone
    without a usable frame (scaled to zero, not a number); each one left out says why in its effector's line.
    Also the reasons, in effector order."""
    skeleton, goals, used, problems, began = gathered
    if not goals:
        return gathered, []
    pose_bones = obj.pose.bones
    # The pose's channels decide for the common case, each read once in bulk (the solve and live solving's
    # snapshot use them too): every one finite, every scale exactly 1 (whole arrays at once: small numpy
    # operations cost more inside a frame than alone).
    bad = {} if pose.all_finite() else _channels_not_finite(obj, pose)
    scales = pose.channel("scale", 3)
    # A NaN elsewhere in the rig (which compares as not scaled) must not hide a scaled bone in this chain.
    scaled = _scaled_bones(obj, skeleton, scales) if (scales != 1.0).any() else {}
    parents, usable = skeleton.parents, {}
    kept, refusals = [], []
    for goal, index in zip(goals, used):
        top, moving = goal.bone, [goal.bone]
        while parents[top] >= 0 and len(moving) != goal.chain_length:
            top = parents[top]
            moving.append(top)
        parent = parents[top] if goal.chain_length else -1
        reason = None
        if parent >= 0:
            if parent not in usable:
                usable[parent] = usable_frame(pose_bones[skeleton.names[parent]].matrix.copy())
            if not usable[parent]:
                reason = _why_no_frame(obj, skeleton, parent, bad)
        if reason is None and bad:
            first = next((b for b in reversed(moving) if b in bad), None)  # the topmost
            if first is not None:
                reason = f"bone '{skeleton.names[first]}' has a {bad[first]} that is not a number"
        if reason is None and scaled:
            # With IK Stretch on the solve reads the chain's scales as they are, but none can undo a zero.
            first = next((
                b for b in reversed(skeleton.path_to_root(goal.bone))
                if b in scaled and (not goal.stretch or min(map(abs, scaled[b])) < 1e-6)
            ), None)
            if first is not None:
                words = ", ".join(f"{v:.3g}" for v in scaled[first])
                reason = (
                    f"bone '{skeleton.names[first]}' is scaled ({words}): FABRIK solves bones at their rest size; "
                    "set its scale to 1 (IK Stretch grows chains)"
                )
        if reason is None:
            kept.append((goal, index))
        else:
            problems = {**problems, index: reason}
            refusals.append(reason)
    if not refusals:
        return gathered, []
    return Gathered(skeleton, [g for g, _ in kept], [i for _, i in kept], problems, began), refusals


def _scaled_bones(obj: bpy.types.Object, skeleton: Skeleton, scales: np.ndarray) -> dict[int, tuple[float, ...]]:
    """Per bone (skeleton index) whose scale channel is not 1, other than what IK stretch wrote: the scale.
    `scales` is every pose bone's scale channel, (n, 3)."""
    off = np.abs(scales - 1.0).max(axis=1) > 1e-5
    if not off.any():
        return {}
    held = held_bones(obj)
    out = {}
    for b, pose_index in enumerate(armature.pose_bone_order(obj).tolist()):
        if not off[pose_index]:
            continue
        name = skeleton.names[b]
        entry = held.get(name)
        scale = tuple(scales[pose_index].tolist())
        if entry is not None and entry.scaled and same(scale, entry.written_scale):
            continue  # IK stretch's own
        out[b] = scale
    return out


def _channels_not_finite(obj: bpy.types.Object, pose: PoseRead) -> dict[int, str]:
    """Per bone (skeleton index) with a channel that is not a number: which ('rotation', 'location', 'scale'),
    the rotation in the bone's own mode; from the channels as the solve read them."""

    def finite(name: str, size: int) -> np.ndarray:
        return np.isfinite(pose.channel(name, size)).all(axis=1)

    modes = pose.modes()
    rotation_ok = np.where(
        modes == _QUATERNION_MODE, finite("rotation_quaternion", 4),
        np.where(modes == _AXIS_ANGLE_MODE, finite("rotation_axis_angle", 4), finite("rotation_euler", 3)),
    )
    checks = (("rotation", rotation_ok), ("location", finite("location", 3)), ("scale", finite("scale", 3)))
    if all(ok.all() for _, ok in checks):
        return {}
    order = armature.pose_bone_order(obj)
    bad = {}
    for what, ok in reversed(checks):  # a bone with several shows its rotation's
        bad.update({int(b): what for b in np.flatnonzero(~ok[order])})
    return bad


def _why_no_frame(obj: bpy.types.Object, skeleton: Skeleton, bone: int, bad: dict[int, str]) -> str:
    """Why the chain hanging from this bone cannot be solved, naming its topmost cause."""
    pose_bones = obj.pose.bones
    for b in reversed(skeleton.path_to_root(bone)):
        matrix = pose_bones[skeleton.names[b]].matrix
        if b in bad:
            return f"bone '{skeleton.names[b]}' above the chain has a {bad[b]} that is not a number: nothing to solve"
        if not usable_frame(matrix):
            if all(finite(row) for row in matrix):
                return f"bone '{skeleton.names[b]}' above the chain is scaled to zero: nothing to solve"
            return f"bone '{skeleton.names[b]}' above the chain has a pose that is not a number: nothing to solve"
    return f"bone '{skeleton.names[bone]}' above the chain has no usable pose: nothing to solve"
