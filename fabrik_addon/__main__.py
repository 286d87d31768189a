# SPDX-License-Identifier: GPL-3.0-or-later
"""Command line: bake a rig in a .blend file without Blender's UI (needs the bpy module).

    python -m fabrik_addon bake scene.blend --object Rig --frames 1-250 --out baked.blend

--frames takes FIRST-LAST, FIRST..LAST or a single FRAME, each optionally
followed by :STEP (every STEP-th frame, STEP at least 1): 1-250, 1..250:2, 17.
Frames may be negative, as in Blender: -5-5, -5..5, -20--10. Without --frames
the scene's own frame range and step are baked.

Every mistake is reported as one line on stderr, before any work where it can
be known in advance (the file, the frames, the clean-up tolerance, whether the
output can be written; after loading: the object and its effectors). Exit
status: 0 baked and saved, 2 a mistake in the command or the file, 1 the bake
or the save failed. --debug, or FABRIK_DEBUG=1 in the environment, adds the
traceback of an unexpected failure.

Inside Blender (a render farm's worker, where the add-on is installed and
enabled), the same command runs from an expression; --python-exit-code makes
Blender's exit status say when it failed (farm/ has a Flamenco job type):

    blender -b -y --python-exit-code 1 --python-expr "import sys; \\
        from bl_ext.user_default.fabrik_ik.fabrik_addon.__main__ import main; \\
        sys.exit(main(sys.argv[sys.argv.index('--') + 1:]))" -- bake scene.blend --object Rig --out baked.blend

(`fabrik_ik.fabrik_addon.__main__` for the legacy add-on in Blender 3.4 to 4.1.)
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import tempfile
import traceback

#: FIRST[-LAST or ..LAST][:STEP]; numbers may carry a minus sign, so '-5-5' is -5 to 5.
FRAMES = re.compile(r"\s*(-?\d+)\s*(?:(?:-|\.\.)\s*(-?\d+))?\s*(?::\s*(-?\d+))?\s*")

#: How a .blend file starts: plain, gzip (Blender before 3.0) or zstd (3.0 and later) compressed.
BLEND_MAGIC = (b"BLENDER", b"\x1f\x8b", b"\x28\xb5\x2f\xfd")

#: Options whose value may start with a minus sign (argparse would take '-5-5' for an option).
SIGNED_OPTIONS = ("--frames", "--cleanup")


class UsageError(Exception):
    """A mistake in the command or the file: reported as one line, exit status 2."""


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on stderr (not the usage block), exit status 2."""

    def error(self, message: str) -> None:
        """Report a command line mistake in one line and exit."""
        raise UsageError(f"{message} (see --help)")


def parse_frames(text: str) -> range:
    """'1-250', '1..250', '1-250:2' (every second frame), '-5-5' or '17' as a range of frames."""
    match = FRAMES.fullmatch(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"frames must look like 1-250, 1..250:2, -5..5 or 17, not '{text}'")
    first = int(match[1])
    last = int(match[2]) if match[2] is not None else first
    step = int(match[3]) if match[3] is not None else 1
    if step < 1:
        raise argparse.ArgumentTypeError(f"the step of '{text}' must be 1 or more, not {step}")
    if last < first:
        raise argparse.ArgumentTypeError(f"'{text}' starts after it ends (write {last}-{first})")
    return range(first, last + 1, step)


