# SPDX-License-Identifier: GPL-3.0-or-later
"""One-click setup in the real bpy module: an effector with a new target at the tip, poles that move nothing,
the active effector following the selection, and the panel staying while a target is active."""

from __future__ import annotations

import math
import types

import bpy
import numpy as np
import pytest
from blender_scenes import RecordingLayout, chain_rig, rigbuild, tip_world
from mathutils import Euler, Vector

from fabrik_addon.blender.rig.status import statuses
from fabrik_addon.blender.ui import setup_ops
from fabrik_addon.core.goals.pole_angle import auto_pole_angle, pole_point

pytestmark = pytest.mark.usefixtures("clean_scene")

#: How far a bone may turn (quaternion components) when a setup step must leave the pose alone.
STILL = 1e-4
REACHED = 1e-3


def posed_rig(bent: bool = True, live: bool = True, roll=None):
    """A four-bone chain along +Z, bent in the pose (or straight), with live solving as asked and no effector."""
    bones = [bone + ((roll,) if roll else ()) for bone in rigbuild.chain_bones(4, 1.0)]
    rig = rigbuild.make_armature("Rig", bones)
    if bent:
        for name, angles in (("bone1", (0.5, 0.0, 0.1)), ("bone2", (0.6, 0.2, 0.0)), ("bone3", (0.3, 0.0, -0.2))):
            pose_bone = rig.pose.bones[name]
            pose_bone.rotation_mode = 'XYZ'
            pose_bone.rotation_euler = Euler(angles)
    rig.fabrik.live = live
    bpy.context.view_layer.objects.active = rig
    bpy.context.view_layer.update()
    return rig


def rotations(rig) -> np.ndarray:
    """Every pose bone's rotation as shown (armature-space quaternions, sign-fixed)."""
    depsgraph = bpy.context.evaluated_depsgraph_get()
    rows = []
    for pose_bone in rig.evaluated_get(depsgraph).pose.bones:
        q = np.array(pose_bone.matrix.to_quaternion())
        rows.append(q if q[0] >= 0 else -q)
    return np.array(rows)


def in_pose_mode(rig, bone: str) -> None:
    """Pose Mode on the rig with `bone` active, as an animator has it before Shift+I."""
    bpy.context.view_layer.objects.active = rig
    bpy.ops.object.mode_set(mode='POSE')
    rig.data.bones.active = rig.data.bones[bone]


# ---------------------------------------------------------------- the pure pole-angle math


def _up_across(x_axis, z_axis, axis, angle):
    """The up vector X cos(a) + Z sin(a) seen across the unit axis."""
    up = np.asarray(x_axis) * math.cos(angle) + np.asarray(z_axis) * math.sin(angle)
    return up - axis * (axis @ up)


def test_auto_pole_angle_points_the_up_vector_at_the_pole_across_the_chain():
    """For random first-bone frames, lines and poles, the up vector of the angle faces the pole across the line."""
    rng = np.random.default_rng(7)
    for _ in range(200):
        frame, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        base, tip, pole = rng.normal(size=(3, 3))
        angle = auto_pole_angle(base, tip, frame[:, 0], frame[:, 2], pole)
        axis = (tip - base) / np.linalg.norm(tip - base)
        towards = (pole - base) - axis * (axis @ (pole - base))
        up = _up_across(frame[:, 0], frame[:, 2], axis, angle)
        assert -math.pi <= angle <= math.pi
        assert np.linalg.norm(np.cross(up, towards)) < 1e-9 * np.linalg.norm(up) * np.linalg.norm(towards)
        assert up @ towards > 0


def test_auto_pole_angle_of_the_usual_knee_is_minus_90_degrees():
    """A chain along its first bone's Y with the pole on its -Z side: Blender users' -90 degrees."""
    assert math.degrees(auto_pole_angle((0, 0, 0), (0, 2, 0), (1, 0, 0), (0, 0, 1), (0, 1, -2))) == pytest.approx(-90)
    assert auto_pole_angle((0, 0, 0), (0, 2, 0), (1, 0, 0), (0, 0, 1), (0, 5, 0)) is None  # on the line


def test_pole_point_goes_out_from_the_knee_on_the_bent_side_or_off_minus_z_when_straight():
    """A bent chain's pole lies in its plane beyond the knee; a straight one's off its middle on the -Z side."""
    bent = [(0, 0, 0), (0, 0.4, 1), (0, 0, 2)]
    assert np.allclose(pole_point(bent, (1, 0, 0), (0, 0, 1), 2.0), (0, 2.4, 1))
    straight = [(0, 0, 0), (0, 0, 1), (0, 0, 2)]
    assert np.allclose(pole_point(straight, (1, 0, 0), (0, -1, 0), 2.0), (0, 2, 1))
    assert np.allclose(pole_point(straight, (1, 0, 0), (0, 0, 1), 2.0), (2, 0, 1))  # Z along the chain: +X


