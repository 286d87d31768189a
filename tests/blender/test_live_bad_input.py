# SPDX-License-Identifier: GPL-3.0-or-later
"""Bad input to live solving in real bpy (issue 14): a bone above the chain scaled to zero, channels that are not
a number, a NaN cleared again, linked rigs and library overrides. Each says what is wrong, writes nothing that is
not finite, leaves live solving on, and solves again by itself once the input is fixed."""

from __future__ import annotations

import math
import types
import warnings

import bpy
import numpy as np
import pytest
from blender_scenes import rigbuild

from fabrik_addon.blender.live import handlers, onwards
from fabrik_addon.blender.rig import animdata, memory
from fabrik_addon.blender.rig.held_bones import held_bones
from fabrik_addon.blender.rig.status import statuses

pytestmark = pytest.mark.usefixtures("clean_scene")

NAN = float("nan")


def spine_rig(name: str = "Rig"):
    """hips > spine > b1 > b2 > b3 along +Z; one effector pulls b3 with a 3-bone chain (b1..b3), so hips and spine
    stay above the chain."""
    names = ["hips", "spine", "b1", "b2", "b3"]
    bones = [
        (bone, (0.0, 0.0, float(i)), (0.0, 0.0, float(i + 1)), names[i - 1] if i else None, True)
        for i, bone in enumerate(names)
    ]
    rig = rigbuild.make_armature(name, bones)
    target = rigbuild.make_target("Target", (1.2, 0.0, 3.8))
    rigbuild.add_effector(rig, "b3", target, chain_length=3)
    bpy.context.view_layer.objects.active = rig
    return rig, target


def channels(rig) -> tuple:
    """Every pose channel of the rig."""
    return tuple(
        (pb.name, tuple(pb.location), tuple(pb.rotation_quaternion), tuple(pb.rotation_euler), tuple(pb.scale))
        for pb in rig.pose.bones
    )


def unchanged(rig, before: tuple) -> bool:
    """Whether the rig's channels are what they were (a NaN the animator set compares equal to itself)."""
    return repr(channels(rig)) == repr(before)


def all_finite(values) -> bool:
    """Whether every number in nested tuples is finite."""
    if isinstance(values, (tuple, list)):
        return all(all_finite(v) for v in values)
    return not isinstance(values, float) or math.isfinite(values)


