# SPDX-License-Identifier: GPL-3.0-or-later
"""Live frames where only the targets moved go on from the last frame's read (`onwards.reused`), solved exactly as
a frame read whole solves them, and every change the whole read would see sends the frame back to it."""

from __future__ import annotations

import math
import time

import bpy
import numpy as np
import pytest
from blender_scenes import chain_rig, rigbuild, rotation_channels, target_world, tip_world

from fabrik_addon.blender.effectors import pins
from fabrik_addon.blender.live import handlers, onwards
from fabrik_addon.blender.rig import animdata, memory
from fabrik_addon.blender.rig.held_bones import held_bones
from fabrik_addon.blender.rig.status import DeferredStatus, RigStatus, statuses

pytestmark = pytest.mark.usefixtures("clean_scene")

FRAMES = range(1, 41)


@pytest.fixture
def steady_frames(monkeypatch) -> list[bool]:
    """Per frame change where live solving kept a rig's last read: whether the frame went on from it (False: the
    whole read)."""
    taken: list[bool] = []
    again = onwards.reused

    def counted(obj, *args):
        planned = obj.name in kept_reads()
        result = again(obj, *args)
        if planned:
            taken.append(result is not None)
        return result

    monkeypatch.setattr(onwards, "reused", counted)
    return taken


def kept_reads() -> set[str]:
    """The rigs whose last live read the next frame may go on from."""
    return {name for name in memory.names() if memory.get(name).read is not None}


def moving_target(target) -> None:
    """Key the target along a path the chain reaches on every frame."""
    rigbuild.key_path(
        target, FRAMES, lambda f: (1.2 * math.sin(f * 0.2), 0.4 * math.cos(f * 0.3), 2.2 + 0.3 * math.sin(f * 0.1))
    )


def chain(modes: str):
    """A six-bone chain pulled at its tip by a moving target; its bones in quaternions, in one Euler order, or
    in mixed modes (each bone holding a turn of its own)."""
    rig, target = chain_rig(count=6)
    for k, pb in enumerate(rig.pose.bones):
        if modes == "euler":
            pb.rotation_mode = 'ZXY'
            pb.rotation_euler = (0.1 * k, -0.05, 0.02 * k)
        elif modes == "mixed":
            pb.rotation_mode = ('QUATERNION', 'XYZ', 'AXIS_ANGLE', 'YZX', 'QUATERNION', 'ZXY')[k]
    rig.pose.bones[2].rotation_quaternion = (0.95, 0.1, 0.2, 0.0)
    moving_target(target)
    return rig


def converted_chain(tied: bool = False):
    """The quaternion chain built with Blender's IK constraint on its tip and converted (Convert IK Constraints).

    Tied: as a file converted by an earlier version has it, the muted constraint keeps its target, which still
    ties the armature to it in Blender's dependency graph, so every move of the target updates the rig object.
    """
    from fabrik_addon.blender.effectors import constraints

    rig = chain("quaternions")
    rig.fabrik.live = False
    target = bpy.data.objects["Target"]
    rig.fabrik.effectors.clear()
    constraint = rig.pose.bones["bone5"].constraints.new("IK")
    constraint.target = target
    converted, skipped = constraints.convert_ik_constraints(rig)  # (what the operator does)
    assert converted and not skipped and constraint.mute
    if tied:
        constraint.target = target
        rig.fabrik.converted[0].set_aside = False
    rig.fabrik.live = True
    return rig


def target_on_a_moving_parent():
    """The quaternion chain whose target hangs from an animated empty (its own keys are the same path, taken
    relative to the parent's): the target moves with its parent."""
    rig = chain("quaternions")
    target = bpy.data.objects["Target"]
    carrier = rigbuild.make_target("Carrier", (0.0, 0.0, 0.0))
    target.parent = carrier
    rigbuild.key_path(carrier, FRAMES, lambda f: (0.02 * f, -0.01 * f, 0.0))
    return rig


