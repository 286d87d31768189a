# SPDX-License-Identifier: GPL-3.0-or-later
"""numpy's BLAS on one thread while a solve runs.

The solver's linear systems are small (a Gram matrix of a few dozen rows
at most). OpenBLAS before 0.3.26 (numpy 1.x's wheels bundle 0.3.23) hands
even those to its pool of threads: on an idle machine that costs a few
times the solve itself, and where another process keeps a core busy each
call waits for a thread, so a frame's solve costs ten times as much. A
solve therefore asks such an OpenBLAS for one thread and gives back the
count it had when it ends (as threadpoolctl does); meanwhile other
threads' BLAS calls run on one thread too. Where numpy uses another BLAS,
a newer OpenBLAS, or none is found, nothing changes.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
import re
from typing import Callable, TypeVar

import numpy

__all__ = ["on_one_thread", "version_of"]

#: The symbol names OpenBLAS builds give their functions: (prefix, suffix) around "_get_num_threads" and the
#: others (numpy 1.x wheels: "openblas", "64_"; 2.x: "scipy_openblas").
_NAMES = [(prefix, suffix) for prefix in ("scipy_openblas", "openblas") for suffix in ("64_", "_64_", "")]
#: From this OpenBLAS on, a solve of the sizes here runs on one thread by itself.
ONE_THREAD_FROM = (0, 3, 26)

F = TypeVar("F", bound=Callable)

#: numpy's OpenBLAS thread count's getter and setter where a solve should hold it to one; False where not (none
#: found, or one that keeps small solves on one thread itself); None until looked for.
_held: tuple[Callable[[], int], Callable[[int], None]] | bool | None = None


def version_of(config: str) -> tuple[int, ...] | None:
    """The version in OpenBLAS's configuration string ("OpenBLAS 0.3.23.dev ..."), None where it has none."""
    found = re.match(r"\s*OpenBLAS\s+(\d+)\.(\d+)\.(\d+)", config)
    return tuple(int(part) for part in found.groups()) if found else None


def _libraries() -> list:
    """The libraries numpy's linear algebra may take its BLAS from: its own module (looking a name up there
    searches what it links, so it finds exactly the BLAS it uses; Linux and macOS), then the OpenBLAS its wheel
    ships beside it (Windows, where a lookup does not search what a library links)."""
    found = []
    try:
        found.append(ctypes.CDLL(numpy.linalg._umath_linalg.__file__))
    except (AttributeError, OSError):
        pass
    here = os.path.dirname(numpy.__file__)
    for folder in (os.path.join(here, ".libs"), os.path.join(here, ".dylibs"), here + ".libs"):
        for path in sorted(glob.glob(os.path.join(glob.escape(folder), "*openblas*"))):
            try:
                found.append(ctypes.CDLL(path))
            except OSError:
                pass
    return found


def _thread_functions() -> tuple[Callable[[], int], Callable[[int], None]] | bool:
    """numpy's OpenBLAS thread count's getter and setter, or False where a solve need not hold it (`_held`)."""
    for library in _libraries():
        for prefix, suffix in _NAMES:
            get = getattr(library, f"{prefix}_get_num_threads{suffix}", None)
            set_ = getattr(library, f"{prefix}_set_num_threads{suffix}", None)
            config = getattr(library, f"{prefix}_get_config{suffix}", None)
            if get is None or set_ is None:
                continue
            version = None
            if config is not None:
                config.restype = ctypes.c_char_p
                version = version_of((config() or b"").decode("ascii", "replace"))
            return (get, set_) if version is None or version < ONE_THREAD_FROM else False
    return False


def _looked_up() -> tuple[Callable[[], int], Callable[[int], None]] | bool:
    """`_thread_functions`, looked for once."""
    global _held
    if _held is None:
        try:
            _held = _thread_functions()
        except Exception:  # (a library that will not load or answer: leave the BLAS as it is)
            _held = False
    return _held


def on_one_thread(function: F) -> F:
    """`function`, run with numpy's OpenBLAS on one thread where it needs holding, then given back its count."""

    @functools.wraps(function)
    def run(*args, **kwargs):
        held = _looked_up()
        if not held:
            return function(*args, **kwargs)
        get, set_ = held
        before = get()
        if before <= 1:  # (one already, or a solve inside a solve)
            return function(*args, **kwargs)
        set_(1)
        try:
            return function(*args, **kwargs)
        finally:
            set_(before)

    return run  # type: ignore[return-value]
