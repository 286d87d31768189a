# SPDX-License-Identifier: GPL-3.0-or-later
"""Armature <-> core: read the rest skeleton and the current pose, write solved rotations back."""

from __future__ import annotations

import math
from array import array

import bpy
import numpy as np
from mathutils import Matrix

from ...core import Pose, Skeleton
from ...core.math import rotation_channels
from ...core.math.matrix_rows import unit_frames
from ...core.model.limits import JointLimit
from . import memory

# Pose-bone IK settings (Blender's names) and the JointLimit fields they fill.
LIMIT_SETTINGS = (
    ("lock_ik_x", "lock_x"), ("lock_ik_y", "lock_y"), ("lock_ik_z", "lock_z"),
    ("use_ik_limit_x", "use_limit_x"), ("use_ik_limit_y", "use_limit_y"), ("use_ik_limit_z", "use_limit_z"),
    ("ik_min_x", "min_x"), ("ik_max_x", "max_x"),
    ("ik_min_y", "min_y"), ("ik_max_y", "max_y"),
    ("ik_min_z", "min_z"), ("ik_max_z", "max_z"),
    ("ik_stiffness_x", "stiffness_x"), ("ik_stiffness_y", "stiffness_y"), ("ik_stiffness_z", "stiffness_z"),
)


class frozen_structure:
    """Within this block the rig's skeleton is read once, not re-checked on every frame (bakes).

    `unchanged` names the parts of the structure known not to have changed
    since the cached skeleton was last checked (see `skeleton_of`): those are
    not read again.
    """

    def __init__(self, obj: bpy.types.Object, unchanged: frozenset[str] = frozenset()) -> None:
        self.name = obj.name
        skeleton_of(obj, unchanged)

    def __enter__(self):
        memory.of(self.name).frozen = True
        return self

    def __exit__(self, *exc) -> None:
        kept = memory.get(self.name)
        if kept is not None:
            kept.frozen = False


#: The parts of a rig's structure, as `skeleton_of` checks them: the armature's bones (names, parents, rest
#: matrices, lengths, connections; Blender tags the armature data when they change) and the pose bones' IK
#: settings (limits, stretch; Blender tags the object).
BONES, SETTINGS = "bones", "settings"


def skeleton_of(obj: bpy.types.Object, unchanged: frozenset[str] = frozenset()) -> Skeleton:
    """The core skeleton of an armature object (rest pose in armature space, joint limits), cached; the parts in
    `unchanged` (`BONES`, `SETTINGS`) are taken from the last check. Bones whose limits make no sense are solved
    without them (`limit_problems` says why)."""
    kept = memory.of(obj)
    if kept.frozen:
        return kept.skeleton
    cached = None if kept.skeleton is None else kept.signature
    if cached is not None and BONES in unchanged:
        bones_part = cached[0]
        order = kept.pose_order
    else:
        bones_part = _bones_signature(obj)
        order = _pose_bone_order(obj, bones_part[0])
    if cached is not None and SETTINGS in unchanged and bones_part == cached[0]:  # (in the same bone order)
        settings_part = cached[1]
    else:
        settings_part = (_limit_settings(obj, order).tobytes(), _stretch_factors(obj, order).tobytes())
    signature = (bones_part, settings_part)
    if cached is not None and cached == signature:
        return kept.skeleton
    names, parents, rest, lengths, connected = bones_part
    n = len(names)
    index = {name: i for i, name in enumerate(names)}
    # foreach_get gives matrices column by column.
    rest = np.swapaxes(np.frombuffer(rest, dtype=np.float32).reshape(n, 4, 4), 1, 2).astype(np.float64)
    settings = np.frombuffer(settings_part[0], dtype=np.float64).reshape(n, len(LIMIT_SETTINGS))
    stretch = np.frombuffer(settings_part[1], dtype=np.float64)
    limits, problems = _limits_from_settings(settings, names)
    skeleton = Skeleton(
        parents=[index[p] if p else -1 for p in parents],
        rest_heads=rest[:, :3, 3],
        rest_frames=rest[:, :3, :3],
        lengths=np.frombuffer(lengths, dtype=np.float32).astype(np.float64),
        names=names,
        limits=limits,
        stretch=np.clip(stretch, 0.0, 1.0),  # Blender keeps ik_stretch in 0..1; the clip only guards rounding
        # Blender's own flag: single-precision rest matrices put a connected head a hair off its parent's tail.
        connected=np.frombuffer(connected, dtype=bool).copy(),
    )
    kept.signature, kept.skeleton, kept.limit_problems, kept.pose_order = signature, skeleton, problems, order
    return skeleton


