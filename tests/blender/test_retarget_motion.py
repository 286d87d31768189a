# SPDX-License-Identifier: GPL-3.0-or-later
"""What Retarget keeps of a captured clip, frame by frame, in the real bpy module: clips made here (a walk, a run,
a crouch, a reach beyond the arm, a turn in place and a jump; `mocap_clips`) written as BVH and imported with
Blender's bundled importer, put on an exact copy of their skeleton (the result is the clip), on rigs of other
proportions (legs 20 % longer and arms 10 % shorter with hinged knees and elbows, a stocky rig with its own
names, an A-pose rig, a human Rigify generated) and from clips whose rest lies along +X, stands tipped or
stands off the floor. Measured as Blender evaluates both armatures (`retarget_measures`)."""

from __future__ import annotations

import math

import bpy
import mocap_clips
import numpy as np
import pytest
from blender_scenes import rigbuild  # (first: it puts samples/ on the path)
from retarget_measures import LIMBS, Track, measure, slides
from walk_clip import HINGES, stocky_rig

from fabrik_addon.blender.retarget import job, setup

pytestmark = pytest.mark.usefixtures("addon_per_test")

MOTIONS = tuple(mocap_clips.MOTIONS)
#: The clips' skeleton stands this high (its head's end site), the share of it an exact copy may be off by.
HEIGHT = 1.72
needs_bpy_5 = pytest.mark.skipif(
    bpy.app.version < (5, 0, 0),
    reason="after Rigify has generated a rig, the bpy 4.2 module crashes at interpreter exit; this runs on 5.0",
)


def retargeted(clip, rig, hold_feet: bool = True) -> job.Retargeting:
    """The clip put on the rig by Retarget's own work (mapped by names, baked), which keeps what it found."""
    rig.fabrik.retarget_source = clip
    bpy.context.view_layer.objects.active = rig
    assert setup.map_bones(rig) == [], setup.map_bones(rig)
    work = job.Retargeting(bpy.context.scene, rig, hold_feet=hold_feet)
    while not work.done:
        work.step()
    result = work.finish()
    assert not rig.fabrik.live and result.frames == len(work.frames)
    return work


def deforming(pairs: dict) -> dict:
    """A generated Rigify rig's mapping with its deforming bones in place of its controls (what the mesh follows)."""
    named = {"torso": "spine", "neck": "spine.004", "head": "spine.006"}
    return {role: (clip, "DEF-" + named.get(bone, bone.replace("_fk", ""))) for role, (clip, bone) in pairs.items()}


@pytest.mark.parametrize("motion", MOTIONS)
def test_onto_an_exact_copy_of_its_skeleton_the_result_is_the_clip(tmp_path, motion):
    """Every bone's turn within a degree of the clip's and every joint within 0.1 % of the height, on every frame
    where neither foot is held. Where one is (the clip's own standing foot slides a few millimetres, the rig's
    stays), its ankle stays within 1 % of the leg of the clip's (its knee, straight or nearly, may bend for it),
    and the rest within 1 % of the leg and 5 degrees (the hips come down where the leg would not reach)."""
    clip = mocap_clips.import_clip(tmp_path, motion)
    rig = mocap_clips.rig_from(mocap_clips.Skeleton(), "Copy")
    work = retargeted(clip, rig)
    names = [b.name for b in clip.data.bones]
    clip_track, rig_track = Track.read(clip, names, work.frames), Track.read(rig, names, work.frames)
    held = {}
    for s, side in (("L", "Left"), ("R", "Right")):
        held[side] = np.zeros(len(work.frames), dtype=bool)
        for run in (run for kind in work.copy.contacts[f"foot.{s}"] for run in kind):
            held[side][max(0, run.first - 2):run.last + 3] = True  # (with the frames it takes hold and lets go over)
    either = held["Left"] | held["Right"]
    for name in names:
        turned = clip_track.turn(name) @ np.swapaxes(rig_track.turn(name), 1, 2)
        off = np.degrees(np.arccos(np.clip((np.trace(turned, axis1=1, axis2=2) - 1.0) / 2.0, -1.0, 1.0)))
        moved = np.linalg.norm(clip_track.head(name) - rig_track.head(name), axis=1)
        assert np.all(off[~either] < 1.0) and np.all(moved[~either] < 1e-3 * HEIGHT), name
        side = next((side for side in held
                     if name.startswith(side) and name[len(side):] in mocap_clips.LEG_BONES), None)
        loose = either & ~held[side] if side else either
        assert np.all(off[loose] < 5.0) and np.all(moved[loose] < 0.01 * 0.9), (name, off.max(), moved.max())
        if side and name.endswith("Foot"):
            assert np.all(moved[held[side]] < 0.01 * 0.9), (name, moved.max())


