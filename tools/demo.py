# SPDX-License-Identifier: GPL-3.0-or-later
"""The main job: build the add-on, install it into a throw-away Blender profile, solve, bake and render the samples.

Run through `python3 tools/dev.py demo [--samples a,b] [--jobs N] [--no-render] [--update-docs]`.
Each step runs Blender (the bpy module) in its own process, so the profile
is the only state shared:

1. build dist/fabrik_ik-<version>.zip;
2. install and enable it in a temporary BLENDER_USER_RESOURCES, save preferences;
3. per sample: build the scene, play its frames with live
   solving and measure the solve time and each effector's real distance to
   its target (and, for rotation goals, the angle to its target's rotation)
   on frames where the target is within the chain's reach; bake the
   solution to keys (`bake_object`) and measure the baked playback the same
   way; save out/<sample>.blend; render a contact sheet of four frames with
   Workbench, the targets' paths drawn in, to out/<sample>.png
   (`--update-docs` copies the sheets to docs/images/);
4. print a table, and exit with 1 if some reachable target was missed.

A reachable (effector, frame) pair counts as reached when the tip is within
the sample's TOLERANCE (world units) of its target, a rotation goal's angle
times the chain's reach is within it too (the panel's convention: an angle
counts as the distance it moves the chain's far end), and, while solving
live, the panel's status said "reached" for that effector.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "out"
DOCS_IMAGES = ROOT / "docs" / "images"
SAMPLES = ("robot_arm", "tentacle", "hand", "hexapod", "humanoid", "ur5")
MODULE = "bl_ext.user_default.fabrik_ik"
#: Size of one frame of a contact sheet, and how many frames a sheet shows.
FRAME_SIZE = (320, 240)
SHEET_FRAMES = 4

_print_lock = threading.Lock()


def log(message: str) -> None:
    """A progress line."""
    with _print_lock:
        print(f"[demo] {message}", flush=True)


def progress(message: str) -> None:
    """Inside a step: a progress line the orchestrating process shows as it comes."""
    print(f"PROGRESS {message}", flush=True)


def run_step(args: list[str], profile: str, label: str = "") -> dict:
    """Run this script in a fresh Blender process with the throw-away profile; show progress, return its JSON answer."""
    env = dict(os.environ, BLENDER_USER_RESOURCES=profile, PYTHONDONTWRITEBYTECODE="1")
    process = subprocess.Popen(
        [sys.executable, __file__, *args], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    # Read stderr on the side, or a chatty process could block on a full pipe.
    errors: list[str] = []
    reader = threading.Thread(target=lambda: errors.extend(process.stderr), daemon=True)
    reader.start()
    output, answer = [], None
    for line in process.stdout:
        output.append(line)
        if line.startswith("PROGRESS "):
            log(f"{label or args[0]}: {line[len('PROGRESS '):].rstrip()}")
        elif line.startswith("RESULT "):
            answer = json.loads(line[len("RESULT "):])
    code = process.wait(timeout=600)
    reader.join(timeout=10)
    if code != 0 or answer is None:
        sys.stderr.write("".join(output)[-4000:] + "".join(errors)[-4000:])
        raise SystemExit(f"demo step {' '.join(args)} failed (exit {code})")
    return answer


def main(argv: list[str] | None = None) -> int:
    """Orchestrate the demo from outside Blender."""
    parser = argparse.ArgumentParser(prog=os.environ.get("FABRIK_PROG"), description="Build, install and demonstrate the add-on on the sample rigs.")
    parser.add_argument("--samples", default=",".join(SAMPLES), help="comma-separated sample names (default: all)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="samples run side by side (default 1: solve times are only comparable one at a time)")
    parser.add_argument("--no-render", action="store_true", help="skip the contact sheets")
    parser.add_argument("--update-docs", action="store_true", help="copy the contact sheets to docs/images/")
    options = parser.parse_args(argv)
    samples = [name for name in options.samples.split(",") if name]
    unknown = [name for name in samples if not (ROOT / "samples" / f"{name}.py").is_file()]
    if unknown:
        parser.error(f"no such sample: {', '.join(unknown)} (the samples: {', '.join(SAMPLES)})")
    if options.jobs < 1:
        parser.error(f"--jobs must be 1 or more, not {options.jobs}")

    sys.path.insert(0, str(ROOT / "tools"))
    import build

    began = time.perf_counter()
    log("building the extension zip")
    extension_zip, legacy_zip = build.build_all()
    log(f"built {extension_zip.relative_to(ROOT)} and {legacy_zip.relative_to(ROOT)}")
    OUT.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fabrik-profile-") as profile:
        log(f"installing it into a throw-away Blender profile ({profile})")
        installed = run_step(["install", str(extension_zip)], profile)
        log(f"enabled {installed['module']} (Blender {installed['blender']})")
        log(f"running {len(samples)} samples, {options.jobs} at a time: {', '.join(samples)}")
        extra = ["--no-render"] if options.no_render else []
        with ThreadPoolExecutor(max_workers=max(1, options.jobs)) as pool:
            rows = list(pool.map(lambda name: run_step(["sample", name, *extra], profile, name), samples))
    if options.update_docs and not options.no_render:
        DOCS_IMAGES.mkdir(parents=True, exist_ok=True)
        for row in rows:
            shutil.copyfile(ROOT / row["sheet"], DOCS_IMAGES / f"{row['sample']}.png")
        log(f"copied {len(rows)} contact sheets to {DOCS_IMAGES.relative_to(ROOT)}/")
    print()
    print_table(rows)
    print()
    missed = [r["sample"] for r in rows if r["reached"] < r["reachable"] or r["baked_reached"] < r["reachable"]]
    if missed:
        log(f"missed reachable targets: {', '.join(missed)}")
    else:
        log("every reachable target reached, live and baked, within each sample's tolerance")
    log(f"done in {time.perf_counter() - began:.1f} s")
    return 1 if missed else 0


def print_table(rows: list[dict]) -> None:
    """The summary table, one row per sample."""
    header = ("sample", "bones", "effectors", "frames", "median solve", "reachable", "reached", "worst error",
              "worst turn", "bake", "baked reached", "baked error", "saved")
    table = [header] + [
        (
            r["sample"],
            str(r["bones"]),
            str(r["effectors"]),
            str(r["frames"]),
            f"{r['median_solve_ms']:.2f} ms",
            f"{r['reachable']}/{r['checks']}",
            f"{r['reached']}/{r['reachable']}",
            f"{r['worst_error']:.1e}",
            "-" if r["worst_turn"] is None else f"{r['worst_turn']:.1e}\u00b0",
            f"{r['bake_seconds']:.2f} s",
            f"{r['baked_reached']}/{r['reachable']}",
            f"{r['baked_error']:.1e}",
            ", ".join(p for p in (r["saved"], r.get("sheet")) if p),
        )
        for r in rows
    ]
    widths = [max(len(row[c]) for row in table) for c in range(len(header))]
    for i, row in enumerate(table):
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
        if i == 0:
            print("  ".join("-" * width for width in widths))


def step_install(zip_path: str) -> dict:
    """Inside Blender: install and enable the extension, keep it enabled for the next processes."""
    import bpy

    bpy.ops.extensions.package_install_files(filepath=zip_path, repo="user_default", enable_on_install=True)
    if MODULE not in bpy.context.preferences.addons:
        raise RuntimeError(f"{MODULE} is not enabled after installing {zip_path}")
    bpy.ops.wm.save_userpref()
    return {"module": MODULE, "blender": bpy.app.version_string}


def step_sample(name: str, render: bool = True) -> dict:
    """Inside Blender: build one sample, play it with live solving, bake it, measure both, save, render."""

    import bpy

    import addon_utils

    # The bpy module starts from factory preferences, so enable the installed extension again.
    if MODULE not in bpy.context.preferences.addons:
        addon_utils.enable(MODULE, default_set=True)
    if MODULE not in bpy.context.preferences.addons:
        raise RuntimeError(f"{MODULE} is installed but could not be enabled")
    statuses = importlib.import_module(MODULE + ".fabrik_addon.blender.rig.status").statuses
    bake = importlib.import_module(MODULE + ".fabrik_addon.blender.bake.baking")
    for obj in list(bpy.data.objects):
        bpy.data.objects.remove(obj)
    sys.path.insert(0, str(ROOT))  # (the samples and their rig builders, from the checkout)
    rigbuild = importlib.import_module("samples.rigbuild")
    sample = importlib.import_module(f"samples.{name}")
    frames = sample.FRAMES
    rig = sample.build(frames)
    count = len(rig.fabrik.effectors)
    progress(f"built: {len(rig.data.bones)} bones, {count} effector{'s' if count != 1 else ''}, {len(frames)} frames")

    scene = bpy.context.scene
    tolerance = getattr(sample, "TOLERANCE", 1e-3)
    times: list[float] = []
    live = play(rig, frames, rigbuild, tolerance, status=lambda: statuses[rig.name],
                on_frame=lambda frame: times.append(_solve_seconds(statuses, rig, frame)))
    progress(f"live solving: median {statistics.median(times) * 1e3:.2f} ms per frame, "
             f"{live['reached']} of {live['reachable']} reachable targets reached ({live['checks']} checked), "
             f"worst error {live['worst']:.1e}")
    for line in live["misses"][:5]:
        progress(f"live miss: {line}")

    warm = getattr(sample, "BAKE_WARM_START", True)
    result = bake.bake_object(rig, frames, warm_start=warm)
    for problem in result.problems[:3]:
        progress(f"bake: {problem}")
    baked = play(rig, frames, rigbuild, tolerance)
    progress(f"baked {result.keys} keys in {result.seconds:.2f} s ({'warm' if warm else 'cold'} starts); "
             f"baked playback: {baked['reached']} of {baked['reachable']} reached, worst error {baked['worst']:.1e}")
    for line in baked["misses"][:5]:
        progress(f"baked miss: {line}")

    sheet = None
    if render:
        stage_scene(scene, rig, frames, getattr(sample, "VIEW", (1.0, -1.0, 0.6)), live["points"], live["paths"])
    saved = OUT / f"{name}.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(saved))
    if render:
        shown = sheet_frames(frames, SHEET_FRAMES)
        with tempfile.TemporaryDirectory(prefix=f"fabrik-{name}-") as folder:
            paths = []
            for i, frame in enumerate(shown):
                progress(f"rendering frame {frame} ({i + 1} of {len(shown)})")
                paths.append(render_frame(scene, frame, Path(folder) / f"{frame:04d}.png", FRAME_SIZE))
            sheet = OUT / f"{name}.png"
            compose_sheet(paths, sheet)
        progress(f"contact sheet {sheet.relative_to(ROOT)} (frames {', '.join(map(str, shown))})")
    return {
        "sample": name,
        "bones": len(rig.data.bones),
        "effectors": len(rig.fabrik.effectors),
        "frames": len(times),
        "median_solve_ms": statistics.median(times) * 1e3,
        "worst_error": live["worst"],
        "worst_turn": live["worst_turn"],
        "reachable": live["reachable"],
        "reached": live["reached"],
        "checks": live["checks"],
        "bake_seconds": result.seconds,
        "bake_problems": len(result.problems),
        "baked_error": baked["worst"],
        "baked_turn": baked["worst_turn"],
        "baked_reached": baked["reached"],
        "saved": str(saved.relative_to(ROOT)),
        "sheet": str(sheet.relative_to(ROOT)) if sheet else None,
    }


def _solve_seconds(statuses, rig, frame: int) -> float:
    """The last live solve's time; stop the demo if it could not solve (bad input: a missing bone or target)."""
    status = statuses[rig.name]
    if not status.ok:
        raise RuntimeError(f"frame {frame}: {status.message}")
    return status.seconds


