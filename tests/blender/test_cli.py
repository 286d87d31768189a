# SPDX-License-Identifier: GPL-3.0-or-later
"""`python -m fabrik_addon bake` on bad input: one line on stderr, a non-zero exit, nothing written, no work wasted."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import bpy
import numpy as np
import pytest
from blender_scenes import ROOT, chain_rig, rigbuild, target_world, tip_world

from fabrik_addon.blender.bake import baking
from fabrik_addon.blender.rig import animdata

#: Frames the scene's target moves over: negative ones too, as Blender allows.
MOTION = range(-5, 13)


@pytest.fixture(scope="module")
def scene(registered_addon, tmp_path_factory) -> Path:
    """One saved .blend for the module: 'Rig' (a chain with an effector, bones deselected, its target moving),
    'Off' (an armature whose only effector is disabled), 'Bare' (an armature without effectors), 'Ghost' (an
    armature whose effector names a bone it does not have), 'Target' (an empty)."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    rig, target = chain_rig(count=3)
    rigbuild.key_circle(target, (0.0, 0.0, 2.0), 1.5, MOTION, axis="XZ")
    for pose_bone in rig.pose.bones:
        animdata.set_selected(pose_bone, False)
    off = rigbuild.make_armature("Off", rigbuild.chain_bones(2, 1.0, prefix="off"))
    rigbuild.add_effector(off, "off1", target).enabled = False
    rigbuild.make_armature("Bare", rigbuild.chain_bones(2, 1.0, prefix="bare"))
    ghost = rigbuild.make_armature("Ghost", rigbuild.chain_bones(2, 1.0, prefix="ghost"))
    rigbuild.add_effector(ghost, "ghost1", target).bone = "Nope"
    folder = tmp_path_factory.mktemp("cli")
    path = folder / "scene.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    return path


