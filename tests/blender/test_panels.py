# SPDX-License-Identifier: GPL-3.0-or-later
"""The add-on's panels in Blender's idiom: split label/value layout with keyframe dots, sub-panels, a status row
per effector with the right icon and red for misses and errors (wrapped so the whole message can be read),
invalid fields in red, the list's name and status icon, and picking an effector selecting its bone.

Panels cannot draw in background mode (there is no UI), so their draw functions are called with `TreeLayout`,
a stand-in for UILayout that records each call with the alert and split state of the layout it was made in.
Everything else is the real bpy: real rigs, real solves, the registered panel classes.
"""

from __future__ import annotations

import types
from pathlib import Path

import bpy
import pytest
from blender_scenes import chain_rig, rigbuild
from hypothesis import given
from hypothesis import strategies as st

from fabrik_addon.blender.rig.status import RigStatus, statuses
import fabrik_addon
from fabrik_addon.blender.ui import bone_panel, overlay_shapes, panels, presets, report, setup_ops, wrapping

pytestmark = pytest.mark.usefixtures("clean_scene")

SUBPANELS = ("VIEW3D_PT_fabrik_status", "VIEW3D_PT_fabrik_effector", "VIEW3D_PT_fabrik_pins", "VIEW3D_PT_fabrik_solver",
             "VIEW3D_PT_fabrik_retarget",
             "VIEW3D_PT_fabrik_testing")
BLENDER34_BONE_UI = Path("/usr/share/blender/scripts/startup/bl_ui/properties_data_bone.py")


class TreeLayout:
    """A stand-in for UILayout (panels cannot draw in background mode): every call is recorded with whether
    the layout it was made in (or one of its parents) is red (`alert`) and splits labels from values."""

    def __init__(self, log: list, parent: TreeLayout | None = None) -> None:
        self.log, self.parent = log, parent
        self.alert, self.active, self.enabled = False, True, True
        self.use_property_split = self.use_property_decorate = None

    def inherited(self, name: str):
        layout = self
        while layout is not None:
            value = layout.__dict__[name]
            if value:
                return value
            layout = layout.parent
        return None

    def nearest(self, name: str):
        """The value this layout or its nearest parent set (None: none did), as Blender inherits layout flags."""
        layout = self
        while layout is not None:
            if layout.__dict__[name] is not None:
                return layout.__dict__[name]
            layout = layout.parent
        return None

    def greyed(self) -> bool:
        """Whether this layout or one of its parents is inactive (drawn greyed out)."""
        layout = self
        while layout is not None:
            if not layout.__dict__["active"]:
                return True
            layout = layout.parent
        return False

    def __getattr__(self, name: str):
        if name in {"row", "column", "box", "split", "grid_flow", "column_flow"}:
            return lambda *args, **kwargs: TreeLayout(self.log, self)

        def record(*args, **kwargs):
            self.log.append(types.SimpleNamespace(
                call=name, args=args, kwargs=kwargs, alert=bool(self.inherited("alert")), greyed=self.greyed(),
                split=bool(self.nearest("use_property_split")),
                decorate=bool(self.nearest("use_property_decorate")),
            ))
            return TreeLayout(self.log, self)

        return record


class Log(list):
    """Recorded calls, and the stand-in layout they were made on (`root`)."""

    root: TreeLayout


def context_for(obj, width: int | None = None, **extra):
    """What a panel's draw reads from its context; `width`: the region's width in pixels (None: unknown)."""
    region = None if width is None else types.SimpleNamespace(width=width)
    return types.SimpleNamespace(object=obj, scene=bpy.context.scene, region=region,
                                 preferences=bpy.context.preferences, **extra)


def draw(panel: type, context) -> list:
    log = Log()
    assert panel.poll(context), f"{panel.__name__} does not show"
    root = TreeLayout(log)
    panel.draw(types.SimpleNamespace(layout=root), context)
    log.root = root  # (a list subclass below keeps the layout the panel was given)
    return log


def labels(log: list) -> list:
    return [entry for entry in log if entry.call == "label"]


def props(log: list) -> dict:
    """Drawn property name -> its entry (prop and prop_search)."""
    return {entry.args[1]: entry for entry in log if entry.call in {"prop", "prop_search"}}


