# SPDX-License-Identifier: GPL-3.0-or-later
"""A rig's pose channels as a solve reads and writes them, in bulk.

A solve reads each channel kind of every pose bone once (`PoseRead`), the
moving bones' rotation channels with the animator's values under what live
solving wrote (`read_channels`, from what the rig holds: `held_bones`), and the
frames of the fixed bones the chains hang from (`hung_frames`); it writes the
solved rotations back in one `foreach_set` per channel kind that changed
(`write_channels`). Live solving off gives the animator's values back
(`give_back`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import bpy
import numpy as np
from mathutils import Matrix

from ...core import Skeleton
from ...core.math import matrix_rows, quat, rotation_channels
from ...core.model.tree import MovingTree
from . import armature, memory, moving_root
from .armature import usable_frame
from .held_bones import animator_values, entries_of, finite, follow_renames, held_bones, same

#: Pose-bone channels that make a pose (the rotation of every mode, location, scale) and their sizes.
POSE_CHANNELS = (
    ("rotation_quaternion", 4), ("rotation_euler", 3), ("rotation_axis_angle", 4), ("location", 3), ("scale", 3)
)


class PoseRead:
    """A rig's pose channels as one solve reads them, each read once in bulk when first asked for; the solve's write
    updates them, so after a solve they hold the channels as it left them (`snapshot`)."""

    def __init__(self, obj: bpy.types.Object, count: int | None = None) -> None:
        self.pose_bones = obj.pose.bones
        #: How many pose bones there are (counting them walks them all: a solve knows from the skeleton it read).
        self.count = len(self.pose_bones) if count is None else count
        self.arrays: dict[str, np.ndarray] = {}
        self._modes: np.ndarray | None = None

    def channel(self, name: str, size: int) -> np.ndarray:
        """One channel of every pose bone, (count, size)."""
        values = self.arrays.get(name)
        if values is None:
            values = np.empty(self.count * size, dtype=np.float32)
            self.pose_bones.foreach_get(name, values)
            values = self.arrays[name] = values.reshape(self.count, size)
        return values

    def modes(self) -> np.ndarray:
        """Every pose bone's rotation mode (`armature.rotation_modes`)."""
        if self._modes is None:
            self._modes = armature.rotation_modes(self.pose_bones, self.count)
        return self._modes

    def all_finite(self) -> bool:
        """Whether every channel of every pose bone is a number (any mode's rotation: a NaN in a channel the
        bone's mode does not use fails this, and is looked at more closely)."""
        return math.isfinite(sum(float(self.channel(name, size).sum()) for name, size in POSE_CHANNELS))

    def forget(self, *channels: str) -> None:
        """Read these channels (by default every channel and the modes) again when next asked: they were set by
        other means than the solve's rotation write."""
        if channels:
            for name in channels:
                self.arrays.pop(name, None)
            return
        self.arrays.clear()
        self._modes = None

    def snapshot(self) -> bytes:
        """The pose channels and rotation modes as one comparable value."""
        return b"".join([self.channel(name, size).tobytes() for name, size in POSE_CHANNELS] + [self.modes().tobytes()])


def read_pose(obj: bpy.types.Object) -> PoseRead:
    """A `PoseRead` of a rig whose structure the caller has just read (`armature.skeleton_of`)."""
    return PoseRead(obj, len(armature.pose_bone_order(obj)))


@dataclass
class Channels:
    """Some bones' rotation channels as one bulk read found them (`read_channels`), kept for a bulk write."""

    #: Per bone: its index among the pose bones, name, rotation mode and channel value.
    at: list[int]
    names: list[str]
    modes: list[str]
    #: Each rotation channel kind read: (number of pose bones, size) values.
    arrays: dict[str, np.ndarray]
    current: list[tuple[float, ...]]
    #: The rig's held entries (`held_bones.held_bones`), and them in bulk (`held_bones.entries_of`; its last item: the entries
    #: the FK read matched).
    held: object
    entries: tuple | None
    #: Per bone, its FK value (`fk_channels`).
    fk_values: list[tuple[float, ...]]
    #: Per bone, its row among the held entries, once a write has held it (`solve.write`).
    held_rows: list[int] | None = None


def read_channels(
    obj: bpy.types.Object, names: list[str], at: list[int], depsgraph: bpy.types.Depsgraph | None = None,
    pose: PoseRead | None = None
) -> Channels:
    """The named bones' rotation channels (at these pose-bone indices), modes and FK values, read in bulk (from
    `pose`, where the solve has read some already)."""
    pose = pose or PoseRead(obj)
    modes = [armature.MODE_NAMES[m] for m in pose.modes()[at].tolist()]
    arrays = pose.arrays
    current = _rotation_values(pose, at, modes)
    held = held_bones(obj)
    entries = entries_of(held)
    fk_values = animator_values(obj, held, names, modes, current, entries, depsgraph)
    return Channels(at, names, modes, arrays, current, held, entries, fk_values)


