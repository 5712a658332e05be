"""MkDocs hook: the reference pages that are generated from the code and the schema tables at build time.

A page asks for a generated block with a marker line ``<!-- generate: NAME -->``; ``on_page_markdown`` replaces it
with ``BLOCKS[NAME]()`` before Markdown is rendered (so the ``:::`` lines of the API block reach mkdocstrings). An
unknown marker fails the build. The functions need no MkDocs, so tests import this file to check what the pages
say (tests/test_docs.py).

What it reads, each in one place:
- the CLI: the console script ``gguf-construct`` named in pyproject.toml; the module it points at must have a
  ``parser()`` returning the ``argparse.ArgumentParser`` (``CLI_PARSER_FUNCTION``);
- the API: ``gguf_construct.__all__``, each name documented as ``gguf_construct.NAME`` (griffe follows the
  package's ``TYPE_CHECKING`` imports to the defining object);
- the rules and limits: ``schema/rules.json``, ``schema/limits.json`` and ``schema/template_rules.json``.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "schema"
MARKER = re.compile(r"^<!-- generate: ([a-z_]+) -->$", re.MULTILINE)
#: the console script whose module builds the parser, and the function there that returns it
CLI_SCRIPT = "gguf-construct"
CLI_PARSER_FUNCTION = "parser"


def _import_package() -> Any:
    if str(ROOT) not in sys.path:  # the checkout being documented, not whatever copy is installed
        sys.path.insert(0, str(ROOT))
    return importlib.import_module("gguf_construct")


def _md(text: object) -> str:
    """Plain text (argparse help, table docs) as one Markdown line: ``*`` and ``<`` stay literal."""
    return " ".join(str(text).split()).replace("*", "\\*").replace("<", "&lt;")


def _cell(text: object) -> str:
    """Text for one Markdown table cell."""
    return _md(text).replace("|", "\\|")


def _description(p: argparse.ArgumentParser) -> list[str]:
    """A parser's description: kept line by line where its formatter keeps it so, else one paragraph."""
    if not p.description:
        return []
    if issubclass(p.formatter_class, argparse.RawDescriptionHelpFormatter):
        return ["```text", p.description.strip("\n"), "```", ""]
    return [_md(p.description), ""]


# -- CLI ---------------------------------------------------------------------------------------------------------------
def cli_parser() -> argparse.ArgumentParser:
    """The parser of the ``gguf-construct`` console script (found through pyproject.toml's ``[project.scripts]``)."""
    _import_package()
    module_name = _console_script(CLI_SCRIPT).partition(":")[0]
    build = getattr(importlib.import_module(module_name), CLI_PARSER_FUNCTION)
    return build()


