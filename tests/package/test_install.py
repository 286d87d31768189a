# SPDX-License-Identifier: GPL-3.0-or-later
"""`pip install .` installs the add-on's package, and its headless bake then runs from any folder."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import bpy
from blender_scenes import ROOT, chain_rig
from samples import rigbuild


def test_pip_install_then_bake_from_another_folder(clean_scene, tmp_path: Path) -> None:
    """pip builds the package from pyproject.toml into a folder of its own (no dependencies, no download); from a
    folder that is not the checkout, with only that folder on the path, `python -m fabrik_addon bake` bakes."""
    site, checkout = tmp_path / "site", tmp_path / "checkout"
    # (a copy: pip builds in the folder it is given, and the checkout stays as it was)
    shutil.copytree(ROOT / "fabrik_addon", checkout / "fabrik_addon", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copyfile(ROOT / name, checkout / name)
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--target", str(site),
         str(checkout)],
        capture_output=True, text=True, timeout=300,
    )
    assert installed.returncode == 0, installed.stdout[-2000:] + installed.stderr[-2000:]
    shipped = {p.relative_to(site).as_posix() for p in (site / "fabrik_addon").rglob("*.py")}
    source = {p.relative_to(ROOT).as_posix() for p in (ROOT / "fabrik_addon").rglob("*.py")}
    assert shipped == source, f"missing {sorted(source - shipped)[:5]}, extra {sorted(shipped - source)[:5]}"
    rig, target = chain_rig(count=3)
    rigbuild.key_circle(target, (0.0, 0.0, 2.0), 1.5, range(1, 5), axis="XZ")
    scene = tmp_path / "elsewhere" / "scene.blend"
    scene.parent.mkdir()
    bpy.ops.wm.save_as_mainfile(filepath=str(scene))
    env = {k: v for k, v in os.environ.items() if k != "FABRIK_DEBUG"} | {"PYTHONPATH": str(site)}
    probe = subprocess.run([sys.executable, "-c", "import fabrik_addon; print(fabrik_addon.__file__)"],
                           cwd=scene.parent, env=env, capture_output=True, text=True, timeout=60)
    assert probe.stdout.strip() == str(site / "fabrik_addon" / "__init__.py"), probe.stdout + probe.stderr
    baked = subprocess.run(
        [sys.executable, "-m", "fabrik_addon", "bake", "scene.blend", "--object", "Rig", "--frames", "1-4",
         "--out", "baked.blend"],
        cwd=scene.parent, env=env, capture_output=True, text=True, timeout=300,
    )
    assert baked.returncode == 0, baked.stderr[-2000:]
    assert "baked 4 frames" in baked.stdout and (scene.parent / "baked.blend").is_file(), baked.stdout
