"""The architecture of docs/index.md, checked: packages import only the layers below them, no cycles.

Imports are read with ``ast`` from every module under ``mmsctl/``, function-level and
``TYPE_CHECKING`` imports included (a lazy import is still a dependency). A "unit" is a
package (``engine``) or a top-level module (``errors``).
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path
from typing import Iterator

PACKAGE = Path(__file__).resolve().parents[1] / "mmsctl"

#: Lowest first. A unit may import units of lower layers only (never one of its own layer).
LAYERS: list[set[str]] = [
    {"exit_codes", "atomic", "http1"},  # the numbers errors carry; the one atomic file write; HTTP/1.1 on the wire (httptools only)
    {"errors"},  # the MmsError tree
    # settings, token files, the MMS error body, name=location, public addresses, the shared CA store
    {"config", "tokens", "error_body", "names", "addresses", "tls"},
    {"local_servers"},  # the registry of local servers (server writes, client and CLI read)
    {"engine"},  # running a model: handler contract, ServiceSpec, the worker runtime; the only mxnet
    {"archive"},  # .mar/.model/.tar.gz: packing (bundles the built-in handler), opening, ONNX import
    {"zoo"},  # names -> archives: catalog, cache, downloads, untrained builds
    {"predict", "server", "client", "cloud"},  # predict core, model server, HTTP client, AWS (Lambda's contract too)
    # mmsctl top over the client; loadtest (the `mmsctl bench` command's load generator) over client and predict inputs;
    # the Lambda handler (and run-local) over the predict core and the control plane; SageMaker's `serve` entry (and
    # its run-local) over the server and the contract in cloud/sagemaker
    {"tui", "loadtest", "lambda_", "sagemaker"},
    {"cli"},  # the typer commands, over everything
    {"__main__"},
]
#: Module cycles inside a package that are known and owned elsewhere (they must not grow).
KNOWN_MODULE_CYCLES: list[set[str]] = []
#: Inside ``cloud``, lowest first: AWS plumbing, what an instance boots, then the three products.
#: A sub-package imports lower layers and never one beside it (a product never imports another).
CLOUD_LAYERS: list[set[str]] = [{"aws"}, {"instance"}, {"ec2", "fleet", "lambda_", "sagemaker"}]
#: Lambda and SageMaker need nothing of EC2 instances, though ``instance`` is below them.
CLOUD_FORBIDDEN: set[tuple[str, str]] = {("lambda_", "instance"), ("sagemaker", "instance")}
#: What the Lambda handler's side may take from ``cloud``: the plumbing and the contract with the control plane.
LAMBDA_MAY_IMPORT = ("mmsctl.cloud.aws", "mmsctl.cloud.lambda_.env", "mmsctl.cloud.lambda_.events",
                         "mmsctl.cloud.lambda_.outputs", "mmsctl.cloud.lambda_.manifest")
#: What SageMaker's container side may take from ``cloud``: the plumbing, its contract and model packing, and the
#: image's names (the entry points, the baked model's folder, the build context's manifest).
SAGEMAKER_MAY_IMPORT = ("mmsctl.cloud.aws", "mmsctl.cloud.sagemaker.contract", "mmsctl.cloud.sagemaker.model_data",
                        "mmsctl.cloud.lambda_.env", "mmsctl.cloud.lambda_.manifest")
#: The one door to boto3: no other module imports boto3 or botocore.
BOTO_DOOR = "mmsctl.cloud.aws.session"


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


def _external(source: str) -> set[str]:
    """The top-level names of the absolute imports in *source* (``botocore`` for ``import botocore.session``)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found


