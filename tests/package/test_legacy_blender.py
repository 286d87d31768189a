# SPDX-License-Identifier: GPL-3.0-or-later
"""The legacy add-on zip installs, works and uninstalls cleanly in Debian's Blender 3.4 (background mode)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from debian_blender import fallback_numpy_site

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 120

# Runs inside Blender 3.4 (`blender -b --factory-startup --python DRIVER -- ZIP`). The profile
# folders are temporary (set by the test), so installing cannot touch the real user profile.
DRIVER = r'''
import importlib.util
import json
import os
import sys
import traceback

result = {"python": sys.version.split()[0], "stage": "start"}


def emit():
    """The test reads this JSON from the last line of stdout."""
    print(json.dumps(result), flush=True)


try:
    # Debian's blender does not depend on python3-numpy; then borrow the test venv's numpy,
    # which is binary compatible only with the same Python minor version.
    try:
        import numpy
        result["numpy_source"] = "blender"
    except ImportError:
        fallback = os.environ.get("FABRIK_FALLBACK_SITE")
        if not fallback or os.environ.get("FABRIK_FALLBACK_PYTHON") != "%d.%d" % sys.version_info[:2]:
            raise
        sys.path.insert(0, fallback)
        import numpy
        result["numpy_source"] = "test venv"
    result["numpy"] = numpy.__version__

    import addon_utils
    import bpy

    zip_path = sys.argv[sys.argv.index("--") + 1]
    module = "fabrik_ik"
    sys.path[:0] = [os.environ["FABRIK_TESTS"], os.environ["FABRIK_CHECKOUT"]]
    import addon_probe as probe

    types_before = set(dir(bpy.types))
    handlers_before = probe.handler_snapshot()

    result["stage"] = "install"
    result["install"] = sorted(bpy.ops.preferences.addon_install(filepath=zip_path))
    installed = os.path.join(bpy.utils.user_resource('SCRIPTS', path="addons"), module)
    result["installed_in_temp_profile"] = os.path.isfile(os.path.join(installed, "__init__.py")) and \
        installed.startswith(os.environ["BLENDER_USER_SCRIPTS"])

    result["stage"] = "enable"
    result["enable"] = sorted(bpy.ops.preferences.addon_enable(module=module))
    result["enabled"] = module in bpy.context.preferences.addons
    result["addon_check"] = list(addon_utils.check(module))
    result["object_property"] = "fabrik" in bpy.types.Object.bl_rna.properties
    result["new_types"] = sorted(set(dir(bpy.types)) - types_before)
    result["registered"] = probe.registered_classes(module)
    result["handlers_added"] = probe.our_handlers(module)

    result["stage"] = "solve"
    scene = bpy.context.scene
    findings, rig, target = probe.solve_a_chain()
    result.update(findings)

    result["stage"] = "bake"
    # Blender 3.4 keeps F-curves on the action itself (no layered actions): the bake's other path.
    for frame, x in ((1, 1.5), (10, -1.0)):
        target.location = (x, 0.3, 1.5)
        target.keyframe_insert("location", frame=frame)
    scene.frame_start, scene.frame_end = 1, 10
    rig.fabrik.live = True
    result["bake"] = sorted(bpy.ops.fabrik.bake())
    action = rig.animation_data.action
    result["bake_fcurves"] = len(action.fcurves)
    result["bake_keys"] = sorted({len(f.keyframe_points) for f in action.fcurves})
    result["bake_live_after"] = rig.fabrik.live
    errors = []
    for frame in (1, 4, 10):
        scene.frame_set(frame)
        tip = rig.matrix_world @ rig.pose.bones["b2"].tail
        errors.append((tip - target.matrix_world.translation).length)
    result["bake_errors"] = errors

    result["stage"] = "pins"
    # Pins key the rig's own (legacy) action: the bake's keys go first, then the tip is pinned over frames 3-8
    # while the target slides on.
    rig.animation_data_clear()
    rig.fabrik.live = True
    bpy.context.view_layer.objects.active = rig
    result["pin"] = sorted(bpy.ops.fabrik.pin(frame_start=3, frame_end=8, blend_in=1, blend_out=1))
    held = []
    for frame in range(3, 9):
        scene.frame_set(frame)
        held.append(rig.matrix_world @ rig.pose.bones["b2"].tail)
    result["pin_slide"] = max((tip - held[0]).length for tip in held)
    result["pin_spans"] = sys.modules[module + ".fabrik_addon"].blender.effectors.pins.spans(rig, rig.fabrik.effectors[0])
    # The target never stands still: Find Contacts replaces the pin with none, and nothing is left to clear.
    result["find_contacts"] = sorted(bpy.ops.fabrik.find_contacts(effectors='ACTIVE'))
    result["spans_after_find"] = sys.modules[module + ".fabrik_addon"].blender.effectors.pins.spans(rig, rig.fabrik.effectors[0])
    result["clear_pins"] = sorted(bpy.ops.fabrik.pin_clear())

    result["stage"] = "floor"
    # A floor at the height of the target's frames: the tip lands on it, no joint goes below it.
    rig.animation_data_clear()
    target.animation_data_clear()
    target.location = (1.2, 0.3, 0.1)
    floor = bpy.data.objects.new("Floor", None)
    scene.collection.objects.link(floor)
    floor.location = (0.0, 0.0, 0.4)
    rig.fabrik.floor = floor
    rig.fabrik.live = True
    scene.frame_set(2)
    evaluated = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
    heights = [(rig.matrix_world @ pb.tail).z - 0.4 for pb in evaluated.pose.bones]
    result["floor_lowest"] = min(heights)
    result["floor_tip"] = list(rig.matrix_world @ evaluated.pose.bones["b2"].tail)

    result["stage"] = "retarget"
    # A clip on the walk's skeleton (its BVH importer cannot run here: `walk_clip.keyed_clip`), retargeted onto a
    # rig of other proportions in one click (mapped, the clip's pose keyed, the corrections baked); the rig's hips
    # then move as the clip's, scaled, from their keys alone.
    import walk_clip
    clip = walk_clip.keyed_clip()
    stocky = walk_clip.stocky_rig()
    stocky.fabrik.retarget_source = clip
    bpy.context.view_layer.objects.active = stocky
    result["retarget"] = sorted(bpy.ops.fabrik.retarget(find_contacts=False))
    import math
    scale = (math.hypot(0.02, 0.29) + math.hypot(0.02, 0.28)) / (walk_clip.THIGH + walk_clip.SHIN)
    hips = []
    for frame in (3, 20):
        scene.frame_set(frame)
        depsgraph = bpy.context.evaluated_depsgraph_get()
        source, target = clip.evaluated_get(depsgraph), stocky.evaluated_get(depsgraph)
        hips.append((source.matrix_world @ source.pose.bones["Hips"].head,
                     target.matrix_world @ target.pose.bones["pelvis"].head))
    result["retarget_hips_miss"] = ((hips[1][1] - hips[0][1]) - scale * (hips[1][0] - hips[0][0])).length
    result["retarget_live_after"] = stocky.fabrik.live
    result["retarget_hips_constraints"] = len(stocky.pose.bones["pelvis"].constraints)
    result["retarget_keyed"] = sorted({c.data_path for c in stocky.animation_data.action.fcurves})

    result["stage"] = "root"
    # A hand pulled beyond its arm with the feet held: the pelvis moves (Root: Out of Reach) so it reaches; baked,
    # the pelvis's location is keyed; live solving off gives the animator's place back.
    from samples import rigbuild
    body = walk_clip.stocky_rig()
    body.location = (6.0, 0.0, 0.0)
    for side, x in (("l", 1.0), ("r", -1.0)):
        rigbuild.add_effector(body, f"calf_{side}", rigbuild.make_target(f"F{side}", (6.0 + 0.12 * x, 0.0, 0.15)), 2)
    hand = rigbuild.make_target("Reach", (6.14, -0.99, 1.0))
    rigbuild.add_effector(body, "lowerarm_l", hand, 2)
    body.fabrik.root_bone, body.fabrik.root_mode = "pelvis", 'OUT_OF_REACH'
    body.fabrik.live = True
    scene.frame_set(1)
    evaluated = body.evaluated_get(bpy.context.evaluated_depsgraph_get())
    result["root_hand_miss"] = (evaluated.matrix_world @ evaluated.pose.bones["lowerarm_l"].tail
                                - hand.matrix_world.translation).length
    result["root_pelvis"] = list(body.pose.bones["pelvis"].location)
    body.fabrik.live = False
    result["root_given_back"] = list(body.pose.bones["pelvis"].location)
    body.fabrik.live = True
    bpy.context.view_layer.objects.active = body
    result["root_bake"] = sorted(bpy.ops.fabrik.bake(frame_start=1, frame_end=3))
    result["root_keyed"] = sorted({c.data_path for c in body.animation_data.action.fcurves
                                   if "pelvis" in c.data_path})

    result["stage"] = "disable"
    result["disable"] = sorted(bpy.ops.preferences.addon_disable(module=module))
    result["still_enabled"] = module in bpy.context.preferences.addons
    result["types_left"] = sorted(set(dir(bpy.types)) - types_before)
    result["registered_left"] = probe.registered_classes(module)
    result["object_property_left"] = probe.object_property_left()
    result["handlers_left"] = probe.our_handlers(module)
    result["handlers_changed"] = sorted(probe.changed_handlers(handlers_before))
    result["stage"] = "done"
except Exception:
    result["error"] = traceback.format_exc()
emit()
'''


@pytest.fixture(scope="module")
def blender() -> str:
    """Debian's blender executable, or a skip when it is not installed."""
    path = shutil.which("blender")
    if path is None:
        pytest.skip("Debian's `blender` (3.4) is not on PATH; `python3 tools/dev.py test` installs it as root")
    return path


