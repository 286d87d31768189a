# SPDX-License-Identifier: GPL-3.0-or-later
"""An effector's settings read once, as plain values, for one live solve.

A live frame checks each effector (`integrity.problems_of`), snapshots it
for the next update to compare with (`handlers._inputs_of`) and makes it a goal
(`effector_goals.gather_goals`). Each property read of an add-on's property group
goes through RNA; reading them once and handing the values on halves that
work. Each of those functions takes either this or the effector itself.
"""

from __future__ import annotations

import bpy
from mathutils import Matrix

from ..rig.props import FabrikEffector

#: The effector properties a solve reads (the order of `handlers._inputs_of`'s snapshot; the pin's last, as
#: `pins.read_again` replaces them).
SOLVED = (
    "enabled", "bone", "chain_length", "weight", "influence", "use_rotation", "rotation_weight", "pole_angle",
    "use_stretch", "pin", "pin_location", "pin_rotation",
)

#: The effector properties its checks read besides (`integrity.effector_problem`).
CHECKED = (
    "target", "subtarget", "pole_target", "pole_subtarget", "source_bone", "lost_target", "lost_pole", "switched",
    "name", "pin_key",
)


class EffectorValues:
    """One effector's properties as they were read (`SOLVED`, `CHECKED`), with what the live frame found for it:
    its problem (`integrity.effector_problem`) and its target's and pole's world matrices (None: none, or a bone
    that is missing)."""

    __slots__ = SOLVED + CHECKED + ("index", "problem", "target_world", "pole_world")

    def __init__(self, effector: FabrikEffector, index: int) -> None:
        for name in SOLVED + CHECKED:
            setattr(self, name, getattr(effector, name))
        self.pin_location, self.pin_rotation = tuple(self.pin_location), tuple(self.pin_rotation)
        self.index = index
        self.problem = None
        self.target_world = self.pole_world = None

    def solved(self) -> tuple:
        """The properties a solve reads, as one comparable value."""
        return tuple(same_if_nan(getattr(self, name)) for name in SOLVED)


def read(obj: bpy.types.Object) -> list[EffectorValues]:
    """Every effector of the rig, read once."""
    return [EffectorValues(effector, index) for index, effector in enumerate(obj.fabrik.effectors)]


def same_if_nan(value):
    """A value for a snapshot to compare, with a float that is not a number as a marker equal to itself: NaN never
    equals NaN, so a snapshot holding one would never match and the rig would be solved again on every update."""
    if isinstance(value, tuple):
        return tuple(same_if_nan(v) for v in value)
    return "nan" if isinstance(value, float) and value != value else value


def comparable(matrix: Matrix):
    """A matrix as a value for a snapshot to compare: a copy (mathutils compares matrices by value); None stays
    None."""
    return None if matrix is None else matrix.copy()
