# SPDX-License-Identifier: GPL-3.0-or-later
"""numpy's BLAS on one thread while a solve runs.

The solver's linear systems are small (a Gram matrix of a few dozen rows
at most). OpenBLAS, which numpy's wheels (and Blender's numpy) bundle,
still hands each solve of them to its pool of threads: on an idle machine
that costs several times the solve itself, and where another process or
Blender's own threads keep a core busy, each call waits for a thread and a
frame's solve costs ten times as much. A solve therefore asks OpenBLAS for
one thread and gives back the number it had when it ends. Where numpy uses
another BLAS (or none is found), nothing changes.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
import sys
from contextlib import contextmanager
from typing import Callable, Iterator, TypeVar

__all__ = ["on_one_thread", "one_thread", "threads"]

#: The symbol names OpenBLAS builds give their thread count's getter and setter: (prefix, suffix) around
#: "_get_num_threads" / "_set_num_threads" (numpy 1.x wheels: "openblas", "64_"; 2.x: "scipy_openblas").
_NAMES = [(prefix, suffix) for prefix in ("scipy_openblas", "openblas") for suffix in ("64_", "_64_", "")]

F = TypeVar("F", bound=Callable)

#: The thread count's getter and setter once looked for; False where none was found.
_found: tuple[Callable[[], int], Callable[[int], None]] | bool | None = None


def _candidates() -> list[str]:
    """Paths of the OpenBLAS libraries numpy may have loaded: the ones its wheel ships beside it first, then
    (Linux) the ones the process has mapped (a numpy built against the system's)."""
    import numpy

    here = os.path.dirname(numpy.__file__)
    paths = []
    for folder in (os.path.join(here, ".libs"), os.path.join(here, ".dylibs"), here + ".libs"):
        paths += sorted(glob.glob(os.path.join(folder, "*openblas*")))
    if sys.platform.startswith("linux"):
        try:
            with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
                paths += [line.split(maxsplit=5)[-1].strip() for line in maps if "openblas" in line.lower()]
        except OSError:
            pass
    return [path for path in dict.fromkeys(paths) if os.path.isfile(path)]


def _thread_count() -> tuple[Callable[[], int], Callable[[int], None]] | bool:
    """OpenBLAS's thread count's getter and setter, or False where numpy's BLAS is not an OpenBLAS found."""
    for path in _candidates():
        try:
            library = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix, suffix in _NAMES:
            get = getattr(library, f"{prefix}_get_num_threads{suffix}", None)
            set_ = getattr(library, f"{prefix}_set_num_threads{suffix}", None)
            if get is not None and set_ is not None:
                return get, set_
    return False


def _looked_up() -> tuple[Callable[[], int], Callable[[int], None]] | bool:
    """`_thread_count`, looked for once."""
    global _found
    if _found is None:
        try:
            _found = _thread_count()
        except Exception:  # (a library that will not load or answer: leave the BLAS as it is)
            _found = False
    return _found


def threads() -> int | None:
    """How many threads OpenBLAS runs now; None where numpy's BLAS is not an OpenBLAS found."""
    found = _looked_up()
    return found[0]() if found else None


@contextmanager
def one_thread() -> Iterator[None]:
    """Run the block with OpenBLAS on one thread, then give it back the count it had."""
    found = _looked_up()
    if not found:
        yield
        return
    get, set_ = found
    before = get()
    if before <= 1:
        yield
        return
    set_(1)
    try:
        yield
    finally:
        set_(before)


def on_one_thread(function: F) -> F:
    """`function`, run with OpenBLAS on one thread (`one_thread`)."""

    @functools.wraps(function)
    def run(*args, **kwargs):
        with one_thread():
            return function(*args, **kwargs)

    return run  # type: ignore[return-value]
