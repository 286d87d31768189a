# SPDX-License-Identifier: GPL-3.0-or-later
"""Live solving in the real bpy module: dragging, scrubbing, object transforms, trees, rotation modes, files."""

from __future__ import annotations

import math
import types

import bpy
import pytest
from mathutils import Euler, Vector

from blender_scenes import RecordingLayout, chain_rig, rigbuild, target_world, tip_world
from fabrik_addon.blender import solving

TOLERANCE = 1e-3


pytestmark = pytest.mark.usefixtures("clean_scene")


def test_dragging_a_target_moves_the_tip_onto_it():
    """Moving the target and letting the depsgraph update (as a viewport drag does) re-solves."""
    rig, target = chain_rig()
    for location in [(1.5, 0.0, 2.5), (-1.0, 1.0, 2.0), (0.3, -2.0, 1.0)]:
        target.location = location
        bpy.context.view_layer.update()
        assert (tip_world(rig, "bone3") - Vector(location)).length < TOLERANCE
    assert solving.status["Rig"].ok


def test_scrubbing_an_animated_target_matches_on_every_frame():
    """frame_set re-solves after animation: the tip sits on the keyed target at each frame, in any order."""
    rig, target = chain_rig()
    rigbuild.key_circle(target, (0.0, 0.0, 2.0), 1.5, range(1, 21), axis="XZ")
    scene = bpy.context.scene
    for frame in [1, 5, 20, 3, 12, 12, 1]:
        scene.frame_set(frame)
        assert (tip_world(rig, "bone3") - target_world(target)).length < TOLERANCE, frame


def test_the_same_frame_always_gives_the_same_pose():
    """Deterministic: the pose at a frame does not depend on which frame came before."""
    rig, target = chain_rig()
    rigbuild.key_circle(target, (0.0, 0.0, 2.0), 1.5, range(1, 21), axis="XZ")
    scene = bpy.context.scene
    scene.frame_set(7)
    first = [pb.matrix.copy() for pb in rig.pose.bones]
    for frame in (15, 2, 19):
        scene.frame_set(frame)
    scene.frame_set(7)
    for before, pb in zip(first, rig.pose.bones):
        assert all(abs(a - b) < 1e-6 for r1, r2 in zip(before, pb.matrix) for a, b in zip(r1, r2)), pb.name


@pytest.mark.parametrize(
    "location, rotation, scale",
    [
        ((2.0, -1.0, 0.5), (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)),
        ((0.0, 0.0, 0.0), (0.3, -0.7, 1.1), (1.0, 1.0, 1.0)),
        ((1.0, 2.0, 3.0), (0.2, 0.4, -0.3), (2.0, 0.5, 1.5)),
    ],
)
def test_moved_rotated_and_scaled_rigs_reach_in_world_space(location, rotation, scale):
    """Targets are taken into armature space, also under rotation and non-uniform scale."""
    rig, target = chain_rig()
    rig.location, rig.rotation_euler, rig.scale = location, rotation, scale
    bpy.context.view_layer.update()
    to_world = rig.matrix_world
    goal = to_world @ Vector((1.2, 0.4, 2.2))  # reachable in armature space
    target.location = goal
    bpy.context.view_layer.update()
    assert (tip_world(rig, "bone3") - goal).length < TOLERANCE * max(scale)


def test_hand_tree_reaches_all_fingertips():
    """The hand sample: palm plus five fingers, every fingertip on its target at each frame."""
    import hand

    rig = hand.build(range(1, 9))
    scene = bpy.context.scene
    for frame in range(1, 9):
        scene.frame_set(frame)
        for effector in rig.fabrik.effectors:
            error = (tip_world(rig, effector.bone) - target_world(effector.target)).length
            assert error < 2e-3, (frame, effector.bone, error)


@pytest.mark.parametrize("mode", ["XYZ", "ZXY", "QUATERNION", "AXIS_ANGLE"])
def test_each_rotation_mode_is_written_in_its_own_channel(mode):
    """Euler orders, quaternions and axis-angle bones all end up on target, through their own channel."""
    rig, target = chain_rig(live=False)
    for pb in rig.pose.bones:
        pb.rotation_mode = mode
    bpy.context.view_layer.update()
    bpy.ops.fabrik.solve()
    bpy.context.view_layer.update()
    assert (tip_world(rig, "bone3") - target_world(target)).length < TOLERANCE
    pb = rig.pose.bones["bone1"]
    if mode == "QUATERNION":
        assert tuple(pb.rotation_euler) == (0.0, 0.0, 0.0) and tuple(pb.rotation_quaternion) != (1.0, 0.0, 0.0, 0.0)
    elif mode == "AXIS_ANGLE":
        assert tuple(pb.rotation_quaternion) == (1.0, 0.0, 0.0, 0.0) and pb.rotation_axis_angle[0] != 0.0
    else:
        assert tuple(pb.rotation_quaternion) == (1.0, 0.0, 0.0, 0.0) and tuple(pb.rotation_euler) != (0.0, 0.0, 0.0)


def test_euler_values_stay_continuous_across_frames():
    """A target circling round keeps Euler angles continuous (no 2*pi jumps between neighbouring frames)."""
    rig, target = chain_rig(count=2)
    for pb in rig.pose.bones:
        pb.rotation_mode = "XYZ"
    rigbuild.key_circle(target, (0.0, 0.0, 1.0), 1.0, range(1, 41), axis="XY", turns=2.0)
    scene = bpy.context.scene
    previous = None
    for frame in range(1, 41):
        scene.frame_set(frame)
        values = Euler(rig.pose.bones["bone0"].rotation_euler)
        if previous is not None:
            assert max(abs(a - b) for a, b in zip(values, previous)) < math.pi / 2, frame
        previous = values