# -- the wrap function ---------------------------------------------------------------------------------------

def test_wrap_breaks_at_spaces_and_keeps_every_word():
    text = "misses by 2: target out of reach, stopped after 50 iterations"
    lines = wrapping.wrap(text, 20)
    assert lines == ["misses by 2: target", "out of reach,", "stopped after 50", "iterations"]
    assert all(len(line) <= 20 for line in lines)


def test_wrap_cuts_a_word_longer_than_the_line_and_keeps_short_text_whole():
    assert wrapping.wrap("bone 'a_very_long_bone_name_indeed' is missing", 10) == [
        "bone", "'a_very_lo", "ng_bone_na", "me_indeed'", "is missing"]
    assert wrapping.wrap("ab abcdefgh", 4) == ["ab", "abcd", "efgh"]
    assert wrapping.wrap("reached", 40) == ["reached"]
    assert wrapping.wrap("", 40) == [""] and wrapping.wrap("   ", 40) == [""]
    assert wrapping.wrap("a b", 0) == ["a", "b"]  # (a width under 1 counts as 1)


@given(st.text(alphabet=st.sampled_from("ab -:'"), max_size=120), st.integers(1, 60))
def test_wrap_lines_fit_and_give_the_words_back(text, chars):
    lines = wrapping.wrap(text, chars)
    assert lines and all(len(line) <= chars for line in lines)
    assert "".join(lines).replace(" ", "") == text.replace(" ", "")


def test_the_line_width_follows_the_region_and_the_interface_scale():
    """The room for a line is the region's width less the margins, scaled as the interface is, measured in pixels
    of the interface font (a line of wide letters holds fewer of them); characters where no region is known."""
    preferences = bpy.context.preferences
    scale = getattr(preferences.system, "ui_scale", 0.0) or preferences.view.ui_scale
    unknown = wrapping.room_for(types.SimpleNamespace(region=None))
    assert unknown.width == wrapping.DEFAULT_CHARS and unknown.measure("abc") == 3
    wide = wrapping.room_for(types.SimpleNamespace(region=types.SimpleNamespace(width=600), preferences=preferences))
    narrow = wrapping.room_for(types.SimpleNamespace(region=types.SimpleNamespace(width=300), preferences=preferences))
    assert wide.width == 600 - wrapping.MARGIN_PIXELS * scale and narrow.width == 300 - wrapping.MARGIN_PIXELS * scale
    assert wide.measure("WWWW") > wide.measure("iiii") > 0  # pixels of the font, not characters
    assert len(narrow.lines("W" * 60)) > len(narrow.lines("i" * 60))
    tiny = wrapping.room_for(types.SimpleNamespace(region=types.SimpleNamespace(width=40), preferences=preferences))
    assert tiny.width == wrapping.MIN_PIXELS * scale


# -- registration --------------------------------------------------------------------------------------------

def test_the_sidebar_is_a_panel_with_sub_panels_and_the_limits_sit_under_blenders_ik_panel():
    for name in SUBPANELS:
        panel = getattr(bpy.types, name)
        assert panel.bl_parent_id == "VIEW3D_PT_fabrik" and panel.bl_category == "FABRIK", name
    assert bpy.types.VIEW3D_PT_fabrik_testing.bl_options == {'DEFAULT_CLOSED'}
    assert bpy.types.BONE_PT_fabrik_limits.bl_parent_id == "BONE_PT_inverse_kinematics"
    parent = bpy.types.BONE_PT_inverse_kinematics  # Blender's own panel, in this bpy
    assert parent.bl_context == bone_panel.BONE_PT_fabrik_limits.bl_context == "bone"
    if BLENDER34_BONE_UI.is_file():  # the same id in Debian's Blender 3.4 (the GUI test checks it live)
        assert "class BONE_PT_inverse_kinematics(" in BLENDER34_BONE_UI.read_text()


# -- the panels ----------------------------------------------------------------------------------------------

#: Names and choices drawn under their label across the panel's width (the default sidebar would cut them
#: beside a label); none of them can be keyed.
STACKED = {"name", "bone", "target", "subtarget", "pole_target", "pole_subtarget", "solver", "start", "floor",
           "retarget_source", "source", "target"}


