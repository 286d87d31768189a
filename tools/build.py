# SPDX-License-Identifier: GPL-3.0-or-later
"""Build the add-on: the extension zip (Blender 4.2+) and a legacy add-on zip (Blender 3.4+).

    python tools/build.py [--out-dir DIR]     # default DIR: dist/

The extension is built by Blender's own extension CLI, which ships inside the
bpy wheel and uses only the standard library, so it runs as a subprocess of
this same interpreter. Both zips are checked for content after building.
"""

from __future__ import annotations

import argparse
import ast
import os
import shutil
import string
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "blender_manifest.toml"
PACKAGE = "fabrik_addon"
DIST = ROOT / "dist"

# What a shipped zip must never contain (anywhere below the top level, too).
_FORBIDDEN_PARTS = {"tests", "tools", "samples", "benchmarks", "farm", "dist", ".venv", "__pycache__", ".git"}
# Ships in the extension zip only: what Blender 3.4-4.1 lists when that zip is installed as a legacy add-on.
WRONG_PACKAGE_NOTICE = "fabrik_ik_wrong_package.py"
#: Its template: `notice_text` stamps the version into it when a zip is built.
NOTICE_TEMPLATE = ROOT / "tools" / "wrong_package_notice.py.in"
# Top-level documents that may ship beside the code (name prefixes, upper case).
_ROOT_DOCUMENTS = ("README", "LICENSE", "COPYING")
# Fixed timestamp for the legacy zip so identical sources give identical bytes.
_ZIP_EPOCH = (2024, 1, 1, 0, 0, 0)


class BuildError(RuntimeError):
    """The build failed or produced a package with the wrong content."""


def manifest() -> dict:
    """The parsed `blender_manifest.toml`."""
    with MANIFEST.open("rb") as fh:
        return tomllib.load(fh)


def package_id() -> str:
    """The extension id from the manifest (also the legacy add-on's folder name)."""
    return str(manifest()["id"])


def version() -> str:
    """The version string from the manifest."""
    return str(manifest()["version"])


def blender_scripts_dir() -> Path:
    """Blender's bundled `scripts` folder inside the bpy wheel."""
    import bpy  # imported late: only the extension build needs the (slow to import) wheel

    return Path(bpy.utils.system_resource('SCRIPTS'))


def extension_cli() -> Path:
    """Path of Blender's extension command line tool `blender_ext.py`."""
    path = blender_scripts_dir() / "addons_core" / "bl_pkg" / "cli" / "blender_ext.py"
    if not path.is_file():
        raise BuildError(f"Blender's extension CLI is missing: {path}")
    return path


def valid_tags_file() -> Path | None:
    """Blender's list of valid tags, so the CLI checks our tags as extensions.blender.org would."""
    path = blender_scripts_dir() / "modules" / "_bpy_internal" / "extensions" / "tags.py"
    return path if path.is_file() else None


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """Run `blender_ext.py` with this interpreter; BuildError with its output when it fails."""
    command = [sys.executable, str(extension_cli()), *args]
    tags = valid_tags_file()
    if tags is not None:
        command += ["--valid-tags", str(tags)]
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if result.returncode != 0:
        raise BuildError(f"{' '.join(args[:1])} failed ({result.returncode}):\n{result.stdout}{result.stderr}")
    return result


def source_files() -> list[Path]:
    """Files of the add-on package, relative to the repository root (no caches, no hidden files)."""
    return sorted(
        p.relative_to(ROOT)
        for p in (ROOT / PACKAGE).rglob("*")
        if p.is_file()
        and "__pycache__" not in p.parts
        and p.suffix != ".pyc"
        and not any(part.startswith(".") for part in p.relative_to(ROOT).parts)
    )


def root_documents() -> list[str]:
    """README/LICENSE files beside the manifest: the manifest does not exclude them, and they do no harm."""
    return sorted(p.name for p in ROOT.iterdir() if p.is_file() and p.name.upper().startswith(_ROOT_DOCUMENTS))


def expected_extension_entries() -> set[str]:
    """Every file the extension zip must hold, and nothing else."""
    return {
        "blender_manifest.toml", "__init__.py", WRONG_PACKAGE_NOTICE, *root_documents(),
        *(p.as_posix() for p in source_files()),
    }


def notice_text() -> str:
    """The wrong-package notice of this version: its template with the legacy zip's name and the version in it."""
    numbers = tuple(int(part) for part in version().split("."))
    return string.Template(NOTICE_TEMPLATE.read_text(encoding="utf-8")).substitute(
        legacy_zip=f"{package_id()}-{version()}-legacy.zip", version=repr(numbers)
    )


