# SPDX-License-Identifier: GPL-3.0-or-later
"""A live frame that goes on from what the last frame read (`reused`), wherever nothing the solve reads can have
changed but the targets.

Most frames in playback change nothing of a rig but where its targets are
(its targets are animated; nobody edits it). Whether a frame may go on is
decided from what the solve reads rather than from which data-blocks Blender
says it updated:

* the rig's structure, settings and channels: an edit of them (a bone, an IK
  setting, a pose channel, through RNA or an operator) updates the rig's
  armature data, and a setting of ours tags the rig; the update handler,
  which compares every input, then solves the rig whole, and a frame where
  the armature was updated is read whole;
* the rig object updated without its data: a constraint's target or a driver
  moved it (even a muted constraint ties the armature to its target: a rig
  converted before Convert set the targets aside has them), its transform
  moved, or its animation played.
  The frame reads again what that can change -- the rig's transform, the
  frames of the bones the chains hang from, and the chain bones' rotation
  channels (where the rig is animated itself, with the pose its animation
  moves) -- and goes on where the chain's channels are as the solve left
  them (an update that rebuilt the scene's relations, or where the animation
  reaches a chain bone or a setting, is read whole);
* the targets and poles are read every frame.

Anything else (as many effectors and held entries as then, the targets still
there and finite, a solve that writes) or any doubt sends the frame to the
whole read; the result is the same either way (the same solve, from equal
inputs).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import bpy

from .. import solve
from ..effectors import effector_goals, pins
from ..effectors.effector_values import EffectorValues, comparable
from ..rig import animdata, armature, held_bones, memory, moving_root
from ..rig.channels import PoseRead, hung_frames
from ..rig.floor import floor_plane
from ..rig.status import RigStatus

__all__ = ["LastRead", "Updates", "keepable", "reused", "world_or_none"]


def world_or_none(target, subtarget: str, depsgraph: bpy.types.Depsgraph):
    """World matrix of an object or of one of its bones, a copy (None when there is none)."""
    if target is None:
        return None
    try:
        return effector_goals.world_matrix(target, subtarget, depsgraph).copy()
    except effector_goals.EffectorError:
        return None  # a missing bone: the solve reports it


class Updates:
    """What an evaluation updated, asked data-block by data-block (the list of updates is read only when an
    armature was among them or an object is asked about: an animated scene updates many objects a frame)."""

    def __init__(self, depsgraph: bpy.types.Depsgraph) -> None:
        self.depsgraph = depsgraph
        self.armatures = depsgraph.id_type_updated('ARMATURE')
        self.pointers: set[int] | None = None

    def has(self, id_data) -> bool:
        """Whether the evaluation updated this (original) data-block."""
        if isinstance(id_data, bpy.types.Armature) and not self.armatures:
            return False
        if self.pointers is None:
            self.pointers = {update.id.original.as_pointer() for update in self.depsgraph.updates}
        return id_data.as_pointer() in self.pointers

    def rebuilt(self) -> bool:
        """Whether the evaluation may have changed what the rigs' effectors refer to: the scene or a collection
        was updated (an object added, deleted, linked, unlinked or parented rebuilds the relations)."""
        return self.depsgraph.id_type_updated('SCENE') or self.depsgraph.id_type_updated('COLLECTION')


@dataclass
class LastRead:
    """What a live frame of one rig goes on from while only its targets move (see the module): the last whole
    read and what it was read with."""

    obj: object
    read: solve.Read
    #: The effectors as read, and per effector the properties its solve reads (`EffectorValues.solved`).
    values: list[EffectorValues]
    solved: list[tuple]
    to_armature: object
    #: The rig's transform as read, and the live inputs' snapshot before its per-effector part (`handlers._inputs_of`).
    world: object
    prefix: tuple
    #: How many held entries there were.
    held: int
    #: Where the rig is animated itself (but nothing animates a chain bone's channel or a setting): the data
    #: paths its F-curves animated (`animdata.fcurve_paths`: the same object while they are the same) and how
    #: many drivers it had; each frame then reads what the animation moves (`_read_animated`). None for a rig
    #: nothing animates.
    animation: tuple[frozenset, int] | None
    #: Whether that animation keys (or drives) the effectors' pins: each frame then reads them again.
    pinned: bool = False


def keepable(
    obj: bpy.types.Object, depsgraph: bpy.types.Depsgraph, inputs: tuple, values: list[EffectorValues],
    result: RigStatus, read_: solve.Read
):
    """What the next frames may go on from after a whole live solve (`LastRead`), or None where they may not: the
    solve reached no error, solved every effector, wrote no IK stretch and started where the next frame starts;
    the rig's animation, if any, reaches no chain bone and no setting."""
    found, gathered, plan = read_.channels, read_.gathered, read_.plan
    entries = found.entries
    if (
        not result.ok or plan.whole or read_.limit_problems or gathered.problems or len(gathered.used) != len(values)
        or (entries is not None and entries[4].any()) or found.held.in_memory or read_.fixed is None
        # (from the previous solution, where there was none yet: the next frame starts from one, with other settings)
        or (read_.previous is None) == (obj.fabrik.start == 'PREVIOUS')
    ):
        return None
    index = {name: i for i, name in enumerate(found.held.keys())}  # (the solve may have added entries)
    if any(name not in index for name in found.names):
        return None
    animation = None
    if _animates(obj):
        animation = _animation(obj, found.names)
        if animation is None:
            return None
    world = obj.evaluated_get(depsgraph).matrix_world
    pinned = animation is not None and any(pins.is_pin_path(path) for path in _paths(obj))
    return LastRead(
        obj, read_, values, [value.solved() for value in values], armature.world_to_armature(obj.evaluated_get(depsgraph)),
        comparable(world), inputs[: len(inputs) - len(values)], len(index), animation, pinned,
    )


