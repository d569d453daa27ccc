"""The package's shape as tests: core is Dagster-free, its stages are layered, no import cycles.

Read from the source with ``ast`` (no import-linter needed), so every import counts: module level,
inside functions, under ``if TYPE_CHECKING:``. A violation names the file and line.

Why these contracts: ``core/`` holds the pure logic that unit tests and benchmarks call
directly; one Dagster import there (even a lazy one in a function) ties it to the shell again.
The stages follow the DAG, so a stage importing a later one is a design cycle even before it
is an import cycle; and a real import cycle makes the import order decide what works.
Tables, representations, tokenizer names and embedders each have one definition that the rest
reads: a second copy (a table name typed as a string, a re-declared tuple, a hand-built
embedder) is how two layers drift apart unnoticed.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from memory_pipeline_tests.paths import ROOT

PACKAGE = "memory_pipeline"
CORE = f"{PACKAGE}.core"
# DAG order: a core package may import only itself and the packages before it.
LAYERS = (
    "common",
    "ingest",
    "sessions",
    "represent",
    "indexes",
    "retrieval",
    "memories",
    "context",
    "quality",
    "evaluation",
    "privacy",
)
# The Dagster shell and the app-facing modules core must never reach for.
SHELL = (
    f"{PACKAGE}.defs",
    f"{PACKAGE}.cli",
    # the CLI's and the configuration's parts (top-level siblings, not packages)
    *(
        f"{PACKAGE}.cli_{m}"
        for m in ("common", "eval", "forget", "init", "search", "sql", "summary")
    ),
    f"{PACKAGE}.config",
    f"{PACKAGE}.config_settings",
    f"{PACKAGE}.config_sources",
    f"{PACKAGE}.eval_runner",
    f"{PACKAGE}.definitions",
)


@dataclass(frozen=True)
class Import:
    """One import statement's target as the interpreter resolves it."""

    source: str  # importing module
    target: str  # imported module (or the package a name is taken from)
    path: Path
    line: int

    def where(self) -> str:
        return f"{_rel(self.path)}:{self.line}"


def _rel(path: Path) -> str:
    """``path`` relative to the repository when inside it (the checkers' own tests are not)."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def module_name(path: Path, root: Path = ROOT) -> str:
    """``memory_pipeline/core/__init__.py`` -> ``memory_pipeline.core``."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules(package: str = PACKAGE, root: Path = ROOT) -> dict[str, Path]:
    """Every module of ``package`` by dotted name."""
    base = root / package.replace(".", "/")
    return {
        module_name(p, root): p for p in sorted(base.rglob("*.py")) if "__pycache__" not in p.parts
    }


