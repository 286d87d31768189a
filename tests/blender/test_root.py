# SPDX-License-Identifier: GPL-3.0-or-later
"""A root that moves, in the real bpy module: a hand beyond its arm is reached by moving the hips (not past the
pinned feet, nor past the Distance and Angle), live and baked; the hips' own animation stays the animator's and
comes back with Root Off or live solving off; undo, save and reload; a root in a chain or gone is refused and
changes nothing."""

from __future__ import annotations

import math
import types

import bpy
import numpy as np
import pytest
from blender_scenes import RecordingLayout, rigbuild, tip_world
from mathutils import Vector
from walk_clip import stocky_rig

from fabrik_addon.blender.live import handlers
from fabrik_addon.blender.rig import animdata, status

pytestmark = pytest.mark.usefixtures("addon_per_test")

FRAMES = range(1, 21)
#: Where the hand is pulled: in front of the left shoulder (the rig faces -Y), 0.35 beyond the arm's reach.
REACH_FOR = (2.14, -0.99, 1.0)


def body(mode: str = 'OUT_OF_REACH', live: bool = True):
    """The stocky rig standing on bent knees (feet targets 0.1 above the ankles' rest), its left hand pulled in
    front of it, beyond the arm; Root on the pelvis."""
    rig = stocky_rig()
    feet = [rigbuild.make_target(f"Foot {s}", (2.0 + 0.12 * x, 0.0, 0.15)) for s, x in (("L", 1), ("R", -1))]
    hand = rigbuild.make_target("Hand", REACH_FOR)
    rigbuild.add_effector(rig, "calf_l", feet[0], chain_length=2)
    rigbuild.add_effector(rig, "calf_r", feet[1], chain_length=2)
    rigbuild.add_effector(rig, "lowerarm_l", hand, chain_length=2)
    rig.fabrik.root_mode = mode
    rig.fabrik.root_bone = "pelvis"
    bpy.context.view_layer.objects.active = rig
    rig.fabrik.live = live
    bpy.context.view_layer.update()
    return rig, feet, hand


def pelvis_world(rig) -> np.ndarray:
    depsgraph = bpy.context.evaluated_depsgraph_get()
    evaluated = rig.evaluated_get(depsgraph)
    return np.array(evaluated.matrix_world @ evaluated.pose.bones["pelvis"].head)


def misses(rig, feet, hand) -> list[float]:
    """How far each tip is from its target (world)."""
    return [
        float((Vector(tip_world(rig, bone)) - target.matrix_world.translation).length)
        for bone, target in (("calf_l", feet[0]), ("calf_r", feet[1]), ("lowerarm_l", hand))
    ]


def test_out_of_reach_the_hips_move_so_the_hand_reaches_and_the_feet_stay():
    rig, feet, hand = body('OFF')
    assert misses(rig, feet, hand)[2] > 0.3  # (with the root fixed the arm cannot)
    rest = pelvis_world(rig)
    rig.fabrik.root_mode = 'OUT_OF_REACH'
    bpy.context.view_layer.update()
    missed = misses(rig, feet, hand)
    assert max(missed) < 1e-3, missed
    moved = pelvis_world(rig) - rest
    assert moved[1] < -0.1  # forward, towards the hand
    assert np.linalg.norm(moved) <= rig.fabrik.root_distance + 1e-6
    assert status.statuses[rig.name].effectors[2].startswith("reached")
    assert tuple(rig.pose.bones["pelvis"].location) != (0.0, 0.0, 0.0)  # the move is the pelvis's location


def test_the_hips_go_no_further_than_the_distance_even_on_a_scaled_rig():
    rig, feet, hand = body('OFF')
    rig.scale = (2.0, 2.0, 2.0)  # (Distance is in the scene's units)
    hand.location = (4.28, -1.6, 2.0)
    for foot, x in zip(feet, (1, -1)):
        foot.location = (4.0 + 0.24 * x, 0.0, 0.3)
    bpy.context.view_layer.update()
    rest = pelvis_world(rig)
    rig.fabrik.root_distance = 0.1
    rig.fabrik.root_mode = 'OUT_OF_REACH'
    bpy.context.view_layer.update()
    assert np.linalg.norm(pelvis_world(rig) - rest) == pytest.approx(0.1, abs=1e-4)
    assert misses(rig, feet, hand)[2] > 0.1
    assert status.statuses[rig.name].effectors[2].startswith("misses")  # a miss is a warning, not "converged"


