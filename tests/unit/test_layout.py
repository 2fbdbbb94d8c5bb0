"""The shape of the house (docs/architecture.md), read from the source: only ``bots``,
``memory_core`` and ``config`` are importable; ``memory_core`` imports no platform, web or CLI
library and no front door; its sub-packages form layers with no import running back up; no
import cycle anywhere, counting imports inside functions; no module over 600 lines, in
``memory_core`` no class over 350, and in ``memory_core``, ``bots`` and the benchmarks no
function over 80 (save a short allow-list); no class that exists to forward (most of its
methods handing their parameters on to a part: a caller takes the part); only
``memory_core/store`` talks to Redis (imports redis, translates its errors); no code or name
for a format that never shipped (0.1.0 is the first release: there is no older store, key
layout, file or install line to read or to keep working). The benchmarks (bench/) and what
the tests and the benchmarks both start (testkit/) are distributions of their own, installed
only by the extras and held to the same module rules.

The tests have a shape too: every test folder has its conftest.py; a fixture is defined once
and taken from a conftest.py by pytest, never imported (no module imports a test module or a
conftest.py: plain helpers live in tests/helpers.py and support modules); no file of the fakes
(tests/fakes/) is over 1,200 lines; no test imports the benchmarks but their own
(``test_bench_*``).

The rules are checked on the real tree, and each checker is first shown to catch a breach
on a small tree written for the purpose (a rule that cannot fail proves nothing)."""

from __future__ import annotations

import ast
import io
import re
import tokenize
import tomllib
from collections import defaultdict
from importlib.metadata import metadata, requires
from pathlib import Path

import pytest

from tests.helpers import ROOT

PACKAGES = ("bots", "memory_core", "config")
MAX_LINES = 600
MAX_FAKE_LINES = 1_200
TEST_FOLDERS = ("unit", "integration", "e2e", "faults", "hostile", "browser", "fakes")
# In memory_core: one owner per job, each readable whole; in bots too, no function over 80.
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

# The Redis clients: only memory_core/store imports them. The testkit's loopback servers
# (the tests' and the benchmarks') start, join and inspect servers of their own (cluster
# commands, key slots), and may too.
REDIS_CLIENTS = {"redis", "hiredis"}
REDIS_ALLOWED = ("memory_core.store", "memorybot_testkit.redis_servers")
# Redis errors are translated inside memory_core/store only (memory_core/store/redis_errors.py).
TRANSLATION_ALLOWED = ("memory_core.store",)
# The repository's other distributions, (folder, package): installed only by the extras.
DISTRIBUTIONS = (("bench", "memorybot_bench"), ("testkit", "memorybot_testkit"))
# The benchmarks: only their own tests (test_bench_*) import them.
BENCH = "memorybot_bench"

Graph = dict[str, set[str]]

# A format that never shipped: its names (legacy_*, migrate_*, import_snapshot), the files of
# the pre-release JSON store (memorybot-store.json, .lock, the ".imported" copy), and the
# comments that point at what an older version wrote.
_SNAPSHOT_MIGRATION = {"import", "imported", "old", "former", "upgrade"}
_OLD_STORE_FILES = re.compile(r"memorybot-store[\w.-]*|\.imported\b")
_OLDER_VERSION = re.compile(
    r"\b(?:older|earlier|previous|former) (?:version|release|build)s?\b"
    r"|\bbefore (?:the )?buckets\b",
    re.IGNORECASE,
)


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


# -- the tests' own layout --------------------------------------------------------------
def is_fixture(node: ast.AST) -> bool:
    """A function decorated ``@pytest.fixture`` (or pytest_asyncio's), called or not."""
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return False
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if ast.unparse(target) in ("pytest.fixture", "pytest_asyncio.fixture", "fixture"):
            return True
    return False


