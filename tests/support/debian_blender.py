# SPDX-License-Identifier: GPL-3.0-or-later
"""Helpers for the tests that run Debian's Blender 3.4 (background and GUI)."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def fallback_numpy_site(tmp_path: Path) -> Path | None:
    """A folder holding only this venv's numpy (symlinked), for a Blender without numpy of its own."""
    spec = importlib.util.find_spec("numpy")
    if spec is None or spec.origin is None:
        return None
    package = Path(spec.origin).parent
    site = tmp_path / "fallback-site"
    site.mkdir()
    (site / "numpy").symlink_to(package, target_is_directory=True)
    # Wheels keep numpy's bundled OpenBLAS in a sibling folder.
    libs = package.parent / "numpy.libs"
    if libs.is_dir():
        (site / "numpy.libs").symlink_to(libs, target_is_directory=True)
    return site
