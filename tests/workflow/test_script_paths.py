"""No rule script takes a file or folder path from ``params``.

A storage plugin stages a job's inputs and uploads its outputs; a path that reaches a script
through ``params`` names the configured location instead, which under the plugin holds
nothing (tests/workflow/test_storage.py runs the workflow that way). This test reads every
script in workflow_scripts/ and follows ``snakemake.params`` values, through the names they are
assigned to, into the psp calls: none may land in a parameter that takes a path.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import pathlib
import re

import pytest

from psp.workflow.jobs import staged_root

from .conftest import REPO

SCRIPTS = sorted((REPO / "workflow_scripts").glob("*.py"))

# A parameter takes a path when its annotation says so, or, unannotated, when its name does.
PATH_ANNOTATION = re.compile(r"PathLike|\bPath\b")
PATH_NAME = re.compile(r"(^|_)(path|dir|root|file)s?$")
# Builtins that take a path in every argument.
PATH_BUILTINS = (builtins.open, pathlib.Path)


def _is_params(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "params"
        and isinstance(node.value, ast.Name)
        and node.value.id == "snakemake"
    )


def _resolve(node: ast.AST, namespace: dict):
    """The object a call's ``func`` names (``prepare_pairs``, ``psp.load``), or None."""
    if isinstance(node, ast.Name):
        return namespace.get(node.id, getattr(builtins, node.id, None))
    if isinstance(node, ast.Attribute):
        return getattr(_resolve(node.value, namespace), node.attr, None)
    return None


def _tainted(expr: ast.AST, names: set[str], namespace: dict) -> bool:
    """Whether ``expr`` reads ``snakemake.params`` or a name assigned from it.

    ``staged_root`` is the way out: whatever layout names it is given, its answer is where the
    job's own input or output files lie.
    """
    if isinstance(expr, ast.Call) and _resolve(expr.func, namespace) is staged_root:
        return False
    if _is_params(expr) or (isinstance(expr, ast.Name) and expr.id in names):
        return True
    return any(_tainted(child, names, namespace) for child in ast.iter_child_nodes(expr))


def _tainted_names(tree: ast.Module, namespace: dict) -> set[str]:
    names: set[str] = set()
    while True:
        found = {
            target.id
            for node in ast.walk(tree)
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign))
            and node.value is not None
            and _tainted(node.value, names, namespace)
            for target in ast.walk(node)
            if isinstance(target, ast.Name) and isinstance(target.ctx, ast.Store)
        }
        if found <= names:
            return names
        names |= found


def _takes_path(param: inspect.Parameter) -> bool:
    if param.annotation is not inspect.Parameter.empty:
        return bool(PATH_ANNOTATION.search(str(param.annotation)))
    return bool(PATH_NAME.search(param.name))


def _bound_nodes(value) -> list[ast.AST]:
    """The arguments bound to one parameter: several for a ``*args`` or ``**kwargs`` one."""
    if isinstance(value, dict):
        return list(value.values())
    return list(value) if isinstance(value, tuple) else [value]


def params_paths(source: str, name: str = "<script>") -> list[str]:
    """Calls in a script's ``source`` that give a path parameter a value from ``params``."""
    tree = ast.parse(source)
    namespace: dict = {}
    imports = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    exec(compile(ast.Module(body=imports, type_ignores=[]), name, "exec"), namespace)
    tainted = _tainted_names(tree, namespace)
    found = []
    for call in (node for node in ast.walk(tree) if isinstance(node, ast.Call)):
        func = _resolve(call.func, namespace)
        label = f"{name}:{call.lineno}: {ast.unparse(call.func)}"
        if func in PATH_BUILTINS:
            found += [label for arg in call.args if _tainted(arg, tainted, namespace)]
            continue
        # psp.workflow.jobs maps config names to the layout; its paths are relative ones.
        module = getattr(func, "__module__", None) or ""
        if not module.startswith("psp") or module == "psp.workflow.jobs":
            continue
        try:
            signature = inspect.signature(func)
            bound = signature.bind_partial(
                *(arg for arg in call.args if not isinstance(arg, ast.Starred)),
                **{kw.arg: kw.value for kw in call.keywords if kw.arg is not None},
            )
        except (TypeError, ValueError):
            continue
        found += [
            f"{label}({param}=...)"
            for param, value in bound.arguments.items()
            if _takes_path(signature.parameters[param])
            and any(_tainted(arg, tainted, namespace) for arg in _bound_nodes(value))
        ]
    return found


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_scripts_take_no_path_from_params(script):
    assert params_paths(script.read_text(), script.name) == []


def test_a_path_from_params_is_found():
    """The check itself: the ways the scripts used to take paths are all caught."""
    source = """
from pathlib import Path
import psp
from psp.data.prepare import prepare_pairs
from psp.train import train
job = snakemake.params.job
prepare_pairs(
    job["data_root"], model_type="bitext", corpora=[], languages=[], filters={},
    out_pairs=snakemake.output.pairs, out_stats="stats.json",
)
model = psp.load(snakemake.params.model)
work_dir = Path(snakemake.output.log).parent
train(
    None, snakemake.input.h5, snakemake.input.spm, model_dir="models/x",
    work_dir=snakemake.params.work,
)
"""
    found = params_paths(source)
    assert [line.split(": ", 1)[1] for line in found] == [
        "prepare_pairs(data_root=...)",
        "psp.load(path=...)",
        "train(work_dir=...)",
    ]
