# SPDX-License-Identifier: GPL-3.0-or-later
"""A viewport overlay: what the solver sees and did, drawn over the 3D viewport.

Per effector: a line from the tip to its target coloured by the last solve's
status (reached, missing by more than the tolerance, an error), a line from the
chain's middle joint to its pole target, the chain's reach (a circle facing the
view round the chain's base), the tip's trace over recent frames and a small
readout (miss, iterations, solve time). Per limited joint of the chains: its
swing cone (an arc for a hinge) and its twist range. Each item is switched in
the FABRIK panel's Overlay sub-panel (`Scene.fabrik_overlay`).

The geometry is built by plain functions (`overlay_shapes`) that read the
evaluated rig and its status and return segments and labels in world space;
the draw callbacks here only turn those into GPU batches and text. The draw
handlers are added in `register()` only when Blender runs with a UI: background
runs (tests, headless bakes, the demo) never touch the overlay. Nothing here
writes to the rig or to the solver's state.
"""

from __future__ import annotations

import logging

import bpy
from bpy.app.handlers import persistent
from bpy.props import BoolProperty, EnumProperty, IntProperty, PointerProperty
from bpy.types import Panel, PropertyGroup

from ..rig import animdata, compat, memory
from ..rig.status import statuses
from .overlay_shapes import Label, build, read_effectors, record_trace, stacked_below

log = logging.getLogger(__name__)

#: Line width in pixels per kind of segment.
WIDTHS = {'target': 3.0, 'marker': 3.0, 'pole': 2.0, 'reach': 1.5, 'cone': 1.5, 'twist': 1.5, 'trace': 2.0, 'pin': 3.0}
TEXT_SIZE = 12
TEXT_OFFSET = (12, -4)


# ---------------------------------------------------------------- what is drawn: plain data


# ---------------------------------------------------------------- the tip's trace over recent frames


# ---------------------------------------------------------------- switches and their panel

def redraw_viewports(_settings=None, context: bpy.types.Context | None = None) -> None:
    """Redraw every 3D viewport (switching an item is no change Blender redraws the viewport for)."""
    wm = getattr(context or bpy.context, "window_manager", None)
    for window in getattr(wm, "windows", ()):
        for area in window.screen.areas:
            if area.type == 'VIEW_3D':
                area.tag_redraw()


class FabrikOverlaySettings(PropertyGroup):
    """Which parts of the FABRIK viewport overlay are drawn (per scene)."""

    show: BoolProperty(name="Overlay", default=True, description="Draw the FABRIK overlay in the 3D viewport",
                       update=redraw_viewports)
    show_targets: BoolProperty(
        name="Tip to Target", default=True, update=redraw_viewports,
        description="A line from each tip to its target: green reached, yellow missed by more than the tolerance, "
                    "red an error, grey not solved (or live solving off)",
    )
    show_poles: BoolProperty(name="Poles", default=True, update=redraw_viewports,
                             description="A line from each chain's middle joint to its pole target")
    show_reach: BoolProperty(name="Reach", default=False, update=redraw_viewports,
                             description="A circle round each chain's base as far as the chain reaches")
    show_limits: BoolProperty(name="Limits", default=True, update=redraw_viewports,
                              description="The swing cone (or hinge arc) and twist range of each limited joint")
    limits_of: EnumProperty(
        name="Limits Of", default='ACTIVE', update=redraw_viewports,
        description="Whose joint limits are drawn",
        items=[('ACTIVE', "Active Chain", "The chain of the effector picked in each rig's FABRIK list"),
               ('SELECTED', "Selected Bones", "The selected bones of every effector chain"),
               ('ALL', "All Chains", "Every limited joint of every effector chain")],
    )
    show_trace: BoolProperty(name="Trace", default=True, update=redraw_viewports,
                             description="The path each tip took over recent frames")
    trace_length: IntProperty(name="Trace Length", default=48, min=2, soft_max=500, update=redraw_viewports,
                              description="How many recent tip positions the trace keeps")
    show_readout: BoolProperty(name="Readout", default=True, update=redraw_viewports,
                               description="Next to each tip: its miss, the solve's iterations and time")


