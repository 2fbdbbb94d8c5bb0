"""The shape of the house (docs/architecture.md), read from the source: only ``bots``,
``memory_core`` and ``config`` are importable; ``memory_core`` imports no platform, web or CLI
library and no front door; its sub-packages form layers with no import running back up; no
import cycle anywhere, counting imports inside functions; no module over 600 lines, and in
``memory_core`` no class over 350 and no function over 80 (save a short allow-list); only
``memory_core/store`` talks to Redis (imports redis, translates its errors).

The rules are checked on the real tree, and each checker is first shown to catch a breach
on a small tree written for the purpose (a rule that cannot fail proves nothing)."""

from __future__ import annotations

import ast
import tomllib
from collections import defaultdict
from pathlib import Path

import pytest

from tests.helpers import ROOT

PACKAGES = ("bots", "memory_core", "config")
MAX_LINES = 600
# In memory_core: one owner per job, each readable whole.
MAX_CLASS_LINES = 350
MAX_FUNCTION_LINES = 80
# Long by nature: wiring that names every part of the core once, and declarative tables
# (a class or function that is only a list of entries).
LONG_ALLOWED = frozenset({"memory_core.bootstrap.build_core"})
# What the core may not import: the platforms, the web, the CLI, the benchmarks' extras.
FOREIGN = {
    "discord",
    "slack_bolt",
    "slack_sdk",
    "fastapi",
    "starlette",
    "uvicorn",
    "aiohttp",
    "jinja2",
    "typer",
    "click",
    "rich",
    "matplotlib",
    "langchain_classic",
    "langchain_core",
    "langchain_openai",
    "playwright",
}
# memory_core's layers, lowest first: a module imports only from its own layer or lower ones.
LAYERS = (
    "errors",
    "clock",
    "calendar",
    "text",
    "scopes",
    "models",
    "store",
    "llm",
    "recall",
    "prompt",
    "tiers",
    "fleet",
    "service",
    "bootstrap",
)

# The Redis clients: only memory_core/store imports them. The benchmarks' cluster harness
# starts, joins and inspects servers of its own (cluster commands, key slots), and may too.
REDIS_CLIENTS = {"redis", "hiredis"}
REDIS_ALLOWED = ("memory_core.store", "bots.bench.cluster")
# Redis errors are translated inside memory_core/store only (memory_core/store/redis_errors.py).
# The fleet queue's migrate_legacy still reads the pre-bucket keys with the raw client, under
# the class's translation, until it is deleted.
TRANSLATION_ALLOWED = ("memory_core.store", "memory_core.fleet.queue")

Graph = dict[str, set[str]]


