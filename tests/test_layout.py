"""The package's layout as docs/design.md §1 states it: the table lists exactly the folders and
top-level modules of psp/, every module says what it is for, and every import (lazy ones inside
functions and those for type checking included) points down the layers the table allows."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "psp"
DESIGN = REPO / "docs" / "design.md"
#: What a module may take from the package itself (``psp/__init__.py``): the version, for
#: provenance. ``psp.load`` is for users; inside the package its layer is imported instead.
FROM_FRONT_DOOR = {"__version__"}
#: The top-level modules ``ls psp/`` may show beside the sub-packages.
MAX_TOP_MODULES = 4


def layout_table() -> dict[str, set[str]]:
    """``{layer: layers it may import}`` from the package table of docs/design.md: a layer is
    a row's path without ``psp/`` and its suffix (``model``, ``io``; ``psp`` for
    ``psp/__init__.py``), and its imports are the backquoted names of the row's last cell."""
    text = DESIGN.read_text(encoding="utf-8")
    section = text.split("### The package", 1)[1].split("\n### ", 1)[0]
    table: dict[str, set[str]] = {}
    for row in section.splitlines():
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        path = re.fullmatch(r"`psp/([\w.]+/?)`", cells[0])
        if len(cells) != 3 or path is None:
            continue
        table[layer_of_path(path[1])] = set(re.findall(r"`(\w+)`", cells[2]))
    return table


def layer_of_path(relative: str) -> str:
    """The layer of a path below ``psp/``: its first part without ``.py``, ``psp`` for the
    package's own ``__init__.py``."""
    first = relative.split("/", 1)[0].removesuffix(".py")
    return "psp" if first == "__init__" else first


def layer_of_module(module: str) -> str:
    """The layer of a dotted module name (``psp.model.pooling`` → ``model``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "psp"


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def psp_imports(path: Path) -> list[tuple[int, str, tuple[str, ...]]]:
    """``(line, module, names)`` of every import of ``psp`` in a file, wherever it stands;
    ``names`` is empty for ``import psp.x``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [
                (node.lineno, a.name, ()) for a in node.names if a.name.split(".")[0] == "psp"
            ]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}:{node.lineno}: relative import"
            if node.module.split(".")[0] == "psp":
                found.append((node.lineno, node.module, tuple(a.name for a in node.names)))
    return found


def imported_modules(module: str, names: tuple[str, ...], known: dict[str, Path]) -> set[str]:
    """The modules an import statement loads: the module itself, or each submodule it names
    (``from psp.data import sources`` loads ``psp.data.sources``)."""
    submodules = {f"{module}.{name}" for name in names if f"{module}.{name}" in known}
    plain = [name for name in names if f"{module}.{name}" not in known]
    return submodules | ({module} if plain or not names else set())


def test_layout_table_lists_the_package():
    on_disk = {
        layer_of_path(path.name)
        for path in PACKAGE.iterdir()
        if path.suffix == ".py" or (path / "__init__.py").is_file()
    }
    assert set(layout_table()) == on_disk


def test_few_modules_beside_the_subpackages():
    top = sorted(path.name for path in PACKAGE.glob("*.py") if path.name != "__init__.py")
    assert len(top) <= MAX_TOP_MODULES, top


def test_the_allowed_imports_are_layers():
    table = layout_table()
    for layer, allowed in table.items():
        assert allowed <= set(table), f"{layer}: no such layer {sorted(allowed - set(table))}"
        assert layer not in allowed, f"{layer} lists itself"


@pytest.mark.parametrize("module", sorted(modules()))
def test_module_says_what_it_is_for(module):
    docstring = ast.get_docstring(ast.parse(modules()[module].read_text(encoding="utf-8")))
    assert docstring and len(docstring.split()) >= 5, f"{module}: no docstring naming its job"


def test_imports_point_down_the_layers():
    table, known = layout_table(), modules()
    wrong = []
    for module, path in known.items():
        own = layer_of_module(module)
        for line, target, names in psp_imports(path):
            where = f"{path.relative_to(REPO)}:{line}"
            if target == "psp" and set(names) <= FROM_FRONT_DOOR and names:
                continue
            for loaded in imported_modules(target, names, known):
                layer = layer_of_module(loaded)
                if layer != own and layer not in table[own]:
                    wrong.append(f"{where}: {own} imports {loaded} ({layer})")
    assert not wrong, "\n".join(wrong)


def test_no_import_cycles():
    """No module reaches itself through the modules it imports (the version aside), so each can
    be read, and tested, after the ones below it."""
    known = modules()
    graph = {
        module: {
            loaded
            for _, target, names in psp_imports(path)
            if not (target == "psp" and set(names) <= FROM_FRONT_DOOR and names)
            for loaded in imported_modules(target, names, known)
            if loaded != module
        }
        for module, path in known.items()
    }
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        if module in path:
            cycle = path[path.index(module) :] + (module,)
            pytest.fail("import cycle: " + " -> ".join(cycle))
        if module in done:
            return
        for imported in sorted(graph.get(module, ())):
            visit(imported, (*path, module))
        done.add(module)

    for module in sorted(graph):
        visit(module, ())