def test_every_panel_splits_labels_from_values_and_has_keyframe_dots():
    rig, _target = chain_rig()
    bpy.context.view_layer.update()
    context = context_for(rig, 300, bone=rig.data.bones["bone1"], active_pose_bone=rig.pose.bones["bone1"])
    for panel in (bpy.types.VIEW3D_PT_fabrik, *(getattr(bpy.types, n) for n in SUBPANELS), bone_panel.BONE_PT_fabrik_limits):
        log = draw(panel, context)
        assert log.root.use_property_split and log.root.use_property_decorate, panel.__name__
        drawn = [e for e in log if e.call in {"prop", "prop_search"} and e.args[1] not in {"enabled"}]
        assert drawn or panel.__name__ in {"VIEW3D_PT_fabrik_status", "VIEW3D_PT_fabrik_testing"}, panel.__name__
        for entry in drawn:
            if entry.args[1] in STACKED:
                assert not entry.split and entry.kwargs.get("text") == "", f"{panel.__name__}: {entry.args[1]}"
                continue
            assert entry.split and entry.decorate, f"{panel.__name__}: {entry.args[1]} is not in a split layout"


def test_the_main_panel_has_the_list_live_solving_and_the_sub_panels_the_rest():
    rig, target = chain_rig()
    rig.fabrik.effectors[0].pole_target = rigbuild.make_target("Pole", (0.0, -2.0, 1.0))
    bpy.context.view_layer.update()
    context = context_for(rig, 300)
    main = draw(bpy.types.VIEW3D_PT_fabrik, context)
    assert any(e.call == "template_list" and e.args[0] == "FABRIK_UL_effectors" for e in main)
    assert {"live", "influence"} <= set(props(main))
    effector = draw(bpy.types.VIEW3D_PT_fabrik_effector, context)
    assert {"name", "bone", "target", "chain_length", "weight", "influence", "use_stretch", "use_rotation",
            "rotation_weight", "pole_target", "pole_angle"} <= set(props(effector))
    solver = draw(bpy.types.VIEW3D_PT_fabrik_solver, context)
    assert {"solver", "iterations", "tolerance", "start"} <= set(props(solver))
    assert any(e.call == "menu" and e.args[0] == presets.FABRIK_MT_rig_settings_presets.__name__ for e in solver)
    testing = draw(bpy.types.VIEW3D_PT_fabrik_testing, context)
    operators = [e.args[0] for e in testing if e.call == "operator"]
    assert operators.count("fabrik.target_motion") == 2 and "fabrik.compare_solvers" in operators
    # The test buttons no longer sit among the effector's settings.
    assert not any(e.call == "operator" and e.args[0] in {"fabrik.target_motion", "fabrik.compare_solvers"}
                   for e in main + effector + solver)


def status_rows(rig, width: int = 300) -> list:
    return labels(draw(bpy.types.VIEW3D_PT_fabrik_status, context_for(rig, width)))


def test_a_reached_effector_gets_a_check_mark_and_no_red():
    rig, _target = chain_rig()
    rig.fabrik.effectors[0].name = "Hand"
    bpy.context.view_layer.update()
    assert statuses["Rig"].reached[0]
    rows = status_rows(rig)
    assert rows[0].kwargs["icon"] == 'CHECKMARK' and rows[0].kwargs["text"].startswith("reached")
    hand = next(r for r in rows if r.kwargs["text"].startswith("Hand: reached"))
    assert hand.kwargs["icon"] == 'CHECKMARK'
    assert not any(r.alert for r in rows)


