# SPDX-License-Identifier: GPL-3.0-or-later
"""Driver for Blender 3.4's real GUI: the FABRIK sidebar tab at its default width, for a reached target, a second
effector switched off by the rig's switch (as on a converted Rigify limb), a missed and a refused target; then
the preset menus' widths beside one of Blender's own.

Run by tests/gui/test_panels.py as
`blender --enable-event-simulate --python gui_panels_driver.py -- RESULT.json SHOT_DIR CHECKOUT`.
Checks the panels' registration and polls in the running UI, switches the sidebar to the FABRIK tab
(Ctrl+Tab), notes which sub-panels draw (draw functions appended to them), and for each state captures the
window and counts the alert-red pixels in the sidebar. The Status sub-panel's hook also measures its wrapped
lines with the interface font, against the sidebar's width. Steps run in `bpy.app.timers` callbacks, so the
UI evaluates and redraws between them. Not a pytest module.
"""

from __future__ import annotations

import os
import sys

import bpy

ARGS = sys.argv[sys.argv.index("--") + 1:]
RESULT_PATH, SHOT_DIR, CHECKOUT = ARGS[0], ARGS[1], ARGS[2]
MODULE = "fabrik_ik"
TIP = "bone3"
NAME = "Left Hand"
#: (state, target location, chain length, the overlay's name for the status it must give)
STATES = [
    ("reached", (0.9, 0.3, 1.2), 0, "REACHED"),
    ("switched", (0.9, 0.3, 1.2), 0, "REACHED"),
    ("missed", (0.0, 2.6, 1.4), 0, "MISSED"),
    ("refused", (0.0, 2.6, 1.4), 9, "ERROR"),
]
#: The name of the effector the rig's switch turns off in the "switched" state.
SWITCHED = "Left Hand pole"
#: Our preset menus, and one of Blender's own to compare their widths with.
MENUS = ("FABRIK_MT_rig_settings_presets", "FABRIK_MT_bone_limits_presets", "RENDER_MT_framerate_presets")
SUBPANELS = ("VIEW3D_PT_fabrik_status", "VIEW3D_PT_fabrik_effector", "VIEW3D_PT_fabrik_pins",
             "VIEW3D_PT_fabrik_solver", "VIEW3D_PT_fabrik_root", "VIEW3D_PT_fabrik_retarget",
             "VIEW3D_PT_fabrik_testing")
#: Where the "pinned" state's pin holds the target (reachable, away from the target).
PIN_AT = (0.5, -0.5, 1.0)
#: The height of the "floor" state's floor, over the target it lifts.
FLOOR_AT = 0.3
POLL = 0.1
WAIT_TICKS = 50
WATCHDOG = 150.0  # seconds: it stops a hang, so a loaded machine has room

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # gui_driver_kit.py is copied beside it
import gui_driver_kit as kit  # noqa: E402

session = kit.Session(RESULT_PATH, WATCHDOG, POLL, WAIT_TICKS, states={}, drawn={})
result, finish = session.result, session.finish
addon, view3d = kit.addon, kit.view3d


def load_rgb(path: str):
    """A screenshot's pixels, rows from the bottom (as window coordinates)."""
    return kit.load_rgba(path)


def make_hook(name: str):
    def hook(_self, context) -> None:
        result["drawn"][name] = True
        if name == "VIEW3D_PT_fabrik_status":
            measure_status(context)
    return hook


def measure_status(context) -> None:
    """What the Status sub-panel drew in the real UI: the region's width, the line width the panel chose, and
    each wrapped line's width in pixels measured with the interface font."""
    import blf

    panels = addon().blender.ui.panels
    obj = addon().blender.ui.setup_ops.rig_for_panel(context)
    room = addon().blender.ui.wrapping.room_for(context)
    status = addon().blender.rig.status.statuses.get(obj.name)
    texts = [] if status is None else [status.message] + [
        f"{e.name}: {panels.effector_state(obj, i)[1]}" for i, e in enumerate(obj.fabrik.effectors)]
    lines = [line for text in texts for line in room.lines(text)]
    style = context.preferences.ui_styles[0].widget
    scale = getattr(context.preferences.system, "ui_scale", 0.0) or context.preferences.view.ui_scale
    try:
        blf.size(0, style.points * scale, 72)
    except TypeError:  # (newer Blender takes no dpi)
        blf.size(0, style.points * scale)
    widths = [blf.dimensions(0, line)[0] for line in lines]
    result["status_draw"] = {
        "region_width": context.region.width, "room": room.width, "scale": scale, "lines": lines,
        "widest_line_px": max(widths, default=0.0), "texts": texts,
    }


