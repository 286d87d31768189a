# SPDX-License-Identifier: GPL-3.0-or-later
"""Copy Report: what a problem report needs (versions, the rig's effectors and settings, every status line) on
the clipboard, ready to paste."""

from __future__ import annotations

import math
import platform

import bpy
import numpy as np
from bpy.types import Operator

from ... import __version__
from ..rig.props import effector_label
from ..rig.status import statuses
from .panels import effector_state
from .setup_ops import rig_for_panel

#: Settings the report leaves out: the list's own bookkeeping, and what live solving keeps for itself.
_LEFT_OUT = {"rna_type", "name", "effectors", "active_effector", "held", "converted", "retarget_bones",
             "retarget_index", "bone_refs", "root_bone_ref", "pin_key"}


def _value(owner: bpy.types.bpy_struct, identifier: str) -> str:
    """One setting as text: an object by its name, a float rounded, a vector as a tuple."""
    value = getattr(owner, identifier)
    if isinstance(value, bpy.types.ID):
        return repr(value.name)
    if value is None:
        return "None"
    if isinstance(value, float):
        return f"{value:.6g}" if math.isfinite(value) else str(value)
    if isinstance(value, str):
        return repr(value)
    return str(value)


def _settings(owner: bpy.types.bpy_struct) -> str:
    """Every setting of a property group that says something, as name=value."""
    return ", ".join(f"{p.identifier}={_value(owner, p.identifier)}" for p in owner.bl_rna.properties
                     if p.identifier not in _LEFT_OUT and p.type != 'COLLECTION')


def report_text(obj: bpy.types.Object) -> str:
    """The report of one rig, in lines: versions, the rig, its settings, each effector, the last solve's status."""
    lines = [
        f"FABRIK IK {__version__}; Blender {bpy.app.version_string}; Python {platform.python_version()}; "
        f"numpy {np.__version__}; {platform.system()} {platform.machine()} ({platform.platform()})",
        f"Rig '{obj.name}': {len(obj.data.bones)} bones, mode {obj.mode}, scale {tuple(round(s, 4) for s in obj.scale)}",
        f"Settings: {_settings(obj.fabrik)}",
    ]
    for index, effector in enumerate(obj.fabrik.effectors):
        lines.append(f"Effector {index + 1} '{effector.name}': {_settings(effector)}")
    rig_status = statuses.get(obj.name)
    lines.append(f"Status: {rig_status.message if rig_status is not None and rig_status.message else 'not solved yet'}")
    for index in range(len(obj.fabrik.effectors)):
        kind, message = effector_state(obj, index)
        if message:
            lines.append(f"  {effector_label(obj.fabrik, index)}: {message} [{kind.lower()}]")
    return "\n".join(lines) + "\n"


class FABRIK_OT_copy_report(Operator):
    """Copy what a problem report needs to the clipboard: the Blender, add-on and Python versions, the rig's
    effectors and settings, and every status line"""

    bl_idname = "fabrik.copy_report"
    bl_label = "Copy Report"
    bl_options = {'REGISTER'}

    @classmethod
    def poll(cls, context: bpy.types.Context):
        return rig_for_panel(context) is not None

    def execute(self, context: bpy.types.Context):
        obj = rig_for_panel(context)
        text = report_text(obj)
        context.window_manager.clipboard = text
        self.report({'INFO'}, f"Copied the report of '{obj.name}' ({len(text.splitlines())} lines): paste it into "
                              "your problem report")
        return {'FINISHED'}


classes = (FABRIK_OT_copy_report,)

register, unregister = bpy.utils.register_classes_factory(classes)