def test_a_miss_is_a_warning_without_red_with_the_whole_message_wrapped_to_the_sidebar():
    """A miss is a warning, as Blender's panels show one (the triangle, no red) and the viewport draws it (yellow):
    red is for what cannot be solved."""
    rig, target = chain_rig()
    rig.fabrik.effectors[0].name = "Hand"
    target.location = (0.0, 6.0, 0.0)  # the four bones reach 4
    bpy.context.view_layer.update()
    status = statuses["Rig"]
    assert status.missed
    width = 220  # narrow: every message takes more than one line
    room = wrapping.room_for(context_for(rig, width))
    rows = status_rows(rig, width)
    assert all(room.measure(r.kwargs["text"]) <= room.width for r in rows)
    assert rows[0].kwargs["icon"] == 'ERROR' and not rows[0].alert
    text = " ".join(r.kwargs["text"] for r in rows)
    assert status.message in text, "the rig's whole message is there, over several lines"
    assert f"Hand: {status.effectors[0]}" in text and "misses by 2: target out of reach" in text
    assert not any(r.alert for r in rows)
    assert [r.kwargs["icon"] for r in rows].count('ERROR') == 2  # one per message; the rest are indented
    assert all(r.kwargs["icon"] in {'ERROR', 'BLANK1'} for r in rows)
    assert "error" not in text.lower(), "a distance is a miss"


def test_a_refused_effector_gets_a_red_cancel_sign_and_its_reason():
    rig, _target = chain_rig()
    rig.fabrik.effectors[0].chain_length = 9  # longer than the rig
    bpy.context.view_layer.update()
    status = statuses["Rig"]
    assert not status.ok, status
    rows = status_rows(rig)
    assert rows[0].kwargs["icon"] == 'CANCEL' and rows[0].alert
    text = " ".join(r.kwargs["text"] for r in rows)
    assert status.message in text
    assert all(r.alert for r in rows)


def test_a_disabled_effector_and_a_rig_not_solved_yet_are_not_red():
    rig, _target = chain_rig(live=False)
    rows = status_rows(rig)
    assert rows[0].kwargs["text"] == "Live solving off: the rig plays its own keys" and not any(r.alert for r in rows)
    rig.fabrik.effectors[0].enabled = False
    rig.fabrik.live = True
    bpy.context.view_layer.update()
    row = next(r for r in status_rows(rig) if "disabled" in r.kwargs["text"])
    assert row.kwargs["icon"] == 'HIDE_ON' and not row.alert and row.greyed


def test_an_effector_the_rigs_switch_turned_off_looks_off_not_broken():
    """A converted Rigify limb has two effectors, one switched off by the rig's pole switch: greyed with an eye
    icon in the Status lines, the list and Active Effector, never red, and not drawn in the viewport."""
    rig, target = chain_rig()
    second = rigbuild.add_effector(rig, "bone3", target)
    second.name = "With pole"
    second.switched, second.switch_mute = True, True  # what the switch's driver writes
    rig.update_tag()
    bpy.context.view_layer.update()
    status = statuses["Rig"]
    assert status.ok and status.kind(1) == 'DISABLED' and status.kind(0) == 'REACHED', status.message
    row = next(r for r in status_rows(rig) if r.kwargs["text"].startswith("With pole"))
    assert "disabled by the rig's switch" in row.kwargs["text"]
    assert row.kwargs["icon"] == 'HIDE_ON' and not row.alert and row.greyed
    log: list = []
    panels.FABRIK_UL_effectors.draw_item(types.SimpleNamespace(layout_type='DEFAULT'), None, TreeLayout(log),
                                     rig.fabrik, second, 0, None, "", 1)
    assert [(e.kwargs["icon"], e.alert, e.greyed) for e in labels(log)] == [('HIDE_ON', False, True)]
    rig.fabrik.active_effector = 1
    fields = props(draw(bpy.types.VIEW3D_PT_fabrik_effector, context_for(rig, 300)))
    assert fields["bone"].greyed and not fields["bone"].alert
    views = overlay_shapes.read_effectors(rig, bpy.context.evaluated_depsgraph_get(), status)
    assert [view.index for view in views] == [0]  # one readout at the shared tip, not two on top of each other


def test_a_status_with_nothing_solved_is_no_success():
    assert panels.rig_state(RigStatus(message="the effectors changed: solving again at the next update")) == 'NONE'
    assert panels.rig_state(RigStatus(message="reached", reached={0: True})) == 'REACHED'
    assert panels.rig_state(RigStatus(message="x", reached={0: True, 1: False})) == 'MISSED'
    assert panels.rig_state(RigStatus(message="x", ok=False, reached={0: True})) == 'ERROR'


