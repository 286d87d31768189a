# SPDX-License-Identifier: GPL-3.0-or-later
"""Retarget benchmark: a captured walk of 1000 frames put on a 51-bone rig of other proportions, end to end, and
what the result keeps of the clip on every test clip.

Run with `python3 tools/dev.py bench` (it runs this with the others) or directly with the venv's Python:
`.venv/bin/python benchmarks/retarget.py [--frames 1000] [--runs 3] [--motions walk,run,...]`.

The clips are the tests' (tests/support/mocap_clips.py: written as BVH, imported with Blender's own BVH importer); the
rig has legs 20 % longer and arms 10 % shorter than the clip's, hinged knees and elbows and three-bone fingers
(51 bones). Each run times, in the same process one after the other: the one click (Retarget: read the clip,
key its pose, make the goals, bake FABRIK's corrections); Blender's own IK constraints (chain 2, on the forearms
and shins) on the same goals, on a twin of the rig keyed as the retarget left it, through Bake Action (visual
keying); and the copy-rotation setup an animator makes
by hand (a Copy Rotation per mapped bone and a Copy Location on the hips, through Bake Action). Then, for every
test clip, onto a rig of those proportions (without fingers), the stocky rig and an A-pose rig, the measures the
tests hold it to: the worst bend
plane against the clip's where both bend more than 20 degrees (and frames flipped), the largest bend jump in one
frame over the clip's own, the worst hand, foot or head turn against the clip's, the farthest a held ankle or
toe slides (a share of the leg), the lowest ankle or toe above the floor and the frames a limb is straight where
the clip's bends.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "support")]  # (the clips are the tests')

import bpy  # noqa: E402
import mocap_clips  # noqa: E402
import retarget_measures  # noqa: E402
from rigs import quiet  # noqa: E402
from walk_clip import stocky_rig  # noqa: E402

import fabrik_addon  # noqa: E402
from fabrik_addon.blender.retarget import job, setup  # noqa: E402

#: The rig the timing runs on: the clip's shape with longer legs and shorter arms, hinges and fingers.
PROPORTIONS = dict(legs=1.2, arms=0.9)


def nla_bake(obj, frames: int) -> float:
    """Blender's Bake Action of every pose bone (visual keying, constraints cleared) over the frames; seconds."""
    view_layer = bpy.context.view_layer
    for other in view_layer.objects:
        other.select_set(other == obj)
    view_layer.objects.active = obj
    bpy.ops.object.mode_set(mode="POSE")
    bpy.ops.pose.select_all(action="SELECT")
    began = time.perf_counter()
    bpy.ops.nla.bake(frame_start=1, frame_end=frames, only_selected=True, visual_keying=True, clear_constraints=True,
                     use_current_action=False, bake_types={"POSE"})
    seconds = time.perf_counter() - began
    bpy.ops.object.mode_set(mode="OBJECT")
    return seconds


