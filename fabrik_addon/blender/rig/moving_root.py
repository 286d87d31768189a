# SPDX-License-Identifier: GPL-3.0-or-later
"""A rig's root that moves, as the solve takes it (`core.goals.root`) and as its channels take the move.

The root is the bone named in the rig's Root settings, or else the top bone
above the first effector's chain. The solve sees it where the pose has it
now, with its home -- where the animator's own location and rotation put
it -- as a move from there (`read`). Its move becomes the root's location
and rotation channels (`channel_values`), written by live solving with the
animator's values held under them as the chains' are (`held_bones`), so live
solving off, Root Off or another root bone gives them back (`let_go`), and
keyed by the bake.
"""

from __future__ import annotations

import math

import bpy
from mathutils import Matrix, Quaternion, Vector

from ...core import Skeleton
from ...core.goals.root import Move, Root
from ...core.math import rotation_channels
from ...core.math.quat import Quat
from ...core.solving import rooted
from . import armature, held_bones
from .armature import usable_frame

__all__ = ["bone_of", "channel_values", "inputs", "let_go", "problem", "read", "top_bone", "usable", "write"]


def bone_of(obj: bpy.types.Object, skeleton: Skeleton, goals) -> str | None:
    """The name of the rig's root that moves: its Root bone, or the top bone above the first goal's chain; None
    where Root is off or there is no goal."""
    settings = obj.fabrik
    if settings.root_mode == 'OFF' or not goals:
        return None
    if settings.root_bone:
        return settings.root_bone
    return skeleton.names[skeleton.path_to_root(goals[0].bone)[-1]]


def top_bone(obj: bpy.types.Object) -> str | None:
    """The bone a Root with no bone named moves, as the panel shows it: the top bone above the first effector's
    chain (None where no effector has a bone)."""
    bones = obj.data.bones
    for effector in obj.fabrik.effectors:
        if effector.enabled and effector.bone in bones:
            above = bones[effector.bone].parent_recursive
            return (above[-1] if len(above) else bones[effector.bone]).name
    return None


def problem(obj: bpy.types.Object, name: str | None = None) -> str | None:
    """Why the rig's Root settings (with `name`, that bone as its Root) cannot be used, or None."""
    settings = obj.fabrik
    if settings.root_mode == 'OFF':
        return None
    name = name or settings.root_bone
    if name and name not in obj.pose.bones:
        return f"the Root bone '{name}' is not in '{obj.name}' (renamed or deleted?): choose it again"
    values = (settings.root_weight, settings.root_distance, settings.root_angle)
    if not all(math.isfinite(v) for v in values):
        return "the Root's weight, distance and angle must be numbers"
    if not name:
        return None
    bone, pose_bone = obj.data.bones[name], obj.pose.bones[name]
    if bone.use_connect and settings.root_distance > 0.0:
        return (
            f"the Root bone '{name}' is connected to its parent, so Blender does not move it: choose a bone "
            "that is not, or set Distance to 0 to let it turn only"
        )
    if not bone.use_local_location and settings.root_distance > 0.0:
        return f"the Root bone '{name}' has Local Location off: turn it on (Bone > Relations) to let it move"
    acting = [c.name for c in pose_bone.constraints if not c.mute and c.influence > 0.0]
    if acting:
        return (
            f"the Root bone '{name}' has the constraint '{acting[0]}', which would move it after the solve: mute "
            "it, or choose another bone"
        )
    return None


def inputs(obj: bpy.types.Object) -> tuple:
    """What of the rig besides its settings decides whether its Root can move (for live solving's check whether
    anything it reads changed): the Root bone's connection, Local Location and constraints."""
    settings = obj.fabrik
    if settings.root_mode == 'OFF':
        return ()
    bone = obj.data.bones.get(settings.root_bone or top_bone(obj) or "")
    if bone is None:
        return (None,)
    constraints = obj.pose.bones[bone.name].constraints
    return (bone.name, bone.use_connect, bone.use_local_location,
            tuple((c.type, c.mute, c.influence) for c in constraints))


def usable(obj: bpy.types.Object, plan, goals) -> tuple[str | None, str | None]:
    """The root that moves for these goals on the rig's plan, or None; and why a Root that is on does not (its
    settings, a bone in a chain, no chain below it), or None."""
    name = bone_of(obj, plan.skeleton, goals)
    if name is None:
        return None, None
    refused = problem(obj, name)
    if refused:
        return None, refused
    try:
        below = rooted.below(plan, plan.skeleton.index(name))
    except ValueError as exc:
        return None, str(exc)
    if not any(below):
        return None, f"no effector's chain hangs from the Root bone '{name}', so it does not move"
    return name, None


def read(
    obj: bpy.types.Object, skeleton: Skeleton, name: str, depsgraph: bpy.types.Depsgraph | None = None
) -> tuple[Root, tuple]:
    """The root as the solve takes it (`core.goals.root.Root`): where the pose has it now, and its home where the
    animator's channel values put it; and those values (location, rotation), which `write` holds. ValueError
    where its pose gives no frame (scaled to zero, not a number)."""
    settings = obj.fabrik
    pose_bone = obj.pose.bones[name]
    now = pose_bone.matrix.copy()
    if not usable_frame(now):
        raise ValueError(f"the Root bone '{name}' has no usable pose (scaled to zero, or not a number)")
    location, turn = _animator_values(obj, pose_bone, depsgraph)
    home = now @ _basis(pose_bone, tuple(pose_bone.location), _rotation(pose_bone)).inverted() @ _basis(
        pose_bone, location, turn
    )
    turned = home.to_quaternion() @ now.to_quaternion().inverted()
    pivot = now.translation
    scale = armature.mean_scale(obj)
    return Root(
        skeleton.index(name), settings.root_mode, settings.root_weight,
        settings.root_distance / scale if scale > 0.0 else 0.0, settings.root_angle, tuple(pivot),
        Move(tuple(turned.normalized()), tuple(home.translation - pivot), tuple(pivot), skeleton.index(name)),
    ), (location, turn)