# ---------------------------------------------------------------- effector with a new target


@pytest.mark.parametrize("bent", [True, False])
def test_effector_with_a_new_empty_at_the_tip_moves_nothing_and_reaches(bent):
    """Pose Mode, the bone active, nothing else selected (Lock Object Modes): one click adds effector and target."""
    rig = posed_rig(bent=bent)
    before = rotations(rig)
    in_pose_mode(rig, "bone3")
    assert bpy.ops.fabrik.effector_add_with_target() == {'FINISHED'}
    bpy.context.view_layer.update()
    effector = rig.fabrik.effectors[0]
    target = bpy.data.objects["IK-bone3"]
    assert (effector.name, effector.bone, effector.target, effector.chain_length) == ("bone3", "bone3", target, 0)
    assert target.type == 'EMPTY' and target.empty_display_type == 'SPHERE'
    assert 0.2 < target.empty_display_size < 0.3  # a quarter of the bone
    assert rig.users_collection[0] in target.users_collection
    assert (target.matrix_world.translation - tip_world(rig, "bone3")).length < 1e-5
    assert np.abs(rotations(rig) - before).max() < STILL
    assert statuses["Rig"].ok and not statuses["Rig"].missed
    assert rig.mode == 'POSE' and bpy.context.view_layer.objects.active == rig
    if bent:  # (a straight chain with its target at full reach is FABRIK's degenerate case: it bends a hair)
        # Ticking Rotation moves nothing either: the empty has the tip bone's turn.
        effector.use_rotation = True
        bpy.context.view_layer.update()
        assert np.abs(rotations(rig) - before).max() < STILL
    # And it is an IK target: dragging it moves the chain.
    target.location += Vector((0.3, 0.2, -0.4))
    bpy.context.view_layer.update()
    assert (tip_world(rig, "bone3") - target.location).length < REACHED


def test_the_first_effector_turns_live_solving_on_and_a_later_one_leaves_it_as_it_is():
    """The quick start as written: one click, then dragging the target moves the chain (no checkbox first); a
    second effector on a rig whose live solving is off (after a bake) leaves it off."""
    rig = posed_rig(live=False)
    in_pose_mode(rig, "bone3")
    assert bpy.ops.fabrik.effector_add_with_target() == {'FINISHED'}
    assert rig.fabrik.live
    target = bpy.data.objects["IK-bone3"]
    target.location += Vector((0.3, 0.2, -0.4))
    bpy.context.view_layer.update()
    assert (tip_world(rig, "bone3") - target.location).length < REACHED
    rig.fabrik.live = False
    in_pose_mode(rig, "bone1")
    assert bpy.ops.fabrik.effector_add_with_target() == {'FINISHED'}
    assert not rig.fabrik.live and len(rig.fabrik.effectors) == 2


def test_a_second_effector_on_the_same_bone_gets_a_name_of_its_own():
    """Drivers of a converted rig's switch and Restore find effectors by name: one-click setup never repeats one."""
    rig = posed_rig()
    in_pose_mode(rig, "bone3")
    assert bpy.ops.fabrik.effector_add_with_target() == {'FINISHED'}
    assert bpy.ops.fabrik.effector_add_with_target() == {'FINISHED'}
    assert [e.name for e in rig.fabrik.effectors] == ["bone3", "bone3 (2)"]