def test_fields_that_name_nothing_are_red_and_the_others_are_not():
    rig, target = chain_rig()
    other = rigbuild.make_armature("Other", rigbuild.chain_bones(2, 1.0))
    bpy.context.view_layer.update()
    context = context_for(rig, 300)
    fields = props(draw(bpy.types.VIEW3D_PT_fabrik_effector, context))
    assert not any(fields[name].alert for name in ("bone", "target", "chain_length", "name"))
    effector = rig.fabrik.effectors[0]
    effector.bone = "gone"
    fields = props(draw(bpy.types.VIEW3D_PT_fabrik_effector, context))
    assert fields["bone"].alert and not fields["target"].alert
    effector.bone = "bone3"
    effector.chain_length = 5  # one more than the bones up to the root
    fields = props(draw(bpy.types.VIEW3D_PT_fabrik_effector, context))
    assert fields["chain_length"].alert and not fields["bone"].alert
    effector.chain_length = 4
    effector.target = None
    fields = props(draw(bpy.types.VIEW3D_PT_fabrik_effector, context))
    assert fields["target"].alert and not fields["bone"].alert and not fields["chain_length"].alert
    effector.target = other
    effector.subtarget = "bone1"
    fields = props(draw(bpy.types.VIEW3D_PT_fabrik_effector, context))
    assert not fields["subtarget"].alert and not fields["target"].alert
    effector.subtarget = "renamed away"
    fields = props(draw(bpy.types.VIEW3D_PT_fabrik_effector, context))
    assert fields["subtarget"].alert and not fields["target"].alert


def test_the_list_row_shows_the_name_and_a_status_icon():
    rig, target = chain_rig()
    rig.fabrik.effectors[0].name = "Hand"
    bpy.context.view_layer.update()

    def row():
        log: list = []
        panels.FABRIK_UL_effectors.draw_item(types.SimpleNamespace(layout_type='DEFAULT'), None, TreeLayout(log),
                                         rig.fabrik, rig.fabrik.effectors[0], 0, None, "", 0)
        return log

    log = row()
    name = props(log)["name"]
    assert name.kwargs == {"text": "", "emboss": False} and not name.alert
    assert [(e.kwargs["icon"], e.alert) for e in labels(log)] == [('CHECKMARK', False)]
    target.location = (0.0, 6.0, 0.0)
    bpy.context.view_layer.update()
    assert [(e.kwargs["icon"], e.alert) for e in labels(row())] == [('ERROR', False)]  # (a miss: a warning)
    rig.fabrik.effectors[0].bone = "gone"
    bpy.context.view_layer.update()
    log = row()
    assert props(log)["name"].alert
    assert [(e.kwargs["icon"], e.alert) for e in labels(log)] == [('CANCEL', True)]


def test_picking_an_effector_in_the_list_makes_its_bone_the_active_one_without_bouncing_back():
    bones = [("root", (0, 0, 0), (0, 0, 1), None, False),
             ("left", (0, 0, 1), (1, 0, 2), "root", True), ("right", (0, 0, 1), (-1, 0, 2), "root", True)]
    rig = rigbuild.make_armature("Rig", bones)
    rigbuild.add_effector(rig, "left", rigbuild.make_target("L", (1.0, 0.0, 2.0)))
    rigbuild.add_effector(rig, "right", rigbuild.make_target("R", (-1.0, 0.0, 2.0)))
    rig.fabrik.live = True
    bpy.context.view_layer.objects.active = rig
    bpy.ops.object.mode_set(mode='POSE')
    bpy.context.view_layer.update()
    rig.fabrik.active_effector = 1  # as a click in the list
    assert rig.data.bones.active.name == "right"
    bpy.context.view_layer.update()  # the selection handler runs and sees the new active bone
    bpy.context.view_layer.update()
    assert rig.fabrik.active_effector == 1 and rig.data.bones.active.name == "right"
    right = rig.pose.bones["right"]
    assert right.select if hasattr(right, "select") else right.bone.select
    rig.fabrik.active_effector = 0
    bpy.context.view_layer.update()
    assert rig.data.bones.active.name == "left" and rig.fabrik.active_effector == 0
    # The other way still works: the active bone picks its effector.
    rig.data.bones.active = rig.data.bones["right"]
    rig.update_tag()
    bpy.context.view_layer.update()
    assert rig.fabrik.active_effector == 1 and rig.data.bones.active.name == "right"