def test_the_hips_turn_within_the_angle_when_they_may_not_move():
    rig, feet, hand = body('OFF')
    hand.location = (2.7, -0.5, 1.0)  # beside and ahead: a turn of the body brings the shoulder nearer
    rig.fabrik.root_distance = 0.0
    rig.fabrik.root_angle = math.radians(40)
    rig.fabrik.root_mode = 'OUT_OF_REACH'
    bpy.context.view_layer.update()
    turned = rig.pose.bones["pelvis"].rotation_quaternion.angle
    assert 0.05 < turned <= math.radians(40) + 1e-5
    assert np.allclose(pelvis_world(rig), (2.0, 0.0, 0.62), atol=1e-5)  # turned about its head, not moved
    assert max(misses(rig, feet, hand)) < 1e-3
    rig.fabrik.root_angle = math.radians(3)
    bpy.context.view_layer.update()
    assert rig.pose.bones["pelvis"].rotation_quaternion.angle == pytest.approx(math.radians(3), abs=1e-5)
    assert status.statuses[rig.name].effectors[2].startswith("misses")


def test_free_the_hips_follow_the_pull_by_the_weight():
    rig, feet, hand = body('OFF', live=False)
    rig.fabrik.effectors[0].enabled = rig.fabrik.effectors[1].enabled = False  # (the hand alone pulls)
    elbow = rig.pose.bones["lowerarm_l"]
    elbow.rotation_quaternion = (math.cos(-0.35), math.sin(-0.35), 0.0, 0.0)  # (bent in its hinge, as animated)
    bpy.context.view_layer.update()
    tip = np.array(tip_world(rig, "lowerarm_l"))
    pull = np.array([0.0, -0.15, 0.1])
    hand.location = tuple(tip + pull)
    rig.fabrik.live = True
    bpy.context.view_layer.update()
    rest = pelvis_world(rig)
    rig.fabrik.root_weight = 1.0
    rig.fabrik.root_mode = 'FREE'
    bpy.context.view_layer.update()
    full = pelvis_world(rig) - rest
    rig.fabrik.root_weight = 0.5
    bpy.context.view_layer.update()
    half = pelvis_world(rig) - rest
    assert np.allclose(full, pull, atol=1e-4) and np.allclose(half, pull / 2.0, atol=1e-4)
    assert misses(rig, feet, hand)[2] < 1e-3


def test_the_animators_hips_keys_stay_and_root_off_or_live_off_gives_them_back():
    rig, feet, hand = body(live=False)
    pelvis = rig.pose.bones["pelvis"]
    for frame in FRAMES:
        pelvis.location = (0.0, 0.005 * frame, 0.0)  # (the pelvis's Y is up: keyed rising)
        pelvis.keyframe_insert("location", frame=frame)
    keys = keyed(rig)
    assert len(keys) == 3 * len(FRAMES)
    scene = bpy.context.scene
    rig.fabrik.live = True
    for frame in (3, 9, 15):
        scene.frame_set(frame)
        assert max(misses(rig, feet, hand)) < 1e-3, frame
        assert tuple(pelvis.location) != pytest.approx((0.0, 0.005 * frame, 0.0))
    rig.fabrik.root_mode = 'OFF'
    bpy.context.view_layer.update()
    assert tuple(pelvis.location) == pytest.approx((0.0, 0.005 * 15, 0.0), abs=1e-6)
    rig.fabrik.root_mode = 'OUT_OF_REACH'
    bpy.context.view_layer.update()
    assert tuple(pelvis.location) != pytest.approx((0.0, 0.075, 0.0), abs=1e-6)
    rig.fabrik.live = False
    assert tuple(pelvis.location) == pytest.approx((0.0, 0.075, 0.0), abs=1e-6)
    assert tuple(pelvis.rotation_quaternion) == pytest.approx((1.0, 0.0, 0.0, 0.0), abs=1e-6)
    assert keyed(rig) == keys  # the animator's keys are as they were


def keyed(rig) -> list:
    """Every key of the rig's action (its channels, layered or not), in order."""
    return [(fc.data_path, fc.array_index, tuple(k.co)) for fc in animdata.fcurves(rig) for k in fc.keyframe_points]