def _unit(module: str) -> str:
    """``mmsctl.engine.spec`` -> ``engine``; ``mmsctl.errors`` -> ``errors``; ``mmsctl`` -> ``mmsctl``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "mmsctl"


@functools.cache
def module_graph() -> dict[str, set[str]]:
    """Module -> the mmsctl modules it imports. Built on first use, not at collection: parsing every module
    costs ~1 s, which each pytest worker would pay whether or not it runs these tests."""
    return {m: set(_imports(m, p)) for m, p in MODULES.items()}


@functools.cache
def unit_graph() -> dict[str, set[str]]:
    """Unit (``engine``, ``cloud``, …) -> the units it imports."""
    graph: dict[str, set[str]] = {}
    for module, targets in module_graph().items():
        graph.setdefault(_unit(module), set()).update(_unit(t) for t in targets if _unit(t) != _unit(module))
    return graph


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
    assert "mmsctl.engine.spec" in module_graph()["mmsctl.archive.model_archive"]  # module level
    assert "mmsctl.engine.mxnet_compat" in module_graph()["mmsctl.zoo.untrained"]  # inside a function
    assert "mmsctl.zoo" in module_graph()["mmsctl.predict.loading"]  # `from mmsctl.zoo import resolve_model`
    assert {"engine", "archive", "zoo"} <= unit_graph()["predict"]


def test_no_package_level_import_cycle() -> None:
    assert _cycles(unit_graph()) == []


def test_no_new_module_level_import_cycle() -> None:
    cycles = [c for c in _cycles(module_graph()) if c not in KNOWN_MODULE_CYCLES]
    assert cycles == []


def test_every_package_has_a_layer() -> None:
    """A new package or top-level module must be placed in LAYERS (and in docs/index.md)."""
    placed = set().union(*LAYERS)
    assert sorted(set(unit_graph()) - placed - {"mmsctl"}) == []


def test_each_package_imports_only_layers_below_it() -> None:
    layer_of = {unit: n for n, layer in enumerate(LAYERS) for unit in layer}
    wrong = sorted(
        f"{unit} -> {target}"
        for unit, targets in unit_graph().items() if unit in layer_of
        for target in targets if target != "mmsctl" and layer_of.get(target, len(LAYERS)) >= layer_of[unit]
    )
    assert wrong == []


def test_the_package_root_imports_nothing_of_mmsctl() -> None:
    """Everyone imports ``mmsctl`` for ``__version__``; it must stay at the bottom."""
    assert unit_graph().get("mmsctl", set()) == set()


def test_the_docs_diagram_names_every_package() -> None:
    """docs/index.md draws these layers; a package missing from its diagram makes the map wrong."""
    text = (PACKAGE.parent / "docs" / "index.md").read_text(encoding="utf-8")
    diagram = text.split("## Architecture", 1)[1].split("```", 2)[1]
    words = set(re.findall(r"[a-z_][a-z_0-9]*", diagram))
    assert sorted(set().union(*LAYERS) - {"__main__"} - words) == []


def _cloud_part(module: str) -> str:
    """``mmsctl.cloud.fleet.create`` -> ``fleet``; ``mmsctl.cloud`` (the package itself) -> ''."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["mmsctl", "cloud"] else ""


def _cloud_faults(graph: dict[str, set[str]]) -> list[str]:
    """Every import inside ``cloud`` that breaks CLOUD_LAYERS, and every module outside its sub-packages."""
    layer_of = {part: n for n, layer in enumerate(CLOUD_LAYERS) for part in layer}
    faults = []
    for module, targets in graph.items():
        source = _cloud_part(module)
        if not source:
            continue
        if source not in layer_of:
            faults.append(f"{module}: not in a cloud sub-package of CLOUD_LAYERS")
            continue
        for target in targets:
            dest = _cloud_part(target)
            if not dest or dest == source or dest not in layer_of:
                continue
            if layer_of[dest] >= layer_of[source] or (source, dest) in CLOUD_FORBIDDEN:
                faults.append(f"{module} -> {target}")
    return sorted(faults)


def _container_faults(graph: dict[str, set[str]], package: str = "mmsctl.lambda_",
                      allowed: tuple[str, ...] = LAMBDA_MAY_IMPORT) -> list[str]:
    return sorted(
        f"{module} -> {target}"
        for module, targets in graph.items() if module == package or module.startswith(package + ".")
        for target in targets if target.startswith("mmsctl.cloud")
        and not any(target == ok or target.startswith(ok + ".") for ok in allowed)
    )


def test_cloud_sub_packages_keep_their_order() -> None:
    """Plumbing below what an instance boots, below the products; products never import each other."""
    assert {"mmsctl.cloud.instance.ei", "mmsctl.cloud.aws.session"} <= module_graph()["mmsctl.cloud.fleet.create"]
    assert _cloud_faults(module_graph()) == []