def _animates(obj: bpy.types.Object) -> bool:
    """Whether the rig has animation of its own (an action, NLA tracks or drivers)."""
    animation_data = obj.animation_data
    return animation_data is not None and bool(
        animation_data.action is not None or len(animation_data.nla_tracks) or len(animation_data.drivers)
    )


def _paths(obj: bpy.types.Object) -> list[str]:
    """The data paths the rig's action and drivers animate."""
    return [*animdata.fcurve_paths(obj), *(driver.data_path for driver in obj.animation_data.drivers)]


def _animation(obj: bpy.types.Object, names: list[str]) -> tuple[frozenset, int] | None:
    """An animated rig's F-curve paths and driver count (`LastRead.animation`), where its animation reaches no chain
    bone's channel (`names`) and no setting but the effectors' pins, which each frame reads again (the others
    change what the whole read reads: None)."""
    animation_data = obj.animation_data
    if len(animation_data.nla_tracks):
        return None  # (a strip's action may animate anything)
    chain = tuple(f'pose.bones["{bpy.utils.escape_identifier(name)}"]' for name in names)
    if any(path.startswith(chain) or (path.startswith("fabrik") and not pins.is_pin_path(path))
           for path in _paths(obj)):
        return None
    return animdata.fcurve_paths(obj), len(animation_data.drivers)


def reused(
    obj: bpy.types.Object, depsgraph: bpy.types.Depsgraph, updated: Updates, watched: bool,
    memory_: memory.RigMemory
) -> tuple | None:
    """Solve a frame from what the last frame read, where only what is read here can have changed (see the module):
    the live inputs, with the channels as the solve left them; None, having written nothing, where the whole read
    must run."""
    kept = memory_.read
    if kept is None:
        return None
    began = time.perf_counter()
    if not watched or kept.obj != obj or updated.has(obj.data) or len(obj.fabrik.effectors) != len(kept.values):
        return None
    if len(held_bones.held_bones(obj)) != kept.held:
        return None  # (entries removed by a script: no tag either)
    last = kept.read
    changed: dict = {}
    placed = kept.to_armature, kept.world, kept.prefix
    if updated.has(obj):
        # Not an edit (that would have updated its armature as well): a constraint's target, a driver, the
        # transform or the rig's own animation moved it. Read again what that can change.
        again = None if updated.rebuilt() else _read_again(kept, obj, depsgraph)
        if again is None:
            return None
        changed, placed = again
    to_armature, world, prefix = placed
    goals, tails = [], []
    effectors = obj.fabrik.effectors
    if kept.pinned and any(e.pin_key and e.pin_key != e.name for e in effectors):
        return None  # (a renamed effector: the whole read moves its pin keys under its new name)
    try:
        for value, goal, properties in zip(kept.values, last.goals, kept.solved):
            if kept.pinned:  # (keyed pins: this frame's)
                properties = pins.read_again(value, effectors[value.index], properties)
                if properties is None:
                    return None  # the whole read says what is wrong with it
            target = effector_goals.world_matrix(value.target, value.subtarget, depsgraph)
            pole = None
            if goal.pole is not None:
                pole = effector_goals.world_matrix(value.pole_target, value.pole_subtarget, depsgraph)
            goals.append(effector_goals.goal_at(goal, pins.held_world(target, value), pole, to_armature))
            tails.append((comparable(target), comparable(pole), properties))
    except (ReferenceError, effector_goals.EffectorError):
        return None  # a target removed meanwhile, a target bone gone, a place not finite: the whole read says so
    settings = last.settings
    if obj.fabrik.floor is not None:  # (the floor, or the rig, may have moved: its plane in the rig's space now)
        try:
            plane = floor_plane(obj, depsgraph)
        except ValueError:
            return None  # the whole read says why
        if plane != settings.floor:
            settings = replace(settings, floor=plane)
        prefix = prefix[:-1] + (comparable(world_or_none(obj.fabrik.floor, "", depsgraph)),)
    if last.root is not None:  # (where the animator's channels put it, as this frame evaluated them)
        # (the chains hang where the last frame's write of the root put them)
        if not updated.has(obj):
            fixed = _fixed_again(last, obj)
            if fixed is None:
                return None
            changed.update(fixed)
        try:
            moving, changed["root_fk"] = moving_root.read(obj, last.plan.skeleton, last.root, depsgraph)
        except ValueError:
            return None  # the whole read says why
        settings = replace(settings, root=moving)
    if last.previous is not None:  # (from the previous solution: the one the last frame left)
        solution = memory_.solution
        if solution is None or any(b not in solution for b in last.plan.bones):
            return None
        changed["previous"] = [solution[b] for b in last.plan.bones]
    read_ = replace(last, goals=goals, began=began, settings=settings, **changed)
    try:
        solved = solve.solve(read_, memory_.carry if memory_.carry is not None else solve.carry_of(obj))
    except ValueError:
        return None
    if solve.not_finite(read_, solved):
        return None
    solve.write(obj, read_, solved, True, memory_)
    memory_.status = solve.status_of(read_, solved, RigStatus())
    kept.read = read_
    kept.to_armature, kept.world, kept.prefix = placed
    return (prefix + tuple(tails), read_.pose.snapshot())


