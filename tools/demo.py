# SPDX-License-Identifier: GPL-3.0-or-later
"""The main job: build the add-on, install it into a throw-away Blender profile, solve the sample rigs live.

Run through `python3 tools/dev.py demo`. Each step runs Blender (the bpy
module) in its own process, so the profile is the only state shared:

1. build dist/fabrik_ik-<version>.zip;
2. install and enable it in a temporary BLENDER_USER_RESOURCES, save preferences;
3. per sample: build the scene, play its frames with live solving, measure
   the solve time and each effector's real distance to its target, save
   out/<sample>.blend;
4. print a table.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "out"
SAMPLES = ("chain", "hand")
MODULE = "bl_ext.user_default.fabrik_ik"


def log(message: str) -> None:
    """A progress line."""
    print(f"[demo] {message}", flush=True)


def run_step(args: list[str], profile: str) -> dict:
    """Run this script in a fresh Blender process with the throw-away profile; return its JSON answer."""
    env = dict(os.environ, BLENDER_USER_RESOURCES=profile, PYTHONDONTWRITEBYTECODE="1")
    result = subprocess.run(
        [sys.executable, __file__, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    if result.returncode != 0 or not lines:
        sys.stderr.write(result.stdout[-4000:] + result.stderr[-4000:])
        raise SystemExit(f"demo step {args[0]} failed (exit {result.returncode})")
    return json.loads(lines[-1][len("RESULT "):])


def main() -> int:
    """Orchestrate the demo from outside Blender."""
    sys.path.insert(0, str(ROOT / "tools"))
    import build

    began = time.perf_counter()
    log("building the extension zip")
    extension_zip, legacy_zip = build.build_all()
    log(f"built {extension_zip.relative_to(ROOT)} and {legacy_zip.relative_to(ROOT)}")
    OUT.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fabrik-profile-") as profile:
        log(f"installing it into a throw-away Blender profile ({profile})")
        installed = run_step(["install", str(extension_zip)], profile)
        log(f"enabled {installed['module']} (Blender {installed['blender']})")
        rows = []
        for sample in SAMPLES:
            log(f"sample '{sample}': building the rig and playing its frames with live solving")
            rows.append(run_step(["sample", sample], profile))
    print()
    header = ("sample", "bones", "effectors", "frames", "median solve", "worst error", "saved")
    table = [header] + [
        (
            r["sample"],
            str(r["bones"]),
            str(r["effectors"]),
            str(r["frames"]),
            f"{r['median_solve_ms']:.2f} ms",
            f"{r['worst_error']:.1e}",
            r["saved"],
        )
        for r in rows
    ]
    widths = [max(len(row[c]) for row in table) for c in range(len(header))]
    for i, row in enumerate(table):
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)))
        if i == 0:
            print("  ".join("-" * width for width in widths))
    print()
    log(f"done in {time.perf_counter() - began:.1f} s")
    return 0


def step_install(zip_path: str) -> dict:
    """Inside Blender: install and enable the extension, keep it enabled for the next processes."""
    import bpy

    bpy.ops.extensions.package_install_files(filepath=zip_path, repo="user_default", enable_on_install=True)
    if MODULE not in bpy.context.preferences.addons:
        raise RuntimeError(f"{MODULE} is not enabled after installing {zip_path}")
    bpy.ops.wm.save_userpref()
    return {"module": MODULE, "blender": bpy.app.version_string}


def step_sample(name: str) -> dict:
    """Inside Blender: build one sample, play it with live solving, measure, save."""
    import importlib

    import bpy

    import addon_utils

    # The bpy module starts from factory preferences, so enable the installed extension again.
    if MODULE not in bpy.context.preferences.addons:
        addon_utils.enable(MODULE, default_set=True)
    if MODULE not in bpy.context.preferences.addons:
        raise RuntimeError(f"{MODULE} is installed but could not be enabled")
    solving = importlib.import_module(MODULE + ".fabrik_addon.blender.solving")
    for obj in list(bpy.data.objects):
        bpy.data.objects.remove(obj)
    sys.path.insert(0, str(ROOT / "samples"))
    rig = importlib.import_module(name).build()
    scene = bpy.context.scene
    times, worst = [], 0.0
    for frame in range(scene.frame_start, scene.frame_end + 1):
        scene.frame_set(frame)
        status = solving.status[rig.name]
        if not status.ok:
            raise RuntimeError(f"frame {frame}: {status.message}")
        times.append(status.seconds)
        worst = max(worst, max(_effector_errors(rig)))
    saved = OUT / f"{name}.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(saved))
    return {
        "sample": name,
        "bones": len(rig.data.bones),
        "effectors": len(rig.fabrik.effectors),
        "frames": len(times),
        "median_solve_ms": statistics.median(times) * 1e3,
        "worst_error": worst,
        "saved": str(saved.relative_to(ROOT)),
    }


def _effector_errors(rig) -> list[float]:
    """World distance from each effector's tip to its target, measured on the evaluated scene (not the solver's report)."""
    import bpy

    depsgraph = bpy.context.evaluated_depsgraph_get()
    evaluated = rig.evaluated_get(depsgraph)
    errors = []
    for effector in rig.fabrik.effectors:
        tip = evaluated.matrix_world @ evaluated.pose.bones[effector.bone].tail
        errors.append((tip - effector.target.evaluated_get(depsgraph).matrix_world.translation).length)
    return errors


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("install", "sample"):
        answer = step_install(sys.argv[2]) if sys.argv[1] == "install" else step_sample(sys.argv[2])
        print("RESULT " + json.dumps(answer), flush=True)
        sys.exit(0)
    sys.exit(main())
