# SPDX-License-Identifier: GPL-3.0-or-later
"""Refresh the README's pictures: the GUI tests' screenshots and the demo's contact sheets.

    python3 tools/dev.py pictures

The GUI tests leave their screenshots in test-artifacts/ (never in the checkout); this copies the ones the
README shows into docs/images/, then runs the demo with --update-docs for the sample rigs' contact sheets.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
DOCS_IMAGES = ROOT / "docs" / "images"
#: docs/images/<name> <- test-artifacts/<name>: what each README picture is taken from.
SCREENSHOTS = {
    "panel_blender34.png": "gui_blender34.png",
    "panels_blender34.png": "panels_blender34.png",
    "overlay_blender34.png": "overlay_missed_on.png",
    "setup_blender34.png": "setup_blender34.png",
    "bake_dialog_blender34.png": "bake_dialog_blender34.png",
    "pins_blender34.png": "pins_blender34.png",
    "floor_blender34.png": "floor_blender34.png",
    "retarget_blender34.png": "retarget_blender34.png",
    "retarget_walk_blender34.png": "retarget_walk.png",
    "root_blender34.png": "root_blender34.png",
}


def copy_screenshots() -> list[str]:
    """Copy the GUI tests' screenshots the README shows; return the names of any that are missing."""
    missing = []
    DOCS_IMAGES.mkdir(parents=True, exist_ok=True)
    for name, source in SCREENSHOTS.items():
        if (ARTIFACTS / source).is_file():
            shutil.copyfile(ARTIFACTS / source, DOCS_IMAGES / name)
            print(f"[pictures] docs/images/{name} <- test-artifacts/{source}")
        else:
            missing.append(source)
    return missing


def forget_screenshots() -> None:
    """Delete the GUI tests' earlier screenshots, so a run that skips cannot publish old ones."""
    for source in SCREENSHOTS.values():
        (ARTIFACTS / source).unlink(missing_ok=True)


def main(argv: list[str]) -> int:
    """`--forget` before the GUI tests run; else copy the screenshots, failing with one line if the tests did not
    make them."""
    if argv[:1] == ["--forget"]:
        forget_screenshots()
        return 0
    missing = copy_screenshots()
    if missing:
        print(f"[pictures] the GUI tests made no {', '.join(missing)} (did they skip?)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
