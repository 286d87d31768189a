# SPDX-License-Identifier: GPL-3.0-or-later
"""numpy's BLAS on one thread while a solve runs, and its thread count given back after, whatever happens."""

from __future__ import annotations

import numpy as np
import pytest

from fabrik_addon.core import Goal, SolveSettings, blas, plan as plan_module, quat
from fabrik_addon.core.plan import plan_for
from skeletons import straight_chain


def built_with_openblas() -> bool:
    """Whether numpy says it was built with OpenBLAS (the pinned wheels are)."""
    dependencies = getattr(np.__config__, "CONFIG", {}).get("Build Dependencies", {})
    return "openblas" in str(dependencies.get("blas", {}).get("name", "")).lower()


def test_numpys_openblas_is_found():
    if not built_with_openblas():
        pytest.skip("numpy here is built with another BLAS: there is no thread pool to hold")
    assert blas.threads() is not None and blas.threads() >= 1


def chain_and_start():
    """A 3-bone chain, its plan, a goal and the plan's start from rest."""
    skeleton = straight_chain(3)
    goal = Goal(2, (0.8, 0.4, 1.6))
    plan = plan_for(skeleton, [goal])
    rest = [tuple(quat.from_matrix(m)) for m in skeleton.local_rotations(skeleton.rest_pose())]
    start = plan.start(rest, [None] * len(plan.bones), [None] * len(plan.bones), skeleton.rest_pose)
    return plan, goal, start


def test_a_solve_runs_on_one_thread_and_gives_the_count_back(monkeypatch):
    before = blas.threads()
    if before is None or before <= 1:
        pytest.skip(f"OpenBLAS runs {before or 'no'} thread pool here: nothing to hold")
    plan, goal, start = chain_and_start()
    seen = []
    checked = plan_module.validate_goals
    monkeypatch.setattr(plan_module, "validate_goals", lambda *a: seen.append(blas.threads()) or checked(*a))
    outcome = plan.solve([goal], start, SolveSettings())
    assert outcome.report.converged and seen == [1]
    assert blas.threads() == before

    def refuse(*_args):
        seen.append(blas.threads())
        raise ValueError("refused")

    monkeypatch.setattr(plan_module, "validate_goals", refuse)
    with pytest.raises(ValueError, match="refused"):
        plan.solve([goal], start, SolveSettings())
    assert seen == [1, 1] and blas.threads() == before