def fixture_name(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """The name a fixture is requested by: ``name=`` when given, else the function's."""
    for decorator in node.decorator_list:
        if isinstance(decorator, ast.Call):
            for keyword in decorator.keywords:
                if keyword.arg == "name" and isinstance(keyword.value, ast.Constant):
                    return str(keyword.value.value)
    return node.name


def modules_of_tests(root: Path) -> dict[str, Path]:
    """Every Python module under tests/, by dotted name."""
    return modules(root, ("tests",))


def fixtures_by_module(found: dict[str, Path]) -> dict[str, dict[str, str]]:
    """Module -> {function name: fixture name} of the fixtures it defines (top level)."""
    fixtures: dict[str, dict[str, str]] = {}
    for name, path in found.items():
        tree_ = ast.parse(path.read_text(encoding="utf-8"))
        defined = {n.name: fixture_name(n) for n in tree_.body if is_fixture(n)}
        if defined:
            fixtures[name] = defined
    return fixtures


def is_test_module(name: str) -> bool:
    return name.rsplit(".", 1)[-1].startswith("test_")


def imports_of_test_modules_or_fixtures(found: dict[str, Path]) -> list[str]:
    """Imports that break "fixtures come from conftest.py": of a test module (whatever the
    name: ``from tests.e2e.test_x import fake`` or a constant), of a conftest.py (pytest loads
    it itself; helpers belong in tests/helpers.py), or of a fixture from any other module (an
    imported fixture hides where it lives)."""
    known = set(found)
    fixtures = fixtures_by_module(found)
    wrong = []
    for name, path in sorted(found.items()):
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [(alias.name, None) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                module = ".".join([*base, *([node.module] if node.module else [])])
                targets = [(module, alias.name) for alias in node.names]
            else:
                continue
            for module, imported in targets:
                dep = owner(module, known)
                if imported is not None and f"{module}.{imported}" in known:
                    dep = f"{module}.{imported}"  # from package import test_module
                    imported = None
                if dep is None or dep == name:
                    continue
                if is_test_module(dep):
                    wrong.append(f"{name} imports the test module {dep}")
                elif dep.rsplit(".", 1)[-1] == "conftest":
                    wrong.append(f"{name} imports {dep}")
                elif imported is not None and imported in fixtures.get(dep, {}):
                    wrong.append(f"{name} imports the fixture {imported} from {dep}")
    return wrong


def fixtures_defined_twice(found: dict[str, Path]) -> dict[str, list[str]]:
    """Fixture names defined in more than one module (one shadowing another, or two that
    drifted apart): each should be defined once."""
    where: dict[str, list[str]] = defaultdict(list)
    for module, defined in fixtures_by_module(found).items():
        for fixture in defined.values():
            where[fixture].append(module)
    return {fixture: sorted(m) for fixture, m in sorted(where.items()) if len(m) > 1}


def folders_without_conftest(root: Path) -> list[str]:
    """Test folders (tests/ and each folder of TEST_FOLDERS present) with no conftest.py."""
    folders = [root / "tests", *(root / "tests" / f for f in TEST_FOLDERS)]
    return [
        str(folder.relative_to(root))
        for folder in folders
        if folder.is_dir() and not (folder / "conftest.py").is_file()
    ]


def long_fake_files(root: Path) -> dict[str, int]:
    """Files of tests/fakes/ over MAX_FAKE_LINES lines."""
    sizes = {
        str(path.relative_to(root)): len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted((root / "tests" / "fakes").rglob("*.py"))
    }
    return {path: n for path, n in sizes.items() if n > MAX_FAKE_LINES}


def words(identifier: str) -> list[str]:
    """``migrate_legacy`` -> migrate, legacy; ``SnapshotImport`` -> snapshot, import."""
    return [w.lower() for w in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+", identifier)]


def names_a_format_that_never_shipped(identifier: str) -> bool:
    found = set(words(identifier))
    return (
        "legacy" in found
        or any(w.startswith("migrat") for w in found)
        or ("snapshot" in found and bool(found & _SNAPSHOT_MIGRATION))
    )


def identifiers(tree: ast.AST) -> list[tuple[int, str]]:
    """Every name a module defines or uses: functions, classes, arguments, variables,
    attributes (``self.legacy_x = ...`` and ``fleet.migrate_legacy()`` alike), imports."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.append((node.lineno, node.name))
        elif isinstance(node, ast.arg):
            found.append((node.lineno, node.arg))
        elif isinstance(node, ast.Name):
            found.append((node.lineno, node.id))
        elif isinstance(node, ast.Attribute):
            found.append((node.lineno, node.attr))
        elif isinstance(node, ast.alias):
            found += [(node.lineno, part) for part in (node.asname or node.name).split(".")]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found += [(node.lineno, part) for part in node.module.split(".")]
    return found


def comments_and_docstrings(text: str, tree: ast.AST) -> list[tuple[int, str]]:
    found = [
        (token.start[0], token.string)
        for token in tokenize.generate_tokens(io.StringIO(text).readline)
        if token.type == tokenize.COMMENT
    ]
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            doc = ast.get_docstring(node, clean=False)
            if doc is not None:
                found.append((node.body[0].lineno, doc))
    return found


def unshipped_formats(root: Path, found: dict[str, Path]) -> list[str]:
    """Where the packages name, read or describe a format no release wrote: a module or an
    identifier named for a legacy format or its migration, a string naming the
    pre-release store's files, a comment about what an older version left."""
    wrong: list[tuple[str, int, str]] = []
    for name, path in found.items():
        where = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        if any(names_a_format_that_never_shipped(part) for part in name.split(".")):
            wrong.append((where, 0, f"module {name}"))
        for line, identifier in set(identifiers(tree)):
            if names_a_format_that_never_shipped(identifier):
                wrong.append((where, line, identifier))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                files = _OLD_STORE_FILES.finditer(node.value)
                wrong += [(where, node.lineno, repr(m.group(0))) for m in files]
        for line, comment in comments_and_docstrings(text, tree):
            wrong += [(where, line, repr(m.group(0))) for m in _OLDER_VERSION.finditer(comment)]
    return [f"{where}:{line}: {what}" for where, line, what in sorted(wrong)]


def bench_imports(found: dict[str, Path]) -> list[str]:
    """Modules of tests/ that import the benchmarks, other than the benchmarks' own tests
    (``test_bench_*``): the product's tests need no benchmark code."""
    wrong = []
    for name, path in sorted(found.items()):
        if name.rsplit(".", 1)[-1].startswith("test_bench_"):
            continue
        for target in sorted(imported_names(name, path, set(found))):
            if target.split(".")[0] == BENCH:
                wrong.append(f"{name} imports {target}")
    return wrong


def installed_extras(distribution: str = "memorybot") -> dict[str, list[str]]:
    """The extras of the installed distribution (setup.py writes them) and what each one
    installs, from its metadata."""
    extras: dict[str, list[str]] = {
        name: [] for name in metadata(distribution).get_all("Provides-Extra") or []
    }
    for requirement in requires(distribution) or []:
        extra = re.search(r"""extra\s*==\s*["']([\w.-]+)["']""", requirement)
        if extra is not None:
            extras.setdefault(extra.group(1), []).append(requirement.split(";")[0].strip())
    return extras


def empty_extras(project: dict[str, object]) -> list[str]:
    """Extras that install nothing: kept only for install lines no release printed."""
    extras = project.get("optional-dependencies") or {}
    assert isinstance(extras, dict)
    return sorted(name for name, needs in extras.items() if not needs)


def oversized(found: dict[str, Path], allowed: frozenset[str] = LONG_ALLOWED) -> list[str]:
    """memory_core's classes over MAX_CLASS_LINES, and the functions of memory_core and bots
    (methods and nested ones too) over MAX_FUNCTION_LINES,
    as "dotted.name: N lines", save those ``allowed``."""
    wrong: list[str] = []

    def visit(node: ast.AST, prefix: str, core: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                visit(child, prefix, core)
                continue
            name = f"{prefix}.{child.name}"
            lines = (child.end_lineno or child.lineno) - child.lineno + 1
            is_class = isinstance(child, ast.ClassDef)
            limit = MAX_CLASS_LINES if is_class else MAX_FUNCTION_LINES
            if (core or not is_class) and lines > limit and name not in allowed:
                wrong.append(f"{name}: {lines} lines")
            visit(child, name, core)

    for module, path in sorted(found.items()):
        core = _inside(module, ("memory_core",))
        held = _inside(module, ("bots", *(package for _, package in DISTRIBUTIONS)))
        if core or held:
            visit(ast.parse(path.read_text(encoding="utf-8")), module, core)
    return wrong


def _hands_on(method: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether a method only hands its own parameters, unchanged, to a method of one of the
    object's attributes (``return await self.part.name(a, b=b)``), its docstring aside."""
    body = method.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    if len(body) != 1 or not isinstance(body[0], ast.Return | ast.Expr):
        return False
    call = body[0].value
    if isinstance(call, ast.Await):
        call = call.value
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute):
        return False
    target = call.func.value
    if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)):
        return False
    if target.value.id != "self":
        return False
    values = [a.value if isinstance(a, ast.Starred) else a for a in call.args]
    values += [k.value for k in call.keywords]
    passed = {v.id for v in values if isinstance(v, ast.Name)}
    args = method.args
    own = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)][1:]
    own += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
    return len(passed) == len(values) and passed == set(own)