@pytest.mark.parametrize("motion", ("walk", "turn", "jump"))
def test_onto_an_exact_copy_without_holding_the_feet_every_frame_is_the_clip(tmp_path, motion):
    """Hold the Feet off: nothing but the clip's own pose, every bone within a degree and every joint within 0.1 %
    of the height on every frame."""
    clip = mocap_clips.import_clip(tmp_path, motion)
    rig = mocap_clips.rig_from(mocap_clips.Skeleton(), "Copy")
    work = retargeted(clip, rig, hold_feet=False)
    names = [b.name for b in clip.data.bones]
    clip_track, rig_track = Track.read(clip, names, work.frames), Track.read(rig, names, work.frames)
    for name in names:
        turned = clip_track.turn(name) @ np.swapaxes(rig_track.turn(name), 1, 2)
        off = np.degrees(np.arccos(np.clip((np.trace(turned, axis1=1, axis2=2) - 1.0) / 2.0, -1.0, 1.0)))
        moved = np.linalg.norm(clip_track.head(name) - rig_track.head(name), axis=1)
        assert off.max() < 1.0 and moved.max() < 1e-3 * HEIGHT, (name, off.max(), moved.max())


def check_kept(clip, rig, work, pairs: dict | None = None, hinges: dict | None = None, ankles: dict | None = None,
               same_rest: bool = False, standing: bool = True) -> None:
    """What a retarget onto a rig of other proportions must keep: each elbow's and knee's bend plane within 10
    degrees of the clip's wherever both bend over 20 (never flipped), no bend jumping more in a frame than the
    clip's most plus 5 degrees, hands, feet and head turning within 5 degrees as the clip's do, ankles and toes
    still (within 1 % of the leg) over every held contact, nothing under the floor, no limb straight where the
    clip's bends, and every hinge inside its range (`hinges`: bone -> (low, high) about X; `ankles`: per side the
    bone whose tail is the ankle, where not the shin; `same_rest`: the rig's rest stands as the clip's, so hands,
    feet and head turn from it as the clip's from its own; `standing`: the clip's feet stand somewhere)."""
    pairs = pairs or setup.mapping(rig)
    kept, clip_track, rig_track = measure(clip, rig, pairs, work.frames, floor=work.layout.floor)
    # (the clips stand on their own floor: put on the rig's, they move up or down by an ankle's height at most,
    # and their hips rise and fall as the clip's do, scaled, over the whole path: nothing tips it)
    assert abs(work.copy.grounded) < 0.05, work.copy.grounded
    heights = [track.head(pairs["hips"][k])[:, 2] for k, track in ((0, clip_track), (1, rig_track))]
    assert np.ptp(heights[1]) <= work.layout.scale * np.ptp(heights[0]) + 0.02, [np.ptp(h) for h in heights]
    ankles = ankles or {s: pairs[f"shin.{s}"][1] for s in "LR"}
    ankle_track = Track.read(rig, list(ankles.values()), work.frames)
    assert all(angle <= 10.0 for angle in kept.plane.values()), kept.plane
    assert not any(kept.flipped.values()), kept.flipped
    assert all(kept.jump[limb] <= kept.clip_jump[limb] + 5.0 for limb in LIMBS), (kept.jump, kept.clip_jump)
    assert all(angle <= 5.0 for angle in kept.turned.values()), kept.turned
    if same_rest:
        assert all(angle <= 5.0 for angle in kept.turned_from_rest.values()), kept.turned_from_rest
    assert kept.lowest > -1e-4, kept.lowest
    assert not any(kept.straightened.values()), kept.straightened
    for s in "LR":
        leg = work.layout.leg[s]
        held, toes = work.copy.contacts[f"foot.{s}"]
        assert held or toes or not standing, s
        assert slides(ankle_track, ankles[s], held) <= 0.01 * leg, (s, held)
        assert slides(rig_track, pairs[f"foot.{s}"][1], toes) <= 0.01 * leg, (s, toes)
    for frame in work.frames[::4]:
        bpy.context.scene.frame_set(frame)
        for name, (low, high) in (hinges or {}).items():
            turn = rig.pose.bones[name].matrix_basis.to_quaternion()
            angle = 2.0 * math.atan2(turn.x, turn.w)
            assert abs(turn.y) < 1e-5 and abs(turn.z) < 1e-5 and low - 1e-5 <= angle <= high + 1e-5, (frame, name)


