# SPDX-License-Identifier: GPL-3.0-or-later
"""When an iterative solve stops, and which of its iterations it keeps: the rules every solver here follows.

After each iteration the solve stops

- **converged**: every goal is reached (its tip within the tolerance, and a
  full-weight rotation goal within it at its chain's reach);
- **stalled**: `patience` iterations in a row have not lowered the summed
  error by `stall_fraction` of the best so far;
- **handover**: where another method finishes what this one starts: with a
  `window`, once the least error of the goals that pull has not halved over
  that many iterations; with `halving`, at the first iteration that does not
  halve the best error;
- **max_iterations**: at the iteration cap.

The iteration with the least summed error is the one kept. `iterate` is the
loop that applies these rules to a solver's own iterations (FABRIK's, and the
comparison solvers'); `StoppingRows` applies the same rules to many frames at
once, each on its own. The refinement (`refine`) and settling (`settle`) judge
their steps by the same rules with their own stall fraction and patience; the
refinement is Levenberg-Marquardt, whose undone step (`Stopping.undone`) is no
iteration without progress, and which stalls at its own dead end.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol

import numpy as np

from .problem import SolveSettings

__all__ = ["Budget", "Iterations", "Stopping", "StoppingRows", "iterate", "unreached"]


class Budget:
    """The iterations one solve may spend, carried from stage to stage: the cap covers them all."""

    __slots__ = ("cap", "used")

    def __init__(self, cap: int) -> None:
        self.cap, self.used = cap, 0

    @property
    def left(self) -> int:
        """What the stages still to run may spend."""
        return max(0, self.cap - self.used)

    @property
    def spent(self) -> bool:
        """Whether nothing is left."""
        return self.used >= self.cap

    def spend(self, iterations: int) -> None:
        """Count a stage's iterations."""
        self.used += iterations

    def settings(self, settings: SolveSettings) -> SolveSettings:
        """The settings with what is left as their cap, for a stage that takes settings (the same settings where
        that is their own cap: a live frame's first stage)."""
        left = self.left
        return settings if left == settings.max_iterations else replace(settings, max_iterations=left)

    def why(self) -> str:
        """Why a solve that did not converge stopped: the cap, or else a stall."""
        return unreached(self.used, self.cap)


class Stopping:
    """The stopping rules (see the module) for one solve that starts at `error` (summed over its goals) and
    `pulling` (summed over the goals of some weight: the window's measure; the same as `error` by default)."""

    __slots__ = (
        "cap", "fraction", "patience", "best", "without", "window", "history", "halving", "iterations", "going",
        "stopped_by",
    )

    def __init__(
        self, settings: SolveSettings | None, error: float, pulling: float | None = None, window: int = 0,
        halving: bool = False, cap: int | None = None, fraction: float | None = None, patience: int | None = None,
    ) -> None:
        # (the settings' cap and stall rule, or a method's own: the refinement and settling weigh progress
        # by a squared error, and their steps are dearer than FABRIK's iterations)
        self.cap = settings.max_iterations if cap is None else cap
        self.fraction = settings.stall_fraction if fraction is None else fraction
        self.patience = settings.patience if patience is None else patience
        self.best = error
        self.without = 0
        self.window = window
        self.history = [error if pulling is None else pulling]
        self.halving = halving
        self.iterations = 0
        #: Whether the solve goes on, and why it stopped ("max_iterations" until another rule stops it).
        self.going = self.cap > 0
        self.stopped_by = "max_iterations"

    def undone(self) -> None:
        """Count an iteration whose step was undone (the refinement's: it raises its damping and tries again), which
        is no iteration without progress but counts against the window and the cap."""
        self.iterations += 1
        if self.window:
            history = self.history
            history.append(history[-1])
            if self.iterations >= self.window and history[-1] > 0.5 * history[self.iterations - self.window]:
                self.going, self.stopped_by = False, "handover"
                return
        if self.iterations >= self.cap:
            self.going = False

    def stall(self) -> None:
        """Stop as stalled (a method's own dead end: no step of any length helps)."""
        self.going, self.stopped_by = False, "stalled"

    def judge(self, error: float, reached: bool, pulling: float | None = None) -> bool:
        """Take one iteration's summed error; whether it is the best so far (the solve keeps it). `going` then
        says whether the solve goes on, `stopped_by` why it stopped."""
        self.iterations += 1
        if reached:
            self.going, self.stopped_by = False, "converged"
            return True
        if self.halving and error > 0.5 * self.best:
            self.going, self.stopped_by = False, "handover"
            return False
        improved = error < self.best * (1.0 - self.fraction)
        if improved:
            self.best, self.without = error, 0
        else:
            self.without += 1
            if self.without >= self.patience:
                self.going, self.stopped_by = False, "stalled"
                return False
        if self.window:
            history = self.history
            history.append(min(history[-1], error if pulling is None else pulling))
            if self.iterations >= self.window and history[-1] > 0.5 * history[self.iterations - self.window]:
                self.going, self.stopped_by = False, "handover"
                return improved
        if self.iterations >= self.cap:
            self.going = False
        return improved


