# SPDX-License-Identifier: GPL-3.0-or-later
"""Command line: bake a rig in a .blend file without Blender's UI (needs the bpy module).

    python -m fabrik_addon bake scene.blend --object Rig --frames 1-250 --out baked.blend

Render farms (Flamenco, Deadline) can run this as a job step. With Blender
itself instead of the bpy module, the same bake is one expression:

    blender -b scene.blend --python-expr "import bpy, bl_ext.user_default.fabrik_ik.fabrik_addon.blender.bake as b; \\
        b.bake_object(bpy.data.objects['Rig']); bpy.ops.wm.save_mainfile()"
"""

from __future__ import annotations

import argparse
import sys


def parse_frames(text: str) -> range:
    """'1-250', '1-250:2' (every second frame) or '17' as a range of frames."""
    span, _, step = text.partition(":")
    first, _, last = span.partition("-")
    try:
        return range(int(first), int(last or first) + 1, int(step or 1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"frames must look like 1-250 or 1-250:2, not '{text}'") from None


def main(argv: list[str]) -> int:
    """Parse the command line and run the bake; exit status 0 on success."""
    parser = argparse.ArgumentParser(prog="python -m fabrik_addon", description="FABRIK IK for Blender, headless.")
    commands = parser.add_subparsers(dest="command", required=True)
    bake_cmd = commands.add_parser("bake", help="bake an armature's FABRIK solution into keyframes")
    bake_cmd.add_argument("blend", help="the .blend file to open")
    bake_cmd.add_argument("--object", required=True, help="the armature object to bake")
    bake_cmd.add_argument("--frames", type=parse_frames, help="frame range, e.g. 1-250 or 1-250:2 (default: the scene's)")
    bake_cmd.add_argument("--out", help="where to save (default: overwrite the input file)")
    bake_cmd.add_argument("--new-action", action="store_true", help="key into a new action")
    bake_cmd.add_argument("--cleanup", type=float, metavar="TOLERANCE", help="drop keys the neighbours reproduce")
    bake_cmd.add_argument("--selected", action="store_true", help="bake the selected bones, not the effector chains")
    bake_cmd.add_argument(
        "--start", choices=("rig", "fk", "previous"), default="rig",
        help="where each frame's solve starts: as the rig's live solving (default), this frame's pose, "
        "or the previous frame's solution (continuous)",
    )
    args = parser.parse_args(argv)

    import bpy

    from . import register
    from .blender import bake

    register()
    try:
        return _bake(bpy, bake, args)
    finally:
        # Leaving the add-on registered at interpreter exit crashes the bpy 4.2 module.
        from . import unregister

        unregister()


def _bake(bpy, bake, args) -> int:
    """Open the file, bake, save; the exit status."""
    bpy.ops.wm.open_mainfile(filepath=args.blend)
    obj = bpy.data.objects.get(args.object)
    if obj is None or obj.type != 'ARMATURE':
        print(f"error: '{args.blend}' has no armature object '{args.object}'", file=sys.stderr)
        return 2
    result = bake.bake_object(
        obj, args.frames, 'SELECTED' if args.selected else 'CHAINS', args.new_action, args.cleanup, keep_live=False,
        warm_start=bake.warm_start_of(obj, args.start.upper()),
    )
    for problem in result.problems:
        print(f"warning: {problem}", file=sys.stderr)
    out = args.out or args.blend
    bpy.ops.wm.save_as_mainfile(filepath=out)
    print(
        f"baked {result.frames} frames of {result.bones} bones of '{obj.name}' into action '{result.action}' "
        f"({result.keys} keys, {result.seconds:.2f} s); saved {out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
