# SPDX-License-Identifier: GPL-3.0-or-later
"""`python3 tools/dev.py bench` writes docs/benchmarks.md and the README's table from the benchmarks' own output:
run quickly (a few samples each) into a temporary folder, every section is there with its table, and the README's
table holds the live benchmark's rows as it printed them. (The figures themselves are the benchmarks' business.)"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_benchmark_documents_are_written_from_the_benchmarks_output(tmp_path: Path) -> None:
    before = (ROOT / "README.md").read_bytes(), (ROOT / "docs" / "benchmarks.md").read_bytes()
    run = subprocess.run([sys.executable, "tools/benchdocs.py", "--quick", "--out", str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    doc = (tmp_path / "benchmarks.md").read_text()
    sections = {}
    for title in ("Live solving against Blender's IK constraint", "Bakes against Blender's Bake Action",
                  "Reach under joint limits", "How a chain bends", "The core solvers side by side",
                  "How the code computes, against the way not taken"):
        sections[title] = section = doc.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
        rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("|---")]
        assert len(rows) >= 2, f"no table with a row under {title}"  # (a header and at least one row)
    assert "[bench]" not in doc  # progress lines stay on the console
    # (nor what Blender's operators print while the rigs are built: the tentacle's keying says a line a target)
    assert not [line for line in doc.splitlines() if line.startswith(("Info:", "Warning:", "Error:"))]
    readme = (tmp_path / "README.md").read_text()
    table = readme.split("<!-- benchmark table:", 1)[1].split("<!-- end of benchmark table -->", 1)[0]
    live = sections["Live solving against Blender's IK constraint"]
    lines = live.splitlines()
    header = next(line for line in lines if line.startswith("| rig | Blender IK cost ms/frame | FABRIK cost ms/frame"))
    chain_row = next(line for line in lines[lines.index(header):] if line.startswith("| chain 10 |"))
    assert "| chain 10 |" in table and "| finger, MCP 2 DOF + 2 hinges |" in table, table
    cost = chain_row.split("|")[3].strip()  # FABRIK cost ms/frame, as the benchmark printed it
    assert cost in table.split("| chain 10 |", 1)[1].split("\n", 1)[0]
    # The document opens with every target in one short table, each with the step that set it.
    glance = doc.split("## Targets at a glance\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in glance.splitlines() if line.startswith("| ") and not line.startswith("| benchmark")]
    assert doc.index("## Targets at a glance") < doc.index("## Live solving"), "the summary comes first"
    assert any("| chain 10 |" in row and "Step 7 (issue 13)" in row for row in rows), rows
    assert any(row.startswith("| Bakes against Blender's Bake Action | chain 50 |") for row in rows), rows
    assert all(row.split("|")[7].strip() in ("PASS", "MISS", "–") for row in rows), rows  # (–: a target no
    # number judges, as "as chain 10")
    # No table in the document is as wide as the old 18 columns.
    widest = max(line.count("|") - 1 for line in doc.splitlines() if line.startswith("|"))
    assert widest <= 12, widest
    # The words under the table are written from its cells: every ratio they quote is in the table.
    prose = table.split(".*\n\n", 1)[1].strip()
    assert prose.startswith("FABRIK costs") and "worst error" in prose, prose
    quoted = re.findall(r"\d+\.\d+(?:–\d+\.\d+)?x", prose)
    assert quoted and all(ratio in table.split(".*\n\n", 1)[0] for ratio in quoted), (quoted, table)
    # --out leaves the checkout's documents as they were
    assert ((ROOT / "README.md").read_bytes(), (ROOT / "docs" / "benchmarks.md").read_bytes()) == before
