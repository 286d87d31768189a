# SPDX-License-Identifier: GPL-3.0-or-later
"""Presets (issue 15 item 6), in the real bpy module: the shipped bone limit presets set Blender's own IK
settings on the active and the selected pose bones, the shipped rig presets set the rig's settings, and presets
saved with the + button are .py files in the user's preset folder that give the settings back."""

from __future__ import annotations

import math
import types
from pathlib import Path

import bpy
import pytest
from blender_scenes import chain_rig

from fabrik_addon.blender.ui import presets

pytestmark = pytest.mark.usefixtures("clean_scene")

#: What each shipped bone limit preset must set: locked axes, limited axes with their range in degrees,
#: and stiffness per axis (axes not named: unlocked, unlimited, no stiffness).
EXPECTED_LIMITS = {
    "Finger_Hinge": {"lock": "yz", "limits": {"x": (0.0, 90.0)}, "stiffness": {}},
    "Knee": {"lock": "yz", "limits": {"x": (0.0, 150.0)}, "stiffness": {}},
    "Elbow": {"lock": "z", "limits": {"x": (0.0, 145.0), "y": (-80.0, 80.0)}, "stiffness": {"y": 0.3}},
    "Spine_Cone": {
        "lock": "",
        "limits": {"x": (-30.0, 30.0), "y": (-15.0, 15.0), "z": (-25.0, 25.0)},
        "stiffness": {"x": 0.3, "y": 0.3, "z": 0.3},
    },
    "Robot_Joint": {"lock": "yz", "limits": {"x": (-170.0, 170.0)}, "stiffness": {}},
    "No_Limits": {"lock": "", "limits": {}, "stiffness": {}},
}
EXPECTED_RIGS = {
    "Default": ("FABRIK", 200, 1e-4, "FK"),
    "Fast_Preview": ("FABRIK", 10, 1e-3, "PREVIOUS"),
    "Precise": ("FABRIK", 500, 1e-6, "FK"),
}


@pytest.fixture
def user_presets(tmp_path: Path, monkeypatch) -> Path:
    """A throw-away user scripts folder: Blender saves presets there and lists them from there.

    `user_resource('SCRIPTS')` follows BLENDER_USER_SCRIPTS and `preset_paths` the scripts folder of
    BLENDER_USER_RESOURCES (both read when called), so both point at the same place.
    """
    monkeypatch.setenv("BLENDER_USER_RESOURCES", str(tmp_path))
    monkeypatch.setenv("BLENDER_USER_SCRIPTS", str(tmp_path / "scripts"))
    return tmp_path / "scripts" / "presets"


def pose_rig(count: int = 4):
    """A chain rig in Pose Mode, its last bone active."""
    rig, _target = chain_rig(count=count, live=False)
    bpy.ops.object.mode_set(mode='POSE')
    rig.data.bones.active = rig.data.bones[f"bone{count - 1}"]
    return rig


def select(pose_bone, state: bool) -> None:
    """Select or deselect a pose bone (5.0 keeps pose selection on the pose bone, older Blender on the bone)."""
    owner = pose_bone if hasattr(pose_bone, "select") else pose_bone.bone
    owner.select = state


def shipped(subdir: str) -> dict[str, Path]:
    """The shipped presets of one folder, by name."""
    return {path.stem: path for path in sorted((presets.SHIPPED_ROOT / subdir).glob("*.py"))}


def apply(path: Path, menu: str) -> None:
    """Apply a preset as its menu entry does."""
    operator = getattr(bpy.types, menu).preset_operator.split(".")
    assert getattr(getattr(bpy.ops, operator[0]), operator[1])(filepath=str(path), menu_idname=menu) == {"FINISHED"}


def assert_limits(pose_bone, expected: dict) -> None:
    """The bone's IK settings are the expected ones."""
    for axis in "xyz":
        name = pose_bone.name
        assert getattr(pose_bone, f"lock_ik_{axis}") == (axis in expected["lock"]), (name, axis)
        limited = axis in expected["limits"]
        assert getattr(pose_bone, f"use_ik_limit_{axis}") == limited, (name, axis)
        if limited:
            low, high = expected["limits"][axis]
            assert math.degrees(getattr(pose_bone, f"ik_min_{axis}")) == pytest.approx(low, abs=1e-4), (name, axis)
            assert math.degrees(getattr(pose_bone, f"ik_max_{axis}")) == pytest.approx(high, abs=1e-4), (name, axis)
        stiffness = expected["stiffness"].get(axis, 0.0)
        assert getattr(pose_bone, f"ik_stiffness_{axis}") == pytest.approx(stiffness, abs=1e-6), (name, axis)


def test_every_shipped_preset_is_expected() -> None:
    """The shipped presets are the issue's (finger hinge, knee, elbow, spine cone, robot joint) and no others."""
    assert set(shipped(presets.LIMITS_SUBDIR)) == set(EXPECTED_LIMITS)
    assert set(shipped(presets.RIG_SUBDIR)) == set(EXPECTED_RIGS)