class VIEW3D_PT_fabrik_overlay(Panel):
    """What the FABRIK viewport overlay draws"""

    bl_space_type = 'VIEW_3D'
    bl_region_type = 'UI'
    bl_category = "FABRIK"
    bl_label = "Overlay"
    bl_parent_id = "VIEW3D_PT_fabrik"
    bl_options = {'DEFAULT_CLOSED'}

    def draw_header(self, context: bpy.types.Context):
        self.layout.prop(context.scene.fabrik_overlay, "show", text="")

    def draw(self, context: bpy.types.Context):
        settings = context.scene.fabrik_overlay
        column = self.layout.column(align=True)
        column.active = settings.show
        for name in ("show_targets", "show_poles", "show_reach"):
            column.prop(settings, name)
        row = column.row(align=True)
        row.prop(settings, "show_limits")
        sub = row.row(align=True)
        sub.active = settings.show_limits
        sub.prop(settings, "limits_of", text="")
        column.prop(settings, "show_readout")
        row = column.row(align=True)
        row.prop(settings, "show_trace")
        sub = row.row(align=True)
        sub.active = settings.show_trace
        sub.prop(settings, "trace_length", text="Points")


# ---------------------------------------------------------------- drawing (only with a UI)

#: The draw handlers while registered with a UI: (POST_VIEW, POST_PIXEL).
_handles: list = []
#: Counts the scene's updates and frame changes (GUI only): what the overlay draws can change only with one.
_updates = 0
#: Labels built by the last POST_VIEW pass, per region, for the POST_PIXEL pass that follows it.
_labels: dict[int, list[Label]] = {}
_logged: set[str] = set()


def _guarded(draw):
    """Run a draw callback; an exception is logged once and never reaches Blender's draw loop."""
    def run():
        try:
            draw(bpy.context)
        except Exception as exc:  # noqa: BLE001 -- a draw callback must never raise
            key = f"{type(exc).__name__}: {exc}"
            if key not in _logged:
                _logged.add(key)
                log.exception("FABRIK overlay could not draw (reported once)")
    run.__name__ = draw.__name__
    return run


def _rigs(context: bpy.types.Context):
    """Visible armatures with effectors."""
    for obj in context.view_layer.objects:
        if obj.type == 'ARMATURE' and len(obj.fabrik.effectors) and obj.visible_get():
            yield obj


def _enabled(context: bpy.types.Context):
    """The overlay's switches when it should draw in this viewport, else None."""
    settings = getattr(context.scene, "fabrik_overlay", None)
    space = context.space_data
    if settings is None or not settings.show or space is None or space.type != 'VIEW_3D':
        return None
    if not space.overlay.show_overlays:
        return None
    return settings


def _draw_view(context: bpy.types.Context) -> None:
    """POST_VIEW: the lines, one batch per colour and width; the readouts are kept for the POST_PIXEL pass."""
    region = context.region
    key = region.as_pointer() if region is not None else 0
    _labels.pop(key, None)
    settings = _enabled(context)
    if settings is None or context.region_data is None:
        return
    depsgraph = context.evaluated_depsgraph_get()
    facing = context.region_data.view_rotation.to_matrix()
    groups: dict[tuple, list] = {}
    labels = []
    switches = tuple(getattr(settings, name) for name in _SWITCHES)
    for obj in _rigs(context):
        rig_status = statuses.get(obj.name)
        # The reach circle faces the view: with it shown, each view draws its own.
        # The limits drawn follow the active effector and, for selected bones, the bones' selection.
        chosen = (obj.fabrik.active_effector,
                  tuple(b.name for b in obj.pose.bones if animdata.is_selected(b))
                  if settings.limits_of == 'SELECTED' else None)
        made_from = (_updates, id(rig_status), switches, chosen,
                     tuple(map(tuple, facing)) if settings.show_reach else None)
        # (what it was built from, the drawing: redraws that change nothing, orbiting the view or a second
        # viewport, reuse it instead of reading the rig and building the lines again)
        kept = memory.of(obj).drawing
        if kept is not None and kept[0] == made_from:
            drawing = kept[1]
        else:
            views = read_effectors(obj, depsgraph, rig_status)
            traces = record_trace(obj, views, settings.trace_length) if settings.show_trace else None
            drawing = build(obj, depsgraph, rig_status, settings, facing, traces, views)
            memory.of(obj).drawing = made_from, drawing
        for segment in drawing.segments:
            groups.setdefault((segment.color, WIDTHS[segment.kind]), []).extend((segment.a, segment.b))
        labels += drawing.labels
    _labels[key] = labels
    if not groups:
        return
    import gpu  # (here: there is no GPU to draw with in background mode)
    from gpu_extras.batch import batch_for_shader

    shader = compat.builtin_shader("polyline")
    gpu.state.blend_set('ALPHA')
    depth = gpu.state.depth_test_get()
    gpu.state.depth_test_set('NONE')
    try:
        for (color, width), coords in groups.items():
            batch = batch_for_shader(shader, 'LINES', {"pos": [tuple(c) for c in coords]})
            shader.bind()
            shader.uniform_float("viewportSize", (region.width, region.height))
            shader.uniform_float("lineWidth", width)
            shader.uniform_float("color", color)
            batch.draw(shader)
    finally:
        gpu.state.depth_test_set(depth)
        gpu.state.blend_set('NONE')