def forwarding_classes(found: dict[str, Path]) -> list[str]:
    """The classes that exist to forward: at least three methods (``__init__`` aside), most
    of them handing their parameters on to a part (:func:`_hands_on`). A caller should take
    the part itself."""
    wrong: list[str] = []
    for module, path in sorted(found.items()):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            methods = [
                f
                for f in node.body
                if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) and f.name != "__init__"
            ]
            forwarded = [f.name for f in methods if _hands_on(f)]
            if len(forwarded) >= 3 and 2 * len(forwarded) > len(methods):
                wrong.append(f"{module}.{node.name}: {len(forwarded)} of {len(methods)}")
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
            "bots/dashboard/__init__.py": "",
            "bots/dashboard/health.py": "import hiredis\n",
            "memorybot_testkit/__init__.py": "",
            "memorybot_testkit/redis_servers.py": "import redis\nfrom redis.crc import key_slot\n",
            "memorybot_bench/__init__.py": "",
            "memorybot_bench/cluster_bench.py": "import redis\n",
        },
    )
    found = modules(tmp_path, ("memory_core", "bots", "memorybot_testkit", "memorybot_bench"))
    assert redis_imports(found) == [
        "bots.dashboard.health imports hiredis",
        "memory_core.fleet.spending imports redis.asyncio.cluster",
        "memory_core.service.replay imports memory_core.store.redis_errors",
        "memory_core.storehouse imports redis",
        "memorybot_bench.cluster_bench imports redis",
    ]