def play(rig, frames, rigbuild, tolerance: float = 1e-3, on_frame=None, status=None) -> dict:
    """Play the frames: measure effector errors where targets are in reach, gather points for the camera and paths.

    `status`, while solving live, gives the rig's last RigStatus: a pair
    the panel did not call reached does not count as reached either.
    Returns the worst distance and the worst rotation goal's angle (degrees;
    None without rotation goals) over reachable pairs, how many pairs were
    checked, in reach and reached, and a line per missed reachable pair.
    """

    import bpy
    from mathutils import Vector

    scene = bpy.context.scene
    worst, worst_turn, reachable, reached, checks = 0.0, None, 0, 0, 0
    misses: list[str] = []
    points: list[tuple[float, float, float]] = []
    paths: dict[str, list[tuple[float, float, float]]] = {}
    depsgraph = bpy.context.evaluated_depsgraph_get()
    effectors = rig.fabrik.effectors
    # rigbuild.measure gives a row per enabled effector with a target, in order: these are their indices.
    measured = [k for k, e in enumerate(effectors) if e.enabled and e.target is not None]
    for frame in frames:
        scene.frame_set(frame)
        if on_frame is not None:
            on_frame(frame)
        verdict = status() if status is not None else None
        for k, (bone, error, in_reach) in zip(measured, rigbuild.measure(rig)):
            checks += 1
            if not in_reach:
                continue
            reachable += 1
            worst = max(worst, error)
            turn = rigbuild.effector_turn(rig, effectors[k])
            _, reach = rigbuild.effector_reach(rig, effectors[k])
            if turn is not None:
                worst_turn = max(worst_turn or 0.0, math.degrees(turn))
            within = error <= tolerance and (turn is None or turn * reach <= tolerance)
            panel = verdict is None or verdict.reached.get(k, False)
            if within and panel:
                reached += 1
            else:
                said = f", panel: {verdict.effectors.get(k)}" if verdict is not None else ""
                angle = f", {math.degrees(turn):.2g} degrees off" if turn is not None else ""
                misses.append(f"frame {frame} {bone}: {error:.2g} off{angle}{said}")
        evaluated = rig.evaluated_get(depsgraph)
        world = evaluated.matrix_world
        for pose_bone in evaluated.pose.bones:
            points += [tuple(world @ pose_bone.head), tuple(world @ pose_bone.tail)]
        for child in rig.children:
            # The meshes on the bones are thicker than the bones: frame their boxes too.
            if child.type == 'MESH':
                matrix = child.evaluated_get(depsgraph).matrix_world
                points += [tuple(matrix @ Vector(corner)) for corner in child.bound_box]
        for effector in rig.fabrik.effectors:
            if effector.target is not None:
                location = tuple(effector.target.evaluated_get(depsgraph).matrix_world.translation)
                paths.setdefault(effector.target.name, []).append(location)
                points.append(location)
    return {"worst": worst, "worst_turn": worst_turn, "reachable": reachable, "reached": reached, "checks": checks,
            "misses": misses, "points": points, "paths": paths}