def _read_again(kept: LastRead, obj: bpy.types.Object, depsgraph: bpy.types.Depsgraph) -> tuple[dict, tuple] | None:
    """Read again what an update of the rig object (not its data) can change: the channels its own animation moves,
    the frames the chains hang from, its transform. The read's fields that changed and the transform (`LastRead`),
    or None where the whole read must run."""
    last = kept.read
    changed = {}
    if kept.animation is not None:
        pose = _read_animated(kept, obj)
        if pose is None:
            return None
        changed["pose"], changed["channels"] = pose, replace(last.channels, arrays=pose.arrays)
    elif _animates(obj) or not _chain_channels_kept(last, PoseRead(obj, last.pose.count)):
        return None  # (animated since, or a chain channel set by a script that tagged the object: the whole read)
    fixed = _fixed_again(last, obj)
    if fixed is None:
        return None
    changed.update(fixed)
    placed = kept.to_armature, kept.world, kept.prefix
    world = obj.evaluated_get(depsgraph).matrix_world
    if comparable(world) != kept.world:
        if effector_goals.unusable_rig(obj, depsgraph) is not None:
            return None
        seen = comparable(world)
        to_armature = armature.world_to_armature(obj.evaluated_get(depsgraph))
        placed = to_armature, seen, kept.prefix[:1] + (seen,) + kept.prefix[2:]
    return changed, placed


def _fixed_again(read_: solve.Read, obj: bpy.types.Object) -> dict | None:
    """The frames of the bones the chains hang from, read again: the read's fields that change where they moved
    (its start is made again), none where they did not; None where one has no usable frame (the whole read says
    why)."""
    plan = read_.plan
    fixed = hung_frames(obj, plan.skeleton, plan.tree, plan.local)
    if fixed is None:
        return None
    return {} if fixed == read_.fixed else {"fixed": fixed, "_start": None}


def _read_animated(kept: LastRead, obj: bpy.types.Object) -> PoseRead | None:
    """Read again what animation moves of a rig where it animates what it did: the pose read, or None where the
    whole read must run (the chain's channels not as written, or a chain the whole read would judge unusable)."""
    read_ = kept.read
    animation_data = obj.animation_data
    if (
        animation_data is None or (animdata.fcurve_paths(obj), len(animation_data.drivers)) != kept.animation
        or len(animation_data.nla_tracks)
    ):
        return None
    pose = PoseRead(obj, read_.pose.count)
    if not _chain_channels_kept(read_, pose):
        return None  # (set by other means than a key: the whole read takes it for the animator's)
    if effector_goals.usable_goals(obj, read_.gathered, pose)[1]:
        return None
    return pose


def _chain_channels_kept(read_: solve.Read, pose: PoseRead) -> bool:
    """Whether the chain bones' rotation channels in `pose` are as the last solve left them."""
    found = read_.channels
    at = found.at
    return not any(
        (pose.channel(name, size)[at] != read_.pose.arrays[name][at]).any()
        for name, size in {armature.rotation_channel(mode) for mode in found.modes}
    )
