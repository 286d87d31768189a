# SPDX-License-Identifier: GPL-3.0-or-later
"""A rig's Floor as the solve takes it: the chosen object's XY plane in the rig's armature space (`core.goals.floor`)."""

from __future__ import annotations

import math

import bpy
from mathutils import Vector

from ...core.goals.floor import Floor
from . import armature


def moves_with_rig(obj: bpy.types.Object) -> str | None:
    """Why the rig's Floor would move with the solve (it hangs from a bone of the rig), or None."""
    floor = child = obj.fabrik.floor
    while child is not None:
        if child.parent == obj and child.parent_type == 'BONE':
            return f"the Floor '{floor.name}' hangs from a bone of '{obj.name}' (it would move with the solve)"
        child = child.parent
    return None


def floor_problem(obj: bpy.types.Object, depsgraph: bpy.types.Depsgraph) -> str | None:
    """Why the rig's Floor cannot be used, or None (also where it has none)."""
    if obj.fabrik.floor is None:
        return None
    moves = moves_with_rig(obj)
    if moves:
        return moves
    try:
        floor_plane(obj, depsgraph)
    except ValueError as exc:
        return str(exc)
    return None


def floor_plane(obj: bpy.types.Object, depsgraph: bpy.types.Depsgraph) -> Floor | None:
    """The rig's Floor (None: it has none); ValueError where its object has no usable XY plane."""
    floor = obj.fabrik.floor
    if floor is None:
        return None
    world = (floor.evaluated_get(depsgraph) if depsgraph is not None else floor).matrix_world
    to_armature = armature.world_to_armature(obj.evaluated_get(depsgraph) if depsgraph is not None else obj)
    matrix = to_armature @ world
    point = matrix.translation
    normal = Vector(matrix.col[0][:3]).cross(Vector(matrix.col[1][:3]))
    if not all(math.isfinite(c) for c in (*point, *normal)) or normal.length < 1e-12:
        raise ValueError(f"the Floor '{floor.name}' has no XY plane (a transform that is not a number, or no scale)")
    normal.normalize()
    return Floor(tuple(point), tuple(normal))
