# SPDX-License-Identifier: GPL-3.0-or-later
"""Compare Solvers (issue 15 item 2), in the real bpy module: the operator plots every solver's error against
iteration into an image, reports each one's result, and leaves the rig exactly as it was."""

from __future__ import annotations

import math

import bpy
import numpy as np
import pytest
from blender_scenes import RecordingLayout, chain_rig

from fabrik_addon.blender.rig import memory
from fabrik_addon.blender.ui import compare
from fabrik_addon.core.solving.convergence import COLOURS

pytestmark = pytest.mark.usefixtures("clean_scene")


def _pose_snapshot(rig) -> dict[str, tuple]:
    """Every pose channel of the rig, by bone."""
    return {
        bone.name: (
            bone.rotation_mode,
            tuple(bone.location),
            tuple(bone.rotation_quaternion),
            tuple(bone.rotation_euler),
            tuple(bone.rotation_axis_angle),
            tuple(bone.scale),
        )
        for bone in rig.pose.bones
    }


def _bent_chain(live: bool):
    """A 5-bone chain bent a little (so no solver starts at a singular pose) with a reachable target."""
    rig, target = chain_rig(5, target_at=(1.5, 0.5, 3.0), live=live)
    for bone in rig.pose.bones:
        bone.rotation_mode = 'XYZ'
        bone.rotation_euler = (math.radians(10.0), 0.0, 0.0)
    bpy.context.view_layer.update()
    return rig, target


@pytest.mark.parametrize("live", [False, True])
def test_the_plot_is_made_and_the_rig_is_untouched(live: bool) -> None:
    rig, _ = _bent_chain(live)
    before = _pose_snapshot(rig)
    actions = len(bpy.data.actions)
    assert bpy.ops.fabrik.compare_solvers(iterations=12) == {'FINISHED'}
    image = bpy.data.images[compare.IMAGE_NAME]
    assert tuple(image.size) == (compare.WIDTH, compare.HEIGHT)
    pixels = np.empty(compare.WIDTH * compare.HEIGHT * 4, np.float32)
    image.pixels.foreach_get(pixels)
    assert pixels.reshape(-1, 4)[:, :3].std() > 0.01  # a plot, not a blank image
    assert _pose_snapshot(rig) == before
    assert rig.animation_data is None or rig.animation_data.action is None
    assert len(bpy.data.actions) == actions
    lines = memory.of(rig).summaries
    assert len(lines) == 4 and lines[0].startswith("FABRIK") and " its" in lines[0]
    assert "not within" not in lines[0]  # FABRIK reaches this target within 12 iterations
    bpy.ops.wm.read_homefile(use_empty=True)  # another file: its rigs were not compared
    assert memory.get("Rig") is None or memory.get("Rig").summaries is None


def test_the_image_is_reused_and_bottom_up() -> None:
    _bent_chain(False)
    bpy.ops.fabrik.compare_solvers(iterations=5)
    bpy.ops.fabrik.compare_solvers(iterations=5)
    assert sum(1 for image in bpy.data.images if image.name.startswith(compare.IMAGE_NAME)) == 1
    image = bpy.data.images[compare.IMAGE_NAME]
    pixels = np.empty(len(image.pixels), np.float32)
    image.pixels.foreach_get(pixels)
    rows = pixels.reshape(compare.HEIGHT, compare.WIDTH, 4)
    # The legend boxes sit at the top right of the plot: in Blender's bottom-up rows, that is near the last row.
    fabrik = np.array(COLOURS["FABRIK"])
    near = np.isclose(rows[..., :3], fabrik, atol=2 / 255).all(axis=-1)
    top_right = near[-30:, -30:].sum()
    bottom_right = near[:30, -30:].sum()
    assert top_right > bottom_right


def test_a_rig_without_effectors_is_refused_clearly() -> None:
    rig, _ = chain_rig(3, live=False)
    rig.fabrik.effectors.clear()
    assert bpy.ops.fabrik.compare_solvers() == {'CANCELLED'}  # with a warning: "Nothing to compare: ..."
    assert compare.IMAGE_NAME not in bpy.data.images


def test_the_panel_draws_the_button_and_the_legend() -> None:
    rig, _ = _bent_chain(False)
    log = []
    compare.draw(RecordingLayout(log), rig)
    assert ("operator", ("fabrik.compare_solvers",), {"icon": 'GRAPH'}) in log
    bpy.ops.fabrik.compare_solvers(iterations=3)
    log.clear()
    compare.draw(RecordingLayout(log), rig)
    labels = [kwargs.get("text", "") for name, _, kwargs in log if name == "label"]
    assert sum(label.startswith(("FABRIK", "CCD", "Jacobian", "Damped")) for label in labels) == 4
