# SPDX-License-Identifier: GPL-3.0-or-later
"""Nothing a user or a careless file does breaks a rig (issue 14), in the real bpy module: no NaN keys, a refused
or dropped bake leaves the rig working, rotation modes switched before a bake, linked rigs, tiny rotations."""

from __future__ import annotations

import math

import bpy
import numpy as np
import pytest
from blender_scenes import chain_rig, rigbuild, target_world, tip_world

from fabrik_addon.blender import long_work
from fabrik_addon.blender.bake import baking, keys
from fabrik_addon.blender.rig import animdata, armature, memory
from fabrik_addon.blender.rig.channels import channel_matrix
from fabrik_addon.blender.rig.status import statuses
from fabrik_addon.core.math import matrix_rows, rotation_channels


def _frozen() -> list[str]:
    """The rigs whose structure a bake holds unchecked."""
    return [name for name in memory.names() if memory.get(name).frozen]


FRAMES = range(1, 11)

pytestmark = pytest.mark.usefixtures("addon_per_test")


def keys_of(obj) -> dict[tuple[str, int], list[tuple[float, float]]]:
    """Every key of the object's action: (data path, index) -> [(frame, value)]."""
    return {
        (f.data_path, f.array_index): [tuple(k.co) for k in f.keyframe_points] for f in animdata.fcurves(obj) or ()
    }


def assert_no_nan_keys(obj) -> None:
    """No key of the object's action is NaN or infinite."""
    for path, points in keys_of(obj).items():
        assert np.isfinite(points).all(), path


def reports(capfd) -> str:
    """What operators reported since the last call (Blender prints reports in background mode)."""
    out, err = capfd.readouterr()
    return out + err


def assert_rig_works(rig, target) -> None:
    """Solve Now and live solving both pose the rig onto its target afterwards."""
    bpy.context.view_layer.objects.active = rig
    assert not _frozen(), "no rig may stay frozen after a bake ends"
    rig.fabrik.live = False
    assert bpy.ops.fabrik.solve() == {"FINISHED"}
    assert statuses[rig.name].ok and not statuses[rig.name].missed, statuses[rig.name].message
    rig.fabrik.live = True
    scene = bpy.context.scene
    for frame in (FRAMES.start, FRAMES.start + 3):
        scene.frame_set(frame)
        assert rig.fabrik.live, statuses[rig.name].message
        assert statuses[rig.name].ok and not statuses[rig.name].missed
        tip = rig.fabrik.effectors[0].bone
        assert (tip_world(rig, tip) - target_world(target)).length < 1e-3


def moving_chain(live: bool = False):
    """A 4-bone chain whose target circles within reach over the test frames."""
    rig, target = chain_rig(count=4, live=live)
    rigbuild.key_circle(target, (0.0, 0.0, 2.5), 0.8, FRAMES, axis="XZ")
    return rig, target


# 1. NaN keys ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("continuous", [True, False], ids=["continuous", "per-frame"])
def test_a_zero_scaled_parent_above_the_chain_gives_no_nan_keys(continuous, capfd):
    """A bone above the chain scaled to zero from frame 3 on (a common way to hide parts): the bake keys frames
    1-2, writes no NaN, leaves the animator's key on a skipped frame alone, says which bones and why, and the
    operator reports a warning. Playing the keys back never poses the chain with NaN."""
    rig, target = moving_chain()
    rig.fabrik.effectors[0].chain_length = 3  # bone1..bone3; bone0 is above the chain
    rig.fabrik.start = "PREVIOUS" if continuous else "FK"
    root = rig.pose.bones["bone0"]
    for frame, scale in ((1, 1.0), (2, 1.0), (3, 0.0)):
        root.scale = (scale,) * 3
        root.keyframe_insert("scale", frame=frame)
    for fcurve in animdata.fcurves(rig):
        for point in fcurve.keyframe_points:
            point.interpolation = "CONSTANT"
    animator = rig.pose.bones["bone2"]
    animator.rotation_quaternion = (0.9, 0.1, 0.0, 0.0)
    animator.keyframe_insert("rotation_quaternion", frame=5)  # a key the bake cannot replace with anything finite
    result = baking.bake_object(rig, FRAMES, warm_start=continuous)
    assert_no_nan_keys(rig)
    skipped = list(range(3, 11))
    assert result.skipped == {"bone1": skipped, "bone2": skipped, "bone3": skipped}
    for name in ("bone1", "bone2", "bone3"):
        assert any(f"'{name}': no finite pose at frames 3-10 (its parent 'bone0' is scaled to zero)" in p
                   for p in result.problems), result.problems
    keys = keys_of(rig)
    assert [f for f, _ in keys[('pose.bones["bone1"].rotation_quaternion', 0)]] == [1.0, 2.0]
    kept = keys[('pose.bones["bone2"].rotation_quaternion', 0)]
    assert [f for f, _ in kept] == [1.0, 2.0, 5.0] and kept[2][1] == pytest.approx(0.9)
    scene = bpy.context.scene
    for frame in FRAMES:
        scene.frame_set(frame)
        for pose_bone in rig.pose.bones:
            assert np.isfinite(tuple(pose_bone.rotation_quaternion)).all(), (frame, pose_bone.name)

    # The operator says it: warnings, not a plain success.
    bpy.context.view_layer.objects.active = rig
    reports(capfd)
    start = "PREVIOUS" if continuous else "FK"
    assert bpy.ops.fabrik.bake(frame_start=1, frame_end=10, start=start) == {"FINISHED"}
    said = reports(capfd)
    assert "Warning: Baked 10 frames" in said and "3 bone(s) left unkeyed" in said, said
    assert "no finite pose at frames 3-10" in said
    assert_no_nan_keys(rig)


