"""The floors and wings of DESIGN.md, checked on the source: who may import whom.

Walks every module's AST (imports inside functions count too) and fails on an import that
crosses a rule:

* ``kb_sources/`` and ``retrievers/`` (floor 1) import neither each other nor anything above them,
  except the one registry mechanism, ``kb_sources/plugins.py`` (standard library only), which
  every package may use;
* a wing of ``curation/`` imports only the wings its ``__init__`` docstring names (table below);
  ``curation/templates.py`` is shared by every wing and imports no wing;
* nothing below floor 3 imports ``app`` or ``app_pages``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FLOOR1 = ("kb_sources", "retrievers")
#: Floor-1 modules every package may import: they import nothing of the project.
SHARED_LEAVES = frozenset({"kb_sources.plugins"})
TOP = ("app", "app_pages", "benchmarks")

#: wing -> the wings it may import (itself and curation.templates are always allowed).
WING_RULES: dict[str, frozenset[str]] = {
    "store": frozenset({"matching"}),
    "access": frozenset({"store"}),
    "matching": frozenset(),
    "jobs": frozenset({"access", "store"}),
    # the learned ranker (DESIGN.md, "Two speeds of learning") sits under search and training
    "ranking": frozenset({"store", "matching"}),
    "search": frozenset({"access", "store", "matching", "jobs", "ranking"}),
    # evaluation runs as a background job for a signed-in admin, hence jobs and access
    "evaluation": frozenset({"search", "store", "matching", "jobs", "access", "ranking"}),
    # a ranker round also fits the version's screening calibration (issue 38), hence screening
    "training": frozenset({"evaluation", "search", "store", "matching", "jobs", "access",
                           "ranking", "screening"}),
    # PubMed as the corpus: query building (store, matching), NCBI settings (access), the search
    # job (jobs) and the ranking of its hits with the Curate page's code (search)
    "pubmed": frozenset({"store", "matching", "access", "search", "jobs"}),
    # in-query learning and stopping (DESIGN.md, "Three speeds of learning"): arrays over the
    # ranker's candidates, under the app and the simulations
    "screening": frozenset({"store", "ranking", "matching"}),
    # replays of simulated curators over held-out tasks, and the learn-as-you-label simulations
    # of the dense recipes (a copy of the workspace searched and matched; the ``simulate`` job,
    # hence jobs and access) and of the ranker (issue 38: moved out of training)
    "simulation": frozenset({"screening", "evaluation", "training", "ranking", "store",
                             "search", "matching", "jobs", "access"}),
    "cli": frozenset({"store", "access", "matching", "jobs", "search", "evaluation", "training",
                      "ranking", "pubmed", "screening", "simulation"}),
}
SHARED = frozenset({"templates"})


def imported_modules(source: str) -> list[tuple[int, str]]:
    """``(line, dotted module)`` of every absolute import in ``source`` (functions included).

    ``from a.b import c`` yields ``a.b.c`` as well as ``a.b``, so importing a module from its
    package (``from curation import jobs``) is seen as importing ``curation.jobs``.
    """
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def violation(importer: str, imported: str) -> str | None:
    """Why ``importer`` may not import ``imported``, or None when the import is allowed."""
    top = imported.split(".")[0]
    mine = importer.split(".")
    if top in TOP and mine[0] not in TOP:
        return f"{importer} (floor {1 if mine[0] in FLOOR1 else 2}) imports {top} (floor 3)"
    if mine[0] in FLOOR1:
        if imported in SHARED_LEAVES or imported.rsplit(".", 1)[0] in SHARED_LEAVES:
            return None
        if top == "curation" or (top in FLOOR1 and top != mine[0]):
            return f"{mine[0]}/ (floor 1) imports {top}"
        return None
    if mine[0] != "curation" or top != "curation":
        return None
    target = imported.split(".")
    if len(target) < 2:
        return None  # the bare package (its __init__ holds no code)
    src_wing = mine[1] if len(mine) > 1 else ""
    dst_wing = target[1]
    if dst_wing in SHARED:
        return None
    if src_wing in SHARED:
        return f"{importer} is shared by every wing and may not import curation.{dst_wing}"
    if src_wing not in WING_RULES:
        return f"{importer} sits outside a wing of curation/"
    if dst_wing not in WING_RULES and dst_wing not in SHARED:
        return None  # an attribute of the package, not a module (caught by the layout test)
    if dst_wing == src_wing or dst_wing in WING_RULES[src_wing]:
        return None
    allowed = ", ".join(sorted(WING_RULES[src_wing])) or "no other wing"
    return f"curation.{src_wing} may import {allowed}, not curation.{dst_wing}"


def source_files() -> list[Path]:
    files = []
    for package in ("curation", *FLOOR1):
        files += sorted((ROOT / package).rglob("*.py"))
    return files


def test_every_import_respects_floors_and_wings():
    problems = []
    for path in source_files():
        importer = module_name(path)
        for line, imported in imported_modules(path.read_text(encoding="utf-8")):
            why = violation(importer, imported)
            if why:
                problems.append(f"{path.relative_to(ROOT)}:{line}: {why}")
    assert not problems, "import rules broken:\n" + "\n".join(problems)


def test_curation_modules_all_sit_in_wings():
    loose = [p.name for p in (ROOT / "curation").glob("*.py")
             if p.stem not in {"__init__", *SHARED}]
    assert loose == []
    wings = {p.name for p in (ROOT / "curation").iterdir()
             if p.is_dir() and (p / "__init__.py").is_file()}
    assert wings == set(WING_RULES)
    for wing in wings:
        doc = ast.get_docstring(ast.parse((ROOT / "curation" / wing / "__init__.py").read_text()))
        assert doc and "May import:" in doc, f"curation/{wing}/__init__.py needs its docstring"
        for other in WING_RULES[wing]:
            assert f"curation.{other}" in doc, f"curation/{wing} docstring omits {other}"


@pytest.mark.parametrize(("importer", "imported", "reason"), [
    ("retrievers.dense", "curation.store.workspace", "floor 1"),
    ("retrievers.training.losses", "kb_sources.types", "retrievers/ (floor 1) imports kb_sources"),
    ("kb_sources.civic", "retrievers.base", "kb_sources/ (floor 1) imports retrievers"),
    ("retrievers.registry", "kb_sources.errors", "retrievers/ (floor 1) imports kb_sources"),
    ("curation.search.session", "curation.evaluation.runner", "not curation.evaluation"),
    ("curation.matching.matcher", "curation.store.workspace", "no other wing"),
    ("curation.store.labels", "app_pages.common", "floor 3"),
    ("curation.templates", "curation.store.workspace", "shared by every wing"),
    ("curation.loose", "curation.store.workspace", "outside a wing"),
])
def test_checker_catches_broken_rules(importer, imported, reason):
    assert reason in (violation(importer, imported) or "")


@pytest.mark.parametrize(("importer", "imported"), [
    ("curation.search.session", "curation.store.workspace"),
    ("curation.cli.commands", "curation.training"),
    ("curation.store.relations", "curation.templates"),
    ("retrievers.training.trainer", "retrievers.base"),
    ("curation.evaluation.runner", "kb_sources.errors"),
    ("retrievers.registry", "kb_sources.plugins"),
    ("retrievers.vector_store", "kb_sources.plugins.Registry"),
])
def test_checker_allows_the_table(importer, imported):
    assert violation(importer, imported) is None


def test_function_level_imports_are_seen():
    source = "def f():\n    from curation.cli import commands\n"
    assert (2, "curation.cli.commands") in imported_modules(source)


#: Engine packages that only their adapter module may import (retrievers/vector_store.py).
ENGINE_ADAPTERS = {"faiss": "retrievers.faiss_index", "qdrant_client": "retrievers.qdrant_store"}


def test_only_the_adapters_import_vector_engines():
    files = source_files() + sorted((ROOT / "app_pages").rglob("*.py")) + [ROOT / "app.py"]
    problems = []
    for path in files:
        importer = module_name(path)
        for line, imported in imported_modules(path.read_text(encoding="utf-8")):
            adapter = ENGINE_ADAPTERS.get(imported.split(".")[0])
            if adapter is not None and importer != adapter:
                problems.append(f"{path.relative_to(ROOT)}:{line}: imports {imported}; go "
                                f"through retrievers.vector_store ({adapter} is the adapter)")
    assert not problems, "vector engines imported outside their adapters:\n" + "\n".join(problems)


#: Engine drivers only the workspace store may import; everything else goes through
#: ``ws.conn`` (curation/store/database.py) and catches ``curation.store.errors.DATABASE_ERRORS``.
DRIVERS = ("sqlite3", "psycopg", "psycopg_pool", "procrastinate")
#: Files that keep their own local SQLite file, not the workspace database.
OWN_SQLITE_FILES = frozenset({"retrievers/cache.py"})  # the embedding cache, floor 1


def test_only_the_store_imports_database_drivers():
    problems = []
    for path in [*source_files(), *sorted((ROOT / "app_pages").rglob("*.py")), ROOT / "app.py"]:
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("curation/store/") or rel in OWN_SQLITE_FILES:
            continue
        for line, imported in imported_modules(path.read_text(encoding="utf-8")):
            if imported.split(".")[0] in DRIVERS:
                problems.append(f"{rel}:{line}: imports {imported}; use the workspace store "
                                "(ws.conn, curation.store.errors.DATABASE_ERRORS) instead")
    assert not problems, "\n".join(problems)


def test_the_shared_leaves_import_only_the_standard_library():
    import sys

    for leaf in SHARED_LEAVES:
        path = ROOT / (leaf.replace(".", "/") + ".py")
        tops = {m.split(".")[0] for _, m in imported_modules(path.read_text(encoding="utf-8"))}
        assert tops and tops <= set(sys.stdlib_module_names) | {"__future__"}, (leaf, tops)


# -- the store owns the database; no cycles; no private names across modules (issue 27) ---------
#: SQL statements as the structure check finds them in string constants.
SQL_TEXT = re.compile(r"\b(SELECT\s+.+?\s+FROM|INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|"
                      r"DELETE\s+FROM|CREATE\s+(TABLE|INDEX))\b", re.I | re.S)
#: Where SQL may be written: the store wing, and the embedding cache's own local SQLite file.
SQL_HOMES = ("curation/store/", *OWN_SQLITE_FILES)


def app_and_library_files() -> list[Path]:
    return [*source_files(), *sorted((ROOT / "app_pages").rglob("*.py")), ROOT / "app.py"]


def sql_outside_the_store(path: Path, source: str) -> list[str]:
    """``file:line: ...`` for each SQL string constant or use of the database connection
    (``ws.conn``: its ``execute``, or handing it to anything) in ``source``."""
    rel = path.relative_to(ROOT).as_posix() if path.is_absolute() else str(path)
    if rel.startswith(SQL_HOMES):
        return []
    found = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and SQL_TEXT.search(node.value)):
            found.append(f"{rel}:{node.lineno}: SQL text {node.value.strip()[:50]!r}")
        elif isinstance(node, ast.Attribute) and node.attr == "conn":
            found.append(f"{rel}:{node.lineno}: uses the database connection (.conn)")
    return found


def test_sql_lives_only_in_the_store():
    problems = []
    for path in app_and_library_files():
        problems += sql_outside_the_store(path, path.read_text(encoding="utf-8"))
    assert not problems, ("SQL outside curation/store (add a method to a repository class there):\n"
                          + "\n".join(problems))


@pytest.mark.parametrize("source", [
    'rows = ws.conn.execute("SELECT id FROM labels WHERE schema = ?", (s,))',
    'Q = """\n  update models set active = 1\n"""',
    "ws.conn.executemany(sql, rows)",
    "insert_row(ws.conn, row)",
])
def test_the_sql_check_catches_sql_text(source):
    assert sql_outside_the_store(Path("curation/search/x.py"), source)
    assert not sql_outside_the_store(Path("curation/store/x.py"), source)


def import_graph() -> tuple[dict[str, set[str]], list[str]]:
    """Module -> the project modules it imports (functions included), and every private name
    (``_x``) imported from another module."""
    paths = {module_name(p): p for p in app_and_library_files()}
    graph: dict[str, set[str]] = {}
    private: list[str] = []
    for mod, path in paths.items():
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                if node.module in paths:
                    edges.add(node.module)
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    if full in paths:
                        edges.add(full)
                    elif (alias.name.startswith("_") and not alias.name.startswith("__")
                          and node.module in paths and node.module != mod):
                        private.append(f"{mod} imports {full}")
            elif isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name in paths)
        graph[mod] = edges - {mod}
    return graph, private


def cycles_of(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycles_counting_imports_inside_functions():
    graph, _ = import_graph()
    assert cycles_of(graph) == []


def test_no_private_name_is_imported_from_another_module():
    _, private = import_graph()
    assert private == []


def test_the_cycle_check_finds_a_cycle_through_a_function_level_import():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles_of(graph) == [["a", "b", "c"]]
    assert cycles_of({"a": {"b"}, "b": set()}) == []
