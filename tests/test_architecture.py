"""The package's import graph: no cycle (lazy, function-level imports included) and the layering below.

Every module of ``gguf_construct`` is read with ``ast``; every ``import``/``from ... import`` anywhere in it (module
level, inside functions, under ``TYPE_CHECKING``), relative or absolute, is an edge to the module it names
(``from .pkg import name`` is an edge to ``pkg.name`` when that is a module, else to ``pkg``). A package's
``__init__`` is the module ``pkg``; importing ``pkg.sub`` runs ``pkg/__init__`` too, but that implicit edge is
not counted (it would tie every module to the top-level package).

Layers, lowest first (each folder's ``__init__`` says what it may import): ``errors`` and ``core``; ``formats``
and ``quants``; ``validation``; the byte sources (``sources``: a local map, HTTP, options); ``api`` (the file
objects, safe writes); the source openers (``sources.openers`` and the readers built on it); ``api.registry``;
then ``security``, ``migration``, ``convert``, ``testing`` and ``cli``. The package root holds ``__init__`` and ``errors`` only.
"""

from __future__ import annotations

import ast
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


def _is(module: str, prefix: str) -> bool:
    """``module`` is ``prefix`` or inside it; a prefix ending in '.' matches submodules only (not the package's
    ``__init__``)."""
    full = f"{PKG}.{prefix}"
    if prefix.endswith("."):
        return module.startswith(full)
    return module == full or module.startswith(full + ".")


#: the byte sources below the file objects, and the openers above them (they open a format's file object over a
#: source); ``sources/__init__`` exports only the lower part
SOURCES_LOW = ("sources.byte_source", "sources.urls", "sources.http", "sources.options")
SOURCES_HIGH = ("sources.openers", "sources.ollama_registry", "sources.ranged_safetensors", "sources.remote_shards")
API_OBJECTS = tuple(m.partition(".")[2] for m in MODULES if _is(m, "api.") and not _is(m, "api.registry"))
TOP = ("security", "convert", "migration", "planning", "testing", "cli")

#: (who, what it must never import, why)
RULES: list[tuple[tuple[str, ...], tuple[str, ...], str]] = [
    (("errors", "core"), ("formats", "quants", "validation", "sources", "api", *TOP), "the core tables and checks are the bottom layer"),
    (
        ("formats",),
        ("validation", "sources", "api", *TOP),
        "the declarations stand alone: file objects, validators and tools are built on them",
    ),
    (("quants",), ("formats", "validation", "sources", "api", *TOP), "the block codecs know bytes and types, not files"),
    (("validation",), ("sources", "api", *TOP), "validators judge parsed containers"),
    (SOURCES_LOW, ("api", *SOURCES_HIGH, *TOP), "where bytes come from is below what they are read into"),
    (API_OBJECTS, ("api.registry", *SOURCES_HIGH, *TOP), "file objects do not dispatch on formats or open sources"),
    (SOURCES_HIGH, ("api.registry", *TOP), "the source openers sit below the registry that dispatches to them"),
    (("api.registry",), TOP, "the registry is the top of the library"),
    (("security",), ("convert", "migration", "testing", "cli"), "the security checks are library code"),
    (("migration",), ("security", "convert", "testing", "cli"), "migrations are library code"),
    (("convert",), ("security", "testing", "cli"), "conversions are library code (they share migration's steps)"),
]


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
    assert f"{PKG}.sources.ollama_registry" in GRAPH[f"{PKG}.api.registry"]  # imported inside load_url
    assert f"{PKG}.cli.report" in GRAPH[f"{PKG}.cli.scanning"]  # `from .report import info_json` in a function
    assert len(GRAPH) > 100 and sum(map(len, GRAPH.values())) > 300


def test_no_import_cycle():
    cycles = _cycles(GRAPH)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(_a_cycle(c)) for c in cycles)


def test_the_cycle_finder_finds_one():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("who, banned, why", RULES, ids=[",".join(r[0]) for r in RULES])
def test_layering(who, banned, why):
    broken = sorted(
        f"{m} -> {t}" for m, targets in GRAPH.items() if any(_is(m, w) for w in who) for t in targets if any(_is(t, b) for b in banned)
    )
    assert not broken, f"{why}: " + ", ".join(broken)


def test_only_the_command_line_imports_it():
    """Nothing outside ``cli`` imports it."""
    broken = sorted(f"{m} -> {t}" for m, targets in GRAPH.items() if not _is(m, "cli") for t in targets if _is(t, "cli"))
    assert not broken, ", ".join(broken)


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
