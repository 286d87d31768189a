# SPDX-License-Identifier: GPL-3.0-or-later
"""Bad input in real bpy: a clear status message, nothing raised into Blender, nothing else changed."""

from __future__ import annotations

import math
import bpy
import pytest
from blender_scenes import chain_rig, rigbuild

from fabrik_addon.blender.rig.status import statuses

pytestmark = pytest.mark.usefixtures("clean_scene")


def snapshot(rig) -> tuple:
    """Every pose channel and the object transform, to prove nothing else changed."""
    channels = tuple(
        (pb.name, tuple(pb.location), tuple(pb.rotation_quaternion), tuple(pb.rotation_euler), tuple(pb.scale))
        for pb in rig.pose.bones
    )
    return channels, tuple(rig.location), tuple(rig.rotation_euler), tuple(rig.scale), len(rig.data.bones)


def settle(rig) -> None:
    """Let the depsgraph handler run as it would after an edit in the viewport."""
    rig.fabrik.live = True
    bpy.context.view_layer.update()
    bpy.context.scene.frame_set(bpy.context.scene.frame_current)


def test_deleted_target():
    """The target object is deleted: the effector says it has no target, the pose stays."""
    rig, target = chain_rig(live=False)
    before = snapshot(rig)
    bpy.data.objects.remove(target)
    settle(rig)
    assert statuses["Rig"].effectors[0] == "no target object"
    assert not statuses["Rig"].ok
    assert snapshot(rig) == before
    assert rig.fabrik.live, "a broken effector is a status, not a reason to switch the rig off"


def test_renamed_bone():
    """The tip bone was renamed after the effector was set up: the effector follows it, as constraints do."""
    rig, _ = chain_rig(live=False)
    rig.data.bones["bone3"].name = "renamed"
    settle(rig)
    assert rig.fabrik.effectors[0].bone == "renamed"
    assert statuses["Rig"].effectors[0].startswith("reached")


def test_bone_named_wrongly():
    """An effector names a bone the armature never had: the status says so and the pose stays."""
    rig, _ = chain_rig(live=False)
    rig.fabrik.effectors[0].bone = "bone9"
    before = snapshot(rig)
    settle(rig)
    assert statuses["Rig"].effectors[0] == "no bone 'bone9' in 'Rig'"
    assert snapshot(rig) == before


def test_chain_longer_than_the_hierarchy():
    """Chain length 9 on a bone with 4 bones up to the root."""
    rig, _ = chain_rig(live=False)
    rig.fabrik.effectors[0].chain_length = 9
    before = snapshot(rig)
    settle(rig)
    assert "chain length 9 is longer than the 4 bones up to the root" in statuses["Rig"].effectors[0]
    assert snapshot(rig) == before


def test_target_parented_to_its_own_chain():
    """A target that hangs from a bone of the chain it pulls would chase itself."""
    rig, target = chain_rig(live=False)
    target.parent, target.parent_type, target.parent_bone = rig, "BONE", "bone1"
    before = snapshot(rig)
    settle(rig)
    assert "parented to a bone of its own chain" in statuses["Rig"].effectors[0]
    assert snapshot(rig) == before


def test_target_bone_inside_its_own_chain():
    """The rig's own chain bone as target."""
    rig, _ = chain_rig(live=False)
    effector = rig.fabrik.effectors[0]
    effector.target, effector.subtarget = rig, "bone2"
    before = snapshot(rig)
    settle(rig)
    assert "part of the chain" in statuses["Rig"].effectors[0]
    assert snapshot(rig) == before


def test_nan_target_location():
    """A target at NaN is reported and never reaches the solver."""
    rig, target = chain_rig(live=False)
    before = snapshot(rig)
    target.location = (float("nan"), 0.0, 1.0)
    settle(rig)
    assert "not at a finite location" in statuses["Rig"].effectors[0]
    assert snapshot(rig) == before


def test_zero_scale_rig_is_a_status_and_recovers():
    """With zero scale the rig has no space to solve in: the status says why, nothing changes, live solving stays
    on, and the rig solves again once its scale is back."""
    rig, target = chain_rig(live=False)
    rig.scale = (1.0, 0.0, 1.0)
    before = snapshot(rig)
    settle(rig)
    assert rig.fabrik.live
    assert "zero scale" in statuses["Rig"].message and not statuses["Rig"].ok
    assert snapshot(rig) == before
    rig.scale = (1.0, 1.0, 1.0)
    bpy.context.view_layer.update()
    assert statuses["Rig"].message.startswith("reached")


def test_one_bad_effector_does_not_stop_the_others():
    """A good effector still solves next to a broken one."""
    rig, target = chain_rig(live=False)
    second = rigbuild.make_target("Second", (0.0, 0.0, 0.0))
    rigbuild.add_effector(rig, "missing", second)
    target.location = (1.0, 1.0, 2.0)
    settle(rig)
    status = statuses["Rig"]
    assert status.effectors[1] == "no bone 'missing' in 'Rig'"
    assert status.effectors[0].startswith("reached")


def test_solve_operator_reports_problems_instead_of_raising():
    """The operator finishes and reports a warning when no effector can be solved."""
    rig, target = chain_rig(live=False)
    bpy.data.objects.remove(target)
    assert bpy.ops.fabrik.solve() == {"FINISHED"}
    assert not statuses["Rig"].ok


