# SPDX-License-Identifier: GPL-3.0-or-later
"""Shared test configuration."""

import os

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
