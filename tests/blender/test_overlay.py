# SPDX-License-Identifier: GPL-3.0-or-later
"""The viewport overlay's geometry in the real bpy module (background mode: nothing is drawn, the builders are
plain functions), and that background runs never add its draw handlers."""

from __future__ import annotations

import logging
import math
import types

import bpy
import pytest
from blender_scenes import chain_rig, rigbuild, target_world, tip_world
from mathutils import Euler, Vector

from fabrik_addon.blender import solve
from fabrik_addon.blender.rig import animdata, compat, memory
from fabrik_addon.blender.rig.status import statuses
from fabrik_addon.blender.ui import overlay, overlay_shapes

pytestmark = pytest.mark.usefixtures("clean_scene")

ALL = types.SimpleNamespace(show_targets=True, show_poles=True, show_reach=True, show_limits=True,
                            show_trace=True, show_readout=True)


def solved(rig):
    """Solve the rig once (as live solving does) and return its status."""
    depsgraph = bpy.context.evaluated_depsgraph_get()
    solve.solve_object(rig, depsgraph)
    bpy.context.view_layer.update()
    return statuses[rig.name]


def drawing_of(rig, options=ALL, **kwargs) -> overlay_shapes.Drawing:
    return overlay_shapes.build(rig, bpy.context.evaluated_depsgraph_get(), statuses.get(rig.name), options, **kwargs)


def close(a, b, tol=1e-5) -> bool:
    return (Vector(a) - Vector(b)).length <= tol


def test_register_in_background_adds_no_draw_handler(monkeypatch):
    """bpy.app.background: the add-on is registered (the clean_scene fixture) without draw handlers, and
    registering the overlay again does not call draw_handler_add."""
    assert bpy.app.background
    assert overlay._handles == []
    calls = []
    monkeypatch.setattr(overlay.bpy.types.SpaceView3D, "draw_handler_add",
                        lambda *args: calls.append(args), raising=True)
    overlay.unregister()
    overlay.register()
    assert calls == [] and overlay._handles == []
    assert hasattr(bpy.context.scene, "fabrik_overlay")


def test_tip_to_target_segment_joins_the_evaluated_tip_and_target_in_the_reached_colour():
    rig, target = chain_rig(count=4, target_at=(1.5, 0.0, 2.5), live=False)
    status = solved(rig)
    assert status.reached == {0: True}
    lines = drawing_of(rig).of('target')
    assert len(lines) == 1
    line = lines[0]
    assert close(line.a, tip_world(rig, "bone3"))
    assert close(line.b, target_world(target))
    assert line.color == overlay_shapes.STATUS_COLORS['REACHED']
    assert line.owner == 0
    markers = drawing_of(rig).of('marker')  # a cross round the target, in the same colour
    assert len(markers) == 3 and all(m.color == line.color for m in markers)
    assert all(close((m.a + m.b) / 2, target_world(target)) for m in markers)
    assert all(abs((m.b - m.a).length - 2 * overlay_shapes.MARKER_SIZE * 4.0) < 1e-5 for m in markers)


def test_status_colours_missed_error_and_not_solved():
    rig, target = chain_rig(count=4, target_at=(0.0, 6.0, 2.0), live=False)  # reach 4: out of reach
    assert overlay_shapes.build(rig, None, None, ALL).of('target')[0].color == overlay_shapes.STATUS_COLORS['NONE']
    status = solved(rig)
    assert status.reached == {0: False}
    line = drawing_of(rig).of('target')[0]
    assert line.color == overlay_shapes.STATUS_COLORS['MISSED']
    assert close(line.a, tip_world(rig, "bone3")) and close(line.b, target_world(target))
    rig.fabrik.effectors[0].chain_length = 9  # longer than the rig: the effector cannot be solved
    status = solved(rig)
    assert 0 not in status.reached and 0 in status.effectors
    drawing = drawing_of(rig)
    assert drawing.of('target')[0].color == overlay_shapes.STATUS_COLORS['ERROR']
    assert "chain length" in drawing.labels[0].text
    rig.fabrik.effectors[0].target = None
    solved(rig)
    markers = drawing_of(rig).of('marker')
    assert len(markers) == 3 and all(m.color == overlay_shapes.STATUS_COLORS['ERROR'] for m in markers)
    assert all(close((m.a + m.b) / 2, tip_world(rig, "bone3")) for m in markers)  # no target: round the tip
    assert drawing_of(rig).of('target') == []


def test_readout_says_miss_iterations_and_time():
    rig, _target = chain_rig(count=4, live=False)
    status = solved(rig)
    label = drawing_of(rig).labels[0]
    assert label.text.startswith("bone3") and "miss" in label.text
    assert f"{status.report.iterations} it" in label.text and label.text.endswith(" ms")
    assert close(label.position, tip_world(rig, "bone3"))
    assert label.color == overlay_shapes.STATUS_COLORS['REACHED']


