# SPDX-License-Identifier: GPL-3.0-or-later
"""Build the add-on: the extension zip (Blender 4.2+) and a legacy add-on zip (Blender 3.4+).

    python3 tools/build.py [--out-dir DIR]     # default DIR: dist/

Only the standard library, on any Python 3.9 or newer: no download, no bpy.
Each zip holds a list of what goes in (`SHIPPED`, the add-on's `.py` files),
so nothing else saved in the checkout can ship or break the build. The same
bytes come out of the same sources. Blender's own validator checks the
extension zip in the tests (tests/package/test_package.py).
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import string
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "blender_manifest.toml"
PACKAGE = "fabrik_addon"
DIST = ROOT / "dist"

#: The files beside the manifest that ship in the extension zip, with the manifest and the add-on package.
SHIPPED = ("__init__.py", "README.md", "LICENSE")
# Ships in the extension zip only: what Blender 3.4-4.1 lists when that zip is installed as a legacy add-on.
WRONG_PACKAGE_NOTICE = "fabrik_ik_wrong_package.py"
#: Its template: `notice_text` stamps the version into it when a zip is built.
NOTICE_TEMPLATE = ROOT / "tools" / "wrong_package_notice.py.in"
# Fixed timestamp for both zips so identical sources give identical bytes.
_ZIP_EPOCH = (2024, 1, 1, 0, 0, 0)


class BuildError(RuntimeError):
    """The build failed or produced a package with the wrong content."""


def manifest() -> dict[str, str]:
    """The manifest's top-level `key = "value"` settings (tomllib is Python 3.11's; these need no more)."""
    text = MANIFEST.read_text(encoding="utf-8").split("\n[", 1)[0]
    found = re.findall(r"""^(\w+)\s*=\s*(["'])(.*?)\2\s*(?:#.*)?$""", text, flags=re.MULTILINE)
    return {key: value for key, _quote, value in found}


def _setting(name: str) -> str:
    """One of the manifest's settings; BuildError where it has none."""
    value = manifest().get(name)
    if not value:
        raise BuildError(f"{MANIFEST.name} has no {name} = \"...\" line before its first [section]")
    return value


def package_id() -> str:
    """The extension id from the manifest (also the legacy add-on's folder name)."""
    return _setting("id")


def version() -> str:
    """The version string from the manifest."""
    return _setting("version")


def source_files() -> list[Path]:
    """The add-on package's modules, relative to the repository root: every `.py` file below it (no caches)."""
    return sorted(p.relative_to(ROOT) for p in (ROOT / PACKAGE).rglob("*.py") if "__pycache__" not in p.parts)


def expected_extension_entries() -> set[str]:
    """Every file the extension zip must hold, and nothing else."""
    return {
        MANIFEST.name, *SHIPPED, WRONG_PACKAGE_NOTICE,
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


def zip_files(path: Path) -> set[str]:
    """Names of the files (not folder entries) in a zip."""
    with zipfile.ZipFile(path) as archive:
        return {name for name in archive.namelist() if not name.endswith("/")}


def write_zip(final: Path, entries: dict[str, bytes]) -> Path:
    """Write a zip of these entries (name: content) with fixed times, read it back, then move it into place in
    one step, so readers never see half a zip nor a wrong one; return its path."""
    final.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=final.parent, prefix=".build-") as scratch:
        built = Path(scratch) / final.name
        with zipfile.ZipFile(built, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for name, content in sorted(entries.items()):
                info = zipfile.ZipInfo(name, date_time=_ZIP_EPOCH)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                archive.writestr(info, content)
        with zipfile.ZipFile(built) as archive:
            broken = archive.testzip()
            names = set(archive.namelist())
        if broken is not None or names != set(entries):
            raise BuildError(f"{final.name} did not read back as written ({broken or sorted(names ^ set(entries))})")
        os.replace(built, final)
    return final


def build_extension(out_dir: Path = DIST) -> Path:
    """Build `<id>-<version>.zip`: the manifest, the files beside it and the package at its top, with the
    wrong-package notice stamped for this version; return its path."""
    text = notice_text()
    check_wrong_package_notice(text)
    names = [MANIFEST.name, *SHIPPED, *(p.as_posix() for p in source_files())]
    entries = {name: (ROOT / name).read_bytes() for name in names}
    entries[WRONG_PACKAGE_NOTICE] = text.encode("utf-8")
    return write_zip(Path(out_dir) / f"{package_id()}-{version()}.zip", entries)


def build_legacy(out_dir: Path = DIST) -> Path:
    """Build `<id>-<version>-legacy.zip` for Preferences > Add-ons > Install (Blender 3.4+): the shim, the
    licence and the package in one folder named after the id; return its path."""
    top = package_id()
    names = ["__init__.py", "LICENSE", *(p.as_posix() for p in source_files())]
    entries = {f"{top}/{name}": (ROOT / name).read_bytes() for name in names}
    return write_zip(Path(out_dir) / f"{top}-{version()}-legacy.zip", entries)


def build_all(out_dir: Path = DIST) -> tuple[Path, Path]:
    """Build both zips; return (extension, legacy)."""
    return build_extension(out_dir), build_legacy(out_dir)


def main(argv: list[str] | None = None) -> int:
    """Build both zips and print their paths."""
    parser = argparse.ArgumentParser(prog=os.environ.get("FABRIK_PROG"), description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=DIST, help="where the zips go (default: dist/)")
    args = parser.parse_args(argv)
    try:
        extension, legacy = build_all(args.out_dir)
    except (BuildError, OSError) as exc:
        print(f"build failed: {exc}", file=sys.stderr)
        return 1
    print(f"extension: {extension}")
    print(f"legacy:    {legacy}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
