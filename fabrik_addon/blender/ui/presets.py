# SPDX-License-Identifier: GPL-3.0-or-later
"""Presets with Blender's preset system: a rig's solver settings and a bone's IK limits, as shareable .py files.

Saved presets go where Blender keeps everyone's presets (`<user scripts>/presets/fabrik/...`), so they can be
copied to another machine or shared as single files. The presets this add-on ships sit in its own folder
(`fabrik_addon/presets/fabrik/...`, read-only, never written to the user's folders) and are listed first.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import bpy
from bl_operators.presets import AddPresetBase
from bpy.props import StringProperty
from bpy.types import Menu, Operator

from ..rig import armature
from .setup_ops import rig_for_panel

#: Preset folders below `presets/`, as `bpy.utils.preset_paths` takes them.
RIG_SUBDIR = "fabrik/rig_settings"
LIMITS_SUBDIR = "fabrik/bone_limits"
#: The shipped presets: `presets/fabrik/...` inside the add-on package.
SHIPPED_ROOT = Path(__file__).resolve().parents[2] / "presets"

#: The rig settings a rig preset holds (FabrikSettings properties): the stopping rules and where solves start.
RIG_SETTINGS = ("solver", "iterations", "tolerance", "start")
#: Blender's own per-bone IK settings a limit preset holds (the same ones Blender's IK constraint reads).
LIMIT_NAMES = tuple(name for name, _ in armature.LIMIT_SETTINGS)
_ANGLES = frozenset(name for name in LIMIT_NAMES if name.startswith(("ik_min", "ik_max")))


def search_paths(subdir: str) -> list[str]:
    """Folders a preset menu lists: the shipped presets first, then Blender's preset folders (the user's)."""
    paths = []
    shipped = SHIPPED_ROOT / subdir
    if shipped.is_dir():
        paths.append(str(shipped))
    for path in bpy.utils.preset_paths(subdir):
        if os.path.normpath(path) not in map(os.path.normpath, paths):
            paths.append(path)
    return paths


def limit_preset_text(values: dict) -> str:
    """The text of a bone limit preset file: `values` (by the LIMIT_NAMES; angles in radians) set on the
    active pose bone and every other selected one."""
    lines = [
        "import bpy",
        "from math import radians",
        "",
        "# FABRIK bone limits: Blender's own IK settings (Bone > Inverse Kinematics), set on the active pose bone",
        "# and on every other selected pose bone.",
        "context = bpy.context",
        "bones = []",
        "for bone in [context.active_pose_bone, *(getattr(context, \"selected_pose_bones\", None) or ())]:",
        "    if bone is not None and bone not in bones:",
        "        bones.append(bone)",
        "for bone in bones:",
    ]
    for name in LIMIT_NAMES:
        value = values[name]
        if name in _ANGLES:
            # Degrees, so a shared file reads as what the Bone properties show.
            text = f"radians({round(math.degrees(value), 4)!r})"
        elif isinstance(value, bool):
            text = repr(value)
        else:
            text = repr(round(float(value), 6))
        lines.append(f"    bone.{name} = {text}")
    return "\n".join(lines) + "\n"


class FABRIK_MT_rig_settings_presets(Menu):
    """Solver, iterations, tolerance and where solves start, saved and shared as presets"""

    bl_label = "Rig Settings Presets"
    preset_subdir = RIG_SUBDIR
    preset_operator = "fabrik.rig_settings_preset_apply"
    preset_add_operator = "fabrik.rig_settings_preset_add"

    def draw(self, _context: bpy.types.Context) -> None:
        _draw_presets(self)


class FABRIK_MT_bone_limits_presets(Menu):
    """IK limits for common joints (hinges, knees, elbows, spines, robot joints), saved and shared as presets"""

    bl_label = "Bone Limit Presets"
    preset_subdir = LIMITS_SUBDIR
    preset_operator = "script.execute_preset"
    preset_add_operator = "fabrik.bone_limits_preset_add"

    def draw(self, _context: bpy.types.Context) -> None:
        _draw_presets(self)


def _draw_presets(menu: Menu) -> None:
    """Blender's `Menu.draw_preset`, over the shipped folder as well as Blender's; without its add operator, whose
    per-row remove buttons and name field make a plain menu as wide as the window (the + and - sit beside it)."""
    menu.path_menu(
        search_paths(menu.preset_subdir),
        menu.preset_operator,
        props_default={"menu_idname": menu.bl_idname},
        filter_ext=lambda ext: ext.lower() == ".py",
        display_name=lambda name: bpy.path.display_name(name, title_case=False),
    )


class FABRIK_OT_rig_settings_preset_apply(Operator):
    """Set the rig's FABRIK settings (solver, iterations, tolerance, start) from this preset"""

    bl_idname = "fabrik.rig_settings_preset_apply"
    bl_label = "Apply Rig Settings Preset"
    bl_options = {'REGISTER', 'UNDO'}

    filepath: StringProperty(subtype='FILE_PATH', options={'SKIP_SAVE'})
    menu_idname: StringProperty(options={'SKIP_SAVE'})

    @classmethod
    def poll(cls, context: bpy.types.Context):
        return rig_for_panel(context) is not None

    def execute(self, context: bpy.types.Context):
        # The panel shows the rig of a selected target too; a preset file sets `bpy.context.object`'s settings,
        # so it runs with the rig as the object (not the target, whose own hidden settings it would change).
        rig = rig_for_panel(context)
        before = {name: getattr(rig.fabrik, name) for name in RIG_SETTINGS}
        try:
            with context.temp_override(object=rig, active_object=rig):
                result = bpy.ops.script.execute_preset(filepath=self.filepath, menu_idname=self.menu_idname)
        except (RuntimeError, TypeError) as exc:  # (a missing file, a line that sets no such value: all or nothing)
            for name, value in before.items():
                setattr(rig.fabrik, name, value)
            reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
            self.report({'ERROR'}, f"Cannot apply the preset {bpy.path.display_name(self.filepath)!r}: {reason}; "
                        f"'{rig.name}' keeps its settings")
            return {'CANCELLED'}
        if 'FINISHED' in result:
            self.report({'INFO'}, f"'{rig.name}': {bpy.path.display_name(self.filepath)} settings")
        return result


