# SPDX-License-Identifier: GPL-3.0-or-later
"""A Blender whose Python has no numpy (some Linux distributions' builds): the add-on enables, its FABRIK tab and
preferences say what to install, nothing that solves is registered, and disabling leaves nothing behind.

No machine here has such a Blender, so numpy is hidden from the add-on (`sys.modules["numpy"] = None`, which makes
`import numpy` fail as a missing module does) in a real Blender: the bpy module and Debian's Blender 3.4."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TIMEOUT = 120

# Runs in a fresh Blender (the bpy module, or Blender 3.4 with `-b --python`), the legacy zip's path after `--`.
DRIVER = r'''
import json
import os
import sys
import traceback

result = {"stage": "start"}
try:
    import bpy

    sys.modules["numpy"] = None  # (what a Blender without numpy gives: `import numpy` fails)
    zip_path = sys.argv[sys.argv.index("--") + 1]
    types_before = set(dir(bpy.types))
    result["stage"] = "install"
    result["install"] = sorted(bpy.ops.preferences.addon_install(filepath=zip_path))
    result["stage"] = "enable"
    result["enable"] = sorted(bpy.ops.preferences.addon_enable(module="fabrik_ik"))
    result["enabled"] = "fabrik_ik" in bpy.context.preferences.addons
    addon = bpy.context.preferences.addons.get("fabrik_ik")
    result["preferences"] = type(addon.preferences).__name__ if addon is not None and addon.preferences else None
    result["new_types"] = sorted(set(dir(bpy.types)) - types_before)
    result["object_property"] = "fabrik" in bpy.types.Object.bl_rna.properties
    result["operators"] = [name for name in dir(bpy.ops.fabrik)]
    module = sys.modules["fabrik_ik.fabrik_addon.needs_numpy"]
    result["advice"] = module.advice()
    result["stage"] = "disable"
    bpy.ops.preferences.addon_disable(module="fabrik_ik")
    result["left_types"] = sorted(set(dir(bpy.types)) - types_before)
except Exception:
    result["error"] = traceback.format_exc()
print(json.dumps(result), flush=True)
'''


def _run(command: list[str], tmp_path: Path) -> dict:
    """Run the driver in a fresh Blender with a temporary profile; its JSON result."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    for name in ("SCRIPTS", "CONFIG", "DATAFILES"):
        env[f"BLENDER_USER_{name}"] = str(tmp_path / name.lower())
    run = subprocess.run(command, capture_output=True, text=True, env=env, timeout=TIMEOUT)
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no JSON from the driver (exit {run.returncode}):\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    result = json.loads(lines[-1])
    assert "error" not in result, f"the driver failed at stage '{result['stage']}':\n{result['error']}"
    result["log"] = run.stdout
    return result


def _check(result: dict) -> None:
    """Enabled, the advice registered (tab and preferences), nothing that solves, nothing left once disabled."""
    assert result["install"] == ["FINISHED"] and result["enable"] == ["FINISHED"] and result["enabled"]
    assert "VIEW3D_PT_fabrik_needs_numpy" in result["new_types"], result["new_types"]
    assert result["preferences"] == "FABRIK_AP_needs_numpy"
    assert not result["object_property"] and result["operators"] == [], result["operators"]
    assert "numpy is missing" in result["log"]  # (and the console says so, for whoever looks there)
    advice = " ".join(result["advice"])
    assert "needs numpy" in advice and "pip install numpy" in advice and "python3-numpy" in advice
    assert "%d.%d" % sys.version_info[:2] in advice or "Python 3." in advice
    assert result["left_types"] == [], result["left_types"]


def test_blender_5_without_numpy_enables_and_says_what_to_install(legacy_zip: Path, tmp_path: Path) -> None:
    """The bpy module (Blender 5.0) with numpy hidden, the legacy zip installed into a temporary profile."""
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    code = f"import sys; sys.argv = ['driver', '--', {str(legacy_zip)!r}]; exec(open({str(driver)!r}).read())"
    _check(_run([sys.executable, "-c", code], tmp_path))


def test_blender_3_4_without_numpy_enables_and_says_what_to_install(legacy_zip: Path, tmp_path: Path) -> None:
    """Debian's Blender 3.4 in the background, numpy hidden, the legacy zip installed into a temporary profile."""
    blender = shutil.which("blender")
    if blender is None:
        pytest.skip("Debian's `blender` (3.4) is not on PATH; `python3 tools/dev.py test` installs it as root")
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    _check(_run([blender, "-b", "--factory-startup", "--python-exit-code", "1", "--python", str(driver), "--",
                 str(legacy_zip)], tmp_path))
