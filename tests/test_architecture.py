"""The package's import graph: no cycle (lazy, function-level imports included) and the layering below.

Every module of ``gguf_construct`` is read with ``ast``; every ``import``/``from ... import`` anywhere in it (module
level, inside functions, under ``TYPE_CHECKING``), relative or absolute, is an edge to the module it names
(``from .pkg import name`` is an edge to ``pkg.name`` when that is a module, else to ``pkg``). A package's
``__init__`` is the module ``pkg``; importing ``pkg.sub`` runs ``pkg/__init__`` too, but that implicit edge is
not counted (it would tie every module to the top-level package).

The layers are ``LAYERS`` below, lowest first: no module imports a higher layer or another room of its own layer
(``docs/architecture.md`` explains them). The package root holds ``__init__`` and ``errors`` only.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = "gguf_construct"


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for path in sorted((ROOT / PKG).rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return out


MODULES = _modules()


def _known(name: str) -> str | None:
    """The longest prefix of ``name`` that is one of our modules."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> set[str]:
    path, is_pkg = MODULES[module]
    package = module if is_pkg else module.rpartition(".")[0]
    out: set[str | None] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(_known(a.name) for a in node.names if a.name.split(".")[0] == PKG)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != PKG:
                continue
            for a in node.names:
                full = f"{target}.{a.name}"
                out.add(full if full in MODULES else _known(target))
    out.discard(None)
    out.discard(module)
    return out  # type: ignore[return-value]


GRAPH = {m: _imports(m) for m in MODULES}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    return found


def _a_cycle(component: list[str]) -> list[str]:
    """One closed path through a strongly connected component, for the failure message."""
    members = set(component)
    path, seen = [component[0]], {component[0]: 0}
    while True:
        nxt = sorted(w for w in GRAPH[path[-1]] if w in members)[0]
        if nxt in seen:
            return path[seen[nxt] :] + [nxt]
        seen[nxt] = len(path)
        path.append(nxt)


#: The layers, lowest first. A module may import its own room (the folder named here, or the module: the longest
#: name that contains it) and any room of a lower layer; the rooms of one layer are independent of each other.
#: ``""`` is the package root's ``__init__`` (the public surface, which imports the library lazily).
LAYERS: list[tuple[str, ...]] = [
    ("errors",),
    ("core",),  # the tables of schema/, rules, limits, names
    ("quants",),  # block codecs: bytes and types, not files
    ("formats",),  # the construct declarations
    ("validation",),  # checks of parsed containers
    ("sources",),  # where bytes come from: a local map, HTTP, fsspec; budgets and options
    ("api",),  # the file objects, their parts, safe writes
    ("api.openers",),  # each format's file object over a byte source; remote shard sets and Ollama registries
    ("api.registry",),  # every format in one table: detect, load, validate
    ("migration", "convert", "security", "planning", "data"),  # library tools over the file objects
    ("",),  # ``import gguf_construct``
    ("testing",),  # strategies and the differential fuzzer
    ("cli",),
]
ROOMS = {room: level for level, rooms in enumerate(LAYERS) for room in rooms}


def room_of(module: str) -> str:
    """The room of ``LAYERS`` a module is in (KeyError for a module no room holds)."""
    if module == PKG:
        return ""
    name = module.removeprefix(PKG + ".")
    while name and name not in ROOMS:
        name = name.rpartition(".")[0]
    if not name:
        raise KeyError(module)
    return name


def test_the_root_holds_only_the_public_surface():
    """No module at the package root but ``__init__`` and ``errors``: everything else lives in its layer's folder."""
    assert sorted(p.name for p in (ROOT / PKG).glob("*.py")) == ["__init__.py", "errors.py"]


def test_no_two_modules_share_a_file_name():
    """One name, one module: a file name (``__init__`` and a format subpackage's ``schema`` aside) is found once."""
    seen: dict[str, list[str]] = {}
    for m in MODULES:
        if MODULES[m][1]:
            continue
        seen.setdefault(m.rpartition(".")[2], []).append(m)
    twice = {name: where for name, where in seen.items() if len(where) > 1 and name != "schema"}
    assert not twice, twice


