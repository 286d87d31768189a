# SPDX-License-Identifier: GPL-3.0-or-later
"""Retarget in the real GUI of Debian's Blender 3.4 under Xvfb, as a user runs it from its button: progress from
the first ticks, Esc while the clip is read changes nothing, a whole run finishes baked, and one Ctrl+Z takes
all of it back. Its picture of the clip beside the rig is kept in test-artifacts/retarget_walk.png
(`python3 tools/dev.py pictures` copies it into docs/images/)."""

from __future__ import annotations

from pathlib import Path

import pytest
from gui_session import ARTIFACTS, run_gui_once

pytestmark = pytest.mark.gui

DRIVER = Path(__file__).resolve().parent / "gui_retarget_driver.py"
GUI_TIMEOUT = 240


@pytest.fixture(scope="module")
def retarget_run(gui_tools: tuple[str, str], legacy_zip: Path, tmp_path_factory) -> dict:
    result, _shots = run_gui_once("gui34_retarget", DRIVER, gui_tools, legacy_zip, tmp_path_factory, GUI_TIMEOUT)
    return result


def test_progress_shows_from_the_start_and_esc_while_reading_changes_nothing(retarget_run: dict) -> None:
    r = retarget_run
    assert r["background"] is False and r["blender"].startswith("3.4") and r["map"] == ["FINISHED"]
    assert r["first_invoke"] == ["RUNNING_MODAL"], r["first_invoke"]
    assert r["cancelled"] == {"effectors": 0, "live": True, "action": False, "collection": False,
                              "frames": [1, 250]}, r["cancelled"]
    seen = r["progress"]  # (the second run's, tick by tick: work done from the first second, more each tick)
    assert seen and seen[0][0] < 1.0 and 0 < seen[0][1] < seen[0][2], seen[:3]
    assert all(b[1] >= a[1] for a, b in zip(seen, seen[1:])), seen


def test_a_whole_retarget_finishes_baked_and_one_undo_takes_it_back(retarget_run: dict) -> None:
    r = retarget_run
    assert r["second_invoke"] == ["RUNNING_MODAL"]
    done = r["finished"]
    assert done["effectors"] == 4 and not done["live"] and done["action"] and done["frames"] == [1, 360], done
    assert r["screenshot"] == ["FINISHED"] and (ARTIFACTS / "retarget_walk.png").is_file()
    assert r["undone"] == {"effectors": 0, "live": True, "action": False, "collection": False}, r["undone"]