def test_effector_with_a_new_control_bone_moves_nothing_and_the_bone_drives_the_chain():
    """target_type BONE: a new bone at the tip, outside the chain, made the effector's target bone."""
    rig = posed_rig()
    before = rotations(rig)
    in_pose_mode(rig, "bone3")
    assert bpy.ops.fabrik.effector_add_with_target(target_type='BONE', chain_length=3) == {'FINISHED'}
    bpy.context.view_layer.update()
    effector = rig.fabrik.effectors[0]
    control = rig.data.bones["IK-bone3"]
    assert (effector.target, effector.subtarget, effector.chain_length) == (rig, "IK-bone3", 3)
    assert control.parent is None and not control.use_deform
    selected = getattr(rig.pose.bones["IK-bone3"], "select", None)
    assert rig.mode == 'POSE' and rig.data.bones.active == control and (control.select if selected is None else selected)
    depsgraph = bpy.context.evaluated_depsgraph_get()
    head = rig.evaluated_get(depsgraph).pose.bones["IK-bone3"].head
    assert (rig.matrix_world @ head - tip_world(rig, "bone3")).length < 1e-5
    assert np.abs(rotations(rig)[: len(before)] - before).max() < STILL
    assert statuses["Rig"].ok and not statuses["Rig"].missed
    rig.pose.bones["IK-bone3"].location = (0.2, -0.3, 0.1)
    bpy.context.view_layer.update()
    assert (tip_world(rig, "bone3") - rig.matrix_world @ rig.evaluated_get(
        bpy.context.evaluated_depsgraph_get()).pose.bones["IK-bone3"].head).length < REACHED
    # Undo-safe names: a second one gets its own bone.
    assert bpy.ops.fabrik.effector_add_with_target(target_type='BONE') == {'FINISHED'}
    assert rig.fabrik.effectors[1].subtarget != "IK-bone3" and rig.fabrik.effectors[1].subtarget in rig.data.bones


def test_effector_with_a_new_target_needs_an_armature_with_an_active_bone():
    """Without an active bone (or with a mesh active) the operator is greyed out."""
    rig = posed_rig(live=False)
    rig.data.bones.active = None
    assert not bpy.ops.fabrik.effector_add_with_target.poll()
    bpy.context.view_layer.objects.active = bpy.data.objects["Rig"]
    rig.data.bones.active = rig.data.bones["bone2"]
    assert bpy.ops.fabrik.effector_add_with_target.poll()
    with pytest.raises(RuntimeError, match="longer than the bones up to the root"):  # only 3 bones up to the root
        bpy.ops.fabrik.effector_add_with_target(chain_length=9)
    assert len(rig.fabrik.effectors) == 0


# ---------------------------------------------------------------- poles


@pytest.mark.parametrize("bent", [True, False])
@pytest.mark.parametrize("roll", [None, (1.0, 1.0, 0.0)])
def test_adding_a_pole_keeps_every_bone_where_it_was(bent, roll):
    """fabrik.pole_add puts an empty beside the bend and sets the angle that makes Blender's turn none at all."""
    rig = posed_rig(bent=bent, roll=roll)
    in_pose_mode(rig, "bone3")
    bpy.ops.fabrik.effector_add_with_target()
    bpy.context.view_layer.update()
    before = rotations(rig)
    assert bpy.ops.fabrik.pole_add() == {'FINISHED'}
    bpy.context.view_layer.update()
    effector = rig.fabrik.effectors[0]
    if not bent and roll is None:
        assert math.degrees(effector.pole_angle) == pytest.approx(-90.0, abs=1e-3)  # the usual knee
    pole = bpy.data.objects["Pole-bone3"]
    assert effector.pole_target == pole and rig.users_collection[0] in pole.users_collection
    assert np.abs(rotations(rig) - before).max() < STILL
    assert (tip_world(rig, "bone3") - effector.target.matrix_world.translation).length < REACHED
    assert statuses["Rig"].ok and not statuses["Rig"].missed
    # The pole steers: moved round the chain, the chain follows it round.
    pole.location = rig.matrix_world @ Vector((-pole.location.x, -pole.location.y, pole.location.z))
    effector.target.location.z -= 0.5
    bpy.context.view_layer.update()
    assert (tip_world(rig, "bone3") - effector.target.matrix_world.translation).length < REACHED


def test_a_pole_added_after_the_target_moved_keeps_the_chain_only_from_the_previous_solution():
    """Found in Blender 3.4's GUI: live solving from This Frame's Pose starts each solve from the animator's pose;
    once the target has moved away from the tip, Blender's pole turns that start pose and it solves to another
    pose, whatever the angle. The operator says so (a warning); from the previous solution nothing moves."""
    for start in ('FK', 'PREVIOUS'):
        bpy.ops.wm.read_factory_settings(use_empty=True)
        rig = posed_rig()
        rig.fabrik.start = start
        in_pose_mode(rig, "bone3")
        bpy.ops.fabrik.effector_add_with_target()
        bpy.context.view_layer.update()
        effector = rig.fabrik.effectors[0]
        joints, _x, _z, reach = setup_ops._pole_frame(rig, bpy.context, effector)
        assert not setup_ops._solve_starts_elsewhere(rig, bpy.context, effector, joints, reach)
        effector.target.location += Vector((0.8, 0.5, -0.9))
        bpy.context.view_layer.update()
        joints, _x, _z, reach = setup_ops._pole_frame(rig, bpy.context, effector)
        assert setup_ops._solve_starts_elsewhere(rig, bpy.context, effector, joints, reach) == (start == 'FK')
        if start == 'PREVIOUS':
            before = rotations(rig)
            assert bpy.ops.fabrik.pole_add() == {'FINISHED'}
            bpy.context.view_layer.update()
            assert np.abs(rotations(rig) - before).max() < STILL
            assert (tip_world(rig, "bone3") - effector.target.matrix_world.translation).length < REACHED