@pytest.fixture(scope="module")
def legacy_run(blender: str, legacy_zip: Path, tmp_path_factory) -> dict:
    """Install, enable, solve, disable in Blender 3.4 once; the driver's JSON result."""
    tmp = tmp_path_factory.mktemp("blender34")
    driver = tmp / "driver.py"
    driver.write_text(DRIVER)
    env = dict(os.environ, FABRIK_TESTS=str(ROOT / "tests" / "support"), FABRIK_CHECKOUT=str(ROOT))
    env["BLENDER_USER_SCRIPTS"] = str(tmp / "scripts")
    env["BLENDER_USER_CONFIG"] = str(tmp / "config")
    env["BLENDER_USER_DATAFILES"] = str(tmp / "datafiles")
    env.pop("PYTHONPATH", None)
    fallback = fallback_numpy_site(tmp)
    if fallback is not None:
        env["FABRIK_FALLBACK_SITE"] = str(fallback)
        env["FABRIK_FALLBACK_PYTHON"] = "%d.%d" % sys.version_info[:2]
    try:
        run = subprocess.run(
            [blender, "-b", "--factory-startup", "--python-exit-code", "1", "--python", str(driver),
             "--", str(legacy_zip)],
            capture_output=True, text=True, env=env, timeout=TIMEOUT,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"Blender 3.4 did not finish within {TIMEOUT} s:\n{exc.stdout}\n{exc.stderr}")
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no JSON from the driver (exit {run.returncode}):\n{run.stdout}\n{run.stderr}"
    result = json.loads(lines[-1])
    if "error" in result and "No module named 'numpy'" in result["error"]:
        pytest.skip(f"Blender 3.4 (Python {result['python']}) has no numpy and cannot borrow this venv's; "
                    "install Debian's python3-numpy")
    assert "error" not in result, f"driver failed at stage '{result['stage']}':\n{result['error']}\n{run.stderr}"
    result["log"] = run.stdout
    return result