NAN = float("nan")


@pytest.mark.parametrize("name, fixed", [("weight", 1.0), ("pole_angle", 0.0), ("rotation_weight", 1.0)])
def test_a_nan_effector_setting_is_that_effectors_status_and_the_others_solve(name, fixed):
    """A NaN weight, pole angle or rotation weight (typed or scripted; NaN passes a property's min and max): that
    effector says what is wrong, the others solve, live solving stays on, and fixing the value solves it again."""
    rig, target = chain_rig(live=False)
    second = rigbuild.make_target("Second", (0.5, 0.5, 1.0))
    effector = rigbuild.add_effector(rig, "bone1", second, chain_length=1)
    effector.pole_target = rigbuild.make_target("Pole", (0.0, -2.0, 1.0))
    effector.use_rotation = name == "rotation_weight"
    settle(rig)
    assert set(statuses["Rig"].reached) == {0, 1}, statuses["Rig"].effectors  # both solved
    setattr(effector, name, NAN)
    target.location.x += 0.3
    settle(rig)
    status = statuses["Rig"]
    assert rig.fabrik.live
    assert "not a number" in status.effectors[1], (status.message, status.effectors)
    assert status.effectors[0].startswith("reached") and status.reached[0]
    setattr(effector, name, fixed)
    settle(rig)
    status = statuses["Rig"]
    assert status.ok and set(status.reached) == {0, 1}, (status.message, status.effectors)  # both solved again


def test_a_nan_tolerance_says_so_changes_nothing_and_solves_again_once_fixed():
    """A free chain (the fast path) with a NaN Tolerance: the status says so, the pose stays, live solving stays
    on, and a number solves it again."""
    rig, target = chain_rig(live=False)
    settle(rig)
    rig.fabrik.tolerance = NAN
    target.location.x += 0.3
    before = snapshot(rig)
    settle(rig)
    status = statuses["Rig"]
    assert rig.fabrik.live and not status.ok and "Tolerance" in status.message, status.message
    assert snapshot(rig) == before
    rig.fabrik.tolerance = 1e-4
    settle(rig)
    assert statuses["Rig"].ok and statuses["Rig"].reached[0], statuses["Rig"].message


@pytest.mark.parametrize("value", [math.inf, 1e6])
def test_a_tolerance_beyond_its_bound_is_clamped_and_a_raw_one_is_refused_alike_live_and_baked(value):
    """A Tolerance of inf or 1e6 set through the property stops at its bound (a tenth of the rig's size), so a tip
    4 units off a 4-unit chain's target is a miss, not "reached"; the same value stored raw (a file, a script
    writing the ID property) is refused by live solving and the bake in the same words, and changes nothing."""
    from fabrik_addon.blender.bake import baking
    from fabrik_addon.blender.rig import props

    rig, target = chain_rig(live=False)
    settle(rig)
    rig.fabrik.tolerance = value
    assert rig.fabrik.tolerance == pytest.approx(props.TOLERANCE_MAX)
    rig.fabrik.live = True
    target.location = (0.0, 8.1, 0.0)  # 4.1 beyond the 4-unit chain's reach
    settle(rig)
    status = statuses["Rig"]
    assert status.ok and status.reached == {0: False} and status.misses[0] > 4.0, (status.message, status.misses)
    rig.fabrik["tolerance"] = value  # (past RNA's clamp)
    target.location.x += 0.1
    before = snapshot(rig)
    settle(rig)
    live = statuses["Rig"]
    assert not live.ok and "Tolerance that is not a number from 0 to 0.1" in live.message, live.message
    assert snapshot(rig) == before and rig.fabrik.live
    with pytest.raises(ValueError, match="Tolerance that is not a number from 0 to 0.1") as refused:
        baking.bake_object(rig, range(1, 4))
    assert live.message.split(":")[0] == str(refused.value).split(":")[0]  # (the same words)
    assert rig.animation_data is None or rig.animation_data.action is None


@pytest.mark.parametrize("name", ["weight", "tolerance", "target"])
def test_a_nan_setting_does_not_solve_the_rig_again_on_every_unrelated_update(name, monkeypatch):
    """NaN never equals NaN: what live solving compares to see whether a rig's inputs changed holds a marker
    instead, so moving another object does not solve a rig with a NaN setting or target again."""
    from fabrik_addon.blender import solve

    rig, target = chain_rig(live=False)
    other = rigbuild.make_target("Other", (5.0, 5.0, 5.0))
    settle(rig)
    if name == "weight":
        rig.fabrik.effectors[0].weight = NAN
    elif name == "tolerance":
        rig.fabrik.tolerance = NAN
    else:
        target.location = (NAN, 0.0, 1.0)
    settle(rig)
    calls = []
    solve_object = solve.solve_object
    monkeypatch.setattr(solve, "solve_object", lambda *args, **kwargs: calls.append(1) or solve_object(*args, **kwargs))
    for _ in range(5):
        other.location.x += 0.01
        bpy.context.view_layer.update()
    assert calls == [], f"solved {len(calls)} times for 5 moves of another object"
    assert not statuses["Rig"].ok or statuses["Rig"].effectors  # (the status still says what is wrong)
