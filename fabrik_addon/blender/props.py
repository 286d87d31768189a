# SPDX-License-Identifier: GPL-3.0-or-later
"""FABRIK settings stored on the armature object: live solving, stopping rules and the effectors."""

from __future__ import annotations

import bpy
from bpy.props import (
    BoolProperty,
    CollectionProperty,
    FloatProperty,
    IntProperty,
    PointerProperty,
    StringProperty,
)
from bpy.types import PropertyGroup


class FabrikEffector(PropertyGroup):
    """One end effector: a tip bone that should reach a target."""

    enabled: BoolProperty(name="Enabled", default=True, description="Solve for this effector")
    bone: StringProperty(name="Tip Bone", description="Bone whose tail should reach the target")
    target: PointerProperty(
        name="Target", type=bpy.types.Object, description="Object the tip bone reaches for"
    )
    subtarget: StringProperty(
        name="Target Bone", description="When the target is an armature, reach for this bone's head instead"
    )
    chain_length: IntProperty(
        name="Chain Length",
        default=0,
        min=0,
        soft_max=255,
        description="How many bones from the tip upwards may move (0: all the way to the root)",
    )
    weight: FloatProperty(
        name="Branch Weight",
        default=1.0,
        min=0.0,
        soft_max=10.0,
        description="Where chains share bones, how hard this effector pulls compared with the others",
    )


class FabrikSettings(PropertyGroup):
    """FABRIK settings of one armature object."""

    live: BoolProperty(
        name="Live Solving",
        default=False,
        description="Re-solve on every frame change and whenever a target moves",
    )
    iterations: IntProperty(
        name="Iterations", default=50, min=1, soft_max=500, description="Most FABRIK iterations per solve"
    )
    tolerance: FloatProperty(
        name="Tolerance",
        default=1e-4,
        min=0.0,
        soft_max=0.1,
        precision=5,
        subtype='DISTANCE',
        description="An effector counts as reached within this distance of its target",
    )
    effectors: CollectionProperty(type=FabrikEffector)
    active_effector: IntProperty(name="Active Effector", default=0, min=0)


classes = (FabrikEffector, FabrikSettings)

_register_classes, _unregister_classes = bpy.utils.register_classes_factory(classes)


def register() -> None:
    """Register the property groups and attach them to objects."""
    _register_classes()
    bpy.types.Object.fabrik = PointerProperty(type=FabrikSettings)


def unregister() -> None:
    """Detach the settings from objects and unregister the property groups."""
    del bpy.types.Object.fabrik
    _unregister_classes()
