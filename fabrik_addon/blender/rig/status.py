# SPDX-License-Identifier: GPL-3.0-or-later
"""What the last solve of each rig did, in the user's words: for the panel, the overlay and the reports."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

from ...core import Goal, SolveReport
from ...core.model.problem import goal_reached, turned_off
from ...core.model.tree import MovingTree, chain_reach
from . import memory

#: How an effector's line begins when it is switched off (its checkbox, or the rig's switch): not a fault.
DISABLED = "disabled"


def switched_off(line: str) -> bool:
    """Whether an effector's status line says it is switched off rather than what is wrong with it."""
    return line.startswith(DISABLED)


@dataclass
class RigStatus:
    """What the last solve of one rig did, for the panel (in memory, never in the file): the input is wrong (`ok`
    False, the message says what), the solve stopped short of a target (`missed`), or every effector reached."""

    message: str = ""
    ok: bool = True
    #: Per effector index: a short status line.
    effectors: dict[int, str] = field(default_factory=dict)
    #: Per effector index that was solved: whether it reached its target (others could not be solved).
    reached: dict[int, bool] = field(default_factory=dict)
    report: SolveReport | None = None
    #: Per effector index that was solved: how far its tip ended from its target.
    misses: dict[int, float] = field(default_factory=dict)
    #: Wall time of the last solve including reading and writing the pose, in seconds.
    seconds: float = 0.0
    #: Of that, the solver's own (the plan's solve, without reading and writing), in seconds.
    solver_seconds: float = 0.0

    @property
    def missed(self) -> bool:
        """True when the solve ran but stopped short of some target: a warning, not success."""
        return self.ok and not all(self.reached.values())

    def kind(self, index: int) -> str:
        """One effector's state: 'REACHED', 'MISSED', 'ERROR' (it could not be solved, or the rig could not),
        'DISABLED' (switched off, by its checkbox or by the rig's switch) or 'NONE' (not solved yet)."""
        if index in self.reached:
            return 'REACHED' if self.reached[index] else 'MISSED'
        if switched_off(self.effectors.get(index, "")):
            return 'DISABLED'
        if index in self.effectors or not self.ok:
            return 'ERROR'
        return 'NONE'


class DeferredStatus(RigStatus):
    """A status put into words when first read: live playback solves a frame many times a second, the panel
    reads the status a few times. `conclude` makes the status; what is set on this one before (the report, the
    time) stays."""

    def __init__(self, conclude: Callable[[], RigStatus]) -> None:
        self.__dict__["_conclude"] = conclude

    def __getattribute__(self, name: str):
        # (every read, fields with a class default too: the first one concludes)
        values = object.__getattribute__(self, "__dict__")
        conclude = values.pop("_conclude", None)
        if conclude is not None:
            for key, value in conclude().__dict__.items():
                values.setdefault(key, value)
        return object.__getattribute__(self, name)


#: Why a solve stopped short, in the user's words.
STOPPED_BY = {
    "unreachable": "target out of reach",
    "stalled": "stuck: no pose nearby gets closer",
    "max_iterations": "iteration cap hit",
}


def concluded(
    result: RigStatus,
    tree: MovingTree,
    goals: Sequence[Goal],
    used: Sequence[int],
    report: SolveReport,
    tolerance: float,
    limit_problems: Sequence[str],
    began: float,
) -> RigStatus:
    """`result` (the effectors' problems in it already) with a solve's report put into words, per effector (the
    goals of the effectors `used`, on the plan's tree) and as a whole."""
    why = STOPPED_BY.get(report.stopped_by, report.stopped_by)
    for k, index in enumerate(used):
        miss = report.errors[k]
        angle = report.rotation_errors[k] if k < len(report.rotation_errors) else 0.0
        goal = goals[k]
        span = chain_reach(tree, tree.goal_chain[k])  # (a rotation goal's angle counts as a distance at it)
        turned = turned_off(goal, angle, span, tolerance)
        result.reached[index] = goal_reached(goal, miss, angle, span, tolerance)
        result.misses[index] = miss
        if result.reached[index]:
            result.effectors[index] = f"reached (miss {miss:.2g})"
        elif turned and miss <= tolerance:
            result.effectors[index] = f"turned {math.degrees(angle):.2g}\u00b0 off: {why}"
        else:
            result.effectors[index] = f"misses by {miss:.2g}: {why}"
    result.report = report
    if report.converged:
        result.message = f"reached, {report.iterations} iterations"
    else:
        result.message = f"missed by {report.max_error:.2g} ({why}), {report.iterations} iterations"
    if report.jumped:  # (no pose near the last frame's reaches: the nearest one that does is far from it)
        result.message += "; jumped to another pose"
    if limit_problems:
        result.ok = False
        result.message = "; ".join(limit_problems)
    result.seconds = time.perf_counter() - began
    return result


def say_influence(result: RigStatus, influence: Sequence[float]) -> None:
    """Add to the rig's status that the pose on screen is blended with FK (so a tip off its target is no miss)."""
    result.message += f" (influence {min(influence):.0%}" + (
        f" to {max(influence):.0%})" if max(influence) > min(influence) else ")"
    )


def show(obj_name: str, status: RigStatus | None) -> RigStatus | None:
    """Keep a rig's status, for the panel and the overlay (None: the rig shows none)."""
    memory.of(obj_name).status = status
    return status


class _Statuses(Mapping):
    """The last status of each rig that has one, by rig name (read only: `show` sets one)."""

    def __getitem__(self, name: str) -> RigStatus:
        kept = memory.get(name)
        if kept is None or kept.status is None:
            raise KeyError(name)
        return kept.status

    def __iter__(self) -> Iterator[str]:
        return iter([name for name in memory.names() if memory.get(name).status is not None])

    def __len__(self) -> int:
        return sum(1 for _ in self)


#: The last status of each rig, by name.
statuses = _Statuses()
