"""The allowlist check (gguf_construct.security.templates.allowlist): every operation of a template is in the
known-safe subset of schema/template_rules.json, or it is a finding.

* Routes (also the values a filter takes from its arguments: batch's fill, groupby's default, sum's start): each
  template reaches ``os``, ``os.environ``, an object's ``__mro__``, a function's ``__globals__`` or a
  file when a plain ``jinja2.Environment`` renders it (shown in a bounded child process), and each is an error.
  Attribute arguments given by position, string formatting into attribute names, names in variables, ``map``
  applying an attribute-taking filter, unicode escapes, the loader statements.
* Unknown operations are warnings, members of Python objects errors, and real templates give no finding
  (tests/security/test_template_flow.py) while using only what the table lists.
"""

from __future__ import annotations

import jinja2
import pytest
from jinja_probe import render

from gguf_construct.core.tables import template_rules
from gguf_construct.security.chat_templates import scan_template
from gguf_construct.security.templates.table import allowlist

# name: (template, what the plain render's output shows it reached)
ROUTES = {
    "join-positional-attribute": ("{{ [cycler]|join('', '__init__.__globals__.os') }}", "<module 'os'"),
    "join-positional-environment": ("{{ [cycler]|join('', '__init__.__globals__.os.environ') }}", "environ({"),
    "sum-positional-attribute": ("{{ ['x']|sum('__class__.__mro__', ()) }}", "(<class 'str'>, <class 'object'>)"),
    "map-join-positional": ("{{ [[cycler]]|map('join', '', '__init__.__globals__.os')|first }}", "<module 'os'"),
    "map-sum-positional": ("{{ [['x']]|map('sum', '__class__.__mro__', ())|first }}", "<class 'object'>"),
    "groupby-popen": ("{{ [cycler]|groupby('__init__.__globals__.os.popen')|first|first }}", "<function popen"),
    "formatted-attribute-name": ("{{ [cycler]|join('', '%sinit%s.%sglobals%s.os'|format('__', '__', '__', '__')) }}", "<module 'os'"),
    "attribute-name-in-a-variable": ("{% set k = '__init__.__globals__.os' %}{{ [cycler]|join('', k) }}", "<module 'os'"),
    "attr-filter-name-in-a-variable": ("{% set k = '__class__' %}{{ ''|attr(k) }}", "<class 'str'>"),
    "map-filter-name-in-a-variable": ("{% set f = 'join' %}{{ [[cycler]]|map(f, '', '__init__.__globals__.os')|first }}", "<module 'os'"),
    "spread-positional-attribute": ("{{ [cycler]|join(*['', '__init__.__globals__.os']) }}", "<module 'os'"),
    "unicode-escaped-name": ("{{ ''['\\u005f\\u005fclass\\u005f\\u005f'] }}", "<class 'str'>"),
    "hex-escaped-attribute-argument": ("{{ ['x']|sum('\\x5f\\x5fclass\\x5f\\x5f.\\x5f\\x5fmro\\x5f\\x5f', ()) }}", "<class 'object'>"),
    "batch-fill-value": ("{{ ''[([1]|batch(2, '__class__')|first)[1]] }}", "<class 'str'>"),
    "groupby-default": ("{{ ''[([{}]|groupby('a', '__class__')|first).grouper] }}", "<class 'str'>"),
    "sum-start": ("{{ ''[([['x']]|sum(start=['__class__']))[0]] }}", "<class 'str'>"),
    "joiner-globals": ("{{ joiner().__init__.__globals__.os }}", "<module 'os'"),
    "macro-globals-through-caller": (
        "{% macro f() %}{{ caller.__init__.__globals__ }}{% endmacro %}{% call f() %}x{% endcall %}",
        "'__name__': 'jinja2.runtime'",
    ),
}
ERRORS = {f"template.{r}" for r in ("dunder", "private", "introspection", "member", "literal_attribute", "global_object", "loader", "self")}


@pytest.fixture(scope="module")
def plain_renders():
    names = sorted(ROUTES)
    return dict(zip(names, render([(ROUTES[n][0], {}) for n in names], kind="plain"), strict=True))


@pytest.mark.parametrize("name", sorted(ROUTES))
def test_each_route_reaches_internals_in_a_plain_environment(name, plain_renders):
    result = plain_renders[name]
    assert result.status == "ok" and ROUTES[name][1] in result.output, (name, result)


