# SPDX-License-Identifier: GPL-3.0-or-later
"""Every sample runs exactly as the README says, in a fresh interpreter: `.venv/bin/python samples/<name>.py --save
<file>` (nothing imported before it, no PYTHONPATH), and the file it saves reopens with its rig set up."""

from __future__ import annotations

import os
import subprocess
import sys

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
    assert f"saved {out}" in result.stdout, result.stdout[-2000:]
    bpy.ops.wm.open_mainfile(filepath=str(out))
    armature, bone, start = SAMPLE_ARMATURES[name]
    rig = bpy.data.objects[armature]
    assert rig.type == 'ARMATURE' and rig.fabrik.live and rig.fabrik.start == start
    first = rig.fabrik.effectors[0]
    assert first.bone == bone and first.target is not None
    assert all(effector.bone in rig.data.bones for effector in rig.fabrik.effectors)
    assert (bpy.context.scene.frame_start, bpy.context.scene.frame_end) == (1, 48)
