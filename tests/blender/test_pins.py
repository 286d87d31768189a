# SPDX-License-Identifier: GPL-3.0-or-later
"""Pins in the real bpy module: a planted tip stays put while the target and the rig move on, live and baked;
Find Contacts pins a walk's steps; pins save, undo, survive moving the effector, and refuse bad values."""

from __future__ import annotations

import math
import types

import bpy
import numpy as np
import pytest
from blender_scenes import RecordingLayout, chain_rig, rigbuild, tip_world
from mathutils import Euler, Vector

from fabrik_addon.blender import long_work
from fabrik_addon.blender.bake import baking
from fabrik_addon.blender.effectors import contact_pins, pins
from fabrik_addon.blender.rig import animdata, status
from fabrik_addon.blender.ui import overlay_shapes
from fabrik_addon.core.motion import contacts

pytestmark = pytest.mark.usefixtures("addon_per_test")

FRAMES = range(1, 41)


def sliding_rig(rig_moves: bool = False):
    """A four-bone chain whose target slides along X over frames 1-40 (and whose object moves along Y)."""
    rig, target = chain_rig(4, 1.0, (1.0, 0.0, 1.5))
    rigbuild.key_path(target, FRAMES, lambda f: (0.04 * f, 0.0, 1.5 + 0.01 * f))
    if rig_moves:
        rigbuild.key_path(rig, FRAMES, lambda f: (0.0, 0.02 * f, 0.0))
    bpy.context.scene.frame_start, bpy.context.scene.frame_end = 1, 40
    bpy.context.scene.frame_set(1)
    return rig, target


def tips(rig, frames) -> np.ndarray:
    """The first effector's tip's world position on each frame, as the scene evaluates it."""
    scene = bpy.context.scene
    out = []
    for frame in frames:
        scene.frame_set(frame)
        out.append(tuple(tip_world(rig, rig.fabrik.effectors[0].bone)))
    return np.array(out)


def target_at(target, frame: int) -> np.ndarray:
    bpy.context.scene.frame_set(frame)
    depsgraph = bpy.context.evaluated_depsgraph_get()
    return np.array(target.evaluated_get(depsgraph).matrix_world.translation)


def pin(rig, first: int, last: int, blend_in: int = 3, blend_out: int = 2):
    bpy.context.view_layer.objects.active = rig
    return bpy.ops.fabrik.pin(frame_start=first, frame_end=last, blend_in=blend_in, blend_out=blend_out)


def test_a_pinned_tip_stays_where_the_target_was_and_follows_again_after():
    rig, target = sliding_rig()
    planted = target_at(target, 12)
    assert pin(rig, 12, 24) == {'FINISHED'}
    held = tips(rig, range(12, 25))
    assert np.abs(held - planted).max() < 1e-5  # the target slid 0.48 meanwhile
    for frame in (5, 30, 40):  # outside the blends: on the target again
        assert np.linalg.norm(tips(rig, [frame])[0] - target_at(target, frame)) < 1e-5
    # Blending in over 3 frames: a third of the way to the pin on frame 10.
    expected = target_at(target, 10) + (planted - target_at(target, 10)) / 3.0
    assert np.linalg.norm(tips(rig, [10])[0] - expected) < 1e-5
    assert pins.spans(rig, rig.fabrik.effectors[0]) == [(12, 24)]


def test_the_tip_stays_put_in_the_world_while_the_rig_object_moves():
    rig, target = sliding_rig(rig_moves=True)
    planted = target_at(target, 8)
    pin(rig, 8, 30)
    held = tips(rig, range(8, 31))
    assert np.abs(held - planted).max() < 1e-5  # the rig moved 0.44 along Y meanwhile


def test_a_rotation_goal_is_held_too():
    rig, target = sliding_rig()
    effector = rig.fabrik.effectors[0]
    effector.use_rotation = True
    for frame in FRAMES:
        target.rotation_euler = Euler((0.0, 0.02 * frame, 0.0))
        target.keyframe_insert("rotation_euler", frame=frame)
    pin(rig, 10, 20)
    scene = bpy.context.scene
    turns = []
    for frame in range(10, 21):
        scene.frame_set(frame)
        evaluated = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
        turns.append((evaluated.matrix_world @ evaluated.pose.bones["bone3"].matrix).to_quaternion())
    assert max(turns[0].rotation_difference(q).angle for q in turns) < 1e-4  # the target turned 11 degrees


