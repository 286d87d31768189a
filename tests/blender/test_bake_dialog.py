# SPDX-License-Identifier: GPL-3.0-or-later
"""The bake operator as Blender's Bake Action (issue 15 item 5), in the real bpy module: the scene's range filled
in, clear labels in the split-label layout, explicit values (negative frames too) and the execute path that the
redo panel re-runs. The dialog itself needs a window: tests/gui/test_setup.py opens it in Blender 3.4."""

from __future__ import annotations

import bpy
import pytest
from blender_scenes import RecordingLayout, chain_rig

from fabrik_addon.blender.rig import animdata
from fabrik_addon.blender.ui import ops

pytestmark = pytest.mark.usefixtures("clean_scene")


class Properties:
    """A stand-in for an operator's properties: values, and which of them the caller set."""

    def __init__(self, **given):
        self.frame_start, self.frame_end, self.step = 1, 250, 1
        self.given = set(given)
        for name, value in given.items():
            setattr(self, name, value)

    def is_property_set(self, name: str) -> bool:
        return name in self.given


def baked_frames(rig) -> list[int]:
    """The frames the rig's action holds keys on (the same on every channel the bake wrote)."""
    frames = set()
    for fcurve in animdata.fcurves(rig) or ():
        frames.update(round(key.co[0]) for key in fcurve.keyframe_points)
    return sorted(frames)


def test_the_range_the_caller_left_unset_is_the_scenes() -> None:
    """Unset start, end and step come from the scene; set ones stay; the preview range wins when it is on."""
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end, scene.frame_step = 12, 48, 3
    properties = Properties()
    ops.fill_frame_range(properties, scene)
    assert (properties.frame_start, properties.frame_end, properties.step) == (12, 48, 3)

    properties = Properties(frame_start=-5, step=1)
    ops.fill_frame_range(properties, scene)
    assert (properties.frame_start, properties.frame_end, properties.step) == (-5, 48, 1)

    scene.use_preview_range = True
    scene.frame_preview_start, scene.frame_preview_end = 20, 30
    properties = Properties()
    ops.fill_frame_range(properties, scene)
    assert (properties.frame_start, properties.frame_end) == (20, 30)


def test_labels_say_what_each_option_is() -> None:
    """Start/End/Step read as frames, the solve's start is called something else, no two options share a
    label, and the range is not remembered between bakes (each dialog opens on the scene's range)."""
    rna = bpy.ops.fabrik.bake.get_rna_type()
    names = {key: prop.name for key, prop in rna.properties.items() if key != "rna_type" and not prop.is_hidden}
    assert (names["frame_start"], names["frame_end"], names["step"]) == ("Start Frame", "End Frame", "Frame Step")
    assert names["start"] == "Solve From"
    assert len(set(names.values())) == len(names), names
    for key in ("frame_start", "frame_end", "step"):
        assert rna.properties[key].is_skip_save, key


def test_the_dialog_draws_in_blenders_split_label_layout() -> None:
    """draw() (the dialog and the redo panel) uses split labels and shows every option once."""
    log: list = []
    layout = RecordingLayout(log)
    fake = type("FakeOperator", (), {"layout": layout, "use_cleanup": False})()
    ops.FABRIK_OT_bake.draw(fake, bpy.context)
    assert layout.use_property_split is True
    shown = [args[1] for name, args, _kwargs in log if name == "prop"]
    assert sorted(shown) == sorted(
        ["frame_start", "frame_end", "step", "bones", "start", "new_action", "use_cleanup", "cleanup_tolerance",
         "keep_live"]
    )


def test_explicit_values_bake_negative_frames_and_steps() -> None:
    """Execute with explicit values: frames below zero are frames like any other (no -1 placeholder)."""
    rig, _target = chain_rig(live=False)
    assert bpy.ops.fabrik.bake(frame_start=-4, frame_end=4, step=2) == {"FINISHED"}
    assert baked_frames(rig) == [-4, -2, 0, 2, 4]


def test_without_a_range_the_scenes_is_baked() -> None:
    """Execute without a range (a script, the command line) bakes the scene's range at the scene's step."""
    rig, _target = chain_rig(live=False)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end, scene.frame_step = 3, 9, 3
    assert bpy.ops.fabrik.bake() == {"FINISHED"}
    assert baked_frames(rig) == [3, 6, 9]


def test_invoke_without_a_window_bakes_the_scenes_range() -> None:
    """No window (background mode) means no dialog: invoking bakes the scene's range at once."""
    rig, _target = chain_rig(live=False)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 2, 5
    assert bpy.ops.fabrik.bake('INVOKE_DEFAULT') == {"FINISHED"}
    assert baked_frames(rig) == [2, 3, 4, 5]


def test_an_end_before_the_start_is_refused_with_both_labels() -> None:
    """End before Start: nothing is baked and the error names both fields as the dialog labels them."""
    rig, _target = chain_rig(live=False)
    with pytest.raises(RuntimeError, match="End Frame .* before the Start Frame"):
        bpy.ops.fabrik.bake(frame_start=10, frame_end=5)
    assert baked_frames(rig) == []


def test_the_button_works_while_the_rigs_target_is_the_active_object() -> None:
    """The panel stays while the animator drags a target (the target is the active object); so does its Bake
    Keyframes button, and it bakes that target's rig, not the active object."""
    rig, target = chain_rig(live=False)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 2, 4
    view_layer = bpy.context.view_layer
    for obj in view_layer.objects:
        obj.select_set(obj == target)
    view_layer.objects.active = target
    assert bpy.ops.fabrik.bake.poll()
    assert bpy.ops.fabrik.bake() == {"FINISHED"}
    assert baked_frames(rig) == [2, 3, 4]
    assert target.animation_data is None or target.animation_data.action is None
    # An object that is neither a rig nor one of its targets still gets no button.
    other = bpy.data.objects.new("Other", None)
    scene.collection.objects.link(other)
    view_layer.objects.active = other
    assert not bpy.ops.fabrik.bake.poll()
