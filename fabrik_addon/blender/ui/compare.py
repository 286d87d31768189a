# SPDX-License-Identifier: GPL-3.0-or-later
"""Compare the solvers on the active rig's current problem: error against iteration, drawn into an image."""

from __future__ import annotations

import bpy
import numpy as np
from bpy.props import IntProperty
from bpy.types import Operator

from ...core.solving.convergence import COLOUR_NAMES, COMPARED, error_curves, plot_rgba, reached_at
from ...core.solving.solvers import DESCRIPTIONS
from .. import solve
from ..effectors import effector_goals
from ..rig import memory
from ..rig.channels import read_pose
from .setup_ops import rig_for_panel

#: The image datablock the plot goes into (created on first use, reused after).
IMAGE_NAME = "FABRIK Solver Comparison"
WIDTH, HEIGHT = 480, 270

def summary_line(name: str, curve: list[float], tolerance: float) -> str:
    """One solver's result in words: its final summed error and when it first got within tolerance."""
    label = f"{DESCRIPTIONS[name][0]} ({COLOUR_NAMES.get(name, 'grey')})"
    if not curve:
        return f"{label}: cannot solve this rig"
    reached = reached_at(curve, tolerance)
    if reached is None:
        return f"{label} {curve[-1]:.1e}, not within {tolerance:.1e} in {len(curve) - 1} its"
    return f"{label} {curve[-1]:.1e} in {reached} its"


def write_image(rgba: np.ndarray):
    """Put a top-down RGBA plot into the comparison image (and its preview) and return the image."""
    height, width = rgba.shape[:2]
    image = bpy.data.images.get(IMAGE_NAME)
    if image is not None and tuple(image.size) != (width, height):
        image.scale(width, height)
    if image is None:
        image = bpy.data.images.new(IMAGE_NAME, width, height, alpha=True)
    bottom_up = np.ascontiguousarray(rgba[::-1], dtype=np.float32)  # Blender's pixel rows start at the bottom
    image.pixels.foreach_set(bottom_up.ravel())
    image.update()
    # The preview is set by hand: Blender renders an ID's preview once and would keep showing the old plot.
    preview = image.preview_ensure()
    if preview is not None:
        preview.image_size = (width, height)
        preview.image_pixels_float.foreach_set(bottom_up.ravel())
    return image


def _show_in_image_editors(context: bpy.types.Context, image) -> None:
    """Show the plot in the Image Editors already open on the screen (none are opened: that would be intrusive)."""
    screen = getattr(context, "screen", None)
    for area in screen.areas if screen is not None else ():
        if area.type == 'IMAGE_EDITOR':
            area.spaces.active.image = image
            area.tag_redraw()


class FABRIK_OT_compare_solvers(Operator):
    """Plot FABRIK, CCD, Jacobian transpose and DLS error against iteration from the current pose (rig unchanged)"""

    bl_idname = "fabrik.compare_solvers"
    bl_label = "Compare Solvers"
    bl_options = {'REGISTER'}  # no UNDO: it changes no rig data, only the plot image

    iterations: IntProperty(
        name="Iterations",
        description="How many iterations to plot (each solver runs once per cap, so the cost grows with its square)",
        default=30,
        min=1,
        max=200,
    )

    @classmethod
    def poll(cls, context: bpy.types.Context):
        return rig_for_panel(context) is not None

    def execute(self, context: bpy.types.Context):
        obj = rig_for_panel(context)  # (the Testing panel's rig, also while one of its targets is active)
        try:
            depsgraph = context.evaluated_depsgraph_get()
            read, result = solve.read(obj, depsgraph, effector_goals.gather(obj, depsgraph), read_pose(obj))
            start = None if read is None else read.start().pose()
        except ValueError as exc:
            self.report({'ERROR'}, f"Cannot compare: {exc}")
            return {'CANCELLED'}
        if read is None:
            self.report({'WARNING'}, f"Nothing to compare: {result.message}")
            return {'CANCELLED'}
        settings = read.settings
        curves = error_curves(read.plan.skeleton, read.goals, start, settings, COMPARED, self.iterations)
        tolerance = settings.tolerance
        image = write_image(plot_rgba(curves, WIDTH, HEIGHT, tolerance))
        _show_in_image_editors(context, image)
        lines = [summary_line(name, curve, tolerance) for name, curve in curves.items()]
        memory.of(obj).summaries = lines  # (the plot's legend, for the panel)
        self.report({'INFO'}, "; ".join(lines))
        return {'FINISHED'}


def draw(layout: bpy.types.UILayout, obj: bpy.types.Object, wrap=None) -> None:
    """The panel's part: the button, then the last plot with its legend (a colour per solver, as in the plot).
    `wrap` (text -> lines) breaks the legend's lines to the panel's width; without it each is one label."""
    wrap = wrap or (lambda text: [text])
    layout.operator(FABRIK_OT_compare_solvers.bl_idname, icon='GRAPH')
    image = bpy.data.images.get(IMAGE_NAME)
    kept = memory.get(obj.name)
    lines = None if kept is None else kept.summaries
    if image is None or not lines:
        return
    box = layout.box()
    if image.preview is not None and image.preview.icon_id:
        box.template_icon(icon_value=image.preview.icon_id, scale=8)
    column = box.column(align=True)
    for text in ["Summed miss (log) against iteration; dashed: tolerance", *lines]:
        for line in wrap(text):
            column.label(text=line)


classes = (FABRIK_OT_compare_solvers,)
_register_classes, _unregister_classes = bpy.utils.register_classes_factory(classes)


def register() -> None:
    """The operator (the legends are kept with each rig's memory, forgotten with it)."""
    _register_classes()


def unregister() -> None:
    """Remove the operator."""
    _unregister_classes()
