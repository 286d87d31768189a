# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: every core IK solver on the same random reachable targets, as a markdown table.

Run with `.venv/bin/python benchmarks/solvers.py`. No Blender needed. For a
10-bone and a 2-bone chain, targets are the tips of random poses of the chain
itself (so all are reachable); every solver gets the same targets and the
add-on's default settings. Reported per solver: median wall time per solve,
median iterations, and the share of targets reached within tolerance.
Solvers that do not apply to a chain (the two-bone solver on ten bones) say so.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fabrik_addon.core import Goal, SolveSettings, skeleton_from_points  # noqa: E402
from fabrik_addon.core.math.matrix_rows import quaternion_to_matrix  # noqa: E402
from fabrik_addon.core.solving.solvers import DESCRIPTIONS, SOLVERS  # noqa: E402


def chain(count: int, reach: float = 4.0):
    """A straight connected chain of `count` equal bones along +Z with the given total reach."""
    step = reach / count
    heads = [(0.0, 0.0, i * step) for i in range(count)]
    tails = [(0.0, 0.0, (i + 1) * step) for i in range(count)]
    return skeleton_from_points([-1] + list(range(count - 1)), heads, tails)


def random_targets(skeleton, count: int, rng: np.random.Generator) -> list[tuple[float, float, float]]:
    """Tips of random poses (uniformly random rotation per bone): reachable by construction."""
    n = len(skeleton)
    targets = []
    for _ in range(count):
        q = rng.normal(size=(n, 4))
        pose = skeleton.pose_from_local(quaternion_to_matrix(q / np.linalg.norm(q, axis=1)[:, None]))
        targets.append(tuple(pose.tails[n - 1]))
    return targets


def compare(skeleton, targets, settings: SolveSettings) -> list[tuple[str, str, str, str]]:
    """One row per solver: name, median milliseconds per solve, median iterations, share reached."""
    tip = len(skeleton) - 1
    rows = []
    for name, solve in SOLVERS.items():
        times, iterations, reached = [], [], 0
        try:
            for target in targets:
                began = time.perf_counter()
                _, report = solve(skeleton, [Goal(tip, target)], None, settings)
                times.append(time.perf_counter() - began)
                iterations.append(report.iterations)
                reached += report.converged
        except ValueError:
            rows.append((DESCRIPTIONS[name][0], "n/a", "n/a", "n/a"))
            continue
        rows.append((
            DESCRIPTIONS[name][0],
            f"{1000 * statistics.median(times):.3f}",
            f"{statistics.median(iterations):g}",
            f"{reached / len(targets):.1%}",
        ))
    return rows


def main() -> None:
    """Run the comparison on a 10-bone and a 2-bone chain and print markdown tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=200, help="random targets per chain")
    parser.add_argument("--seed", type=int, default=2011)
    parser.add_argument("--max-iterations", type=int, default=SolveSettings().max_iterations)
    args = parser.parse_args()
    settings = SolveSettings(max_iterations=args.max_iterations)
    rng = np.random.default_rng(args.seed)
    print(f"{args.targets} random reachable targets per chain, reach 4, tolerance {settings.tolerance:g}, "
          f"at most {settings.max_iterations} iterations (patience {settings.patience})\n")
    print("| chain | solver | median ms / solve | median iterations | reached |")
    print("|---|---|---:|---:|---:|")
    for bones in (10, 2):
        skeleton = chain(bones)
        targets = random_targets(skeleton, args.targets, rng)
        for label, ms, iterations, reached in compare(skeleton, targets, settings):
            print(f"| {bones} bones | {label} | {ms} | {iterations} | {reached} |")


if __name__ == "__main__":
    main()