def hand():
    """A palm with two two-bone fingers off its tail (offsets: the framed solve), two moving targets."""
    bones = [("palm", (0, 0, 0), (0, 0, 1), None, False)]
    for side, x in (("L", -0.3), ("R", 0.3)):
        bones += [
            (f"f1.{side}", (x, 0, 1.1), (x, 0, 1.6), "palm", False),
            (f"f2.{side}", (x, 0, 1.6), (x, 0, 2.0), f"f1.{side}", True),
        ]
    rig = rigbuild.make_armature("Rig", bones)
    for side, sign in (("L", -1.0), ("R", 1.0)):
        target = rigbuild.make_target(f"T.{side}", (0.3 * sign, 0.2, 1.8))
        rigbuild.key_path(
            target, FRAMES, lambda f, s=sign: (s * (0.3 + 0.2 * math.sin(f * 0.2)), 0.3 * math.cos(f * 0.25), 1.7)
        )
        rigbuild.add_effector(rig, f"f2.{side}", target)
    rig.fabrik.live = True
    return rig


def hanging_chain():
    """A three-bone chain that hangs from a fixed bone turned away from rest (its frame is the chain's base)."""
    rig, target = chain_rig(count=5)
    rig.fabrik.effectors[0].chain_length = 3
    rig.pose.bones[1].rotation_quaternion = (0.9, 0.3, 0.0, 0.1)
    moving_target(target)
    return rig


def animated_rig():
    """The hanging chain in a rig animated itself: the bones above it turn and the rig's own transform moves (a
    mocap rig's spine and its root)."""
    rig = hanging_chain()
    for frame in FRAMES:
        for name, size in (("bone0", 0.1), ("bone1", 0.2)):
            turn = (1.0, size * math.sin(frame * 0.3), 0.0, 0.1 * math.cos(frame * 0.2))
            rig.pose.bones[name].rotation_quaternion = turn
            rig.pose.bones[name].keyframe_insert("rotation_quaternion", frame=frame)
        rig.location = (0.1 * math.sin(frame * 0.2), 0.0, 0.0)
        rig.keyframe_insert("location", frame=frame)
    return rig


def scaled_above():
    """The animated rig with the bone at its root keyed to grow for a while: those frames are refused (FABRIK
    solves bones at their rest size), the others solved."""
    rig = animated_rig()
    for frame, size in ((1, 1.0), (8, 1.0), (9, 1.2), (12, 1.2), (13, 1.0)):
        rig.pose.bones["bone0"].scale = (size,) * 3
        rig.pose.bones["bone0"].keyframe_insert("scale", frame=frame)
    return rig


def keyed_chain_bone():
    """A chain one of whose bones is keyed: its channel is the animator's each frame (no plan)."""
    rig = chain("quaternions")
    for frame in (1, 40):
        rig.pose.bones["bone3"].rotation_quaternion = (1.0, 0.0, 0.1 * frame / 40, 0.0)
        rig.pose.bones["bone3"].keyframe_insert("rotation_quaternion", frame=frame)
    return rig


def keyed_influence():
    """A chain whose effector's influence is keyed: a setting that animation changes (no plan)."""
    rig = chain("quaternions")
    effector = rig.fabrik.effectors[0]
    for frame, influence in ((1, 1.0), (20, 0.5), (40, 1.0)):
        effector.influence = influence
        rig.keyframe_insert('fabrik.effectors[0].influence', frame=frame)
    return rig


def pinned_chain():
    """The quaternion chain with its target pinned over two keyed ranges (blends included): the rig's animation
    keys only pins, which each frame reads again."""
    rig = chain("quaternions")
    rig.fabrik.live = False  # (while the pins are keyed: the frames played here are not the test's)
    effector = rig.fabrik.effectors[0]
    for span in (pins.Span(5, 12, 2, 3), pins.Span(30, 35, 1, 1)):
        bpy.context.scene.frame_set(span.first)
        pins.key_span(rig, effector, span, effector.target.matrix_world.copy())
    rig.fabrik.live = True
    return rig


