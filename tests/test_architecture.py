"""The package's shape: no import cycles, and the stage boundaries users rely on.

The graph is read from the sources (every ``import`` statement, also those inside
functions), so a lazy import that would close a cycle counts as one; so does an import made
for type checking alone.
"""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
from pathlib import Path

import pytest

import tcbreplay

PACKAGE = Path(tcbreplay.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(module: str, level: int, name: str | None, here: str, is_package: bool) -> str:
    if level == 0:
        return name or ""
    base = here.split(".") if is_package else here.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, *([name] if name else [])])


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of the tree but those under ``if TYPE_CHECKING:`` (never run)."""
    out: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        out.append(node)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and getattr(child.test, "id", None) == "TYPE_CHECKING":
                todo.extend(child.orelse)
                continue
            todo.append(child)
    return out


def import_graph(typing: bool = False) -> dict[str, set[str]]:
    """Each tcbreplay module and the tcbreplay modules it imports (anywhere in its body;
    ``typing``: also under ``if TYPE_CHECKING:``);
    ``from package import name`` counts as importing ``package.name`` when that is a module,
    and as importing ``package`` when it is not. (Read once per test run: a copy each call.)"""
    return {module: set(targets) for module, targets in _read_graph(typing).items()}


@functools.cache
def _trees() -> dict[str, ast.AST]:
    """Each module's syntax tree, parsed once for both graphs."""
    return {module: ast.parse(path.read_text(), str(path)) for module, path in _modules().items()}