FIXTURE = "import pytest\n\n@pytest.fixture\ndef {name}():\n    return 1\n"


def test_the_fixture_rule_sees_imports_of_test_modules_and_of_fixtures(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "tests/__init__.py": "",
            "tests/conftest.py": FIXTURE.format(name="shared") + "START = 1\n",
            "tests/helpers.py": "def helper():\n    return 2\n",
            "tests/support.py": FIXTURE.format(name="stray"),
            "tests/e2e/__init__.py": "",
            "tests/e2e/test_bot.py": FIXTURE.format(name="fake") + "SCOPE = 'x'\n",
            "tests/e2e/test_uses_fixture.py": "from tests.e2e.test_bot import fake\n",
            "tests/e2e/test_uses_constant.py": "from .test_bot import SCOPE\n",
            "tests/e2e/test_uses_module.py": "from tests.e2e import test_bot\n",
            "tests/e2e/test_imports_conftest.py": "from tests.conftest import START\n",
            "tests/e2e/test_imports_a_fixture.py": "from tests.support import stray\n",
            "tests/e2e/test_fine.py": "from tests.helpers import helper\n",
        },
    )
    assert imports_of_test_modules_or_fixtures(modules_of_tests(tmp_path)) == [
        "tests.e2e.test_imports_a_fixture imports the fixture stray from tests.support",
        "tests.e2e.test_imports_conftest imports tests.conftest",
        "tests.e2e.test_uses_constant imports the test module tests.e2e.test_bot",
        "tests.e2e.test_uses_fixture imports the test module tests.e2e.test_bot",
        "tests.e2e.test_uses_module imports the test module tests.e2e.test_bot",
    ]


def test_the_bench_rule_sees_a_product_test_importing_the_benchmarks(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "tests/__init__.py": "",
            "tests/helpers.py": "from memorybot_bench.harness import WORDS\n",
            "tests/unit/__init__.py": "",
            "tests/unit/test_ingest.py": "def test_x():\n    import memorybot_bench.load\n",
            "tests/unit/test_servers.py": "from memorybot_testkit import redis_servers\n",
            "tests/unit/test_alike.py": "import memorybot_benchmarks\n",  # only starts alike
            "tests/unit/test_bench_report.py": "from memorybot_bench.report import write_report\n",
        },
    )
    assert bench_imports(modules_of_tests(tmp_path)) == [
        "tests.helpers imports memorybot_bench.harness",
        "tests.unit.test_ingest imports memorybot_bench.load",
    ]


