# SPDX-License-Identifier: GPL-3.0-or-later
"""Baking to keyframes in the real bpy module: faithful, untouching, cancellable, undoable, headless, exportable."""

from __future__ import annotations

import math
import subprocess
import sys
import time

import bpy

# isort: split
import addon_utils  # (importable only once bpy is)
import numpy as np
import pytest
from blender_scenes import ROOT, chain_rig, empty_scene, rigbuild

import fabrik_addon
from fabrik_addon.blender.bake import baking
from fabrik_addon.blender.rig import animdata, memory

FRAMES = range(1, 25)


pytestmark = pytest.mark.usefixtures("addon_per_test")


def joint_positions(rig) -> np.ndarray:
    """World heads and tails of every bone as Blender evaluates them."""
    depsgraph = bpy.context.evaluated_depsgraph_get()
    evaluated = rig.evaluated_get(depsgraph)
    world = evaluated.matrix_world
    return np.array([[tuple(world @ pb.head), tuple(world @ pb.tail)] for pb in evaluated.pose.bones])


def play(rig) -> list[np.ndarray]:
    """Joint positions at every test frame as the scene evaluates them now (live solving, or the keys)."""
    scene = bpy.context.scene
    positions = []
    for frame in FRAMES:
        scene.frame_set(frame)
        positions.append(joint_positions(rig))
    return positions


def assert_keys_replay(rig, live: list[np.ndarray], label: str = "") -> None:
    """With the add-on switched off, the keys play back the live solve at every frame (1e-5)."""
    fabrik_addon.unregister()
    for frame, expected, got in zip(FRAMES, live, play(rig)):
        np.testing.assert_allclose(got, expected, atol=1e-5, err_msg=f"{label}frame {frame}")


def animated_chain():
    """A 4-bone chain whose target circles for the test frames."""
    rig, target = chain_rig(count=4)
    rigbuild.key_circle(target, (0.0, 0.0, 2.0), 1.5, FRAMES, axis="XZ")
    return rig


def animated_hand():
    """The hand sample: a tree with five effectors and branch weights."""
    from samples import hand

    return hand.build(FRAMES)


def limited_chain():
    """A chain with hinge and cone limits from Blender's IK settings."""
    rig = animated_chain()
    for pose_bone in rig.pose.bones[1:]:
        pose_bone.lock_ik_y = pose_bone.lock_ik_z = True
        pose_bone.use_ik_limit_x = True
        pose_bone.ik_min_x, pose_bone.ik_max_x = -math.radians(100), math.radians(100)
    rig.pose.bones[0].use_ik_limit_x = rig.pose.bones[0].use_ik_limit_z = True
    return rig


def reset_pose(rig) -> None:
    """Back to the rest pose, as before any solve."""
    for pose_bone in rig.pose.bones:
        pose_bone.rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
    memory.reset()


@pytest.mark.parametrize("build", [animated_chain, animated_hand, limited_chain], ids=["chain", "tree", "limits"])
@pytest.mark.parametrize("continuous", [True, False], ids=["continuous", "per-frame"])
def test_baked_playback_equals_the_live_solve(build, continuous):
    """With the add-on disabled and live solving off, the keys replay the live solve at every frame (1e-5)."""
    rig = build()
    rig.fabrik.start = "PREVIOUS" if continuous else "FK"
    reset_pose(rig)
    live = play(rig)
    reset_pose(rig)
    result = baking.bake_object(rig, FRAMES, warm_start=continuous)
    assert result.frames == len(FRAMES) and not rig.fabrik.live
    assert_keys_replay(rig, live)


def test_the_default_bake_replays_what_live_solving_showed():
    """The operator's default start follows the rig's Start From: its keys replay the live playback for either
    setting (which give different poses on this redundant chain, so the test tells them apart)."""
    shown = {}
    for start in ("FK", "PREVIOUS"):
        empty_scene()
        rig = animated_chain()
        rig.fabrik.start = start
        reset_pose(rig)
        shown[start] = play(rig)
        reset_pose(rig)
        bpy.context.view_layer.objects.active = rig
        assert bpy.ops.fabrik.bake(frame_start=FRAMES.start, frame_end=FRAMES.stop - 1) == {"FINISHED"}
        assert not rig.fabrik.live
        for frame, expected, got in zip(FRAMES, shown[start], play(rig)):
            np.testing.assert_allclose(got, expected, atol=1e-5, err_msg=f"{start}, frame {frame}")
    assert max(np.abs(a - b).max() for a, b in zip(shown["FK"], shown["PREVIOUS"])) > 1e-2


def fcurve_bytes(obj) -> dict:
    """Every key of an object's F-curves, byte for byte: co, handles, interpolation, handle types."""
    collection = animdata.fcurves(obj)
    out = {}
    for fcurve in collection or ():
        n = len(fcurve.keyframe_points)
        parts = []
        for prop, width, dtype in [("co", 2, np.float32), ("handle_left", 2, np.float32), ("handle_right", 2, np.float32),
                                   ("interpolation", 1, np.int32), ("handle_left_type", 1, np.int32)]:
            buffer = np.empty(n * width, dtype=dtype)
            fcurve.keyframe_points.foreach_get(prop, buffer)
            parts.append(buffer.tobytes())
        out[(fcurve.data_path, fcurve.array_index)] = b"".join(parts)
    return out