@pytest.mark.parametrize("continuous", [False, True])
def test_a_bake_writes_the_held_pose(continuous):
    rig, target = sliding_rig(rig_moves=True)
    pin(rig, 10, 25)
    live = tips(rig, FRAMES)
    result = baking.bake_object(rig, FRAMES, warm_start=continuous)
    assert not rig.fabrik.live and not result.problems
    baked = tips(rig, FRAMES)
    assert np.abs(baked - live).max() < 1e-4
    assert np.abs(baked[9:25] - baked[9]).max() < 1e-4


def test_a_pin_set_by_hand_holds_on_every_frame_and_in_the_bake():
    """Pin not keyed (the bake's lean read of the targets): held wherever its value says."""
    rig, target = sliding_rig()
    effector = rig.fabrik.effectors[0]
    effector.pin, effector.pin_location = 1.0, (1.2, 0.3, 1.6)
    live = tips(rig, range(1, 11))
    assert np.abs(live - (1.2, 0.3, 1.6)).max() < 1e-5
    baking.bake_object(rig, range(1, 11))
    assert np.abs(tips(rig, range(1, 11)) - (1.2, 0.3, 1.6)).max() < 1e-5


def test_pins_follow_their_effector_when_effectors_are_moved():
    rig, target = sliding_rig()
    pin(rig, 12, 24)
    other = rigbuild.make_target("Other", (0.0, 1.0, 2.0))
    second = rigbuild.add_effector(rig, "bone1", other, chain_length=1)
    second.enabled = False
    bpy.context.view_layer.objects.active = rig
    rig.fabrik.active_effector = 0
    assert bpy.ops.fabrik.effector_move(direction='DOWN') == {'FINISHED'}
    assert rig.fabrik.effectors[1].bone == "bone3"
    assert pins.spans(rig, rig.fabrik.effectors[1]) == [(12, 24)] and not pins.spans(rig, rig.fabrik.effectors[0])
    held = tips(rig, range(12, 25))
    assert np.abs(held - held[0]).max() < 1e-5


def test_clear_removes_the_pins_and_the_target_is_followed_again():
    rig, target = sliding_rig()
    pin(rig, 12, 24)
    assert bpy.ops.fabrik.pin_clear() == {'FINISHED'}
    assert pins.spans(rig, rig.fabrik.effectors[0]) == []
    assert not [c for c in animdata.fcurves(rig) if c.data_path.startswith("fabrik")]
    assert np.linalg.norm(tips(rig, [20])[0] - target_at(target, 20)) < 1e-5
    assert bpy.ops.fabrik.pin_clear() == {'CANCELLED'}  # nothing left to clear


