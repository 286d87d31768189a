# SPDX-License-Identifier: GPL-3.0-or-later
"""The Flamenco job type farm/fabrik_bake.js: its settings follow Flamenco's schema, compileJob makes one
headless bake task per .blend file whose command line the add-on's own parser takes, it refuses bad settings,
and the command it makes really bakes in Debian's Blender 3.4 with the legacy add-on installed (a farm worker).

compileJob runs under Node against tests/package/flamenco_fake.js, a small fake of Flamenco's `author` API: Flamenco's
Manager runs job types in Go's goja engine, which cannot run here.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from gui_session import prepare_profile, run_process

from fabrik_addon import __main__ as cli

ROOT = Path(__file__).resolve().parents[2]
JOB_SCRIPT = ROOT / "farm" / "fabrik_bake.js"
FAKE = Path(__file__).resolve().parent / "flamenco_fake.js"
SETTING_TYPES = {"string", "int32", "float", "bool"}
VISIBILITY = {"visible", "hidden", "submission", "web"}
DEFAULTS = {"armature": "Rig", "frames": "", "start": "rig", "cleanup": 0.0, "new_action": False,
            "output_suffix": ".baked", "addon_module": "bl_ext.user_default.fabrik_ik"}


@pytest.fixture(scope="module")
def node() -> str:
    """Node.js, or a skip naming how to get it."""
    path = shutil.which("node") or shutil.which("nodejs")
    if path is None:
        pytest.skip("Node.js is not on PATH (apt-get install -y nodejs; `python3 tools/dev.py test` does as root)")
    return path


def compile_job(node: str, **settings) -> dict:
    """compileJob's tasks (or its error) for these settings over the job type's defaults."""
    job = {"settings": {**DEFAULTS, **settings}}
    run = subprocess.run([node, str(FAKE), str(JOB_SCRIPT), json.dumps(job)], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def cli_arguments(command: dict) -> list[str]:
    """The add-on's command line in a task's blender-render command (the arguments after '--')."""
    args = command["parameters"]["args"]
    return args[args.index("--") + 1:]


def test_the_job_type_follows_flamencos_schema(node: str) -> None:
    job_type = compile_job(node, bake_files="/shots/a.blend")["job_type"]
    assert job_type["label"] == "FABRIK Bake" and job_type["description"]
    keys = [setting["key"] for setting in job_type["settings"]]
    assert len(keys) == len(set(keys)) and "blendfile" not in keys  # Flamenco's add-on overwrites 'blendfile'
    for setting in job_type["settings"]:
        assert setting["type"] in SETTING_TYPES, setting
        assert setting.get("visible", "visible") in VISIBILITY, setting
        assert setting["description"], setting
        if "choices" in setting:
            assert setting["type"] == "string" and setting["default"] in setting["choices"], setting
    assert {key for key in keys} >= set(DEFAULTS) | {"bake_files"}


def test_one_bake_task_per_file_with_the_add_ons_command_line(node: str) -> None:
    compiled = compile_job(node, bake_files="/shots/sh 010.blend 1-250;\n/shots/sh020.blend\n",
                           frames="5-40:2", start="previous", cleanup=0.001, new_action=True)
    tasks = compiled["tasks"]
    assert [task["name"] for task in tasks] == ["bake sh 010.blend 1-250", "bake sh020.blend 5-40:2"]
    for task, (blend, frames) in zip(tasks, [("/shots/sh 010.blend", range(1, 251)),
                                             ("/shots/sh020.blend", range(5, 41, 2))]):
        assert task["type"] == "blender" and task["dependencies"] == [], task
        [command] = task["commands"]
        parameters = command["parameters"]
        assert command["name"] == "blender-render"
        assert (parameters["exe"], parameters["exeArgs"], parameters["blendfile"]) == ("{blender}", "{blenderArgs}", "")
        assert parameters["argsBefore"] == ["--python-exit-code", "1"]  # a failed bake fails the task
        assert parameters["args"][0] == "--python-expr"
        assert "from bl_ext.user_default.fabrik_ik.fabrik_addon.__main__ import main" in parameters["args"][1]
        args = cli.make_parser().parse_args(cli.signed_values(cli_arguments(command)))
        assert (args.command, args.blend, args.object, args.frames) == ("bake", blend, "Rig", frames)
        assert (args.start, args.cleanup, args.new_action) == ("previous", 0.001, True)
        assert args.out == blend.removesuffix(".blend") + ".baked.blend"


def test_defaults_leave_the_scene_range_and_no_clean_up(node: str) -> None:
    [task] = compile_job(node, bake_files="/shots/a.blend", output_suffix="", addon_module="fabrik_ik")["tasks"]
    [command] = task["commands"]
    assert "from fabrik_ik.fabrik_addon.__main__ import main" in command["parameters"]["args"][1]
    args = cli.make_parser().parse_args(cli.signed_values(cli_arguments(command)))
    assert (args.frames, args.cleanup, args.new_action, args.start) == (None, None, False, "rig")
    assert args.out == "/shots/a.blend"  # an empty suffix saves over the file


@pytest.mark.parametrize("settings, words", [
    ({"bake_files": "/a.blend", "armature": " "}, "name the armature"),
    ({"bake_files": " ; \n"}, "at least one .blend"),
    ({"bake_files": "/a.txt"}, "'/a.txt' is not a .blend file"),
    ({"bake_files": "/a.blend 9-3"}, "'9-3' starts after it ends"),
    ({"bake_files": "/a.blend", "frames": "1-9:0"}, "step of '1-9:0'"),
    ({"bake_files": "/a.blend", "frames": "soon"}, "not 'soon'"),
    ({"bake_files": "/a.blend 1-5;/a.blend 6-9"}, "listed twice"),
    ({"bake_files": "/a.blend", "cleanup": -1}, "clean-up tolerance"),
    ({"bake_files": "/a.blend", "start": "later"}, "start must be"),
    ({"bake_files": "/a.blend", "addon_module": "x; import os"}, "not a Python module name"),
])
def test_bad_settings_are_refused_at_submission(node: str, settings: dict, words: str) -> None:
    compiled = compile_job(node, **settings)
    assert "tasks" not in compiled and words in compiled["error"], compiled


def worker_command(blender: str, task: dict) -> list[str]:
    """What a Flamenco worker runs for a task's blender-render command (variables as Flamenco's defaults)."""
    [command] = task["commands"]
    parameters = command["parameters"]
    assert parameters["exe"] == "{blender}" and parameters["exeArgs"] == "{blenderArgs}"
    return [blender, *shlex.split("-b -y"), *parameters["argsBefore"], *parameters["args"]]


def test_the_task_bakes_on_a_worker_with_the_legacy_add_on(node: str, legacy_zip: Path, tmp_path_factory) -> None:
    """Blender 3.4 with the add-on installed and enabled, as a worker has it: the compiled task bakes and saves;
    a task naming an armature the file lacks fails with the add-on's one-line message and Blender's exit 2."""
    blender = shutil.which("blender")
    if blender is None:
        pytest.skip("Debian's `blender` (3.4) is not on PATH; `python3 tools/dev.py test` installs it as root")
    tmp, env = prepare_profile("farm34", blender, legacy_zip, tmp_path_factory)
    scene = tmp / "shot.blend"
    made = run_process([blender, "-b", "--python-exit-code", "1", "--python", str(ROOT / "samples" / "chain.py"),
                        "--", "--save", str(scene)], env, 120)
    assert made.returncode == 0 and scene.is_file(), made.stdout[-3000:] + made.stderr[-3000:]

    [task] = compile_job(node, bake_files=f"{scene} 1-12", armature="Arm", addon_module="fabrik_ik")["tasks"]
    run = run_process(worker_command(blender, task), env, 180)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    out = tmp / "shot.baked.blend"
    assert "baked 12 frames of 6 bones of 'Arm'" in run.stdout and f"saved {out}" in run.stdout, run.stdout[-3000:]
    assert out.is_file()

    [bad] = compile_job(node, bake_files=str(scene), armature="Nope", addon_module="fabrik_ik")["tasks"]
    failed = run_process(worker_command(blender, bad), env, 180)
    assert failed.returncode == 2, failed.stdout[-3000:] + failed.stderr[-3000:]
    assert "fabrik: " in failed.stderr and "no armature object 'Nope'" in failed.stderr, failed.stderr[-3000:]
