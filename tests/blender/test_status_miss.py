# SPDX-License-Identifier: GPL-3.0-or-later
"""The Status's miss is the distance Blender shows: on arms and legs with hinges and poles, frame after frame
of targets moving between reachable poses, the miss each effector's line gives is the distance from the evaluated
tip to the evaluated target (to float32's rounding of the written channels), and "reached" means that distance
is within the tolerance."""

from __future__ import annotations

import bpy
import pytest
import rigs  # (benchmarks/rigs.py: the rig classes with their targets keyed as the live benchmark has them)

from fabrik_addon.blender.rig.status import statuses

pytestmark = pytest.mark.usefixtures("addon_per_test")

#: float32 channel values put each bone up to this far (relative to the chain's reach) from the solve's pose.
ROUNDING = 2e-6


@pytest.mark.parametrize("start", ["FK", "PREVIOUS"])
@pytest.mark.parametrize("build", ["build_arm_pole_bent", "build_leg_pole_straight", "build_arm_hand_pole"])
def test_the_status_miss_is_the_evaluated_tips_distance(build, start):
    frames = range(1, 73)
    rig = rigs.built(rigs.class_rigs(build, ""), "fabrik", frames)
    rig.fabrik.start = start
    effector = rig.fabrik.effectors[0]
    scene = bpy.context.scene
    reach = sum(bone.length for bone in rig.data.bones if bone.name != "chest")
    checked = 0
    for frame in frames:
        scene.frame_set(frame)
        status = statuses[rig.name]
        depsgraph = bpy.context.evaluated_depsgraph_get()
        evaluated = rig.evaluated_get(depsgraph)
        tip = evaluated.matrix_world @ evaluated.pose.bones[effector.bone].tail
        shown = (tip - effector.target.evaluated_get(depsgraph).matrix_world.translation).length
        said = status.misses[0] * rig.matrix_world.to_scale()[0]
        assert abs(shown - said) <= ROUNDING * reach, (frame, shown, said, status.effectors[0])
        if status.reached[0]:
            assert shown <= rig.fabrik.tolerance * reach + ROUNDING * reach, (frame, shown)
        checked += 1
    assert checked == len(frames)
