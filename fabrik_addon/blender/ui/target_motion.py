# SPDX-License-Identifier: GPL-3.0-or-later
"""Target motion presets: key an object's location on a circle or a figure eight, to try a rig out quickly."""

from __future__ import annotations

import math

import bpy
import numpy as np
from bpy.props import BoolProperty, EnumProperty, FloatProperty, IntProperty
from bpy.types import Operator
from mathutils import Vector

from ..bake import keys
from .setup_ops import rig_for_panel

PRESETS = (
    ('CIRCLE', "Circle", "A circle of the given radius around the object's current location"),
    ('FIGURE_EIGHT', "Figure Eight", "A figure eight through the object's current location, out to the radius each side"),
)
PLANES = (
    ('XY', "XY", "Horizontal (in the object's parent space)"),
    ('XZ', "XZ", "Upright, facing Y"),
    ('YZ', "YZ", "Upright, facing X"),
)
_PLANE_AXES = {'XY': (0, 1), 'XZ': (0, 2), 'YZ': (1, 2)}


def preset_point(kind: str, t: float, radius: float, plane: str) -> tuple[float, float, float]:
    """Offset from the path's center after t turns (0..1 one loop) of a preset path: 'CIRCLE' from (radius, 0)
    anticlockwise, 'FIGURE_EIGHT' the 1:2 Lissajous curve (r sin a, r sin 2a) from the center."""
    if plane not in _PLANE_AXES:
        raise ValueError(f"unknown plane {plane!r}; expected one of {', '.join(_PLANE_AXES)}")
    angle = 2.0 * math.pi * t
    if kind == 'CIRCLE':
        u, v = radius * math.cos(angle), radius * math.sin(angle)
    elif kind == 'FIGURE_EIGHT':
        u, v = radius * math.sin(angle), radius * math.sin(2.0 * angle)
    else:
        raise ValueError(f"unknown preset {kind!r}; expected one of {', '.join(p[0] for p in PRESETS)}")
    point = [0.0, 0.0, 0.0]
    a, b = _PLANE_AXES[plane]
    point[a], point[b] = u, v
    return point[0], point[1], point[2]


def scene_fps(scene: bpy.types.Scene) -> float:
    """The scene's real frame rate (fps divided by its base, so 29.97 stays 29.97)."""
    return scene.render.fps / scene.render.fps_base


class FABRIK_OT_target_motion(Operator):
    """Key the selected objects' location on a circle or figure eight around where they are now (to try targets out)"""

    bl_idname = "fabrik.target_motion"
    bl_label = "Target Motion"
    bl_options = {'REGISTER', 'UNDO'}

    preset: EnumProperty(name="Path", items=PRESETS, default='CIRCLE', description="Shape of the path")
    radius: FloatProperty(
        name="Radius", default=1.0, min=0.0, soft_max=10.0, subtype='DISTANCE',
        description="How far the path reaches from the object's current location",
    )
    speed: FloatProperty(
        name="Speed", default=0.5, soft_min=-5.0, soft_max=5.0,
        description="Turns per second at the scene's frame rate (negative: the other way round)",
    )
    phase: FloatProperty(
        name="Phase", default=0.0, soft_min=0.0, soft_max=1.0,
        description="Where on the path the first frame is, in turns (stagger several targets)",
    )
    plane: EnumProperty(name="Plane", items=PLANES, default='XZ', description="Plane of the path")
    effector_target: BoolProperty(
        name="Active Effector's Target",
        default=False,
        options={'SKIP_SAVE'},
        description="Key the target of the armature's active effector instead of the selected objects",
    )
    frame_start: IntProperty(name="Start", default=-1, description="First frame to key (-1: the scene's)")
    frame_end: IntProperty(name="End", default=-1, description="Last frame to key (-1: the scene's)")

    @classmethod
    def poll(cls, context: bpy.types.Context):
        return bool(_objects(context)) or bool(_effector_target(context))

    def execute(self, context: bpy.types.Context):
        scene = context.scene
        first = scene.frame_start if self.frame_start < 0 else self.frame_start
        last = scene.frame_end if self.frame_end < 0 else self.frame_end
        if last < first:
            self.report({'ERROR'}, f"The frame range {first}..{last} is empty")
            return {'CANCELLED'}
        frames = list(range(first, last + 1))
        fps = scene_fps(scene)
        objects = _effector_target(context) if self.effector_target else _objects(context)
        if not objects:
            self.report({'ERROR'}, "Nothing to key: the active effector has no target")
            return {'CANCELLED'}
        for obj in objects:
            # The center is where the object is now, in its parent's space (which is what location keys hold).
            center = Vector(obj.location)
            phases = [self.phase + self.speed * (f - first) / fps for f in frames]
            points = np.array([center + Vector(preset_point(self.preset, t, self.radius, self.plane)) for t in phases])
            keys.key_path(obj, frames, points)
        # Show the new keys at once (and let live rigs follow their moved targets).
        scene.frame_set(scene.frame_current)
        turns = abs(self.speed) * (len(frames) - 1) / fps
        label = {key: name for key, name, _ in PRESETS}[self.preset].lower()
        names = ", ".join(f"'{o.name}'" for o in objects[:3])
        if len(objects) > 3:
            names += f" and {len(objects) - 3} more"
        self.report(
            {'INFO'},
            f"Keyed {names} on a {label} of radius {self.radius:.3g} in {self.plane}, "
            f"frames {first}-{last} ({turns:.2f} turns)",
        )
        return {'FINISHED'}


def _effector_target(context: bpy.types.Context) -> list:
    """The target of the active effector of the rig the panel shows, if it has one."""
    obj = rig_for_panel(context)
    if obj is None:
        return []
    settings = obj.fabrik
    if not 0 <= settings.active_effector < len(settings.effectors):
        return []
    target = settings.effectors[settings.active_effector].target
    return [target] if target is not None else []


def _objects(context: bpy.types.Context) -> list:
    """The selected objects, or the active one when nothing is selected."""
    selected = list(getattr(context, "selected_objects", None) or [])
    if selected:
        return selected
    active = getattr(context, "active_object", None)
    return [active] if active is not None else []


classes = (FABRIK_OT_target_motion,)

register, unregister = bpy.utils.register_classes_factory(classes)
