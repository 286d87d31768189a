# SPDX-License-Identifier: GPL-3.0-or-later
"""Every sample runs exactly as the README says, in a fresh interpreter: `.venv/bin/python samples/<name>.py --save
<file>` (nothing imported before it, no PYTHONPATH), and the file it saves reopens with its rig set up."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import bpy
import pytest
from blender_scenes import ROOT, SAMPLE_ARMATURES


@pytest.mark.parametrize("name", SAMPLE_ARMATURES)
def test_the_sample_runs_standalone_and_saves_its_rig(name: str, clean_scene, tmp_path) -> None:
    out = tmp_path / f"{name}.blend"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FABRIK_DEBUG")}
    result = subprocess.run([sys.executable, f"samples/{name}.py", "--save", str(out)], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    assert f"saved the {name} sample to {out}" in result.stdout, result.stdout[-2000:]
    bpy.ops.wm.open_mainfile(filepath=str(out))
    armature, bone, start = SAMPLE_ARMATURES[name]
    rig = bpy.data.objects[armature]
    assert rig.type == 'ARMATURE' and rig.fabrik.live and rig.fabrik.start == start
    first = rig.fabrik.effectors[0]
    assert first.bone == bone and first.target is not None
    assert all(effector.bone in rig.data.bones for effector in rig.fabrik.effectors)
    assert (bpy.context.scene.frame_start, bpy.context.scene.frame_end) == (1, 48)


def _sample(args: list[str], cwd: Path = ROOT, script: str = "samples/chain.py",
            python: tuple[str, ...] = (sys.executable,)) -> subprocess.CompletedProcess:
    """The chain sample run as a script in a fresh interpreter."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FABRIK_DEBUG")}
    return subprocess.run([*python, script, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_a_sample_says_how_it_runs_and_refuses_what_it_does_not_know() -> None:
    """`--help` lists --save and --no-save and where the scene goes; an unknown option is one line and exit 2."""
    helped = _sample(["--help"])
    assert helped.returncode == 0 and "--save PATH" in helped.stdout and "out/samples/chain.blend" in helped.stdout
    assert "-- --save" in helped.stdout  # (how to pass options inside Blender)
    refused = _sample(["--bogus"])
    assert refused.returncode == 2 and "unrecognized arguments: --bogus" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_a_sample_without_blender_says_how_to_run_it() -> None:
    """A Python with no bpy (`-S`: no site-packages) gets one line naming both ways to run it, no traceback."""
    run = _sample([], python=(sys.executable, "-S"))
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
    assert "samples/chain.py" in run.stderr and "blender --python" in run.stderr, run.stderr


def test_a_sample_saves_into_out_by_default_and_makes_missing_folders(tmp_path: Path) -> None:
    """Run with no options, a sample saves out/samples/<name>.blend beside the samples (and says so); --save makes the
    folders it names; --no-save saves nothing. (A copy of the samples beside a link to the add-on, so the
    checkout's out/ stays as it was.)"""
    shutil.copytree(ROOT / "samples", tmp_path / "samples", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "fabrik_addon").symlink_to(ROOT / "fabrik_addon")
    default = _sample([], cwd=tmp_path, script=str(tmp_path / "samples" / "chain.py"))
    assert default.returncode == 0, default.stderr[-2000:]
    assert (tmp_path / "out" / "samples" / "chain.blend").is_file()
    assert f"saved the chain sample to {tmp_path / 'out' / 'samples' / 'chain.blend'}" in default.stdout
    deep = tmp_path / "not" / "there" / "yet.blend"
    saved = _sample(["--save", str(deep)])
    assert saved.returncode == 0 and deep.is_file(), saved.stderr[-2000:]
    nothing = _sample(["--no-save"], cwd=tmp_path, script=str(tmp_path / "samples" / "chain.py"))
    assert nothing.returncode == 0 and "not saved" in nothing.stdout
    assert sorted(p.name for p in (tmp_path / "out" / "samples").iterdir()) == ["chain.blend"]