class FABRIK_OT_rig_settings_preset_add(AddPresetBase, Operator):
    """Save the rig's FABRIK settings (solver, iterations, tolerance, start) as a preset, or remove one"""

    bl_idname = "fabrik.rig_settings_preset_add"
    bl_label = "Add Rig Settings Preset"
    preset_menu = "FABRIK_MT_rig_settings_presets"
    preset_subdir = RIG_SUBDIR
    preset_defines = ["settings = bpy.context.object.fabrik"]
    preset_values = [f"settings.{name}" for name in RIG_SETTINGS]

    @classmethod
    def poll(cls, context: bpy.types.Context):
        return rig_for_panel(context) is not None

    def execute(self, context: bpy.types.Context):
        # (the rig the panel shows, also while its target is the active object: see the apply operator)
        rig = rig_for_panel(context)
        with context.temp_override(object=rig, active_object=rig):
            return super().execute(bpy.context)


class FABRIK_OT_bone_limits_preset_add(AddPresetBase, Operator):
    """Save the active pose bone's IK limits as a preset (it sets every selected bone when applied), or remove one"""

    bl_idname = "fabrik.bone_limits_preset_add"
    bl_label = "Add Bone Limit Preset"
    preset_menu = "FABRIK_MT_bone_limits_presets"
    preset_subdir = LIMITS_SUBDIR
    # AddPresetBase reads these only when there is no add(); kept so the class is complete as Blender defines it.
    preset_defines = ["bone = bpy.context.active_pose_bone"]
    preset_values = [f"bone.{name}" for name in LIMIT_NAMES]

    @classmethod
    def poll(cls, context: bpy.types.Context):
        return context.active_pose_bone is not None

    def add(self, context: bpy.types.Context, filepath: str) -> None:
        """Write the active bone's limits in the form that also applies to the other selected bones."""
        bone = context.active_pose_bone
        with open(filepath, "w", encoding="utf-8") as handle:
            handle.write(limit_preset_text({name: getattr(bone, name) for name in LIMIT_NAMES}))


def draw_preset_header(layout: bpy.types.UILayout, menu: type[Menu], add_operator: str) -> None:
    """A preset menu with + and - beside it, as Blender's own preset headers have."""
    row = layout.row(align=True)
    row.menu(menu.__name__, text=menu.bl_label)
    row.operator(add_operator, text="", icon='ADD')
    row.operator(add_operator, text="", icon='REMOVE').remove_active = True


classes = (
    FABRIK_OT_rig_settings_preset_apply,
    FABRIK_MT_rig_settings_presets,
    FABRIK_MT_bone_limits_presets,
    FABRIK_OT_rig_settings_preset_add,
    FABRIK_OT_bone_limits_preset_add,
)

register, unregister = bpy.utils.register_classes_factory(classes)