def test_installs_and_enables(legacy_run: dict) -> None:
    """addon_install puts the add-on into the temporary profile, addon_enable registers it."""
    r = legacy_run
    assert r["install"] == ["FINISHED"], f"addon_install returned {r['install']}"
    assert r["installed_in_temp_profile"], "the add-on was not installed into the temporary BLENDER_USER_SCRIPTS"
    assert r["enable"] == ["FINISHED"], f"addon_enable returned {r['enable']}"
    assert r["enabled"], "'fabrik_ik' is not in preferences.addons after enabling"
    assert r["addon_check"] == [True, True], f"addon_utils.check('fabrik_ik') gave {r['addon_check']}"
    assert r["object_property"], "Object.fabrik was not registered"
    for name in ("VIEW3D_PT_fabrik", "FABRIK_UL_effectors", "FABRIK_OT_solve", "FABRIK_OT_effector_add",
                 "FABRIK_OT_effector_remove"):
        assert name in r["new_types"], f"{name} did not appear in bpy.types (new types: {r['new_types']})"
    # Property groups never show in bpy.types; ask the classes themselves.
    for name in ("FabrikEffector", "FabrikSettings", "VIEW3D_PT_fabrik", "FABRIK_OT_solve"):
        assert name in r["registered"], f"{name} is not registered (registered: {r['registered']})"
    for name in ("frame_change_post", "depsgraph_update_post", "load_post"):
        assert r["handlers_added"].get(name), f"no add-on handler in bpy.app.handlers.{name}: {r['handlers_added']}"