def _rotation_values(pose: PoseRead, at: list[int], modes: list[str]) -> list[tuple[float, ...]]:
    """The rotation channel values of the pose bones at these indices, each in its mode (only the channel kinds
    the modes use are read)."""
    return [tuple(pose.channel(*armature.rotation_channel(mode))[i].tolist()) for mode, i in zip(modes, at)]


def channel_matrices(modes: list[str], values: list[tuple[float, ...]]) -> np.ndarray:
    """`channel_matrix` of many values at once, (n, 3, 3)."""
    quaternions = [rotation_channels.channel_to_quaternion(mode, value) for mode, value in zip(modes, values)]
    return matrix_rows.quaternion_to_matrix(np.array(quaternions).reshape(-1, 4))


def channel_matrix(mode: str, value: tuple[float, ...]) -> np.ndarray:
    """A rotation channel value in the given mode as a 3x3 matrix."""
    return np.array(rotation_channels.channel_to_matrix(mode, value))  # double precision, as Blender reads the value


def channel_values(modes: list[str], solved: list, current: list) -> list:
    """Each solved local rotation (a unit quaternion) as a value of its bone's rotation channel, continuous with
    what the channel holds now (`current`: no sign or 2 pi jumps, as mathutils' make_compatible does)."""
    if modes and modes.count('QUATERNION') == len(modes):
        return list(map(rotation_channels.compatible_quaternion, solved, current))
    return [rotation_channels.channel_from_quaternion(mode, q, now) for q, now, mode in zip(solved, current, modes)]


def write_channels(
    obj: bpy.types.Object, at, modes: list[str], arrays: dict, current: list, values: list
) -> list[tuple[float, ...]]:
    """Set the rotation channels of the pose bones at `at` to `values` in bulk, one foreach_set per channel kind
    that changed; the values they now hold.

    A channel that already holds its value in single precision is left alone, so an unchanged pose does not tag the
    rig for an update."""
    pose_bones = obj.pose.bones
    if modes and len(set(modes)) == 1:
        channel = armature.rotation_channel(modes[0])[0]
        array = arrays[channel]
        rows = np.array(values, dtype=np.float32)  # (rounded as the channel stores them)
        written = rows.tolist()
        if written != array.take(at, axis=0).tolist():  # (compared as lists: quicker than numpy's on a few bones)
            array[at] = rows
            pose_bones.foreach_set(channel, array.ravel())
            _tag_written(obj)
        return written
    written = []
    changed = set()
    for k, (value, now, mode) in enumerate(zip(values, current, modes)):
        if armature.holds_already(now, value):
            written.append(now)
            continue
        value = armature.single_precision(value)
        channel = armature.rotation_channel(mode)[0]
        arrays[channel][at[k]] = value
        changed.add(channel)
        written.append(value)
    for channel in changed:
        pose_bones.foreach_set(channel, arrays[channel].ravel())
    if changed:
        _tag_written(obj)
    return written


def _tag_written(obj: bpy.types.Object) -> None:
    """Tag the rig for the evaluation its pose write needs.

    foreach_set tags nothing. A transform tag evaluates the pose again and all
    that hangs from it (deforming meshes, bone children), as a data tag does,
    but less besides (docs/benchmarks.md, the choices' section).
    """
    obj.update_tag(refresh={'OBJECT'})


def fk_channels(
    obj: bpy.types.Object, names: list[str], depsgraph: bpy.types.Depsgraph | None = None
) -> dict[str, tuple[str, tuple[float, ...]]]:
    """Per named bone, its rotation mode and its FK rotation this frame as a channel value, ignoring our own last
    write, read in bulk (`depsgraph`: the frame keyed channels are evaluated at).

    Where animation keys a channel, the FK value is the animation's this frame, not the one held under live
    solving's write."""
    channels = read_channels(obj, names, pose_bone_indices(obj, names), depsgraph)
    return {name: (mode, value) for name, mode, value in zip(names, channels.modes, channels.fk_values)}


def pose_bone_indices(obj: bpy.types.Object, names: list[str]) -> list[int]:
    """Where each named bone sits among obj.pose.bones (KeyError for one that is not there)."""
    pose_bones = obj.pose.bones
    at = [pose_bones.find(name) for name in names]
    if any(i < 0 for i in at):
        raise KeyError(f"no bone '{names[at.index(-1)]}' in '{obj.name}'")
    return at


