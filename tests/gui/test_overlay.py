# SPDX-License-Identifier: GPL-3.0-or-later
"""The viewport overlay in the real GUI of Debian's Blender 3.4 under Xvfb: captures with the overlay off and
on differ round the chain and its target, in the colour of the effector's status (reached, missed, error).

The captures are kept in test-artifacts/overlay_<state>_<off|on>.png.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from gui_session import ARTIFACTS, run_gui_once

pytestmark = pytest.mark.gui

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).resolve().parent / "gui_overlay_driver.py"
GUI_TIMEOUT = 240  # seconds for `timeout` around xvfb-run; the driver's own watchdog stops a hang at 150 s
STATES = {"reached": "REACHED", "missed": "MISSED", "error": "ERROR"}


@pytest.fixture(scope="module")
def overlay_run(gui_tools: tuple[str, str], legacy_zip: Path, tmp_path_factory) -> dict:
    """Install the legacy zip in a temporary profile (background), then run the overlay driver in the GUI."""
    result, _shots = run_gui_once(
        "gui34_overlay", DRIVER, gui_tools, legacy_zip, tmp_path_factory, GUI_TIMEOUT, event_simulate=False
    )
    return result


def test_the_gui_session_draws_with_handlers(overlay_run: dict) -> None:
    r = overlay_run
    assert r["background"] is False and r["blender"].startswith("3.4"), (r["background"], r["blender"])
    assert r["overlay_handles"] == 2, "the GUI session should have the POST_VIEW and POST_PIXEL draw handlers"
    assert r["defaults"]["show"] and r["defaults"]["show_targets"] and r["defaults"]["show_readout"]
    assert r["logged_errors"] == [], f"the draw callbacks failed: {r['logged_errors']}\n{r['log']}"
    assert set(r["states"]) == set(STATES)


@pytest.mark.parametrize("state", list(STATES))
def test_overlay_on_against_off_shows_the_status_colour_round_the_chain(overlay_run: dict, state: str) -> None:
    """With the overlay on, pixels round the chain and target change, in the status's colour and not in the
    other statuses' colours; the cross round the target and the middle of the tip-to-target line (when the
    tip is off the target) carry that colour."""
    s = overlay_run["states"][state]
    expected = STATES[state]
    assert s["status"] == expected, s
    assert s["screenshot_ops"] == [["FINISHED"], ["FINISHED"]], s["screenshot_ops"]
    for shot in s["shots"]:
        assert (ARTIFACTS / Path(shot).name).is_file()
    assert s["changed_inside"] > 100, f"{state}: only {s['changed_inside']} pixels changed round the chain: {s}"
    colours = s["colors_inside"]
    assert colours[expected] > 40, f"{state}: {colours[expected]} pixels in the {expected} colour: {s}"
    for other in ("REACHED", "MISSED", "ERROR"):
        if other != expected:
            assert colours[other] < colours[expected] / 10, f"{state}: {other} colour appears too: {colours}"
    assert s["near"]["target"][expected] >= 4, f"{state}: no {expected} cross at the target: {s['near']}"
    if state != "reached":
        assert s["near"]["midpoint"][expected] >= 2, f"{state}: no line between tip and target: {s['near']}"
    else:
        tip, target = s["points"]["tip_world"], s["points"]["target_world"]
        assert sum((a - b) ** 2 for a, b in zip(tip, target)) ** 0.5 < 1e-3
    # Nothing in a status colour was there before the overlay drew it.
    assert s["unchanged_off_matches"][expected] < 10, s["unchanged_off_matches"]


def test_the_limits_drawn_can_be_narrowed_to_the_selected_bones(overlay_run: dict) -> None:
    """On screen: the active chain's cones (the default) are violet; narrowed to the selected bones, with none
    selected, they are gone."""
    pixels = overlay_run["cone_pixels"]
    assert overlay_run["selected_bones"] == []
    assert pixels["ACTIVE"] > 100 and pixels["SELECTED"] < 0.05 * pixels["ACTIVE"], pixels