def test_pole_line_runs_from_the_chains_middle_joint_to_the_pole():
    rig, _target = chain_rig(count=4, live=False)
    pole = rigbuild.make_target("Pole", (2.0, -3.0, 2.0))
    rig.fabrik.effectors[0].pole_target = pole
    solved(rig)
    lines = drawing_of(rig).of('pole')
    assert len(lines) == 1
    evaluated = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
    assert close(lines[0].a, evaluated.matrix_world @ evaluated.pose.bones["bone2"].head)
    assert close(lines[0].b, target_world(pole))


def test_reach_circles_round_the_chain_base():
    rig, _target = chain_rig(count=4, live=False)
    rig.location = (1.0, 2.0, 0.5)
    rig.fabrik.effectors[0].chain_length = 2
    solved(rig)
    drawing = drawing_of(rig)
    segments = drawing.of('reach')
    assert len(segments) == 3 * overlay_shapes.CIRCLE_SEGMENTS  # three axis-aligned circles without a view
    base = tip_world(rig, "bone1")  # the chain is bone3 and bone2: its base is bone2's head
    for segment in segments:
        assert abs((segment.a - base).length - 2.0) < 1e-4
    view = Euler((0.3, 0.2, 1.0)).to_matrix()
    facing_segments = drawing_of(rig, facing=view).of('reach')
    assert len(facing_segments) == overlay_shapes.CIRCLE_SEGMENTS
    normal = view.col[2]
    for segment in facing_segments:
        assert abs((segment.a - base).dot(normal)) < 1e-5  # in the view's plane


def test_swing_cone_stays_inside_the_limits_and_a_hinge_is_an_arc():
    rig, _target = chain_rig(count=4, live=False)
    rigbuild.set_limits(rig, "bone1", x=(-30, 60), z=(-20, 20))
    rigbuild.set_limits(rig, "bone2", lock="Z", x=(0, 90))
    rigbuild.set_limits(rig, "bone3", y=(-45, 30))
    solved(rig)
    drawing = drawing_of(rig)
    evaluated = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
    for name, widest in (("bone1", 60.0), ("bone2", 90.0)):
        pose_bone = evaluated.pose.bones[name]
        frame = overlay_shapes.rest_frame(evaluated, pose_bone)
        head = evaluated.matrix_world @ pose_bone.head
        rest_y = frame.to_3x3().normalized().col[1]
        cone = [s for s in drawing.of('cone') if s.owner == name]
        assert cone, f"no cone for {name}"
        angles = []
        for segment in cone:
            for point in (segment.a, segment.b):
                offset = point - head
                if offset.length < 1e-9:
                    continue  # the apex
                assert abs(offset.length - overlay_shapes.CONE_SIZE * 1.0) < 1e-4
                angles.append(math.degrees(offset.angle(rest_y)))
        assert max(angles) == pytest.approx(widest, abs=0.5)
        if name == "bone2":  # Z locked: a hinge about X, every direction in the rest frame's YZ plane
            rest_x = frame.to_3x3().normalized().col[0]
            assert all(abs((s.b - head).normalized().dot(rest_x)) < 1e-4 for s in cone if (s.b - head).length > 1e-9)
    twist = [s for s in drawing.of('twist') if s.owner == "bone3"]
    assert len(twist) == overlay_shapes.ARC_SAMPLES + 3
    assert not [s for s in drawing.of('cone') if s.owner == "bone3"]
    assert not [s for s in drawing.segments if s.owner == "bone0"]  # no limits there


def test_limits_can_be_narrowed_to_the_active_chain_or_the_selected_bones():
    """A full character's cones fill the view: the limits drawn are every chain's, the active effector's chain's
    (the default) or the selected bones' of the chains."""
    bones = [("root", (0, 0, 0), (0, 0, 1), None, False),
             ("l1", (0, 0, 1), (1, 0, 2), "root", True), ("l2", (1, 0, 2), (2, 0, 3), "l1", True),
             ("r1", (0, 0, 1), (-1, 0, 2), "root", True), ("r2", (-1, 0, 2), (-2, 0, 3), "r1", True)]
    rig = rigbuild.make_armature("Rig", bones)
    rigbuild.add_effector(rig, "l2", rigbuild.make_target("L", (2.0, 0.0, 3.0))).chain_length = 2
    rigbuild.add_effector(rig, "r2", rigbuild.make_target("R", (-2.0, 0.0, 3.0))).chain_length = 2
    for name in ("l1", "l2", "r1", "r2"):
        rigbuild.set_limits(rig, name, x=(-30, 60), z=(-20, 20))
    solved(rig)

    def owners(scope: str) -> set:
        options = types.SimpleNamespace(**vars(ALL), limits_of=scope)
        return {s.owner for s in drawing_of(rig, options).of('cone')}

    assert owners('ALL') == {"l1", "l2", "r1", "r2"}
    rig.fabrik.active_effector = 1
    assert owners('ACTIVE') == {"r1", "r2"}
    for pose_bone in rig.pose.bones:
        animdata.set_selected(pose_bone, pose_bone.name == "l1")
    assert owners('SELECTED') == {"l1"}
    assert bpy.context.scene.fabrik_overlay.limits_of == 'ACTIVE'  # the default