def test_the_fixture_rule_sees_a_fixture_defined_twice(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "tests/__init__.py": "",
            "tests/conftest.py": FIXTURE.format(name="fake"),
            "tests/e2e/__init__.py": "",
            "tests/e2e/test_a.py": FIXTURE.format(name="fake") + FIXTURE.format(name="only_a"),
            "tests/e2e/test_b.py": "import pytest\n\n@pytest.fixture(name='fake')\n"
            "def other_fake():\n    return 2\n",
            "tests/e2e/test_c.py": "from hypothesis import HealthCheck, settings\n\n"
            "@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])\n"
            "def test_only_a(only_a):\n    pass\n",
        },
    )
    assert fixtures_defined_twice(modules_of_tests(tmp_path)) == {
        "fake": ["tests.conftest", "tests.e2e.test_a", "tests.e2e.test_b"]
    }


def test_the_conftest_rule_sees_a_folder_without_one(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "tests/conftest.py": "",
            "tests/unit/conftest.py": "",
            "tests/unit/test_a.py": "",
            "tests/e2e/test_b.py": "",
        },
    )
    assert folders_without_conftest(tmp_path) == ["tests/e2e"]


def test_the_size_rule_of_the_fakes_sees_a_long_file(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "tests/fakes/__init__.py": "",
            "tests/fakes/small.py": "x = 1\n" * MAX_FAKE_LINES,
            "tests/fakes/discord/server.py": "x = 1\n" * (MAX_FAKE_LINES + 1),
        },
    )
    assert long_fake_files(tmp_path) == {"tests/fakes/discord/server.py": MAX_FAKE_LINES + 1}


def test_the_unshipped_format_check_sees_its_names_files_and_comments(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "memory_core/__init__.py": "",
            "memory_core/store/__init__.py": "",
            "memory_core/store/legacy_snapshot.py": (
                'SNAPSHOT_FILENAME = "memorybot-store.json"\n'
                "def import_snapshot(data_dir):\n"
                '    return data_dir / (SNAPSHOT_FILENAME + ".imported")\n'
            ),
            "memory_core/store/keys.py": (
                "class KeySchema:\n"
                "    def __init__(self, prefix):\n"
                "        # Keys an older release left outside the buckets.\n"
                '        self.legacy_scopes_index = f"{prefix}:scopes"\n'
            ),
            "memory_core/bootstrap.py": (
                "async def build(fleet):\n    await fleet.migrate_legacy()\n"
            ),
            "memory_core/store/server.py": (
                "from memory_core.store.legacy_snapshot import SNAPSHOT_FILENAME\n"
                "def erase(files):\n"
                '    """Not covered: memorybot-store.json.imported, the old store\'s copy."""\n'
            ),
            # What stays: snapshots that are not an old format, and "was" in a present reason.
            "memory_core/store/records.py": (
                "class PromptSnapshot:\n"
                '    """What a prompt reads in one step (the message that was stored)."""\n'
                "RDB_SNAPSHOT = 'RDB snapshot'\n"
                "def forwarded(message):\n"
                "    return [snapshot.content for snapshot in message.message_snapshots]\n"
            ),
        },
    )
    assert unshipped_formats(tmp_path, modules(tmp_path, ("memory_core",))) == [
        "memory_core/bootstrap.py:2: migrate_legacy",
        "memory_core/store/keys.py:3: 'older release'",
        "memory_core/store/keys.py:4: legacy_scopes_index",
        "memory_core/store/legacy_snapshot.py:0: module memory_core.store.legacy_snapshot",
        "memory_core/store/legacy_snapshot.py:1: 'memorybot-store.json'",
        "memory_core/store/legacy_snapshot.py:2: import_snapshot",
        "memory_core/store/legacy_snapshot.py:3: '.imported'",
        "memory_core/store/server.py:1: legacy_snapshot",
        "memory_core/store/server.py:3: 'memorybot-store.json.imported'",
    ]
    assert empty_extras({"optional-dependencies": {"discord": [], "bench": ["matplotlib"]}}) == [
        "discord"
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
            # In bots a function is held to the rule, a class is not (a door may be long).
            "bots/door.py": "".join(
                [
                    "class Door:\n" + body * 320 + "    def on_message(self):\n" + nested * 80,
                    "async def handler():\n" + body * 80,
                    "def short():\n" + body * 79,
                ]
            ),
        },
    )
    assert oversized(modules(tmp_path, ("memory_core", "bots"))) == [
        "bots.door.Door.on_message: 81 lines",
        "bots.door.handler: 81 lines",
        "memory_core.big.Big: 351 lines",
        "memory_core.service.steps.long: 81 lines",
        "memory_core.service.steps.Small.method: 81 lines",
        "memory_core.service.steps.outer: 82 lines",
        "memory_core.service.steps.outer.inner: 81 lines",
    ]