@functools.cache
def _read_graph(typing: bool) -> dict[str, frozenset[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    trees = _trees()
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        tree = trees[module]
        for node in ast.walk(tree) if typing else _runtime_nodes(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(module, node.level, node.module, module, is_package)
                named = [f"{base}.{alias.name}" for alias in node.names]
                # the package itself only when a name is read from it, not a module under it
                targets = named if all(n in modules for n in named) else [base, *named]
            for target in targets:
                if target in modules and target != module:
                    graph[module].add(target)
    return {module: frozenset(targets) for module, targets in graph.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_package_has_no_import_cycles() -> None:
    """Imports for type checking count: a cycle they close is one the code dodges."""
    assert _cycles(import_graph(typing=True)) == []


# What each stage may import, besides itself and the ground floor: the data flows inputs ->
# record / import / replay -> store -> score -> compare -> report; querying reads the store
# alone; the command line uses them all. Scoring and what reads scores never reach the record
# or replay stage (nor LangChain through them); replay runs through the record runner and
# never scores (a scoring against another run, --gold-run, is the score stage's), and serve
# reads the requests it answers with the importers' readers of the OpenAI and Anthropic forms.
STAGES = (
    "_inputs", "_store", "_record", "_replay", "_importers", "_score", "_query", "_compare",
    "_report", "_cli",
)  # fmt: skip
ALLOWED = {
    "_inputs": set(),
    "_store": set(),
    "_record": {"_inputs", "_store"},
    "_replay": {"_inputs", "_store", "_record", "_importers"},
    "_importers": {"_inputs", "_store", "_record"},
    "_score": {"_inputs", "_store"},
    "_query": {"_store"},
    "_compare": {"_inputs", "_store", "_score"},
    "_report": {"_inputs", "_store", "_score", "_query", "_compare"},
    "_cli": set(STAGES),
}
# The ground floor: what every stage may use (the version, the JSON reader, secret handling,
# the errors, the clock, the machine's cores, joining Ray, counts in words). It imports no
# stage, and no stage imports the package face (``tcbreplay`` itself, the public API built
# from the stages).
GROUND = {
    "tcbreplay._version",
    "tcbreplay._json",
    "tcbreplay._secrets",
    "tcbreplay._scrub",
    "tcbreplay._model_secrets",
    "tcbreplay.errors",
    "tcbreplay._clock",
    "tcbreplay._machine",
    "tcbreplay._ray",
    "tcbreplay._words",
}
_LANGCHAIN = re.compile(r"^\s*(from|import)\s+(langchain|langgraph)", re.M)


def _stage(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in STAGES else None


def test_each_stage_imports_only_the_stages_before_it() -> None:
    graph = import_graph()
    wrong = []
    for module, targets in graph.items():
        stage = _stage(module)
        if stage not in ALLOWED:
            continue
        for target in targets:
            other = _stage(target)
            if target in GROUND or other == stage or other in ALLOWED[stage]:
                continue
            wrong.append(f"{module} imports {target}")
    assert wrong == []


def test_no_stage_imports_the_package_face() -> None:
    graph = import_graph()
    wrong = [
        module for module, targets in graph.items() if _stage(module) and "tcbreplay" in targets
    ]
    assert wrong == []


def test_every_module_is_in_a_stage_or_on_the_ground_floor() -> None:
    """A new module outside the stages joins the ground floor knowingly (and so is held by
    the test below) or goes into a stage."""
    entry = {"tcbreplay", "tcbreplay.__main__"}
    loose = [m for m in import_graph() if not _stage(m) and m not in GROUND | entry]
    assert loose == []


def test_the_ground_floor_imports_no_stage() -> None:
    graph = import_graph()
    wrong = [f"{m} imports {t}" for m in GROUND for t in graph[m] if t not in GROUND]
    assert wrong == []


TESTS = Path(__file__).parent
# the tests of the whole: the package's shape, the manual, the front page, the examples, the lock
WHOLE = {
    "test_architecture.py",
    "test_docs.py",
    "test_readme.py",
    "test_examples.py",
    "test_lock.py",
}


def test_the_tests_mirror_the_stages() -> None:
    """A test file lives in the folder of the stage it tests (``ground`` for the ground floor),
    so the tests of a module are found from the module's stage; only the tests of the whole sit
    at the top, and no test module imports another (what two share lives in a helper module)."""
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and any(p.glob("test_*.py"))}
    assert folders <= {s.removeprefix("_") for s in STAGES} | {"ground"}
    assert {p.name for p in TESTS.glob("test_*.py")} == WHOLE
    crossing = [
        f"{p.relative_to(TESTS)}: {line.strip()}"
        for p in TESTS.rglob("test_*.py")
        for line in p.read_text().splitlines()
        if re.match(r"\s*(from|import) test_", line)
    ]
    assert crossing == []


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph[module])
    return seen


def test_scoring_and_what_reads_scores_never_reach_langchain() -> None:
    """Not even in a function: ``score``, ``sql`` and ``report`` start without LangChain."""
    graph = import_graph()
    modules = _modules()
    for start in graph:
        if _stage(start) not in ("_score", "_query", "_compare", "_report"):
            continue
        for module in _reachable(graph, start):
            assert not _LANGCHAIN.search(modules[module].read_text()), (start, module)


def test_the_public_api_is_what_init_exports() -> None:
    for name in tcbreplay.__all__:
        assert getattr(tcbreplay, name) is not None, name
    assert (PACKAGE / "py.typed").exists()
    private = [p.name for p in PACKAGE.iterdir() if p.is_dir() and not p.name.startswith("_")]
    assert private in ([], ["kernels"])  # every stage package is private by name


def test_the_sql_is_found_one_way_through_the_package_tcbreplay_queries() -> None:
    """setup.py makes the repository's queries/ the package tcbreplay.queries: a wheel holds
    it as tcbreplay/queries/, an editable install finds it where it is, and the stages ask
    the package where it is."""
    import tcbreplay.queries
    from tcbreplay._store.views import queries_dir

    assert queries_dir() == Path(tcbreplay.queries.__file__).parent
    assert (queries_dir() / "named" / "per_sample.sql").is_file()


def test_importing_the_api_loads_no_stage() -> None:
    code = (
        "import sys, tcbreplay; tcbreplay.__version__; "
        "print(sorted(m for m in sys.modules if m.startswith('tcbreplay.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['tcbreplay._version']"


_TEXT = {".py", ".md", ".sql", ".js", ".css", ".html", ".toml", ".pyx", ".pxi", ".json", ".txt", ""}


def test_no_tracked_file_holds_a_merge_conflict_marker() -> None:
    """A merge once committed BENCHMARKS.md with its conflict markers in it."""
    root = PACKAGE.parent
    listed = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    marker = re.compile(r"^(<{7} |>{7} |={7}$)", re.MULTILINE)
    found = []
    for name in listed.stdout.splitlines():
        path = root / name
        if path.suffix not in _TEXT or not path.is_file():
            continue
        text = path.read_text(errors="replace")
        found += [f"{name}:{text.count(chr(10), 0, m.start()) + 1}" for m in marker.finditer(text)]
    assert found == []