def parse_cleanup(text: str) -> float:
    """A clean-up tolerance: a finite number of 0 or more (NaN would drop every in-between key)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"the clean-up tolerance must be a number, not '{text}'") from None
    if not (math.isfinite(value) and value >= 0.0):
        raise argparse.ArgumentTypeError(f"the clean-up tolerance must be a finite number of 0 or more, not '{text}'")
    return value


def signed_values(argv: list[str]) -> list[str]:
    """Join '--frames -5-5' into '--frames=-5-5', so argparse reads the value instead of an unknown option."""
    joined: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] in SIGNED_OPTIONS and i + 1 < len(argv) and argv[i + 1].startswith("-"):
            joined.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
        else:
            joined.append(argv[i])
            i += 1
    return joined


def make_parser() -> argparse.ArgumentParser:
    """The command line's parser."""
    parser = OneLineParser(prog="python -m fabrik_addon", description="FABRIK IK for Blender, headless.")
    commands = parser.add_subparsers(dest="command", required=True)
    bake_cmd = commands.add_parser(
        "bake", help="bake an armature's FABRIK solution into keyframes",
        description="Bake an armature's FABRIK solution into keyframes and save the file. Mistakes are reported "
        "as one line before any work; exit status 0 done, 2 a mistake in the command or the file, 1 a failure.",
    )
    bake_cmd.add_argument("blend", help="the .blend file to open")
    bake_cmd.add_argument("--object", required=True, help="the armature object to bake")
    bake_cmd.add_argument(
        "--frames", type=parse_frames, metavar="FIRST-LAST[:STEP]",
        help="frames to bake: 1-250, 1..250, every second one 1-250:2, one frame 17; negative frames as "
        "-5-5 or -5..5 (default: the scene's range and step)",
    )
    bake_cmd.add_argument("--out", help="where to save (default: overwrite the input file)")
    bake_cmd.add_argument("--new-action", action="store_true", help="key into a new action")
    bake_cmd.add_argument(
        "--cleanup", type=parse_cleanup, metavar="TOLERANCE",
        help="drop keys the neighbours reproduce within TOLERANCE (a number of 0 or more)",
    )
    bake_cmd.add_argument("--selected", action="store_true", help="bake the selected bones, not the effector chains")
    bake_cmd.add_argument(
        "--start", choices=("rig", "fk", "previous"), default="rig",
        help="where each frame's solve starts: as the rig's live solving (default), this frame's pose, "
        "or the previous frame's solution (continuous)",
    )
    bake_cmd.add_argument("--debug", action="store_true", help="print the traceback of an unexpected failure")
    return parser


def check_blend(path: str) -> None:
    """Raise UsageError unless path is a readable .blend file (checked by its first bytes, not its name)."""
    if not os.path.exists(path):
        raise UsageError(f"'{path}' does not exist")
    if os.path.isdir(path):
        raise UsageError(f"'{path}' is a folder, not a .blend file")
    try:
        with open(path, "rb") as file:
            head = file.read(8)
    except OSError as error:
        raise UsageError(f"cannot read '{path}': {error.strerror}") from None
    if not head.startswith(BLEND_MAGIC):
        raise UsageError(f"'{path}' is not a .blend file")


def check_output(path: str) -> None:
    """Raise UsageError unless a file can be saved at path; checked first, so no bake is run only to be lost."""
    if os.path.isdir(path):
        raise UsageError(f"the output '{path}' is a folder, not a file")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"the output's folder '{folder}' does not exist")
    try:
        if os.path.exists(path):
            # Opening for writing without writing changes neither the file's bytes nor its time.
            with open(path, "r+b"):
                pass
        # Blender writes beside the file first and then renames, so the folder must take a new file too.
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        raise UsageError(f"cannot write the output '{path}': {error.strerror}") from None
    if not path.lower().endswith(".blend"):  # (Blender would save a .blend under any name, which nothing opens)
        raise UsageError(f"the output '{path}' must end in .blend")