@pytest.mark.parametrize("continuous", [True, False], ids=["continuous", "per-frame"])
@pytest.mark.parametrize("limited", [True, False], ids=["hinges", "free"])
def test_a_chain_bone_whose_rotation_is_not_a_number_leaves_its_chain_unkeyed_saying_which(limited, continuous):
    """A chain bone in axis-angle mode whose axis is not a number (a careless script): the bake, of a chain with
    hinges or without limits, writes no NaN key, leaves the chain's bones unkeyed and names that bone as the
    reason for each of them (as live solving refuses the chain naming it); the solver raises nothing on the way."""
    rig, target = moving_chain()
    if limited:
        for pose_bone in rig.pose.bones[1:]:
            pose_bone.lock_ik_y = pose_bone.lock_ik_z = True
            pose_bone.use_ik_limit_x = True
            pose_bone.ik_min_x, pose_bone.ik_max_x = -math.radians(100), math.radians(100)
    rig.fabrik.start = "PREVIOUS" if continuous else "FK"
    broken = rig.pose.bones["bone2"]
    broken.rotation_mode = 'AXIS_ANGLE'
    broken.rotation_axis_angle = (0.3, math.nan, 0.0, 1.0)
    result = baking.bake_object(rig, FRAMES, warm_start=continuous)
    assert_no_nan_keys(rig)
    assert result.skipped and "bone2" in result.skipped, result.skipped
    for name in result.skipped:
        why = "its rotation is not a number" if name == "bone2" else "bone 'bone2' has a rotation that is not a number"
        assert any(f"'{name}': no finite pose at frames 1-10 ({why} there)" in p for p in result.problems), (
            result.problems
        )
    assert not any("cannot convert" in p or "FABRIK:" in p for p in result.problems), result.problems


def test_a_selected_unsolved_bone_under_a_zero_scaled_root_gets_no_nan_keys(capfd):
    """Baking the selected bones, one of them moved by no effector and hanging from a root scaled to zero: it
    gets no key at all (no action is made for nothing), and the operator warns which bone and why."""
    rig = rigbuild.make_armature("Rig", [
        ("root", (0, 0, 0), (0, 0, 1), None, False),
        ("side", (0, 0, 1), (1, 0, 1), "root", False),
        ("arm0", (0, 0, 2), (0, 0, 3), None, False),
        ("arm1", (0, 0, 3), (0, 0, 4), "arm0", True),
    ])
    target = rigbuild.make_target("Target", (1.0, 0.0, 3.5))
    rigbuild.add_effector(rig, "arm1", target)
    rig.pose.bones["root"].scale = (0.0, 0.0, 0.0)
    for pose_bone in rig.pose.bones:
        animdata.set_selected(pose_bone, pose_bone.name == "side")
    result = baking.bake_object(rig, FRAMES, bones="SELECTED")
    assert result.keys == 0 and result.skipped == {"side": list(FRAMES)}
    assert rig.animation_data is None or rig.animation_data.action is None
    assert result.problems == [
        "'side': no finite pose at frames 1-10 (its parent 'root' is scaled to zero); those frames keep the keys they had"
    ]
    bpy.context.view_layer.objects.active = rig
    reports(capfd)
    assert bpy.ops.fabrik.bake(frame_start=1, frame_end=10, bones="SELECTED") == {"FINISHED"}
    said = reports(capfd)
    assert "Warning: 'side': no finite pose" in said and "Warning: Baked 10 frames of 1 bones" in said, said