def moving_root(mode: str):
    """A body (`walk_clip.stocky_rig`) with its feet held and its left hand pulled along a path that leaves its arm,
    the pelvis its Root (Out of Reach, or Free with its height keyed: animation the frames read again)."""
    from walk_clip import stocky_rig

    rig = stocky_rig()
    for side, x in (("l", 1.0), ("r", -1.0)):
        foot = rigbuild.make_target(f"Foot {side}", (2.0 + 0.12 * x, 0.0, 0.15))
        rigbuild.add_effector(rig, f"calf_{side}", foot, chain_length=2)
    hand = rigbuild.make_target("Hand", (2.14, -0.5, 1.0))
    rigbuild.add_effector(rig, "lowerarm_l", hand, chain_length=2)
    rigbuild.key_path(hand, FRAMES, lambda f: (2.14 + 0.1 * math.sin(f * 0.2), -0.5 - 0.4 * math.sin(f * 0.1), 1.0))
    if mode == 'FREE':
        pelvis = rig.pose.bones["pelvis"]
        for frame in (1, 40):
            pelvis.location = (0.0, 0.001 * frame, 0.0)
            pelvis.keyframe_insert("location", index=1, frame=frame)
    rig.fabrik.root_bone, rig.fabrik.root_mode, rig.fabrik.root_angle = "pelvis", mode, 0.2
    rig.fabrik.live = True
    return rig


RIGS = {"quaternions": lambda: chain("quaternions"), "pinned": pinned_chain, "one Euler order": lambda: chain("euler"),
        "mixed modes": lambda: chain("mixed"), "hand": hand, "hanging chain": hanging_chain,
        "animated rig": animated_rig, "scaled above": scaled_above, "converted": converted_chain,
        "converted, target kept": lambda: converted_chain(tied=True), "target on a moving parent": target_on_a_moving_parent,
        "root out of reach": lambda: moving_root('OUT_OF_REACH'), "root free, keyed": lambda: moving_root('FREE')}

#: Rigs whose animation reaches what the full frame must read each frame: no frame is solved from a plan.
PLANLESS = {"a keyed chain bone": keyed_chain_bone, "a keyed influence": keyed_influence}


def state(rig) -> tuple[np.ndarray, str]:
    """Every rotation channel, what the rig holds of the animator's pose, and the status line."""
    held = np.array([tuple(e.written) + tuple(e.fk) + (e.rotated,) for e in held_bones(rig)]).ravel()
    status = statuses[rig.name]
    locations = np.array([tuple(pb.location) for pb in rig.pose.bones]).ravel()  # (a Root's moves)
    return (np.concatenate([rotation_channels(rig), locations, held]),
            f"{status.message} | {sorted(status.effectors.items())}")


def play(make, frames) -> list:
    """The states after each frame of a fresh rig."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    rig = make()
    out = []
    for frame in frames:
        bpy.context.scene.frame_set(frame)
        out.append(state(rig))
    return out


@pytest.mark.parametrize("kind", RIGS)
def test_frames_where_only_targets_move_solve_as_the_full_frame(kind, steady_frames, monkeypatch):
    """Channels, held values and status after every frame agree with the full live frame's, frame by frame."""
    frames = [1, 2, 3, 5, 9, 8, 20, 20, 33, 12, 40]
    quick = play(RIGS[kind], frames)
    # Every frame after the first; where a bone above the chain is scaled (9 and 12), the full frame refuses the
    # frame, and the one after it, with no plan to go from, makes one again.
    expected = [True] * (len(frames) - 1)
    if kind == "scaled above":
        expected = [True, True, True, False, True, True, True, False]  # (2 3 5 9, -, 20 20 33 12, -)
    if kind == "root out of reach":
        expected[3] = False  # (frame 5 first moved the root: the frame after it reads its new held entry whole)
    assert steady_frames == expected, steady_frames
    if kind.startswith("root"):  # (frame 9 takes the hand beyond the arm: the comparison below covers a move)
        bpy.context.scene.frame_set(9)
        assert max(abs(c) for c in bpy.data.objects["Stocky"].pose.bones["pelvis"].location) > 0.01
    monkeypatch.setattr(onwards, "reused", lambda *args: None)
    full = play(RIGS[kind], frames)
    for frame, (a, a_status), (b, b_status) in zip(frames, quick, full):
        assert a_status == b_status, f"frame {frame}"
        np.testing.assert_allclose(a, b, atol=2e-7, err_msg=f"frame {frame}")