def fixed_frame(matrix: Matrix) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """A fixed bone's pose matrix as (frame quaternion, head), its axes made unit as `armature.current_pose` does."""
    rows = [tuple(matrix[i][:3]) for i in range(3)]
    columns = [math.sqrt(sum(rows[i][j] ** 2 for i in range(3))) for j in range(3)]
    frame = [[rows[i][j] / columns[j] for j in range(3)] for i in range(3)]
    return quat.from_matrix(frame), (matrix[0][3], matrix[1][3], matrix[2][3])


def hung_frames(obj: bpy.types.Object, skeleton: Skeleton, tree: MovingTree, local) -> list | None:
    """Per node of the moving tree, the (frame, head) of the fixed bone it hangs from (`fixed_frame`; None for a
    node with a moving parent, or a root bone), as posed now; None where one has no usable frame."""
    pose_bones = obj.pose.bones
    # (copies: each element read of a pose bone's own matrix goes through RNA again)
    hung_from = [pose_bones[skeleton.names[b]].matrix.copy() if p < 0 and b >= 0 else None
                 for p, b in zip(tree.parent, local.parent_bone)]
    if not all(m is None or usable_frame(m) for m in hung_from):
        return None
    return [None if m is None else fixed_frame(m) for m in hung_from]


def start_pose(obj: bpy.types.Object, skeleton: Skeleton, rotations: dict[int, np.ndarray]):
    """The pose a solve starts from: as Blender last evaluated it, with these bones (skeleton indices) turned by
    their local rotations (and placed by their location channels) and the bones below following."""
    located = armature.pose_locations(obj)
    moved = located.any(axis=1)
    locations = {b: located[b] for b in rotations if moved[b]}
    return skeleton.with_local_rotations(armature.current_pose(obj, skeleton), rotations, locations)


def fk_start_pose(obj: bpy.types.Object, skeleton: Skeleton, names: list[str]):
    """`start_pose` with the named bones at the animator's rotations (those live solving replaced, `fk_channels`)."""
    channels = read_channels(obj, names, pose_bone_indices(obj, names))
    matrices = channel_matrices(channels.modes, channels.fk_values)
    return start_pose(obj, skeleton, {skeleton.index(name): m for name, m in zip(names, matrices)})


def release_others(obj: bpy.types.Object, moving: set[str]) -> bool:
    """Give the bones that left every chain (a chain made shorter, an effector removed or switched off) the
    animator's rotation back, where they still hold what live solving wrote, and stop holding them; whether a
    channel changed."""
    held = held_bones(obj)
    if not len(held):
        return False
    rotated = held.column("rotated").tolist()  # (every frame: in bulk, not an attribute read per entry)
    others = [name for name, was in zip(held.keys(), rotated) if was and name not in moving]
    if not others:
        return False
    changed = give_back_rotations(obj, others)
    for name in others:
        held[name].rotated = False
    return changed


def give_back_rotations(obj: bpy.types.Object, names: list[str]) -> bool:
    """Put the animator's rotation back into each named bone's channel where it still holds what live solving
    wrote (`fk_channels`); whether a channel changed. Bones gone since have nothing to give back."""
    pose_bones = obj.pose.bones
    changed = False
    for name, (mode, value) in fk_channels(obj, [name for name in names if name in pose_bones]).items():
        pose_bone = pose_bones[name]
        channel = armature.rotation_channel(mode)[0]
        if finite(value) and not same(getattr(pose_bone, channel), value, 0.0):
            setattr(pose_bone, channel, value)
            changed = True
    return changed


def give_back(obj: bpy.types.Object) -> None:
    """Put back the animator's values in every channel live solving wrote and that still holds what it wrote
    (the others have been set since, by animation or by hand, and keep that); then forget what was held."""
    follow_renames(obj)
    held = held_bones(obj)
    give_back_rotations(obj, [entry.name for entry in held if entry.rotated])
    moving_root.let_go(obj)
    for entry in held:
        pose_bone = obj.pose.bones.get(entry.name)
        if pose_bone is not None and entry.scaled and same(pose_bone.scale, entry.written_scale):
            pose_bone.scale = entry.fk_scale
    held.clear()
    memory.of(obj).solution = None


def node_indices(obj: bpy.types.Object, tree: MovingTree) -> np.ndarray:
    """Where each moving node's bone sits among obj.pose.bones."""
    return armature.pose_bone_order(obj)[list(tree.bones)]