def _draw_text(context: bpy.types.Context) -> None:
    """POST_PIXEL: each effector's readout next to its tip."""
    region = context.region
    labels = _labels.get(region.as_pointer() if region is not None else 0)
    if not labels or _enabled(context) is None or context.region_data is None:
        return
    import blf  # (here, as gpu above)
    from bpy_extras.view3d_utils import location_3d_to_region_2d

    font = 0
    scale = context.preferences.system.ui_scale
    compat.text_size(font, TEXT_SIZE * scale)
    blf.enable(font, blf.SHADOW)
    blf.shadow(font, 3, 0.0, 0.0, 0.0, 0.8)
    line = TEXT_SIZE * 1.4 * scale
    try:
        placed = []
        for label in labels:
            point = location_3d_to_region_2d(region, context.region_data, label.position)
            if point is None:
                continue
            x, y = point.x + TEXT_OFFSET[0] * scale, point.y + TEXT_OFFSET[1] * scale
            y = stacked_below(x, y, placed, line)
            placed.append((x, y))
            blf.position(font, x, y, 0.0)
            blf.color(font, *label.color)
            blf.draw(font, label.text)
    finally:
        blf.disable(font, blf.SHADOW)


draw_view = _guarded(_draw_view)
draw_text = _guarded(_draw_text)


classes = (FabrikOverlaySettings, VIEW3D_PT_fabrik_overlay)
_register_classes, _unregister_classes = bpy.utils.register_classes_factory(classes)


def register() -> None:
    """The switches and their panel; the draw handlers only when Blender has a UI (never in background)."""
    _register_classes()
    bpy.types.Scene.fabrik_overlay = PointerProperty(type=FabrikOverlaySettings)
    if bpy.app.background:
        return
    for name in _UPDATE_HANDLERS:
        getattr(bpy.app.handlers, name).append(count_update)
    _handles.append(bpy.types.SpaceView3D.draw_handler_add(draw_view, (), 'WINDOW', 'POST_VIEW'))
    _handles.append(bpy.types.SpaceView3D.draw_handler_add(draw_text, (), 'WINDOW', 'POST_PIXEL'))


@persistent
def count_update(_scene: bpy.types.Scene, _depsgraph: bpy.types.Depsgraph | None = None) -> None:
    """Something in the scene changed (or the frame did): the drawings built before are out of date."""
    global _updates
    _updates += 1


#: The switches a drawing depends on (FabrikOverlaySettings).
_SWITCHES = (
    "show_targets", "show_poles", "show_reach", "show_limits", "limits_of", "show_trace", "show_readout",
    "trace_length",
)
#: Where `count_update` listens.
_UPDATE_HANDLERS = ("depsgraph_update_post", "frame_change_post")


def unregister() -> None:
    """Remove the draw handlers, the switches and the panel, and forget the traces."""
    for handle in _handles:
        bpy.types.SpaceView3D.draw_handler_remove(handle, 'WINDOW')
    _handles.clear()
    _labels.clear()
    for name in _UPDATE_HANDLERS:
        handlers = getattr(bpy.app.handlers, name)
        while count_update in handlers:
            handlers.remove(count_update)
    _logged.clear()
    del bpy.types.Scene.fabrik_overlay
    _unregister_classes()