def check_wrong_package_notice(text: str) -> None:
    """BuildError unless the files the notice takes out of Blender 3.4's add-ons folder are the ones the extension
    zip puts there."""
    unpacked = next(node for node in ast.parse(text).body if isinstance(node, ast.Assign)
                    and getattr(node.targets[0], "id", None) == "UNPACKED")
    removed = {entry.elts[0].value for entry in unpacked.value.elts}
    top = {name.split("/")[0] for name in expected_extension_entries()}
    if removed != top:
        raise BuildError(f"{NOTICE_TEMPLATE.name} removes {sorted(removed)}, the zip unpacks {sorted(top)}")


def staged(scratch: Path) -> Path:
    """The extension's files alone, laid out as its zip holds them, with the notice stamped: the folder Blender's
    CLI builds from, so whatever else lies in the checkout (a .blend a sample saved, say) stays out."""
    source = scratch / "source"
    for name in (MANIFEST.name, "__init__.py", *root_documents(), *(p.as_posix() for p in source_files())):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / name, source / name)
    text = notice_text()
    check_wrong_package_notice(text)
    (source / WRONG_PACKAGE_NOTICE).write_text(text, encoding="utf-8")
    return source


def expected_legacy_entries() -> set[str]:
    """Every file the legacy zip must hold, all below one folder named after the id."""
    top = package_id()
    return {f"{top}/__init__.py", f"{top}/LICENSE", *(f"{top}/{p.as_posix()}" for p in source_files())}


def zip_files(path: Path) -> set[str]:
    """Names of the files (not folder entries) in a zip."""
    with zipfile.ZipFile(path) as archive:
        return {name for name in archive.namelist() if not name.endswith("/")}


def check_zip(path: Path, expected: set[str]) -> None:
    """BuildError unless the zip holds exactly the expected files and nothing from the forbidden folders."""
    names = zip_files(path)
    forbidden = sorted(n for n in names if _FORBIDDEN_PARTS & set(n.split("/")[:-1]) or n.endswith(".pyc"))
    missing = sorted(expected - names)
    extra = sorted(names - expected)
    if forbidden or missing or extra:
        raise BuildError(
            f"{path.name} has the wrong content: missing {missing}, extra {extra}, forbidden {forbidden}"
        )


def _publish(built: Path, final: Path) -> Path:
    """Move a finished zip into place in one step, so readers never see half a zip."""
    os.replace(built, final)
    return final


def build_extension(out_dir: Path = DIST) -> Path:
    """Validate the sources, build `<id>-<version>.zip` with Blender's CLI, check its content; return its path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    final = out_dir / f"{package_id()}-{version()}.zip"
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".build-") as scratch:
        source = staged(Path(scratch))
        run_cli("validate", str(source))
        built = Path(scratch) / final.name
        # The CLI reports success even when `paths` misses files, so the content is checked below.
        run_cli("build", "--source-dir", str(source), "--output-filepath", str(built))
        run_cli("validate", str(built))
        check_zip(built, expected_extension_entries())
        return _publish(built, final)


def build_legacy(out_dir: Path = DIST) -> Path:
    """Build `<id>-<version>-legacy.zip` for Preferences > Add-ons > Install (Blender 3.4+); return its path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    top = package_id()
    final = out_dir / f"{top}-{version()}-legacy.zip"
    files = [Path("__init__.py"), Path("LICENSE"), *source_files()]
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".build-") as scratch:
        built = Path(scratch) / final.name
        with zipfile.ZipFile(built, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for relative in files:
                info = zipfile.ZipInfo(f"{top}/{relative.as_posix()}", date_time=_ZIP_EPOCH)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                archive.writestr(info, (ROOT / relative).read_bytes())
        check_zip(built, expected_legacy_entries())
        return _publish(built, final)


def build_all(out_dir: Path = DIST) -> tuple[Path, Path]:
    """Build both zips; return (extension, legacy)."""
    return build_extension(out_dir), build_legacy(out_dir)


def main(argv: list[str] | None = None) -> int:
    """Build both zips and print their paths."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=DIST, help="where the zips go (default: dist/)")
    args = parser.parse_args(argv)
    try:
        extension, legacy = build_all(args.out_dir)
    except BuildError as exc:
        print(f"build failed: {exc}", file=sys.stderr)
        return 1
    print(f"extension: {extension}")
    print(f"legacy:    {legacy}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