def _bones_signature(obj: bpy.types.Object) -> tuple:
    """The armature's bones as one comparable value: names, parent names, rest matrices, lengths, connections."""
    bones = obj.data.bones
    n = len(bones)
    rest = np.empty(n * 16, dtype=np.float32)
    bones.foreach_get("matrix_local", rest)
    lengths = np.empty(n, dtype=np.float32)
    bones.foreach_get("length", lengths)
    connected = np.empty(n, dtype=bool)
    bones.foreach_get("use_connect", connected)
    names = tuple(bones.keys())  # one call, not one per bone
    parents = tuple(b.parent.name if b.parent else "" for b in bones)
    return names, parents, rest.tobytes(), lengths.tobytes(), connected.tobytes()


def pose_bone_order(obj: bpy.types.Object) -> np.ndarray:
    """Where each bone of `skeleton_of(obj)` sits among obj.pose.bones (for foreach_get reads)."""
    return memory.of(obj).pose_order


def _pose_bone_order(obj: bpy.types.Object, names: tuple[str, ...]) -> np.ndarray:
    """Pose-bone index per bone name; pose bones normally come in the bones' order, which is checked cheaply."""
    pose_bones = obj.pose.bones
    if tuple(pose_bones.keys()) == names:
        return np.arange(len(names))
    return np.array([pose_bones.find(name) for name in names])


def limit_problems(obj: bpy.types.Object) -> list[str]:
    """Messages about bones of obj whose limits were ignored, from the last `skeleton_of`."""
    kept = memory.get(obj.name)
    return [] if kept is None else kept.limit_problems


def _limit_settings(obj: bpy.types.Object, order: np.ndarray) -> np.ndarray:
    """The pose bones' IK settings as an (n, 15) array in the skeleton's bone order."""
    pose_bones = obj.pose.bones
    n = len(pose_bones)
    table = np.empty((len(LIMIT_SETTINGS), n), dtype=np.float64)
    for row, (setting, _) in enumerate(LIMIT_SETTINGS):
        # Read in the property's own type (a flag or a single-precision float): foreach_get then copies in
        # bulk, where another type makes it convert value by value.
        values = np.empty(n, dtype=bool if setting.startswith(("lock", "use")) else np.float32)
        pose_bones.foreach_get(setting, values)
        table[row] = values
    return table[:, order].T.copy()


def _stretch_factors(obj: bpy.types.Object, order: np.ndarray) -> np.ndarray:
    """Each pose bone's IK Stretch factor (`ik_stretch`), in the skeleton's bone order."""
    pose_bones = obj.pose.bones
    values = np.empty(len(pose_bones), dtype=np.float32)
    pose_bones.foreach_get("ik_stretch", values)
    return values[order].astype(np.float64)


def _limits_from_settings(settings: np.ndarray, names: tuple[str, ...]) -> tuple[list[JointLimit | None], list[str]]:
    """One JointLimit per bone from its IK settings; nonsense settings are reported and dropped."""
    limits, problems = [], []
    for name, row in zip(names, settings):
        values = {
            field: bool(value) if field.startswith(("lock", "use")) else float(value)
            for (_, field), value in zip(LIMIT_SETTINGS, row)
        }
        try:
            limits.append(JointLimit(**values))
        except ValueError as exc:
            limits.append(None)
            problems.append(f"bone '{name}': {exc}; its limits are ignored")
    return limits, problems


def pose_matrices(obj: bpy.types.Object) -> np.ndarray:
    """Every pose bone's matrix (n, 4, 4, armature space) as Blender last evaluated it, in pose-bone order."""
    pose_bones = obj.pose.bones
    flat = np.empty(len(pose_bones) * 16, dtype=np.float32)
    pose_bones.foreach_get("matrix", flat)
    return np.swapaxes(flat.reshape(-1, 4, 4), 1, 2)  # (foreach_get gives matrices column by column)


def current_pose(obj: bpy.types.Object, skeleton: Skeleton) -> Pose:
    """The pose as Blender last evaluated it, in armature space (scale dropped)."""
    m = pose_matrices(obj)[pose_bone_order(obj)].astype(np.float64)
    # (a bone scaled to zero has NaN axes, which live solving refuses, naming the bone, and a bake leaves unkeyed)
    return Pose(m[:, :3, 3].copy(), unit_frames(m), skeleton.lengths)


def pose_locations(obj: bpy.types.Object) -> np.ndarray:
    """Every bone's location channel (n, 3), in the skeleton's bone order."""
    pose_bones = obj.pose.bones
    flat = np.empty(len(pose_bones) * 3, dtype=np.float32)
    pose_bones.foreach_get("location", flat)
    return flat.reshape(-1, 3)[pose_bone_order(obj)].astype(np.float64)


def mean_scale(obj: bpy.types.Object) -> float:
    """The rig object's world scale, averaged over its axes: scene units per armature unit."""
    return sum(abs(s) for s in obj.matrix_world.to_scale()) / 3.0


def world_to_armature(obj: bpy.types.Object) -> Matrix:
    """Matrix taking world coordinates into the armature's space; ValueError when it has none."""
    world = obj.matrix_world
    if abs(world.to_3x3().determinant()) < 1e-12:
        raise ValueError(f"'{obj.name}' has zero scale on some axis, so its space is undefined")
    return world.inverted()