def test_undo_takes_a_pin_back_and_pins_save_and_reload(tmp_path):
    rig, target = sliding_rig()
    bpy.ops.ed.undo_push(message="before pin")
    pin(rig, 5, 9)
    bpy.ops.ed.undo_push(message="Pin Target")
    bpy.ops.ed.undo()
    rig = bpy.data.objects["Rig"]
    assert pins.spans(rig, rig.fabrik.effectors[0]) == [] and rig.fabrik.effectors[0].pin == 0.0
    pin(rig, 12, 24)
    path = str(tmp_path / "pinned.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.open_mainfile(filepath=path)
    rig = bpy.data.objects["Rig"]
    assert pins.spans(rig, rig.fabrik.effectors[0]) == [(12, 24)]
    held = tips(rig, range(12, 25))
    assert np.abs(held - held[0]).max() < 1e-5


def test_a_new_pin_replaces_the_pins_it_overlaps_and_leaves_the_others_whole():
    rig, target = sliding_rig()
    effector = rig.fabrik.effectors[0]
    pin(rig, 10, 30)
    pin(rig, 34, 38, blend_in=1, blend_out=1)
    assert pins.spans(rig, effector) == [(10, 30), (34, 38)]
    pin(rig, 15, 20)  # inside the first: it replaces it
    assert pins.spans(rig, effector) == [(15, 20), (34, 38)]
    bpy.context.scene.frame_set(18)
    assert effector.pin == 1.0
    bpy.context.scene.frame_set(26)
    assert effector.pin == 0.0  # (nothing of the old pin is left on its frames)
    pin(rig, 1, 10)  # and one before it, with its blends clear of the next one's
    pin(rig, 12, 16, blend_in=1, blend_out=1)  # overlapping the end of the first and the start of the second
    assert pins.spans(rig, effector) == [(12, 16), (34, 38)]
    held = tips(rig, range(34, 39))
    assert np.abs(held - target_at(target, 34)).max() < 1e-5  # the pin left alone holds where it did


def test_the_pins_of_a_renamed_effector_follow_it_and_a_removed_ones_go_with_it():
    rig, target = sliding_rig()
    effector = rig.fabrik.effectors[0]
    pin(rig, 12, 24)
    effector.name = "Left Foot"
    bpy.context.scene.frame_set(2)  # (a live frame tidies the rig: the keys move under the new name)
    assert pins.spans(rig, effector) == [(12, 24)] and effector.pin_key == "Left Foot"
    held = tips(rig, range(12, 25))
    assert np.abs(held - held[0]).max() < 1e-5 and effector.pin == 1.0
    assert tips(rig, [30]) is not None and effector.pin == 0.0
    bpy.context.view_layer.objects.active = rig
    assert bpy.ops.fabrik.effector_remove() == {'FINISHED'}
    assert not [c for c in animdata.fcurves(rig) if c.data_path.startswith("fabrik")]
    other = rigbuild.add_effector(rig, "bone3", target)
    other.name = "Left Foot"
    assert pins.spans(rig, other) == []


def test_a_pin_whose_last_key_was_deleted_is_replaced_whole():
    rig, target = sliding_rig()
    effector = rig.fabrik.effectors[0]
    pin(rig, 10, 20)
    curve = next(c for c in animdata.fcurves(rig) if c.data_path.endswith(".pin"))
    curve.keyframe_points.remove(next(p for p in curve.keyframe_points if round(p.co[0]) == 22))
    pin(rig, 13, 15, blend_in=1, blend_out=1)
    assert pins.spans(rig, effector) == [(13, 15)]
    bpy.context.scene.frame_set(30)
    assert effector.pin == 0.0


def test_effectors_that_swap_names_swap_their_pins_and_a_renamed_one_holds_on_its_first_frame():
    rig, target = sliding_rig()
    first = rig.fabrik.effectors[0]
    pin(rig, 10, 20)
    other_target = rigbuild.make_target("Other", (0.5, 0.3, 1.2))
    second = rigbuild.add_effector(rig, "bone2", other_target, chain_length=1)
    second.name = "second"
    rig.fabrik.active_effector = 1
    pin(rig, 25, 30, blend_in=1, blend_out=1)
    second.enabled = False  # (it shares the chain: off, the first reaches its pin alone)
    first.name, second.name = "tmp", "bone3"
    first.name = "second"
    bpy.context.scene.frame_set(15)  # (a frame jumped to just after the rename holds the pin already)
    assert first.pin == 1.0 and pins.spans(rig, first) == [(10, 20)] and pins.spans(rig, second) == [(25, 30)]
    held = tips(rig, [15])[0]
    assert np.linalg.norm(held - target_at(target, 10)) < 1e-5


def test_pins_keyed_by_hand_on_an_unnamed_effector_are_found_and_cleared():
    rig, target = sliding_rig()
    effector = rig.fabrik.effectors[0]
    assert effector.name == ""
    for frame, value in ((5, 0.0), (8, 1.0), (14, 1.0), (16, 0.0)):
        effector.pin = value
        rig.keyframe_insert(data_path="fabrik.effectors[0].pin", frame=frame)
    assert pins.spans(rig, effector) == [(8, 14)]
    assert bpy.ops.fabrik.pin_clear() == {'FINISHED'}
    assert pins.spans(rig, effector) == [] and effector.pin == 0.0


def test_effector_add_names_the_effector_after_its_bone():
    rig, target = sliding_rig()
    bpy.ops.object.mode_set(mode='POSE')
    rig.data.bones.active = rig.data.bones["bone2"]
    assert bpy.ops.fabrik.effector_add() == {'FINISHED'}
    bpy.ops.object.mode_set(mode='OBJECT')
    assert rig.fabrik.effectors[-1].name == "bone2"


# -- bad input ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("field,value,message", [
    ("pin", math.nan, "its pin is not a number from 0 to 1"),
    ("pin_location", (math.nan, 0.0, 0.0), "its pin location is not a number"),
    ("pin_rotation", (0.0, 0.0, 0.0, 0.0), "its pin rotation is not a rotation"),
])
def test_a_pin_that_is_not_a_number_is_its_effectors_problem_and_the_others_solve(field, value, message):
    rig, target = sliding_rig()
    other = rigbuild.make_target("Other", (0.3, 0.0, 0.8))
    rigbuild.add_effector(rig, "bone1", other, chain_length=2)
    bad = rig.fabrik.effectors[0]
    bad.use_rotation = field == "pin_rotation"
    bad.pin = 1.0
    setattr(bad, field, value)
    bpy.context.scene.frame_set(2)
    shown = status.statuses[rig.name]
    assert shown.effectors[0] == message
    assert np.linalg.norm(np.array(tip_world(rig, "bone1")) - (0.3, 0.0, 0.8)) < 1e-4  # the other one solved
    kept = getattr(bad, field)
    assert rig.fabrik.live and str(tuple(kept) if field != "pin" else kept) == str(value)  # left as it was
    bad.pin = 0.0  # fixed (no longer pinned): it solves again
    bpy.context.scene.frame_set(3)
    assert status.statuses[rig.name].kind(0) in {'REACHED', 'MISSED'}
    assert status.statuses[rig.name].effectors[0] != message