def step_setup():
    result["stage"] = "setup"
    result["addon_enabled"] = MODULE in bpy.context.preferences.addons
    if not result["addon_enabled"]:
        raise RuntimeError(f"{MODULE} is not enabled")
    types = bpy.types
    result["registered"] = {name: hasattr(types, name) for name in
                            ("VIEW3D_PT_fabrik", *SUBPANELS, "BONE_PT_fabrik_limits", "BONE_PT_inverse_kinematics")}
    result["parents"] = {name: getattr(getattr(types, name, None), "bl_parent_id", None)
                         for name in (*SUBPANELS, "BONE_PT_fabrik_limits")}
    result["testing_options"] = sorted(getattr(types, "VIEW3D_PT_fabrik_testing").bl_options)
    # Blender 3.4 has no way to open a closed sub-panel from Python: Retarget (closed at first) is registered
    # again open, before the tab first draws, so that its state can be seen.
    for closed in (types.VIEW3D_PT_fabrik_root, types.VIEW3D_PT_fabrik_retarget):  # (so is Root)
        bpy.utils.unregister_class(closed)
        closed.bl_options = set()
        bpy.utils.register_class(closed)
    for name in SUBPANELS:
        getattr(types, name).append(make_hook(name))

    sys.path.insert(0, CHECKOUT)
    from samples import rigbuild

    kit.clear_startup_scene()
    rig = rigbuild.make_armature("Rig", rigbuild.chain_bones(4, 0.5))
    target = rigbuild.make_target("Target", STATES[0][1], size=0.1)
    effector = rigbuild.add_effector(rig, TIP, target)
    effector.name = NAME
    rig.fabrik.live = True
    view_layer = bpy.context.view_layer
    for obj in view_layer.objects:
        obj.select_set(obj == rig)
    view_layer.objects.active = rig
    rig.data.bones.active = rig.data.bones[TIP]
    bpy.context.scene.fabrik_overlay.show = False  # its red lines of an error would show through the sidebar
    window, screen, area, region, ui_region = view3d()
    space = area.spaces.active
    space.show_region_ui = True
    space.overlay.show_axis_x = space.overlay.show_axis_y = False  # (red and green lines behind the sidebar)
    space.overlay.show_cursor = False
    with bpy.context.temp_override(window=window, screen=screen, area=area, region=region):
        result["view_all"] = sorted(bpy.ops.view3d.view_all(center=False))
    bpy.ops.object.mode_set(mode='POSE')
    return 0.3


def step_bone_polls():
    """Blender's own Bone > Inverse Kinematics panel and ours under it, polled in the Properties editor."""
    result["stage"] = "bone polls"
    window, screen, *_ = view3d()
    properties = next((a for a in screen.areas if a.type == 'PROPERTIES'), None)
    if properties is None:
        raise RuntimeError("no Properties editor in the default screen")
    space = properties.spaces.active
    if space.context != 'BONE':
        space.context = 'BONE'
        properties.tag_redraw()
        return None  # (the editor finds its bone when it redraws)
    with bpy.context.temp_override(window=window, screen=screen, area=properties,
                                   region=next(r for r in properties.regions if r.type == 'WINDOW')):
        result["bone_polls"] = {
            "parent": bool(bpy.types.BONE_PT_inverse_kinematics.poll(bpy.context)),
            "limits": bool(bpy.types.BONE_PT_fabrik_limits.poll(bpy.context)),
            "mode": bpy.context.object.mode, "bone": getattr(bpy.context.bone, "name", None),
        }
    if not all(result["bone_polls"].values()) and bone_polls["tries"] < 10:
        bone_polls["tries"] += 1
        properties.tag_redraw()
        return None
    return 0.2