def test_other_keys_stay_exactly_as_they_were():
    """Keys on other bones, other channels, outside the range and on other objects keep every byte."""
    rig = animated_chain()
    rigbuild.add_effector(rig, "bone1", rig.fabrik.effectors[0].target, chain_length=1, weight=0.0)
    rig.fabrik.effectors[1].enabled = False
    extra = rigbuild.make_armature("Other", rigbuild.chain_bones(2, 1.0, prefix="o"))
    rig.pose.bones["bone3"].location = (0.1, 0.0, 0.0)
    rig.pose.bones["bone3"].keyframe_insert("location", frame=5)  # another channel of a baked bone
    for frame in (0, 30, 31):  # outside the baked range on a baked channel
        rig.pose.bones["bone2"].rotation_quaternion = (0.9, 0.1, 0.2, 0.0)
        rig.pose.bones["bone2"].keyframe_insert("rotation_quaternion", frame=frame)
    rig.keyframe_insert("location", frame=3)  # the object itself
    extra.pose.bones["o0"].keyframe_insert("rotation_quaternion", frame=2)  # another object
    bpy.context.scene.frame_set(1)
    before_rig, before_extra = fcurve_bytes(rig), fcurve_bytes(extra)
    target_before = fcurve_bytes(rig.fabrik.effectors[0].target)
    baking.bake_object(rig, range(5, 21), bones=["bone0", "bone1", "bone2", "bone3"])
    after = fcurve_bytes(rig)
    baked = {f'pose.bones["bone{i}"].rotation_quaternion' for i in range(4)}
    for key, data in before_rig.items():
        if key[0] not in baked:
            assert after[key] == data, key
    # The baked channel kept its keys outside 5..20 exactly (co and interpolation).
    fcurve = animdata.fcurves(rig).find('pose.bones["bone2"].rotation_quaternion', index=1)
    outside = [(round(k.co[0]), k.co[1], k.interpolation) for k in fcurve.keyframe_points if not 5 <= k.co[0] <= 20]
    assert [o[0] for o in outside] == [0, 30, 31] and all(o[1] == pytest.approx(0.1) for o in outside)
    assert fcurve_bytes(extra) == before_extra
    assert fcurve_bytes(rig.fabrik.effectors[0].target) == target_before


def test_cancel_leaves_everything_as_it_was():
    """A bake stopped half way (Esc) writes nothing and restores the frame and live solving."""
    rig = animated_chain()
    scene = bpy.context.scene
    scene.frame_set(7)
    before = fcurve_bytes(rig)
    pose_before = [tuple(pb.rotation_quaternion) for pb in rig.pose.bones]
    baker = baking.Baker(scene, rig, list(FRAMES), baking.bake_bones(rig, "CHAINS"))
    for _ in range(5):
        baker.step()
    baker.cancel()
    assert fcurve_bytes(rig) == before
    assert rig.animation_data is None or rig.animation_data.action is None
    assert scene.frame_current == 7 and rig.fabrik.live
    assert [tuple(pb.rotation_quaternion) for pb in rig.pose.bones] == pose_before


def test_undo_restores_the_state_before_the_bake():
    """The bake is one undo step (the test pushes the steps the UI would push around the operator)."""
    rig = animated_chain()
    bpy.context.view_layer.objects.active = rig
    bpy.ops.ed.undo_push(message="before bake")
    assert bpy.ops.fabrik.bake(frame_start=1, frame_end=10) == {"FINISHED"}
    bpy.ops.ed.undo_push(message="Bake Keyframes")
    rig = bpy.data.objects["Rig"]
    assert animdata.fcurves(rig) is not None and len(animdata.fcurves(rig)) == 16
    bpy.ops.ed.undo()
    rig = bpy.data.objects["Rig"]
    assert rig.animation_data is None or rig.animation_data.action is None
    assert rig.fabrik.live


def test_keys_follow_each_bones_rotation_mode_and_stay_continuous():
    """Euler bones get continuous Euler keys, quaternion bones sign-continuous quaternions, axis-angle its own channel."""
    rig = animated_chain()
    rigbuild.key_circle(rig.fabrik.effectors[0].target, (0.0, 0.0, 1.5), 1.8, range(1, 61), axis="XY", turns=2.0)
    modes = {"bone0": "XYZ", "bone1": "QUATERNION", "bone2": "AXIS_ANGLE", "bone3": "ZXY"}
    for name, mode in modes.items():
        rig.pose.bones[name].rotation_mode = mode
    baking.bake_object(rig, range(1, 61))
    collection = animdata.fcurves(rig)
    paths = {f.data_path.split(".")[-1] for f in collection}
    assert paths == {"rotation_euler", "rotation_quaternion", "rotation_axis_angle"}
    for name, mode in modes.items():
        channel = {"QUATERNION": "rotation_quaternion", "AXIS_ANGLE": "rotation_axis_angle"}.get(mode, "rotation_euler")
        curves = [f for f in collection if f.data_path == f'pose.bones["{name}"].{channel}']
        values = np.array([[k.co[1] for k in f.keyframe_points] for f in curves])
        if mode != "AXIS_ANGLE":  # the axis of an axis-angle flips with the angle's sign; the rotation does not
            assert np.abs(np.diff(values, axis=1)).max() < 1.0, (name, mode)


def test_cleanup_drops_redundant_keys_within_tolerance():
    """With clean-up the curve keeps fewer keys and still passes within the tolerance of every baked value."""
    rig = animated_chain()
    full = baking.bake_object(rig, FRAMES, keep_live=True)
    values = {(f.data_path, f.array_index): [k.co[1] for k in f.keyframe_points] for f in animdata.fcurves(rig)}
    lean = baking.bake_object(rig, FRAMES, cleanup=1e-3)
    assert lean.keys < full.keys and lean.removed_by_cleanup == full.keys - lean.keys
    for fcurve in animdata.fcurves(rig):
        for frame, value in zip(FRAMES, values[(fcurve.data_path, fcurve.array_index)]):
            assert abs(fcurve.evaluate(frame) - value) <= 1e-3 + 1e-6


