"""The shape of the code (docs/design.md, "Layers"): which folder may import which, no import
cycles, no I/O library in the domain; and the command runs from the installed package."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("domain", "projections", "api", "workers", "scripts")

# What each layer may import besides itself.  Arrows point down: the entry points (api,
# workers) stand on projections, which stand on the domain; scripts/ is the command line and
# the wiring, and may use everything.
MAY_IMPORT = {
    "domain": set(),
    "projections": {"domain"},
    "api": {"domain", "projections"},
    "workers": {"domain", "projections"},
    "scripts": {"domain", "projections", "api", "workers"},
}
# Libraries that do I/O: none of them in the domain (docs/design.md, "Layers").
IO_LIBRARIES = {"psycopg", "psycopg_pool", "requests", "urllib3", "serial", "falcon", "gunicorn", "socket",
                "subprocess", "http", "ssl", "pgserver", "sqlite3", "select", "fcntl", "termios", "pty"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return "sandesh." + ".".join(parts)


def imports(path: Path, source: str | None = None) -> list[tuple[str, int, bool]]:
    """(imported module, line, at module level) for every import statement in the file."""
    tree = ast.parse(source if source is not None else path.read_text())
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    top_level = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno, id(node) in top_level) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                name = f"{base}.{node.module}" if node.module else base
                # `from . import x` names submodules
                found += [(f"{name}.{a.name}" if not node.module else name, node.lineno, id(node) in top_level)
                          for a in node.names]
            else:
                found.append((node.module or "", node.lineno, id(node) in top_level))
    return found


def sources() -> list[Path]:
    return sorted(p for layer in LAYERS for p in (ROOT / layer).rglob("*.py"))


def violations(path: Path, source: str | None = None) -> list[str]:
    layer = path.relative_to(ROOT).parts[0]
    problems = []
    for name, line, _ in imports(path, source):
        first = name.split(".")[0]
        where = f"{path.relative_to(ROOT)}:{line} imports {name}"
        if first in LAYERS:
            problems.append(f"{where}: import it as sandesh.{name} (the installed name)")
        elif first == "sandesh" and name.count(".") >= 1:
            target = name.split(".")[1]
            if target != layer and target not in MAY_IMPORT[layer]:
                problems.append(f"{where}: {layer}/ may not import {target}/")
        elif layer == "domain" and first in IO_LIBRARIES:
            problems.append(f"{where}: the domain imports no I/O library")
    return problems


def test_each_layer_imports_only_the_layers_below_it():
    problems = [problem for path in sources() for problem in violations(path)]
    assert problems == []


@pytest.mark.parametrize("layer, source, complaint", [
    ("projections", "from sandesh.api.app import create_app\n", "projections/ may not import api/"),
    ("projections", "def f():\n    from sandesh.workers import modem\n", "projections/ may not import workers/"),
    ("domain", "from sandesh.projections import db\n", "domain/ may not import projections/"),
    ("domain", "import psycopg\n", "the domain imports no I/O library"),
    ("api", "from sandesh.workers.webhook_guard import check_url\n", "api/ may not import workers/"),
    ("workers", "from ..scripts import bootstrap\n", "workers/ may not import scripts/"),
    ("workers", "from domain.pdu import encode_submit\n", "import it as sandesh.domain.pdu"),
])
def test_the_layer_check_catches_an_upward_import(layer, source, complaint):
    """The check above is not vacuous: each kind of breach, planted in a file, is reported."""
    planted = ROOT / layer / "planted.py"
    problems = violations(planted, source)
    assert len(problems) == 1 and complaint in problems[0], problems


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def module_graph() -> dict[str, set[str]]:
    """Which of our modules each module imports, at module level or inside a function."""
    paths = {module_name(p): p for p in sources()}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        targets = set()
        for imported, _, _ in imports(path):
            # `from sandesh.projections import db` names the module sandesh.projections.storage.db
            while imported and imported not in paths:
                imported = imported.rpartition(".")[0]
            if imported and imported != name and not imported.endswith(("domain", "projections", "api", "workers",
                                                                         "scripts")):
                targets.add(imported)
        graph[name] = targets
    return graph


def test_no_module_imports_itself_through_others():
    assert cycles(module_graph()) == []


def test_the_cycle_check_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