def hinge_ranges(rig, names) -> dict:
    return {name: (rig.pose.bones[name].ik_min_x, rig.pose.bones[name].ik_max_x) for name in names}


@pytest.mark.parametrize("motion", MOTIONS)
def test_onto_longer_legs_and_shorter_hinged_arms_the_motion_is_kept(tmp_path, motion):
    clip = mocap_clips.import_clip(tmp_path, motion)
    rig = mocap_clips.rig_from(mocap_clips.Skeleton(legs=1.2, arms=0.9), "Long", location=(1.5, 0.0, 0.0), hinges=True)
    work = retargeted(clip, rig)
    check_kept(clip, rig, work, hinges=hinge_ranges(rig, ("LeftLeg", "RightLeg", "LeftForeArm", "RightForeArm")),
               same_rest=True, standing=motion != "run")


@pytest.mark.parametrize("motion", ("walk", "crouch", "turn"))
def test_onto_a_stocky_rig_of_its_own_names_the_motion_is_kept(tmp_path, motion):
    """The stocky rig (shorter legs, longer arms, knees bent at rest, its bones named as Unreal's) with its hinges."""
    clip = mocap_clips.import_clip(tmp_path, motion)
    rig = stocky_rig()
    work = retargeted(clip, rig)
    check_kept(clip, rig, work, hinges=HINGES)


@pytest.mark.parametrize("motion", ("walk", "reach"))
def test_a_t_pose_clip_drives_an_a_pose_rig_through_the_two_rests(tmp_path, motion):
    """The rig's arms hang at 45 degrees at rest, the clip's stand out level: each upper arm still points the way
    the clip's does, frame by frame, and the rest of what the motion keeps holds."""
    clip = mocap_clips.import_clip(tmp_path, motion)
    rig = mocap_clips.rig_from(mocap_clips.Skeleton(pose="A"), "APose")
    work = retargeted(clip, rig)
    check_kept(clip, rig, work)
    names = ["LeftArm", "LeftForeArm", "RightArm", "RightForeArm"]
    clip_track, rig_track = Track.read(clip, names, work.frames), Track.read(rig, names, work.frames)
    for upper, lower in (("LeftArm", "LeftForeArm"), ("RightArm", "RightForeArm")):
        ways = [track.head(lower) - track.head(upper) for track in (clip_track, rig_track)]
        cos = np.einsum("fi,fi->f", *ways) / np.linalg.norm(ways[0], axis=1) / np.linalg.norm(ways[1], axis=1)
        assert np.degrees(np.arccos(np.clip(cos, -1.0, 1.0))).max() < 1.0, upper


@needs_bpy_5
@pytest.mark.parametrize("motion", ("walk", "crouch", "jump"))
def test_onto_a_generated_rigify_human_its_deforming_bones_keep_the_motion(tmp_path, motion):
    """Through its FK controls (their parents held to the root's turn by its constraints), measured on the
    deforming bones the mesh follows."""
    rig = rigbuild.generated_rigify()
    clip = mocap_clips.import_clip(tmp_path, motion)
    work = retargeted(clip, rig)
    check_kept(clip, rig, work, deforming(setup.mapping(rig)), ankles={s: f"DEF-shin.{s}.001" for s in "LR"})


