# SPDX-License-Identifier: GPL-3.0-or-later
"""Notice for the extension zip installed as a legacy add-on (Blender 3.4 to 4.1): says which zip to install.

Blender 4.2+ installs the extension zip as an extension and never imports this file. Older Blender unpacks the
zip straight into its add-ons folder, where this is the one module it lists: the name and warning in the add-on
list say what happened, and enabling it takes the unpacked files out again and fails with the same instructions.
tools/build.py checks that the zip name below matches the manifest's version.
"""

bl_info = {
    "name": "FABRIK IK (wrong package: install fabrik_ik-0.1.0-legacy.zip)",
    "author": "FABRIK for Blender developers",
    "version": (0, 1, 0),
    "blender": (3, 4, 0),
    "location": "Edit > Preferences > Add-ons",
    "description": "This is the zip for Blender 4.2 and newer; for this Blender install fabrik_ik-0.1.0-legacy.zip",
    "warning": "Wrong package for this Blender: remove it and install fabrik_ik-0.1.0-legacy.zip",
    "category": "Animation",
}

#: What the extension zip unpacks into the add-ons folder beside this file (this file last), and a line each
#: holds when it is ours: nothing else is ever removed.
UNPACKED = (
    ("__init__.py", "from .fabrik_addon import register"),
    ("blender_manifest.toml", 'id = "fabrik_ik"'),
    ("README.md", "# FABRIK IK for Blender"),
    ("LICENSE", "GNU GENERAL PUBLIC LICENSE"),
    ("fabrik_addon", "FABRIK inverse kinematics for Blender"),
    ("fabrik_ik_wrong_package.py", "fabrik_ik-0.1.0-legacy.zip"),
)


def _ours(path: str, marker: str) -> bool:
    """Whether a file (or a package folder, by its __init__.py) holds the marker line of ours."""
    import os

    if os.path.isdir(path):
        path = os.path.join(path, "__init__.py")
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return marker in handle.read()
    except OSError:
        return False


def remove_unpacked() -> list[str]:
    """Remove what this zip unpacked beside this file (each checked to be ours); the names it could not.
    Only in an add-ons folder that holds this zip's manifest: nowhere else (a checkout) is anything removed."""
    import os
    import shutil

    folder = os.path.dirname(os.path.abspath(__file__))
    manifest = os.path.join(folder, "blender_manifest.toml")
    if os.path.basename(folder) != "addons" or not _ours(manifest, UNPACKED[1][1]):
        return []
    left = []
    for name, marker in UNPACKED:
        path = os.path.join(folder, name)
        if not os.path.exists(path) or not _ours(path, marker):
            continue
        try:
            shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
        except OSError:
            left.append(name)
    # Python's cache of this module (the folder may hold other add-ons' caches: only ours goes).
    cache = os.path.join(folder, "__pycache__")
    for name in os.listdir(cache) if os.path.isdir(cache) else ():
        if name.startswith("fabrik_ik_wrong_package."):
            try:
                os.remove(os.path.join(cache, name))
            except OSError:
                pass  # (a cache file left behind does no harm)
    return left


def register() -> None:
    """Take the wrongly unpacked files out again and refuse to enable, saying which zip to install."""
    import os

    folder = os.path.dirname(os.path.abspath(__file__))
    left = remove_unpacked()
    done = (f"could not remove {', '.join(left)} from {folder}: delete them by hand" if left
            else "its files were removed from the add-ons folder again")
    raise RuntimeError(
        "This is FABRIK IK's zip for Blender 4.2 and newer, and " + done + ". "
        "Install fabrik_ik-0.1.0-legacy.zip instead (Preferences > Add-ons > Install)."
    )


def unregister() -> None:
    """Nothing was registered."""