@pytest.mark.parametrize("tied", [False, True], ids=["converted", "converted, target kept on the constraint"])
def test_a_converted_rig_takes_the_path_of_the_same_rig_built_fresh(tied, steady_frames):
    """A rig converted from Blender's IK constraint goes on from its last read on exactly the frames the same rig
    built fresh does, and gives the same channels, held values and statuses; so does one whose muted constraint
    still holds its target (converted by an earlier version), which makes Blender update the rig object
    whenever the target moves."""
    frames = [1, 2, 3, 5, 9, 8, 20, 20, 33, 12, 40]
    fresh = play(RIGS["quaternions"], frames)
    fresh_path = list(steady_frames)
    steady_frames.clear()
    converted = play(lambda: converted_chain(tied), frames)
    assert steady_frames == fresh_path == [True] * (len(frames) - 1)
    for frame, (a, a_status), (b, b_status) in zip(frames, fresh, converted):
        assert a_status == b_status, f"frame {frame}"
        np.testing.assert_allclose(a, b, atol=2e-7, err_msg=f"frame {frame}")


@pytest.mark.parametrize("kind", PLANLESS)
def test_animation_of_what_the_full_frame_reads_leaves_no_plan(kind, steady_frames, monkeypatch):
    """A keyed chain bone or setting: every frame is the full frame's."""
    frames = [1, 2, 3, 5, 20, 12, 40]
    quick = play(PLANLESS[kind], frames)
    assert steady_frames == [] and not kept_reads()
    monkeypatch.setattr(onwards, "reused", lambda *args: None)
    full = play(PLANLESS[kind], frames)
    for frame, (a, a_status), (b, b_status) in zip(frames, quick, full):
        assert a_status == b_status, f"frame {frame}"
        np.testing.assert_allclose(a, b, atol=2e-7, err_msg=f"frame {frame}")


def warm_limited_arm():
    """A five-bone arm in cones with a hinge, solved live from its previous solution (Start From: Previous
    Solution, as a robot arm is): continuity mode moves it a settling step a frame."""
    rig, target = chain_rig(count=5, live=False)
    for pb in rig.pose.bones:
        pb.use_ik_limit_x = pb.use_ik_limit_z = True
        pb.ik_min_x, pb.ik_max_x, pb.ik_min_z, pb.ik_max_z = -1.0, 1.0, -0.7, 0.7
    rig.pose.bones["bone2"].lock_ik_z = True  # a hinge
    rig.fabrik.start = 'PREVIOUS'
    # A slow path, thrown aside from frame 30 on.
    rigbuild.key_path(target, FRAMES, lambda f: (
        0.5 + 0.3 * math.sin(f * 0.08),
        0.3 * math.cos(f * 0.1) + (1.0 if f >= 30 else 0.0),
        4.4 + 0.1 * math.sin(f * 0.05),
    ))
    rig.fabrik.live = True
    return rig


def test_a_warm_started_limited_tree_moves_from_its_last_frame_as_the_full_frame_moves_it(steady_frames, monkeypatch):
    """Frames of a limited arm that starts from its previous solution go on from the last frame's read, and move
    from the rig the last frame left in the limits' coordinates (what continuity mode carries): channels, held
    values and status agree with the whole read's, and a target thrown far takes the whole solve."""
    from fabrik_addon.core.joints import settle

    followed = []  # (whether each settling step of `stages.followed` reached)
    follow = settle.follow
    monkeypatch.setattr(settle, "follow", lambda *a, **k: (lambda out: followed.append(out[1]) or out)(follow(*a, **k)))
    frames = [*range(1, 21), 33, 34, 35]
    quick = []
    moved = []
    bpy.ops.wm.read_factory_settings(use_empty=True)
    rig = warm_limited_arm()
    for frame in frames:
        followed.clear()
        bpy.context.scene.frame_set(frame)
        quick.append(state(rig))
        moved.append(any(followed))
    # Frame 1 starts cold (nothing kept: the next frame starts warm), frame 2 is read whole and kept.
    assert steady_frames == [True] * 21, steady_frames
    assert moved[2:20] == [True] * 18 and not moved[20], moved  # (33: too far to step to, the whole solve)
    assert all(statuses["Rig"].reached.values())
    monkeypatch.setattr(onwards, "reused", lambda *args: None)
    full = play(warm_limited_arm, frames)
    for frame, (a, a_status), (b, b_status) in zip(frames, quick, full):
        assert a_status == b_status, f"frame {frame}"
        np.testing.assert_allclose(a, b, atol=2e-7, err_msg=f"frame {frame}")