def test_solve_reaches_target(legacy_run: dict) -> None:
    """fabrik.solve moves a 3-bone chain's tip onto a reachable empty."""
    r = legacy_run
    assert r["solve"] == ["FINISHED"], f"bpy.ops.fabrik.solve() returned {r['solve']}"
    assert r["tip_moved"] > 0.1, f"the tip did not move ({r['tip_moved']:.3g})"
    assert r["tip_error"] < 1e-3, f"the tip ended {r['tip_error']:.3g} from the target"


def test_bake_writes_legacy_action_keys(legacy_run: dict) -> None:
    """fabrik.bake keys the chain into a legacy action (Action.fcurves) and the keys replay the solve."""
    r = legacy_run
    assert r["bake"] == ["FINISHED"], f"bpy.ops.fabrik.bake() returned {r['bake']}"
    assert r["bake_fcurves"] == 12 and r["bake_keys"] == [10], (r["bake_fcurves"], r["bake_keys"])
    assert not r["bake_live_after"], "live solving should be off after the bake"
    assert max(r["bake_errors"]) < 1e-3, r["bake_errors"]


def test_a_pin_holds_the_tip_in_blender_34(legacy_run: dict) -> None:
    """Pin Target keys a legacy action; the tip stays put over the pinned frames while the target slides."""
    r = legacy_run
    assert r["pin"] == ["FINISHED"] and r["pin_spans"] == [[3, 8]], (r["pin"], r["pin_spans"])
    assert r["pin_slide"] < 1e-4, r["pin_slide"]
    assert r["find_contacts"] == ["FINISHED"] and r["spans_after_find"] == [], r["spans_after_find"]
    assert r["clear_pins"] == ["CANCELLED"]


def test_a_floor_holds_the_chain_in_blender_34(legacy_run: dict) -> None:
    """A target under the Floor is reached on it, and no joint of the chain goes below it."""
    r = legacy_run
    assert r["floor_lowest"] > -1e-3, r["floor_lowest"]
    assert abs(r["floor_tip"][2] - 0.4) < 1e-3 and abs(r["floor_tip"][0] - 1.2) < 1e-3, r["floor_tip"]


def test_a_root_moves_so_a_hand_reaches_in_blender_34(legacy_run: dict) -> None:
    """Root Out of Reach in Blender 3.4: the pelvis's location takes the move and the hand reaches; the bake keys
    the pelvis; live solving off gives its place back."""
    r = legacy_run
    assert r["root_hand_miss"] < 1e-3 and max(abs(c) for c in r["root_pelvis"]) > 0.1, r["root_pelvis"]
    assert r["root_bake"] == ["FINISHED"], r["root_bake"]
    assert 'pose.bones["pelvis"].location' in r["root_keyed"], r["root_keyed"]
    assert r["root_given_back"] == [0.0, 0.0, 0.0], r["root_given_back"]


def test_retarget_in_one_click_in_blender_34(legacy_run: dict) -> None:
    """A clip goes onto another rig in Blender 3.4: the hips keyed moving as the clip's, scaled, and the chains."""
    r = legacy_run
    assert r["retarget"] == ["FINISHED"] and not r["retarget_live_after"]
    assert r["retarget_hips_constraints"] == 0 and r["retarget_hips_miss"] < 1e-4, r["retarget_hips_miss"]
    assert 'pose.bones["pelvis"].location' in r["retarget_keyed"]
    assert 'pose.bones["calf_l"].rotation_quaternion' in r["retarget_keyed"], r["retarget_keyed"]