def test_a_partly_keyed_root_keeps_its_keyed_place_as_its_home():
    """Only the pelvis's height keyed: the other components hold what live solving wrote, the keyed one its key;
    frame after frame the move stays within Distance of the animator's place (it does not build up), and live
    solving off gives the animator's values back."""
    rig, feet, hand = body(live=False)
    hand.location = (2.14, -1.5, 1.0)  # (far beyond the arm: the pelvis goes as far as it may)
    rig.fabrik.root_distance = 0.1
    pelvis = rig.pose.bones["pelvis"]
    for frame in FRAMES:
        pelvis.location = (0.0, 0.002 * frame, 0.0)  # (its Y is up)
        pelvis.keyframe_insert("location", index=1, frame=frame)
    rig.fabrik.live = True
    scene = bpy.context.scene
    for frame in range(1, 11):
        scene.frame_set(frame)
        home = Vector((0.0, 0.002 * frame, 0.0))
        assert (Vector(pelvis.location) - home).length == pytest.approx(0.1, abs=1e-4), frame
    rig.fabrik.live = False
    assert tuple(pelvis.location) == pytest.approx((0.0, 0.02, 0.0), abs=1e-6)


def test_the_bake_keys_the_hips_and_plays_back_what_live_showed():
    rig, feet, hand = body()
    rigbuild.key_path(hand, FRAMES, lambda f: (2.14 + 0.005 * f, -0.7 - 0.01 * f, 1.0))
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = FRAMES.start, FRAMES.stop - 1
    live = {}
    for frame in FRAMES:
        scene.frame_set(frame)
        live[frame] = (pelvis_world(rig), np.array(tip_world(rig, "lowerarm_l")))
    for continuous in (False, True):
        rig.fabrik.live = False
        result = bpy.ops.fabrik.bake(
            frame_start=FRAMES.start, frame_end=FRAMES.stop - 1, start='PREVIOUS' if continuous else 'FK',
        )
        assert result == {'FINISHED'}
        assert not rig.fabrik.live
        for frame in FRAMES:
            scene.frame_set(frame)
            hips, tip = pelvis_world(rig), np.array(tip_world(rig, "lowerarm_l"))
            assert np.linalg.norm(tip - np.array(hand.matrix_world.translation)) < 2e-3, (continuous, frame)
            if not continuous:
                assert np.allclose(hips, live[frame][0], atol=1e-3), frame
        rig.fabrik.live = True


def settled(rig) -> None:
    """Update, and once more where the solve was put off (a root given back first: the chains hang from it)."""
    bpy.context.view_layer.update()
    if "solving again at the next update" in status.statuses[rig.name].message:
        handlers.tag_put_off()  # (what a timer does in the GUI: background Blender runs none)
        bpy.context.view_layer.update()


@pytest.mark.parametrize("spoil", ["in a chain", "missing", "connected", "local location off", "constrained",
                                   "nothing below"])
def test_a_root_that_cannot_move_is_said_goes_back_and_the_chains_fit_where_it_stands(spoil):
    """After the pelvis moved: each way its Root stops being usable gives the animator's place back, the status
    says why (a warning), and the chains are solved again from where it stands (the feet stay on their targets)."""
    rig, feet, hand = body()
    assert tuple(rig.pose.bones["pelvis"].location) != (0.0, 0.0, 0.0)
    if spoil == "in a chain":
        rig.fabrik.effectors[2].chain_length = 0  # (the arm's chain now runs through the pelvis)
        wanted = "root bone 'pelvis' is in an effector's chain"
    elif spoil == "missing":
        rig.fabrik.root_bone = "hips"
        wanted = "the Root bone 'hips' is not in 'Stocky'"
    elif spoil == "connected":
        rig.fabrik.root_bone = "spine_01"
        wanted = "'spine_01' is connected to its parent"
    elif spoil == "local location off":
        rig.data.bones["pelvis"].use_local_location = False
        wanted = "'pelvis' has Local Location off"
    elif spoil == "constrained":
        rig.pose.bones["pelvis"].constraints.new('COPY_LOCATION').target = hand
        wanted = "'pelvis' has the constraint 'Copy Location'"
    else:
        rig.fabrik.root_distance, rig.fabrik.root_angle = 0.0, 0.2  # (a connected bone may turn)
        rig.fabrik.root_bone = "head"
        wanted = "no effector's chain hangs from the Root bone 'head'"
    settled(rig)
    shown = status.statuses[rig.name]
    assert not shown.ok and wanted in shown.message, shown.message
    if spoil != "constrained":  # (there the constraint takes the hips to the hand)
        assert tuple(rig.pose.bones["pelvis"].location) == (0.0, 0.0, 0.0)
        assert max(misses(rig, feet, hand)[:2]) < 1e-3  # the legs solved again from where the hips stand
        assert shown.reached.get(0) and shown.reached.get(1)


def test_a_renamed_root_bone_is_followed():
    rig, feet, hand = body()
    moved = tuple(rig.pose.bones["pelvis"].location)
    rig.data.bones["pelvis"].name = "Pelvis"
    settled(rig)
    assert rig.fabrik.root_bone == "Pelvis" and status.statuses[rig.name].ok
    assert tuple(rig.pose.bones["Pelvis"].location) == pytest.approx(moved, abs=1e-6)
    assert misses(rig, feet, hand)[2] < 1e-3