def test_a_pin_rotation_that_is_no_rotation_is_no_problem_without_a_rotation_goal():
    rig, target = sliding_rig()
    effector = rig.fabrik.effectors[0]
    effector.pin, effector.pin_location, effector.pin_rotation = 1.0, (1.0, 0.2, 1.5), (0.0, 0.0, 0.0, 0.0)
    bpy.context.scene.frame_set(4)
    assert status.statuses[rig.name].effectors[0].startswith("reached")
    assert np.linalg.norm(tips(rig, [4])[0] - (1.0, 0.2, 1.5)) < 1e-5


def test_pin_refuses_an_effector_without_a_target_and_a_backwards_range_and_keys_nothing():
    rig, target = sliding_rig()
    with pytest.raises(RuntimeError, match=r"the End Frame \(10\) comes before the Start Frame \(20\)"):
        pin(rig, 20, 10)
    assert pins.spans(rig, rig.fabrik.effectors[0]) == []
    rig.fabrik.effectors[0].target = None
    with pytest.raises(RuntimeError):  # (poll fails: the button is greyed out)
        pin(rig, 1, 5)
    assert rig.fabrik.effectors[0].pin == 0.0


# -- find contacts -----------------------------------------------------------------------------------------

def walk(frame: int) -> tuple[float, float, float]:
    """A foot that stands for 12 frames, then swings 0.6 forward over 8 frames, lifting 0.3 -- with a little
    jitter while it stands, as captured feet have."""
    cycle, phase = divmod(frame - 1, 20)
    jitter = 0.002 * math.sin(frame * 2.7)
    if phase < 12:
        return (0.6 * cycle + jitter, 0.0, 0.2 + abs(jitter))
    swing = (phase - 11) / 9.0
    return (0.6 * (cycle + swing), 0.0, 0.2 + 0.3 * math.sin(math.pi * swing))


def walking_leg():
    """A two-bone leg (bent at rest, reaching the ground only when straight) hanging from a hip bone that moves
    forward with the walk, its foot target walking."""
    bones = [("hips", (0, 0, 1.9), (0, 0, 2.1), None, False), ("thigh", (0, 0, 1.9), (0, 0.05, 0.95), "hips", True),
             ("shin", (0, 0.05, 0.95), (0, 0, 0.0), "thigh", True)]
    rig = rigbuild.make_armature("Rig", bones)
    foot = rigbuild.make_target("Foot", walk(1))
    rigbuild.add_effector(rig, "shin", foot, chain_length=2)
    rigbuild.key_path(foot, range(1, 61), walk)
    hips = rig.pose.bones["hips"]
    for frame in range(1, 61):
        hips.location = (0.03 * frame, 0.0, 0.0)  # (the hip bone's X is the world's X: forward with the walk)
        hips.keyframe_insert("location", frame=frame)
    rig.fabrik.live = True
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 60
    bpy.context.view_layer.objects.active = rig
    return rig, foot