def test_the_cloud_order_check_catches_a_bad_graph() -> None:
    bad = {
        "mmsctl.cloud.aws.session": {"mmsctl.cloud.instance.ami"},  # plumbing over an instance part
        "mmsctl.cloud.ec2.launch": {"mmsctl.cloud.fleet.asg", "mmsctl.cloud.instance.ei"},  # product -> product
        "mmsctl.cloud.lambda_.build": {"mmsctl.cloud.instance.userdata"},  # Lambda needs nothing of instances
        "mmsctl.cloud.stray": set(),  # a module outside the sub-packages
        "mmsctl.cloud.fleet.create": {"mmsctl.cloud.instance.ei", "mmsctl.cloud.aws.tags", "mmsctl.cloud.fleet.asg"},
    }
    assert _cloud_faults(bad) == [
        "mmsctl.cloud.aws.session -> mmsctl.cloud.instance.ami",
        "mmsctl.cloud.ec2.launch -> mmsctl.cloud.fleet.asg",
        "mmsctl.cloud.lambda_.build -> mmsctl.cloud.instance.userdata",
        "mmsctl.cloud.stray: not in a cloud sub-package of CLOUD_LAYERS",
    ]


def test_the_lambda_handler_takes_only_the_plumbing_and_the_contract_from_cloud() -> None:
    """The handler's side shares env, events, outputs and the image manifest with the control plane; nothing else."""
    assert "mmsctl.cloud.lambda_.events" in module_graph()["mmsctl.lambda_.runtime"]
    assert _container_faults(module_graph()) == []
    bad = {"mmsctl.lambda_.run_local": {"mmsctl.cloud.lambda_.build", "mmsctl.cloud.lambda_.env",
                                        "mmsctl.cloud.aws.errors", "mmsctl.cloud.lambda_.environment"}}
    assert _container_faults(bad) == ["mmsctl.lambda_.run_local -> mmsctl.cloud.lambda_.build",
                                      "mmsctl.lambda_.run_local -> mmsctl.cloud.lambda_.environment"]


def test_only_the_session_module_imports_boto3_or_botocore() -> None:
    """Everything else reaches AWS, and botocore's exception types, through ``cloud/aws/session.py``."""
    importers = sorted(m for m, path in MODULES.items()
                       if {"boto3", "botocore"} & _external(path.read_text(encoding="utf-8")))
    assert importers == [BOTO_DOOR]
    # The reader sees a function-level import, and leaves a relative or unrelated one alone.
    assert "botocore" in _external("def f():\n    import botocore.session\n")
    assert "boto3" in _external("def f():\n    from boto3 import Session\n")
    assert not {"boto3", "botocore"} & _external("from .botocore import x\nimport mmsctl.boto\n")


def test_sagemakers_container_side_takes_only_its_contract_from_cloud() -> None:
    """The ``serve`` entry and run-local share the contract, the packing and the image's names with the control
    plane; nothing else (the control plane never imports the container's side: the layers say so)."""
    assert "mmsctl.cloud.sagemaker.contract" in module_graph()["mmsctl.sagemaker.serve"]
    assert _container_faults(module_graph(), "mmsctl.sagemaker", SAGEMAKER_MAY_IMPORT) == []
    bad = {"mmsctl.sagemaker.run_local": {"mmsctl.cloud.sagemaker.deploy.run", "mmsctl.cloud.sagemaker.contract"}}
    assert _container_faults(bad, "mmsctl.sagemaker", SAGEMAKER_MAY_IMPORT) == [
        "mmsctl.sagemaker.run_local -> mmsctl.cloud.sagemaker.deploy.run"]


def test_the_servers_workers_know_nothing_of_http() -> None:
    """server/workers/ (queues, workers, supervision) is below the HTTP paths and the v2 protocol: it imports
    neither, so either path, or another, can drive it."""
    assert "mmsctl.server.workers.model" in module_graph()["mmsctl.server.workers.manager"]
    faults = sorted(f"{module} -> {target}" for module, targets in module_graph().items()
                    if module.startswith("mmsctl.server.workers.")
                    for target in targets if target.startswith(("mmsctl.server.http", "mmsctl.server.v2")))
    assert faults == []