def modules(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    """Every module of the packages, by dotted name (a package by its own name)."""
    found: dict[str, Path] = {}
    for package in packages:
        for path in (root / package).rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imported_names(name: str, path: Path, known: set[str]) -> set[str]:
    """What a module imports, anywhere in it (inside functions too), as dotted names; for
    ``from package import submodule`` both the package and the sub-module."""
    names: set[str] = set()
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            names.add(module)
            names |= {f"{module}.{a.name}" for a in node.names if f"{module}.{a.name}" in known}
    return names


def owner(name: str, known: set[str]) -> str | None:
    """The module of ours that a dotted import name refers to, if any."""
    parts = name.split(".")
    while parts and ".".join(parts) not in known:
        parts.pop()
    return ".".join(parts) or None


def import_graph(found: dict[str, Path]) -> Graph:
    known = set(found)
    graph: Graph = defaultdict(set)
    for name, path in found.items():
        for target in imported_names(name, path, known):
            dep = owner(target, known)
            if dep is not None and dep != name:
                graph[name].add(dep)
    return graph


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    nodes = sorted(set(graph) | {d for deps in graph.values() for d in deps})
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
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
    return found


def layer(name: str) -> int | None:
    parts = name.split(".")
    if parts[0] != "memory_core" or len(parts) < 2 or parts[1] not in LAYERS:
        return None
    return LAYERS.index(parts[1])


def upward_imports(graph: Graph) -> list[str]:
    wrong = []
    for name, deps in sorted(graph.items()):
        for dep in sorted(deps):
            mine, theirs = layer(name), layer(dep)
            if mine is not None and theirs is not None and theirs > mine:
                wrong.append(f"{name} imports {dep}")
    return wrong


def foreign_imports(found: dict[str, Path]) -> list[str]:
    known = set(found)
    wrong = []
    for name, path in sorted(found.items()):
        if not name.startswith("memory_core"):
            continue
        for target in sorted(imported_names(name, path, known)):
            if target.split(".")[0] in FOREIGN | {"bots"}:
                wrong.append(f"{name} imports {target}")
    return wrong


def _inside(name: str, allowed: tuple[str, ...]) -> bool:
    return any(name == a or name.startswith(a + ".") for a in allowed)


def redis_imports(found: dict[str, Path]) -> list[str]:
    """Modules outside memory_core/store (and the cluster harness) that import a Redis client
    or the store's error translation."""
    known = set(found)
    wrong = []
    for name, path in sorted(found.items()):
        for target in sorted(imported_names(name, path, known)):
            client = target.split(".")[0] in REDIS_CLIENTS and not _inside(name, REDIS_ALLOWED)
            translation = _inside(target, ("memory_core.store.redis_errors",)) and not _inside(
                name, TRANSLATION_ALLOWED
            )
            if client or translation:
                wrong.append(f"{name} imports {target}")
    return wrong


def oversized(found: dict[str, Path], allowed: frozenset[str] = LONG_ALLOWED) -> list[str]:
    """memory_core's classes over MAX_CLASS_LINES and functions (methods and nested ones
    too) over MAX_FUNCTION_LINES, as "dotted.name: N lines", save those ``allowed``."""
    wrong: list[str] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                visit(child, prefix)
                continue
            name = f"{prefix}.{child.name}"
            lines = (child.end_lineno or child.lineno) - child.lineno + 1
            limit = MAX_CLASS_LINES if isinstance(child, ast.ClassDef) else MAX_FUNCTION_LINES
            if lines > limit and name not in allowed:
                wrong.append(f"{name}: {lines} lines")
            visit(child, name)

    for module, path in sorted(found.items()):
        if module == "memory_core" or module.startswith("memory_core."):
            visit(ast.parse(path.read_text(encoding="utf-8")), module)
    return wrong


# -- the checkers catch what they are for -------------------------------------------------
def write(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_the_cycle_finder_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "memory_core/__init__.py": "",
            "memory_core/a.py": "from memory_core.b import thing\n",
            "memory_core/b.py": "def thing():\n    from memory_core import a\n",
            "memory_core/c.py": "import memory_core.a\n",
        },
    )
    graph = import_graph(modules(tmp_path, ("memory_core",)))
    assert cycles(graph) == [["memory_core.a", "memory_core.b"]]


def test_the_layer_rule_sees_a_lower_layer_calling_up(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "memory_core/__init__.py": "",
            "memory_core/fleet/__init__.py": "",
            "memory_core/fleet/scheduler.py": "from ..service.pipeline import run\n",
            "memory_core/service/__init__.py": "",
            "memory_core/service/pipeline.py": "from memory_core.fleet import scheduler\n",
            "memory_core/models.py": "import discord\nfrom bots.cli import main\n",
        },
    )
    found = modules(tmp_path, ("memory_core",))
    graph = import_graph(found)
    assert upward_imports(graph) == [
        "memory_core.fleet.scheduler imports memory_core.service.pipeline"
    ]
    assert foreign_imports(found) == [
        "memory_core.models imports bots.cli",
        "memory_core.models imports discord",
    ]


def test_the_redis_rule_sees_redis_imported_outside_the_store(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "memory_core/__init__.py": "",
            "memory_core/store/__init__.py": "",
            "memory_core/store/repo.py": "import redis\nfrom redis.exceptions import RedisError\n",
            "memory_core/store/redis_errors.py": "",
            "memory_core/store/lane.py": "import hiredis\n",
            "memory_core/fleet/__init__.py": "",
            "memory_core/fleet/spending.py": (
                "def f():\n    from redis.asyncio.cluster import RedisCluster\n"
            ),
            "memory_core/service/__init__.py": "",
            "memory_core/service/replay.py": (
                "from memory_core.store.redis_errors import redis_errors_translated\n"
            ),
            "memory_core/storehouse.py": "import redis\n",  # a name that only starts alike
            "bots/__init__.py": "",
            "bots/bench/__init__.py": "",
            "bots/bench/cluster.py": "import redis\nfrom redis.crc import key_slot\n",
            "bots/dashboard/__init__.py": "",
            "bots/dashboard/health.py": "import hiredis\n",
        },
    )
    assert redis_imports(modules(tmp_path, ("memory_core", "bots"))) == [
        "bots.dashboard.health imports hiredis",
        "memory_core.fleet.spending imports redis.asyncio.cluster",
        "memory_core.service.replay imports memory_core.store.redis_errors",
        "memory_core.storehouse imports redis",
    ]


