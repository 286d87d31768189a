# SPDX-License-Identifier: GPL-3.0-or-later
"""Run every benchmark and write what they print into docs/benchmarks.md and the README's short table.

    python3 tools/dev.py bench          # (runs this with the venv's Python): into out/bench/
    python3 tools/dev.py bench --write  # into the tracked docs/benchmarks.md and README.md
    .venv/bin/python tools/benchdocs.py --quick --out DIR   # a few samples each, written into DIR (a check)
    .venv/bin/python tools/benchdocs.py --only benchmarks/retarget.py   # rerun one, rewrite its section alone

The figures in docs/benchmarks.md and in the README's table come from one run of the benchmarks' own output,
never typed by hand, so prose and tables cannot disagree. Each section's explanation is its script's docstring.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"
README = ROOT / "README.md"
#: (script, section title), in the order they run and appear.
BENCHMARKS = (
    ("benchmarks/run.py", "Live solving against Blender's IK constraint"),
    ("benchmarks/bake.py", "Bakes against Blender's Bake Action"),
    ("benchmarks/retarget.py", "Retargeting a captured walk"),
    ("benchmarks/limits.py", "Reach under joint limits"),
    ("benchmarks/bend.py", "How a chain bends"),
    ("benchmarks/solvers.py", "The core solvers side by side"),
    ("benchmarks/choices.py", "How the code computes, against the way not taken"),
)
#: The live benchmark's rows the README shows (its first column), and the columns it keeps.
README_ROWS = (
    "chain 10", "chain 1000", "hand (palm + 5 x 4)", "20 hands live at once", "tentacle 40, cones",
    "humanoid (Rigify, 5 eff., poles)", "finger, MCP 2 DOF + 2 hinges", "UR5, position + rotation",
    "arm, elbow hinge + pole, bent 15°", "captured motion, 52 bones (5 eff., 4 poles)",
    "captured motion, feet pinned", "captured motion, feet pinned, root free",
)
README_COLUMNS = ("rig", "Blender IK cost ms/frame", "FABRIK cost ms/frame", "FABRIK cost / Blender cost",
                  "FABRIK cost without the solver / Blender cost", "Blender worst error", "FABRIK worst error")
#: Few samples of each benchmark, for `--quick` (a check that the documents are made, not figures to read).
QUICK = {
    "benchmarks/run.py": ["--rigs", "chain 10,hand,finger", "--runs", "1", "--frames", "12", "--no-memory", "--no-paper"],
    "benchmarks/bake.py": ["--rigs", "chain 50,tentacle 40", "--repeats", "1", "--frames", "30"],
    "benchmarks/retarget.py": ["--frames", "30", "--runs", "1", "--motions", "walk"],
    "benchmarks/limits.py": ["--rigs", "finger", "--count", "3"],
    "benchmarks/bend.py": ["--count", "3"],
    "benchmarks/solvers.py": ["--targets", "5"],
    "benchmarks/choices.py": ["--runs", "1", "--count", "3", "--frames", "20"],
}
BEGIN = "<!-- benchmark table: written by tools/benchdocs.py from benchmarks/run.py's output -->"
END = "<!-- end of benchmark table -->"


def legend(script: str) -> str:
    """A benchmark script's docstring, which says what it measures and how."""
    return ast.get_docstring(ast.parse((ROOT / script).read_text(encoding="utf-8"))) or ""


def run(script: str, options: list[str]) -> str:
    """Run a benchmark, echoing its output as it comes; its output without the progress lines."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    process = subprocess.Popen([sys.executable, script, *options], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                               text=True)
    kept = []
    for line in process.stdout:
        print(line, end="", flush=True)
        if not line.startswith("[bench]"):
            kept.append(line)
    if process.wait() != 0:
        raise SystemExit(f"{script} failed (exit {process.returncode}); docs/benchmarks.md left as it was")
    return "".join(kept).strip()


def machine() -> str:
    """What the figures were measured on."""
    import bpy  # (the venv's Blender module)

    cores = os.cpu_count()
    return (f"{platform.machine()}, {cores} cores, CPython {platform.python_version()}, bpy "
            f"{bpy.app.version_string}, {datetime.date.today():%d %b %Y}")


def tables(output: str) -> list[tuple[list[str], list[list[str]]]]:
    """Every markdown table in a benchmark's output: its header and rows of cells."""
    found: list[tuple[list[str], list[list[str]]]] = []
    lines = output.splitlines()
    for k, line in enumerate(lines):
        if line.startswith("|") and k + 1 < len(lines) and lines[k + 1].startswith("|---"):
            header = [cell.strip() for cell in line.strip().strip("|").split("|")]
            rows = []
            for following in lines[k + 2:]:
                if not following.startswith("|"):
                    break
                rows.append([cell.strip() for cell in following.strip().strip("|").split("|")])
            found.append((header, rows))
    return found