def test_keys_live_in_the_slot_of_a_layered_action():
    """On Blender 4.4+ the keys go into the channelbag of the rig's slot (Action.fcurves is gone in 5.0)."""
    rig = animated_chain()
    baking.bake_object(rig, FRAMES, new_action=True)
    action = rig.animation_data.action
    assert action.name.startswith("Rig_FABRIK")
    if animdata.LAYERED:
        assert rig.animation_data.action_slot is not None
        assert not hasattr(action, "fcurves") or bpy.app.version < (5, 0, 0)
        channelbag = action.layers[0].strips[0].channelbag(rig.animation_data.action_slot)
        assert len(channelbag.fcurves) == 16


@pytest.mark.skipif(
    bpy.app.version < (5, 0, 0),
    reason="after the glTF add-on has run, the bpy 4.2 module crashes at interpreter exit; the round trip runs on 5.0",
)
def test_gltf_round_trip_keeps_the_baked_poses(tmp_path):
    """Bake, switch the add-on off, export glTF with Blender's exporter, import it again: the poses match."""
    rig = animated_chain()
    baking.bake_object(rig, FRAMES)
    scene = bpy.context.scene
    expected = {}
    fabrik_addon.unregister()
    for frame in (1, 9, 17, 24):
        scene.frame_set(frame)
        expected[frame] = joint_positions(rig)[:, 1]  # tails, world space
    addon_utils.enable("io_scene_gltf2")
    path = str(tmp_path / "rig.glb")
    bpy.ops.object.select_all(action="DESELECT")
    rig.select_set(True)
    bpy.context.view_layer.objects.active = rig
    bpy.ops.export_scene.gltf(filepath=path, use_selection=True, export_animations=True, export_force_sampling=True)
    empty_scene()
    addon_utils.enable("io_scene_gltf2")
    bpy.ops.import_scene.gltf(filepath=path)
    imported = next(o for o in bpy.data.objects if o.type == "ARMATURE")
    scene = bpy.context.scene
    try:
        for frame, tails in expected.items():
            scene.frame_set(frame)
            got = joint_positions(imported)[:, 1]
            # glTF is Y-up; the importer converts back, so world positions compare directly.
            np.testing.assert_allclose(got, tails, atol=1e-4, err_msg=f"frame {frame}")
    finally:
        addon_utils.disable("io_scene_gltf2")


