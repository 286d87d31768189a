# SPDX-License-Identifier: GPL-3.0-or-later
"""Packaging: both zips build, the extension validates, installs into Blender 5.0, works and disables cleanly."""

from __future__ import annotations

import ast
import glob
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import bpy
import pytest

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 120
MODULE = "bl_ext.user_default.fabrik_ik"


def _load_build():
    """tools/build.py as a module (tools/ is not a package)."""
    spec = importlib.util.spec_from_file_location("fabrik_build", ROOT / "tools" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build = _load_build()


@pytest.fixture(scope="session")
def zips(tmp_path_factory) -> tuple[Path, Path]:
    """Both zips, built once per session into a temporary dist folder (never the shared dist/)."""
    return build.build_all(tmp_path_factory.mktemp("dist"))


def _version() -> str:
    """The manifest's version."""
    with (ROOT / "blender_manifest.toml").open("rb") as fh:
        return tomllib.load(fh)["version"]


def _extension_cli() -> tuple[Path, Path]:
    """Blender's extension command line tool and its list of valid tags, both inside the bpy wheel."""
    scripts = Path(bpy.utils.system_resource('SCRIPTS'))
    cli = scripts / "addons_core" / "bl_pkg" / "cli" / "blender_ext.py"
    tags = scripts / "modules" / "_bpy_internal" / "extensions" / "tags.py"
    assert cli.is_file() and tags.is_file(), f"Blender's extension CLI or tags.py is missing from the bpy wheel ({scripts})"
    return cli, tags


def _run_cli(*args: str) -> subprocess.CompletedProcess:
    """Blender's extension CLI from the bpy wheel, checking tags against Blender's list."""
    cli, tags = _extension_cli()
    command = [sys.executable, str(cli), *args, "--valid-tags", str(tags)]
    return subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT)


def test_zip_names(zips: tuple[Path, Path]) -> None:
    """The zips are named after the manifest's id and version."""
    extension, legacy = zips
    assert extension.name == f"fabrik_ik-{_version()}.zip"
    assert legacy.name == f"fabrik_ik-{_version()}-legacy.zip"


def test_extension_validates(zips: tuple[Path, Path]) -> None:
    """Blender's CLI validates the built zip, tags included."""
    run = _run_cli("validate", "--output-type", "JSON", str(zips[0]))
    assert run.returncode == 0, f"blender_ext.py validate failed:\n{run.stdout}\n{run.stderr}"
    messages = [json.loads(line) for line in run.stdout.splitlines() if line.strip()]
    kinds = {kind for kind, _ in messages}
    assert kinds == {"STATUS"}, f"validate reported more than success: {messages}"


def test_extension_rejects_unknown_tag(tmp_path: Path) -> None:
    """The tag check is really on: an invented tag fails validation (so the pass above means something)."""
    manifest = (ROOT / "blender_manifest.toml").read_text()
    assert '"Rigging"' in manifest
    (tmp_path / "blender_manifest.toml").write_text(manifest.replace('"Rigging"', '"Not A Tag"'))
    (tmp_path / "__init__.py").write_text("")
    run = _run_cli("validate", str(tmp_path))
    assert run.returncode != 0 and "Not A Tag" in run.stdout + run.stderr, run.stdout + run.stderr


def test_extension_content(zips: tuple[Path, Path]) -> None:
    """Exactly the manifest, the root shim, the add-on package (recursively), the README and LICENSE; no dev files."""
    with zipfile.ZipFile(zips[0]) as archive:
        names = [n for n in archive.namelist() if not n.endswith("/")]
        shipped_manifest = archive.read("blender_manifest.toml")
    top = {name.split("/")[0] for name in names}
    assert top == {"blender_manifest.toml", "__init__.py", build.WRONG_PACKAGE_NOTICE, "fabrik_addon", "README.md", "LICENSE"}, sorted(top)
    for required in ("fabrik_addon/__init__.py", "fabrik_addon/core/chain/fabrik.py", "fabrik_addon/core/model/skeleton.py",
                     "fabrik_addon/blender/__init__.py", "fabrik_addon/blender/ui/ops.py"):
        assert required in names, f"{required} is missing from the extension zip"
    assert "LICENSE" in names and "GNU GENERAL PUBLIC LICENSE" in (ROOT / "LICENSE").read_text()
    for name in names:
        parts = name.split("/")
        assert not {"tests", "tools", "samples", "benchmarks", "dist", "__pycache__"} & set(parts), name
        assert not any(p.startswith(".") for p in parts), f"hidden file shipped: {name}"
        assert not name.endswith(".pyc"), name
    assert set(names) == build.expected_extension_entries()
    assert shipped_manifest == (ROOT / "blender_manifest.toml").read_bytes()