def test_disable_leaves_nothing(legacy_run: dict) -> None:
    """After addon_disable no class, property or handler of the add-on remains."""
    r = legacy_run
    assert r["disable"] == ["FINISHED"], f"addon_disable returned {r['disable']}"
    assert not r["still_enabled"], "'fabrik_ik' is still in preferences.addons"
    assert r["types_left"] == [], f"types left in bpy.types: {r['types_left']}"
    assert r["registered_left"] == [], f"add-on classes still registered: {r['registered_left']}"
    assert not r["object_property_left"], "Object.fabrik is still registered"
    assert r["handlers_left"] == {}, f"add-on handlers left: {r['handlers_left']}"
    assert r["handlers_changed"] == [], f"handler lists differ from before the install: {r['handlers_changed']}"


# Runs inside Blender 3.4: the 4.2+ extension zip installed by mistake the old way, then enabled.
WRONG_ZIP_DRIVER = r'''
import importlib.util
import json
import os
import sys
import traceback

result = {}
try:
    import bpy

    zip_path = sys.argv[sys.argv.index("--") + 1]
    folder = bpy.utils.user_resource('SCRIPTS', path="addons", create=True)
    open(os.path.join(folder, "someone_elses_addon.py"), "w").write("bl_info = {'name': 'Other'}\n")
    result["before"] = sorted(os.listdir(folder))
    result["install"] = sorted(bpy.ops.preferences.addon_install(filepath=zip_path))
    result["unpacked"] = sorted(os.listdir(folder))
    # Not ours although it has our name: it stays.
    open(os.path.join(folder, "README.md"), "w").write("# Someone else's notes\n")
    try:
        result["enable"] = sorted(bpy.ops.preferences.addon_enable(module="fabrik_ik_wrong_package"))
    except Exception as error:
        result["enable"] = str(error)
    bpy.ops.preferences.addon_refresh()
    result["after"] = sorted(name for name in os.listdir(folder) if name != "__pycache__")
    cache = os.path.join(folder, "__pycache__")
    result["cache"] = sorted(os.listdir(cache)) if os.path.isdir(cache) else []
    result["enabled"] = "fabrik_ik_wrong_package" in bpy.context.preferences.addons
    import addon_utils
    result["listed"] = [m.__name__ for m in addon_utils.modules(refresh=True) if m.__name__.startswith("fabrik")]
except Exception:
    result["error"] = traceback.format_exc()
print(json.dumps(result), flush=True)
'''


def test_the_extension_zip_installed_in_blender_34_takes_itself_out_again(blender: str, tmp_path: Path) -> None:
    """Blender 3.4 unpacks the 4.2+ zip loose into its add-ons folder and lists the notice module; enabling it
    removes what the zip unpacked (a file of the same name that is not ours stays) and says, once, which zip to
    install."""
    spec = importlib.util.spec_from_file_location("fabrik_build", ROOT / "tools" / "build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    extension = build.build_extension(tmp_path / "dist")
    driver = tmp_path / "driver.py"
    driver.write_text(WRONG_ZIP_DRIVER)
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    for name in ("SCRIPTS", "CONFIG", "DATAFILES"):
        env[f"BLENDER_USER_{name}"] = str(tmp_path / name.lower())
    run = subprocess.run([blender, "-b", "--factory-startup", "--python", str(driver), "--", str(extension)],
                         capture_output=True, text=True, env=env, timeout=TIMEOUT)
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no JSON from the driver (exit {run.returncode}):\n{run.stdout}\n{run.stderr}"
    result = json.loads(lines[-1])
    assert "error" not in result, result["error"]
    assert result["install"] == ["FINISHED"]
    assert {"fabrik_ik_wrong_package.py", "fabrik_addon", "blender_manifest.toml"} <= set(result["unpacked"])
    assert result["before"] == ["someone_elses_addon.py"], result
    assert result["after"] == ["README.md", "someone_elses_addon.py"], result  # the README that is not ours stays
    assert not [name for name in result["cache"] if name.startswith("fabrik")], result["cache"]
    assert not result["enabled"] and result["listed"] == [], result
    said = run.stdout + run.stderr + str(result["enable"])
    assert "its files were removed from the add-ons folder again" in said and "fabrik_ik-" in said, said[-3000:]
    assert "nothing was installed" not in said