def one_run(folder: Path, frames: int) -> dict:
    """The three ways of putting the walk on the rig, each timed."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    mocap_clips.MOTIONS["timed"] = lambda: mocap_clips.walk(frames)
    with quiet():
        clip = mocap_clips.import_clip(folder, "timed")
    scene = bpy.context.scene
    rig = mocap_clips.rig_from(mocap_clips.Skeleton(**PROPORTIONS), "Rig", hinges=True, fingers=True)
    rig.fabrik.retarget_source = clip
    bpy.context.view_layer.objects.active = rig
    began = time.perf_counter()
    with quiet():
        assert bpy.ops.fabrik.retarget() == {'FINISHED'}
    times = {"retarget": time.perf_counter() - began}
    # Blender's IK on the same goals: the retarget's own targets, the constraints on a twin of the rig posed as the
    # rig is (its keys: the hips moving, every bone turning; the IK starts from them, as FABRIK started from the
    # clip's pose).
    twin = mocap_clips.rig_from(mocap_clips.Skeleton(**PROPORTIONS), "Twin", hinges=True, fingers=True)
    action = rig.animation_data.action.copy()
    twin.animation_data_create().action = action
    if hasattr(twin.animation_data, "action_slot"):  # (4.4+: the copy's slot is the rig's)
        twin.animation_data.action_slot = action.slots[0]
    for effector in rig.fabrik.effectors:
        ik = twin.pose.bones[effector.bone].constraints.new('IK')
        ik.target, ik.chain_count = effector.target, 2
    times["IK constraints"] = nla_bake(twin, frames)
    # The copy-rotation setup: each mapped bone copies its clip bone's rotation, the hips its place.
    copied = mocap_clips.rig_from(mocap_clips.Skeleton(**PROPORTIONS), "Copied", hinges=True, fingers=True)
    for role, (clip_bone, rig_bone) in setup.mapping(rig).items():
        turn = copied.pose.bones[rig_bone].constraints.new('COPY_ROTATION')
        turn.target, turn.subtarget = clip, clip_bone
        if role == "hips":
            place = copied.pose.bones[rig_bone].constraints.new('COPY_LOCATION')
            place.target, place.subtarget = clip, clip_bone
    times["copy rotation"] = nla_bake(copied, frames)
    scene.frame_set(1)
    return times


def kept(folder: Path, motion: str, which: str) -> dict:
    """What a retarget of one test clip onto one rig keeps of it (`retarget_measures`)."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    with quiet():
        clip = mocap_clips.import_clip(folder, motion)
    if which == "longer legs, shorter arms":
        rig = mocap_clips.rig_from(mocap_clips.Skeleton(**PROPORTIONS), "Rig", hinges=True)
    elif which == "stocky":
        rig = stocky_rig()
    else:
        rig = mocap_clips.rig_from(mocap_clips.Skeleton(pose="A"), "APose")
    rig.fabrik.retarget_source = clip
    setup.map_bones(rig)
    began = time.perf_counter()
    with quiet():
        work = job.Retargeting(bpy.context.scene, rig)
        while not work.done:
            work.step()
        work.finish()
    seconds = time.perf_counter() - began
    pairs = setup.mapping(rig)
    measures, _, track = retarget_measures.measure(clip, rig, pairs, work.frames, floor=work.layout.floor)
    slide = 0.0
    for s in "LR":
        ankles, toes = work.copy.contacts[f"foot.{s}"]
        leg = work.layout.leg[s]
        slide = max(slide, retarget_measures.slides(track, pairs[f"shin.{s}"][1], ankles) / leg,
                    retarget_measures.slides(track, pairs[f"foot.{s}"][1], toes) / leg)
    limbs = retarget_measures.LIMBS
    return {
        "frames": len(work.frames), "seconds": seconds, "plane": max(measures.plane.values()),
        "flipped": sum(measures.flipped.values()),
        "jump": max(measures.jump[k] - measures.clip_jump[k] for k in limbs), "turned": max(measures.turned.values()),
        "slide": slide, "lowest": measures.lowest, "straight": sum(measures.straightened.values()),
    }


def span_of(values: list[float], unit: str = "s", digits: int = 2) -> str:
    if len(values) == 1:
        return f"{values[0]:.{digits}f} {unit}"
    return f"{min(values):.{digits}f}–{max(values):.{digits}f} {unit}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--motions", default=",".join(m for m in mocap_clips.MOTIONS if m != "timed"))
    args = parser.parse_args()
    fabrik_addon.register()
    runs, rows = [], []
    try:
        with tempfile.TemporaryDirectory() as folder:
            for _ in range(args.runs):
                runs.append(one_run(Path(folder), args.frames))
                print(f"[bench] retarget run {len(runs)}: done", flush=True)
            for motion in args.motions.split(","):
                for which in ("longer legs, shorter arms", "stocky", "A pose"):
                    rows.append((motion, which, kept(Path(folder), motion, which)))
                print(f"[bench] retarget measures: {motion} done", flush=True)
    finally:
        fabrik_addon.unregister()
    print(f"\nA {args.frames}-frame walk onto a 51-bone rig, {args.runs} runs; ranges over the runs:\n")
    print("| way | seconds | ms a frame | / Blender's IK constraints |")
    print("|---|---|---|---|")
    labels = {"retarget": "**Retarget** (read the clip, key its pose, bake FABRIK's corrections)",
              "IK constraints": "Blender's IK constraints on the same goals, Bake Action",
              "copy rotation": "the copy-rotation setup, Bake Action"}
    for way in ("retarget", "IK constraints", "copy rotation"):
        values = [run[way] for run in runs]
        ratios = [run[way] / run["IK constraints"] for run in runs]
        print(f"| {labels[way]} | {span_of(values)} | {span_of([1000 * v / args.frames for v in values], 'ms', 3)} "
              f"| {span_of(ratios, 'x')} |")
    print("\nWhat the retarget keeps of each clip (tests/blender/test_retarget_motion.py holds these):\n")
    print("| clip | rig | frames | seconds | worst bend plane | flipped | worst bend jump over the clip's | "
          "worst hand/foot/head turn | worst held slide (of the leg) | lowest above the floor | straightened |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for motion, which, row in rows:
        print(f"| {motion} | {which} | {row['frames']} | {row['seconds']:.2f} | {row['plane']:.1f}° | "
              f"{row['flipped']} | "
              f"{row['jump']:+.1f}° | {row['turned']:.1f}° | {100 * row['slide']:.2f} % | {row['lowest']:.4f} | "
              f"{row['straight']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
