# SPDX-License-Identifier: GPL-3.0-or-later
"""The viewport overlay in the real GUI of Debian's Blender 3.4 under Xvfb: captures with the overlay off and
on differ round the chain and its target, in the colour of the effector's status (reached, missed, error).

The captures are kept in test-artifacts/overlay_<state>_<off|on>.png.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from debian_blender import fallback_numpy_site
from test_gui_blender import SCREEN, SETUP, SETUP_TIMEOUT, _run, gui_tools  # noqa: F401 (gui_tools: a fixture)

pytestmark = pytest.mark.gui

ROOT = Path(__file__).resolve().parent.parent
DRIVER = Path(__file__).resolve().parent / "gui_overlay_driver.py"
ARTIFACTS = ROOT / "test-artifacts"
GUI_TIMEOUT = 180
STATES = {"reached": "REACHED", "missed": "MISSED", "error": "ERROR"}


@pytest.fixture(scope="module")
def overlay_run(gui_tools: tuple[str, str], legacy_zip: Path, tmp_path_factory) -> dict:  # noqa: F811
    """Install the legacy zip in a temporary profile (background), then run the overlay driver in the GUI."""
    blender, xvfb_run = gui_tools
    tmp = tmp_path_factory.mktemp("gui34_overlay")
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env["BLENDER_USER_SCRIPTS"] = str(tmp / "scripts")
    env["BLENDER_USER_CONFIG"] = str(tmp / "config")
    env["BLENDER_USER_DATAFILES"] = str(tmp / "datafiles")
    (tmp / "tmp").mkdir()
    env["TMPDIR"] = str(tmp / "tmp")
    fallback = fallback_numpy_site(tmp)
    if fallback is not None:
        env["FABRIK_FALLBACK_SITE"] = str(fallback)
        env["FABRIK_FALLBACK_PYTHON"] = "%d.%d" % sys.version_info[:2]
    setup = tmp / "setup.py"
    setup.write_text(SETUP)
    run = _run([blender, "-b", "--factory-startup", "--python", str(setup), "--", str(legacy_zip)],
               env, SETUP_TIMEOUT)
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no JSON from the setup run (exit {run.returncode}):\n{run.stdout}\n{run.stderr}"
    prepared = json.loads(lines[-1])
    if "error" in prepared and "No module named 'numpy'" in prepared["error"]:
        pytest.skip(f"Blender 3.4 (Python {prepared['python']}) has no numpy; install Debian's python3-numpy")
    assert "error" not in prepared, f"setup failed:\n{prepared['error']}\n{run.stderr}"

    driver = tmp / "driver.py"
    shutil.copyfile(DRIVER, driver)
    shots = tmp / "shots"
    shots.mkdir()
    result_path = tmp / "result.json"
    command = ["timeout", "-k", "10", str(GUI_TIMEOUT), xvfb_run, "-a", "-s", f"-screen 0 {SCREEN}",
               blender, "-noaudio", "--python-exit-code", "1",
               "--python", str(driver), "--", str(result_path), str(shots), str(ROOT / "samples")]
    began = time.monotonic()
    run = _run(command, env, GUI_TIMEOUT + 30)
    log = f"exit {run.returncode}\n--- stdout\n{run.stdout[-6000:]}\n--- stderr\n{run.stderr[-6000:]}"
    assert run.returncode != 124, f"`timeout` stopped the GUI run after {GUI_TIMEOUT} s:\n{log}"
    assert result_path.is_file(), f"the driver wrote no result:\n{log}"
    result = json.loads(result_path.read_text())
    result["wall_seconds"] = round(time.monotonic() - began, 1)
    ARTIFACTS.mkdir(exist_ok=True)
    for shot in sorted(shots.glob("*.png")):
        shutil.copyfile(shot, ARTIFACTS / shot.name)
    assert "error" not in result, f"driver failed at stage '{result['stage']}':\n{result['error']}\n{log}"
    result["log"] = log
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