def _nan_target(rig, target) -> None:
    target.delta_location = (math.nan, 0.0, 0.0)


def _parent_to_chain(rig, target) -> None:
    target.parent, target.parent_type, target.parent_bone = rig, 'BONE', "bone2"


def _unlink(rig, target) -> None:
    bpy.context.scene.collection.objects.unlink(target)


def _hand_edit(rig, target) -> None:
    rig.pose.bones["bone1"].rotation_quaternion = (0.9, 0.0, 0.0, 0.4)


def _clear_pose(rig, target) -> None:
    for pb in rig.pose.bones:
        pb.rotation_quaternion = (1.0, 0.0, 0.0, 0.0)


#: Changes between two frames, each of which the full frame must see: (change, what the status then says, or
#: None where the chain still reaches).
CHANGES = {
    "an effector setting": (lambda rig, target: setattr(rig.fabrik.effectors[0], "chain_length", 3), None),
    "a live setting": (lambda rig, target: setattr(rig.fabrik, "iterations", 7), None),
    "an effector added": (lambda rig, target: rig.fabrik.effectors.add(), "no tip bone set"),
    "the effector removed": (lambda rig, target: rig.fabrik.effectors.remove(0), "no effector to solve"),
    "the target deleted": (lambda rig, target: bpy.data.objects.remove(target), "no target object"),
    "the target unlinked": (_unlink, "target 'Target'"),
    "the target parented to its chain": (_parent_to_chain, "parented to a bone of its own chain"),
    "the target not a number": (_nan_target, "not at a finite location"),
    "a chain bone turned by hand": (_hand_edit, None),
    "the pose cleared": (_clear_pose, None),
    "the rig moved": (lambda rig, target: setattr(rig, "location", (0.5, 0.0, -0.3)), None),
    "a chain bone renamed": (lambda rig, target: setattr(rig.data.bones["bone1"], "name", "upper"), None),
    "the held values removed": (lambda rig, target: held_bones(rig).clear(), None),
}


def changed(change: str) -> list:
    """The states after frames 3, 4 and 5 of a fresh chain with the change made between frames 3 and 4."""
    make, _ = CHANGES[change]
    bpy.ops.wm.read_factory_settings(use_empty=True)
    rig = chain("quaternions")
    scene = bpy.context.scene
    out = []
    for frame in (1, 2, 3, 4, 5):
        if frame == 4:
            make(rig, bpy.data.objects["Target"])
        scene.frame_set(frame)
        out.append(state(rig))
    assert rig.fabrik.live, statuses[rig.name].message
    return out[2:]


#: Changes the frame that goes on from the last read reads again itself (an update of the rig object alone).
READ_AGAIN = {"the rig moved"}


@pytest.mark.parametrize("change", CHANGES)
def test_a_change_between_frames_goes_the_full_frame(change, steady_frames, monkeypatch):
    """After each kind of change the next frame is read whole, or (the rig's own transform) reads the change
    again itself: it says what the change did, and the frames agree with those of live solving with every frame
    read whole."""
    quick = changed(change)
    assert steady_frames[:3] == [True, True, change in READ_AGAIN]
    rig = bpy.data.objects["Rig"]
    status = statuses[rig.name]
    says = CHANGES[change][1]
    if says is None:
        assert status.reached and all(status.reached.values()), status.message
        if len(rig.fabrik.effectors):
            tip = tip_world(rig, rig.fabrik.effectors[0].bone)
            assert (tip - target_world(bpy.data.objects["Target"])).length < 1e-3
    else:
        assert says in " ".join([status.message, *status.effectors.values()])
    monkeypatch.setattr(onwards, "reused", lambda *args: None)
    full = changed(change)
    for frame, (a, a_status), (b, b_status) in zip((3, 4, 5), quick, full):
        assert a_status == b_status, f"frame {frame}"
        np.testing.assert_allclose(a, b, atol=2e-7, err_msg=f"frame {frame}")


def key_chain_bone(rig) -> None:
    """Key a chain bone of the rig (two keys, so it moves), as an animator pressing I mid-playback."""
    pose_bone = rig.pose.bones["bone3"]
    for at, turn in ((1, 0.0), (40, 0.4)):
        pose_bone.rotation_quaternion = (1.0, turn, 0.0, 0.0)
        pose_bone.keyframe_insert("rotation_quaternion", frame=at)


