# SPDX-License-Identifier: GPL-3.0-or-later
"""The skeleton model: validation, forward kinematics, and the core's independence from Blender."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from skeletons import random_rotations, skeletons

from fabrik_addon.core import Skeleton, skeleton_from_points

ROOT = Path(__file__).resolve().parents[2]


def test_core_never_imports_blender():
    """`core` imports and solves in a process where bpy and mathutils cannot be imported."""
    script = (
        "import sys\n"
        "sys.modules['bpy'] = None\n"
        "sys.modules['mathutils'] = None\n"
        "from fabrik_addon.core import Goal, skeleton_from_points, solve\n"
        "sk = skeleton_from_points([-1, 0], [(0, 0, 0), (0, 0, 1)], [(0, 0, 1), (0, 0, 2)])\n"
        "pose, report = solve(sk, [Goal(1, (1.0, 0.0, 1.0))])\n"
        "assert report.converged, report\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('bpy', 'mathutils') and sys.modules[m])\n"
        "print('loaded:', loaded)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "loaded: []"


def test_core_sources_do_not_mention_bpy_or_mathutils():
    """No module in core imports Blender, not even lazily inside a function."""
    for path in (ROOT / "fabrik_addon" / "core").glob("*.py"):
        text = path.read_text()
        assert not re.search(r"^\s*(import|from)\s+(bpy|mathutils)\b", text, re.M), path.name


def chain_arrays(n=3):
    """Parents, heads, frames and lengths of a straight chain along +Z."""
    sk = skeleton_from_points([-1] + list(range(n - 1)), [(0, 0, i) for i in range(n)], [(0, 0, i + 1) for i in range(n)])
    return list(sk.parents), sk.rest_heads.copy(), sk.rest_frames.copy(), sk.lengths.copy()


def test_cycles_are_refused_and_named():
    """A parent loop names the bones in it."""
    parents, heads, frames, lengths = chain_arrays()
    parents[0] = 2
    with pytest.raises(ValueError, match="cycle: bone0 -> bone2 -> bone1 -> bone0|cycle"):
        Skeleton(parents, heads, frames, lengths)


def test_self_parent_and_bad_index_are_refused():
    """A bone cannot be its own parent, nor have a parent outside the skeleton."""
    parents, heads, frames, lengths = chain_arrays()
    with pytest.raises(ValueError, match="its own parent"):
        Skeleton([0, 0, 1], heads, frames, lengths)
    with pytest.raises(ValueError, match="outside"):
        Skeleton([-1, 0, 5], heads, frames, lengths)


def test_zero_length_bones_are_refused():
    """Zero length (Blender deletes such bones) is refused with the bone's name."""
    parents, heads, frames, lengths = chain_arrays()
    lengths[1] = 0.0
    with pytest.raises(ValueError, match="'bone1' has zero length"):
        Skeleton(parents, heads, frames, lengths)
    with pytest.raises(ValueError, match="zero length"):
        skeleton_from_points([-1], [(1, 1, 1)], [(1, 1, 1)])


@pytest.mark.parametrize("field", ["heads", "frames", "lengths"])
def test_nan_is_refused(field):
    """NaN anywhere in the rest data is refused with the bone's name."""
    parents, heads, frames, lengths = chain_arrays()
    {"heads": heads, "frames": frames, "lengths": lengths}[field].reshape(-1)[2] = np.nan
    with pytest.raises(ValueError, match="not a finite number"):
        Skeleton(parents, heads, frames, lengths)


def test_mismatched_sizes_are_refused():
    """Arrays of different lengths are a clear error, not an IndexError later."""
    parents, heads, frames, lengths = chain_arrays()
    with pytest.raises(ValueError, match="disagree in size"):
        Skeleton(parents, heads[:2], frames, lengths)


@settings(max_examples=60, deadline=None)
@given(skeletons(max_bones=10, trees=True, offsets=True, roots=2))
def test_forward_kinematics_and_local_rotations_are_inverse(skeleton):
    """pose_from_local(local_rotations(pose)) gives the pose back, and rest is identity everywhere."""
    np.testing.assert_allclose(skeleton.local_rotations(skeleton.rest_pose()), np.broadcast_to(np.eye(3), (len(skeleton), 3, 3)), atol=1e-12)
    local = random_rotations(np.random.default_rng(len(skeleton)), len(skeleton))
    pose = skeleton.pose_from_local(local)
    np.testing.assert_allclose(skeleton.local_rotations(pose), local, atol=1e-9)
    again = skeleton.pose_from_local(skeleton.local_rotations(pose))
    np.testing.assert_allclose(again.heads, pose.heads, atol=1e-9)
    np.testing.assert_allclose(np.linalg.norm(pose.tails - pose.heads, axis=1), skeleton.lengths, rtol=1e-12)


def test_offsets_are_kept_in_the_parents_frame():
    """An unconnected child's head stays at the same place relative to its parent when the parent turns."""
    sk = skeleton_from_points([-1, 0], [(0, 0, 0), (0.5, 0, 1)], [(0, 0, 1), (0.5, 0, 2)])
    np.testing.assert_allclose(sk.rest_frames[0] @ sk.offsets[1], (0.5, 0, 0), atol=1e-12)
    quarter = np.array([[1.0, 0, 0], [0, 0, -1], [0, 1, 0]])  # 90 degrees about the bone's X
    pose = sk.with_local_rotations(sk.rest_pose(), {0: quarter})
    parent_tail = pose.tails[0]
    np.testing.assert_allclose(np.linalg.norm(pose.heads[1] - parent_tail), 0.5, atol=1e-12)
    np.testing.assert_allclose(pose.frames[0].T @ (pose.heads[1] - parent_tail), sk.offsets[1], atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(skeletons(max_bones=10, trees=True, offsets=True, roots=2), st.integers(0, 2**31))
def test_a_scaled_skeleton_is_the_skeleton_built_with_those_lengths(skeleton, seed):
    """`scaled` works out again only what lengths decide: the same as building the skeleton anew from its grown rest
    (each head hanging from its parent's grown tail at an offset grown with the parent), and it poses alike."""
    rng = np.random.default_rng(seed)
    scale = np.where(rng.random(len(skeleton)) < 0.5, 1.0, rng.uniform(0.5, 3.0, len(skeleton)))
    before = skeleton.lengths.copy(), skeleton.rest_heads.copy()
    grown = skeleton.scaled(scale)
    heads = skeleton.rest_heads.copy()
    for b in skeleton.order:
        p = skeleton.parents[b]
        if p >= 0:
            tail = heads[p] + skeleton.lengths[p] * scale[p] * skeleton.rest_frames[p][:, 1]
            heads[b] = tail + scale[p] * (skeleton.rest_heads[b] - skeleton.rest_tails[p])
    fresh = Skeleton(skeleton.parents, heads, skeleton.rest_frames, skeleton.lengths * scale, skeleton.names,
                     skeleton.limits, skeleton.stretch, skeleton.connected)
    for field in ("lengths", "rest_heads", "rest_tails", "offsets", "head_in_parent", "rest_in_parent"):
        np.testing.assert_allclose(getattr(grown, field), getattr(fresh, field), atol=1e-9, err_msg=field)
    local = random_rotations(rng, len(skeleton))
    np.testing.assert_allclose(grown.pose_from_local(local).tails, fresh.pose_from_local(local).tails, atol=1e-9)
    assert np.array_equal(skeleton.lengths, before[0]) and np.array_equal(skeleton.rest_heads, before[1])