def test_a_file_saved_beside_the_manifest_stays_out_of_the_zip(tmp_path: Path) -> None:
    """A .blend a sample or the farm notes save in the checkout's root neither breaks the build nor ships: the zip
    is built from the extension's files alone, with the wrong-package notice stamped for this version."""
    stray = ROOT / "baked_by_a_reader.blend"
    assert not stray.exists()
    stray.write_bytes(b"BLENDER-v300")
    try:
        built = build.build_extension(tmp_path)
    finally:
        stray.unlink()
    assert set(build.zip_files(built)) == build.expected_extension_entries()
    with zipfile.ZipFile(built) as archive:
        notice = archive.read(build.WRONG_PACKAGE_NOTICE).decode()
    assert f"{build.package_id()}-{_version()}-legacy.zip" in notice and "$" not in notice


def test_legacy_content(zips: tuple[Path, Path]) -> None:
    """One top folder `fabrik_ik/` holding the shim with bl_info, the licence and the add-on package, nothing else."""
    with zipfile.ZipFile(zips[1]) as archive:
        names = [n for n in archive.namelist() if not n.endswith("/")]
        shim = archive.read("fabrik_ik/__init__.py").decode()
    assert {name.split("/")[0] for name in names} == {"fabrik_ik"}
    assert "bl_info" in shim
    inner = {name.removeprefix("fabrik_ik/") for name in names}
    expected = {"__init__.py", "LICENSE", *(p.as_posix() for p in build.source_files())}
    assert inner == expected, f"missing {sorted(expected - inner)}, extra {sorted(inner - expected)}"
    assert "fabrik_addon/core/chain/fabrik.py" in inner
    assert not any("__pycache__" in n or n.endswith(".pyc") or "/tests/" in n for n in names)


