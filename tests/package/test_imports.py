"""The add-on's imports, read from its source: the layers point down, no module imports itself round a loop, and
an import inside a function stands only where Blender needs it there."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "fabrik_addon"

#: The imports made inside a function (file, module), each for a reason Blender gives.
INSIDE_FUNCTIONS = {
    # `core` imports without bpy: registering pulls in the bridge only when Blender registers the add-on.
    ("fabrik_addon/__init__.py", "fabrik_addon.blender"),
    # Some Linux distributions' Blender has no numpy: registering asks, and registers `needs_numpy` instead.
    ("fabrik_addon/__init__.py", "numpy"),
    ("fabrik_addon/__init__.py", "fabrik_addon.needs_numpy"),
    # The command line explains itself, and says what is missing, where bpy cannot be imported.
    ("fabrik_addon/__main__.py", "bpy"),
    ("fabrik_addon/__main__.py", "fabrik_addon"),
    ("fabrik_addon/__main__.py", "fabrik_addon.blender.bake.baking"),
    # No GPU and no fonts in background mode: drawing imports them when it draws.
    ("fabrik_addon/blender/rig/compat.py", "gpu"),
    ("fabrik_addon/blender/rig/compat.py", "blf"),
    ("fabrik_addon/blender/ui/overlay.py", "gpu"),
    ("fabrik_addon/blender/ui/overlay.py", "gpu_extras.batch"),
    ("fabrik_addon/blender/ui/overlay.py", "blf"),
    ("fabrik_addon/blender/ui/overlay.py", "bpy_extras.view3d_utils"),
    ("fabrik_addon/blender/ui/wrapping.py", "blf"),
}

#: Each layer's folders (or modules beside them) from the bottom up: a module imports none of a folder above its
#: own, so the tree reads as the architecture (docs/solver.md's layer tables, top down).
LEVELS = {
    "core": {"math": 1, "model": 2, "motion": 2, "goals": 3, "chain": 4, "joints": 4, "compared": 5, "solving": 6},
    "blender": {
        "app_handlers": 0, "rig": 1, "long_work": 1, "effectors": 2, "solve": 3, "live": 4, "bake": 5, "retarget": 6, "ui": 7,
    },
}

#: What `core` never imports: it is the solver library, tested and benchmarked without Blender.
NOT_IN_CORE = ("bpy", "mathutils", "gpu", "blf", "bpy_extras", "gpu_extras", "fabrik_addon.blender")


def _name(path: Path) -> str:
    """The module's dotted name."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "presets" not in p.parts}


def _resolved(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    """The modules one import statement imports, in a module of `package`: `from package import module` imports
    the module, `from module import name` the module itself."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        parts = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join(parts + ([base] if base else []))
    return [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]


def _imports(path: Path, typing: bool = True) -> list[tuple[str, bool]]:
    """Every module the file imports, with whether the import stands inside a function (`typing`: with those made
    for type hints alone, under `if TYPE_CHECKING:`, which never run)."""
    tree = ast.parse(path.read_text())
    inside = {
        id(node) for function in ast.walk(tree) if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
        for node in ast.walk(function)
    }
    hints = {
        id(node) for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test) for node in ast.walk(block)
    }
    module = _name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    return [
        (target, id(node) in inside)
        for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom)) and (typing or id(node) not in hints)
        for target in _resolved(node, package)
    ]


def _graph() -> dict[str, set[str]]:
    """Each module and the add-on's modules it imports when it is imported."""
    return {
        name: {
            target for target, inside in _imports(path, typing=False)
            if not inside and target in MODULES and target != name
        }
        for name, path in MODULES.items()
    }


def test_modules_are_read():
    """The walk sees the add-on's modules in both layers (so the checks below have something to check)."""
    assert "fabrik_addon.core.chain.fabrik" in MODULES and "fabrik_addon.blender.live.handlers" in MODULES
    graph = _graph()
    assert "fabrik_addon.core.model.problem" in graph["fabrik_addon.core.solving.plan"]


def test_no_module_imports_itself_round_a_loop():
    """A module's imports never lead back to it."""
    graph = _graph()
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(name: str) -> None:
        state[name] = 1
        path.append(name)
        for target in sorted(graph[name]):
            if state.get(target) == 1:
                loop = path[path.index(target):] + [target]
                pytest.fail("import cycle: " + " -> ".join(loop))
            if target not in state:
                visit(target)
        path.pop()
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name)


def _folder(name: str) -> tuple[str, str] | None:
    """A module's layer and the folder (or module beside the folders) it is in, for `LEVELS`."""
    parts = name.split(".")
    return (parts[1], parts[2]) if len(parts) > 2 and parts[1] in LEVELS else None


def test_every_folder_is_placed_in_its_layer():
    """Every folder and module of both layers has its level (a new one must be placed in the picture)."""
    for name in MODULES:
        where = _folder(name)
        if where is not None:
            layer, folder = where
            assert folder in LEVELS[layer], f"{name}: place '{folder}' in LEVELS['{layer}']"


def test_imports_point_down_the_layers():
    """No module imports one of a folder above its own, nor one of another folder on its level."""
    for name, targets in _graph().items():
        here = _folder(name)
        if here is None:
            continue
        for target in targets:
            there = _folder(target)
            if there is None or there[0] != here[0] or there[1] == here[1]:
                continue
            levels = LEVELS[here[0]]
            assert levels[there[1]] < levels[here[1]], f"{name} imports {target}, which is not below it"


def test_core_never_imports_blender():
    """No module of `core` imports bpy, mathutils or the bridge, not even inside a function."""
    for name, path in MODULES.items():
        if not name.startswith("fabrik_addon.core"):
            continue
        for target, _inside in _imports(path):
            assert not any(target == banned or target.startswith(banned + ".") for banned in NOT_IN_CORE), (
                f"{name} imports {target}"
            )


def test_imports_inside_functions_only_where_listed():
    """An import inside a function is one of the few Blender asks for (`INSIDE_FUNCTIONS`), each with its reason
    beside it in the code."""
    found = {
        (str(path.relative_to(ROOT)), target)
        for path in MODULES.values() for target, inside in _imports(path) if inside
    }
    assert found == INSIDE_FUNCTIONS
