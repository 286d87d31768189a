# SPDX-License-Identifier: GPL-3.0-or-later
"""numpy's OpenBLAS on one thread while a solve runs (where its version needs holding), and its thread count
given back after, whatever happens."""

from __future__ import annotations

import numpy as np
import pytest
from skeletons import straight_chain

from fabrik_addon.core import Goal, SolveSettings
from fabrik_addon.core.math import blas, quat
from fabrik_addon.core.model.tree import Start
from fabrik_addon.core.solving import many_frames
from fabrik_addon.core.solving import plan as plan_module
from fabrik_addon.core.solving.plan import plan_for


def numpys_blas() -> dict | None:
    """What numpy says of the BLAS it was built with (name, version), None where it does not say (before 1.26)."""
    config = getattr(np.__config__, "CONFIG", None)
    return None if config is None else config.get("Build Dependencies", {}).get("blas", {})


def threads() -> int | None:
    """How many threads numpy's OpenBLAS runs now, where a solve holds it to one; else None."""
    held = blas._looked_up()
    return held[0]() if held else None


def test_openblas_versions_are_read_from_its_configuration():
    """The version in OpenBLAS's configuration string decides whether a solve holds its threads."""
    assert blas.version_of("OpenBLAS 0.3.23.dev  USE64BITINT DYNAMIC_ARCH") == (0, 3, 23)
    assert blas.version_of("OpenBLAS 0.3.29 DYNAMIC_ARCH NO_AFFINITY") == (0, 3, 29)
    assert blas.version_of("MKL 2024") is None
    assert blas.version_of("OpenBLAS 0.3.23") < blas.ONE_THREAD_FROM <= blas.version_of("OpenBLAS 0.3.26")


def test_numpys_openblas_is_held_exactly_where_its_version_needs_it():
    """numpy's own OpenBLAS is found where it is one that hands small solves to its threads, and left alone
    where it is newer or another BLAS."""
    dependency = numpys_blas()
    if dependency is None:
        pytest.skip("numpy before 1.26 does not say which BLAS it was built with")
    version = blas.version_of(f"OpenBLAS {dependency.get('version', '')}")
    if "openblas" in str(dependency.get("name", "")).lower() and version is not None and version < blas.ONE_THREAD_FROM:
        assert threads() is not None and threads() >= 1
    else:
        assert threads() is None


@pytest.fixture
def a_pool_of_two():
    """numpy's OpenBLAS with two threads for the test, and its own count after."""
    if threads() is None:
        pytest.skip("numpy's BLAS here keeps small solves on one thread itself: nothing to hold")
    get, set_ = blas._held
    before = get()
    set_(2)
    if get() != 2:
        set_(before)
        pytest.skip("this OpenBLAS was built for one thread")
    yield
    set_(before)


def chain_plan():
    """A free 3-bone chain, its plan, a goal and the plan's start from rest."""
    skeleton = straight_chain(3)
    goal = Goal(2, (0.8, 0.4, 1.6))
    plan = plan_for(skeleton, [goal])
    rest = [tuple(quat.from_matrix(m)) for m in skeleton.local_rotations(skeleton.rest_pose())]
    start = plan.start(rest, [None] * len(plan.bones), [None] * len(plan.bones), skeleton.rest_pose)
    return skeleton, plan, goal, start


def test_a_solve_runs_on_one_thread_and_gives_the_count_back(a_pool_of_two, monkeypatch):
    """One frame's solve sees one thread; after it, and after one that raises, the pool has its two again."""
    _, plan, goal, start = chain_plan()
    seen = []
    checked = plan_module.validate_goals
    monkeypatch.setattr(plan_module, "validate_goals", lambda *a: seen.append(threads()) or checked(*a))
    outcome = plan.solve([goal], start, SolveSettings())
    assert outcome.report.converged and seen == [1]
    assert threads() == 2

    def refuse(*_args):
        seen.append(threads())
        raise ValueError("refused")

    monkeypatch.setattr(plan_module, "validate_goals", refuse)
    with pytest.raises(ValueError, match="refused"):
        plan.solve([goal], start, SolveSettings())
    assert seen == [1, 1] and threads() == 2


def test_frames_solved_together_run_on_one_thread_too(a_pool_of_two, monkeypatch):
    """Many frames' solve sees one thread, as each frame's does (one thread and two round differently)."""
    skeleton, plan, goal, _ = chain_plan()
    seen = []
    checked = many_frames.validate_goals
    monkeypatch.setattr(many_frames, "validate_goals", lambda *a: seen.append(threads()) or checked(*a))
    rest = skeleton.rest_pose()
    count, bones = 4, plan.bones
    targets = np.tile(np.array(goal.target), (count, 1, 1))
    heads, frames = np.tile(rest.heads[bones], (count, 1, 1)), np.tile(rest.frames[bones], (count, 1, 1, 1))
    solved = many_frames.solve_rows(
        plan, [goal], targets, heads, frames, {}, SolveSettings(), lambda f: Start.of_pose(skeleton, plan.tree, rest)
    )
    assert seen == [1] and threads() == 2
    assert np.allclose(solved.errors, 0.0, atol=1e-3)