def test_another_root_bone_gives_the_first_its_place_back_and_a_connected_one_is_refused():
    rig, feet, hand = body()
    assert tuple(rig.pose.bones["pelvis"].location) != (0.0, 0.0, 0.0)
    rig.fabrik.root_bone = "clavicle_l"  # another root (the arm's chain hangs from it): the pelvis goes back
    bpy.context.view_layer.update()
    assert tuple(rig.pose.bones["pelvis"].location) == (0.0, 0.0, 0.0)
    assert "solving again at the next update" in status.statuses[rig.name].message  # (the chains hung from it)
    handlers.tag_put_off()  # (what a timer does in the GUI: background Blender runs none)
    bpy.context.view_layer.update()
    assert tuple(rig.pose.bones["clavicle_l"].location) != (0.0, 0.0, 0.0)
    assert misses(rig, feet, hand)[2] < 1e-3
    rig.fabrik.root_bone = "spine_01"  # connected to the pelvis: Blender would not move it
    bpy.context.view_layer.update()
    handlers.tag_put_off()  # (the clavicle went back first)
    bpy.context.view_layer.update()
    assert tuple(rig.pose.bones["clavicle_l"].location) == (0.0, 0.0, 0.0)
    shown = status.statuses[rig.name]
    assert not shown.ok and "'spine_01' is connected to its parent" in shown.message
    rig.fabrik.root_distance = 0.0  # (turning only, it may)
    rig.fabrik.root_angle = math.radians(30)
    bpy.context.view_layer.update()
    assert status.statuses[rig.name].ok


