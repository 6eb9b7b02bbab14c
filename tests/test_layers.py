"""The architecture of docs/index.md, checked: packages import only the layers below them, no cycles.

Imports are read with ``ast`` from every module under ``mmsctl/``, function-level and
``TYPE_CHECKING`` imports included (a lazy import is still a dependency). A "unit" is a
package (``engine``) or a top-level module (``errors``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Iterator

PACKAGE = Path(__file__).resolve().parents[1] / "mmsctl"

#: Lowest first. A unit may import units of lower layers only (never one of its own layer).
LAYERS: list[set[str]] = [
    {"exit_codes"},  # the numbers errors carry
    {"errors"},  # the MmsError tree
    {"config", "tokens", "error_body", "names"},  # settings, token files, the MMS error body, name=location
    {"instances"},  # the local-instance registry (server writes, client and CLI read)
    {"engine"},  # running a model: handler contract, ServiceSpec, the worker runtime; the only mxnet
    {"archive"},  # .mar/.model/.tar.gz: packing (bundles the built-in handler), opening, ONNX import
    {"zoo"},  # names -> archives: catalog, cache, downloads, untrained builds
    {"predict", "server", "client", "cloud"},  # predict core, model server, HTTP client, AWS (Lambda's contract too)
    # mmsctl top over the client; loadtest (the `mmsctl bench` command's load generator) over client and predict inputs;
    # the Lambda handler (and run-local) over the predict core and the control plane
    {"tui", "loadtest", "serverless"},
    {"cli"},  # the typer commands, over everything
    {"__main__"},
]
#: Module cycles inside a package that are known and owned elsewhere (they must not grow).
KNOWN_MODULE_CYCLES: list[set[str]] = []


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _owner(name: str) -> str:
    """The module of *name* (``mmsctl.engine.spec.ServiceSpec`` -> ``mmsctl.engine.spec``)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def _imports(module: str, path: Path) -> Iterator[str]:
    """Every mmsctl module *module* imports, wherever the import statement is."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".") if is_package else module.split(".")[:-1]
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join(parts + ([base] if base else []))
            targets = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            if target == "mmsctl" or target.startswith("mmsctl."):
                owner = _owner(target)
                if owner and owner != module:
                    yield owner


def _unit(module: str) -> str:
    """``mmsctl.engine.spec`` -> ``engine``; ``mmsctl.errors`` -> ``errors``; ``mmsctl`` -> ``mmsctl``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "mmsctl"


MODULE_GRAPH = {m: set(_imports(m, p)) for m, p in MODULES.items()}
UNIT_GRAPH: dict[str, set[str]] = {}
for _m, _targets in MODULE_GRAPH.items():
    UNIT_GRAPH.setdefault(_unit(_m), set()).update(_unit(t) for t in _targets if _unit(t) != _unit(_m))


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_reader_sees_function_level_and_relative_imports() -> None:
    """The parser is what the other tests stand on: it must see the imports that matter."""
    assert "mmsctl.engine.spec" in MODULE_GRAPH["mmsctl.archive.model_archive"]  # module level
    assert "mmsctl.engine.mxnet_compat" in MODULE_GRAPH["mmsctl.zoo.untrained"]  # inside a function
    assert "mmsctl.zoo" in MODULE_GRAPH["mmsctl.predict.loading"]  # `from mmsctl.zoo import resolve_model`
    assert {"engine", "archive", "zoo"} <= UNIT_GRAPH["predict"]


def test_no_package_level_import_cycle() -> None:
    assert _cycles(UNIT_GRAPH) == []


def test_no_new_module_level_import_cycle() -> None:
    cycles = [c for c in _cycles(MODULE_GRAPH) if c not in KNOWN_MODULE_CYCLES]
    assert cycles == []


def test_every_package_has_a_layer() -> None:
    """A new package or top-level module must be placed in LAYERS (and in docs/index.md)."""
    placed = set().union(*LAYERS)
    assert sorted(set(UNIT_GRAPH) - placed - {"mmsctl"}) == []


def test_each_package_imports_only_layers_below_it() -> None:
    layer_of = {unit: n for n, layer in enumerate(LAYERS) for unit in layer}
    wrong = sorted(
        f"{unit} -> {target}"
        for unit, targets in UNIT_GRAPH.items() if unit in layer_of
        for target in targets if target != "mmsctl" and layer_of.get(target, len(LAYERS)) >= layer_of[unit]
    )
    assert wrong == []


def test_the_package_root_imports_nothing_of_mmsctl() -> None:
    """Everyone imports ``mmsctl`` for ``__version__``; it must stay at the bottom."""
    assert UNIT_GRAPH.get("mmsctl", set()) == set()


def test_the_docs_diagram_names_every_package() -> None:
    """docs/index.md draws these layers; a package missing from its diagram makes the map wrong."""
    text = (PACKAGE.parent / "docs" / "index.md").read_text(encoding="utf-8")
    diagram = text.split("## Architecture", 1)[1].split("```", 2)[1]
    words = set(re.findall(r"[a-z_]+", diagram))
    assert sorted(set().union(*LAYERS) - {"__main__"} - words) == []