def test_find_contacts_pins_each_step_of_a_walk_and_the_foot_no_longer_slides():
    rig, foot = walking_leg()
    standing = [range(1 + 20 * k, 13 + 20 * k) for k in range(3)]
    before = [tips(rig, frames) for frames in standing]
    slide_before = max(np.abs(t - t[0]).max() for t in before)
    assert bpy.ops.fabrik.find_contacts() == {'FINISHED'}
    found = pins.spans(rig, rig.fabrik.effectors[0])
    assert len(found) == 3
    for (first, last), frames in zip(found, standing):
        assert abs(first - frames[0]) <= 1 and abs(last - frames[-1]) <= 1, (found, frames)
    after = [tips(rig, range(first, last + 1)) for first, last in found]
    slide_after = max(np.abs(t - t[0]).max() for t in after)
    assert slide_before > 3e-3 and slide_after < 1e-5
    # Between the steps the foot follows its target.
    assert np.linalg.norm(tips(rig, [17])[0] - target_at(foot, 17)) < 1e-4
    assert bpy.context.scene.frame_current == 17 and rig.fabrik.live


def test_find_contacts_on_the_tips_pins_where_the_tip_stood():
    """Looking at the tips as the scene plays them (live solving on while it samples): the same steps, each pin
    holding the tip where it stood on the contact's first frame."""
    rig, foot = walking_leg()
    assert bpy.ops.fabrik.find_contacts(source='TIPS') == {'FINISHED'}
    found = pins.spans(rig, rig.fabrik.effectors[0])
    assert len(found) == 3
    first = found[1][0]
    rig.fabrik.effectors[0].pin = 0.0
    curves = [c for c in animdata.fcurves(rig) if c.data_path.endswith(".pin")]
    animdata.fcurves(rig).remove(curves[0])  # (the tip where it stands without the pin, to compare)
    rig.fabrik.effectors[0].pin = 0.0
    stood = tips(rig, [first])[0]
    location = [c for c in animdata.fcurves(rig) if c.data_path.endswith(".pin_location")]
    held = np.array([c.evaluate(first) for c in sorted(location, key=lambda c: c.array_index)])
    assert np.linalg.norm(held - stood) < 1e-5


def test_find_contacts_cancelled_keys_nothing_and_puts_the_frame_and_live_solving_back():
    rig, foot = walking_leg()
    bpy.context.scene.frame_set(7)
    finder = contact_pins.ContactFinder(bpy.context.scene, rig, [0], range(1, 61))
    assert not rig.fabrik.live
    for _ in range(10):
        finder.step()
    assert finder.progress == (10, 60)
    finder.cancel()
    assert bpy.context.scene.frame_current == 7 and rig.fabrik.live
    assert pins.spans(rig, rig.fabrik.effectors[0]) == []


def test_find_contacts_leaves_out_an_effector_it_cannot_use_and_pins_the_others():
    rig, foot = walking_leg()
    broken = rigbuild.add_effector(rig, "thigh", rig, chain_length=1)
    broken.subtarget = "nope"
    assert bpy.ops.fabrik.find_contacts() == {'FINISHED'}
    assert len(pins.spans(rig, rig.fabrik.effectors[0])) == 3 and pins.spans(rig, broken) == []