def test_undo_save_and_reload_keep_the_root_and_give_the_hips_back(tmp_path):
    rig, feet, hand = body('OFF')
    bpy.ops.ed.undo_push(message="before")
    rig.fabrik.root_mode = 'FREE'
    rig.fabrik.root_distance = 0.3
    bpy.ops.ed.undo_push(message="root free")
    bpy.ops.ed.undo()
    rig = bpy.data.objects["Stocky"]
    assert rig.fabrik.root_mode == 'OFF'
    rig.fabrik.root_mode = 'OUT_OF_REACH'
    rig.fabrik.root_distance = 0.4
    bpy.context.view_layer.update()
    moved = tuple(rig.pose.bones["pelvis"].location)
    assert moved != (0.0, 0.0, 0.0)
    path = str(tmp_path / "root.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.open_mainfile(filepath=path)
    rig = bpy.data.objects["Stocky"]
    assert (rig.fabrik.root_mode, rig.fabrik.root_bone) == ('OUT_OF_REACH', "pelvis")
    assert rig.fabrik.root_distance == pytest.approx(0.4)
    rig.fabrik.live = False  # (what was held is in the file: the animator's place comes back)
    assert tuple(rig.pose.bones["pelvis"].location) == (0.0, 0.0, 0.0)


def drawn_root_panel(rig) -> tuple[set, str]:
    """What the Root sub-panel draws (recorded: panels cannot draw in background mode): its properties and text."""
    log = []
    panel = types.SimpleNamespace(layout=RecordingLayout(log))
    context = types.SimpleNamespace(object=rig, scene=bpy.context.scene, region=None,
                                    preferences=bpy.context.preferences)
    assert bpy.types.VIEW3D_PT_fabrik_root.poll(context)
    bpy.types.VIEW3D_PT_fabrik_root.draw(panel, context)
    props = {args[1] for name, args, _ in log if name in ("prop", "prop_search")}
    text = " ".join(kwargs.get("text", "") for name, args, kwargs in log if name == "label")
    text += " ".join(args[0] if args else "" for name, args, _ in log if name == "label")
    return props, text


def test_the_root_panel_shows_its_settings_how_far_the_root_moved_and_what_is_wrong():
    rig, feet, hand = body()
    props, text = drawn_root_panel(rig)
    assert {"root_mode", "root_bone", "root_weight", "root_distance", "root_angle"} <= props
    moved = float(text.split("Moved ")[1].split(" cm")[0])  # (the scene's metric units)
    assert 20.0 < moved <= 50.0 and "turned 0.0°" in text, text
    rig.fabrik.root_bone = ""
    bpy.context.view_layer.update()
    assert "Top of the first chain: pelvis" in drawn_root_panel(rig)[1]
    rig.fabrik.root_bone = "hips"
    bpy.context.view_layer.update()
    _, text = drawn_root_panel(rig)
    assert "the Root bone 'hips' is not in 'Stocky'" in text and "Moved" not in text


def root_keys(rig) -> set[str]:
    """The data paths of the pelvis's keys in the rig's action."""
    collection = animdata.fcurves(rig)
    return set() if collection is None else {fc.data_path for fc in collection if '"pelvis"' in fc.data_path}


def test_the_bake_keys_the_root_only_where_it_moves_and_was_asked_for():
    """Chains: the pelvis's location and rotation are keyed with them (and counted); selected bones without the
    pelvis: not keyed, though it moved live; a Root that moves nowhere (Distance and Angle 0, or refused): not
    keyed."""
    rig, feet, hand = body()
    scene = bpy.context.scene
    assert bpy.ops.fabrik.bake(frame_start=1, frame_end=3) == {'FINISHED'}
    assert root_keys(rig) == {'pose.bones["pelvis"].location', 'pose.bones["pelvis"].rotation_quaternion'}
    rig.animation_data_clear()
    bpy.ops.object.mode_set(mode='POSE')
    for pose_bone in rig.pose.bones:
        animdata.set_selected(pose_bone, pose_bone.name in ("upperarm_l", "lowerarm_l"))
    rig.fabrik.live = True
    assert bpy.ops.fabrik.bake(frame_start=1, frame_end=3, bones='SELECTED') == {'FINISHED'}
    assert root_keys(rig) == set()
    for setting, value in (("root_distance", 0.0), ("root_bone", "spine_01")):
        rig.animation_data_clear()
        rig.fabrik.root_distance, rig.fabrik.root_bone = 0.5, "pelvis"
        setattr(rig.fabrik, setting, value)
        rig.fabrik.live = True
        scene.frame_set(1)
        assert bpy.ops.fabrik.bake(frame_start=1, frame_end=3) == {'FINISHED'}
        assert root_keys(rig) == set(), setting


@pytest.mark.parametrize("mode", ['XYZ', 'ZXY', 'AXIS_ANGLE', 'QUATERNION'])
def test_a_root_in_any_rotation_mode_under_a_turned_parent_turns_and_moves_as_solved(mode):
    """The pelvis under a parent bone turned and rolled, in each rotation mode, animated turned a little: the
    hand beyond the arm is reached by moving and turning it, and live solving off gives its values back."""
    rig, feet, hand = body('OFF', live=False)
    bpy.context.view_layer.objects.active = rig
    bpy.ops.object.mode_set(mode='EDIT')
    edit = rig.data.edit_bones
    top = edit.new("Root")
    top.head, top.tail, top.roll = (0.0, 0.3, 0.0), (0.0, 0.3, 0.3), 0.7
    edit["pelvis"].parent = top
    bpy.ops.object.mode_set(mode='POSE')
    rig.pose.bones["Root"].rotation_quaternion = (0.98, 0.1, 0.0, 0.17)
    pelvis = rig.pose.bones["pelvis"]
    pelvis.rotation_mode = mode
    if mode == 'QUATERNION':
        pelvis.rotation_quaternion = (0.995, 0.0, 0.0998, 0.0)
    elif mode == 'AXIS_ANGLE':
        pelvis.rotation_axis_angle = (0.2, 0.0, 1.0, 0.0)
    else:
        pelvis.rotation_euler = (0.0, 0.2, 0.0)
    before = tuple(pelvis.location), tuple(getattr(pelvis, rig_channel(mode)))
    bpy.context.view_layer.update()
    shoulder = rig.matrix_world @ rig.pose.bones["upperarm_l"].head
    hand.location = shoulder + Vector((0.0, -0.72, 0.0))  # (0.08 beyond the arm: reached by turning the body)
    rig.fabrik.root_distance, rig.fabrik.root_angle = 0.0, math.radians(30)
    rig.fabrik.root_mode = 'OUT_OF_REACH'
    rig.fabrik.live = True
    bpy.context.view_layer.update()
    assert status.statuses[rig.name].ok and max(misses(rig, feet, hand)) < 1e-3
    assert tuple(getattr(pelvis, rig_channel(mode))) != pytest.approx(before[1], abs=1e-6)
    rig.fabrik.live = False
    assert tuple(pelvis.location) == pytest.approx(before[0], abs=1e-6)
    assert tuple(getattr(pelvis, rig_channel(mode))) == pytest.approx(before[1], abs=1e-6)


def rig_channel(mode: str) -> str:
    return {"QUATERNION": "rotation_quaternion", "AXIS_ANGLE": "rotation_axis_angle"}.get(mode, "rotation_euler")
