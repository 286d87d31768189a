# SPDX-License-Identifier: GPL-3.0-or-later
"""Contacts: the frames where a foot (or a hand) is planted, found in its motion.

A point is planted where it moves less than a speed a frame and stays
within a height of the lowest it reaches (world Z up). Runs of planted
frames shorter than a few frames are passing touches, not contacts. Where
the runs lie decides the pins' ranges; the blends in and out of each pin
share the frames between two contacts, so one pin has let go before the
next begins.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["BLEND", "Contact", "HEIGHT", "SHORTEST", "SPEED", "blends", "find"]

#: What a contact is by default: slower than this share of the chain's (or leg's) length a frame, within this
#: share of it of the lowest it goes, for at least this many frames; a pin takes hold and lets go over this many.
SPEED, HEIGHT, SHORTEST, BLEND = 0.01, 0.05, 4, 2


class Contact(NamedTuple):
    """A run of planted frames: the indices of its first and last sample."""

    first: int
    last: int


def find(points: np.ndarray, speed: float, height: float, shortest: int = 3) -> list[Contact]:
    """The contacts of a point sampled once a frame (`points`: (F, 3)): runs of at least `shortest` frames where it
    moves at most `speed` a frame and stays within `height` of its lowest."""
    points = np.asarray(points, dtype=float)
    if points.ndim != 2 or points.shape[1] != 3:
        raise ValueError("points must be one 3D point per frame")
    if not (np.isfinite(speed) and np.isfinite(height) and speed >= 0.0 and height >= 0.0):
        raise ValueError("the speed and height must be numbers of 0 or more")
    count = len(points)
    if count == 0 or not np.isfinite(points).all():
        return []
    steps = np.linalg.norm(np.diff(points, axis=0), axis=1)
    moving = np.full(count, np.inf)
    if count > 1:
        moving[:-1] = steps
        moving[1:] = np.minimum(moving[1:], steps)
    planted = (moving <= speed) & (points[:, 2] <= points[:, 2].min() + height)
    found, begun = [], None
    for i, flag in enumerate(planted.tolist() + [False]):
        if flag and begun is None:
            begun = i
        elif not flag and begun is not None:
            if i - begun >= max(1, shortest):
                found.append(Contact(begun, i - 1))
            begun = None
    return found


def blends(contacts: list[Contact], blend: int, count: int) -> list[tuple[int, int]]:
    """Per contact, its blend in and blend out in frames (at most `blend`, at least 1), cut so that no blend
    reaches before the first sample (`count` samples), past the last, or into the neighbouring contact's blend."""
    out = []
    for k, contact in enumerate(contacts):
        before = contact.first if k == 0 else (contact.first - contacts[k - 1].last) // 2
        after = count - 1 - contact.last if k == len(contacts) - 1 else (
            contacts[k + 1].first - contact.last - 1) // 2
        out.append((max(1, min(blend, before)), max(1, min(blend, after))))
    return out
