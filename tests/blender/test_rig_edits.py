# SPDX-License-Identifier: GPL-3.0-or-later
"""What users and careless files do to a rig in real bpy: bones renamed, constraints renamed or their effectors
removed before Restore, Rigify's own switches, targets deleted in the viewport. None of it breaks the rig."""

from __future__ import annotations

import blf
import bpy
import pytest
from blender_scenes import chain_rig, rigbuild, target_world, tip_world

from fabrik_addon.blender.effectors import constraints, integrity
from fabrik_addon.blender.rig.status import statuses

pytestmark = pytest.mark.usefixtures("clean_scene")


def settle() -> None:
    """Let the handlers run as after an edit in the viewport, and on a frame change."""
    bpy.context.view_layer.update()
    bpy.context.scene.frame_set(bpy.context.scene.frame_current)


def reached(rig, bone: str, target) -> bool:
    """Whether the bone's tail is on the target as Blender evaluates the scene."""
    return (tip_world(rig, bone) - target_world(target)).length < 1e-3


def rename_in_edit_mode(rig, old: str, new: str) -> None:
    """Rename a bone as a user does in the viewport: in Edit Mode, with a frame change while there."""
    bpy.context.view_layer.objects.active = rig
    bpy.ops.object.mode_set(mode='EDIT')
    rig.data.edit_bones[old].name = new
    bpy.context.scene.frame_set(bpy.context.scene.frame_current + 1)  # live solving meets the rig in Edit Mode
    bpy.ops.object.mode_set(mode='OBJECT')


# -- 5. bones renamed ---------------------------------------------------------------------------------------------


def test_an_edit_mode_rename_of_the_tip_bone_is_followed():
    rig, target = chain_rig()
    settle()
    rename_in_edit_mode(rig, "bone3", "hand")
    target.location.x += 0.2
    settle()
    assert rig.fabrik.effectors[0].bone == "hand"
    assert rig.fabrik.live, statuses["Rig"].message
    assert statuses["Rig"].ok and all(statuses["Rig"].reached.values())
    assert reached(rig, "hand", target)


def test_renames_by_name_follow_for_chain_target_and_pole_bones():
    """Renamed through `bone.name` in Object Mode: the tip, a bone of the target armature and of the pole's."""
    rig, _ = chain_rig()
    other = rigbuild.make_armature("Other", rigbuild.chain_bones(2, 1.0, start=(2.0, 0.0, 0.0)))
    effector = rig.fabrik.effectors[0]
    effector.target, effector.subtarget = other, "bone1"
    effector.pole_target, effector.pole_subtarget = other, "bone0"
    settle()
    rig.data.bones["bone3"].name = "tip"
    other.data.bones["bone1"].name = "goal"
    other.data.bones["bone0"].name = "knee"
    settle()
    assert (effector.bone, effector.subtarget, effector.pole_subtarget) == ("tip", "goal", "knee")
    assert statuses["Rig"].ok and all(statuses["Rig"].reached.values()), statuses["Rig"].effectors