@pytest.mark.parametrize("name", sorted(EXPECTED_LIMITS))
def test_a_shipped_limit_preset_sets_the_active_and_selected_bones(name: str) -> None:
    """Applying a bone limit preset sets Blender's IK settings on the active and the other selected pose
    bones and leaves unselected bones alone."""
    rig = pose_rig()
    bones = rig.pose.bones
    for pose_bone in bones:
        select(pose_bone, pose_bone.name in {"bone2", "bone3"})
    untouched = bones["bone0"]
    untouched.lock_ik_x, untouched.use_ik_limit_z, untouched.ik_stiffness_y = True, True, 0.7
    apply(shipped(presets.LIMITS_SUBDIR)[name], "FABRIK_MT_bone_limits_presets")
    for bone in ("bone2", "bone3"):
        assert_limits(bones[bone], EXPECTED_LIMITS[name])
    assert (untouched.lock_ik_x, untouched.use_ik_limit_z) == (True, True)
    assert untouched.ik_stiffness_y == pytest.approx(0.7)
    assert bpy.types.FABRIK_MT_bone_limits_presets.bl_label == name.replace("_", " "), "the menu shows the preset"


@pytest.mark.parametrize("name", sorted(EXPECTED_RIGS))
def test_a_shipped_rig_preset_sets_the_rig_settings(name: str) -> None:
    """Applying a rig preset sets solver, iterations, tolerance and start on the active armature."""
    rig = pose_rig()
    rig.fabrik.solver, rig.fabrik.iterations, rig.fabrik.tolerance, rig.fabrik.start = 'CCD', 7, 0.05, 'PREVIOUS'
    apply(shipped(presets.RIG_SUBDIR)[name], "FABRIK_MT_rig_settings_presets")
    solver, iterations, tolerance, start = EXPECTED_RIGS[name]
    assert (rig.fabrik.solver, rig.fabrik.iterations, rig.fabrik.start) == (solver, iterations, start)
    assert rig.fabrik.tolerance == pytest.approx(tolerance)


def test_a_saved_rig_preset_is_a_file_that_gives_the_settings_back(user_presets: Path) -> None:
    """+ writes a .py file into the user's preset folder; applying it restores the settings; the menu lists it
    after the shipped ones; - removes it."""
    rig = pose_rig()
    settings = rig.fabrik
    settings.solver, settings.iterations, settings.tolerance, settings.start = 'DLS', 123, 0.0025, 'PREVIOUS'
    assert bpy.ops.fabrik.rig_settings_preset_add(name="My Studio Rig") == {"FINISHED"}
    saved = user_presets / "fabrik" / "rig_settings" / "My_Studio_Rig.py"
    assert saved.is_file(), sorted(str(p) for p in user_presets.rglob("*"))
    text = saved.read_text()
    assert "settings.iterations = 123" in text and "settings.solver = 'DLS'" in text

    settings.solver, settings.iterations, settings.tolerance, settings.start = 'FABRIK', 9, 0.1, 'FK'
    apply(saved, "FABRIK_MT_rig_settings_presets")
    assert (settings.solver, settings.iterations, settings.start) == ('DLS', 123, 'PREVIOUS')
    assert settings.tolerance == pytest.approx(0.0025)

    paths = presets.search_paths(presets.RIG_SUBDIR)
    assert paths[0] == str(presets.SHIPPED_ROOT / presets.RIG_SUBDIR), "the shipped presets come first"
    assert str(saved.parent) in paths

    assert bpy.ops.fabrik.rig_settings_preset_add(name="My_Studio_Rig", remove_name=True) == {"FINISHED"}
    assert not saved.exists()


def test_a_saved_limit_preset_carries_the_active_bone_to_other_bones(user_presets: Path) -> None:
    """+ in the limits panel saves the active bone's limits; the file, applied with other bones selected, gives
    them the same limits."""
    rig = pose_rig()
    source = rig.pose.bones["bone3"]
    source.lock_ik_y, source.use_ik_limit_x, source.use_ik_limit_z = True, True, True
    source.ik_min_x, source.ik_max_x = math.radians(-20.0), math.radians(110.0)
    source.ik_min_z, source.ik_max_z = math.radians(-5.0), math.radians(35.0)
    source.ik_stiffness_x = 0.25
    assert bpy.ops.fabrik.bone_limits_preset_add(name="Tail Segment") == {"FINISHED"}
    saved = user_presets / "fabrik" / "bone_limits" / "Tail_Segment.py"
    assert saved.is_file()
    assert "radians(110.0)" in saved.read_text(), "angles are written in degrees, as the panel shows them"

    expected = {"lock": "y", "limits": {"x": (-20.0, 110.0), "z": (-5.0, 35.0)}, "stiffness": {"x": 0.25}}
    for pose_bone in rig.pose.bones:
        select(pose_bone, pose_bone.name in {"bone0", "bone1"})
    rig.data.bones.active = rig.data.bones["bone1"]
    apply(saved, "FABRIK_MT_bone_limits_presets")
    for bone in ("bone0", "bone1"):
        assert_limits(rig.pose.bones[bone], expected)
    assert not rig.pose.bones["bone2"].use_ik_limit_x, "an unselected bone keeps its own limits"