def test_find_contacts_dropped_by_a_file_load_touches_nothing_of_the_new_file(tmp_path):
    rig, foot = walking_leg()
    path = str(tmp_path / "walk.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    finder = contact_pins.ContactFinder(bpy.context.scene, rig, [0], range(1, 61))
    for _ in range(5):
        finder.step()
    assert long_work.drop_running in bpy.app.handlers.load_pre
    bpy.ops.wm.open_mainfile(filepath=path)
    assert finder.abandoned
    finder.cancel()
    rig = bpy.data.objects["Rig"]
    assert rig.fabrik.live and bpy.context.scene.frame_current == 1
    with pytest.raises(RuntimeError, match="dropped"):
        finder.step()


def test_find_contacts_refuses_what_it_cannot_use():
    rig, foot = walking_leg()
    with pytest.raises(RuntimeError, match="comes before the Start Frame"):
        bpy.ops.fabrik.find_contacts(frame_start=30, frame_end=10)
    with pytest.raises(RuntimeError, match="Speed and Height"):
        bpy.ops.fabrik.find_contacts(speed=math.nan)
    rig.fabrik.effectors[0].target = None
    with pytest.raises(RuntimeError, match="no effector to find contacts for"):
        bpy.ops.fabrik.find_contacts()
    assert rig.fabrik.live and pins.spans(rig, rig.fabrik.effectors[0]) == []


def test_contacts_are_runs_slow_and_low_enough_and_long_enough():
    points = np.array([walk(f) for f in range(1, 61)])
    found = contacts.find(points, 0.01, 0.05, 4)
    assert [(c.first, c.last) for c in found] == [(0, 11), (20, 31), (40, 51)]
    assert contacts.find(points, 0.01, 0.05, 13) == []
    rising = np.array([(0.0, 0.0, 0.1 * f) for f in range(20)])  # never still: no contact however low
    assert contacts.find(rising, 0.05, 10.0) == []
    assert contacts.blends(found, 3, 60) == [(1, 3), (3, 3), (3, 3)]
    assert contacts.blends(found, 10, 60) == [(1, 4), (4, 4), (4, 8)]
    with pytest.raises(ValueError):
        contacts.find(points, math.nan, 0.05)


# -- what shows --------------------------------------------------------------------------------------------

def test_the_overlay_draws_a_square_at_a_pinned_target_and_none_without_a_pin():
    rig, target = sliding_rig()
    options = types.SimpleNamespace(show_targets=True, show_poles=True, show_reach=False, show_limits=False,
                                    show_trace=False, show_readout=False, limits_of='ACTIVE')

    def drawing():
        return overlay_shapes.build(rig, bpy.context.evaluated_depsgraph_get(), status.statuses.get(rig.name), options)

    assert not drawing().of('pin')
    pin(rig, 1, 20)
    bpy.context.scene.frame_set(5)
    square = drawing().of('pin')
    assert len(square) == 4 and all(s.color == overlay_shapes.PIN_COLOR for s in square)
    centre = sum((s.a for s in square), Vector()) / 4.0
    assert (centre - Vector(rig.fabrik.effectors[0].pin_location)).length < 1e-6
    # The target line ends where the pin holds the target, not at the target that slid on.
    line = drawing().of('target')[0]
    assert (line.b - Vector(rig.fabrik.effectors[0].pin_location)).length < 1e-6


def test_the_pins_panel_shows_the_pin_its_buttons_and_the_held_ranges():
    rig, target = sliding_rig()
    pin(rig, 12, 24)
    pin(rig, 30, 35)
    log = []
    panel = types.SimpleNamespace(layout=RecordingLayout(log))
    context = types.SimpleNamespace(object=rig, scene=bpy.context.scene, region=None,
                                    preferences=bpy.context.preferences)
    assert bpy.types.VIEW3D_PT_fabrik_pins.poll(context)
    bpy.types.VIEW3D_PT_fabrik_pins.draw(panel, context)
    drawn = {args[1] for name, args, _ in log if name == "prop"}
    operators = {args[0] for name, args, _ in log if name == "operator"}
    text = " ".join(kwargs.get("text", "") for name, _, kwargs in log if name == "label")
    assert {"pin", "pin_location"} <= drawn
    assert operators == {"fabrik.pin", "fabrik.pin_clear", "fabrik.find_contacts"}
    assert "12-24" in text and "30-35" in text


def test_a_pin_key_on_a_frame_that_is_not_a_number_breaks_neither_the_panel_nor_the_way_out():
    """A Pin key moved to frame NaN (a script, a broken file): the Pins panel draws (naming the held ranges it can),
    Pin Target keys a new pin and Clear takes every key away, that one too."""
    rig, target = sliding_rig()
    pin(rig, 12, 24)
    curve = next(c for c in animdata.fcurves(rig) if c.data_path.endswith(".pin"))
    curve.keyframe_points[-1].co[0] = math.nan
    log = []
    panel = types.SimpleNamespace(layout=RecordingLayout(log))
    context = types.SimpleNamespace(object=rig, scene=bpy.context.scene, region=None,
                                    preferences=bpy.context.preferences)
    bpy.types.VIEW3D_PT_fabrik_pins.draw(panel, context)  # (it raised ValueError: cannot convert float NaN)
    assert any(name == "operator" and args[0] == "fabrik.pin_clear" for name, args, _ in log)
    assert pin(rig, 30, 35) == {'FINISHED'}
    assert (30, 35) in pins.spans(rig, rig.fabrik.effectors[0])
    assert bpy.ops.fabrik.pin_clear() == {'FINISHED'}
    assert not [c for c in animdata.fcurves(rig) if ".pin" in c.data_path]
    bpy.context.scene.frame_set(30)
    assert status.statuses[rig.name].kind(0) == 'REACHED'  # the target is followed again