def settle(rig) -> None:
    """Let the handlers run as after an edit in the viewport, with every numpy warning an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rig.fabrik.live = True
        bpy.context.view_layer.update()
        bpy.context.scene.frame_set(bpy.context.scene.frame_current)


def no_traceback(capsys) -> None:
    """Live solving printed no traceback (it does when it stops a rig)."""
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    assert "stopped" not in out.out + out.err


@pytest.fixture(params=["reused", "whole"])
def path(request, monkeypatch):
    """Run each test with live frames that go on from the last frame's read where nothing else changed
    (`onwards.reused`), and with every frame read whole (`taken`: per frame change, whether it went on from the
    last read)."""
    again = onwards.reused
    taken = []

    def counted(*args):
        result = None if request.param == "whole" else again(*args)
        taken.append(result is not None)
        return result

    monkeypatch.setattr(onwards, "reused", counted)
    memory.reset()
    handlers.on_load(None)
    return types.SimpleNamespace(name=request.param, taken=taken)


def test_bone_above_the_chain_scaled_to_zero(path, capsys):
    """Hiding the hips by scaling them to zero: the effector says so, nothing is written, live stays on, and the
    chain solves again once the scale comes back."""
    rig, target = spine_rig()
    settle(rig)
    assert statuses["Rig"].effectors[0].startswith("reached")
    rig.pose.bones["hips"].scale = (0.0, 0.0, 0.0)
    target.location = (-1.0, 0.5, 3.5)  # a change that would be solved
    before = channels(rig)
    settle(rig)
    status = statuses["Rig"]
    expected = "bone 'hips' above the chain is scaled to zero: nothing to solve"
    assert status.effectors[0] == expected
    assert status.message == expected and not status.ok
    assert unchanged(rig, before) and all_finite(channels(rig))
    assert rig.fabrik.live
    no_traceback(capsys)
    rig.pose.bones["hips"].scale = (1.0, 1.0, 1.0)
    path.taken.clear()
    settle(rig)
    assert statuses["Rig"].effectors[0].startswith("reached")
    assert any(path.taken) == (path.name == "reused"), "the frame took the path the test is about"
    assert channels(rig) != before and all_finite(channels(rig))


def test_scale_of_the_parent_only(path):
    """The cause named is the topmost: the spine (the chain's parent) has a usable scale of its own, the hips not."""
    rig, _ = spine_rig()
    rig.pose.bones["hips"].scale = (1.0, 0.0, 1.0)
    settle(rig)
    assert statuses["Rig"].effectors[0] == "bone 'hips' above the chain is scaled to zero: nothing to solve"


def test_scale_not_a_number_above_the_chain(path, capsys):
    """A scale that is not a number above the chain is named as such."""
    rig, _ = spine_rig()
    settle(rig)
    rig.pose.bones["spine"].scale = (1.0, NAN, 1.0)
    before = channels(rig)
    settle(rig)
    assert statuses["Rig"].effectors[0] == (
        "bone 'spine' above the chain has a scale that is not a number: nothing to solve"
    )
    assert unchanged(rig, before) and rig.fabrik.live
    no_traceback(capsys)
    rig.pose.bones["spine"].scale = (1.0, 1.0, 1.0)
    settle(rig)
    assert statuses["Rig"].effectors[0].startswith("reached")


@pytest.mark.parametrize("start", ["FK", "PREVIOUS"])
def test_nan_rotation_in_the_chain_then_cleared(path, start, capsys):
    """A NaN in a chain bone's rotation is named; clearing the pose (Alt+R) solves again at the next update,
    with nothing that is not a number remembered, held or written."""
    rig, target = spine_rig()
    rig.fabrik.start = start
    rig.pose.bones["b1"].rotation_quaternion = (0.98, 0.2, 0.0, 0.0)  # the animator's pose under the solve
    settle(rig)
    assert statuses["Rig"].effectors[0].startswith("reached")
    rig.pose.bones["b2"].rotation_quaternion = (NAN, 0.0, 0.0, 0.0)
    target.location = (-1.0, 0.5, 3.5)
    before = channels(rig)
    settle(rig)
    status = statuses["Rig"]
    assert status.effectors[0] == "bone 'b2' has a rotation that is not a number"
    assert status.message == "bone 'b2' has a rotation that is not a number" and not status.ok
    assert unchanged(rig, before)  # only the NaN the animator set
    assert rig.fabrik.live
    no_traceback(capsys)
    # Alt+R (Clear Rotation) on every bone.
    rig.select_set(True)
    bpy.ops.object.mode_set(mode='POSE')
    bpy.ops.pose.select_all(action='SELECT')
    assert bpy.ops.pose.rot_clear() == {'FINISHED'}
    settle(rig)  # (the operator's own update has usually solved already)
    assert statuses["Rig"].effectors[0].startswith("reached")
    assert math.isfinite(statuses["Rig"].report.max_error)
    assert all_finite(channels(rig))
    assert all(all_finite((tuple(e.written), tuple(e.fk))) for e in held_bones(rig))
    assert all(np.isfinite(np.asarray(r)).all() for r in memory.of("Rig").solution.values())
    # Live off gives the animator's (cleared) pose back.
    rig.fabrik.live = False
    assert all(tuple(pb.rotation_quaternion) == (1.0, 0.0, 0.0, 0.0) for pb in rig.pose.bones)


def test_nan_held_from_an_older_file_is_not_matched(path):
    """Held values that are not a number (saved before they were refused) hold nothing: the rig solves."""
    rig, target = spine_rig()
    settle(rig)
    for entry in held_bones(rig):
        entry.written = (NAN,) * 4
        entry.fk = (NAN,) * 4
    target.location = (-1.0, 0.5, 3.5)
    settle(rig)
    assert statuses["Rig"].effectors[0].startswith("reached")
    assert all_finite(channels(rig))
    assert all(all_finite((tuple(e.written), tuple(e.fk))) for e in held_bones(rig) if e.rotated)


def test_nan_location_in_the_chain(path):
    """A location that is not a number on a chain bone is named."""
    rig, _ = spine_rig()
    rig.pose.bones["b1"].location = (0.0, NAN, 0.0)
    settle(rig)
    assert statuses["Rig"].effectors[0] == "bone 'b1' has a location that is not a number"
    assert rig.fabrik.live


def test_chain_bone_scaled_to_zero(path, capsys):
    """A bone inside the chain scaled to zero: no numpy warning, nothing that is not finite written, live stays on."""
    rig, target = spine_rig()
    settle(rig)
    rig.pose.bones["b2"].scale = (0.0, 0.0, 0.0)
    target.location = (-1.0, 0.5, 3.5)
    settle(rig)
    assert rig.fabrik.live and all_finite(channels(rig))
    no_traceback(capsys)
    rig.pose.bones["b2"].scale = (1.0, 1.0, 1.0)
    settle(rig)
    assert statuses["Rig"].effectors[0].startswith("reached")


def test_solve_now_reports_the_bone(path):
    """Solve Now on a rig with a NaN in a chain bone: a warning naming it, not an exception; nothing written."""
    rig, _ = spine_rig()
    rig.pose.bones["b2"].rotation_quaternion = (NAN, 0.0, 0.0, 0.0)
    before = channels(rig)
    assert bpy.ops.fabrik.solve() == {'FINISHED'}
    assert statuses["Rig"].message == "bone 'b2' has a rotation that is not a number"
    assert unchanged(rig, before)


def test_nan_outside_every_chain_is_ignored(path):
    """A bone scaled to zero or NaN outside every chain (a hidden prop) does not stop the solve."""
    rig, _ = spine_rig()
    bpy.ops.object.mode_set(mode='EDIT')
    prop = rig.data.edit_bones.new("prop")
    prop.head, prop.tail, prop.parent = (0.5, 0.0, 0.0), (0.5, 0.0, 1.0), rig.data.edit_bones["hips"]
    bpy.ops.object.mode_set(mode='OBJECT')
    rig.pose.bones["prop"].scale = (0.0, 0.0, 0.0)
    settle(rig)
    assert statuses["Rig"].effectors[0].startswith("reached")
    rig.pose.bones["prop"].rotation_quaternion = (NAN, 0.0, 0.0, 0.0)
    settle(rig)
    assert statuses["Rig"].effectors[0].startswith("reached")


def test_one_chain_hidden_the_other_still_solves(path):
    """Two chains; one hangs from a bone scaled to zero: only that effector says so, the other one solves."""
    rig, target = spine_rig()
    bpy.ops.object.mode_set(mode='EDIT')
    edit = rig.data.edit_bones
    for i, name in enumerate(["shoulder", "arm0", "arm1"]):
        bone = edit.new(name)
        bone.head, bone.tail = (float(i), 0.0, 1.0), (float(i + 1), 0.0, 1.0)
        bone.parent = edit["hips"] if i == 0 else edit[["shoulder", "arm0"][i - 1]]
        bone.use_connect = i > 0
    bpy.ops.object.mode_set(mode='OBJECT')
    other = rigbuild.make_target("Other", (2.0, 1.0, 1.5))
    rigbuild.add_effector(rig, "arm1", other, chain_length=2)
    settle(rig)
    rig.pose.bones["shoulder"].scale = (0.0, 0.0, 0.0)
    target.location = (-1.0, 0.5, 3.5)
    settle(rig)
    status = statuses["Rig"]
    assert status.effectors[1] == "bone 'shoulder' above the chain is scaled to zero: nothing to solve"
    assert status.effectors[0].startswith("reached")
    assert all_finite(channels(rig))


def test_rig_transform_not_a_number(path, capsys):
    """A rig at a location that is not a number: one message for the rig, live stays on, and it recovers."""
    rig, _ = spine_rig()
    settle(rig)
    rig.location = (NAN, 0.0, 0.0)
    before = channels(rig)
    settle(rig)
    assert statuses["Rig"].message == "'Rig' has a transform that is not a number: nothing to solve"
    assert unchanged(rig, before) and rig.fabrik.live
    no_traceback(capsys)
    rig.location = (0.0, 0.0, 0.0)
    settle(rig)
    assert statuses["Rig"].effectors[0].startswith("reached")


def test_nan_key_in_the_animation(path):
    """A keyed rotation that evaluates to NaN: named, nothing written, and the rig solves once the key is fixed."""
    rig, target = spine_rig()
    pb = rig.pose.bones["b2"]
    pb.keyframe_insert("rotation_quaternion", frame=1)
    fcurve = next(f for f in animdata.fcurves(rig) if f.array_index == 0)
    fcurve.keyframe_points[0].co[1] = NAN
    settle(rig)
    status = statuses["Rig"]
    assert not status.ok and "'b2'" in status.message and "not a number" in status.message
    assert rig.fabrik.live and all_finite([c for c in channels(rig) if c[0] != "b2"])  # b2: the animation's NaN
    # A depsgraph update (not a frame change) solves from the keyed value as well: still refused.
    target.location = (-1.0, 0.5, 3.5)
    bpy.context.view_layer.update()
    assert "'b2'" in statuses["Rig"].message and "not a number" in statuses["Rig"].message
    fcurve.keyframe_points[0].co[1] = 1.0
    settle(rig)
    assert statuses["Rig"].effectors[0].startswith("reached")
    assert all_finite(channels(rig))


# Library-linked rigs and library overrides.


def _linked(tmp_path):
    """A rig with an effector and target, saved with live solving on into a library file and linked back in
    (its collection linked into the scene); returns (the linked collection, the animator's pose)."""
    rig, target = spine_rig()
    rig.pose.bones["b1"].rotation_quaternion = (0.98, 0.2, 0.0, 0.0)
    pose = channels(rig)
    rig.fabrik.live = True
    collection = bpy.data.collections.new("RigCollection")
    bpy.context.scene.collection.children.link(collection)
    for obj in (rig, target):
        collection.objects.link(obj)
        bpy.context.scene.collection.objects.unlink(obj)
    handlers.on_load(None)
    # Written by hand so the library holds the animator's pose and no solve.
    bpy.app.handlers.depsgraph_update_post.remove(handlers.on_depsgraph_update)
    try:
        path = str(tmp_path / "library.blend")
        bpy.data.libraries.write(path, {collection}, fake_user=True)
    finally:
        bpy.app.handlers.depsgraph_update_post.append(handlers.on_depsgraph_update)
    bpy.ops.wm.read_factory_settings(use_empty=True)
    handlers.on_load(None)
    with bpy.data.libraries.load(path, link=True) as (_, data_to):
        data_to.collections = ["RigCollection"]
    linked = data_to.collections[0]
    return linked, pose


def test_linked_rig_is_not_solved(tmp_path, path, capsys):
    """Live solving on a linked rig (switched on in its library) says why it does nothing and writes nothing;
    Solve Now refuses it."""
    linked, pose = _linked(tmp_path)
    bpy.context.scene.collection.children.link(linked)
    rig = bpy.data.objects["Rig"]
    assert rig.library is not None and rig.fabrik.live
    bpy.context.view_layer.update()
    bpy.context.scene.frame_set(1)
    status = statuses["Rig"]
    assert "linked from the library" in status.message and not status.ok
    assert unchanged(rig, pose)
    assert rig.fabrik.live
    no_traceback(capsys)
    bpy.context.view_layer.objects.active = rig
    with pytest.raises(RuntimeError, match="linked from the library"):
        bpy.ops.fabrik.solve()
    assert unchanged(rig, pose)


def test_library_override_solves_and_gives_the_pose_back(tmp_path, path, capsys):
    """A library override of the rig solves live (Blender keeps no property we add to an override in its file, so
    what is held stays in memory), and live off gives the animator's pose back."""
    linked, pose = _linked(tmp_path)
    bpy.context.scene.collection.children.link(linked)
    override = linked.override_hierarchy_create(bpy.context.scene, bpy.context.view_layer, do_fully_editable=True)
    rig = next(o for o in override.all_objects if o.type == 'ARMATURE')
    target = next(o for o in override.all_objects if o.type == 'EMPTY')
    assert rig.override_library is not None and rig.library is None
    assert rig.fabrik.effectors[0].target == target
    settle(rig)
    no_traceback(capsys)
    assert statuses[rig.name].effectors[0].startswith("reached")
    assert channels(rig) != pose and all_finite(channels(rig))
    target.location = (-1.0, 0.5, 3.5)
    settle(rig)
    assert statuses[rig.name].effectors[0].startswith("reached")
    held = held_bones(rig)
    assert held.in_memory and len(held)  # held in memory instead
    rig.fabrik.live = False
    assert unchanged(rig, pose)
    # Solve Now works on the override as well (live off: the solved pose becomes the animator's).
    bpy.context.view_layer.objects.active = rig
    assert bpy.ops.fabrik.solve() == {'FINISHED'}
    assert statuses[rig.name].effectors[0].startswith("reached")
    assert channels(rig) != pose
