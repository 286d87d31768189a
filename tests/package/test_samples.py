# SPDX-License-Identifier: GPL-3.0-or-later
"""The sample rigs build, solve onto their targets, bake and play back; the target motion operator; a tiny render."""

from __future__ import annotations

import importlib
import importlib.util
import math

import bpy
import numpy as np
import pytest
from blender_scenes import ROOT, empty_scene, rigbuild
from mathutils import Vector

import fabrik_addon
from fabrik_addon.blender.bake import baking
from fabrik_addon.blender.ui import target_motion

SAMPLES = ("chain", "robot_arm", "tentacle", "hand", "hexapod", "humanoid", "ur5")
#: Frames per sample in the tests: each sample fits its whole loop into them, so this covers it coarsely.
TEST_FRAMES = range(1, 13)


@pytest.fixture(scope="module", autouse=True)
def addon():
    """The add-on registered from the source tree for the whole module."""
    fabrik_addon.register()
    yield
    fabrik_addon.unregister()


@pytest.fixture(autouse=True)
def scene():
    """Every test starts from an empty file; Rigify (the humanoid enables it) is switched off again after."""
    empty_scene()
    yield bpy.context.scene
    if "rigify" in bpy.context.preferences.addons:
        rigbuild.disable_rigify()


def load_demo():
    """tools/demo.py as a module (tools/ is not a package), for its rendering helpers."""
    spec = importlib.util.spec_from_file_location("fabrik_demo", ROOT / "tools" / "demo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def worst_reachable_error(rig, frames) -> tuple[float, int]:
    """Play the frames; the worst tip-to-target distance where the target is in reach, and how many checks counted."""
    scene = bpy.context.scene
    worst, counted = 0.0, 0
    for frame in frames:
        scene.frame_set(frame)
        for _, error, in_reach in rigbuild.measure(rig):
            if in_reach:
                worst, counted = max(worst, error), counted + 1
    return worst, counted


@pytest.mark.parametrize("name", SAMPLES)
def test_sample_reaches_its_targets_and_bakes(name):
    """Live solving puts every tip on its target in reach (within the sample's tolerance); so do the baked keys."""
    sample = importlib.import_module(f"samples.{name}")
    tolerance = getattr(sample, "TOLERANCE", 1e-3)
    rig = sample.build(TEST_FRAMES)
    assert rig.fabrik.live and len(rig.fabrik.effectors) > 0
    assert (bpy.context.scene.frame_start, bpy.context.scene.frame_end) == (TEST_FRAMES.start, TEST_FRAMES.stop - 1)
    worst, counted = worst_reachable_error(rig, TEST_FRAMES)
    assert counted >= len(TEST_FRAMES) * len(rig.fabrik.effectors) // 2, "most targets should be in reach"
    assert worst < tolerance, f"{name}: live worst error {worst:.2e}"

    result = baking.bake_object(rig, TEST_FRAMES, warm_start=getattr(sample, "BAKE_WARM_START", True))
    assert result.frames == len(TEST_FRAMES) and result.keys > 0 and not result.problems, result.problems
    assert not rig.fabrik.live, "baking switches live solving off, so playback shows the keys"
    baked, _ = worst_reachable_error(rig, TEST_FRAMES)
    assert baked < tolerance, f"{name}: baked worst error {baked:.2e}"


@pytest.mark.parametrize("name", [n for n in SAMPLES if n != "chain"])
def test_sample_shows_meshes_on_its_bones(name):
    """Renders never show armatures, so every sample parents meshes to its bones."""
    rig = importlib.import_module(f"samples.{name}").build(range(1, 3))
    on_bones = [o for o in bpy.data.objects if o.type == 'MESH' and o.parent == rig and o.parent_type == 'BONE']
    assert len(on_bones) >= 5
    assert all(o.parent_bone in rig.data.bones for o in on_bones)


def test_robot_arm_joints_are_hinges():
    """Every robot arm bone has exactly two locked IK axes, and a range on the third."""
    from samples import robot_arm

    rig = robot_arm.build(range(1, 3))
    assert len(rig.pose.bones) == 6
    for pose_bone in rig.pose.bones:
        locked = [axis for axis in "xyz" if getattr(pose_bone, f"lock_ik_{axis}")]
        limited = [axis for axis in "xyz" if getattr(pose_bone, f"use_ik_limit_{axis}")]
        assert len(locked) == 2 and len(limited) == 1 and limited[0] not in locked, pose_bone.name


def test_robot_arm_solves_with_default_iterations():
    """No raised iteration cap: the arm reaches with the add-on's defaults, warm-started for smooth motion."""
    from samples import robot_arm

    rig = robot_arm.build(range(1, 3))
    default = type(rig.fabrik).bl_rna.properties["iterations"].default
    assert rig.fabrik.iterations == default == 200
    assert rig.fabrik.start == 'PREVIOUS' and robot_arm.BAKE_WARM_START


def test_tentacle_has_forty_bones_in_cones():
    """40 connected bones, each with a swing cone about X and Z."""
    from samples import tentacle

    rig = tentacle.build(range(1, 3))
    assert len(rig.pose.bones) == 40
    assert all(pb.use_ik_limit_x and pb.use_ik_limit_z for pb in rig.pose.bones)


def test_hand_fingertips_touch_the_ball_when_closed():
    """At the middle of the loop every fingertip is on the ball's surface; at the start they are away from it."""
    from samples import hand

    frames = range(1, 25)
    rig = hand.build(frames)
    scene = bpy.context.scene
    ball = bpy.data.objects["Ball"]

    def gaps(frame):
        scene.frame_set(frame)
        depsgraph = bpy.context.evaluated_depsgraph_get()
        evaluated = rig.evaluated_get(depsgraph)
        tips = [evaluated.matrix_world @ evaluated.pose.bones[f"{f}2"].tail for f in hand.FINGERS]
        return [abs((tip - ball.location).length - hand.BALL_RADIUS) for tip in tips]

    closed = max(hand.closing(frame, frames, 2) for frame in frames)
    middle = max(frames, key=lambda frame: hand.closing(frame, frames, 2))
    assert closed > 0.99
    assert max(gaps(middle)) < 0.02
    assert min(gaps(frames.start)) > 0.05
    assert [e.weight for e in rig.fabrik.effectors] == [2.0, 1.0, 1.0, 1.0, 1.0]


def test_hand_fingers_carry_finger_limits():
    """Knuckles flex and spread but do not twist; middle and distal joints are hinges; the palm is limited too."""
    from samples import hand

    rig = hand.build(range(1, 3))
    bones = rig.pose.bones

    def locked(pb):
        return "".join(axis for axis in "xyz" if getattr(pb, f"lock_ik_{axis}"))

    def limited(pb):
        return "".join(axis for axis in "xyz" if getattr(pb, f"use_ik_limit_{axis}"))

    for finger in hand.FINGERS:
        knuckle, middle, distal = (bones[f"{finger}{j}"] for j in range(3))
        assert (locked(knuckle), limited(knuckle)) == ("y", "xz"), finger
        for hinge in (middle, distal):
            assert (locked(hinge), limited(hinge)) == ("yz", "x"), hinge.name
            # A hinge bends one way: it cannot flex back further than a few degrees.
            assert hinge.ik_min_x >= math.radians(-10.0) and hinge.ik_max_x >= math.radians(60.0), hinge.name
    thumb, index = bones["thumb0"], bones["index0"]
    assert thumb.ik_max_z - thumb.ik_min_z > index.ik_max_z - index.ik_min_z, "the thumb's base swings wider"
    assert limited(bones["palm"]) == "xz" and bones["palm"].ik_max_x <= math.radians(20.0)


def test_hexapod_feet_stay_planted_in_stance():
    """A planted foot's target does not slide while the body moves on; the tripods alternate."""
    from samples import hexapod

    frames = range(1, 25)
    rig = hexapod.build(frames)
    assert len(rig.fabrik.effectors) == 6 and all(e.chain_length == 3 for e in rig.fabrik.effectors)
    planted = {leg: [] for leg in ("front_L", "mid_R", "front_R")}
    for frame in frames:
        for leg in planted:
            planted[leg].append(hexapod.foot_position(leg, (0.0, 0.0), frame, frames))
    # Half a cycle on the ground, half in the air, and the two tripods never lift together.
    for leg in planted:
        grounded = [p[2] == 0.0 for p in planted[leg]]
        assert 0.4 <= sum(grounded) / len(grounded) <= 0.65
    both_up = [a[2] > 1e-6 and b[2] > 1e-6 for a, b in zip(planted["front_L"], planted["front_R"])]
    assert not any(both_up)
    assert planted["front_L"] == [hexapod.foot_position("mid_R", (0.0, 0.0), f, frames) for f in frames]
    # While grounded, a foot keeps its place.
    stance = [p for p in planted["front_R"] if p[2] == 0.0]
    assert len({round(p[1], 9) for p in stance}) <= 2  # one stance per cycle, two cycles
    assert hexapod.body_offset(frames.stop - 1, frames) > 0.5


def test_humanoid_chains_leave_the_spine_alone():
    """Arms and legs are two-bone chains with poles; the head chain stops at the neck; no chain reaches the spine."""
    from samples import humanoid

    rig = humanoid.build(range(1, 3))
    chains = {e.bone: rigbuild.chain_of(rig, e) for e in rig.fabrik.effectors}
    assert set(chains) == {"forearm.L", "forearm.R", "shin.L", "shin.R", "spine.006"}
    for bone, chain in chains.items():
        assert not {"spine", "spine.001", "spine.002", "spine.003"} & set(chain), (bone, chain)
    poles = {e.bone: e.pole_target for e in rig.fabrik.effectors}
    assert all(poles[b] is not None for b in ("forearm.L", "forearm.R", "shin.L", "shin.R"))


def test_ur5_dh_forward_kinematics():
    """The UR5's zero configuration from its DH table: the arm lies along -X; bones run between joint origins."""
    from samples import ur5

    frames = ur5.dh_frames(ur5.UR5)
    assert len(frames) == 7
    tip = frames[-1].translation
    assert tuple(tip) == pytest.approx((-0.81725, -0.19145, 0.089159 - 0.09465), abs=1e-6)
    bones = ur5.dh_bones(frames)
    assert [b.joints for b in bones] == [((0, "Y"),), ((1, "X"),), ((2, "X"),), ((3, "Y"),), ((4, "Y"),), ((5, "Y"),)]
    # A joint angle moves everything after it: joint 1 (the base) turns the tip about Z.
    turned = ur5.dh_frames(ur5.UR5, [math.pi / 2, 0, 0, 0, 0, 0])[-1].translation
    assert tuple(turned) == pytest.approx((-tip.y, tip.x, tip.z), abs=1e-6)


def test_ur5_flange_follows_position_and_rotation():
    """The effector is on the tool flange with all six joints in its chain and a full rotation goal; it is met."""
    from samples import ur5

    frames = range(1, 13)
    rig = ur5.build(frames)
    (effector,) = rig.fabrik.effectors
    flange = ur5.dh_bones(ur5.dh_frames(ur5.UR5))[-1].name
    assert effector.bone == flange and not rig.data.bones[flange].children
    assert effector.chain_length in (0, len(rig.data.bones)) and len(rigbuild.chain_of(rig, effector)) == 6
    assert effector.use_rotation and effector.rotation_weight == 1.0
    assert rig.fabrik.iterations == type(rig.fabrik).bl_rna.properties["iterations"].default
    scene = bpy.context.scene
    tilts = []
    for frame in frames:
        scene.frame_set(frame)
        turn = rigbuild.effector_turn(rig, effector)
        assert turn is not None and turn < 1e-3, f"frame {frame}: the flange is {math.degrees(turn):.3f} degrees off"
        # The target turns along its path (the tool tilts round the work piece), so the rotation goal does work.
        tilts.append(tuple(effector.target.matrix_world.to_quaternion()))
    assert len({tuple(round(c, 3) for c in q) for q in tilts}) == len(frames)


def test_dh_bones_merge_zero_length_links():
    """Links of zero length (intersecting axes, as in a wrist) are merged: no zero-length bones, every joint kept."""
    from samples import ur5

    table = (
        ur5.DH(0.3, 0.0, math.pi / 2),
        ur5.DH(0.0, 0.5, 0.0),
        ur5.DH(0.0, 0.0, math.pi / 2),  # zero length: joint 3 moves on to the next link
        ur5.DH(0.4, 0.0, -math.pi / 2),
        ur5.DH(0.0, 0.0, math.pi / 2),  # zero length again
        ur5.DH(0.1, 0.0, 0.0),
    )
    bones = ur5.dh_bones(ur5.dh_frames(table))
    assert len(bones) == 4
    assert all((b.tail - b.head).length > 1e-3 for b in bones)
    assert sorted(j for b in bones for j, _ in b.joints) == list(range(6))
    assert all(len({axis for _, axis in b.joints}) == len(b.joints) for b in bones)
    with pytest.raises(ValueError):
        ur5.dh_bones(ur5.dh_frames(table[:5]))  # joint 5 would sit on the arm's tip with nothing to carry it


def test_preset_point():
    """Circles start on the first axis and keep their radius; figure eights pass their center twice per loop."""
    r = 0.7
    assert target_motion.preset_point('CIRCLE', 0.0, r, 'XY') == pytest.approx((r, 0.0, 0.0))
    assert target_motion.preset_point('CIRCLE', 0.25, r, 'XY') == pytest.approx((0.0, r, 0.0))
    assert target_motion.preset_point('CIRCLE', 0.25, r, 'XZ') == pytest.approx((0.0, 0.0, r))
    assert target_motion.preset_point('CIRCLE', 0.5, r, 'YZ') == pytest.approx((0.0, -r, 0.0))
    for t in np.linspace(0.0, 1.0, 17):
        assert Vector(target_motion.preset_point('CIRCLE', t, r, 'YZ')).length == pytest.approx(r)
        assert target_motion.preset_point('FIGURE_EIGHT', t, r, 'XY')[2] == 0.0
    for t in (0.0, 0.5, 1.0):
        assert target_motion.preset_point('FIGURE_EIGHT', t, r, 'XZ') == pytest.approx((0.0, 0.0, 0.0), abs=1e-12)
    assert target_motion.preset_point('FIGURE_EIGHT', 0.25, r, 'XZ') == pytest.approx((r, 0.0, 0.0), abs=1e-12)
    assert target_motion.preset_point('FIGURE_EIGHT', 0.75, r, 'XZ') == pytest.approx((-r, 0.0, 0.0), abs=1e-12)
    assert target_motion.preset_point('FIGURE_EIGHT', 0.125, r, 'XZ')[2] == pytest.approx(r)
    with pytest.raises(ValueError):
        target_motion.preset_point('SQUARE', 0.0, r, 'XY')
    with pytest.raises(ValueError):
        target_motion.preset_point('CIRCLE', 0.0, r, 'XW')


def keyed_object(location=(1.0, 2.0, 3.0)):
    """An empty, selected and active, for the motion operator."""
    obj = rigbuild.make_target("Mover", location)
    bpy.context.view_layer.objects.active = obj
    obj.select_set(True)
    return obj


def path_of(obj, frames) -> np.ndarray:
    """The object's evaluated location at each frame."""
    scene = bpy.context.scene
    points = []
    for frame in frames:
        scene.frame_set(frame)
        points.append(tuple(obj.evaluated_get(bpy.context.evaluated_depsgraph_get()).matrix_world.translation))
    return np.array(points)


def key_frames(obj) -> dict[int, list[float]]:
    """Location channel index -> the frames of its keys."""
    from fabrik_addon.blender.rig import animdata

    return {
        fc.array_index: [round(k.co[0], 4) for k in fc.keyframe_points]
        for fc in animdata.fcurves(obj) if fc.data_path == "location"
    }


def test_motion_operator_keys_a_circle_in_its_plane(scene):
    """A circle of the radius around the object's location, in the chosen plane, keyed on every frame of the scene."""
    scene.frame_start, scene.frame_end = 1, 24
    scene.render.fps, scene.render.fps_base = 24, 1.0
    obj = keyed_object()
    assert bpy.ops.fabrik.target_motion(preset='CIRCLE', radius=0.5, speed=1.0, plane='XZ') == {'FINISHED'}
    points = path_of(obj, range(1, 25))
    offsets = points - np.array((1.0, 2.0, 3.0))
    np.testing.assert_allclose(np.linalg.norm(offsets, axis=1), 0.5, atol=1e-5)
    np.testing.assert_allclose(offsets[:, 1], 0.0, atol=1e-6)
    np.testing.assert_allclose(points[0], (1.5, 2.0, 3.0), atol=1e-6)
    # One turn per second at 24 fps: frame 7 is a quarter turn on.
    np.testing.assert_allclose(points[6], (1.0, 2.0, 3.5), atol=1e-5)
    assert key_frames(obj) == {i: [float(f) for f in range(1, 25)] for i in range(3)}


def test_motion_operator_figure_eight_crosses_its_center(scene):
    """The figure eight starts at, and half way passes, the object's location; it spans the radius both ways."""
    scene.render.fps, scene.render.fps_base = 24, 1.0
    obj = keyed_object((0.0, 0.0, 1.0))
    bpy.ops.fabrik.target_motion(preset='FIGURE_EIGHT', radius=0.4, speed=0.5, plane='YZ', frame_start=1, frame_end=48)
    points = path_of(obj, range(1, 49))
    np.testing.assert_allclose(points[0], (0.0, 0.0, 1.0), atol=1e-6)
    np.testing.assert_allclose(points[24], (0.0, 0.0, 1.0), atol=1e-5)  # half a turn at 0.5 turns per second
    np.testing.assert_allclose(points[:, 0], 0.0, atol=1e-6)
    assert points[:, 1].max() == pytest.approx(0.4, abs=1e-3) and points[:, 1].min() == pytest.approx(-0.4, abs=1e-3)


def test_motion_operator_keys_only_its_range(scene):
    """An explicit frame range gets one key per frame; keys outside it stay; running again replaces, not adds."""
    scene.frame_start, scene.frame_end = 1, 100
    obj = keyed_object()
    obj.keyframe_insert("location", frame=50)
    bpy.ops.fabrik.target_motion(preset='CIRCLE', frame_start=5, frame_end=15)
    expected = [float(f) for f in range(5, 16)] + [50.0]
    assert key_frames(obj) == {i: expected for i in range(3)}
    scene.frame_set(5)
    bpy.ops.fabrik.target_motion(preset='FIGURE_EIGHT', frame_start=5, frame_end=15)
    assert key_frames(obj) == {i: expected for i in range(3)}
    with pytest.raises(RuntimeError, match="empty"):  # an ERROR report raises in scripts
        bpy.ops.fabrik.target_motion(frame_start=9, frame_end=3)


def test_motion_operator_is_undoable_and_needs_an_object():
    """Registered with REGISTER and UNDO (so the redo panel and Ctrl+Z work); nothing to key without an object."""
    assert {'REGISTER', 'UNDO'} <= target_motion.FABRIK_OT_target_motion.bl_options
    assert target_motion.FABRIK_OT_target_motion.__doc__.strip()
    assert hasattr(bpy.types, "FABRIK_OT_target_motion")
    assert not bpy.ops.fabrik.target_motion.poll()


def test_render_one_tiny_frame(tmp_path):
    """The demo's render path: staging, a 64x48 Workbench frame, a contact sheet, each with something in view."""
    from samples import ur5

    demo = load_demo()
    frames = range(1, 3)
    rig = ur5.build(frames)
    live = demo.play(rig, frames, rigbuild)
    scene = bpy.context.scene
    demo.stage_scene(scene, rig, frames, ur5.VIEW, live["points"], live["paths"], size=(64, 48))
    frame = demo.render_frame(scene, 1, tmp_path / "frame.png", size=(64, 48))
    sheet = demo.compose_sheet([frame, frame], tmp_path / "sheet.png")
    image = bpy.data.images.load(str(sheet))
    try:
        assert tuple(image.size) == (2 * 64 + 4, 48)
        pixels = np.empty(image.size[0] * image.size[1] * 4, dtype=np.float32)
        image.pixels.foreach_get(pixels)
        rgb = pixels.reshape(-1, 4)[:, :3]
        assert rgb.std(axis=0).max() > 0.02, "the render is a flat colour: nothing in view"
    finally:
        bpy.data.images.remove(image)


def test_demo_counts_a_pair_reached_only_within_tolerance_and_by_the_panel():
    """The demo's "reached": distance and rotation goal within the sample's tolerance, and the panel said reached."""
    from fabrik_addon.blender.rig.status import statuses
    from samples import ur5

    demo = load_demo()
    frames = range(1, 4)
    rig = ur5.build(frames)
    live = demo.play(rig, frames, rigbuild, ur5.TOLERANCE, status=lambda: statuses[rig.name])
    assert live["reached"] == live["reachable"] == live["checks"] == 3 and not live["misses"]
    assert live["worst_turn"] is not None and live["worst_turn"] < 0.05
    strict = demo.play(rig, frames, rigbuild, 0.0)
    assert strict["reached"] == 0 and len(strict["misses"]) == 3 and strict["worst_turn"] is not None


def test_target_motion_can_key_the_active_effectors_target():
    """From the FABRIK panel the preset keys the effector's target, not the selected armature."""
    from blender_scenes import chain_rig

    bpy.ops.wm.read_factory_settings(use_empty=True)
    rig, target = chain_rig(count=3, live=False)
    bpy.context.view_layer.objects.active = rig
    rig.select_set(True)
    assert bpy.ops.fabrik.target_motion(preset="CIRCLE", radius=0.5, effector_target=True, frame_start=1, frame_end=10) == {"FINISHED"}
    assert target.animation_data is not None and target.animation_data.action is not None
    assert rig.animation_data is None or rig.animation_data.action is None