def by_rig(output: str) -> dict[str, dict[str, str]]:
    """Each rig's cells by column, over every table of the output whose first column is the rig (a column
    found in two tables keeps the first's)."""
    rigs: dict[str, dict[str, str]] = {}
    for header, rows in tables(output):
        if header[0] != "rig":
            continue
        for row in rows:
            cells = rigs.setdefault(row[0], {})
            for name, cell in zip(header, row):
                cells.setdefault(name, cell)
    return rigs


def readme_table(output: str) -> str:
    """The README's short table: the chosen rows and columns of the live benchmark's tables."""
    rigs = by_rig(output)
    lines = ["| " + " | ".join(README_COLUMNS) + " |", "|---|" + "---:|" * (len(README_COLUMNS) - 1)]
    for rig in README_ROWS:
        if rig in rigs:
            lines.append("| " + " | ".join(rigs[rig][name] for name in README_COLUMNS) + " |")
    return "\n".join(lines)


#: Per benchmark with targets, the columns the summary shows as (FABRIK's, Blender's, the ratio).
SUMMARY_COLUMNS = {
    "benchmarks/run.py": ("FABRIK cost ms/frame", "Blender IK cost ms/frame", "FABRIK cost / Blender cost"),
    "benchmarks/bake.py": ("FABRIK bake, continuous", "Blender nla.bake (IK constraint)", "ratio, continuous"),
}


def summary_table(outputs: dict[str, str]) -> str:
    """Every benchmark row with a target, in one short table: what it measures, the target, whether it is met and
    which step of the project set it."""
    lines = ["| benchmark | rig | FABRIK | Blender | ratio | target | met | set by |",
             "|---|---|---:|---:|---:|---|---|---|"]
    titles = dict(BENCHMARKS)
    for script, (ours, theirs, ratio) in SUMMARY_COLUMNS.items():
        if script not in outputs:
            continue
        for rig, cells in by_rig(outputs[script]).items():
            if cells.get("target", "–") in ("–", "") or "set by" not in cells:
                continue
            unit = " ms a frame" if script == "benchmarks/run.py" else ""  # (the bake's cells carry their seconds)
            lines.append("| " + " | ".join((titles[script], rig, cells[ours] + unit, cells[theirs] + unit,
                                               cells[ratio].replace(" Blender's cost", ""), cells["target"],
                                               cells["met"], cells["set by"])) + " |")
    return "\n".join(lines)


def _ratio(cell: str) -> tuple[float, float, str]:
    """A ratio range cell ('3.19–3.35x Blender's cost'): its lowest and highest, and its short text ('3.19–3.35x')."""
    short = cell.split("x")[0] + "x"
    numbers = [float(n) for n in re.findall(r"\d+(?:\.\d+)?", short)]
    return numbers[0], numbers[-1], short