def test_the_size_rule_sees_a_long_class_and_long_functions(tmp_path: Path) -> None:
    body, nested = "    x = 1\n", "        x = 1\n"
    write(
        tmp_path,
        {
            "memory_core/__init__.py": "",
            # 1 + 349 lines: at the bound; 1 + 350: over it.
            "memory_core/fits.py": "class Fits:\n" + body * 349,
            "memory_core/big.py": "class Big:\n" + body * 350,
            "memory_core/service/__init__.py": "",
            "memory_core/service/steps.py": "".join(
                [
                    "async def short():\n" + body * 79,  # 80 lines: at the bound
                    "def long():\n" + body * 80,
                    "class Small:\n    def method(self):\n" + nested * 80,
                    "def outer():\n    def inner():\n" + nested * 80,
                ]
            ),
            "memory_core/bootstrap.py": "def build_core():\n" + body * 200,  # allowed
            "bots/__init__.py": "",
            "bots/door.py": "def handler():\n" + body * 200,  # not the core
        },
    )
    assert oversized(modules(tmp_path, ("memory_core", "bots"))) == [
        "memory_core.big.Big: 351 lines",
        "memory_core.service.steps.long: 81 lines",
        "memory_core.service.steps.Small.method: 81 lines",
        "memory_core.service.steps.outer: 82 lines",
        "memory_core.service.steps.outer.inner: 81 lines",
    ]


# -- the real tree -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tree() -> dict[str, Path]:
    return modules(ROOT)


def test_only_bots_memory_core_and_config_are_installed() -> None:
    with (ROOT / "pyproject.toml").open("rb") as fh:
        find = tomllib.load(fh)["tool"]["setuptools"]["packages"]["find"]
    assert sorted(find["include"]) == sorted(f"{p}*" for p in PACKAGES)
    importable = {
        p.name
        for p in ROOT.iterdir()
        if (p / "__init__.py").exists() or (p.suffix == ".py" and p.is_file())
    }
    assert importable - {"tests"} == set(PACKAGES)


def test_no_import_cycle_counting_imports_inside_functions(tree: dict[str, Path]) -> None:
    assert cycles(import_graph(tree)) == []


def test_the_core_layers_import_only_downwards(tree: dict[str, Path]) -> None:
    assert upward_imports(import_graph(tree)) == []
    top_level = [n for n in tree if n.count(".") == 1 and n.startswith("memory_core.")]
    assert [n for n in top_level if layer(n) is None] == []  # every module sits in a layer


def test_the_core_imports_no_platform_web_or_cli_library(tree: dict[str, Path]) -> None:
    assert foreign_imports(tree) == []


def test_only_the_store_talks_to_redis(tree: dict[str, Path]) -> None:
    assert redis_imports(tree) == []


def test_no_module_is_over_600_lines(tree: dict[str, Path]) -> None:
    sizes = {name: len(p.read_text(encoding="utf-8").splitlines()) for name, p in tree.items()}
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


@pytest.mark.xfail(
    strict=True,
    reason="until the splits under way land: service.pipeline.MemoryPipeline, "
    "service.forgetting.MemoryForgetting, tiers.maintenance.Maintainer, "
    "tiers.summarize.Summarizer.refresh, tiers.facts.merge_ops, store.repo.MemoryRepo.ingest",
)
def test_no_core_class_is_over_350_lines_nor_function_over_80(tree: dict[str, Path]) -> None:
    assert oversized(tree) == []


def test_each_core_sub_package_names_its_public_api(tree: dict[str, Path]) -> None:
    packages = [n for n, p in tree.items() if p.name == "__init__.py" and n != "memory_core"]
    missing = []
    for name in sorted(p for p in packages if p.startswith("memory_core.")):
        tree_ = ast.parse(tree[name].read_text(encoding="utf-8"))
        names_all = any(
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
            for node in tree_.body
        )
        if not (ast.get_docstring(tree_) and names_all):
            missing.append(name)
    assert missing == []