def joints(rig, frames) -> np.ndarray:
    """Every bone's head of the rig over the frames (F, N, 3)."""
    track = Track.read(rig, [b.name for b in rig.data.bones], frames)
    return np.stack([track.head(b.name) for b in rig.data.bones], axis=1)


def test_a_clip_whose_rest_lies_along_x_is_put_on_as_its_upright_twin(tmp_path):
    """A clip whose every bone lies along +X at rest (as some exporters leave it), moving exactly as the walk:
    the rig moves as the walk puts it, joint for joint."""
    clip = mocap_clips.import_clip(tmp_path, "walk")
    rig = mocap_clips.rig_from(mocap_clips.Skeleton(legs=1.2, arms=0.9), "Long", hinges=True)
    work = retargeted(clip, rig)
    wanted = joints(rig, work.frames)
    twin = mocap_clips.along_x(clip)
    other = mocap_clips.rig_from(mocap_clips.Skeleton(legs=1.2, arms=0.9), "Long2", hinges=True)
    retargeted(twin, other)
    assert np.abs(joints(other, work.frames) - wanted).max() < 1e-4


def test_a_clip_off_the_floor_or_lying_down_is_grounded_and_stood_up(tmp_path):
    """The same walk 0.5 above its floor, and the same walk lying on its back (its object turned a quarter about
    X): each is put on the rig as the walk is, and says how far it was moved or turned."""
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir(), (tmp_path / "c").mkdir()
    clip = mocap_clips.import_clip(tmp_path / "a", "walk")
    rig = mocap_clips.rig_from(mocap_clips.Skeleton(legs=1.2, arms=0.9), "Long", hinges=True)
    work = retargeted(clip, rig)
    wanted = joints(rig, work.frames)
    assert abs(work.copy.grounded) < 0.02 and work.layout.tipped < 1.0
    high = mocap_clips.import_clip(tmp_path / "b", "walk", name="high", lift=0.5)
    other = mocap_clips.rig_from(mocap_clips.Skeleton(legs=1.2, arms=0.9), "Long2", hinges=True)
    lifted = retargeted(high, other)
    assert np.abs(joints(other, work.frames) - wanted).max() < 1e-4
    assert abs(lifted.copy.grounded - (work.copy.grounded - 0.5 * lifted.layout.scale)) < 1e-4
    lying = mocap_clips.import_clip(tmp_path / "c", "walk", name="lying")
    lying.rotation_euler.x = math.pi / 2.0
    third = mocap_clips.rig_from(mocap_clips.Skeleton(legs=1.2, arms=0.9), "Long3", hinges=True)
    stood = retargeted(lying, third)
    assert abs(stood.layout.tipped - 90.0) < 1e-3
    assert np.abs(joints(third, work.frames) - wanted).max() < 1e-4


def test_a_floor_under_the_rig_holds_the_feet_on_it(tmp_path):
    """The rig's Floor 0.1 up: the clip stands on it (its standing ankles at their rest height above it) and no
    ankle or toe goes under it on any frame."""
    clip = mocap_clips.import_clip(tmp_path, "walk")
    rig = stocky_rig()
    floor = bpy.data.objects.new("Floor", None)
    bpy.context.scene.collection.objects.link(floor)
    floor.location.z = 0.1
    rig.fabrik.floor = floor
    work = retargeted(clip, rig)
    assert abs(work.layout.floor - 0.1) < 1e-6
    track = Track.read(rig, ["calf_l", "calf_r", "foot_l", "foot_r"], work.frames)
    ankles = np.concatenate([track.tails[n][:, 2] for n in ("calf_l", "calf_r")])
    toes = np.concatenate([track.tails[n][:, 2] for n in ("foot_l", "foot_r")])
    assert ankles.min() > 0.1 + 0.05 - 1e-3 and abs(ankles.min() - 0.15) < 2e-3 and toes.min() > 0.1 - 1e-4