@pytest.mark.parametrize("name", sorted(ROUTES))
def test_each_route_is_an_error(name):
    findings = scan_template(ROUTES[name][0])
    assert ERRORS & {f.rule for f in findings if f.severity == "error"}, (name, [f.line() for f in findings])


@pytest.mark.parametrize(
    "text",
    [
        "{{ [x]|join('', '__init__') }}",
        "{{ [x]|sum('__class__') }}",
        "{{ [x]|unique(false, '__class__') }}",
        "{{ [x]|min(false, '__class__') }}",
        "{{ [x]|max(false, '__class__') }}",
        "{{ [x]|sort(false, false, '__class__') }}",
        "{{ [x]|sort(attribute='role,__class__') }}",
        "{{ [x]|sort(false, false, 'role,0.__class__') }}",
        "{{ [x]|groupby('__class__') }}",
        "{{ [x]|selectattr('__class__') }}",
        "{{ [x]|rejectattr('__class__') }}",
        "{{ [x]|map('attr', '__class__') }}",
        "{{ [x]|map('sum', '__class__') }}",
        "{{ [x]|map('join', '', '__class__') }}",
        "{{ [x]|map('unique', false, '__class__') }}",
    ],
)
def test_every_attribute_slot_is_checked_by_position(text):
    assert "template.dunder" in {f.rule for f in scan_template(text) if f.severity == "error"}, text


def test_the_loader_statements_are_errors_and_read_files_in_a_plain_environment(tmp_path):
    (tmp_path / "secret.txt").write_text("the secret")
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(tmp_path)))
    for text in (
        "{% include 'secret.txt' %}",
        "{% extends 'secret.txt' %}",
        "{% import 'secret.txt' as s %}{{ s }}",
        "{% from 'secret.txt' import x %}",
    ):
        if "include" in text or "extends" in text:
            assert "the secret" in env.from_string(text).render()
        assert "template.loader" in {f.rule for f in scan_template(text) if f.severity == "error"}, text


@pytest.mark.parametrize(
    ("text", "rule", "severity"),
    [
        ("{{ messages|mro }}", "template.unknown", "warning"),
        ("{{ message.some_new_key }}", "template.unknown", "warning"),
        ("{{ x is callable }}", "template.unknown", "warning"),
        ("{{ tools_helper() }}", "template.unknown", "warning"),
        ("{{ x|xmlattr }}", "template.unknown", "warning"),
        ("{{ x.fromkeys }}", "template.member", "error"),
        ("{{ x.maketrans }}", "template.member", "error"),
        ("{{ x|selectattr(k) }}", "template.literal_attribute", "error"),
        ("{{ x|map(attribute=k) }}", "template.literal_attribute", "error"),
        ("{{ x|map(f) }}", "template.literal_attribute", "error"),
        ("{{ x|sort(**opts) }}", "template.literal_attribute", "error"),
    ],
)
def test_outside_the_subset(text, rule, severity):
    assert (rule, severity) in {(f.rule, f.severity) for f in scan_template(text)}, [f.line() for f in scan_template(text)]


def test_names_a_template_defines_are_known():
    text = (
        "{% set ns = namespace(my_flag=false) %}{% set ns.other = 1 %}{% set d = {'mine': 1} %}"
        "{{ ns.my_flag }}{{ ns.other }}{{ d.mine }}{{ [d]|map(attribute='mine')|list }}"
    )
    assert scan_template(text) == [], [f.line() for f in scan_template(text)]


def test_the_table_is_one_source():
    """Every filter the flow analysis models is in the allowlist table, and the slot positions are Jinja2's own."""
    import inspect

    import jinja2.filters

    safe = allowlist()
    assert set(safe.filters) >= {"join", "sum", "map", "selectattr", "groupby", "sort", "unique", "min", "max", "attr"}
    for name, spec in safe.filters.items():
        if spec.attribute is None or spec.attribute[0] is None or name not in jinja2.filters.FILTERS:
            continue
        params = [p for p in inspect.signature(jinja2.filters.FILTERS[name]).parameters if p not in ("environment", "context", "eval_ctx")]
        if "args" in params:  # selectattr/rejectattr: (value, *args): the first argument is the attribute
            continue
        assert params[1 + spec.attribute[0]] == spec.attribute[1], (name, params)
    assert set(template_rules().rules) >= {"template.unknown", "template.member", "template.loader", "template.literal_attribute"}