@pytest.mark.parametrize("start", ["FK", "PREVIOUS"])
def test_auto_pole_angle_for_a_pole_placed_by_hand_gives_the_pose_back(start):
    """A pole set by hand turns the chain; Auto Pole Angle finds the angle for which it turns it not at all, from
    this frame's pose (Blender's rule) and from the previous solution (where the chain turns as if at rest)."""
    rig = posed_rig()
    rig.fabrik.start = start
    in_pose_mode(rig, "bone3")
    bpy.ops.fabrik.effector_add_with_target()
    bpy.context.view_layer.update()
    before = rotations(rig)
    effector = rig.fabrik.effectors[0]
    effector.pole_target = rigbuild.make_target("Pole", (2.0, -1.0, 1.0))
    bpy.context.view_layer.update()
    assert np.abs(rotations(rig) - before).max() > 0.01  # angle 0: the chain turned
    if start == "PREVIOUS":
        # Each solve goes on from the last: live off gives the animator's pose back, Auto Pole Angle reads it there,
        # and live again, the pose as it was stays.
        rig.fabrik.live = False
        bpy.context.view_layer.update()
        assert np.abs(rotations(rig) - before).max() < STILL
    assert bpy.ops.fabrik.pole_angle_auto() == {'FINISHED'}
    rig.fabrik.live = True
    bpy.context.view_layer.update()
    assert np.abs(rotations(rig) - before).max() < STILL
    effector.pole_target.location = effector.target.location  # on the chain's line: no side to face
    bpy.context.view_layer.update()
    with pytest.raises(RuntimeError, match="no side"):
        bpy.ops.fabrik.pole_angle_auto()


# ---------------------------------------------------------------- selection and the panel


def test_the_active_bone_selects_its_effector():
    """sync_active_effector (the selection handler's work) picks the effector of the tip or target bone."""
    rig, _target = chain_rig(live=False)
    rigbuild.add_effector(rig, "bone1", rig).subtarget = "bone3"
    rig.fabrik.active_effector = 0
    rig.data.bones.active = rig.data.bones["bone3"]
    assert setup_ops.sync_active_effector(rig) is False  # already the active one: nothing written
    rig.data.bones.active = rig.data.bones["bone1"]
    assert setup_ops.sync_active_effector(rig) and rig.fabrik.active_effector == 1
    rig.data.bones.active = rig.data.bones["bone0"]  # no effector: the list keeps its choice
    assert not setup_ops.sync_active_effector(rig) and rig.fabrik.active_effector == 1


def test_the_selection_handler_follows_bones_and_targets_but_leaves_a_list_click_alone():
    """The handler syncs once per new selection, so picking another effector in the list sticks."""
    rig, target = chain_rig(live=False)
    rigbuild.add_effector(rig, "bone1", rigbuild.make_target("Other", (0.0, 1.0, 1.0)))
    rig.data.bones.active = rig.data.bones["bone1"]
    setup_ops.on_selection_change(bpy.context.scene)
    assert rig.fabrik.active_effector == 1
    rig.fabrik.active_effector = 0  # a click in the list
    setup_ops.on_selection_change(bpy.context.scene)
    assert rig.fabrik.active_effector == 0
    bpy.context.view_layer.objects.active = bpy.data.objects["Other"]  # the target of effector 1
    setup_ops.on_selection_change(bpy.context.scene)
    assert rig.fabrik.active_effector == 1
    bpy.context.view_layer.objects.active = target
    setup_ops.on_selection_change(bpy.context.scene)
    assert rig.fabrik.active_effector == 0