def key_influence(rig) -> None:
    """Key the effector's influence down to a half, through the action's F-curves (as a script or an add-on
    would: no property is set, so nothing but the animation is updated)."""
    animdata.ensure_action(rig, False, "Keys")
    fcurve = animdata.ensure_fcurve(animdata.fcurves(rig, create=True), "fabrik.effectors[0].influence", 0, "FABRIK")
    for at in (1, 40):
        fcurve.keyframe_points.insert(at, 0.5)


@pytest.mark.parametrize("keyed", [key_chain_bone, key_influence])
@pytest.mark.parametrize("kind", ["animated rig", "quaternions"])
def test_keys_added_mid_playback_go_the_full_frame(kind, keyed, steady_frames, monkeypatch):
    """Keys inserted on a chain bone or a setting mid-playback make it the animation's: the next frames are the
    full frame's, on a rig animated already as on one that was not."""
    frames = [1, 2, 3, 4, 5, 6]

    def play_keyed() -> list:
        bpy.ops.wm.read_factory_settings(use_empty=True)
        rig = RIGS[kind]()
        out = []
        for frame in frames:
            if frame == 4:
                keyed(rig)
            bpy.context.scene.frame_set(frame)
            out.append(state(rig))
        return out

    quick = play_keyed()
    assert steady_frames == [True, True, False]  # 2 and 3; then no plan: the animation reaches what a solve reads
    monkeypatch.setattr(onwards, "reused", lambda *args: None)
    full = play_keyed()
    for frame, (a, a_status), (b, b_status) in zip(frames, quick, full):
        assert a_status == b_status, f"frame {frame}"
        np.testing.assert_allclose(a, b, atol=2e-7, err_msg=f"frame {frame}")


def test_the_plan_goes_with_the_file_undo_and_live_solving(steady_frames):
    """A loaded file, an undo step and live solving switched off each leave no plan to solve from."""
    rig = chain("quaternions")
    scene = bpy.context.scene
    for frame in (1, 2):
        scene.frame_set(frame)
    assert kept_reads() == {"Rig"}
    handlers.on_undo()
    assert not kept_reads()
    scene.frame_set(3)
    assert kept_reads() == {"Rig"}
    rig.fabrik.live = False
    assert not kept_reads()
    rig.fabrik.live = True
    scene.frame_set(4)
    assert kept_reads() == {"Rig"}
    handlers.on_load(None)
    assert not kept_reads()
    assert steady_frames == [True]  # frame 2 only: 3 and 4 went the full frame


def test_a_deferred_status_is_put_into_words_once_when_first_read():
    """A steady frame's status is concluded when something reads it, once, keeping what was set on it before."""
    made = []

    def conclude() -> RigStatus:
        made.append(True)
        return RigStatus(message="reached, 3 iterations", effectors={0: "reached (miss 1e-05)"}, seconds=9.0)

    status = DeferredStatus(conclude)
    status.seconds = 0.5
    assert made == []
    assert status.message == "reached, 3 iterations" and status.effectors == {0: "reached (miss 1e-05)"}
    assert status.seconds == 0.5 and status.ok and status.kind(0) == 'ERROR'  # (an effector line, nothing reached)
    assert made == [True]


def test_the_status_times_the_solver_apart_from_reading_and_writing(steady_frames, monkeypatch):
    """Every live frame's status, the whole read's and a steady frame's, gives the solver's own time (the plan's
    solve) as a part of the frame's: more than nothing, less than reading, solving and writing together."""
    from fabrik_addon.core.solving.plan import Plan

    solving = []
    plan_solve = Plan.solve

    def timed(self, *args, **kwargs):
        began = time.perf_counter()
        try:
            return plan_solve(self, *args, **kwargs)
        finally:
            solving.append(time.perf_counter() - began)

    monkeypatch.setattr(Plan, "solve", timed)
    bpy.ops.wm.read_factory_settings(use_empty=True)
    rig = chain("quaternion")
    for frame in (1, 2, 3, 7):
        solving.clear()
        bpy.context.scene.frame_set(frame)
        status = statuses[rig.name]
        assert len(solving) == 1 and 0.0 < solving[0] <= status.solver_seconds < status.seconds, frame
    assert steady_frames == [True, True, True]