def channel_values(obj: bpy.types.Object, name: str, move: Move) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The root's location and rotation channel values (in its rotation mode) that move it, from where its pose
    has it now, by `move`."""
    pose_bone = obj.pose.bones[name]
    now = pose_bone.matrix.copy()
    pivot = Vector(move.pivot)
    moved = (
        Matrix.Translation(pivot + Vector(move.translation)) @ Quaternion(move.rotation).to_matrix().to_4x4()
        @ Matrix.Translation(-pivot) @ now
    )
    current = _rotation(pose_bone)
    basis = _basis(pose_bone, tuple(pose_bone.location), current) @ now.inverted() @ moved
    location, rotation, _ = basis.decompose()
    q: Quat = tuple(rotation.normalized())
    return tuple(location), rotation_channels.channel_from_quaternion(pose_bone.rotation_mode, q, current)


def write(
    obj: bpy.types.Object, name: str | None, values: tuple | None, animator: tuple | None, hold: bool = True
) -> None:
    """Set the root's channels to `values` (`channel_values`) and hold the animator's (`animator`, as `read` read
    them) under them (without `hold`, the moved root becomes the animator's); with none, or for any other bone
    moved before, give the animator's back (`let_go`)."""
    let_go(obj, keep=name if values is not None else None)
    if values is None or name not in obj.pose.bones:
        return
    pose_bone = obj.pose.bones[name]
    location, turn = animator
    channel = armature.rotation_channel(pose_bone.rotation_mode)[0]
    pose_bone.location, value = values
    setattr(pose_bone, channel, value)
    stored = held_bones.held_bones(obj)
    entry = stored.get(name) or held_bones.new_entries(obj, stored, [name])[0]
    entry.fk_location, entry.fk_turn = location, _four(turn)
    entry.written_location, entry.written_turn = tuple(pose_bone.location), _four(getattr(pose_bone, channel))
    if not entry.rotated:  # (its mode string is the chains' where the bone is one of them: not a root then)
        entry.mode = pose_bone.rotation_mode
    entry.moved = hold


def let_go(obj: bpy.types.Object, keep: str | None = None) -> bool:
    """Give every root moved before (but `keep`) the animator's channel values back, where they still hold what
    was written (each component alone: one may be keyed and the others not), and stop holding them; whether a
    channel changed."""
    stored = held_bones.held_bones(obj)
    if not len(stored) or not stored.column("moved").any():
        return False
    changed = False
    for entry in stored:
        if not entry.moved or entry.name == keep:
            continue
        pose_bone = obj.pose.bones.get(entry.name)
        if pose_bone is not None:
            channel, size = armature.rotation_channel(pose_bone.rotation_mode)
            kinds = [("location", entry.written_location, entry.fk_location)]
            if pose_bone.rotation_mode == entry.mode:
                kinds.append((channel, entry.written_turn[:size], entry.fk_turn[:size]))
            for name, written, fk in kinds:
                now = tuple(getattr(pose_bone, name))
                back = _under(now, written, fk)
                if back != now:
                    setattr(pose_bone, name, back)
                    changed = True
        entry.moved = False
    return changed


def _under(now, written, fk) -> tuple[float, ...]:
    """A channel's value with each component that still holds what was written given its held value back."""
    return tuple(f if held_bones.same((n,), (w,)) else n for n, w, f in zip(now, written, fk))


def _animator_values(
    obj: bpy.types.Object, pose_bone: bpy.types.PoseBone, depsgraph: bpy.types.Depsgraph | None = None
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The root's location and rotation as the animator has them this frame: the channels' own, or, component by
    component, where they still hold what live solving wrote, the values held under them (or what their keys give
    this frame)."""
    location, turn = tuple(pose_bone.location), _rotation(pose_bone)
    entry = held_bones.held_bones(obj).get(pose_bone.name)
    if entry is None or not entry.moved:
        return location, turn
    channel, size = armature.rotation_channel(pose_bone.rotation_mode)
    location = _under(location, entry.written_location, entry.fk_location)
    if pose_bone.rotation_mode == entry.mode:
        turn = _under(turn, entry.written_turn[:size], entry.fk_turn[:size])
    keyed = held_bones.keyed_channels(obj, depsgraph)
    if keyed:
        location = held_bones.animated(keyed, pose_bone.name, "location", location)
        turn = held_bones.animated(keyed, pose_bone.name, channel, turn)
    return tuple(location), tuple(turn)


def _rotation(pose_bone: bpy.types.PoseBone) -> tuple[float, ...]:
    """The bone's rotation channel value in its mode."""
    return tuple(getattr(pose_bone, armature.rotation_channel(pose_bone.rotation_mode)[0]))


def _basis(pose_bone: bpy.types.PoseBone, location, turn) -> Matrix:
    """The bone's channel matrix for these location and rotation values (its scale as it is)."""
    q = Quaternion(rotation_channels.channel_to_quaternion(pose_bone.rotation_mode, turn))
    return Matrix.LocRotScale(Vector(location), q, Vector(pose_bone.scale))


def _four(value) -> tuple[float, ...]:
    """A rotation value padded to four numbers (an Euler's three), as the held entries keep them."""
    value = tuple(value)
    return value + (0.0,) * (4 - len(value))
