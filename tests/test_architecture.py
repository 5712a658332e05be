"""The package's import graph: no cycle (lazy, function-level imports included) and the layering below.

Every module of ``gguf_construct`` is read with ``ast``; every ``import``/``from ... import`` anywhere in it (module
level, inside functions, under ``TYPE_CHECKING``), relative or absolute, is an edge to the module it names
(``from .pkg import name`` is an edge to ``pkg.name`` when that is a module, else to ``pkg``). A package's
``__init__`` is the module ``pkg``; importing ``pkg.sub`` runs ``pkg/__init__`` too, but that implicit edge is
not counted (it would tie every module to the top-level package).

Layers, lowest first: the core tables and checks (errors, tables, limits, untrusted, shapes, naming,
progress); ``formats`` (the declarations) and ``quants``; ``validation`` (module or package: matched by
prefix); ``fileio``; ``api`` and ``remote``; ``registry``; then ``report``, ``convert``, ``migrate``,
``fuzzing``, ``remote.scan`` and ``cli``.
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
            return path[seen[nxt]:] + [nxt]
        seen[nxt] = len(path)
        path.append(nxt)


def _is(module: str, prefix: str) -> bool:
    """``module`` is ``prefix`` or inside it; a prefix ending in '.' matches submodules only (not the package's
    ``__init__``). ``gguf_construct.validation`` matches the module and the package (and ``validation_legacy``
    ...), whichever the tree has."""
    full = f"{PKG}.{prefix}"
    if prefix.endswith("."):
        return module.startswith(full)
    return module == full or module.startswith(full + ".") or (prefix == "validation" and module.startswith(full + "_"))


#: ``remote.scan`` is the backend of the ``scan`` command (info and validate over many URLs): a tool in the top
#: layer that lives beside the remote readers it drives.
TOOLS = {f"{PKG}.remote.scan"}

CORE = ("errors", "tables", "table_records", "limits", "untrusted", "shapes", "naming", "progress")
ABOVE_FORMATS = ("validation", "fileio", "api", "remote", "registry", "report", "convert", "migrate", "fuzzing", "cli", "security", "imatrix")

#: (who, what it must never import, why)
RULES: list[tuple[tuple[str, ...], tuple[str, ...], str]] = [
    (CORE, ("formats", "quants", *ABOVE_FORMATS), "the core tables and checks are the bottom layer"),
    (("formats",), ABOVE_FORMATS, "the declarations stand alone: file objects, validators and tools are built on them"),
    (("quants",), ABOVE_FORMATS, "the block codecs know bytes and types, not files"),
    (("validation",), ("fileio", "api", "remote", "registry", "report", "convert", "migrate", "fuzzing", "cli"), "validators judge parsed containers"),
    (("fileio",), ("api", "remote", "registry", "report", "convert", "migrate", "fuzzing", "cli"), "writing safely is below every writer"),
    (("api.", "remote."), ("registry", "report", "convert", "migrate", "fuzzing", "cli"), "file objects do not dispatch on formats"),
    (("registry",), ("report", "convert", "migrate", "fuzzing", "cli"), "the registry is the top of the library"),
    (("strategies", "fuzzing"), ("cli",), "test tooling does not depend on the command line"),
    (tuple(m.partition(".")[2] for m in MODULES if m != PKG and not _is(m, "cli")), ("cli",), "nothing but the command line imports it"),
]


def test_the_graph_sees_lazy_and_relative_imports():
    """The walker finds what it must: a module-level relative import, a function-level one, and a from-import
    of a submodule (so the checks below cannot pass on an empty graph)."""
    assert f"{PKG}.formats.base" in GRAPH[f"{PKG}.formats.gguf"]
    assert f"{PKG}.remote.ollama" in GRAPH[f"{PKG}.registry"]  # imported inside load_url
    assert f"{PKG}.report" in GRAPH[f"{PKG}.remote.scan"]  # `from ..report import info_json` in a function
    assert len(GRAPH) > 100 and sum(map(len, GRAPH.values())) > 300


def test_no_import_cycle():
    cycles = _cycles(GRAPH)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(_a_cycle(c)) for c in cycles)


def test_the_cycle_finder_finds_one():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("who, banned, why", RULES[:-1], ids=[",".join(r[0]) for r in RULES[:-1]])
def test_layering(who, banned, why):
    broken = sorted(
        f"{m} -> {t}"
        for m, targets in GRAPH.items() if any(_is(m, w) for w in who) and m not in TOOLS
        for t in targets if any(_is(t, b) for b in banned)
    )  # fmt: skip
    assert not broken, f"{why}: " + ", ".join(broken)


def test_only_the_command_line_imports_it():
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
    assert before == [PKG, f"{PKG}.errors", f"{PKG}.migrate"]
    assert f"{PKG}.registry" in after and f"{PKG}.formats.gguf" in after
    assert not any(m.startswith((f"{PKG}.quants.quantize", f"{PKG}.migrate.", f"{PKG}.cli")) for m in after)