def main(argv: list[str]) -> int:
    """Parse the command line and run the bake; exit status 0 on success, 2 on a mistake, 1 on a failure."""
    debug = os.environ.get("FABRIK_DEBUG", "") not in ("", "0")
    try:
        args = make_parser().parse_args(signed_values(argv))
        debug = debug or args.debug
        check_blend(args.blend)
        check_output(args.out or args.blend)
    except UsageError as error:
        print(f"fabrik: {error}", file=sys.stderr)
        return 2

    try:
        import bpy  # (here: without bpy the command still explains itself)

        from . import register  # (with bpy: it registers the bridge)
        from .blender.bake import baking
    except ImportError as error:
        if debug:
            traceback.print_exc()
        print(f"fabrik: this Python ({sys.executable}) cannot import Blender's bpy module ({error}); "
              "run with one that has it (pip install bpy, or the repo's .venv/bin/python)", file=sys.stderr)
        return 2

    # Inside a Blender that has the add-on enabled (a farm worker) it is registered already.
    registered_here = not hasattr(bpy.types.Object, "fabrik")
    if registered_here:
        register()
    try:
        return _bake(bpy, baking, args)
    except UsageError as error:
        print(f"fabrik: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("fabrik: interrupted; nothing saved", file=sys.stderr)
        return 130
    except Exception as error:
        if debug:
            traceback.print_exc()
        message = str(error).strip().replace("\n", " ") or type(error).__name__
        print(f"fabrik: bake failed: {message}", file=sys.stderr)
        return 1
    finally:
        # Leaving the add-on registered at interpreter exit crashes the bpy 4.2 module.
        if registered_here:
            from . import unregister  # (with bpy, as `register` above)

            unregister()


def check_object(bpy, baking, args):
    """The armature to bake, or UsageError naming what is wrong with the --object."""
    obj = bpy.data.objects.get(args.object)
    if obj is None:
        armatures = sorted(o.name for o in bpy.data.objects if o.type == 'ARMATURE')
        listed = ", ".join(f"'{name}'" for name in armatures) if armatures else "none"
        raise UsageError(f"'{args.blend}' has no armature object '{args.object}' (its armatures: {listed})")
    if obj.type != 'ARMATURE':
        raise UsageError(f"object '{args.object}' in '{args.blend}' is of type {obj.type}, not an armature")
    if args.selected:
        if not baking.bake_bones(obj, 'SELECTED'):
            raise UsageError(f"armature '{args.object}' has no selected bones to bake (select some, or drop --selected)")
    elif not any(effector.enabled for effector in obj.fabrik.effectors):
        raise UsageError(f"armature '{args.object}' has no enabled FABRIK effectors (add one in the FABRIK panel)")
    elif not baking.bake_bones(obj, 'CHAINS'):
        # bake_bones has let the effectors follow renamed bones; what is still missing is named.
        missing = [e.bone for e in obj.fabrik.effectors if e.enabled and e.bone not in obj.data.bones]
        listed = ", ".join(f"'{name}'" if name else "an empty name" for name in missing)
        raise UsageError(
            f"none of the enabled effectors of armature '{args.object}' names one of its bones "
            f"(no bone {listed} in it)"
        )
    return obj


def _bake(bpy, baking, args) -> int:
    """Open the file, check what it holds, bake, save; the exit status."""
    limits = bpy.types.Scene.bl_rna.properties["frame_current"]
    if args.frames is not None and not limits.hard_min <= args.frames[0] <= args.frames[-1] <= limits.hard_max:
        raise UsageError(f"frames must lie within Blender's {limits.hard_min}..{limits.hard_max}")
    try:
        bpy.ops.wm.open_mainfile(filepath=args.blend)
    except RuntimeError as error:
        message = str(error).strip().replace("\n", " ").removeprefix("Error: ")
        raise UsageError(f"cannot open '{args.blend}': {message}") from None
    obj = check_object(bpy, baking, args)
    result = baking.bake_object(
        obj, args.frames, 'SELECTED' if args.selected else 'CHAINS', args.new_action, args.cleanup, keep_live=False,
        warm_start=baking.warm_start_of(obj, args.start.upper()),
    )
    for problem in result.problems:
        print(f"warning: {problem}", file=sys.stderr)
    out = args.out or args.blend
    try:
        bpy.ops.wm.save_as_mainfile(filepath=out)
    except RuntimeError as error:
        message = str(error).strip().replace("\n", " ").removeprefix("Error: ")
        print(f"fabrik: baked, but cannot save '{out}': {message}", file=sys.stderr)
        return 1
    print(
        f"baked {result.frames} frames of {result.bones} bones of '{obj.name}' into action '{result.action}' "
        f"({result.keys} keys, {result.seconds:.2f} s); saved {out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