bone_polls = {"tries": 0}


tab = {"presses": 0, "phase": "check"}


def step_fabrik_tab():
    """Cycle the sidebar tabs with Ctrl+Tab until the Status sub-panel draws (as tests/gui/gui_blender_driver.py)."""
    result["stage"] = "sidebar tab"
    window, _screen, _area, _region, ui_region = view3d()
    if ui_region.width <= 1:
        return None
    if tab["phase"] == "check":
        if result["drawn"].get("VIEW3D_PT_fabrik_status"):
            result["tab_presses"] = tab["presses"]
            return 0.3
        if tab["presses"] >= 8:
            raise RuntimeError("the FABRIK tab's Status sub-panel never drew")
        kit.next_sidebar_tab(window, ui_region)
        tab["presses"] += 1
        tab["phase"] = "redraw"
    else:
        result["drawn"].clear()
        ui_region.tag_redraw()
        tab["phase"] = "check"
    return None


def red_pixels(rgb):
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    return (r > 0.55) & (r - g > 0.2) & (r - b > 0.2)


def save_crop(rgba, x0: int, x1: int, path: str) -> None:
    """Save the window capture's columns x0 to x1 (the sidebar and the rig beside it)."""
    crop = rgba[:, x0:x1, :].copy()
    height, width = crop.shape[:2]
    image = bpy.data.images.new("panels_crop", width, height, alpha=True)
    image.pixels.foreach_set(crop.ravel())
    image.filepath_raw = path
    image.file_format = 'PNG'
    image.save()
    bpy.data.images.remove(image)


def make_state_steps(name, location, chain_length, expected):
    record: dict = {}

    def set_state():
        result["stage"] = f"{name}: set"
        rig = bpy.data.objects["Rig"]
        bpy.data.objects["Target"].location = location
        rig.fabrik.effectors[0].chain_length = chain_length
        switched = rig.fabrik.effectors.find(SWITCHED)
        if name == "switched" and switched < 0:
            effector = rig.fabrik.effectors.add()
            effector.name, effector.bone, effector.target = SWITCHED, TIP, bpy.data.objects["Target"]
            effector.switched = effector.switch_mute = True  # what a converted Rigify limb's switch writes
            rig.update_tag()
        elif name != "switched" and switched >= 0:
            rig.fabrik.effectors.remove(switched)
            rig.update_tag()
        window, screen, area, region, _ui_region = view3d()
        with bpy.context.temp_override(window=window, screen=screen, area=area, region=region):
            bpy.ops.view3d.view_all(center=False)  # (the rig and its target, wherever the target went)
        return POLL

    def wait_status():
        result["stage"] = f"{name}: wait for the status"
        status = addon().blender.rig.status.statuses.get("Rig")
        if status is None or addon().blender.ui.overlay_shapes.effector_status(status, 0) != expected:
            return None
        if (name == "switched") != (addon().blender.ui.overlay_shapes.effector_status(status, 1) == 'DISABLED'):
            return None
        if status.message.startswith("the effectors changed"):
            # A solve put off to "the next update" (bones left the chain): nothing else moves here, so the
            # add-on's own timer must ask for that update, or this wait runs out.
            if name not in result.setdefault("put_off_seen", []):
                result["put_off_seen"].append(name)
            return None
        result["drawn"].clear()
        result.pop("status_draw", None)
        view3d()[4].tag_redraw()
        return 0.2

    def wait_drawn():
        result["stage"] = f"{name}: wait for the sidebar"
        if "status_draw" not in result:
            view3d()[4].tag_redraw()
            return None
        return 0.3

    def take():
        result["stage"] = f"{name}: screenshot"
        window, screen, area, _region, ui_region = view3d()
        path = os.path.join(SHOT_DIR, f"panels_{name}.png")
        with bpy.context.temp_override(window=window, screen=screen, area=area):
            record["screenshot"] = sorted(bpy.ops.screen.screenshot(filepath=path))
        rgba = load_rgb(path)
        box = (ui_region.x, ui_region.y, ui_region.x + ui_region.width, ui_region.y + ui_region.height)
        sidebar = rgba[box[1]:box[3], box[0]:box[2], :3]
        red = red_pixels(sidebar)
        rows = red.any(axis=1)
        # Runs of rows holding red: one per red text line (or icon row).
        runs = int(rows[0]) + int(((rows[1:]) & ~rows[:-1]).sum())
        status = addon().blender.rig.status.statuses.get("Rig")
        result["states"][name] = {
            "status": addon().blender.ui.overlay_shapes.effector_status(status, 0), "message": status.message,
            "second": addon().blender.ui.overlay_shapes.effector_status(status, 1),
            "effector_message": status.effectors.get(0), "screenshot": record["screenshot"], "shot": path,
            "sidebar_box": list(box), "window_size": [rgba.shape[1], rgba.shape[0]],
            "red_in_sidebar": int(red.sum()), "red_line_runs": runs,
            "red_outside_sidebar": int(red_pixels(rgba[..., :3]).sum() - red.sum()),
            "drawn": dict(result["drawn"]), "status_draw": result.get("status_draw"),
        }
        if name == "missed":
            save_crop(rgba, max(0, ui_region.x - 420), ui_region.x + ui_region.width,
                      os.path.join(SHOT_DIR, "panels_blender34.png"))
        return POLL

    return [set_state, wait_status, wait_drawn, take]