def test_switches_leave_out_their_items():
    rig, _target = chain_rig(count=4, live=False)
    rigbuild.set_limits(rig, "bone1", x=(-30, 60), z=(-20, 20))
    rig.fabrik.effectors[0].pole_target = rigbuild.make_target("Pole", (2.0, -3.0, 2.0))
    solved(rig)
    none = types.SimpleNamespace(**{name: False for name in vars(ALL)})
    drawing = drawing_of(rig, none)
    assert drawing.segments == [] and drawing.labels == []
    settings = bpy.context.scene.fabrik_overlay  # the panel's switches, usable as options
    kinds = {s.kind for s in drawing_of(rig, settings).segments}
    assert kinds == {'target', 'marker', 'pole', 'cone'}  # reach off by default, no trace recorded


def test_trace_records_tip_moves_only():
    rig, target = chain_rig(count=4, live=False)
    solved(rig)
    memory.of(rig).traces.clear()
    depsgraph = bpy.context.evaluated_depsgraph_get()
    for x in (1.5, 1.5, 1.0, 0.5):
        target.location.x = x
        solved(rig)
        traces = overlay_shapes.record_trace(rig, overlay_shapes.read_effectors(rig, depsgraph, statuses[rig.name]), 3)
    assert len(traces[0]) == 3  # 4 solves, one unmoved, at most 3 kept
    assert close(traces[0][-1], tip_world(rig, "bone3"))
    segments = drawing_of(rig, traces=traces).of('trace')
    assert len(segments) == 2
    # A file loaded: its rig of the same name is another rig, with no path behind it yet.
    bpy.ops.wm.read_homefile(use_empty=True)
    assert memory.get("Rig") is None  # (every rig's memory goes with the file: its traces too)


def test_draw_callbacks_never_raise(monkeypatch, caplog):
    """Drawing in background mode does nothing; an error inside a callback is logged once, never raised."""
    overlay.draw_view()
    overlay.draw_text()

    def broken(_context):
        raise RuntimeError("broken on purpose")

    monkeypatch.setattr(overlay, "_enabled", broken)
    overlay._logged.clear()
    with caplog.at_level(logging.ERROR, logger=overlay.log.name):
        overlay.draw_view()
        overlay.draw_view()
    assert [r.getMessage() for r in caplog.records].count("FABRIK overlay could not draw (reported once)") == 1
    overlay._logged.clear()


def test_shader_names_by_version():
    assert compat.builtin_shader_name("lines", (3, 4, 1)) == "3D_UNIFORM_COLOR"
    assert compat.builtin_shader_name("polyline", (3, 4, 1)) == "3D_POLYLINE_UNIFORM_COLOR"
    assert compat.builtin_shader_name("lines", (4, 2, 0)) == "UNIFORM_COLOR"
    assert compat.builtin_shader_name("polyline", (5, 0, 1)) == "POLYLINE_UNIFORM_COLOR"


def test_readouts_at_one_tip_are_stacked_not_drawn_over_each_other():
    line = 15.0
    placed: list = []
    for _ in range(3):
        placed.append((100.0, overlay_shapes.stacked_below(100.0, 200.0, placed, line)))
    assert [y for _, y in placed] == [200.0, 185.0, 170.0]
    assert overlay_shapes.stacked_below(400.0, 200.0, placed, line) == 200.0  # far to the side: left where it is


def test_after_a_bake_the_readout_says_live_solving_is_off_not_that_nothing_was_solved():
    """A bake switches live solving off: the tips' labels say so (the keys play), instead of "not solved yet"."""
    from fabrik_addon.blender.bake import baking

    rig, target = chain_rig(count=4, target_at=(1.5, 0.0, 2.5))
    bpy.context.view_layer.update()
    baking.bake_object(rig, range(1, 4))
    assert not rig.fabrik.live
    labels = [label.text for label in drawing_of(rig).labels]
    assert labels == ["bone3: live solving off"], labels