def test_the_forwarding_rule_sees_a_hub_that_only_hands_calls_on(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "memory_core/__init__.py": "",
            "memory_core/hub.py": (
                "class Hub:\n"
                "    def __init__(self, part):\n"
                "        self.part = part\n"
                "    async def state(self, scope):\n"
                '        """The state."""\n'
                "        return await self.part.state(scope)\n"
                "    def facts(self, scope, *, limit=5):\n"
                "        return self.part.facts(scope, limit=limit)\n"
                "    async def drop(self, *ids):\n"
                "        await self.part.drop(*ids)\n"
                "    def own(self, scope):\n"
                "        return len(scope)\n"
            ),
            # Adapters change what they pass on, or use only some of it: not forwarding.
            "memory_core/adapter.py": (
                "class Adapter:\n"
                "    def state(self, scope):\n"
                "        return self.part.state(scope.lower())\n"
                "    def facts(self, scope, limit):\n"
                "        return self.part.facts(scope)\n"
                "    def drop(self, ids):\n"
                '        return self.part.drop(ids, why="gone")\n'
            ),
        },
    )
    assert forwarding_classes(modules(tmp_path, ("memory_core",))) == [
        "memory_core.hub.Hub: 3 of 4"
    ]


# -- the real tree -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tree() -> dict[str, Path]:
    """The product's packages, and those of the repository's other distributions."""
    found = modules(ROOT)
    for folder, package in DISTRIBUTIONS:
        found |= modules(ROOT / folder, (package,))
    return found


def test_only_bots_memory_core_and_config_are_installed() -> None:
    with (ROOT / "pyproject.toml").open("rb") as fh:
        find = tomllib.load(fh)["tool"]["setuptools"]["packages"]["find"]
    assert sorted(find["include"]) == sorted(f"{p}*" for p in PACKAGES)
    importable = {
        p.name
        for p in ROOT.iterdir()
        if (p / "__init__.py").exists() or (p.suffix == ".py" and p.is_file())
    }
    assert importable - {"tests", "setup.py"} == set(PACKAGES)  # setup.py: the extras


def test_the_benchmarks_and_the_testkit_are_installed_only_by_the_extras() -> None:
    extras = installed_extras()
    with_the_bot = [r for r in requires("memorybot") or [] if "extra ==" not in r]
    for folder, package in DISTRIBUTIONS:
        with (ROOT / folder / "pyproject.toml").open("rb") as fh:
            project = tomllib.load(fh)
        name = project["project"]["name"]
        assert project["tool"]["setuptools"]["packages"]["find"]["include"] == [f"{package}*"]
        assert not [r for r in with_the_bot if r.startswith(name)]
        local = f"{name} @ {(ROOT / folder).resolve().as_uri()}"
        assert local in extras["bench"]  # this checkout's folder, by the bench extra
    assert "memorybot[bench]" in extras["dev"]


def test_no_product_test_imports_the_benchmarks() -> None:
    assert bench_imports(modules_of_tests(ROOT)) == []


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


def test_no_core_class_over_350_lines_nor_any_function_over_80(tree: dict[str, Path]) -> None:
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


def test_fixtures_come_from_conftest_and_no_test_module_imports_another() -> None:
    assert imports_of_test_modules_or_fixtures(modules_of_tests(ROOT)) == []


def test_each_fixture_is_defined_once() -> None:
    assert fixtures_defined_twice(modules_of_tests(ROOT)) == {}


def test_each_test_folder_has_its_conftest() -> None:
    assert folders_without_conftest(ROOT) == []
    # and every folder that holds tests is one of them (a new folder joins the rule)
    holding_tests = {p.parent.name for p in (ROOT / "tests").glob("*/test_*.py")}
    assert holding_tests <= set(TEST_FOLDERS)


def test_no_file_of_the_fakes_is_over_1200_lines() -> None:
    assert long_fake_files(ROOT) == {}


def test_nothing_names_or_reads_a_format_that_never_shipped(tree: dict[str, Path]) -> None:
    assert unshipped_formats(ROOT, tree) == []
    assert empty_extras({"optional-dependencies": installed_extras()}) == []


def test_no_class_exists_to_forward(tree: dict[str, Path]) -> None:
    assert forwarding_classes(tree) == []