def chain_bones(obj: bpy.types.Object, bone: str, chain_length: int) -> list[str]:
    """The chain's bones from its first (top) bone down to `bone`, `chain_length` of them (0: up to the root)."""
    names = []
    current = obj.data.bones.get(bone)
    while current is not None and (chain_length == 0 or len(names) < chain_length):
        names.append(current.name)
        current = current.parent
    return names[::-1]


#: Blender's rotation_mode enum values, as `rotation_modes` gives them.
MODE_VALUES = {'QUATERNION': 0, 'AXIS_ANGLE': -1, 'XYZ': 1, 'XZY': 2, 'YXZ': 3, 'YZX': 4, 'ZXY': 5, 'ZYX': 6}
MODE_NAMES = {value: name for name, value in MODE_VALUES.items()}
#: A fill no rotation mode has, even where a Blender reads the enum as a short into half of each slot (3.4).
_NO_MODE = 0x01010101


def rotation_modes(pose_bones, count: int | None = None) -> np.ndarray:
    """Each pose bone's rotation mode as its enum value (`MODE_VALUES`), read in bulk where Blender can; `count`
    is how many pose bones there are, where the caller knows."""
    modes = np.full(len(pose_bones) if count is None else count, _NO_MODE, dtype=np.int32)
    try:
        pose_bones.foreach_get("rotation_mode", modes)
    except (TypeError, RuntimeError):
        pass
    if not len(modes) or (modes.min() >= -1 and modes.max() <= 6):  # (the enum's values: -1 to 6)
        return modes
    # Blender 3.4 reads the enum's raw storage (a short): one property read per bone instead.
    return np.array([MODE_VALUES[pose_bone.rotation_mode] for pose_bone in pose_bones], dtype=np.int32)


#: Rotation mode -> (the pose-bone property holding the rotation, its size); every Euler order uses rotation_euler.
ROTATION_CHANNELS = {"QUATERNION": ("rotation_quaternion", 4), "AXIS_ANGLE": ("rotation_axis_angle", 4)}


def rotation_channel(mode: str) -> tuple[str, int]:
    """The property a bone in this rotation mode is posed and keyed by, and its size."""
    return ROTATION_CHANNELS.get(mode, ("rotation_euler", 3))


def rotation_value(pose_bone: bpy.types.PoseBone) -> tuple[float, ...]:
    """The bone's rotation as it holds it now, in its own mode."""
    return tuple(getattr(pose_bone, rotation_channel(pose_bone.rotation_mode)[0]))


def channel_value(mode: str, local: np.ndarray, previous: tuple[float, ...]) -> tuple[float, ...]:
    """A local 3x3 rotation as a value of the mode's channel, continuous with `previous` (no sign or 2pi jumps)."""
    # In double precision: mathutils' single-precision axis-angle drops turns under about 3e-4 rad.
    return rotation_channels.channel_from_matrix(mode, local.tolist(), previous)


def single_precision(value) -> tuple[float, ...]:
    """A value as a channel stores it: each component rounded to single precision."""
    return tuple(array("f", value).tolist())


def holds_already(stored, value) -> bool:
    """Whether a channel already holds `value` once rounded to single precision, so writing it would change nothing
    but tag the rig; any looser test drops real changes, which add up along a long chain."""
    return single_precision(value) == tuple(stored)


#: Inherit Scale modes in which a bone takes none of its parent's scale.
_NO_SCALE_INHERITED = {'NONE', 'NONE_LEGACY'}


def inherits_scale(obj: bpy.types.Object, skeleton: Skeleton, bones: list[int]) -> dict[int, bool]:
    """Per listed bone, whether it takes its parent's scale (its Inherit Scale is anything but none)."""
    return {b: obj.data.bones[skeleton.names[b]].inherit_scale not in _NO_SCALE_INHERITED for b in bones}


def write_scales(obj: bpy.types.Object, skeleton: Skeleton, values: dict[int, float]) -> None:
    """Set the listed bones' scale to a uniform value (as Blender's IK stretch scales a bone); values that differ
    only by rounding are not written, so an unchanged pose does not tag the rig for an update."""
    for b, value in values.items():
        pb = obj.pose.bones[skeleton.names[b]]
        if not holds_already(pb.scale, (value,) * 3):
            pb.scale = (value, value, value)


def usable_frame(matrix: Matrix) -> bool:
    """Whether a pose matrix gives a frame: finite, no axis scaled to (nearly) zero (NaN fails the comparison)."""
    return abs(matrix.to_3x3().determinant()) > 1e-12 and finite_matrix(matrix)


def finite_matrix(matrix: Matrix) -> bool:
    """Whether every entry of a matrix is a finite number (a NaN or an infinity makes the sum none)."""
    return math.isfinite(sum(map(sum, matrix)))
