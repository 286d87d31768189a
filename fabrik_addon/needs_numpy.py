# SPDX-License-Identifier: GPL-3.0-or-later
"""What the add-on registers where Blender's Python has no numpy: a FABRIK tab and preferences that say what to
install, and nothing that solves (everything else imports numpy)."""

from __future__ import annotations

import sys

import bpy
from bpy.types import AddonPreferences, Panel

#: The add-on's top module (`fabrik_ik` installed as a legacy add-on, `bl_ext.<repository>.fabrik_ik` as an
#: extension): its preferences are registered under that name; empty where the package is imported on its own.
ADDON = __package__.rpartition(".")[0]


def advice() -> list[str]:
    """What is wrong and what to do, a line each."""
    python = "%d.%d" % sys.version_info[:2]
    return [
        "FABRIK IK needs numpy, which this Blender's Python lacks.",
        f"Install numpy for Python {python}: on Debian or Ubuntu,",
        "sudo apt install python3-numpy; elsewhere:",
        f"{sys.executable} -m pip install numpy",
        "(or use a Blender from blender.org, which carries it),",
        "then restart Blender. Nothing is solved until then.",
    ]


def draw_advice(layout: bpy.types.UILayout) -> None:
    """The advice in a box, its first line as a warning."""
    column = layout.box().column(align=True)
    lines = advice()
    column.alert = True
    column.label(text=lines[0], icon='ERROR')
    column.alert = False
    for line in lines[1:]:
        column.label(text=line)


class VIEW3D_PT_fabrik_needs_numpy(Panel):
    """FABRIK IK cannot run without numpy: what to install"""

    bl_space_type = 'VIEW_3D'
    bl_region_type = 'UI'
    bl_category = "FABRIK"
    bl_label = "FABRIK IK"

    def draw(self, context: bpy.types.Context):
        draw_advice(self.layout)


class FABRIK_AP_needs_numpy(AddonPreferences):
    """The add-on's preferences, where numpy is missing: the same advice."""

    bl_idname = ADDON

    def draw(self, context: bpy.types.Context):
        draw_advice(self.layout)


classes = (VIEW3D_PT_fabrik_needs_numpy, FABRIK_AP_needs_numpy) if ADDON else (VIEW3D_PT_fabrik_needs_numpy,)

register, unregister = bpy.utils.register_classes_factory(classes)