def unreached(used: int, budget: int) -> str:
    """Why a solve of several stages that did not converge stopped: its iteration cap, or else a stall."""
    return "max_iterations" if used >= budget else "stalled"


class Iterations(Protocol):
    """What `iterate` drives: a solver's iterations on its working state."""

    def step(self, reach: float) -> tuple[float, bool, float]:
        """One iteration, aiming `reach` of the way from the tips to the targets (1: all of it); then (the summed
        error, whether every goal is reached, the summed error of the goals that pull)."""

    def snapshot(self) -> object:
        """What `restore` goes back to."""

    def restore(self, snapshot: object) -> None:
        """Go back to a snapshot."""


def iterate(iterations: Iterations, stopping: Stopping, careful: bool = False) -> None:
    """Run a solver's iterations until `stopping` says so, and leave the best of them in its state; a `careful`
    descent undoes an iteration that is not the best and tries again reaching half as far."""
    best = iterations.snapshot()
    reach = 1.0
    while stopping.going:
        error, reached, pulling = iterations.step(reach)
        if stopping.judge(error, reached, pulling):
            if not stopping.going:
                return  # (the last iteration is the best: it stays)
            best = iterations.snapshot()
            reach = min(1.0, 2.0 * reach)
        elif careful and stopping.going:
            iterations.restore(best)
            reach *= 0.5
    iterations.restore(best)


class StoppingRows:
    """`Stopping` for F frames solved together: each frame stops by the same rules, on its own (no `halving`).

    `errors` and `pulling` are each frame's starting sums (F,); frames in
    `done` are not iterated at all.
    """

    def __init__(
        self, settings: SolveSettings, errors: np.ndarray, pulling: np.ndarray, done: np.ndarray, window: int = 0
    ) -> None:
        count = len(errors)
        self.tolerance = settings.tolerance
        self.cap = settings.max_iterations
        self.fraction, self.patience = settings.stall_fraction, settings.patience
        self.best = np.asarray(errors, dtype=float).copy()
        self.without = np.zeros(count, dtype=int)
        self.window = window
        #: Per iteration, each frame's least error of the goals that pull so far (for the window).
        self.history = [np.asarray(pulling, dtype=float).copy()]
        self.done = np.asarray(done, dtype=bool).copy()
        self.converged = np.zeros(count, dtype=bool)
        self.iterations = np.zeros(count, dtype=int)
        self._iteration = 0

    def next(self) -> np.ndarray:
        """The frames the next iteration runs on (empty: every frame has stopped)."""
        if self._iteration >= self.cap:
            return np.zeros(0, dtype=int)
        self._iteration += 1
        return np.flatnonzero(~self.done)

    def judge(
        self, active: np.ndarray, errors: np.ndarray, reached: np.ndarray, pulling: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Take the summed errors (and the pulling goals' sums) of the frames the iteration ran on; (the frames
        whose iteration is their best so far, the frames that go on from a worse one), as indices."""
        iteration = self._iteration
        self.iterations[active] = iteration
        improved = ~reached & (errors < self.best[active] * (1.0 - self.fraction))
        taken = active[reached | improved]
        better = active[improved]
        self.best[better] = errors[improved]
        self.without[better] = 0
        self.converged[active[reached]] = self.done[active[reached]] = True
        stuck = active[~reached & ~improved]
        self.without[stuck] += 1
        self.done[stuck[self.without[stuck] >= self.patience]] = True
        if self.window:
            going = ~self.done[active]
            history = self.history[-1].copy()
            history[active[going]] = np.minimum(history[active[going]], pulling[going])
            self.history.append(history)
            if iteration >= self.window:
                moving = active[going]
                self.done[moving[history[moving] > 0.5 * self.history[iteration - self.window][moving]]] = True
        return taken, stuck[~self.done[stuck]]