def _listed(names: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def readme_prose(output: str) -> str:
    """What the README's table shows, in words written from its own cells (so the two cannot disagree)."""
    rigs = by_rig(output)
    shown = [(rig, rigs[rig]) for rig in README_ROWS if rig in rigs]
    ratios = [(rig, _ratio(cells["FABRIK cost / Blender cost"])) for rig, cells in shown]
    cheaper = [(rig, ratio) for rig, ratio in ratios if ratio[1] < 1.0]
    dearer = sorted(((rig, ratio) for rig, ratio in ratios if ratio[1] >= 1.0), key=lambda item: item[1][0])
    words = []
    if cheaper:
        words.append(f"FABRIK costs less than Blender's IK on {_listed([f'*{r}* ({c[2]})' for r, c in cheaper])}")
    if dearer:
        span = (f"{dearer[0][1][2]} (*{dearer[0][0]}*) to {dearer[-1][1][2]} (*{dearer[-1][0]}*)" if len(dearer) > 1
                else f"{dearer[0][1][2]} (*{dearer[0][0]}*)")
        words.append(f", and more on the other {len(dearer)}: from {span}" if cheaper
                     else f"FABRIK costs more than Blender's IK on {'all ' if len(dearer) > 1 else ''}{len(dearer)} "
                          f"rig{'s' if len(dearer) > 1 else ''} here: from {span}")
    text = "".join(words) + "."
    errors = [(rig, float(cells["Blender worst error"].split()[0]), float(cells["FABRIK worst error"].split()[0]))
              for rig, cells in shown]
    below = [rig for rig, theirs, ours in errors if ours < 0.5 * theirs]
    near = [rig for rig, theirs, ours in errors if 0.5 * theirs <= ours <= 1.5 * theirs]
    above = [rig for rig, theirs, ours in errors if ours > 1.5 * theirs]
    text += f" Its worst error is well below Blender's on {len(below)} of the {len(errors)} rigs"
    if near:
        text += (f", and about Blender's on {_listed([f'*{rig}*' for rig in near])}: both solvers' worst frame stops "
                 "about as far from its target (how each reaches targets known to be reachable: [Reach under joint "
                 "limits](docs/benchmarks.md#reach-under-joint-limits))")
    if above:
        text += f"; above Blender's on {_listed([f'*{rig}*' for rig in above])}"
    return text + "."


def write_readme(readme: Path, table: str, prose: str, measured_on: str) -> None:
    """Put the table and what it shows between the README's markers."""
    text = readme.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise SystemExit(f"README.md has no {BEGIN} ... {END} markers")
    block = (f"{BEGIN}\n{table}\n\n*IK cost a frame, lowest to highest median of the runs, Blender's IK constraint "
             f"interleaved in the same process; errors relative to the chain's reach. {measured_on}.*\n\n"
             f"{prose}\n{END}")
    readme.write_text(pattern.sub(lambda _match: block, text), encoding="utf-8")


def rewrite_section(script: str, quick: bool, doc: Path) -> int:
    """Rerun one benchmark and put its output in place of its section in docs/benchmarks.md, marked with what it
    was measured on (the others keep the run that wrote them)."""
    titles = dict(BENCHMARKS)
    output = run(script, QUICK[script] if quick else [])
    text = doc.read_text(encoding="utf-8")
    heading = f"## {titles[script]}"
    if heading not in text:
        raise SystemExit(f"docs/benchmarks.md has no section '{heading}': run them all")
    start = text.index(heading)
    following = text.find("\n## ", start + len(heading))
    end = len(text) if following < 0 else following + 1
    section = "\n".join([heading, "", f"`{script}`", "", legend(script), "", f"*This section: {machine()}.*", "",
                         output, ""])
    doc.write_text(text[:start] + section + ("\n" + text[end:] if end < len(text) else ""), encoding="utf-8")
    print(f"[bench] rewrote the section '{titles[script]}' of {doc}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run them all, then write the document and the README's table."""
    parser = argparse.ArgumentParser(prog=os.environ.get("FABRIK_PROG"), description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few samples of each benchmark (a check)")
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "bench",
                        help="write benchmarks.md and a copy of README.md here (default: out/bench/)")
    parser.add_argument("--write", action="store_true",
                        help="write the tracked docs/benchmarks.md and README.md instead of --out")
    parser.add_argument("--only", help="rerun this one benchmark and rewrite its section alone (it says when)")
    args = parser.parse_args(argv)
    doc, readme = DOC, README
    if not args.write:
        args.out.mkdir(parents=True, exist_ok=True)
        doc, readme = args.out / "benchmarks.md", args.out / "README.md"
        for source, copy in ((DOC, doc), (README, readme)):
            copy.write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    if args.only and args.only not in dict(BENCHMARKS):
        parser.error(f"no benchmark {args.only!r}; one of {', '.join(dict(BENCHMARKS))}")
    if args.only:
        return rewrite_section(args.only, args.quick, doc)
    outputs = {script: run(script, QUICK[script] if args.quick else []) for script, _title in BENCHMARKS}
    measured_on = machine()
    parts = [
        "# Benchmarks",
        "",
        f"Written by `python3 tools/dev.py bench` from the benchmarks' own output ({measured_on}); do not edit "
        "by hand. Machines here are shared and noisy: every figure is a median, comparisons are against a "
        "baseline measured in the same process, interleaved with ours, and where a table gives a range it is "
        "the lowest to highest of several runs.",
    ]
    parts += [
        "", "## Targets at a glance", "",
        "Every row of the benchmarks below that has a target: the step of the project that set it (with its "
        "issue), and whether this run met it on the range's worst end (MISS: not met yet). The ratio is FABRIK's "
        "cost over Blender's live (below 1: cheaper) and Blender's bake time over FABRIK's (above 1: faster); a "
        "target on another measure (a frame after a jump, a whole frame's time) is judged on it, in its "
        "benchmark's tables below.",
        "", summary_table(outputs),
    ]
    for script, title in BENCHMARKS:
        parts += ["", f"## {title}", "", f"`{script}`", "", legend(script), "", outputs[script]]
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text("\n".join(parts) + "\n", encoding="utf-8")
    live = outputs["benchmarks/run.py"]
    write_readme(readme, readme_table(live), readme_prose(live), measured_on)
    print(f"[bench] wrote {doc} and the table in {readme}" + ("" if args.write else " (--write: the tracked ones)"),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