# 2. A refused or dropped bake leaves the rig working ------------------------------------------------------------


def test_baking_in_edit_mode_is_refused_and_the_rig_keeps_working():
    """After a bone rename in Edit Mode, a bake is refused with a clear message and sets nothing up: leaving
    Edit Mode, Solve Now and live solving work (before, the rig stayed frozen and raised KeyError)."""
    rig, target = moving_chain(live=True)
    bpy.context.view_layer.objects.active = rig
    bpy.ops.object.mode_set(mode="EDIT")
    rig.data.edit_bones["bone1"].name = "renamed"
    with pytest.raises(RuntimeError, match="Cannot bake: 'Rig' is in Edit Mode: switch to Pose or Object Mode"):
        bpy.ops.fabrik.bake(frame_start=1, frame_end=10)  # an operator's error report raises in Python
    with pytest.raises(ValueError, match="Edit Mode"):
        baking.bake_object(rig, FRAMES)
    assert not _frozen() and rig.fabrik.live
    assert rig.animation_data is None or rig.animation_data.action is None
    bpy.ops.object.mode_set(mode="POSE")
    assert "renamed" in rig.pose.bones
    assert_rig_works(rig, target)


def test_a_bake_of_bones_the_rig_lacks_is_refused_and_the_rig_keeps_working():
    """Bones the rig does not have: refused before anything is set up; between the steps of a bake nothing
    stays frozen; the rig solves afterwards."""
    rig, target = moving_chain(live=True)
    scene = bpy.context.scene
    scene.frame_set(4)
    with pytest.raises(ValueError, match="no bone 'nope' in 'Rig'"):
        baking.bake_object(rig, FRAMES, bones=["bone1", "nope"])
    assert rig.fabrik.live and not _frozen() and scene.frame_current == 4
    baker = baking.Baker(scene, rig, list(FRAMES), baking.bake_bones(rig, "CHAINS"))
    baker.step()
    assert not rig.fabrik.live and not _frozen()  # a modal bake waits here for its next timer event
    baker.cancel()
    assert rig.fabrik.live and scene.frame_current == 4
    assert_rig_works(rig, target)