def test_after_steady_frames_live_off_gives_the_pose_back_and_a_reload_solves_the_same(steady_frames, tmp_path):
    """What steady frames keep in the file is the full frame's: a file saved between them solves the next frame
    the same after reloading, and live solving off gives every channel back exactly as the animator left it."""
    rig = chain("mixed")
    animator = rotation_channels(rig)
    scene = bpy.context.scene
    for frame in (1, 2, 3, 4):
        scene.frame_set(frame)
    assert steady_frames == [True, True, True]
    path = str(tmp_path / "steady.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    scene.frame_set(9)
    expected = state(rig)
    assert steady_frames[-1] is True
    bpy.ops.wm.open_mainfile(filepath=path)
    rig = bpy.data.objects["Rig"]
    bpy.context.scene.frame_set(9)  # (a loaded file has no plan: the full frame, from what the file kept)
    again = state(rig)
    assert again[1] == expected[1]
    np.testing.assert_allclose(again[0], expected[0], atol=2e-7)
    bpy.context.scene.frame_set(12)
    assert steady_frames[-1] is True
    assert not np.array_equal(rotation_channels(rig), animator)
    rig.fabrik.live = False
    np.testing.assert_array_equal(rotation_channels(rig), animator)


def played_with_a_chain_bone_set(make_rig, tag: bool) -> list:
    """Frames 1-5 of a rig, with a chain bone's channel set by `foreach_set` before frame 4 (and, with `tag`, the
    rig object alone tagged, as a script may): the state after each frame."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    rig = make_rig()
    out = []
    for frame in [1, 2, 3, 4, 5]:
        if frame == 4:
            values = rotation_channels(rig)[: 4 * len(rig.pose.bones)].copy()
            values[4 * 3: 4 * 4] = (0.9, 0.3, 0.0, 0.3)  # bone3, in the chain
            rig.pose.bones.foreach_set("rotation_quaternion", values)
            if tag:
                rig.update_tag(refresh={'OBJECT'})
        bpy.context.scene.frame_set(frame)
        out.append(state(rig))
    return out


@pytest.mark.parametrize("make_rig, tag", [
    (animated_rig, False),
    # A rig whose object Blender updates with its targets (a muted IK constraint that keeps its target).
    (lambda: converted_chain(tied=True), True),
], ids=["set without a tag on a rig animated itself", "set by a script that tags the rig object"])
def test_a_chain_bone_set_by_a_script_goes_the_full_frame(make_rig, tag, steady_frames, monkeypatch):
    """A rig animated itself is read again every frame, and a rig object tagged alone (no armature update) reads
    the chain's channels again: a chain bone's channel set by `foreach_set` is seen, and taken for the
    animator's, as the full frame takes it."""
    quick = played_with_a_chain_bone_set(make_rig, tag)
    assert steady_frames == [True, True, False, True]
    monkeypatch.setattr(onwards, "reused", lambda *args: None)
    full = played_with_a_chain_bone_set(make_rig, tag)
    for frame, (a, a_status), (b, b_status) in zip([1, 2, 3, 4, 5], quick, full):
        assert a_status == b_status, f"frame {frame}"
        np.testing.assert_allclose(a, b, atol=2e-7, err_msg=f"frame {frame}")


def test_a_limit_edited_on_a_warm_started_arm_holds_from_the_next_frame():
    """What continuity mode carries (the rig the last frame left, in the limits' coordinates) is not gone on from
    once a limit changes: a joint whose swing is then locked only twists from the next frame on."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    rig = warm_limited_arm()
    scene = bpy.context.scene
    for frame in range(1, 11):
        scene.frame_set(frame)
    bent = rig.pose.bones["bone3"].rotation_quaternion
    assert abs(bent[1]) + abs(bent[3]) > 1e-3  # (it swings, before)
    rig.pose.bones["bone3"].lock_ik_x = rig.pose.bones["bone3"].lock_ik_z = True
    for frame in (11, 12, 13):
        scene.frame_set(frame)
        w, x, y, z = rig.pose.bones["bone3"].rotation_quaternion
        assert abs(x) < 1e-6 and abs(z) < 1e-6, (frame, (w, x, y, z), statuses["Rig"].message)