def run(*args: str, debug_env: bool = False, code: str | None = None) -> subprocess.CompletedProcess:
    """The command line in a fresh interpreter (or, with code, a script that calls it), from the repository root."""
    env = {k: v for k, v in os.environ.items() if k != "FABRIK_DEBUG"}
    env["PYTHONPATH"] = str(ROOT)
    if debug_env:
        env["FABRIK_DEBUG"] = "1"
    command = [sys.executable, "-c", code, *args] if code else [sys.executable, "-m", "fabrik_addon", "bake", *args]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def digest(path: Path) -> str:
    """The file's bytes, hashed: proof that a refused command left it alone."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def assert_refused(result: subprocess.CompletedProcess, words: list[str], status: int = 2) -> str:
    """One line on stderr with the meaningful words, no traceback, the expected exit status; that line."""
    lines = result.stderr.splitlines()
    assert result.returncode == status, result.stderr[-2000:]
    assert len(lines) == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr + result.stdout
    assert lines[0].startswith("fabrik: ")
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


# (arguments after the input file, words the message must hold, whether the refusal comes before loading the file)
REFUSALS = {
    "frames reversed": (["--frames", "5-1"], ["--frames", "'5-1'", "starts after it ends"], True),
    "frames negative step": (["--frames", "1-10:-1"], ["--frames", "step", "1 or more"], True),
    "frames zero step": (["--frames", "1-10:0"], ["--frames", "step", "1 or more"], True),
    "frames garbage": (["--frames", "one-ten"], ["--frames", "must look like", "'one-ten'"], True),
    "frames beyond Blender": (["--frames", "1-2000000"], ["frames", "within Blender's"], True),
    "cleanup nan": (["--cleanup", "nan"], ["clean-up tolerance", "finite", "'nan'"], True),
    "cleanup inf": (["--cleanup", "inf"], ["clean-up tolerance", "finite", "'inf'"], True),
    "cleanup negative": (["--cleanup", "-0.5"], ["clean-up tolerance", "0 or more", "'-0.5'"], True),
    "cleanup not a number": (["--cleanup", "tight"], ["clean-up tolerance", "number", "'tight'"], True),
    "object missing": (["--object", "Nope"], ["no armature object 'Nope'", "'Bare', 'Ghost', 'Off', 'Rig'"], False),
    "object not an armature": (["--object", "Target"], ["'Target'", "EMPTY", "not an armature"], False),
    "armature without effectors": (["--object", "Bare"], ["'Bare'", "no enabled FABRIK effectors"], False),
    "armature with only disabled effectors": (["--object", "Off"], ["'Off'", "no enabled FABRIK effectors"], False),
    "effector on a missing bone": (["--object", "Ghost"], ["'Ghost'", "no bone 'Nope'"], False),
    "selected without selected bones": (["--selected"], ["'Rig'", "no selected bones"], False),
}


@pytest.mark.parametrize("case", REFUSALS)
def test_refuses_bad_arguments_and_objects_in_one_line(scene, case):
    """Bad frames, clean-up tolerances, objects: one line naming the mistake, exit 2, nothing written."""
    extra, words, before_loading = REFUSALS[case]
    out = scene.parent / f"{case.replace(' ', '_')}.blend"
    before = digest(scene)
    arguments = ["--object", "Rig", *extra] if "--object" not in extra else extra
    result = run(str(scene), *arguments, "--out", str(out))
    assert_refused(result, words)
    assert not out.exists() and digest(scene) == before
    if before_loading:
        assert "Read blend" not in result.stdout


def test_a_python_without_bpy_gets_one_line(scene):
    """Run by a Python that cannot import bpy: one line saying so and what to run instead, exit 2."""
    out = scene.parent / "without_bpy.blend"
    code = ('import sys, runpy; sys.modules["bpy"] = None; '
            'runpy.run_module("fabrik_addon", run_name="__main__", alter_sys=True)')
    result = run("bake", str(scene), "--object", "Rig", "--out", str(out), code=code)
    assert_refused(result, ["cannot import Blender's bpy module", ".venv/bin/python"])
    assert not out.exists()


def test_frames_joined_with_equals_are_checked_too(scene):
    """'--frames=-10--20' (the form with '=') reaches the same check as '--frames 5-1'."""
    result = run(str(scene), "--object", "Rig", "--frames=-10--20")
    assert_refused(result, ["'-10--20'", "starts after it ends", "-20--10"])


def test_refuses_a_missing_input(scene):
    """A file that is not there: named, exit 2, and no output appears."""
    out = scene.parent / "from_missing.blend"
    result = run(str(scene.parent / "missing.blend"), "--object", "Rig", "--out", str(out))
    assert_refused(result, ["missing.blend", "does not exist"])
    assert not out.exists()


def test_refuses_inputs_that_are_not_blend_files(scene):
    """A text file, a folder and a file that only looks like a .blend: one line each, nothing written."""
    text = scene.parent / "notes.txt"
    text.write_text("not a blend file\n")
    fake = scene.parent / "fake.blend"  # the right name is not enough: the first bytes decide
    fake.write_text("hello\n")
    broken = scene.parent / "broken.blend"  # the right first bytes, but no Blender data after them
    broken.write_bytes(b"BLENDER-v500" + bytes(64))
    out = scene.parent / "from_bad_input.blend"
    for path, words in (
        (text, ["notes.txt", "not a .blend file"]),
        (fake, ["fake.blend", "not a .blend file"]),
        (scene.parent, ["is a folder", "not a .blend file"]),
        (broken, ["cannot open", "broken.blend"]),
    ):
        assert_refused(run(str(path), "--object", "Rig", "--out", str(out)), words)
        assert not out.exists()
    assert text.read_text() == "not a blend file\n"


def test_refuses_unwritable_outputs_before_loading(scene):
    """--out in a missing folder, a folder itself, or a name Blender files do not have: refused before the file is
    loaded, so no bake is lost."""
    before = digest(scene)
    missing = scene.parent / "no_such_folder" / "baked.blend"
    for out, words in (
        (missing, ["no_such_folder", "does not exist"]),
        (scene.parent, ["is a folder", "not a file"]),
        (scene.parent / "baked.txt", ["baked.txt", "must end in .blend"]),
    ):
        result = run(str(scene), "--object", "Rig", "--frames", "1-5", "--out", str(out))
        assert_refused(result, words)
        assert "Read blend" not in result.stdout
    assert not missing.parent.exists() and digest(scene) == before and not (scene.parent / "baked.txt").exists()


def read_only_places(folder: Path) -> tuple[Path, Path]:
    """An existing file and a folder this process cannot write (chmod; for root, which ignores modes, sysfs)."""
    if os.geteuid() != 0:
        locked = folder / "locked"
        locked.mkdir(exist_ok=True)
        file = folder / "read_only.blend"
        file.write_bytes(b"keep me")
        file.chmod(0o444)
        locked.chmod(0o555)
        return file, locked
    file, locked = Path("/sys/kernel/address_bits"), Path("/sys/kernel")
    for path in (file, locked / "probe.blend"):
        try:
            with open(path, "ab"):
                pass
        except OSError:
            continue
        pytest.skip(f"running as root and {path} is writable: nowhere to test a read-only output")
    return file, locked


def test_refuses_read_only_outputs_before_loading(scene):
    """A read-only --out file or folder: one line, before loading; the read-only file keeps its bytes."""
    file, locked = read_only_places(scene.parent)
    kept = file.read_bytes() if os.geteuid() != 0 else None
    try:
        for out in (file, locked / "baked.blend"):
            result = run(str(scene), "--object", "Rig", "--out", str(out))
            assert_refused(result, ["cannot write the output", str(out)])
            assert "Read blend" not in result.stdout
        assert not (locked / "baked.blend").exists()
        if kept is not None:
            assert file.read_bytes() == kept
    finally:
        if os.geteuid() != 0:
            locked.chmod(0o755)


FAILING_BAKE = """
import sys
import fabrik_addon.__main__ as cli
from fabrik_addon.blender.bake import baking