def test_the_panel_stays_while_a_target_or_pole_is_the_active_object():
    """With the target active (as while dragging it) the tab shows its rig; an unrelated object shows none."""
    from fabrik_addon.blender.ui.panels import FABRIK_UL_effectors, VIEW3D_PT_fabrik, VIEW3D_PT_fabrik_effector

    rig, target = chain_rig()
    pole = rigbuild.make_target("Pole", (0.0, -2.0, 1.0))
    rig.fabrik.effectors[0].pole_target = pole
    rig.fabrik.effectors[0].name = "Hand"
    stranger = rigbuild.make_target("Stranger", (3.0, 0.0, 0.0))
    bpy.context.view_layer.update()
    for active in (target, pole):
        context = types.SimpleNamespace(object=active, scene=bpy.context.scene)
        assert setup_ops.rig_for_panel(context) == rig and VIEW3D_PT_fabrik.poll(context)
        log = []
        for panel in (VIEW3D_PT_fabrik, VIEW3D_PT_fabrik_effector):  # the active effector has a sub-panel
            panel.draw(types.SimpleNamespace(layout=RecordingLayout(log)), context)
        assert ("label", (), {"text": "Rig: Rig", "icon": 'ARMATURE_DATA'}) in log
        props = {args[1] for name, args, _ in log if name == "prop"}
        assert {"live", "name", "chain_length", "pole_angle"} <= props
        operators = {args[0] for name, args, _ in log if name == "operator"}
        assert {"fabrik.effector_add_with_target", "fabrik.pole_add", "fabrik.pole_angle_auto"} <= operators
    assert not VIEW3D_PT_fabrik.poll(types.SimpleNamespace(object=stranger, scene=bpy.context.scene))
    assert setup_ops.rig_for_panel(types.SimpleNamespace(object=rig, scene=bpy.context.scene)) == rig
    row_log = []
    FABRIK_UL_effectors.draw_item(None, None, RecordingLayout(row_log), rig.fabrik, rig.fabrik.effectors[0], 0, None, "", 0)
    assert ("prop", (rig.fabrik.effectors[0], "name"), {"text": "", "emboss": False}) in row_log


def test_the_panels_buttons_work_on_its_rig_while_a_target_is_active():
    """The tab shows the rig while its target is active, so its buttons act on that rig, not on nothing (they
    were greyed out); adding an effector still needs the armature itself (its active bone)."""
    rig, target = chain_rig(target_at=(1.0, 0.0, 3.0), live=False)
    stranger = rigbuild.make_target("Stranger", (3.0, 0.0, 0.0))
    bpy.context.view_layer.objects.active = target
    bpy.context.view_layer.update()
    assert (tip_world(rig, "bone3") - target.matrix_world.translation).length > 0.5
    assert bpy.ops.fabrik.solve() == {'FINISHED'}
    bpy.context.view_layer.update()
    assert (tip_world(rig, "bone3") - target.matrix_world.translation).length < 1e-3
    assert statuses["Rig"].reached.get(0)
    assert bpy.ops.fabrik.effector_remove.poll() and not bpy.ops.fabrik.effector_move.poll()  # (one effector)
    assert bpy.ops.fabrik.convert_constraints.poll()
    assert not bpy.ops.fabrik.restore_constraints.poll()  # (nothing converted: nothing to restore)
    assert not bpy.ops.fabrik.effector_add.poll()
    assert bpy.ops.fabrik.compare_solvers.poll()  # (the Testing sub-panel's buttons too)
    assert bpy.ops.fabrik.target_motion(preset='CIRCLE', effector_target=True) == {'FINISHED'}
    assert target.animation_data is not None and target.animation_data.action is not None
    bpy.context.view_layer.objects.active = stranger
    assert not bpy.ops.fabrik.solve.poll() and not bpy.ops.fabrik.effector_remove.poll()
    assert not bpy.ops.fabrik.compare_solvers.poll()


def test_the_pose_ik_menu_offers_the_operator_and_unregister_removes_it():
    """Pose > Inverse Kinematics gets our entry beside Blender's Add IK; nothing stays after unregistering."""
    menu = bpy.types.VIEW3D_MT_pose_ik
    assert setup_ops.draw_pose_ik_menu in menu._dyn_ui_initialize()
    log = []
    setup_ops.draw_pose_ik_menu(types.SimpleNamespace(layout=RecordingLayout(log)), bpy.context)
    assert ("operator", ("fabrik.effector_add_with_target",), {"text": "FABRIK Effector with New Target"}) in log
    setup_ops.unregister()
    try:
        assert setup_ops.draw_pose_ik_menu not in menu._dyn_ui_initialize()
        assert setup_ops.on_selection_change not in bpy.app.handlers.depsgraph_update_post
        assert not hasattr(bpy.types, "FABRIK_OT_pole_add")
    finally:
        setup_ops.register()