def test_settings_survive_save_and_reload(tmp_path):
    """Effectors and settings are saved in the file, and live solving works again after loading it."""
    rig, target = chain_rig()
    rig.fabrik.iterations = 33
    rig.fabrik.effectors[0].weight = 0.5
    path = str(tmp_path / "rig.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.open_mainfile(filepath=path)
    rig, target = bpy.data.objects["Rig"], bpy.data.objects["Target"]
    assert rig.fabrik.live and rig.fabrik.iterations == 33
    assert rig.fabrik.effectors[0].bone == "bone3" and rig.fabrik.effectors[0].target == target
    assert rig.fabrik.effectors[0].weight == pytest.approx(0.5)
    target.location = (-1.2, 0.5, 2.0)
    bpy.context.view_layer.update()
    assert (tip_world(rig, "bone3") - Vector((-1.2, 0.5, 2.0))).length < TOLERANCE


def test_two_rigs_solve_independently():
    """Each armature follows its own targets."""
    first, first_target = chain_rig()
    second = rigbuild.make_armature("Other", rigbuild.chain_bones(3, 1.0, prefix="o"), location=(5.0, 0.0, 0.0))
    second_target = rigbuild.make_target("OtherTarget", (6.0, 1.0, 1.5))
    rigbuild.add_effector(second, "o2", second_target)
    second.fabrik.live = True
    first_target.location = (1.0, 1.0, 2.0)
    bpy.context.view_layer.update()
    assert (tip_world(first, "bone3") - Vector((1.0, 1.0, 2.0))).length < TOLERANCE
    assert (tip_world(second, "o2") - Vector((6.0, 1.0, 1.5))).length < TOLERANCE


def test_sidebar_panel_shows_effectors_settings_and_status():
    """The FABRIK sidebar panel draws the list, the active effector, the settings and the last status (fake layout)."""
    from fabrik_addon.blender.ui import FABRIK_UL_effectors, VIEW3D_PT_fabrik

    rig, target = chain_rig()
    bpy.context.view_layer.update()
    log = []

    class Context:
        object = rig

    assert VIEW3D_PT_fabrik.poll(Context)
    VIEW3D_PT_fabrik.draw(types.SimpleNamespace(layout=RecordingLayout(log)), Context)  # panels draw only in a UI
    props = {args[1] for name, args, _ in log if name == "prop"}
    assert {"live", "chain_length", "weight", "target", "iterations", "tolerance"} <= props
    assert ("template_list" in {name for name, _, _ in log})
    assert any(
        name == "label" and kwargs.get("text", "").startswith("reached") and kwargs.get("icon") == 'CHECKMARK'
        for name, _, kwargs in log
    )
    row_log = []
    FABRIK_UL_effectors.draw_item(None, None, RecordingLayout(row_log), rig.fabrik, rig.fabrik.effectors[0], 0, None, "", 0)
    labels = [(kwargs.get("text"), kwargs.get("icon")) for name, _, kwargs in row_log if name == "label"]
    assert labels[0][0] == "bone3 \u2192 Target" and labels[1][0].startswith("reached (miss") and labels[1][1] == 'CHECKMARK'



def test_a_target_out_of_reach_is_a_warning_with_the_distance_not_success():
    """The status says how far the tip is off and why, the icons tell it apart from reached and from bad input."""
    from fabrik_addon.blender.ui import FABRIK_UL_effectors

    rig, target = chain_rig()
    target.location = (0.0, 6.0, 0.0)  # the four bones reach 4
    bpy.context.view_layer.update()
    status = solving.status["Rig"]
    assert status.ok and status.missed and not status.reached[0]
    assert status.message.startswith("missed by 2 (target out of reach)")
    assert status.effectors[0] == "misses by 2: target out of reach"
    row_log = []
    FABRIK_UL_effectors.draw_item(None, None, RecordingLayout(row_log), rig.fabrik, rig.fabrik.effectors[0], 0, None, "", 0)
    assert [kwargs.get("icon") for name, _, kwargs in row_log if name == "label"][1] == 'ERROR'
    target.location = (1.0, 1.0, 2.0)
    bpy.context.view_layer.update()
    assert not solving.status["Rig"].missed and solving.status["Rig"].message.startswith("reached")


def test_the_tolerance_means_the_same_on_a_rig_of_any_size():
    """The same chain built in metres and in centimetres (bones and target 100 times larger) solves alike."""
    small, small_target = chain_rig(target_at=(1.5, 0.0, 2.5))
    large = rigbuild.make_armature("Large", rigbuild.chain_bones(4, 100.0))
    large_target = rigbuild.make_target("LargeTarget", (150.0, 0.0, 250.0))
    rigbuild.add_effector(large, "bone3", large_target)
    large.fabrik.live = True
    bpy.context.view_layer.update()
    a, b = solving.status["Rig"], solving.status["Large"]
    assert a.reached[0] and b.reached[0]
    assert a.report.iterations == b.report.iterations
    assert b.report.max_error == pytest.approx(100.0 * a.report.max_error, rel=1e-2, abs=1e-4)