def explode(*args, **kwargs):
    raise RuntimeError("solver exploded\\non two lines")

baking.bake_object = explode
sys.exit(cli.main(["bake", *sys.argv[1:]]))
"""


@pytest.mark.parametrize("debug", ["off", "--debug", "FABRIK_DEBUG"])
def test_a_failing_bake_is_one_line_unless_debugging(scene, debug):
    """An unexpected error in the bake: 'fabrik: bake failed: ...' and exit 1; the traceback only when asked."""
    out = scene.parent / "failed.blend"
    before = digest(scene)
    flags = ["--debug"] if debug == "--debug" else []
    result = run(str(scene), "--object", "Rig", "--out", str(out), *flags, code=FAILING_BAKE,
                 debug_env=debug == "FABRIK_DEBUG")
    assert result.returncode == 1, result.stderr[-2000:]
    assert result.stderr.splitlines()[-1] == "fabrik: bake failed: solver exploded on two lines"
    if debug == "off":
        assert_refused(result, ["bake failed"], status=1)
    else:
        assert "Traceback" in result.stderr and "explode" in result.stderr
    assert not out.exists() and digest(scene) == before


def test_negative_frames_bake_and_replay(scene):
    """'--frames -5-5' (and '-5..5') bake keys at negative frames, and the keys put the tip on the target there."""
    out = scene.parent / "negative.blend"
    result = run(str(scene), "--object", "Rig", "--frames", "-5-5", "--out", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert "baked 11 frames of 3 bones of 'Rig'" in result.stdout
    dotted = run(str(scene), "--object", "Rig", "--frames", "-5..5:5", "--out", str(out.with_name("dotted.blend")))
    assert dotted.returncode == 0 and "baked 3 frames" in dotted.stdout, dotted.stderr[-2000:]
    bpy.ops.wm.open_mainfile(filepath=str(out))
    rig, target = bpy.data.objects["Rig"], bpy.data.objects["Target"]
    assert not rig.fabrik.live  # so what plays back below is the keys, not a live solve
    assert {tuple(round(p.co[0]) for p in f.keyframe_points) for f in animdata.fcurves(rig)} == {tuple(range(-5, 6))}
    # Frames -5 and -4 are within the chain's reach (the bake warned only about -3..2).
    for frame in (-5, -4):
        bpy.context.scene.frame_set(frame)
        assert np.linalg.norm(np.subtract(tip_world(rig, "bone2"), target_world(target))) < 1e-2, frame


def test_bake_object_rejects_bad_arguments_before_any_work(scene):
    """The Python API raises ValueError with a clear message for the same mistakes, and writes nothing."""
    bpy.ops.wm.open_mainfile(filepath=str(scene))
    rig = bpy.data.objects["Rig"]
    for kwargs, message in (
        ({"cleanup": float("nan")}, "clean-up tolerance must be a finite number of 0 or more, not nan"),
        ({"cleanup": float("inf")}, "clean-up tolerance must be a finite number"),
        ({"cleanup": -1e-3}, "clean-up tolerance must be a finite number of 0 or more"),
        ({"frames": range(10, 0, -1)}, "frame step must be 1 or more, not -1"),
        ({"frames": range(1, 10, -2)}, "frame step must be 1 or more, not -2"),
        ({"frames": [1, 3, 2]}, "frames must increase"),
        ({"frames": [1, 1, 2]}, "frames must increase"),
        ({"frames": [1.0, 2.5]}, "frames must be whole numbers"),
        ({"frames": range(0, 2_000_000)}, "within Blender's"),
        ({"bones": "ALL"}, "bones must be 'CHAINS', 'SELECTED' or a list"),
    ):
        with pytest.raises(ValueError, match=message.replace("(", r"\(")):
            baking.bake_object(rig, **({"frames": range(1, 5)} | kwargs))
    assert rig.animation_data is None or rig.animation_data.action is None
    assert rig.fabrik.live and bpy.context.scene.frame_current == 1