def test_the_preset_text_round_trips_every_limit_setting() -> None:
    """The file a limit preset writes names every one of Blender's per-bone IK limit settings."""
    text = presets.limit_preset_text({name: 0.0 if name.startswith("ik_") else False for name in presets.LIMIT_NAMES})
    for name in presets.LIMIT_NAMES:
        assert f"bone.{name} = " in text
    assert len(presets.LIMIT_NAMES) == 15


def test_the_add_operators_are_blenders_preset_operators() -> None:
    """The + buttons are Blender's AddPresetBase operators writing into presets/fabrik/..."""
    from bl_operators.presets import AddPresetBase

    for operator, subdir in (
        (presets.FABRIK_OT_rig_settings_preset_add, "fabrik/rig_settings"),
        (presets.FABRIK_OT_bone_limits_preset_add, "fabrik/bone_limits"),
    ):
        assert issubclass(operator, AddPresetBase)
        assert operator.preset_subdir == subdir
        assert hasattr(bpy.types, operator.preset_menu)


@pytest.mark.parametrize("menu, names", [
    ("FABRIK_MT_rig_settings_presets", ["Default", "Fast Preview", "Precise"]),
    ("FABRIK_MT_bone_limits_presets", ["Elbow", "Finger Hinge", "Knee", "No Limits", "Robot Joint", "Spine Cone"]),
])
def test_the_preset_menus_list_capitalised_names_and_nothing_that_widens_them(menu: str, names: list) -> None:
    """As Blender's own preset menus: one row per preset with its capitalised name; no per-row remove button and
    no name field (they made the menu 800-1300 px wide; + and - sit beside the menu)."""
    calls: list = []

    class Recorder:
        def __getattr__(self, name):
            if name in {"row", "column"}:  # containers: what they hold is recorded
                return lambda *args, **kwargs: Recorder()

            def record(*args, **kwargs):
                calls.append((name, kwargs))
                return types.SimpleNamespace()
            return record

    cls = getattr(bpy.types, menu)
    shown = types.SimpleNamespace(layout=Recorder(), bl_idname=menu, preset_subdir=cls.preset_subdir,
                                  preset_operator=cls.preset_operator, preset_add_operator=cls.preset_add_operator)
    shown.path_menu = lambda *args, **kwargs: bpy.types.Menu.path_menu(shown, *args, **kwargs)
    cls.draw(shown, bpy.context)
    operators = [kwargs for name, kwargs in calls if name == "operator"]
    assert [kwargs["text"] for kwargs in operators] == names
    assert not [name for name, _kwargs in calls if name != "operator"], calls


def test_with_the_target_selected_a_rig_preset_sets_the_rig_and_leaves_the_target_alone(user_presets: Path) -> None:
    """The normal state after dragging a target: the target is the active object and the FABRIK tab shows its rig.
    The preset menu sets the rig's settings (not the hidden ones every object has), and + saves the rig's."""
    rig, target = chain_rig()
    rig.fabrik.solver, rig.fabrik.iterations = 'CCD', 7
    view_layer = bpy.context.view_layer
    view_layer.objects.active = target
    empty_before = (target.fabrik.solver, target.fabrik.iterations, target.fabrik.tolerance, target.fabrik.start)
    apply(shipped(presets.RIG_SUBDIR)["Precise"], "FABRIK_MT_rig_settings_presets")
    solver, iterations, tolerance, start = EXPECTED_RIGS["Precise"]
    assert (rig.fabrik.solver, rig.fabrik.iterations, rig.fabrik.start) == (solver, iterations, start)
    assert (target.fabrik.solver, target.fabrik.iterations, target.fabrik.tolerance, target.fabrik.start) == \
        empty_before
    rig.fabrik.iterations = 77
    assert bpy.ops.fabrik.rig_settings_preset_add(name="From The Target") == {"FINISHED"}
    assert "settings.iterations = 77" in (user_presets / "fabrik" / "rig_settings" / "From_The_Target.py").read_text()
    assert view_layer.objects.active == target


def test_a_preset_that_fails_half_way_changes_nothing_and_says_why(tmp_path: Path) -> None:
    """A preset file that sets the iterations, then a solver that does not exist: the rig keeps all its settings
    (no half-applied preset) and the operator says why in a line (an error report, which scripts see raised)."""
    rig = pose_rig()
    rig.fabrik.iterations, rig.fabrik.solver = 77, 'CCD'
    broken = tmp_path / "Broken.py"
    broken.write_text("import bpy\nsettings = bpy.context.object.fabrik\nsettings.iterations = 33\n"
                      "settings.solver = 'NOPE'\n")
    with pytest.raises(RuntimeError, match="Cannot apply the preset 'Broken'.*keeps its settings"):
        apply(broken, "FABRIK_MT_rig_settings_presets")
    assert (rig.fabrik.iterations, rig.fabrik.solver) == (77, 'CCD')
    with pytest.raises(RuntimeError, match="Cannot apply the preset"):
        apply(tmp_path / "Missing.py", "FABRIK_MT_rig_settings_presets")
    assert (rig.fabrik.iterations, rig.fabrik.solver) == (77, 'CCD')
