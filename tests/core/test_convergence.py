# SPDX-License-Identifier: GPL-3.0-or-later
"""The solver comparison: error curves from one start pose, and their plot."""

from __future__ import annotations

import numpy as np
import pytest
from skeletons import straight_chain

from fabrik_addon.core import Pose
from fabrik_addon.core.model.problem import Goal, SolveSettings
from fabrik_addon.core.solving.convergence import COLOURS, COMPARED, error_curves, plot_rgba, reached_at

SETTINGS = SolveSettings(tolerance=1e-4)
ITERATIONS = 20


@pytest.fixture(scope="module")
def curves() -> dict[str, list[float]]:
    """Curves of the four compared solvers for a reachable target of a bent 5-bone chain."""
    skeleton = straight_chain(5)
    start = skeleton.pose_from_local(np.stack([_turn_x(0.2)] * 5))  # bent a little: the Jacobians are not singular
    return error_curves(skeleton, [Goal(4, (2.0, 0.5, 3.0))], start, SETTINGS, iterations=ITERATIONS)


def _turn_x(angle: float) -> np.ndarray:
    """A rotation matrix about X."""
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def test_every_solver_has_a_point_per_iteration(curves):
    assert list(curves) == list(COMPARED)
    assert all(len(curve) == ITERATIONS + 1 for curve in curves.values())


def test_curves_start_at_the_same_error(curves):
    starts = [curve[0] for curve in curves.values()]
    assert starts[0] > 1.0
    assert np.allclose(starts, starts[0])


def test_fabrik_reaches_the_target_within_a_few_iterations(curves):
    reached = reached_at(curves["FABRIK"], SETTINGS.tolerance)
    assert reached is not None and reached <= 8


def test_curves_never_rise(curves):
    # Every solver keeps its best pose, so a higher iteration cap never returns a worse one.
    for name, curve in curves.items():
        assert all(b <= a + 1e-12 for a, b in zip(curve, curve[1:])), name


def test_a_solver_that_cannot_take_the_rig_gets_an_empty_curve():
    skeleton = straight_chain(4)
    out = error_curves(skeleton, [Goal(3, (1.0, 0.0, 2.0))], None, SETTINGS, solvers=("TWO_BONE",), iterations=3)
    assert out == {"TWO_BONE": []}


def test_start_pose_is_not_changed():
    skeleton = straight_chain(3)
    start = skeleton.rest_pose()
    before = start.copy()
    error_curves(skeleton, [Goal(2, (1.0, 0.0, 2.0))], start, SETTINGS, iterations=3)
    assert isinstance(start, Pose)
    for name in vars(before):
        assert np.array_equal(getattr(before, name), getattr(start, name)), name


def test_reached_at():
    assert reached_at([1.0, 0.1, 1e-5, 1e-6], 1e-4) == 2
    assert reached_at([1.0, 0.5], 1e-4) is None


def test_plot_shape_dtype_and_colours(curves):
    image = plot_rgba(curves, 320, 200, SETTINGS.tolerance)
    assert image.shape == (200, 320, 4) and image.dtype == np.float32
    assert np.all(image[..., 3] == 1.0) and np.all((image >= 0.0) & (image <= 1.0))
    pixels = image[..., :3].reshape(-1, 3)
    for name in COMPARED:
        count = np.sum(np.all(np.isclose(pixels, COLOURS[name]), axis=1))
        assert count > 36, name  # more than its legend box: the curve is drawn too


def test_plot_of_nothing_is_still_an_image():
    image = plot_rgba({"FABRIK": []}, 64, 48)
    assert image.shape == (48, 64, 4)
    assert np.all(np.isfinite(image))
