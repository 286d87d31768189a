# SPDX-License-Identifier: GPL-3.0-or-later
"""Shared test configuration."""

import importlib.util
import os
import shutil
from pathlib import Path

from hypothesis import settings

# CI explores the same examples every run (a red CI must be reproducible);
# local runs explore new ones and remember failures in .hypothesis/.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

import pytest


@pytest.fixture(scope="module")
def registered_addon():
    """The add-on registered straight from the source tree for one test module, and unregistered after."""
    import bpy  # noqa: F401  (imported here so the core tests never load Blender)

    import fabrik_addon

    fabrik_addon.register()
    yield
    fabrik_addon.unregister()


@pytest.fixture
def clean_scene(registered_addon):
    """An empty file for each test (the add-on's classes and handlers stay registered)."""
    import bpy

    bpy.ops.wm.read_factory_settings(use_empty=True)
    yield


@pytest.fixture
def addon_per_test():
    """The add-on registered for one test in an empty file, for tests that switch it off (to play keys back
    without it) and so cannot share a module-wide registration."""
    import bpy

    import fabrik_addon

    fabrik_addon.register()
    bpy.ops.wm.read_factory_settings(use_empty=True)
    yield
    if hasattr(bpy.types.Object, "fabrik"):
        fabrik_addon.unregister()


@pytest.fixture(scope="session")
def legacy_zip(tmp_path_factory) -> Path:
    """The legacy add-on zip (for Debian's Blender 3.4), built once per test session."""
    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("fabrik_build", root / "tools" / "build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    return build.build_legacy(tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="session")
def gui_tools() -> tuple[str, str]:
    """Debian's blender and xvfb-run, or a skip naming what is missing."""
    blender, xvfb_run = shutil.which("blender"), shutil.which("xvfb-run")
    missing = [name for name, path in (("blender", blender), ("xvfb-run", xvfb_run)) if path is None]
    if shutil.which("xauth") is None:
        missing.append("xauth")  # xvfb-run needs it
    if missing:
        pytest.skip(f"GUI test needs {', '.join(missing)} on PATH (apt-get install -y blender xvfb xauth)")
    return blender, xvfb_run
