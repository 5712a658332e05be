"""The documentation: the generated reference pages cover what the code and the tables hold, the figures on the
speed page say how to rerun them, README stays a short front page whose test command is CI's, and no link points
at a file that does not exist. The site itself is built with ``mkdocs build --strict`` in .ci/run."""

from __future__ import annotations

import argparse
import importlib
import re
from pathlib import Path

import pytest
from conftest import ROOT
from docs_pages import DOCS, hook, page, pages

import gguf_construct as gc
from gguf_construct.core import rules
from gguf_construct.core.limits import TABLE

README = (ROOT / "README.md").read_text(encoding="utf-8")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_rule_catalogue_page_has_every_rule_with_its_class_and_doc():
    text = page("reference/rules.md")
    catalogue = rules.catalogue()
    rows = {row[0]: row for row in hook().rule_rows()}
    assert set(rows) == set(catalogue)
    for rule_id, rule in catalogue.items():
        assert rows[rule_id][1:3] == (rule.error_class.__name__, rule.doc), rule_id
        assert f"| `{rule_id}` | `{rule.error_class.__name__}` |" in text, rule_id


def test_the_limits_page_has_every_limit_with_its_default():
    text = page("reference/limits.md")
    for name, lim in TABLE.items():
        assert f"| `{name}` | {lim.value:,} | {lim.unit} |" in text, name


def _commands(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def test_the_cli_page_has_every_command_and_option():
    text = page("reference/cli.md")
    top = hook().cli_parser()
    commands = _commands(top)
    assert {"info", "validate", "convert", "quantize", "migrate", "fuzz"} <= set(commands)
    for name, sub in commands.items():
        section = text.split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]
        for action in sub._actions:
            if action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
                continue
            shown = action.option_strings[-1] if action.option_strings else (action.metavar or action.dest)
            assert shown in section or shown in text.split("\n## ", 1)[0], (name, shown)


def test_the_api_page_documents_every_public_name_where_it_is_defined():
    text = page("reference/api.md")
    for name in gc.__all__:
        obj = getattr(gc, name)
        target = hook().api_target(name, obj)
        assert f"::: {target}\n" in text, name
        if target == f"gguf_construct.{name}":
            continue  # a plain attribute of the package itself
        module_name, _, attr = target.rpartition(".")
        found = getattr(importlib.import_module(module_name), attr)
        assert found is obj or found is type(obj), name  # the object itself, or a schema's class


def test_an_unknown_marker_fails_the_build():
    with pytest.raises(KeyError):
        hook().expand("<!-- generate: no_such_block -->\n")


def test_every_page_is_in_the_nav_and_every_nav_entry_exists():
    nav = set(re.findall(r":\s*(\S+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(encoding="utf-8"), re.MULTILINE))
    on_disk = {p.relative_to(DOCS).as_posix() for p in pages()}
    assert nav == on_disk


def test_readme_is_a_short_front_page_whose_test_command_is_cis():
    assert len(README.splitlines()) <= 250
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    commands = re.findall(r"```sh\n(pip install [^\n]+)\n```", README)
    assert 'pip install ".[test]" && python -m pytest -q' in commands
    assert '\npip install ".[test]" && python -m pytest -q\n' in ci
    assert any("gguf-construct example" in c for c in commands)


@pytest.mark.parametrize("source", [ROOT / "README.md", ROOT / "CHANGELOG.md", *pages()], ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_point_at_files_that_exist(source: Path):
    for target in LINK.findall(source.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = (source.parent / target.split("#", 1)[0]).resolve()
        assert path.exists(), f"{source.name}: {target}"


def test_every_figure_section_of_the_speed_page_says_how_to_rerun_it():
    text = page("speed.md")
    sections = text.split("\n## ")[1:]
    assert sections
    for section in sections:
        title = section.splitlines()[0]
        if "\n|" in section:
            assert re.search(r"```sh\n[^`]*python benchmarks/\w+\.py", section), title
    for script in set(re.findall(r"benchmarks/(\w+\.py)", "\n".join(p.read_text(encoding="utf-8") for p in pages()))):
        assert (ROOT / "benchmarks" / script).is_file(), script


def test_docs_record_no_development_history():
    for source in [ROOT / "README.md", *pages()]:
        text = source.read_text(encoding="utf-8")
        for pattern in (r"\bissue \d+", r"red.team", r"\.\./shared", r"\bbefore \([0-9a-f]{7}", r"merged tree"):
            assert not re.search(pattern, text, re.IGNORECASE), (source.name, pattern)