# Rendering: Workbench, an orthographic camera framing everything the rig and its targets do.

def sheet_frames(frames, count: int) -> list[int]:
    """`count` frames spread evenly over the range, starting with its first."""
    frames = list(frames)
    return sorted({frames[(i * len(frames)) // count] for i in range(min(count, len(frames)))})


def stage_scene(scene, rig, frames, view, points, paths, size=FRAME_SIZE) -> None:
    """Camera, world, Workbench settings, and each target's path drawn as a thin tube with a ball on the target."""
    import bpy
    from mathutils import Vector

    points = list(points)
    for obj in scene.objects:
        # Props that are not part of the rig (a ball) should be in the picture too; ground planes say otherwise.
        if obj.type == 'MESH' and obj.parent is None and obj.get("fabrik_demo_frame", True):
            points += [tuple(obj.matrix_world @ Vector(corner)) for corner in obj.bound_box]
    lows = Vector(tuple(min(p[k] for p in points) for k in range(3)))
    highs = Vector(tuple(max(p[k] for p in points) for k in range(3)))
    extent = max((highs - lows).length, 1e-3)
    for name, path in paths.items():
        curve = bpy.data.curves.new(f"{name}_path", 'CURVE')
        curve.dimensions = '3D'
        curve.bevel_depth = 0.004 * extent
        curve.bevel_resolution = 2
        spline = curve.splines.new('POLY')
        spline.points.add(len(path) - 1)
        spline.points.foreach_set("co", [c for p in path for c in (*p, 1.0)])
        spline.use_cyclic_u = (Vector(path[0]) - Vector(path[-1])).length < 0.1 * extent
        path_object = bpy.data.objects.new(f"{name}_path", curve)
        path_object.color = (0.95, 0.75, 0.1, 1.0)
        scene.collection.objects.link(path_object)
        target = bpy.data.objects[name]
        marker = bpy.data.objects.new(f"{name}_marker", _ball_mesh(f"{name}_marker", 0.012 * extent))
        marker.color = (0.9, 0.1, 0.1, 1.0)
        marker.parent = target
        scene.collection.objects.link(marker)
    place_camera(scene, view, points, size)
    scene.render.engine = 'BLENDER_WORKBENCH'
    scene.render.resolution_x, scene.render.resolution_y = size
    scene.render.resolution_percentage = 100
    scene.render.image_settings.file_format = 'PNG'
    shading = scene.display.shading
    shading.light = 'STUDIO'
    # Blender's bundled "outdoor" studio light keeps ground planes light; the default one turns them dark grey.
    if "outdoor.sl" in {light.name for light in bpy.context.preferences.studio_lights}:
        shading.studio_light = "outdoor.sl"
    shading.color_type = 'OBJECT'
    shading.show_shadows = True
    shading.shadow_intensity = 0.35
    shading.show_cavity = False
    world = bpy.data.worlds.new("DemoWorld")
    world.color = (0.82, 0.84, 0.88)
    scene.world = world


def _ball_mesh(name: str, radius: float):
    """A small UV sphere mesh."""
    import bmesh
    import bpy

    bm = bmesh.new()
    bmesh.ops.create_uvsphere(bm, u_segments=16, v_segments=8, radius=radius)
    mesh = bpy.data.meshes.new(name)
    bm.to_mesh(mesh)
    bm.free()
    return mesh


def place_camera(scene, view, points, size) -> None:
    """An orthographic camera looking from direction `view` that frames all points with a margin."""
    import bpy
    from mathutils import Vector

    direction = Vector(view).normalized()
    rotation = (-direction).to_track_quat('-Z', 'Y')
    right, up = rotation @ Vector((1.0, 0.0, 0.0)), rotation @ Vector((0.0, 1.0, 0.0))
    us = [right.dot(Vector(p)) for p in points]
    vs = [up.dot(Vector(p)) for p in points]
    ws = [direction.dot(Vector(p)) for p in points]
    width, height = max(us) - min(us), max(vs) - min(vs)
    aspect = size[0] / size[1]
    center = right * (max(us) + min(us)) / 2.0 + up * (max(vs) + min(vs)) / 2.0 + direction * max(ws)
    data = bpy.data.cameras.new("DemoCamera")
    data.type = 'ORTHO'
    # The orthographic scale spans the wider side (here: the width), plus a small margin.
    data.ortho_scale = max(width, height * aspect, 1e-3) * 1.08
    depth = max(ws) - min(ws)
    data.clip_start, data.clip_end = 0.01, 10.0 * (depth + data.ortho_scale) + 10.0
    camera = bpy.data.objects.new("DemoCamera", data)
    camera.location = center + direction * (2.0 * data.ortho_scale + 1.0)
    camera.rotation_mode = 'QUATERNION'
    camera.rotation_quaternion = rotation
    scene.collection.objects.link(camera)
    scene.camera = camera


def render_frame(scene, frame: int, path: Path, size=FRAME_SIZE) -> Path:
    """Render one frame with the scene's camera to a PNG file."""
    import bpy

    scene.render.resolution_x, scene.render.resolution_y = size
    scene.frame_set(frame)
    scene.render.filepath = str(path)
    bpy.ops.render.render(write_still=True)
    return path


def compose_sheet(paths: list[Path], sheet: Path, gap: int = 4) -> Path:
    """Put rendered frames side by side (a light gap between) into one PNG, via Blender's image pixels."""
    import bpy
    import numpy as np

    tiles = []
    for path in paths:
        image = bpy.data.images.load(str(path))
        width, height = image.size
        pixels = np.empty(width * height * 4, dtype=np.float32)
        image.pixels.foreach_get(pixels)
        tiles.append(pixels.reshape(height, width, 4))
        bpy.data.images.remove(image)
    height = max(t.shape[0] for t in tiles)
    spacer = np.ones((height, gap, 4), dtype=np.float32)
    row = [tiles[0]]
    for tile in tiles[1:]:
        row += [spacer, tile]
    strip = np.concatenate(row, axis=1)
    strip[..., 3] = 1.0
    image = bpy.data.images.new(sheet.stem + "_sheet", width=strip.shape[1], height=strip.shape[0], alpha=False)
    image.pixels.foreach_set(strip.ravel())
    image.filepath_raw = str(sheet)
    image.file_format = 'PNG'
    image.save()
    bpy.data.images.remove(image)
    return sheet


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("install", "sample"):
        if sys.argv[1] == "install":
            answer = step_install(sys.argv[2])
        else:
            answer = step_sample(sys.argv[2], render="--no-render" not in sys.argv[3:])
        print("RESULT " + json.dumps(answer), flush=True)
        sys.exit(0)
    sys.exit(main())