menus = {"index": 0, "phase": "base", "ticks": 0}


def step_menus():
    """Open each preset menu over the viewport (wm.call_menu), capture the window before and after, and take
    the menu's width from the pixels that changed; Esc closes it. Runs again (None) until every menu is done."""
    result["stage"] = "preset menus"
    window, screen, area, region, _ui_region = view3d()
    middle = {"x": region.x + region.width // 3, "y": region.y + region.height // 2}
    if menus["ticks"] > 0:  # (let the UI redraw between the steps)
        menus["ticks"] -= 1
        return None
    if menus["phase"] == "base":  # (the mouse first, then a few redraws: a tooltip it left must close)
        window.event_simulate('MOUSEMOVE', 'NOTHING', **middle)
        menus["phase"], menus["ticks"] = "base shot", 5
        return None
    if menus["phase"] == "base shot":
        menus["base"] = os.path.join(SHOT_DIR, "menu_base.png")
        with bpy.context.temp_override(window=window, screen=screen, area=area):
            bpy.ops.screen.screenshot(filepath=menus["base"])
        menus["phase"], menus["ticks"] = "open", 3
        return None
    if menus["index"] >= len(MENUS):
        return 0.1
    name = MENUS[menus["index"]]
    if menus["phase"] == "open":
        with bpy.context.temp_override(window=window, screen=screen, area=area, region=region):
            bpy.ops.wm.call_menu(name=name)
        menus["phase"], menus["ticks"] = "shoot", 4
        return None
    path = os.path.join(SHOT_DIR, f"menu_{name}.png")
    with bpy.context.temp_override(window=window, screen=screen, area=area):
        bpy.ops.screen.screenshot(filepath=path)
    changed = (abs(load_rgb(path)[..., :3] - load_rgb(menus["base"])[..., :3]).max(axis=2) > 0.05)
    columns = changed.any(axis=0).nonzero()[0]
    result.setdefault("menu_widths", {})[name] = int(columns.max() - columns.min() + 1) if len(columns) else 0
    for value in ('PRESS', 'RELEASE'):
        window.event_simulate('ESC', value, **middle)
    menus["index"] += 1
    menus["phase"], menus["ticks"] = "open", 3
    return None


def pin_pixels(rgb):
    """Pixels of the overlay's pin colour (orange: more red than green by far, little blue)."""
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    return (r > 0.8) & (g > 0.35) & (g < 0.7) & (b < 0.3)


def make_pin_steps(name: str, pin: float):
    """The pinned state (the Pins sub-panel scrolled into view, the overlay's pin square at the held target) and
    the same without the pin, to count the square's pixels against."""

    def set_state():
        result["stage"] = f"{name}: set"
        rig = bpy.data.objects["Rig"]
        bpy.data.objects["Target"].location = STATES[0][1]
        effector = rig.fabrik.effectors[0]
        effector.chain_length = 0
        effector.pin, effector.pin_location = pin, PIN_AT
        options = bpy.context.scene.fabrik_overlay
        options.show = options.show_targets = True
        options.show_poles = options.show_reach = options.show_limits = options.show_readout = False
        options.show_trace = False
        rig.update_tag()
        window, screen, area, region, ui_region = view3d()
        with bpy.context.temp_override(window=window, screen=screen, area=area, region=ui_region):
            for _ in range(25):  # (a step of the mouse wheel each: the Pins sub-panel sits below Active Effector)
                bpy.ops.view2d.scroll_down()
        result["drawn"].clear()
        ui_region.tag_redraw()
        return POLL

    def wait():
        result["stage"] = f"{name}: wait"
        status = addon().blender.rig.status.statuses.get("Rig")
        if status is None or addon().blender.ui.overlay_shapes.effector_status(status, 0) != "REACHED":
            return None
        if not result["drawn"].get("VIEW3D_PT_fabrik_pins"):
            view3d()[4].tag_redraw()
            return None
        return 0.3

    def take():
        result["stage"] = f"{name}: screenshot"
        window, screen, area, _region, ui_region = view3d()
        path = os.path.join(SHOT_DIR, f"panels_{name}.png")
        with bpy.context.temp_override(window=window, screen=screen, area=area):
            shot = sorted(bpy.ops.screen.screenshot(filepath=path))
        rgba = load_rgb(path)
        viewport = rgba[:, :ui_region.x, :3]
        rig = bpy.data.objects["Rig"]
        evaluated = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
        tip = evaluated.matrix_world @ evaluated.pose.bones[TIP].tail
        result.setdefault("pins", {})[name] = {
            "screenshot": shot, "shot": path, "pin_pixels": int(pin_pixels(viewport).sum()),
            "tip": list(tip), "pins_drawn": bool(result["drawn"].get("VIEW3D_PT_fabrik_pins")),
            "drawn": dict(result["drawn"]),
        }
        if name == "pinned":
            save_crop(rgba, max(0, ui_region.x - 760), ui_region.x + ui_region.width,
                      os.path.join(SHOT_DIR, "pins_blender34.png"))
        return POLL

    return [set_state, wait, take]


def shoot_sidebar(name: str, picture: str) -> list:
    """Capture the window as panels_<name>.png and its sidebar with the viewport beside it as `picture`; the
    screenshot operator's result."""
    result["stage"] = f"{name}: screenshot"
    window, screen, area, _region, ui_region = view3d()
    path = os.path.join(SHOT_DIR, f"panels_{name}.png")
    with bpy.context.temp_override(window=window, screen=screen, area=area):
        shot = sorted(bpy.ops.screen.screenshot(filepath=path))
    save_crop(load_rgb(path), max(0, ui_region.x - 760), ui_region.x + ui_region.width,
              os.path.join(SHOT_DIR, picture))
    return shot


def make_floor_steps():
    """The floor state: a plane at FLOOR_AT under the rig's target (lifted onto it), its object in the Solver
    sub-panel's Floor field (scrolled into view), the chain held above it."""

    def set_state():
        result["stage"] = "floor: set"
        rig = bpy.data.objects["Rig"]
        effector = rig.fabrik.effectors[0]
        effector.pin = 0.0
        mesh = bpy.data.meshes.new("Floor")
        mesh.from_pydata([(-1.5, -1.5, 0.0), (1.5, -1.5, 0.0), (1.5, 1.5, 0.0), (-1.5, 1.5, 0.0)], [], [(0, 1, 2, 3)])
        floor = bpy.data.objects.new("Floor", mesh)
        bpy.context.scene.collection.objects.link(floor)
        floor.location = (0.0, 0.0, FLOOR_AT)
        bpy.data.objects["Target"].location = (0.9, 0.3, 0.0)
        rig.fabrik.floor = floor
        rig.update_tag()
        window, screen, area, _region, ui_region = view3d()
        with bpy.context.temp_override(window=window, screen=screen, area=area, region=ui_region):
            for _ in range(10):
                bpy.ops.view2d.scroll_down()
        result["drawn"].clear()
        ui_region.tag_redraw()
        return POLL

    def wait():
        result["stage"] = "floor: wait"
        status = addon().blender.rig.status.statuses.get("Rig")
        if status is None or addon().blender.ui.overlay_shapes.effector_status(status, 0) != "REACHED":
            return None
        if not result["drawn"].get("VIEW3D_PT_fabrik_solver"):
            view3d()[4].tag_redraw()
            return None
        return 0.3

    def take():
        shot = shoot_sidebar("floor", "floor_blender34.png")
        rig = bpy.data.objects["Rig"]
        evaluated = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
        world = evaluated.matrix_world
        heights = [(world @ pb.tail).z - FLOOR_AT for pb in evaluated.pose.bones]
        result["floor"] = {
            "screenshot": shot, "lowest": min(heights), "tip": list(world @ evaluated.pose.bones[TIP].tail),
            "solver_drawn": bool(result["drawn"].get("VIEW3D_PT_fabrik_solver")),
            "message": addon().blender.rig.status.statuses["Rig"].message,
        }
        return POLL

    return [set_state, wait, take]


def make_retarget_steps():
    """The retarget state: a clip (`walk_clip.keyed_clip`) put on a rig of other proportions with the Retarget
    sub-panel's operators, the rig active and the sub-panel scrolled into view."""

    def set_state():
        result["stage"] = "retarget: set"
        import walk_clip

        clip = walk_clip.keyed_clip()
        stocky = walk_clip.stocky_rig()
        clip.location.x = -1.5
        bpy.ops.object.mode_set(mode='OBJECT')
        view_layer = bpy.context.view_layer
        for obj in view_layer.objects:
            obj.select_set(obj == stocky)
        view_layer.objects.active = stocky
        stocky.fabrik.retarget_source = clip
        window, screen, area, region, ui_region = view3d()
        with bpy.context.temp_override(window=window, screen=screen, area=area, region=region):
            result["retarget_map"] = sorted(bpy.ops.fabrik.retarget_map())
            result["retarget_run"] = sorted(bpy.ops.fabrik.retarget(find_contacts=False, bake=False))
            bpy.ops.view3d.view_all(center=False)
        with bpy.context.temp_override(window=window, screen=screen, area=area, region=ui_region):
            for _ in range(120):
                bpy.ops.view2d.scroll_down()
        bpy.context.scene.frame_set(12)
        result["drawn"].clear()
        ui_region.tag_redraw()
        return POLL

    def wait():
        result["stage"] = "retarget: wait"
        if not result["drawn"].get("VIEW3D_PT_fabrik_retarget"):
            view3d()[4].tag_redraw()
            return None
        return 0.5

    def scroll():
        result["stage"] = "retarget: scroll"
        window, screen, area, _region, ui_region = view3d()
        with bpy.context.temp_override(window=window, screen=screen, area=area, region=ui_region):
            for _ in range(60):  # (again, once the sidebar has drawn the rig's longer panels)
                bpy.ops.view2d.scroll_down()
        ui_region.tag_redraw()
        return 0.5

    def take():
        shot = shoot_sidebar("retarget", "retarget_blender34.png")
        stocky = bpy.data.objects["Stocky"]
        status = addon().blender.rig.status.statuses.get("Stocky")
        result["retarget"] = {
            "screenshot": shot, "panel_drawn": bool(result["drawn"].get("VIEW3D_PT_fabrik_retarget")),
            "effectors": sorted(e.name for e in stocky.fabrik.effectors),
            "refusal": addon().blender.retarget.setup.refusal(stocky),
            "reached": None if status is None else sorted(status.reached.items()),
        }
        return POLL

    return [set_state, wait, scroll, take]


def make_root_steps():
    """The root state: a rig of other proportions whose hand is pulled beyond its arm, feet held, its pelvis
    moving out of reach (Root sub-panel, scrolled into view), the hand reaching."""

    def set_state():
        result["stage"] = "root: set"
        import walk_clip

        from samples import rigbuild

        body = walk_clip.stocky_rig()
        body.name = "Body"
        body.location = (4.0, 0.0, 0.0)
        for side, x in (("l", 1.0), ("r", -1.0)):
            foot = rigbuild.make_target(f"Body foot {side}", (4.0 + 0.12 * x, 0.0, 0.15), size=0.05)
            rigbuild.add_effector(body, f"calf_{side}", foot, chain_length=2)
        hand = rigbuild.make_target("Body hand", (4.14, -0.99, 1.0), size=0.05)
        rigbuild.add_effector(body, "lowerarm_l", hand, chain_length=2)
        body.fabrik.root_bone = "pelvis"
        body.fabrik.root_mode = 'OUT_OF_REACH'
        body.fabrik.live = True
        bpy.ops.object.mode_set(mode='OBJECT')
        view_layer = bpy.context.view_layer
        for obj in view_layer.objects:
            obj.select_set(obj == body)
            obj.hide_set(not obj.name.startswith("Body"))  # (the other states' rigs out of the picture)
        view_layer.objects.active = body
        window, screen, area, region, ui_region = view3d()
        with bpy.context.temp_override(window=window, screen=screen, area=area, region=region):
            bpy.ops.view3d.view_selected()
        with bpy.context.temp_override(window=window, screen=screen, area=area, region=ui_region):
            for _ in range(40):
                bpy.ops.view2d.scroll_down()
        result["drawn"].clear()
        ui_region.tag_redraw()
        return POLL

    def wait():
        result["stage"] = "root: wait"
        status = addon().blender.rig.status.statuses.get("Body")
        if status is None or not status.reached.get(2):
            return None
        if not result["drawn"].get("VIEW3D_PT_fabrik_root"):
            view3d()[4].tag_redraw()
            return None
        return 0.3

    def take():
        shot = shoot_sidebar("root", "root_blender34.png")
        body = bpy.data.objects["Body"]
        evaluated = body.evaluated_get(bpy.context.evaluated_depsgraph_get())
        tip = evaluated.matrix_world @ evaluated.pose.bones["lowerarm_l"].tail
        result["root"] = {
            "screenshot": shot, "panel_drawn": bool(result["drawn"].get("VIEW3D_PT_fabrik_root")),
            "hand_miss": (tip - bpy.data.objects["Body hand"].matrix_world.translation).length,
            "pelvis": list(body.pose.bones["pelvis"].location),
            "message": addon().blender.rig.status.statuses["Body"].message,
        }
        return POLL

    return [set_state, wait, take]


def step_copy_report():
    """Copy Report in the running window: what it puts on Blender's clipboard."""
    result["stage"] = "copy report"
    window, screen, area, region, _ui_region = view3d()
    bpy.context.window_manager.clipboard = ""
    with bpy.context.temp_override(window=window, screen=screen, area=area, region=region):
        result["copy_report"] = sorted(bpy.ops.fabrik.copy_report())
    result["clipboard"] = bpy.context.window_manager.clipboard
    return 0.1


def step_finish():
    result["stage"] = "done"
    finish()
    return None


steps = [step_setup, step_bone_polls, step_fabrik_tab]
for state in STATES:
    steps += make_state_steps(*state)
steps += make_pin_steps("pinned", 1.0) + make_pin_steps("unpinned", 0.0)
steps += [step_menus, step_copy_report] + make_floor_steps() + make_retarget_steps() + make_root_steps() + [step_finish]
session.run(steps)
