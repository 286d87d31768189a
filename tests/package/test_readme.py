# SPDX-License-Identifier: GPL-3.0-or-later
"""The README is a short user's manual that stays true: its files, zips, samples and commands exist as written,
and it speaks of what the add-on does, not of when it changed."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_it_is_a_manual_not_a_log() -> None:
    assert len(README.splitlines()) <= 300
    for phrase in ("session", "sitting", "as before", "issue ", "this run", "before the", "commit "):
        assert phrase not in README.lower(), f"the README speaks of its history: {phrase!r}"


def test_every_file_it_links_or_shows_is_there() -> None:
    links = re.findall(r"\]\(([^)#]+)\)", README)
    assert links
    for link in links:
        if not link.startswith("http"):
            assert (ROOT / link).is_file(), link
    for path in re.findall(r"`((?:samples|farm|tools|benchmarks)/[\w./-]+)`", README):
        assert (ROOT / path).exists(), path


def test_the_zips_it_names_are_the_ones_the_build_makes() -> None:
    with (ROOT / "blender_manifest.toml").open("rb") as handle:
        manifest = tomllib.load(handle)
    version = manifest["version"]
    named = set(re.findall(r"fabrik_ik-[\d.]+(?:-legacy)?\.zip", README))
    assert named == {f"fabrik_ik-{version}.zip", f"fabrik_ik-{version}-legacy.zip"}, named
    assert "GPL-3.0-or-later" in README and manifest["license"] == ["SPDX:GPL-3.0-or-later"]


def test_the_samples_it_lists_are_the_runnable_ones_with_their_armatures() -> None:
    from blender_scenes import SAMPLE_ARMATURES  # (the armature each sample saves, checked by running it)

    runnable = {p.stem for p in (ROOT / "samples").glob("*.py") if 'if __name__ == "__main__"' in p.read_text()}
    text = re.search(r"The\s+samples,\s+with\s+their\s+armatures'\s+names:\s+(.*?)\.\s+Their", README, re.S)[1]
    listed = dict(re.findall(r"`(\w+)` \((\w+)", text.replace("\n", " ")))
    assert set(listed) == runnable, (listed, runnable)
    assert listed == {name: armature for name, (armature, _bone, _start) in SAMPLE_ARMATURES.items()}, listed


def test_its_command_lines_are_taken_by_the_command_line() -> None:
    from fabrik_addon import __main__ as cli

    for line in re.findall(r"-m fabrik_addon (bake [^\n`]+)", README):
        args = cli.make_parser().parse_args(cli.signed_values(shlex.split(line)))
        assert args.command == "bake" and args.object, line