def test_picking_an_effector_that_shares_its_tip_bone_leaves_the_selection_alone():
    rig, _target = chain_rig()
    rigbuild.add_effector(rig, "bone3", rigbuild.make_target("Second", (0.0, 1.0, 3.0)))
    bpy.ops.object.mode_set(mode='POSE')
    rig.data.bones.active = rig.data.bones["bone1"]
    rig.fabrik.active_effector = 1  # selecting bone3 would make the handler pick effector 0 instead
    bpy.context.view_layer.update()
    assert rig.fabrik.active_effector == 1 and rig.data.bones.active.name == "bone1"


def test_the_sub_panels_show_the_rig_while_its_target_is_the_active_object():
    rig, target = chain_rig()
    bpy.context.view_layer.update()
    context = context_for(target, 300)
    assert setup_ops.rig_for_panel(context) == rig
    main = draw(bpy.types.VIEW3D_PT_fabrik, context)
    assert any(e.call == "label" and e.kwargs.get("text") == "Rig: Rig" for e in main)
    for name in SUBPANELS:
        draw(getattr(bpy.types, name), context)
    assert not bpy.types.VIEW3D_PT_fabrik_status.poll(context_for(rigbuild.make_target("Stranger", (3, 0, 0))))


def test_the_limits_sub_panel_draws_every_ik_setting_and_help_that_fits():
    rig, _target = chain_rig(count=3)
    rigbuild.set_limits(rig, "bone1", x=(-60, 60))
    width = 320
    context = context_for(rig, width, bone=rig.data.bones["bone1"], active_pose_bone=rig.pose.bones["bone1"])
    log = draw(bone_panel.BONE_PT_fabrik_limits, context)
    expected = {f"{kind}_{axis}" for kind in ("lock_ik", "use_ik_limit", "ik_min", "ik_max", "ik_stiffness")
                for axis in "xyz"} | {"ik_stretch"}
    drawn = props(log)
    assert expected <= set(drawn)
    assert all(entry.args[0] == rig.pose.bones["bone1"] for entry in drawn.values())
    room = wrapping.room_for(context)
    texts = [e.kwargs["text"] for e in labels(log)]
    assert all(room.measure(text) <= room.width for text in texts)
    assert " ".join(bone_panel.LIMITS_HELP.split()) in " ".join(texts), "the whole help, wrapped"
    assert any(text.startswith("In the chain of") for text in texts)
    assert any(e.call == "menu" and e.args[0] == presets.FABRIK_MT_bone_limits_presets.__name__ for e in log)


def test_the_status_panel_ends_with_copy_report_and_the_report_says_what_a_bug_report_needs():
    """Copy Report sits at the foot of the Status sub-panel; its text (the clipboard is the GUI test's) holds the
    versions, every setting of the rig and its effectors, and the status lines as the panel says them."""
    rig, target = chain_rig()
    rig.fabrik.effectors[0].name = "Hand"
    target.location = (0.0, 6.0, 0.0)  # out of reach: a miss, said in the status
    bpy.context.view_layer.update()
    log = draw(bpy.types.VIEW3D_PT_fabrik_status, context_for(rig, 300))
    assert [e.args[0] for e in log if e.call == "operator"] == ["fabrik.copy_report"]
    text = report.report_text(rig)
    first = text.splitlines()[0]
    assert first.startswith(f"FABRIK IK {fabrik_addon.__version__}; Blender {bpy.app.version_string}"), first
    assert "Rig 'Rig': 4 bones" in text
    for setting in ("solver=", "iterations=", "tolerance=", "start=", "live=True", "influence="):
        assert setting in text, setting
    assert "Effector 1 'Hand': enabled=True, bone='bone3', target='Target'" in text, text
    assert f"Status: {statuses['Rig'].message}" in text
    assert "Hand: " in text and "[missed]" in text, text
    assert bpy.ops.fabrik.copy_report.get_rna_type().description.startswith("Copy what a problem report needs")