def _console_script(name: str) -> str:
    """``module:function`` of a console script in pyproject.toml's ``[project.scripts]``."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the one line this needs, read plainly
        found = re.search(rf'^"?{re.escape(name)}"?\s*=\s*"([^"]+)"', text, re.MULTILINE)
        if found is None:
            raise KeyError(name) from None
        return found.group(1)
    return str(tomllib.loads(text)["project"]["scripts"][name])


def _subcommands(p: argparse.ArgumentParser) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name, ""), sub


def _shared(action: argparse.Action) -> tuple[tuple[str, ...], str | None]:
    return tuple(action.option_strings), action.help


def _argument_lines(p: argparse.ArgumentParser, skip: frozenset[tuple[tuple[str, ...], str | None]] = frozenset()) -> list[str]:
    """One list item per argument; ``skip``: the top-level options every command repeats (listed once, above)."""
    formatter = p._get_formatter()
    lines = []
    for action in p._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) or action.help == argparse.SUPPRESS:
            continue
        if action.option_strings and _shared(action) in skip:
            continue
        invocation = formatter._format_action_invocation(action)
        help_text = formatter._expand_help(action) if action.help else ""
        if action.choices is not None and action.metavar is not None and not isinstance(action.choices, dict):
            choices = ", ".join(f"`{c}`" for c in action.choices)
            help_text = f"{help_text} (one of {choices})" if help_text else f"one of {choices}"
        if action.required and action.option_strings:
            help_text = f"required; {help_text}" if help_text else "required"
        lines.append(f"- `{invocation}`" + (f": {_md(help_text)}" if help_text else ""))
    return lines


def _usage(p: argparse.ArgumentParser) -> str:
    return " ".join(p.format_usage().removeprefix("usage:").split())


def _command_section(name: str, summary: str, p: argparse.ArgumentParser, skip: frozenset[tuple[tuple[str, ...], str | None]]) -> list[str]:
    out = [f"## {name}", ""]
    if summary:
        out += [_md(summary[0].upper() + summary[1:] + ("" if summary.endswith(".") else ".")), ""]
    out += ["```text", _usage(p), "```", ""]
    out += _description(p)
    out += _argument_lines(p, skip) + [""]
    if p.epilog:
        out += ["```text", p.epilog.strip("\n"), "```", ""]
    return out


def cli_reference() -> str:
    """Every command of ``gguf-construct``: usage, description, each argument with its help."""
    top = cli_parser()
    commands = list(_subcommands(top))
    out = ["```text", _usage(top), "```", ""]
    out += _description(top)
    shared = frozenset(_shared(a) for a in top._actions if a.option_strings)
    out += ["Options accepted before or after any command:", ""] + _argument_lines(top) + [""]
    if top.epilog:
        out += ["```text", top.epilog.strip("\n"), "```", ""]
    out += ["| command | what it does |", "|---|---|"]
    out += [f"| [`{name}`](#{name}) | {_cell(summary)} |" for name, summary, _ in commands] + [""]
    for name, summary, sub in commands:
        out += _command_section(name, summary, sub, shared)
    return "\n".join(out)


# -- API ---------------------------------------------------------------------------------------------------------------
def _is_schema(obj: Any) -> bool:
    """A construct declaration instance (``GGUF``): documented by its class."""
    return not isinstance(obj, type) and callable(getattr(obj, "parse", None)) and callable(getattr(obj, "build", None))


_API_GROUPS: tuple[tuple[str, Callable[[Any], bool]], ...] = (
    ("Exceptions", lambda obj: inspect.isclass(obj) and issubclass(obj, BaseException)),
    ("Classes", inspect.isclass),
    ("Functions", inspect.isroutine),
    ("Schemas", _is_schema),
    ("Modules", inspect.ismodule),
    ("Other names", lambda obj: True),
)


def api_target(name: str, obj: Any) -> str:
    """The identifier mkdocstrings documents for public name ``name``: where a class or function is defined (its
    ``__module__``, found at build time, so no module path is written here), a schema's class, a module's own
    name; anything else as ``gguf_construct.NAME`` (griffe follows the package's ``TYPE_CHECKING`` imports)."""
    if inspect.isclass(obj) or inspect.isroutine(obj):
        return f"{obj.__module__}.{obj.__qualname__}"
    if _is_schema(obj):
        return f"{type(obj).__module__}.{type(obj).__qualname__}"
    if inspect.ismodule(obj):
        return obj.__name__
    return f"gguf_construct.{name}"


def api_reference() -> str:
    """One mkdocstrings block per name of ``gguf_construct.__all__``, grouped by kind, in ``__all__``'s order."""
    package = _import_package()
    groups: dict[str, list[str]] = {title: [] for title, _ in _API_GROUPS}
    for name in package.__all__:
        obj = getattr(package, name)
        groups[next(t for t, belongs in _API_GROUPS if belongs(obj))].append(name)
    out = []
    for title, names in groups.items():
        if names:
            out += [f"## {title}", ""]
            for name in names:
                out += _api_entry(name, getattr(package, name))
    return "\n".join(out)


def _api_entry(name: str, obj: Any) -> list[str]:
    target = api_target(name, obj)
    if not _is_schema(obj):
        return [f"::: {target}", "    options:", "      heading_level: 3", "      members_order: source", ""]
    return [
        f"### {name}",
        "",
        f"`gguf_construct.{name}` is a construct declaration (`parse`, `build`, `parse_file`, `build_file`),"
        f" an instance of `{type(obj).__name__}`:",
        "",
        f"::: {target}",
        "    options:",
        "      show_root_heading: false",
        "      show_root_toc_entry: false",
        "      heading_level: 4",
        "      show_bases: false",
        "      members: false",
        "",
    ]


# -- rules and limits --------------------------------------------------------------------------------------------------
def _table(name: str) -> Any:
    return json.loads((SCHEMA / f"{name}.json").read_text(encoding="utf-8"))


def rule_rows() -> list[tuple[str, str, str, str]]:
    """(id, exception class, what it requires, source key) for every rule, as ``rules.catalogue()`` builds them:
    the rows of rules.json, then ``limit.<name>`` (LimitError), then the template rules (InvalidValueError)."""
    table = _table("rules")
    rows = [(rule_id, row["class"], row["doc"], row["spec"]) for rule_id, row in table["rules"].items()]
    rows += [(f"limit.{lim['name']}", "LimitError", lim["doc"], "gguf-construct") for lim in _table("limits")["limits"]]
    rows += [(rule_id, "InvalidValueError", doc, "jinja2-sandbox") for rule_id, doc in _table("template_rules")["rules"].items()]
    return rows


def rule_catalogue() -> str:
    """The catalogue as one table per rule family (the id's first part), then the sources the rows cite."""
    families: dict[str, list[tuple[str, str, str, str]]] = {}
    for row in rule_rows():
        families.setdefault(row[0].split(".")[0], []).append(row)
    out = []
    for family, rows in families.items():
        out += [f"## {family}", "", "| rule | raises | requires | source |", "|---|---|---|---|"]
        out += [f"| `{rid}` | `{cls}` | {_cell(doc)} | [{key}](#source-{key}) |" for rid, cls, doc, key in rows] + [""]
    out += ["## Sources", "", "The upstream document (repository: file) that states each rule.", ""]
    out += [f'- <a id="source-{key}"></a>`{key}`: {_md(where)}' for key, where in _table("rules")["sources"].items()]
    return "\n".join(out) + "\n"


def limits_table() -> str:
    """Every named limit with its default, unit and what it bounds."""
    out = ["| limit | default | unit | what it bounds |", "|---|---:|---|---|"]
    out += [f"| `{lim['name']}` | {lim['value']:,} | {lim['unit']} | {_cell(lim['doc'])} |" for lim in _table("limits")["limits"]]
    return "\n".join(out) + "\n"


BLOCKS: dict[str, Callable[[], str]] = {
    "cli": cli_reference,
    "api": api_reference,
    "rules": rule_catalogue,
    "limits": limits_table,
}


def expand(markdown: str) -> str:
    """``markdown`` with every marker replaced by its generated block (KeyError names an unknown one)."""
    return MARKER.sub(lambda m: BLOCKS[m.group(1)](), markdown)


def on_page_markdown(markdown: str, **_: Any) -> str:
    return expand(markdown)