def test_a_bake_dropped_by_a_file_load_leaves_nothing_behind(tmp_path):
    """A modal bake holds a Baker between timer events; a file load there drops it (Blender cancels the
    operator). The loaded file's rig of the same name then solves with Solve Now and live, and the dropped
    bake touches nothing of the new file."""
    rig, _ = moving_chain(live=True)
    path = str(tmp_path / "scene.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    baker = baking.Baker(bpy.context.scene, rig, list(FRAMES), baking.bake_bones(rig, "CHAINS"))
    for _ in range(4):
        baker.step()  # what the modal operator does on its timer events
    assert long_work.drop_running in bpy.app.handlers.load_pre
    assert callable(getattr(bpy.types.FABRIK_OT_bake, "cancel", None)), "Blender cancels a modal operator on load"
    bpy.ops.wm.open_mainfile(filepath=path)
    assert baker.abandoned and not _frozen()
    baker.cancel()  # what the operator's cancel() does: nothing of the new file changes
    rig = bpy.data.objects["Rig"]
    assert rig.fabrik.live and bpy.context.scene.frame_current == 1
    with pytest.raises(RuntimeError, match="dropped"):
        baker.step()
    assert_rig_works(rig, bpy.data.objects["Target"])


# 4. Rotation modes switched right before a bake -------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["XYZ", "AXIS_ANGLE"])
@pytest.mark.parametrize("continuous", [True, False], ids=["continuous", "per-frame"])
def test_a_rotation_mode_switched_before_the_bake_keys_the_new_channel(mode, continuous):
    """Live solving poses a quaternion chain (and keeps what it wrote), one bone is switched to another
    rotation mode, and the bake follows at once: that bone's keys go into its new channel, none into the old,
    and the keys pose the chain onto the target."""
    rig, target = moving_chain(live=True)
    rig.fabrik.start = "PREVIOUS" if continuous else "FK"
    scene = bpy.context.scene
    scene.frame_set(2)
    bpy.context.view_layer.update()
    rig.pose.bones["bone2"].rotation_mode = mode
    result = baking.bake_object(rig, FRAMES, warm_start=continuous)
    assert not result.problems and not result.skipped
    channel = "rotation_euler" if mode == "XYZ" else "rotation_axis_angle"
    paths = {path for path, _ in keys_of(rig)}
    assert f'pose.bones["bone2"].{channel}' in paths and 'pose.bones["bone2"].rotation_quaternion' not in paths
    assert_no_nan_keys(rig)
    for frame in FRAMES:
        scene.frame_set(frame)
        assert (tip_world(rig, "bone3") - target_world(target)).length < 1e-3, frame


# 9. Library-linked rigs and actions ---------------------------------------------------------------------------------


@pytest.fixture
def library(tmp_path):
    """A library file holding a rig with a keyed action and its target."""
    rig, _ = moving_chain(live=False)
    rig.pose.bones["bone1"].keyframe_insert("location", frame=1)
    rig.animation_data.action.name = "RigAction"
    path = str(tmp_path / "library.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.read_factory_settings(use_empty=True)
    return path


def link_rig(path: str):
    """Link the library's rig and target into the open file and the scene."""
    with bpy.data.libraries.load(path, link=True) as (source, linked):
        linked.objects = ["Rig", "Target"]
    for obj in linked.objects:
        bpy.context.scene.collection.objects.link(obj)
    return next(o for o in bpy.data.objects if o.name == "Rig" and o.library is not None)


def test_a_linked_rig_is_refused_with_a_clear_message(library):
    """Keys into a linked rig would be gone after save and reload: the bake refuses and says what to do."""
    rig = link_rig(library)
    assert rig.library is not None
    with pytest.raises(ValueError, match="linked from the library .*make a library override"):
        baking.bake_object(rig, FRAMES)
    bpy.context.view_layer.objects.active = rig
    with pytest.raises(RuntimeError, match="Cannot bake: 'Rig' is linked from the library"):
        bpy.ops.fabrik.bake(frame_start=1, frame_end=10)
    assert rig.animation_data.action.name == "RigAction" and not _frozen()


def test_a_library_override_bakes_into_a_new_action_and_keeps_its_keys(library, tmp_path):
    """An override of the linked rig bakes; its linked action is refused (its keys would not be saved), a new
    action is not; the keys are there after save and reload."""
    linked = link_rig(library)
    rig = linked.override_create(remap_local_usages=True)
    assert rig.library is None and rig.override_library is not None
    assert rig.animation_data.action.library is not None
    scene = bpy.context.scene
    scene.frame_set(3)
    with pytest.raises(ValueError, match="the action 'RigAction' is linked from the library .*bake into a new action"):
        baking.bake_object(rig, FRAMES)  # refused once solved, before any key is written
    assert scene.frame_current == 3 and not _frozen()  # all put back
    bpy.context.view_layer.objects.active = rig
    with pytest.raises(RuntimeError, match="bake into a new action"):
        bpy.ops.fabrik.bake(frame_start=1, frame_end=10)  # refused up front
    result = baking.bake_object(rig, FRAMES, new_action=True)
    assert result.keys == 16 * len(FRAMES) and not result.problems
    saved = str(tmp_path / "shot.blend")
    bpy.ops.wm.save_as_mainfile(filepath=saved)
    bpy.ops.wm.open_mainfile(filepath=saved)
    rig = next(o for o in bpy.data.objects if o.name == "Rig" and o.library is None)
    assert rig.animation_data.action.name.startswith("Rig_FABRIK")
    assert {len(points) for points in keys_of(rig).values()} == {len(FRAMES)}
    assert_no_nan_keys(rig)


# 10. Rotations in double precision ----------------------------------------------------------------------------------


MODES = ["QUATERNION", "AXIS_ANGLE", "XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX"]


@pytest.mark.parametrize("mode", MODES)
def test_a_tiny_rotation_survives_the_round_trip_in_every_mode(mode):
    """A 1e-5 rad turn, from its channel value to a matrix and back (`channels.channel_matrix`,
    `armature.channel_value`), keeps its angle to 1e-12 relative, in every rotation mode."""
    angle = 1e-5
    axis = np.array([0.6, 0.0, 0.8])
    value = {
        "QUATERNION": (math.cos(angle / 2), *(axis * math.sin(angle / 2))),
        "AXIS_ANGLE": (angle, *axis),
    }.get(mode, tuple(axis * angle))
    matrix = channel_matrix(mode, value)
    back = armature.channel_value(mode, matrix, value)
    np.testing.assert_allclose(back, value, rtol=1e-9, atol=1e-15)
    assert turn_of(mode, back) == pytest.approx(angle, rel=1e-9)


def turn_of(mode: str, value) -> float:
    """The angle (radians) a channel value turns a bone by, in double precision."""
    q = rotation_channels.channel_to_quaternion(mode, value)
    return 2.0 * math.atan2(math.sqrt(q[1] ** 2 + q[2] ** 2 + q[3] ** 2), abs(q[0]))


@pytest.mark.parametrize("mode", ["AXIS_ANGLE", "XYZ", "QUATERNION"])
def test_a_live_solved_chain_of_tiny_turns_reaches_its_target(mode):
    """A 10-bone chain (reach 10) whose target sits at full reach 2.8e-3 beside its tip: the root bone turns by
    2.8e-4 rad, the others not at all. Live solving poses it onto the target in every mode (axis-angle bones
    kept no turn at all, leaving the tip 2.8e-3 off while the status said reached)."""
    angle = 2.8e-4
    rig, target = chain_rig(count=10, target_at=(10.0 * math.sin(angle), 0.0, 10.0 * math.cos(angle)), live=False)
    for pose_bone in rig.pose.bones:
        pose_bone.rotation_mode = mode
    rig.fabrik.live = True
    bpy.context.view_layer.update()
    bpy.context.scene.frame_set(1)
    status = statuses[rig.name]
    assert status.ok and not status.missed, status.message
    turns = [turn_of(mode, armature.rotation_value(pb)) for pb in rig.pose.bones]
    assert turns[0] == pytest.approx(angle, rel=1e-3) and max(turns[1:]) < 1e-5
    assert (tip_world(rig, "bone9") - target_world(target)).length < 1e-5


@pytest.mark.parametrize("order", MODES[2:])
def test_euler_conversions_agree_with_blender_and_stay_continuous(order):
    """Each Euler order: the double-precision matrix is Blender's (mathutils, to its single precision) and the
    batched `euler_matrices`; back from the matrix come the same angles, or with a previous value whole turns
    away, those turns added (no 2pi jumps in keys)."""
    from mathutils import Euler

    generator = np.random.default_rng(14)
    for angles in generator.uniform(-1.5, 1.5, size=(50, 3)):
        matrix = np.asarray(rotation_channels.channel_to_matrix(order, angles))
        np.testing.assert_allclose(matrix, np.asarray(Euler(angles, order).to_matrix()), atol=1e-6)
        np.testing.assert_allclose(matrix, matrix_rows.euler_matrices(angles[None], order)[0], atol=1e-12)
        np.testing.assert_allclose(rotation_channels.channel_from_matrix(order, matrix, angles), angles, atol=1e-9)
        shifted = angles + 2.0 * math.pi * np.array([1.0, -1.0, 2.0])
        np.testing.assert_allclose(rotation_channels.channel_from_matrix(order, matrix, shifted + 0.01), shifted, atol=1e-9)


# NaN settings ---------------------------------------------------------------------------------------------------

NAN = float("nan")


@pytest.mark.parametrize("continuous", [True, False], ids=["continuous", "per-frame"])
def test_a_nan_tolerance_is_refused_before_the_bake_begins(continuous):
    rig, _ = moving_chain()
    rig.fabrik.tolerance = NAN
    with pytest.raises(ValueError, match="Tolerance"):
        baking.Baker(bpy.context.scene, rig, list(FRAMES), baking.bake_bones(rig, 'CHAINS'), continuous)
    assert rig.animation_data is None or rig.animation_data.action is None


@pytest.mark.parametrize("continuous", [True, False], ids=["continuous", "per-frame"])
def test_a_bake_names_a_nan_weight_on_every_frame(continuous):
    """Frames solved together on rows (per frame) and one by one (continuous) alike."""
    rig, _ = moving_chain()
    rig.fabrik.effectors[0].weight = NAN
    result = baking.bake_object(rig, FRAMES, warm_start=continuous)
    assert len(result.problems) == len(FRAMES) and all("weight" in p for p in result.problems), result.problems[:2]


def test_the_bake_operator_refuses_a_nan_cleanup_tolerance():
    """As the command line and bake_object do: a NaN would drop every key between the first and the last."""
    rig, _ = moving_chain()
    bpy.context.view_layer.objects.active = rig
    with pytest.raises(ValueError, match="clean-up tolerance must be a finite number"):
        baking.bake_object(rig, FRAMES, cleanup=NAN)
    with pytest.raises(RuntimeError, match="clean-up tolerance must be a finite number"):
        bpy.ops.fabrik.bake(frame_start=1, frame_end=10, use_cleanup=True, cleanup_tolerance=NAN)
    assert rig.animation_data is None or rig.animation_data.action is None


def test_euler_channels_are_converted_in_steps_before_finish_so_esc_is_heard():
    """A long bake of Euler bones converts their channels in the bake's steps (progress moves, Esc can stop it),
    not in one go inside `finish`: there nothing converts a channel frame by frame."""
    frames = range(1, 201)
    rig, target = chain_rig(count=3, live=False)
    rigbuild.key_circle(target, (0.0, 0.0, 1.8), 0.6, frames, axis="XZ")
    for pose_bone in rig.pose.bones:
        pose_bone.rotation_mode = 'XYZ'
    baker = baking.Baker(bpy.context.scene, rig, list(frames), baking.bake_bones(rig, 'CHAINS'), warm_start=False)
    progress = []
    while not baker.done:
        baker.step()
        progress.append(baker.progress)
    total = progress[-1][1]
    assert progress[-1][0] == total == 3 * len(frames)
    assert sum(1 for done, _ in progress if 2 * len(frames) <= done < total) >= 1  # a step inside the conversion
    calls = []
    original = armature.channel_value
    armature.channel_value = lambda *args: calls.append(1) or original(*args)
    try:
        result = baker.finish(new_action=False, keep_live=False)
    finally:
        armature.channel_value = original
    assert not calls, f"{len(calls)} conversions inside finish"
    assert result.keys == len(frames) * 3 * 3


@pytest.mark.parametrize("continuous", [True, False], ids=["continuous", "per-frame"])
def test_progress_reaches_its_total_when_frames_are_solved_one_by_one(continuous):
    """An influence below 1 solves each frame alone as it is read: those frames count as solved too, so the
    status bar's progress ends at its total instead of stopping short."""
    rig, _ = moving_chain()
    rig.fabrik.influence = 0.5
    baker = baking.Baker(bpy.context.scene, rig, list(FRAMES), baking.bake_bones(rig, 'CHAINS'), continuous)
    progress = []
    while not baker.done:
        baker.step()
        progress.append(baker.progress)
    assert progress[-1] == (3 * len(FRAMES), 3 * len(FRAMES)), progress[-3:]
    assert [done for done, _ in progress] == sorted(done for done, _ in progress)
    baker.finish(new_action=False, keep_live=False)


def test_the_key_clean_up_is_chosen_in_steps_before_finish_so_esc_is_heard(monkeypatch):
    """With a clean-up, which keys stay is chosen in the bake's steps (progress moves through it, Esc can stop
    it), not inside `finish`; the keys are those the clean-up keeps of the same bake's keys without it."""
    rig, _ = moving_chain()
    steps = baking.Baker(bpy.context.scene, rig, list(FRAMES), baking.bake_bones(rig, 'CHAINS'), False, cleanup=1e-3)
    progress = []
    while not steps.done:
        steps.step()
        progress.append(steps.progress)
    assert progress[-1] == (4 * len(FRAMES), 4 * len(FRAMES))
    assert any(3 * len(FRAMES) < done < 4 * len(FRAMES) for done, _ in progress)  # steps inside the clean-up
    chosen = []
    needed = keys.needed_keys
    monkeypatch.setattr(keys, "needed_keys", lambda *args: chosen.append(1) or needed(*args))
    result = steps.finish(new_action=True, keep_live=False)
    assert not chosen, f"{len(chosen)} channels cleaned up inside finish"
    monkeypatch.setattr(keys, "needed_keys", needed)
    every = baking.Baker(bpy.context.scene, rig, list(FRAMES), baking.bake_bones(rig, 'CHAINS'), False)
    unclean = every.finish(new_action=True, keep_live=False)
    kept = 0
    for fcurve in animdata.fcurves(rig):  # (the new action's: the unclean bake's keys)
        co = np.array([tuple(point.co) for point in fcurve.keyframe_points])
        kept += int(needed(co[:, 0].astype(np.float64), co[:, 1].astype(np.float64), 1e-3).sum())
    assert result.keys + result.removed_by_cleanup == unclean.keys
    assert result.removed_by_cleanup > 0 and result.keys == kept