def _absolute(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute module an ``ImportFrom`` names, resolving ``from . import x`` forms."""
    if not node.level:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(module: str, path: Path, known: dict[str, Path]) -> list[Import]:
    """All imports of one file; ``from pkg import mod`` points at ``pkg.mod`` when that exists."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[Import] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [Import(module, a.name, path, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, path, node)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.append(Import(module, sub if sub in known else base, path, node.lineno))
    return found


@cache
def all_imports() -> tuple[Import, ...]:
    """Every import in the package, cached: the tests below share one parse."""
    known = package_modules()
    return tuple(i for m, p in known.items() for i in imports_of(m, p, known))


def _within(target: str, prefix: str) -> bool:
    return target == prefix or target.startswith(prefix + ".")


def is_dagster(target: str) -> bool:
    """dagster itself or one of its libraries (dagster_postgres, dagster_shared, ...)."""
    top = target.split(".")[0]
    return top == "dagster" or top.startswith("dagster_")


def core_violations(imports: tuple[Import, ...]) -> list[str]:
    """Imports from core of Dagster, of the Dagster shell, or of the top-level API."""
    bad = []
    for i in imports:
        if not _within(i.source, CORE):
            continue
        shell = any(_within(i.target, s) for s in SHELL) or i.target == PACKAGE
        if is_dagster(i.target) or shell:
            bad.append(f"{i.where()}: {i.source} imports {i.target}")
    return bad


def layer_of(module: str) -> int | None:
    """Index of the core stage package ``module`` belongs to (None outside a stage package)."""
    parts = module.split(".")
    if parts[:2] != [PACKAGE, "core"] or len(parts) < 3:
        return None
    return LAYERS.index(parts[2]) if parts[2] in LAYERS else -1


def layer_violations(imports: tuple[Import, ...]) -> list[str]:
    """Core imports that point at a later stage package than their own."""
    bad = []
    for i in imports:
        src, dst = layer_of(i.source), layer_of(i.target)
        if src is None or dst is None:
            continue
        if src < 0 or dst < 0:
            bad.append(f"{i.where()}: {i.source} -> {i.target}: not a package of LAYERS")
        elif dst > src:
            bad.append(
                f"{i.where()}: {i.source} imports {i.target}: "
                f"{LAYERS[src]} may import only {', '.join(LAYERS[: src + 1])}"
            )
    return bad


def package_of(module: str, modules: dict[str, Path]) -> str:
    """The package a module belongs to; the top-level modules (cli, config, ...) stand alone."""
    if module.count(".") <= 1 or module not in modules or modules[module].name == "__init__.py":
        return module
    return module.rsplit(".", 1)[0]


def import_graph(
    imports: tuple[Import, ...], unit: Callable[[str], str] = lambda m: m
) -> dict[str, dict[str, Import]]:
    """unit -> {imported unit -> the first import statement making that edge}.

    ``unit`` maps a module to its node: the module itself, or its package for the
    package-level graph (where a cycle between two packages' modules shows up as one).
    """
    graph: dict[str, dict[str, Import]] = {}
    for i in imports:
        if not _within(i.target, PACKAGE):
            continue
        src, dst = unit(i.source), unit(i.target)
        if src != dst:
            graph.setdefault(src, {}).setdefault(dst, i)
    return graph


def strongly_connected(graph: dict[str, dict[str, Import]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def one_cycle(graph: dict[str, dict[str, Import]], component: list[str]) -> list[str]:
    """A shortest cycle through the component's first node: the nodes, start repeated at the end."""
    members, start = set(component), component[0]
    paths: dict[str, list[str]] = {start: [start]}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph.get(v, {})):
                if w == start:
                    return paths[v] + [start]
                if w in members and w not in paths:
                    paths[w] = paths[v] + [w]
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"{component} is not a cycle")  # pragma: no cover - Tarjan says it is


def describe_cycles(graph: dict[str, dict[str, Import]], components: list[list[str]]) -> str:
    """Each cycle as ``a → b → a`` with the import lines making it."""
    lines = []
    for comp in components:
        cycle = one_cycle(graph, comp)
        lines.append(f"cycle among {len(comp)}: {comp}\n  " + " → ".join(cycle))
        for a, b in zip(cycle, cycle[1:], strict=False):
            i = graph[a][b]
            lines.append(f"    {i.where()}: {i.source} imports {i.target}")
    return "\n".join(lines)


def _imported(node: ast.AST) -> list[str]:
    """Module names an import statement names (``.x`` for a relative one), else []."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        return [("." * node.level) + (node.module or "")]
    return []


def _catches_import_errors(node: ast.Try) -> bool:
    caught = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}
    for h in node.handlers:
        if h.type is None:  # bare except
            return True
        kinds = h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]
        if any(isinstance(k, ast.Name) and k.id in caught for k in kinds):
            return True
    return False


def self_import_guards(paths: list[Path]) -> list[str]:
    """``try: import <own module> except ImportError:`` blocks (a fallback for our own code)."""
    own = (PACKAGE, "memory_pipeline_tests", "_env")
    bad = []
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Try) and _catches_import_errors(node)):
                continue
            bad += [
                f"{_rel(path)}:{sub.lineno}: guarded {name}"
                for stmt in node.body
                for sub in ast.walk(stmt)
                for name in _imported(sub)
                if name.startswith(".") or name.split(".")[0] in own
            ]
    return bad


def _python_files(*dirs: str) -> Iterator[Path]:
    for d in dirs:
        yield from (p for p in sorted((ROOT / d).rglob("*.py")) if "__pycache__" not in p.parts)


# ----------------------------------------------------------------------------- the contracts


def test_the_scan_sees_the_package():
    """Guards the guards: an empty or mis-resolved scan would pass every contract below."""
    imports = all_imports()
    modules = package_modules()
    assert len(modules) > 60 and f"{CORE}.common.ids" in modules
    edges = {(i.source, i.target) for i in imports}
    assert (f"{CORE}.ingest.sources.locomo", f"{CORE}.common.records") in edges
    assert (f"{PACKAGE}.defs.build", "dagster") in edges
    # function-level imports count: the public API imports the searcher inside searcher()
    assert (PACKAGE, f"{CORE}.retrieval.searcher") in edges
    assert {layer_of(m) for m in modules if _within(m, CORE)} >= set(range(len(LAYERS)))


def test_core_imports_no_dagster_and_no_shell():
    bad = core_violations(all_imports())
    assert not bad, "core/ must stay Dagster-free:\n" + "\n".join(bad)


def test_core_does_not_load_dagster_at_import_time():
    """Every core module imported in a fresh interpreter: no dagster in sys.modules after.

    Complements the source scan: it also catches a third-party module pulling Dagster in.
    """
    names = sorted(m for m in package_modules() if _within(m, CORE))
    code = (
        "import importlib, sys\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'dagster'"
        " or m.startswith('dagster_') or m.startswith('memory_pipeline.defs')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout


def test_core_packages_follow_the_dag_order():
    bad = layer_violations(all_imports())
    assert not bad, "core layer order " + " < ".join(LAYERS) + " broken:\n" + "\n".join(bad)


@cache
def _known_modules() -> dict[str, Path]:
    """``package_modules()`` once: a walk of the package per import edge took ~40 s."""
    return package_modules()


def _by_package(module: str) -> str:
    return package_of(module, _known_modules())


def test_no_import_cycles_between_modules():
    graph = import_graph(all_imports())
    cycles = strongly_connected(graph)
    assert not cycles, "import cycles between modules:\n" + describe_cycles(graph, cycles)


def test_no_import_cycles_between_packages():
    graph = import_graph(all_imports(), _by_package)
    cycles = strongly_connected(graph)
    assert not cycles, "import cycles between packages:\n" + describe_cycles(graph, cycles)


def test_no_except_importerror_around_our_own_modules():
    """Our own modules are always importable; a fallback only hides a real import error."""
    bad = self_import_guards(list(_python_files(PACKAGE, "memory_pipeline_tests", "benchmarks")))
    assert not bad, "\n".join(bad)


# ----------------------------------------------------------------------------- one source each

REGISTRY_FILE = f"{PACKAGE}/core/common/tables.py"
# A word that is a table name but means something else where it stands.
TABLE_WORD_ALLOWED = frozenset(
    {
        (f"{PACKAGE}/config.py", "dossiers"),  # the Markdown folder beside the output folder
        (f"{PACKAGE}/defs/memories.py", "memories"),  # the Dagster group name
        (f"{PACKAGE}/core/context/packs.py", "sessions"),  # a context-pack strategy
        (f"{PACKAGE}/core/memories/llm.py", "memories"),  # the LLM answer's JSON field
        (f"{PACKAGE}/core/evaluation/report/memory_sections.py", "memories"),  # a report section id
        (f"{PACKAGE}/defs/jobs.py", "memories"),  # the Dagster group name
        # stage names of the runner's stage table (a stage is not a table)
        (f"{PACKAGE}/defs/runner.py", "sessions"),
        (f"{PACKAGE}/defs/runner.py", "chunks"),
        (f"{PACKAGE}/defs/runner.py", "memories"),
        (f"{PACKAGE}/eval_runner.py", "sessions"),
        (f"{PACKAGE}/eval_runner.py", "chunks"),
    }
)


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring constants of a module, class or function."""
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, kinds)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def _field_names(tree: ast.AST) -> set[int]:
    """ids of string constants used as a record's field name, not as a table's identity:
    dict keys (``{"sessions": n}`` in check metadata), subscripts (``entry["sessions"]``) and
    ``.get("memories")``. Field names of metadata and JSON payloads share words with tables."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            out |= {id(k) for k in node.keys if k is not None}
        elif isinstance(node, ast.Subscript):
            out.add(id(node.slice))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
        ):
            out.add(id(node.args[0]))
    return out


def table_literals(paths: list[Path], names: set[str], root: Path = ROOT) -> list[str]:
    """``path:line: 'name'`` for every string constant equal to a table name, outside the
    registry, docstrings, record field names and the allow-list."""
    bad = []
    for path in paths:
        rel = path.relative_to(root).as_posix()
        if rel == REGISTRY_FILE:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        skip = _docstrings(tree) | _field_names(tree)
        bad += [
            f"{rel}:{node.lineno}: {node.value!r}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value in names
            and id(node) not in skip
            and (rel, node.value) not in TABLE_WORD_ALLOWED
        ]
    return bad


def _table_names() -> set[str]:
    from memory_pipeline.core.common.tables import BY_NAME

    return set(BY_NAME)


def test_no_table_name_as_a_string_literal_outside_the_registry():
    """Tables are named through ``core.common.tables`` constants (``T.SESSIONS``), so a
    rename is one edit and a typo is an ``AttributeError``, not a new folder."""
    bad = table_literals(list(_python_files(PACKAGE)), _table_names())
    assert not bad, "name these tables through core.common.tables:\n" + "\n".join(bad)


def _literal_tuples(paths: list[Path], values: set[str]) -> list[str]:
    """``path:line`` of every tuple/list/set display whose elements are exactly ``values``."""
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Tuple | ast.List | ast.Set) and node.elts:
                elts = [e.value for e in node.elts if isinstance(e, ast.Constant)]
                if len(elts) == len(node.elts) and set(elts) == values:
                    found.append(f"{_rel(path)}:{node.lineno}")
    return found


def test_one_representations_list_and_one_tokenizer_list():
    from memory_pipeline.core.common.representations import REPRESENTATIONS
    from memory_pipeline.core.indexes.tokenize import TOKENIZER_NAMES

    files = list(_python_files(PACKAGE))
    reps = _literal_tuples(files, set(REPRESENTATIONS))
    assert [r.split(":")[0] for r in reps] == [f"{PACKAGE}/core/common/representations.py"], reps
    tokenizers = _literal_tuples(files, set(TOKENIZER_NAMES))
    assert [t.split(":")[0] for t in tokenizers] == [f"{PACKAGE}/core/indexes/tokenize.py"], (
        tokenizers
    )


def test_embedders_are_built_by_the_one_factory():
    """Only ``make_embedder`` constructs an embedder class: documents and queries then get
    the same model and output size."""
    classes = {"LocalEmbedder", "E5Embedder", "UseEmbedder", "OpenAIEmbedder", "VoyageEmbedder"}
    factory = f"{PACKAGE}/core/represent/providers/factory.py"
    calls = []
    for path in _python_files(PACKAGE):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "attr", getattr(node.func, "id", ""))
                if name in classes and _rel(path) != factory:
                    calls.append(f"{_rel(path)}:{node.lineno}: {name}")
    assert not calls, "build embedders with make_embedder:\n" + "\n".join(calls)


# ----------------------------------------------------------------------------- the checkers


def _write(root: Path, files: dict[str, str]) -> dict[str, Path]:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return package_modules(PACKAGE, root)


def _scan(root: Path, files: dict[str, str]) -> tuple[dict[str, Path], tuple[Import, ...]]:
    known = _write(root, files)
    return known, tuple(i for m, p in known.items() for i in imports_of(m, p, known))


def test_checkers_catch_dagster_in_a_function_a_later_stage_and_relative_imports(tmp_path):
    known, imports = _scan(
        tmp_path,
        {
            "memory_pipeline/__init__.py": "",
            "memory_pipeline/config.py": "",
            "memory_pipeline/core/__init__.py": "",
            "memory_pipeline/core/common/__init__.py": "",
            "memory_pipeline/core/common/ids.py": "def f():\n    import dagster as dg\n",
            "memory_pipeline/core/ingest/__init__.py": "",
            "memory_pipeline/core/ingest/stage.py": "from ..sessions import chunking\n"
            "from memory_pipeline import config\n",
            "memory_pipeline/core/sessions/__init__.py": "",
            "memory_pipeline/core/sessions/chunking.py": "from . import stage\n",
            "memory_pipeline/core/sessions/stage.py": "from .chunking import x\n",
            # no module cycle, but ingest ↔ sessions between packages
            "memory_pipeline/core/ingest/normalize.py": "",
            "memory_pipeline/core/sessions/sessionize.py": "from ..ingest import normalize\n",
        },
    )
    bad_core = "\n".join(core_violations(imports))
    assert "core.common.ids imports dagster" in bad_core
    assert "core.ingest.stage imports memory_pipeline.config" in bad_core
    bad_layers = "\n".join(layer_violations(imports))
    assert "ingest.stage imports memory_pipeline.core.sessions.chunking" in bad_layers
    graph = import_graph(imports)
    cycles = strongly_connected(graph)
    assert cycles == [[f"{CORE}.sessions.chunking", f"{CORE}.sessions.stage"]]
    text = describe_cycles(graph, cycles)
    assert f"{CORE}.sessions.chunking → {CORE}.sessions.stage → {CORE}.sessions.chunking" in text
    assert "sessions/chunking.py:1: memory_pipeline.core.sessions.chunking imports" in text
    packages = strongly_connected(import_graph(imports, lambda m: package_of(m, known)))
    assert packages == [[f"{CORE}.ingest", f"{CORE}.sessions"]]


def test_checker_catches_a_self_import_guard(tmp_path):
    path = tmp_path / "conftest.py"
    path.write_text(
        "try:\n    from memory_pipeline_tests._env import x\nexcept ImportError:\n    pass\n"
        "try:\n    import rank_bm25\nexcept ImportError:\n    pass\n",
        encoding="utf-8",
    )
    assert self_import_guards([path]) == [f"{path}:2: guarded memory_pipeline_tests._env"]


def test_package_data_exists_and_covers_every_data_file():
    """pyproject's package-data names real files, and every non-Python file in the package is
    shipped by it (a wheel would otherwise lack it: the bm25_search.sql / defaults.toml lesson).
    """
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    package_data = config["tool"]["setuptools"]["package-data"]
    shipped: set[Path] = set()
    for package, patterns in package_data.items():
        base = ROOT / package.replace(".", "/")
        for pattern in patterns:
            matched = {p for p in base.glob(pattern) if p.is_file()}
            assert matched, f"package-data {package}: {pattern} matches no file"
            shipped |= matched
    data = {
        p
        for p in (ROOT / PACKAGE).rglob("*")
        if p.is_file() and p.suffix not in {".py", ".pyc"} and "__pycache__" not in p.parts
    }
    assert data <= shipped, f"not in package-data: {sorted(map(_rel, data - shipped))}"


def test_table_literal_checker_skips_docstrings_and_field_names_only(tmp_path):
    path = tmp_path / PACKAGE / "defs" / "x.py"
    path.parent.mkdir(parents=True)
    path.write_text(
        '"""Writes sessions."""\n'
        "def f(store, meta):\n"
        '    """sessions"""\n'
        '    meta["sessions"], meta.get("sessions"), {"sessions": 1}\n'
        '    store.read("sessions")\n'
        '    return dg.AssetKey("chunks"), ("raw_messages",)\n',
        encoding="utf-8",
    )
    bad = table_literals([path], {"sessions", "chunks", "raw_messages"}, root=tmp_path)
    assert bad == [
        f"{PACKAGE}/defs/x.py:5: 'sessions'",
        f"{PACKAGE}/defs/x.py:6: 'chunks'",
        f"{PACKAGE}/defs/x.py:6: 'raw_messages'",
    ]


# ----------------------------------------------------------------------------- one way to run

RUNNER_FILE = f"{PACKAGE}/defs/runner.py"


def materialize_calls(paths: list[Path], root: Path = ROOT) -> list[str]:
    """``path:line`` of every call of ``<x>.materialize(...)`` or a bare ``materialize(...)``
    (how Dagster's ``materialize`` is called), outside docstrings."""
    found = []
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
                if name in ("materialize", "execute_in_process"):
                    found.append(f"{path.relative_to(root).as_posix()}:{node.lineno}")
    return found


def test_stages_run_through_one_module():
    """``dg.materialize`` / ``execute_in_process`` outside the tests live in defs/runner.py
    only: the CLI, the LoCoMo corpus build and the benchmarks all run stages through
    ``materialize_stages``."""
    calls = materialize_calls(list(_python_files(PACKAGE, "benchmarks")))
    assert calls and {c.rsplit(":", 1)[0] for c in calls} == {RUNNER_FILE}, calls


def test_materialize_scan_finds_calls(tmp_path: Path):
    (tmp_path / "a.py").write_text(
        "import dagster as dg\nfrom dagster import materialize\n"
        "dg.materialize([])\nmaterialize([])\nx.materialize_to_memory([])\n",
        encoding="utf-8",
    )
    assert materialize_calls([tmp_path / "a.py"], tmp_path) == ["a.py:3", "a.py:4"]