def test_renames_follow_after_save_and_reload_and_undo_takes_them_back(tmp_path):
    rig, _ = chain_rig()
    settle()
    path = str(tmp_path / "renamed.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.open_mainfile(filepath=path)
    rig = bpy.data.objects["Rig"]
    bpy.ops.ed.undo_push(message="before renaming")
    rig.data.bones["bone3"].name = "tip"
    settle()
    assert rig.fabrik.effectors[0].bone == "tip"
    assert all(statuses["Rig"].reached.values())
    bpy.ops.ed.undo_push(message="renamed")
    bpy.ops.ed.undo()
    rig = bpy.data.objects["Rig"]
    assert "bone3" in rig.data.bones and rig.fabrik.effectors[0].bone == "bone3"


def test_a_deleted_tip_bone_says_so_in_words_and_keeps_live_solving_on():
    rig, _ = chain_rig()
    rigbuild.add_effector(rig, "bone1", rigbuild.make_target("Other", (1.0, 0.0, 1.0)), chain_length=2)
    settle()
    bpy.context.view_layer.objects.active = rig
    bpy.ops.object.mode_set(mode='EDIT')
    rig.data.edit_bones.remove(rig.data.edit_bones["bone3"])
    bpy.ops.object.mode_set(mode='OBJECT')
    settle()
    status = statuses["Rig"]
    assert rig.fabrik.live
    assert status.effectors[0] == "bone 'bone3' is not in the armature 'Rig' (renamed or deleted?)"
    assert status.reached.get(1) is True  # the other effector still solves


# -- 6. Restore finds its constraints -------------------------------------------------------------------------------


def converted_rig():
    """A 4-bone chain whose tip's IK constraint was converted."""
    rig, target = chain_rig(live=False)
    rig.fabrik.effectors.clear()
    constraint = rig.pose.bones["bone3"].constraints.new('IK')
    constraint.name, constraint.target, constraint.chain_count = "IK", target, 3
    converted, skipped = constraints.convert_ik_constraints(rig)
    assert converted == ["'IK' on 'bone3'"] and not skipped
    bpy.context.view_layer.objects.active = rig
    return rig, constraint


def test_restore_finds_a_renamed_constraint():
    rig, constraint = converted_rig()
    constraint.name = "Arm IK"
    restored, problems = constraints.restore_ik_constraints(rig)
    assert restored == ["'Arm IK' on 'bone3' (was 'IK' on 'bone3')"] and not problems
    assert not constraint.mute and not len(rig.fabrik.effectors)


def test_restore_finds_the_constraint_of_a_removed_effector(capfd):
    """Removing a converted effector says its constraint stays muted and that Restore brings it back (else the
    chain has neither solver, silently); Restore does."""
    rig, constraint = converted_rig()
    capfd.readouterr()
    assert bpy.ops.fabrik.effector_remove() == {'FINISHED'}
    said = "".join(capfd.readouterr())
    assert "IK constraint 'IK' on 'bone3' stays muted" in said and "Restore IK Constraints" in said, said
    assert constraint.mute
    assert bpy.ops.fabrik.restore_constraints() == {'FINISHED'}
    assert not constraint.mute
    assert not len(rig.fabrik.converted)


def test_restore_finds_the_constraint_on_a_renamed_bone():
    rig, _ = converted_rig()
    rename_in_edit_mode(rig, "bone3", "hand")
    restored, problems = constraints.restore_ik_constraints(rig)
    assert restored == ["'IK' on 'hand'"] and not problems
    assert not rig.pose.bones["hand"].constraints["IK"].mute


def test_live_solving_follows_a_renamed_bone_that_holds_a_converted_constraint_but_is_not_its_tip():
    """A converted constraint without Use Tail: the effector's tip is the owner's parent, so only the effector's
    source bone and the conversion's record name the owner. Renamed, both follow while live solving runs."""
    rig, target = chain_rig(live=False)
    rig.fabrik.effectors.clear()
    constraint = rig.pose.bones["bone3"].constraints.new('IK')
    constraint.name, constraint.target, constraint.chain_count, constraint.use_tail = "IK", target, 3, False
    constraints.convert_ik_constraints(rig)
    (effector,) = rig.fabrik.effectors
    assert (effector.bone, effector.source_bone) == ("bone2", "bone3")
    rig.fabrik.live = True
    settle()
    rename_in_edit_mode(rig, "bone3", "hand")
    settle()
    assert (effector.bone, effector.source_bone, rig.fabrik.converted[0].bone) == ("bone2", "hand", "hand")
    assert statuses["Rig"].ok and all(statuses["Rig"].reached.values())
    restored, problems = constraints.restore_ik_constraints(rig)
    assert restored == ["'IK' on 'hand'"] and not problems


def test_restore_says_what_it_could_not_restore():
    rig, constraint = converted_rig()
    rig.pose.bones["bone3"].constraints.remove(constraint)
    restored, problems = constraints.restore_ik_constraints(rig)
    assert not restored
    assert problems == [
        "'IK' on 'bone3' could not be restored: the constraint is gone (the effector made from it stays)"
    ]
    (effector,) = rig.fabrik.effectors
    assert effector.bone == "bone3" and not effector.source_constraint  # an ordinary effector now


def test_restore_finds_constraints_converted_before_records_were_kept():
    """A file converted by an earlier version has effectors with their source but no records."""
    rig, constraint = converted_rig()
    rig.fabrik.converted.clear()
    assert bpy.ops.fabrik.restore_constraints() == {'FINISHED'}
    assert not constraint.mute and not len(rig.fabrik.effectors)


# -- 8. targets deleted in the viewport -----------------------------------------------------------------------------


def delete_in_viewport(obj) -> None:
    """X > Delete: the object is unlinked from every scene (pointers to it keep it alive)."""
    for other in bpy.context.view_layer.objects:
        other.select_set(other == obj)
    bpy.context.view_layer.objects.active = obj
    assert bpy.ops.object.delete() == {'FINISHED'}


def test_a_target_deleted_in_the_viewport_counts_as_missing_and_is_not_saved(tmp_path):
    rig, target = chain_rig()
    settle()
    delete_in_viewport(target)
    settle()
    status = statuses["Rig"]
    assert status.effectors[0] == "target 'Target' was deleted"
    assert not status.ok and not status.reached
    assert rig.fabrik.live
    assert rig.fabrik.effectors[0].target is None and not target.users  # dropped: nothing holds it
    path = str(tmp_path / "deleted.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.open_mainfile(filepath=path)
    assert "Target" not in bpy.data.objects
    settle()
    assert statuses["Rig"].effectors[0] == "target 'Target' was deleted"
    new = rigbuild.make_target("New", (1.0, 0.0, 2.5))
    bpy.data.objects["Rig"].fabrik.effectors[0].target = new
    settle()
    assert all(statuses["Rig"].reached.values())


def test_saving_drops_a_deleted_target_even_without_live_solving(tmp_path):
    rig, target = chain_rig(live=False)
    rig.fabrik.effectors[0].pole_target = rigbuild.make_target("Pole", (0.0, -2.0, 1.0))
    delete_in_viewport(target)
    delete_in_viewport(bpy.data.objects["Pole"])
    path = str(tmp_path / "deleted.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.open_mainfile(filepath=path)
    assert "Target" not in bpy.data.objects and "Pole" not in bpy.data.objects
    assert integrity.effector_problem(bpy.data.objects["Rig"], 0) == "target 'Target' was deleted"


def test_undo_after_deleting_a_target_gives_it_back_to_its_effector():
    rig, target = chain_rig()
    settle()
    bpy.ops.ed.undo_push(message="before deleting")
    delete_in_viewport(target)
    bpy.ops.ed.undo_push(message="Delete")
    settle()
    assert bpy.data.objects["Rig"].fabrik.effectors[0].target is None
    bpy.ops.ed.undo()
    rig = bpy.data.objects["Rig"]  # undo replaced the data; look it up again
    assert rig.fabrik.effectors[0].target == bpy.data.objects["Target"]
    settle()
    assert all(statuses["Rig"].reached.values()), statuses["Rig"].effectors


def test_a_target_kept_in_a_collection_outside_every_scene_is_reported_not_dropped():
    rig, target = chain_rig()
    stash = bpy.data.collections.new("Stash")
    stash.objects.link(target)
    bpy.context.scene.collection.objects.unlink(target)
    settle()
    assert statuses["Rig"].effectors[0] == "target 'Target' is in no scene"
    assert rig.fabrik.effectors[0].target == target


# -- 7. Rigify's own switches ---------------------------------------------------------------------------------------

needs_bpy_5 = pytest.mark.skipif(
    bpy.app.version < (5, 0, 0),
    reason="after Rigify has generated a rig, the bpy 4.2 module crashes at interpreter exit; this runs on 5.0",
)


@pytest.fixture(scope="module")
def rigify_file(registered_addon, tmp_path_factory) -> str:
    """A rig generated by Rigify from its human metarig (about 4 s, once per module), saved to a file."""
    import addon_utils

    bpy.ops.wm.read_factory_settings(use_empty=True)
    addon_utils.enable("rigify", default_set=True)
    try:
        bpy.ops.object.armature_human_metarig_add()
        bpy.ops.pose.rigify_generate()
        path = str(tmp_path_factory.mktemp("rigify") / "rig.blend")
        bpy.ops.wm.save_as_mainfile(filepath=path)
    finally:
        rigbuild.disable_rigify()
    return path


def open_rigify(path: str):
    """The generated rig, its left arm on IK with the hand control moved."""
    bpy.ops.wm.open_mainfile(filepath=path)
    rig = bpy.data.objects["rig"]
    rig.pose.bones["upper_arm_parent.L"]["IK_FK"] = 0.0
    rig.pose.bones["hand_ik.L"].location = (0.0, 0.15, -0.1)
    bpy.context.view_layer.objects.active = rig
    return rig


def effector_index(rig, key: str) -> int:
    """Index of the effector made from a constraint ("IK.001 on MCH-forearm_ik.L"), found by its source."""
    constraint, bone = key.split(" on ")
    return next(i for i, e in enumerate(rig.fabrik.effectors)
                if (e.source_constraint, e.source_bone) == (constraint, bone))


def mutes(rig, bone: str) -> tuple[bool, bool]:
    """The mute of a limb's IK constraint without and with pole, as Blender evaluates them."""
    evaluated = rig.evaluated_get(bpy.context.evaluated_depsgraph_get()).pose.bones[bone]
    return evaluated.constraints["IK"].mute, evaluated.constraints["IK.001"].mute


@needs_bpy_5
def test_convert_on_a_rigify_rig_is_solved_by_fabrik_and_follows_its_pole_switch(rigify_file):
    rig = open_rigify(rigify_file)
    settle()
    assert mutes(rig, "MCH-forearm_ik.L") == (False, True)  # Rigify's switch: the pole version is off
    converted, skipped = constraints.convert_ik_constraints(rig)
    # Both versions of each limb's IK (with and without pole) are converted, and the report says what became of them.
    assert len(converted) == 8 and not skipped, (converted, skipped)
    assert any(label.startswith("'IK.001' on 'MCH-forearm_ik.L' (its mute driver (the rig's switch) now switches "
                                "the effector, off now") for label in converted), converted
    settle()
    assert mutes(rig, "MCH-forearm_ik.L") == (True, True)  # the drivers no longer switch Blender's IK back on
    plain, pole = effector_index(rig, "IK on MCH-forearm_ik.L"), effector_index(rig, "IK.001 on MCH-forearm_ik.L")
    # Short names that tell Rigify's two versions of a limb apart in the sidebar's list.
    assert (rig.fabrik.effectors[plain].name, rig.fabrik.effectors[pole].name) == ("arm.L", "arm.L pole")
    # Each name fits the room the default sidebar's list gives a name beside its scroll bar (about 60 pixels of
    # Blender's interface font at scale 1; a longer one is cut, and four rows read "forearm_..."), all distinct.
    blf.size(0, 11)
    names = [effector.name for effector in rig.fabrik.effectors]
    assert len(set(names)) == len(names) == 8 and all(blf.dimensions(0, name)[0] <= 60 for name in names), names
    status = statuses["rig"]
    assert status.ok, status.message
    assert status.effectors[pole] == "disabled by the rig's switch (its converted constraint is muted)"
    assert status.reached[plain]
    evaluated = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
    goal = rig.matrix_world @ evaluated.pose.bones["MCH-upper_arm_ik_target.L"].head
    assert (tip_world(rig, "MCH-forearm_ik.L") - goal).length < 1e-3

    rig.pose.bones["upper_arm_parent.L"]["pole_vector"] = True  # the animator flips the pole switch
    rig.update_tag()
    settle()
    status = statuses["rig"]
    assert status.effectors[plain].startswith("disabled by the rig's switch") and status.reached[pole]
    assert mutes(rig, "MCH-forearm_ik.L") == (True, True)

    restored, problems = constraints.restore_ik_constraints(rig)
    assert len(restored) == 8 and not problems
    assert not len(rig.fabrik.effectors) and not len(rig.fabrik.converted)
    rig.update_tag()
    settle()
    assert mutes(rig, "MCH-forearm_ik.L") == (True, False)  # the switch drives Blender's IK again: pole on
    assert mutes(rig, "MCH-forearm_ik.R") == (False, True)


@needs_bpy_5
def test_a_renamed_rigify_bone_is_told_from_the_bones_that_share_its_place(rigify_file):
    """Rigify keeps ORG-, DEF- and MCH- bones in one place: a rename must follow the right one."""
    rig = open_rigify(rigify_file)
    constraints.convert_ik_constraints(rig)
    settle()
    rename_in_edit_mode(rig, "MCH-forearm_ik.L", "MCH-elbow_ik.L")
    settle()
    plain = effector_index(rig, "IK on MCH-elbow_ik.L")
    effector = rig.fabrik.effectors[plain]
    assert effector.name == "arm.L"  # (Convert's short name, from the bone's name then: it stays)
    assert (effector.bone, effector.source_bone) == ("MCH-elbow_ik.L", "MCH-elbow_ik.L")
    assert statuses["rig"].reached[plain]
    restored, problems = constraints.restore_ik_constraints(rig)
    assert "'IK' on 'MCH-elbow_ik.L'" in restored and not problems


def test_disabling_the_addon_leaves_no_handler_behind():
    import fabrik_addon

    assert integrity.on_save in bpy.app.handlers.save_pre and integrity.on_load in bpy.app.handlers.load_post
    fabrik_addon.unregister()
    try:
        assert integrity.on_save not in bpy.app.handlers.save_pre
        assert integrity.on_load not in bpy.app.handlers.load_post
    finally:
        fabrik_addon.register()  # for the module's other tests