def test_fingers_both_skeletons_have_curl_as_the_clips(tmp_path):
    """A clip whose fingers curl and open, each its own way, onto a rig of other proportions with fingers of the
    same names: every finger bone turns as the clip's does (measured from the first frame, through the rests)."""
    clip = mocap_clips.key_clip("crouch", fingers=True)
    rig = mocap_clips.rig_from(mocap_clips.Skeleton(legs=1.2, arms=0.9), "Long", hinges=True, fingers=True)
    work = retargeted(clip, rig)
    assert set(work.layout.fingers) == {f"{finger}.{s}" for finger in ("thumb", "index", "middle", "ring", "pinky")
                                        for s in "LR"}
    names = [n for clip_bones, _ in work.layout.fingers.values() for n in clip_bones]
    clip_track, rig_track = Track.read(clip, names, work.frames), Track.read(rig, names, work.frames)
    for name in names:
        turns = []
        for track in (clip_track, rig_track):
            turn = track.turn(name)
            turns.append(turn @ np.swapaxes(turn[:1], 1, 2))
        moved = np.trace(turns[0] @ np.swapaxes(turns[0][:1], 1, 2), axis1=1, axis2=2)
        off = np.trace(turns[0] @ np.swapaxes(turns[1], 1, 2), axis1=1, axis2=2)
        assert np.degrees(np.arccos(np.clip((moved.min() - 1.0) / 2.0, -1.0, 1.0))) > 20.0, name  # (it moves)
        assert np.degrees(np.arccos(np.clip((off.min() - 1.0) / 2.0, -1.0, 1.0))) < 1.0, name


@needs_bpy_5
def test_a_mixamo_named_clip_with_fingers_onto_a_generated_rigify_human(tmp_path):
    """A clip named as Mixamo names its bones (mixamorig:LeftHandIndex1..4), fingers curling, onto a generated
    Rigify human: every part and finger mapped by name, and its deforming bones keep the motion and each finger's
    curl: each deforming finger bone points, frame by frame, where the clip's finger bone's turn since the first
    frame takes it (the rig's fingers rest otherwise; its deforming fingers stretch between their tweaks, so their
    twist is their own)."""
    rig = rigbuild.generated_rigify()
    clip = mocap_clips.key_clip("crouch", fingers=True, location=(-1.5, 0.0, 0.0))
    bpy.context.view_layer.objects.active = clip
    bpy.ops.object.mode_set(mode='EDIT')
    for tip in [b for b in clip.data.edit_bones if b.name.endswith("3") and "Hand" in b.name]:
        end = clip.data.edit_bones.new(tip.name[:-1] + "4")  # (Mixamo's fingertip ends, which never turn)
        end.head, end.tail, end.parent, end.use_connect = tip.tail, tip.tail + (tip.tail - tip.head), tip, True
    bpy.ops.object.mode_set(mode='OBJECT')
    for bone in list(clip.data.bones):
        bone.name = f"mixamorig:{bone.name}"
    work = retargeted(clip, rig)
    assert len(work.layout.fingers) == 10, work.layout.fingers
    check_kept(clip, rig, work, deforming(setup.mapping(rig)), ankles={s: f"DEF-shin.{s}.001" for s in "LR"})
    for clip_bones, rig_bones in work.layout.fingers.values():
        deform = [f"DEF-{name}" for name in rig_bones]
        clip_track, rig_track = Track.read(clip, clip_bones, work.frames), Track.read(rig, deform, work.frames)
        for clip_bone, rig_bone in zip(clip_bones, deform):
            turn = clip_track.turn(clip_bone)
            since = turn @ np.swapaxes(turn[:1], 1, 2)
            way = rig_track.matrices[rig_bone][:, :3, 1]
            way = way / np.linalg.norm(way, axis=1)[:, None]
            wanted = since @ way[0]
            assert np.degrees(np.arccos(np.clip(np.einsum("fi,fi->f", wanted, way), -1.0, 1.0))).max() < 2.0, rig_bone