def test_command_line_bake(tmp_path):
    """`python -m fabrik_addon bake` opens a file, bakes the rig and saves; the saved keys replay the solve."""
    rig = animated_chain()
    source, out = str(tmp_path / "scene.blend"), str(tmp_path / "baked.blend")
    bpy.ops.wm.save_as_mainfile(filepath=source)
    result = subprocess.run(
        [sys.executable, "-m", "fabrik_addon", "bake", source, "--object", "Rig", "--frames", "1-12", "--out", out,
         "--start", "previous"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "baked 12 frames of 4 bones of 'Rig'" in result.stdout
    bpy.ops.wm.open_mainfile(filepath=out)
    rig = bpy.data.objects["Rig"]
    assert not rig.fabrik.live
    assert {len(f.keyframe_points) for f in animdata.fcurves(rig)} == {12}
    bad = subprocess.run(
        [sys.executable, "-m", "fabrik_addon", "bake", source, "--object", "Nope"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert bad.returncode == 2 and "no armature object 'Nope'" in bad.stderr


def test_bake_refuses_an_empty_bone_list_clearly():
    """Baking selected bones with none selected says what to do instead of writing nothing silently."""
    rig = animated_chain()
    for pose_bone in rig.pose.bones:
        animdata.set_selected(pose_bone, False)
    with pytest.raises(ValueError, match="no bones to bake"):
        baking.bake_object(rig, FRAMES, bones="SELECTED")


def test_per_frame_bakes_of_free_chains_solve_all_frames_together():
    """A per-frame bake of a free chain reads frames in bulk and solves them at once, in every rotation mode,
    and its keys replay the live solve (this frame's pose) to 1e-5."""
    rig = animated_chain()
    for pose_bone, mode in zip(rig.pose.bones, ["QUATERNION", "XZY", "AXIS_ANGLE", "QUATERNION"]):
        pose_bone.rotation_mode = mode
    rig.pose.bones["bone1"].rotation_euler = (0.1, 0.0, 0.2)  # FK poses that are not the rest pose
    rig.pose.bones["bone2"].rotation_axis_angle = (0.3, 1.0, 0.0, 0.0)
    rig.fabrik.start = "FK"
    memory.reset()
    scene = bpy.context.scene
    live = play(rig)
    rig.pose.bones["bone1"].rotation_euler = (0.1, 0.0, 0.2)
    rig.pose.bones["bone2"].rotation_axis_angle = (0.3, 1.0, 0.0, 0.0)
    for pose_bone in (rig.pose.bones["bone0"], rig.pose.bones["bone3"]):
        pose_bone.rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
    memory.reset()
    baker = baking.Baker(scene, rig, list(FRAMES), baking.bake_bones(rig, "CHAINS"), warm_start=False)
    while not baker.done:
        baker.step()
    assert baker._batch is not None and len(baker._batched) == len(FRAMES)
    baker.finish(new_action=False, keep_live=False)
    assert_keys_replay(rig, live)


def open_hand():
    """The hand sample without its joint limits: fingers hang off the palm at offsets, every chain shares it.

    Rigs without limits are the ones a per-frame bake solves many frames at
    once (the plan on numpy rows: core/chain/fabrik_rows.py), which is what the tests using it look at.
    """
    rig = animated_hand()
    for pose_bone in rig.pose.bones:
        for axis in "xyz":
            setattr(pose_bone, f"lock_ik_{axis}", False)
            setattr(pose_bone, f"use_ik_limit_{axis}", False)
    return rig


def arm_on_a_moving_shoulder():
    """A chain whose fixed parent (the shoulder) is animated, with keyed FK rotations and an animated effector
    setting (so each frame's goals are read in full)."""
    rig = rigbuild.make_armature("Rig", [("shoulder", (0, 0, 0), (0, 0, 1), None, False)] + [
        (f"arm{i}", (0, 0, 1 + i), (0, 0, 2 + i), "shoulder" if i == 0 else f"arm{i - 1}", True) for i in range(3)
    ])
    target = rigbuild.make_target("Target", (1.5, 0.0, 2.5))
    rigbuild.key_circle(target, (0.0, 0.0, 2.5), 1.0, FRAMES, axis="XZ")
    rigbuild.add_effector(rig, "arm2", target, chain_length=3)
    shoulder, arm1 = rig.pose.bones["shoulder"], rig.pose.bones["arm1"]
    for frame, angle in ((1, 0.0), (24, 0.6)):
        shoulder.rotation_quaternion = (math.cos(angle / 2), math.sin(angle / 2), 0.0, 0.0)
        shoulder.keyframe_insert("rotation_quaternion", frame=frame)
        arm1.rotation_quaternion = (math.cos(angle / 3), 0.0, 0.0, math.sin(angle / 3))
        arm1.keyframe_insert("rotation_quaternion", frame=frame)
        rig.fabrik.effectors[0].pole_angle = angle  # no pole target: the solve does not change
        rig.fabrik.effectors[0].keyframe_insert("pole_angle", frame=frame)
    rig.fabrik.live = True
    return rig


def played_from_fk(build):
    """A rig starting each frame from its FK pose, played live (what the bake must replay), then reset."""
    rig = build()
    rig.fabrik.start = "FK"
    live = play(rig)
    for name in baking.bake_bones(rig, "CHAINS"):
        rig.pose.bones[name].rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
    memory.reset()
    return rig, bpy.context.scene, live


@pytest.mark.parametrize("build", [open_hand, arm_on_a_moving_shoulder], ids=["offset-tree", "animated-fk"])
def test_per_frame_bakes_solve_frames_together_and_replay_the_live_solve(build, monkeypatch):
    """Trees with rigid offsets and chains under animated bones go through the batched solve, in several
    chunks (each a step with progress), then convert every quaternion channel in one step, and their keys replay the live solve (this frame's FK pose) to 1e-5."""
    rig, scene, live = played_from_fk(build)
    monkeypatch.setattr(baking, "CHUNK", 7 * len(baking.bake_bones(rig, "CHAINS")))  # 7 frames a step
    baker = baking.Baker(scene, rig, list(FRAMES), baking.bake_bones(rig, "CHAINS"), warm_start=False)
    progress = []
    while not baker.done:
        baker.step()
        progress.append(baker.progress)
    assert baker._batch is not None and len(baker._batched) == len(FRAMES)
    assert baker._batch.lean == (build is open_hand) and baker._batch.static_channels == (build is open_hand)
    done = [p[0] for p in progress]
    assert done == sorted(done) and progress[-1] == (3 * len(FRAMES), 3 * len(FRAMES))
    # reading steps, then the chunks, then the quaternions' conversion at once, then the channels to key
    assert len(progress) == len(FRAMES) + math.ceil(len(FRAMES) / 7) + 2
    result = baker.finish(new_action=False, keep_live=False)
    assert not result.problems
    assert_keys_replay(rig, live)


def gapped_arm_on_a_moving_shoulder():
    """An arm of unconnected bones (rigid offsets: frames are carried) on an animated fixed shoulder."""
    rig = rigbuild.make_armature("Rig", [("shoulder", (0, 0, 0), (0, 0, 1), None, False)] + [
        (f"arm{i}", (0.1, 0, 1.1 + 1.1 * i), (0.1, 0, 2.1 + 1.1 * i), "shoulder" if i == 0 else f"arm{i - 1}", False)
        for i in range(3)
    ])
    target = rigbuild.make_target("Target", (1.5, 0.0, 2.5))
    rigbuild.key_circle(target, (0.0, 0.0, 2.5), 1.0, FRAMES, axis="XZ")
    rigbuild.add_effector(rig, "arm2", target, chain_length=3)
    shoulder = rig.pose.bones["shoulder"]
    for frame, angle in ((1, 0.0), (24, 0.6)):
        shoulder.rotation_quaternion = (math.cos(angle / 2), math.sin(angle / 2), 0.0, 0.0)
        shoulder.keyframe_insert("rotation_quaternion", frame=frame)
    rig.fabrik.live = True
    return rig


@pytest.mark.parametrize("build", [open_hand, gapped_arm_on_a_moving_shoulder], ids=["offset-tree", "moving-parent"])
def test_frames_the_batch_leaves_short_are_solved_again_as_live_solving_does(build, monkeypatch):
    """Where FABRIK's phase (all frames at once) ends short of a target, live solving goes on with its
    refinement: the bake solves those frames again from their own start poses, and still replays the live
    solve to 1e-5. Here every frame is made to count as short, so every one takes that way."""
    from fabrik_addon.core.chain import fabrik_rows

    rig, scene, live = played_from_fk(build)
    framed = fabrik_rows.solve
    short = []

    def nothing_converges(*args):
        *out, converged = framed(*args)
        short.append(len(converged))
        return (*out, np.zeros_like(converged))

    monkeypatch.setattr(fabrik_rows, "solve", nothing_converges)
    baker = baking.Baker(scene, rig, list(FRAMES), baking.bake_bones(rig, "CHAINS"), warm_start=False)
    while not baker.done:
        baker.step()
    assert baker._batch is not None and len(baker._batched) == len(FRAMES) and sum(short) == len(FRAMES)
    baker.finish(new_action=False, keep_live=False)
    assert_keys_replay(rig, live)


def chain_whose_influence_dips():
    """The animated chain with its influence keyed down to a half on frame 10 only."""
    rig = animated_chain()
    for frame, value in ((1, 1.0), (9, 1.0), (10, 0.5), (11, 1.0)):
        rig.fabrik.influence = value
        rig.fabrik.keyframe_insert("influence", frame=frame)
    return rig


@pytest.mark.parametrize(
    "build, alone",
    [(animated_chain, []), (open_hand, []), (arm_on_a_moving_shoulder, []), (gapped_arm_on_a_moving_shoulder, []),
     (chain_whose_influence_dips, [9])],
    ids=["chain", "offset-tree", "moving-parent", "moving-parent-offsets", "influence-dips"],
)
def test_continuous_bakes_solve_each_frame_as_they_read_it_and_replay_the_live_solve(build, alone):
    """A continuous bake of a free tree reads each frame in bulk and solves it at once on plain floats from the
    frame before (a connected chain goes on from the joints its last solve left while nothing above it moves,
    and the local rotations of those frames are worked out together at the end); its keys replay the live
    solve that starts from the previous solution to 1e-5. A frame the batch cannot take (an influence below 1)
    is solved as live solving does, and the frames after it go on from there."""
    rig = build()
    rig.fabrik.start = "PREVIOUS"
    memory.reset()
    live = play(rig)
    baker, result = bake_in_turn(rig)
    assert not result.problems and result.frames == len(FRAMES)
    in_turn = baker._batch.rotations_in_turn()[0]
    # (the first frame has no solution to start from: the general way, as live solving's first frame)
    assert in_turn == [i for i in range(1, len(FRAMES)) if i not in alone]
    assert_keys_replay(rig, live)


def bake_in_turn(rig):
    """A continuous bake of the rig's chains from rest (as its live playback started): the baker and result."""
    for name in baking.bake_bones(rig, "CHAINS"):
        rig.pose.bones[name].rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
    memory.reset()
    baker = baking.Baker(bpy.context.scene, rig, list(FRAMES), baking.bake_bones(rig, "CHAINS"), warm_start=True)
    return baker, baker.finish(new_action=False, keep_live=False)


def chain_in_cones(degrees: float):
    """The animated chain with every bone but the first in an open cone of this half-angle (Blender's IK
    settings), its target on a tilted circle."""
    rig = animated_chain()
    target = bpy.data.objects["Target"]
    for frame in FRAMES:  # a circle tilted out of every bone's plane: the chain rolls as it follows
        angle = 2.0 * math.pi * (frame - FRAMES.start) / len(FRAMES)
        target.location = (1.3 * math.cos(angle), 0.9 * math.sin(angle), 2.2 + 0.7 * math.sin(angle))
        target.keyframe_insert("location", frame=frame)
    for pose_bone in rig.pose.bones[1:]:
        pose_bone.use_ik_limit_x = pose_bone.use_ik_limit_z = True
        pose_bone.ik_min_x = pose_bone.ik_min_z = -math.radians(degrees)
        pose_bone.ik_max_x = pose_bone.ik_max_z = math.radians(degrees)
    return rig


def pose_matrices(rig) -> list[np.ndarray]:
    """Every bone's evaluated pose matrix (twists included) at every test frame."""
    scene = bpy.context.scene
    out = []
    for frame in FRAMES:
        scene.frame_set(frame)
        evaluated = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
        out.append(np.array([np.array(pb.matrix) for pb in evaluated.pose.bones]))
    return out


@pytest.mark.parametrize("degrees", [130.0, 58.0], ids=["wide", "binding"])
def test_per_frame_bakes_of_a_chain_in_open_cones_solve_frames_together(degrees, monkeypatch):
    """A per-frame bake of a chain in open cones runs the free chain's passes for all frames at once, as live
    solving runs them first; the frames where they end inside every cone keep that pose (the tip's twist, which
    no goal moves, kept from its FK pose), then where the even bend left a cone its joints stop on their rims
    in bulk too (`bend.spread_within_rows`), and the others are solved again alone, limits and all. The keys replay
    the live solve, twists included (1e-5)."""
    from fabrik_addon.core.solving import loop, many_frames
    from fabrik_addon.core.solving.parts import LIMITED

    rig = chain_in_cones(degrees)
    rig.fabrik.start = "FK"
    twist = (math.cos(0.15), 0.0, math.sin(0.15), 0.0)

    def fk_pose():
        for pose_bone in rig.pose.bones:
            pose_bone.rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
        rig.pose.bones[-1].rotation_quaternion = twist
        memory.reset()

    fk_pose()
    live = pose_matrices(rig)
    fk_pose()
    solved_alone = []
    whole, together, in_rows = loop.run, many_frames.solve_rows, []

    def rows(*args, **options):  # (only the frames the rows hand on are counted, not the live solves)
        in_rows.append(True)
        try:
            return together(*args, **options)
        finally:
            in_rows.pop()

    monkeypatch.setattr(many_frames, "solve_rows", rows)
    monkeypatch.setattr(loop, "run", lambda *args, **options: (in_rows and solved_alone.append(1)) or whole(*args, **options))
    baker = baking.Baker(bpy.context.scene, rig, list(FRAMES), baking.bake_bones(rig, "CHAINS"), warm_start=False)
    while not baker.done:
        baker.step()
    assert baker._batch is not None and many_frames.on_rows(baker._batch.plan) and baker._batch.plan.parts[0].method == LIMITED
    assert len(baker._batched) == len(FRAMES)
    # (wide cones do not bind on this circle; narrower ones do on some frames, never on all)
    assert (not solved_alone) if degrees > 100.0 else 0 < len(solved_alone) < len(FRAMES), len(solved_alone)
    baker.finish(new_action=False, keep_live=False)
    fabrik_addon.unregister()
    for frame, expected, got in zip(FRAMES, live, pose_matrices(rig)):
        np.testing.assert_allclose(got, expected, atol=1e-5, err_msg=f"frame {frame}")
    twisted = np.array(live[0][-1])[:3, :3] @ np.array([1.0, 0.0, 0.0])
    assert abs(twisted @ np.array(live[0][-2])[:3, 0]) < 0.999  # (the tip's X axis is not its parent's: twisted)


def test_cancel_while_solving_leaves_everything_as_it_was(monkeypatch):
    """Esc after every frame is read, between chunks of the batched solve, still writes nothing."""
    rig = open_hand()
    scene = bpy.context.scene
    scene.frame_set(5)
    monkeypatch.setattr(baking, "CHUNK", 100)
    pose_before = [tuple(pb.rotation_quaternion) for pb in rig.pose.bones]
    baker = baking.Baker(scene, rig, list(FRAMES), baking.bake_bones(rig, "CHAINS"), warm_start=False)
    while baker.index < len(FRAMES) or baker.progress[0] < len(FRAMES) + 5:
        baker.step()
    assert not baker.done
    baker.cancel()
    assert rig.animation_data is None or rig.animation_data.action is None
    assert scene.frame_current == 5 and rig.fabrik.live
    assert [tuple(pb.rotation_quaternion) for pb in rig.pose.bones] == pose_before


def test_a_deleted_target_is_reported_and_the_other_chains_still_bake():
    """Bad input in a bake: one finger's target deleted, another effector switched off. The bake finishes,
    says which effector has no target (a switched-off one is no problem), keys the other chains so they replay
    the live solve, and the orphaned finger keeps the pose it had."""
    rig = open_hand()
    bpy.data.objects.remove(bpy.data.objects["index_target"])
    rig.fabrik.effectors[4].enabled = False  # the pinky
    rig.fabrik.start = "FK"
    live = play(rig)
    reset_pose(rig)
    result = baking.bake_object(rig, FRAMES)
    assert len(result.problems) == len(FRAMES)
    # (the effector by its name, as the panel names it, not by its place in the list)
    effector = rig.fabrik.effectors[1]
    named = f"'{effector.name or effector.bone}': no target object"  # (unnamed: by its bone)
    assert all(named in problem and "disabled" not in problem for problem in result.problems), result.problems[:2]
    assert not any(": 1: " in problem for problem in result.problems)
    baked = {f.data_path.split('"')[1] for f in animdata.fcurves(rig)}
    assert {"index0", "index1", "index2", "thumb2", "palm"} <= baked and not baked & {"pinky0", "pinky1", "pinky2"}
    assert_keys_replay(rig, live)
    index = [k.co[1] for f in animdata.fcurves(rig) if f.data_path == 'pose.bones["index1"].rotation_quaternion'
             for k in f.keyframe_points]
    assert np.allclose(np.reshape(index, (4, -1)).T, (1.0, 0.0, 0.0, 0.0))  # still the rest pose it had


def test_frames_whose_solve_settings_are_animated_keep_their_own_settings():
    """Keyed rig settings (here the iteration cap) split a per-frame bake: each frame is solved with its own,
    as live solving would, and the keys replay the live solve."""
    rig = open_hand()
    rig.fabrik.start = "FK"
    for frame, iterations in ((1, 50), (12, 50), (13, 2)):
        rig.fabrik.iterations = iterations
        rig.fabrik.keyframe_insert("iterations", frame=frame)
    scene = bpy.context.scene
    live = play(rig)
    reset_pose(rig)
    baker = baking.Baker(scene, rig, list(FRAMES), baking.bake_bones(rig, "CHAINS"), warm_start=False)
    result = baker.finish(new_action=False, keep_live=False)
    assert baker._batched == list(range(12)), "frames 13 on have other settings than the batch"
    assert result.frames == len(FRAMES)
    assert_keys_replay(rig, live)


def limited_arm_on_a_moving_shoulder():
    """The arm on its animated shoulder, each arm bone in a cone: the rig the continuous bake follows is made
    anew every frame, from the pose the shoulder has then."""
    rig = arm_on_a_moving_shoulder()
    for pose_bone in rig.pose.bones[1:]:
        pose_bone.use_ik_limit_x = pose_bone.use_ik_limit_z = True
        pose_bone.ik_min_x = pose_bone.ik_min_z = -math.radians(120)
        pose_bone.ik_max_x = pose_bone.ik_max_z = math.radians(120)
    return rig


def cones_whose_target_jumps():
    """The chain in cones with its target thrown across the chain at frame 12 (and back at 13)."""
    rig = chain_in_cones(90.0)
    target = bpy.data.objects["Target"]
    target.location = (-1.2, -0.8, 1.5)
    target.keyframe_insert("location", frame=12)
    return rig


def test_a_continuous_bake_of_a_limited_rig_with_a_rotation_goal_replays_the_live_solve():
    """A rotation goal on a limited chain: its target turns from frame to frame, which the frames' cheap read reads
    with the target's place; the keys replay the live solve (1e-5)."""
    rig = chain_in_cones(90.0)
    target = bpy.data.objects["Target"]
    for frame in FRAMES:
        target.rotation_euler = (0.05 * frame, 0.0, 0.03 * frame)
        target.keyframe_insert("rotation_euler", frame=frame)
    rig.fabrik.effectors[0].use_rotation = True
    rig.fabrik.start = "PREVIOUS"
    memory.reset()
    live = pose_matrices(rig)
    baker, result = bake_in_turn(rig)
    assert result.frames == len(FRAMES) and baker._batch is not None
    fabrik_addon.unregister()
    for frame, expected, got in zip(FRAMES, live, pose_matrices(rig)):
        np.testing.assert_allclose(got, expected, atol=1e-5, err_msg=f"frame {frame}")


@pytest.mark.parametrize(
    "build", [lambda: chain_in_cones(90.0), limited_chain, limited_arm_on_a_moving_shoulder, cones_whose_target_jumps],
    ids=["cones", "hinges", "moving-parent", "target-jumps"],
)
def test_continuous_bakes_of_limited_rigs_follow_each_frame_from_the_last_and_replay_the_live_solve(
    build, monkeypatch
):
    """A continuous bake of a limited rig goes on from the limits' coordinates its last frame's solve left
    (`stages.followed`, as live solving from the previous solution moves first, with what continuity mode
    carries), without reading the whole rig again: on exactly the frames live solving moved so. Frames that take
    the whole solve (a target thrown far) are solved as live solving does. The keys replay the live solve, twists
    included (1e-5)."""
    from fabrik_addon.core.joints import settle
    from fabrik_addon.core.solving.parts import LIMITED

    followed = []  # (whether each settling step of `stages.followed` reached)
    follow = settle.follow
    monkeypatch.setattr(settle, "follow", lambda *a: followed.append(follow(*a)) or followed[-1])
    rig = build()
    rig.fabrik.start = "PREVIOUS"
    memory.reset()
    live, moved = [], []
    for frame in FRAMES:
        followed.clear()
        live += pose_matrices_at(rig, frame)
        moved.append(any(reached for _, reached in followed))
    for name in baking.bake_bones(rig, "CHAINS"):  # (from rest, as the live playback started)
        rig.pose.bones[name].rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
    memory.reset()
    baker = baking.Baker(bpy.context.scene, rig, list(FRAMES), baking.bake_bones(rig, "CHAINS"), warm_start=True)
    baked = []
    while baker.index < len(FRAMES):
        followed.clear()
        baker.step()
        baked.append(any(reached for _, reached in followed))
    result = baker.finish(new_action=False, keep_live=False)
    assert result.frames == len(FRAMES) and baker._batch.plan.parts[0].method == LIMITED
    if build is cones_whose_target_jumps:
        assert not moved[11] and not moved[12]  # (frames 12 and 13: the target thrown far and back)
    assert baked == moved and sum(moved) >= len(FRAMES) // 2
    fabrik_addon.unregister()
    for frame, expected in zip(FRAMES, live):
        np.testing.assert_allclose(pose_matrices_at(rig, frame)[0], expected, atol=1e-5, err_msg=f"frame {frame}")


def pose_matrices_at(rig, frame: int) -> list[np.ndarray]:
    """Every bone's evaluated pose matrix at one frame (as `pose_matrices`)."""
    bpy.context.scene.frame_set(frame)
    evaluated = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
    return [np.array([np.array(pb.matrix) for pb in evaluated.pose.bones])]


def hinged_arm_on_a_moving_shoulder():
    """The arm on its animated shoulder in cones, its twists locked (no open cone: not solved on rows)."""
    rig = limited_arm_on_a_moving_shoulder()
    for pose_bone in rig.pose.bones[1:]:
        pose_bone.lock_ik_y = True
    return rig


def limited_chain_with_keyed_bones():
    """The limited chain with its second bone keyed to bend further and further across the test frames: each
    frame starts from a pose of its own."""
    rig = limited_chain()
    bone = rig.pose.bones[1]
    bone.rotation_mode = 'XYZ'
    for frame, degrees in ((FRAMES[0], 0.0), (FRAMES[-1], 80.0)):
        bone.rotation_euler = (math.radians(degrees), 0.0, 0.0)
        bone.keyframe_insert("rotation_euler", frame=frame)
    return rig


def hinged_arm_on_a_shoulder_turned_by_a_constraint():
    """The arm in cones, its twists locked, on a shoulder that a Copy Rotation of an animated empty turns: the
    shoulder's frame changes from frame to frame while every channel stays as it is."""
    rig = rigbuild.make_armature("Rig", [("shoulder", (0, 0, 0), (0, 0, 1), None, False)] + [
        (f"arm{i}", (0, 0, 1 + i), (0, 0, 2 + i), "shoulder" if i == 0 else f"arm{i - 1}", True) for i in range(3)
    ])
    target = rigbuild.make_target("Target", (1.5, 0.0, 2.5))
    rigbuild.key_circle(target, (0.0, 0.0, 2.5), 1.0, FRAMES, axis="XZ")
    rigbuild.add_effector(rig, "arm2", target, chain_length=3)
    turner = rigbuild.make_target("Turner", (0.0, 0.0, 0.0))
    for frame, angle in ((FRAMES[0], 0.0), (FRAMES[-1], 0.6)):
        turner.rotation_euler = (angle, 0.0, 0.0)
        turner.keyframe_insert("rotation_euler", frame=frame)
    constraint = rig.pose.bones["shoulder"].constraints.new('COPY_ROTATION')
    constraint.target = turner
    for pose_bone in rig.pose.bones[1:]:
        pose_bone.use_ik_limit_x = pose_bone.use_ik_limit_z = True
        pose_bone.ik_min_x = pose_bone.ik_min_z = -math.radians(120)
        pose_bone.ik_max_x = pose_bone.ik_max_z = math.radians(120)
        pose_bone.lock_ik_y = True
    rig.fabrik.live = True
    return rig


@pytest.mark.parametrize(
    "build", [
        limited_chain, hinged_arm_on_a_moving_shoulder, limited_chain_with_keyed_bones,
        hinged_arm_on_a_shoulder_turned_by_a_constraint,
    ],
    ids=["hinges", "moving-parent", "keyed-bones", "constrained-parent"],
)
def test_per_frame_bakes_of_limited_rigs_solve_each_frame_from_its_own_pose_as_they_read_it(build, monkeypatch):
    """A per-frame bake of a rig whose plan does not solve frames together (joint limits) reads each frame as
    cheaply as a continuous bake does and solves it from that frame's own pose at once, without the whole read
    of the rig (a frame that reads as the one before starts where it started: on the unanimated chain, every frame
    after the first; the fixed bones' frames made again only where their matrices changed); its keys replay the
    live solve (1e-5)."""
    from fabrik_addon.blender import solve
    from fabrik_addon.blender.bake import reading

    rig = build()
    rig.fabrik.start = "FK"
    reset_pose(rig)
    live = play(rig)
    reset_pose(rig)
    whole, starts, fixed = [], [], []
    compute = solve.compute
    monkeypatch.setattr(solve, "compute", lambda *a, **k: whole.append(1) or compute(*a, **k))
    solved, make_fixed = reading.FrameRows._solved, reading.FrameRows._fixed
    # (each frame's start, as the frame's solve takes it)
    monkeypatch.setattr(reading.FrameRows, "_solved", lambda self, i, start, *a: starts.append(start) or solved(
        self, i, start, *a
    ))
    monkeypatch.setattr(reading.FrameRows, "_fixed", lambda *a, **k: fixed.append(1) or make_fixed(*a, **k))
    baker = baking.Baker(bpy.context.scene, rig, list(FRAMES), baking.bake_bones(rig, "CHAINS"), warm_start=False)
    while not baker.done:
        baker.step()
    result = baker.finish(new_action=False, keep_live=False)
    assert result.frames == len(FRAMES) and not baker._batch.together and baker.solved.all()
    assert not whole
    assert len(starts) == len(FRAMES)
    assert len({id(start) for start in starts}) == (1 if build is limited_chain else len(FRAMES))
    assert len(fixed) == (1 if build in (limited_chain, limited_chain_with_keyed_bones) else len(FRAMES))
    assert_keys_replay(rig, live)



@pytest.mark.parametrize("build", [limited_chain, limited_chain_with_keyed_bones], ids=["hinges", "keyed-bones"])
def test_a_per_frame_bake_of_a_limited_rig_starts_from_the_pose_live_solving_holds_under_its_writes(build):
    """Baked straight after live playback, while the chain bones hold what live solving wrote last: the bake
    switches live solving off first, which gives the animator's pose back, so a per-frame bake of the limited rig
    starts each frame from it, as live solving does, not from the written one; its keys replay the live solve
    (1e-5)."""
    rig = build()
    rig.fabrik.start = "FK"
    reset_pose(rig)
    live = play(rig)
    written = [tuple(pb.rotation_quaternion) for pb in rig.pose.bones]
    assert max(abs(c) for q in written for c in q[1:]) > 0.1  # (the last frame's solve, not rest)
    memory.reset()
    baker = baking.Baker(bpy.context.scene, rig, list(FRAMES), baking.bake_bones(rig, "CHAINS"), warm_start=False)
    while not baker.done:
        baker.step()
    result = baker.finish(new_action=False, keep_live=False)
    assert result.frames == len(FRAMES) and not baker._batch.together and baker.solved.all()
    assert_keys_replay(rig, live)


def chain_solved_by_ccd():
    """The animated chain solved by CCD: every frame of its bake is read whole."""
    rig = animated_chain()
    rig.fabrik.solver = "CCD"
    return rig


@pytest.mark.parametrize(
    "build, continuous",
    [(animated_chain, False), (limited_chain, False), (limited_chain, True), (chain_whose_influence_dips, True),
     (chain_solved_by_ccd, False)],
    ids=["together", "each-from-its-own-pose", "each-from-the-last", "one-frame-read-whole", "all-read-whole"],
)
def test_a_bake_says_how_much_of_its_time_the_solver_took(build, continuous, monkeypatch):
    """The bake's result gives the time the rig's plan spent solving, every solve counted once, whichever way
    the frames were solved: together, one by one from their own pose or the last, or read whole. (The clock
    here moves only while the plan solves, a second a solve, so the result must count those seconds exactly.)"""
    from fabrik_addon.core.solving import many_frames
    from fabrik_addon.core.solving.plan import Plan

    clock = [0.0]
    solves = []

    def timed(method):
        def call(*args, **kwargs):
            solves.append(method.__name__)
            try:
                return method(*args, **kwargs)
            finally:
                clock[0] += 1.0
        return call

    rig = build()
    rig.fabrik.live = False  # (only the bake's solves)
    monkeypatch.setattr(Plan, "solve", timed(Plan.solve))
    monkeypatch.setattr(many_frames, "solve_rows", timed(many_frames.solve_rows))
    monkeypatch.setattr(time, "perf_counter", lambda: clock[0])
    result = baking.bake_object(rig, FRAMES, warm_start=continuous)
    assert result.frames == len(FRAMES)
    assert solves and result.solver_seconds == clock[0] == len(solves)