def test_the_graph_sees_lazy_and_relative_imports():
    """The walker finds what it must: a module-level relative import, a function-level one, and a from-import
    of a submodule (so the checks below cannot pass on an empty graph)."""
    assert f"{PKG}.formats.base" in GRAPH[f"{PKG}.formats.gguf.schema"]
    assert f"{PKG}.api.openers.ollama_registry" in GRAPH[f"{PKG}.api.registry"]  # imported inside load_url
    assert f"{PKG}.cli.report" in GRAPH[f"{PKG}.cli.scan_runner"]  # `from .report import info_json` in a function
    assert len(GRAPH) > 100 and sum(map(len, GRAPH.values())) > 300


def test_no_import_cycle():
    cycles = _cycles(GRAPH)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(_a_cycle(c)) for c in cycles)


def test_the_cycle_finder_finds_one():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_module_has_a_layer():
    """A new folder is placed in ``LAYERS`` before it can import anything."""
    assert all(room_of(m) in ROOMS for m in MODULES)
    assert room_of(PKG) == "" and room_of(f"{PKG}.errors") == "errors" and room_of(f"{PKG}.api.openers.remote_shards") == "api.openers"
    with pytest.raises(KeyError):
        room_of(f"{PKG}.new_folder.module")


def _climbing(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a room that is neither the importer's own nor in a lower layer."""
    return sorted(
        f"{m} -> {t}"
        for m, targets in graph.items()
        for t in targets
        if room_of(m) != room_of(t) and ROOMS[room_of(t)] >= ROOMS[room_of(m)]
    )


def test_layering():
    broken = _climbing(GRAPH)
    assert not broken, "imports against the layers (see LAYERS): " + ", ".join(broken)


def test_the_layer_check_finds_a_climbing_import():
    """An opener importing the registry, a byte source importing a file object, and two rooms of one layer
    importing each other are each reported; an import of a lower layer and one within a room are not."""
    graph = {
        f"{PKG}.api.openers.over_source": {f"{PKG}.api.registry", f"{PKG}.sources.byte_source"},
        f"{PKG}.sources.http": {f"{PKG}.api.gguf_file", f"{PKG}.sources.budget"},
        f"{PKG}.planning.cache": {f"{PKG}.migration.steps", f"{PKG}.api.registry"},
    }
    assert _climbing(graph) == [
        f"{PKG}.api.openers.over_source -> {PKG}.api.registry",
        f"{PKG}.planning.cache -> {PKG}.migration.steps",
        f"{PKG}.sources.http -> {PKG}.api.gguf_file",
    ]


def test_import_is_light():
    """``import gguf_construct`` loads no format, quantizer, remote reader or migrator until a name is used;
    the first use of a name loads what it needs (``gc.load``: the registry)."""
    code = (
        "import sys, gguf_construct as gc\n"
        "print(sorted(m for m in sys.modules if m.startswith('gguf_construct')))\n"
        "gc.load\n"
        "print(sorted(m for m in sys.modules if m.startswith('gguf_construct')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout.splitlines()
    before, after = eval(out[0]), eval(out[1])  # noqa: S307 - our own subprocess's printed list
    assert before == [PKG, f"{PKG}.errors", f"{PKG}.migration"]
    assert f"{PKG}.api.registry" in after and f"{PKG}.formats.gguf.schema" in after
    assert not any(m.startswith((f"{PKG}.quants.quantize", f"{PKG}.migration.", f"{PKG}.cli")) for m in after)


def _classes() -> dict[str, list[str]]:
    """Every class name that does not start with '_', with the modules defining it."""
    out: dict[str, list[str]] = {}
    for m, (path, _) in MODULES.items():
        for node in ast.parse(path.read_text(), str(path)).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                out.setdefault(node.name, []).append(m)
    return out


def test_one_class_per_name():
    """A class name means one class in the whole package (a ``Report`` of a conversion is not one of a migration)."""
    twice = {name: where for name, where in _classes().items() if len(where) > 1}
    assert not twice, twice


def _exports() -> list[tuple[str, str]]:
    """(package, name) for each name in a package's ``__all__`` (read with ``ast``: nothing imported yet)."""
    out = []
    for m, (path, is_pkg) in MODULES.items():
        if not is_pkg:
            continue
        for node in ast.parse(path.read_text(), str(path)).body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
                out += [(m, name) for name in ast.literal_eval(node.value)]
    return out


@pytest.mark.parametrize("package, name", _exports())
def test_every_exported_name_resolves(package, name):
    """Each name a package's ``__all__`` promises is there, lazy names included (a lazy table naming a module
    that does not exist fails here, not in a user's program)."""
    assert getattr(importlib.import_module(package), name) is not None