def test_build_script(tmp_path: Path) -> None:
    """`tools/build.py` as `tools/dev.py build` runs it, with no site-packages at all (`-S`: no bpy, no numpy):
    exit 0, both paths printed, both files there, and the same bytes from a second build."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    sums = []
    for out in (tmp_path / "a", tmp_path / "b"):
        run = subprocess.run(
            [sys.executable, "-S", "tools/build.py", "--out-dir", str(out)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT,
        )
        assert run.returncode == 0, f"tools/build.py failed:\n{run.stdout}\n{run.stderr}"
        for name in (f"fabrik_ik-{_version()}.zip", f"fabrik_ik-{_version()}-legacy.zip"):
            path = out / name
            assert str(path) in run.stdout, f"{path} not printed:\n{run.stdout}"
            assert path.is_file()
        assert sorted(p.name for p in out.iterdir()) == sorted(
            [f"fabrik_ik-{_version()}.zip", f"fabrik_ik-{_version()}-legacy.zip"]
        ), "scratch files left in the output folder"
        sums.append([(out / name).read_bytes() for name in sorted(p.name for p in out.iterdir())])
    assert sums[0] == sums[1], "the same sources built different zips"


#: Standard modules newer than Python 3.9 (the build must not need them).
NEWER_THAN_3_9 = {"tomllib"}


def _python_3_9() -> str | None:
    """A Python 3.9 interpreter on this machine, if there is one."""
    for candidate in (shutil.which("python3.9"), *sorted(glob.glob("/root/.pyenv/versions/3.9*/bin/python3.9"))):
        if candidate and subprocess.run([candidate, "-c", "import sys; assert sys.version_info[:2] == (3, 9)"],
                                        capture_output=True).returncode == 0:
            return candidate
    return None


def test_the_build_needs_python_3_9_only(tmp_path: Path) -> None:
    """tools/build.py and tools/dev.py parse as Python 3.9 and import only what 3.9's standard library has; where
    a Python 3.9 is installed, `dev.py build` runs on it and makes the same bytes as this Python's build."""
    for name in ("build.py", "dev.py"):
        source = (ROOT / "tools" / name).read_text()
        ast.parse(source, feature_version=(3, 9))  # (SyntaxError names the line that needs a newer Python)
        tree = ast.parse(source)
        imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                    for alias in node.names}
        imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom) and node.level == 0}
        assert imported <= set(sys.stdlib_module_names) - NEWER_THAN_3_9, f"{name} imports {sorted(imported)}"
    python39 = _python_3_9()
    if python39 is None:
        return  # (the parse and import checks above are what a machine without 3.9 can do)
    ours = build.build_all(tmp_path / "ours")
    run = subprocess.run([python39, "tools/dev.py", "build", "--out-dir", str(tmp_path / "old")], cwd=ROOT,
                         capture_output=True, text=True, timeout=TIMEOUT,
                         env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
    assert run.returncode == 0, run.stdout + run.stderr
    for path in ours:
        assert (tmp_path / "old" / path.name).read_bytes() == path.read_bytes(), path.name


# Runs in a fresh interpreter: installing into a throw-away profile must not touch the test process.
DRIVER = r'''
import json
import os
import sys
import traceback

profile = sys.argv[2]
os.environ["BLENDER_USER_RESOURCES"] = profile  # before bpy is imported, or the real profile is used
result = {"stage": "import"}

try:
    import bpy
    import addon_utils  # only importable once bpy has set up Blender's module paths

    sys.path[:0] = [os.environ["FABRIK_TESTS"], os.environ["FABRIK_CHECKOUT"]]
    import addon_probe as probe

    zip_path = sys.argv[1]
    module = "bl_ext.user_default.fabrik_ik"
    operators = ("solve", "effector_add", "effector_remove")

    def registered_operators():
        """Which of our operators Blender knows (bpy.ops lookups are lazy, so ask for the RNA type)."""
        known = []
        for op in operators:
            try:
                getattr(bpy.ops.fabrik, op).get_rna_type()
                known.append(op)
            except KeyError:
                pass
        return known

    types_before = set(dir(bpy.types))
    handlers_before = probe.handler_snapshot()
    result["enabled_before"] = module in bpy.context.preferences.addons

    result["stage"] = "install"
    result["install"] = sorted(bpy.ops.extensions.package_install_files(
        filepath=zip_path, repo="user_default", enable_on_install=True))
    result["enabled"] = module in bpy.context.preferences.addons
    result["addon_check"] = list(addon_utils.check(module))
    loaded = sys.modules.get(module)
    result["module_file"] = getattr(loaded, "__file__", None)
    result["in_temp_profile"] = bool(loaded) and os.path.realpath(loaded.__file__).startswith(
        os.path.realpath(profile))
    result["object_property"] = "fabrik" in bpy.types.Object.bl_rna.properties
    result["new_types"] = sorted(set(dir(bpy.types)) - types_before)
    result["registered"] = probe.registered_classes(module)
    result["operators"] = registered_operators()
    result["handlers_added"] = probe.our_handlers(module)

    result["stage"] = "solve"
    findings, _, _ = probe.solve_a_chain()
    result.update(findings)

    result["stage"] = "disable"
    result["disable"] = sorted(bpy.ops.preferences.addon_disable(module=module))
    result["still_enabled"] = module in bpy.context.preferences.addons
    result["types_left"] = sorted(set(dir(bpy.types)) - types_before)
    result["registered_left"] = probe.registered_classes(module)
    result["operators_left"] = registered_operators()
    result["object_property_left"] = probe.object_property_left()
    result["handlers_left"] = probe.our_handlers(module)
    result["handlers_changed"] = probe.changed_handlers(handlers_before)
    result["stage"] = "done"
except Exception:
    result["error"] = traceback.format_exc()
print(json.dumps(result), flush=True)
'''


@pytest.fixture(scope="module")
def round_trip(zips: tuple[Path, Path], tmp_path_factory) -> dict:
    """Install the extension into a throw-away profile, enable, solve, disable; the driver's result."""
    tmp = tmp_path_factory.mktemp("roundtrip")
    driver = tmp / "driver.py"
    driver.write_text(DRIVER)
    profile = tmp / "profile"
    profile.mkdir()
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", FABRIK_TESTS=str(ROOT / "tests" / "support"), FABRIK_CHECKOUT=str(ROOT))
    run = subprocess.run(
        [sys.executable, str(driver), str(zips[0]), str(profile)],
        cwd=tmp, env=env, capture_output=True, text=True, timeout=TIMEOUT,
    )
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no JSON from the driver (exit {run.returncode}):\n{run.stdout}\n{run.stderr}"
    result = json.loads(lines[-1])
    assert "error" not in result, f"driver failed at stage '{result['stage']}':\n{result['error']}\n{run.stderr}"
    return result


def test_install_enables_everything(round_trip: dict) -> None:
    """package_install_files installs into the temporary profile and enables every part of the add-on."""
    r = round_trip
    assert not r["enabled_before"], "the add-on was enabled before the install: the profile is not fresh"
    assert r["install"] == ["FINISHED"], f"package_install_files returned {r['install']}"
    assert r["enabled"], f"{MODULE} is not in preferences.addons after install"
    assert r["addon_check"] == [True, True], f"addon_utils.check gave {r['addon_check']}"
    assert r["in_temp_profile"], f"the module was loaded from {r['module_file']}, not the temporary profile"
    assert r["object_property"], "Object.fabrik was not registered"
    assert r["operators"] == ["solve", "effector_add", "effector_remove"], f"operators: {r['operators']}"
    for name in ("VIEW3D_PT_fabrik", "FABRIK_UL_effectors", "FABRIK_OT_solve"):
        assert name in r["new_types"], f"{name} did not appear in bpy.types (new: {r['new_types']})"
    for name in ("FabrikEffector", "FabrikSettings", "VIEW3D_PT_fabrik", "FABRIK_UL_effectors"):
        assert name in r["registered"], f"{name} is not registered (registered: {r['registered']})"
    for name in ("frame_change_post", "depsgraph_update_post", "load_post"):
        assert r["handlers_added"].get(name), f"no add-on handler in bpy.app.handlers.{name}: {r['handlers_added']}"


def test_installed_extension_solves(round_trip: dict) -> None:
    """The installed copy (not the source tree) solves a 3-bone chain onto its target."""
    assert round_trip["solve"] == ["FINISHED"], f"fabrik.solve returned {round_trip['solve']}"
    assert round_trip["tip_error"] < 1e-3, f"the tip ended {round_trip['tip_error']:.3g} from the target"


def test_disable_leaves_nothing(round_trip: dict) -> None:
    """After disabling, no class, operator, property or handler of the add-on remains."""
    r = round_trip
    assert r["disable"] == ["FINISHED"], f"addon_disable returned {r['disable']}"
    assert not r["still_enabled"], f"{MODULE} is still in preferences.addons"
    assert r["types_left"] == [], f"types left in bpy.types: {r['types_left']}"
    assert r["registered_left"] == [], f"add-on classes still registered: {r['registered_left']}"
    assert r["operators_left"] == [], f"operators still known: {r['operators_left']}"
    assert not r["object_property_left"], "Object.fabrik is still registered"
    assert r["handlers_left"] == {}, f"add-on handlers left: {r['handlers_left']}"
    assert r["handlers_changed"] == {}, f"handler lists differ from before the install (removed, added): " \
                                        f"{r['handlers_changed']}"


def test_the_wrong_package_notice_removes_nothing_outside_an_add_ons_folder(tmp_path: Path) -> None:
    """Run from a checkout (or any folder not named addons), the notice's clean-up removes nothing."""
    import shutil

    copy = tmp_path / "checkout"
    copy.mkdir()
    for name in ("__init__.py", "blender_manifest.toml", "README.md", "LICENSE"):
        shutil.copyfile(ROOT / name, copy / name)
    (copy / build.WRONG_PACKAGE_NOTICE).write_text(build.notice_text())
    shutil.copytree(ROOT / "fabrik_addon", copy / "fabrik_addon", ignore=shutil.ignore_patterns("__pycache__"))
    before = sorted(p.name for p in copy.iterdir())
    spec = importlib.util.spec_from_file_location("notice", copy / build.WRONG_PACKAGE_NOTICE)
    notice = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(notice)
    assert notice.remove_unpacked() == [] and sorted(p.name for p in copy.iterdir() if p.name != "__pycache__") == before


def test_every_place_that_names_the_version_names_the_same() -> None:
    """The manifest's version (which names the zips) is the package's, the legacy bl_info's, pyproject's and the
    changelog's newest numbered one."""
    import fabrik_addon

    version = _version()
    assert fabrik_addon.__version__ == version
    shim = ast.parse((ROOT / "__init__.py").read_text())
    bl_info = next(ast.literal_eval(node.value) for node in shim.body
                   if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "bl_info")
    assert bl_info["version"] == tuple(int(part) for part in version.split("."))
    with (ROOT / "pyproject.toml").open("rb") as handle:
        assert tomllib.load(handle)["project"]["version"] == version
    changelog = (ROOT / "CHANGELOG.md").read_text()
    numbered = [line[3:].split()[0] for line in changelog.splitlines() if line.startswith("## ") and line[3].isdigit()]
    assert numbered and numbered[0] == version, numbered


def test_the_build_reads_the_manifest_as_toml_writes_it_and_says_what_is_missing(tmp_path: Path, monkeypatch) -> None:
    """The build reads the id and version without tomllib: single quotes and a comment after the value are TOML
    too; a manifest without a version is a one-line BuildError, not a KeyError."""
    manifest = tmp_path / "blender_manifest.toml"
    manifest.write_text("schema_version = '1.0.0'\nid = 'fabrik_ik'  # the id\nversion = \"0.1.0\"  # bumped\n"
                        "[build]\nversion = \"9.9.9\"\n")
    monkeypatch.setattr(build, "MANIFEST", manifest)
    assert (build.package_id(), build.version()) == ("fabrik_ik", "0.1.0")
    manifest.write_text("id = \"fabrik_ik\"\n")
    with pytest.raises(build.BuildError, match="has no version"):
        build.version()
