"""The chat template scanner is sound (gguf_construct.security.templates): every way to build an attribute name or a
subscript key is followed, or the template is flagged; renderer work is bounded; real templates pass.

* Bypasses: each template reaches ``__class__``, ``__globals__`` or the ``os`` module when a plain
  ``jinja2.Environment`` renders it (shown here in a child process bounded in CPU and memory; the probes only
  print what they reach), and each is flagged.
* Exhaustion: each template makes a real renderer run out of CPU or memory (shown under a 1 s CPU limit and a
  512 MiB address space), and each is flagged, quickly.
* Coverage: every chat template llama.cpp ships (tests/data/chat_templates/llama.cpp, sources in its
  SOURCES.json) and the other real templates give no finding, and the safe forms they use stay clean.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from jinja_probe import exhausts, render

from gguf_construct.core.tables import template_rules
from gguf_construct.security.chat_templates import scan_template

ROOT = Path(__file__).resolve().parents[2]
LLAMA_CPP = ROOT / "tests" / "data" / "chat_templates" / "llama.cpp"
REAL = sorted((ROOT / "tests" / "data" / "chat_templates").rglob("*.jinja"))
ESCAPE = {
    "template.dunder",
    "template.private",
    "template.dynamic_attribute",
    "template.format",
    "template.introspection",
    "template.global_object",
}


def errors(text: str) -> list[str]:
    return [f.line() for f in scan_template(text) if f.severity == "error"]


# name: (template, render context, what the plain render's output shows it reached)
BYPASSES = {
    "loop-variable": ("{% for k in ['__class__'] %}{{ ''[k] }}{% endfor %}", {}, "<class 'str'>"),
    "loop-tuple-variables": ("{% for a, b in [('__init__', '__globals__')] %}{{ cycler[a][b]['os'] }}{% endfor %}", {}, "<module 'os'"),
    "loop-over-dict-items": ("{% for k, v in {'__class__': 1}.items() %}{{ ''[k] }}{% endfor %}", {}, "<class 'str'>"),
    "recursive-loop-argument": (
        "{% for k in ['x'] recursive %}{% if k == 'x' %}{{ loop(['__class__']) }}{% else %}{{ ''[k] }}{% endif %}{% endfor %}",
        {},
        "<class 'str'>",
    ),
    "loop-cycle": ("{% for x in [1] %}{{ ''[loop.cycle('__class__')] }}{% endfor %}", {}, "<class 'str'>"),
    "macro-argument": ("{% macro f(k) %}{{ ''[k] }}{% endmacro %}{{ f('__class__') }}", {}, "<class 'str'>"),
    "macro-keyword": ("{% macro f(k) %}{{ ''[k] }}{% endmacro %}{{ f(k='__class__') }}", {}, "<class 'str'>"),
    "macro-default": ("{% macro f(k='__class__') %}{{ ''[k] }}{% endmacro %}{{ f() }}", {}, "<class 'str'>"),
    "macro-alias": ("{% macro f(k) %}{{ ''[k] }}{% endmacro %}{% set g = f %}{{ g('__class__') }}", {}, "<class 'str'>"),
    "macro-varargs": ("{% macro f() %}{{ ''[varargs[0]] }}{% endmacro %}{{ f('__class__') }}", {}, "<class 'str'>"),
    "macro-kwargs": ("{% macro f() %}{{ ''[kwargs.k] }}{% endmacro %}{{ f(k='__class__') }}", {}, "<class 'str'>"),
    "macro-output": ("{% macro f() %}__class__{% endmacro %}{{ ''[f()|trim] }}", {}, "<class 'str'>"),
    "caller-argument": (
        "{% macro f() %}{{ caller('__class__') }}{% endmacro %}{% call(k) f() %}{{ ''[k] }}{% endcall %}",
        {},
        "<class 'str'>",
    ),
    "set-block": ("{% set k %}__class__{% endset %}{{ ''[k] }}", {}, "<class 'str'>"),
    "set-block-filtered": ("{% set k | trim %}  __class__  {% endset %}{{ ''[k] }}", {}, "<class 'str'>"),
    "set-chain": ("{% set a = '__class__' %}{% set b = a %}{{ ''[b] }}", {}, "<class 'str'>"),
    "with-block": ("{% with k = '__class__' %}{{ ''[k] }}{% endwith %}", {}, "<class 'str'>"),
    "reversed-literal": ("{{ ''['__ssalc__'|reverse] }}", {}, "<class 'str'>"),
    "reversed-by-slice": ("{{ ''['__ssalc__'[::-1]] }}", {}, "<class 'str'>"),
    "sliced-literal": ("{{ ''['xx__class__'[2:]] }}", {}, "<class 'str'>"),
    "first-of-list": ("{{ ''[['__class__']|first] }}", {}, "<class 'str'>"),
    "last-of-list": ("{{ ''[['x', '__class__']|last] }}", {}, "<class 'str'>"),
    "tuple-item": ("{{ ''[('__class__',)[0]] }}", {}, "<class 'str'>"),
    "default-filter": ("{{ ''[nothing|default('__class__')] }}", {}, "<class 'str'>"),
    "or-expression": ("{{ ''[none or '__class__'] }}", {}, "<class 'str'>"),
    "conditional-expression": ("{{ ''['__class__' if true else 'x'] }}", {}, "<class 'str'>"),
    "dict-keywords": ("{{ ''[dict(__class__=1)|list|first] }}", {}, "<class 'str'>"),
    "dict-literal-item": ("{{ ''[{'a': '__class__'}['a']] }}", {}, "<class 'str'>"),
    "dict-literal-attribute": ("{{ ''[{'a': '__class__'}.a] }}", {}, "<class 'str'>"),
    "dictsort": ("{{ ''[{'__class__': 1}|dictsort|first|first] }}", {}, "<class 'str'>"),
    "tuple-assignment": ("{% set a, b = '__class__', 'x' %}{{ ''[a] }}", {}, "<class 'str'>"),
    "namespace-keyword": ("{% set ns = namespace(k='__class__') %}{{ ''[ns.k] }}", {}, "<class 'str'>"),
    "namespace-field": ("{% set ns = namespace() %}{% set ns.k = '__class__' %}{{ ''[ns.k] }}", {}, "<class 'str'>"),
    "list-pop": ("{% set l = ['__class__'] %}{{ ''[l.pop()] }}", {}, "<class 'str'>"),
    "lower-filter": ("{{ ''['__CLASS__'|lower] }}", {}, "<class 'str'>"),
    "lower-method": ("{{ ''['__CLASS__'.lower()] }}", {}, "<class 'str'>"),
    "concat": ("{{ ''['__cla' ~ 'ss__'] }}", {}, "<class 'str'>"),
    "repeat-and-concat": ("{{ ''['_' * 2 ~ 'class' ~ '_' * 2] }}", {}, "<class 'str'>"),
    "join-filter": ("{{ ''[['__cla', 'ss__']|join] }}", {}, "<class 'str'>"),
    "replace-method": ("{{ ''['_class_'.replace('_', '__')] }}", {}, "<class 'str'>"),
    "printf": ("{{ ''['%c%cclass%c%c' % (95, 95, 95, 95)] }}", {}, "<class 'str'>"),
    "format-filter": ("{{ ''['%sclass%s'|format('__', '__')] }}", {}, "<class 'str'>"),
    "str-format": ("{{ '{0.__class__}'.format('') }}", {}, "<class 'str'>"),
    "str-format-mro": ("{{ '{0.__class__.__mro__}'.format('') }}", {}, "(<class 'str'>, <class 'object'>)"),
    "str-format-map": ("{{ '{x.__class__}'.format_map({'x': ''}) }}", {}, "<class 'str'>"),
    "str-format-by-subscript": ("{{ '{0.__class__}'['format']('') }}", {}, "<class 'str'>"),
    "str-format-by-attr-filter": ("{{ ('{0.__class__}'|attr('format'))('') }}", {}, "<class 'str'>"),
    "map-attr-filter": ("{{ ['']|map('attr', '__class__')|list }}", {}, "[<class 'str'>]"),
    "map-attribute-variable": ("{% set k = '__class__' %}{{ ['']|map(attribute=k)|list }}", {}, "[<class 'str'>]"),
    "data-key-chain": (
        "{{ cycler[messages[0]][messages[1]][messages[2]] }}",
        {"messages": ["__init__", "__globals__", "os"]},
        "<module 'os'",
    ),
    "data-key-call": ("{{ ''[messages[0]](messages[1]) }}", {"messages": ["__getattribute__", "__class__"]}, "<class 'str'>"),
    "data-key-attr-filter": ("{{ ''|attr(messages[0]) }}", {"messages": ["__class__"]}, "<class 'str'>"),
    "split-method": ("{{ ''['x __class__'.split()[1]] }}", {}, "<class 'str'>"),
    "partition-method": ("{{ ''['<__class__'.partition('<')[2]] }}", {}, "<class 'str'>"),
    "removeprefix-method": ("{{ ''['x__class__'.removeprefix('x')] }}", {}, "<class 'str'>"),
    "trim-with-characters": ("{{ ''['<__class__>'|trim('<>')] }}", {}, "<class 'str'>"),
    "striptags": ("{{ ''['<b>__class__</b>'|striptags] }}", {}, "<class 'str'>"),
    "map-filter-by-name": ("{{ ''[[' __class__ ']|map('trim')|first] }}", {}, "<class 'str'>"),
    "method-taken-then-called": ("{% set f = '<__class__>'.strip %}{{ ''[f('<>')] }}", {}, "<class 'str'>"),
    "joiner": ("{% set j = joiner('__class__') %}{{ j() }}{{ ''[j()] }}", {}, "<class 'str'>"),
    "cycler-current": ("{{ ''[cycler('__class__').current] }}", {}, "<class 'str'>"),
    "global-read-in-macro": ("{% set k = '__class__' %}{% macro f() %}{{ ''[k] }}{% endmacro %}{{ f() }}", {}, "<class 'str'>"),
    "loop-nextitem": ("{% for k in ['x', '__class__'] %}{{ ''[loop.nextitem] }}{% endfor %}", {}, "<class 'str'>"),
    "escape-filter": ("{{ ''['__class__'|e] }}", {}, "<class 'str'>"),
    "min-filter": ("{{ ''[('x', '__class__')|min] }}", {}, "<class 'str'>"),
    "batch-filter": ("{{ ''[['__class__']|batch(1)|first|first] }}", {}, "<class 'str'>"),
    "center-filter": ("{{ ''['__class__'|center(9)] }}", {}, "<class 'str'>"),
    "spread-attribute-keyword": ("{{ ['']|map(**{'attribute': '__class__'})|list }}", {}, "[<class 'str'>]"),
    "spread-attr-argument": ("{{ ''|attr(*['__class__']) }}", {}, "<class 'str'>"),
    "caller-kept-in-a-list": (
        "{% macro f() %}{% set c = [caller]|first %}{{ c('__class__') }}{% endmacro %}{% call(k) f() %}{{ ''[k] }}{% endcall %}",
        {},
        "<class 'str'>",
    ),
    "caller-kept-in-a-namespace": (
        "{% macro f() %}{% set ns = namespace(c=caller) %}{{ ns.c('__class__') }}{% endmacro %}{% call(k) f() %}{{ ''[k] }}{% endcall %}",
        {},
        "<class 'str'>",
    ),
    "macro-kept-in-a-namespace": (
        "{% macro g(k) %}{{ ''[k] }}{% endmacro %}{% set ns = namespace(f=g) %}{{ ns.f('__class__') }}",
        {},
        "<class 'str'>",
    ),
    "macro-kept-in-a-sorted-list": ("{% macro g(k) %}{{ ''[k] }}{% endmacro %}{{ ([g]|sort|first)('__class__') }}", {}, "<class 'str'>"),
    "dict-update": ("{% set d = {} %}{% set _ = d.update({'k': '__class__'}) %}{{ ''[d.k] }}", {}, "<class 'str'>"),
    "dict-update-through-an-alias": (
        "{% set d = {} %}{% set e = d %}{% set _ = e.update(k='__class__') %}{{ ''[d.k] }}",
        {},
        "<class 'str'>",
    ),
    "dict-setdefault": ("{% set d = {} %}{% set _ = d.setdefault('k', '__class__') %}{{ ''[d.k] }}", {}, "<class 'str'>"),
    "list-append-through-an-alias": (
        "{% set l = range(3)|list %}{% set m = l %}{% set _ = m.append('__class__') %}{{ ''[l|last] }}",
        {},
        "<class 'str'>",
    ),
    "data-completes-a-name": ("{{ ''['f' ~ messages[0]] }}", {"messages": ["ormat"]}, "<built-in method format of str object"),
    "reversed-suffix": ("{{ ''[(messages[0] ~ 'ssalc__')|reverse] }}", {"messages": ["__"]}, "<class 'str'>"),
    "format-method-alias": ("{% set f = '{0.__class__}'.format %}{{ f('') }}", {}, "<class 'str'>"),
}


@pytest.fixture(scope="module")
def plain_renders():
    names = sorted(BYPASSES)
    results = render([(BYPASSES[n][0], BYPASSES[n][1]) for n in names], kind="plain")
    return dict(zip(names, results, strict=True))


def test_there_are_many_bypass_forms():
    assert len(BYPASSES) >= 40


@pytest.mark.parametrize("name", sorted(BYPASSES))
def test_each_bypass_escapes_a_plain_environment(name, plain_renders):
    """The proof that each form is dangerous: a plain Environment renders it to what it reaches."""
    result = plain_renders[name]
    assert result.status == "ok" and BYPASSES[name][2] in result.output, (name, result)


@pytest.mark.parametrize("name", sorted(BYPASSES))
def test_each_bypass_is_flagged(name):
    findings = scan_template(BYPASSES[name][0])
    assert ESCAPE & {f.rule for f in findings if f.severity == "error"}, (name, [f.line() for f in findings])
    assert all(f.rule in template_rules().rules for f in findings)


# name: (template, the rule, the environment in which it exhausts the renderer)
EXHAUSTION = {
    "nested-range-loops": (
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        "template.loop_bound",
        "sandbox",
    ),
    "computed-loop-bound": (
        "{% set n = 10 ** 6 %}{% for i in range(n) %}{% for j in range(n) %}{% endfor %}{% endfor %}",
        "template.loop_bound",
        "plain",
    ),
    "literal-list-loops": (
        "{% set l = [0] * 1000 %}{% for a in l %}{% for b in l %}{% for c in l %}{% endfor %}{% endfor %}{% endfor %}",
        "template.loop_bound",
        "sandbox",
    ),
    "loops-through-a-macro": (
        "{% macro f() %}{% for i in range(100000) %}{% endfor %}{% endmacro %}{% for i in range(100000) %}{{ f() }}{% endfor %}",
        "template.loop_bound",
        "sandbox",
    ),
    "string-repetition": ("{{ 'x' * 10**10 }}", "template.repetition", "sandbox"),
    "list-repetition": ("{{ ([0] * 10**9)|length }}", "template.repetition", "sandbox"),
    "big-range-join": ("{{ range(10**9)|join }}", "template.loop_bound", "plain"),
    "padding": ("{{ 'x'|center(10**10) }}", "template.repetition", "sandbox"),
    "padding-method": ("{{ 'x'.ljust(10**10) }}", "template.repetition", "sandbox"),
    "printf-width": ("{{ '%01000000000d' % 1 }}", "template.repetition", "sandbox"),
    "power": ("{{ 10 ** (10 ** 10) }}", "template.number", "sandbox"),
    "doubling-string": (
        "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}",
        "template.repetition",
        "sandbox",
    ),
    "squaring-number": (
        "{% set ns = namespace(n=3) %}{% for i in range(64) %}{% set ns.n = ns.n * ns.n %}{% endfor %}{{ ns.n > 0 }}",
        "template.repetition",
        "sandbox",
    ),
    "exponential-macro-recursion": (
        "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(60) }}",
        "template.recursion",
        "sandbox",
    ),
    "caller-recursion": (
        "{% macro g() %}{{ caller() }}{{ caller() }}{% endmacro %}{% macro f(n) %}{% if n %}{% call "
        "g() %}{{ f(n - 1) }}{% endcall %}{% endif %}{% endmacro %}{{ f(60) }}",
        "template.recursion",
        "sandbox",
    ),
    "loop-growing-its-list": ("{% set l = [1] %}{% for x in l %}{% set _ = l.append(x) %}{% endfor %}", "template.loop_growth", "sandbox"),
    "lipsum": ("{{ lipsum(10**7) }}", "template.repetition", "sandbox"),
    "recursion-through-a-namespace": (
        "{% macro f(n) %}{% set ns = namespace(g=f) %}{% if n %}{{ ns.g(n - 1) }}{{ ns.g(n - 1) }}{% endif %}{% endmacro %}{{ f(60) }}",
        "template.recursion",
        "sandbox",
    ),
    "repetition-in-a-macro-in-a-loop": (
        "{% macro f() %}{{ 'x' * 900000 }}{% endmacro %}{% for i in range(1000) %}{{ f() }}{% endfor %}",
        "template.repetition",
        "sandbox",
    ),
}


def test_each_exhaustion_form_exhausts_a_real_renderer():
    names = sorted(EXHAUSTION)
    statuses = exhausts([(EXHAUSTION[n][0], {}, EXHAUSTION[n][2]) for n in names])
    assert dict(zip(names, statuses, strict=True)) == {n: s for n, s in zip(names, statuses, strict=True) if s in ("cpu", "memory")}


@pytest.mark.parametrize("name", sorted(EXHAUSTION))
def test_each_exhaustion_form_is_flagged_quickly(name):
    text, rule, _ = EXHAUSTION[name]
    start = time.process_time()
    findings = scan_template(text)
    assert time.process_time() - start < 1.0
    assert rule in {f.rule for f in findings}, (name, [f.line() for f in findings])


def test_limits_are_named_in_the_table():
    limits = template_rules().limits
    assert {"max_loop_iterations", "max_repeat_chars", "max_number_bits", "max_flow_rounds"} <= set(limits)
    bound = limits["max_loop_iterations"]
    assert scan_template(f"{{% for i in range({bound}) %}}{{% endfor %}}") == []
    assert "template.loop_bound" in {f.rule for f in scan_template(f"{{% for i in range({bound + 1}) %}}{{% endfor %}}")}
    assert scan_template(f"{{{{ 'x' * {limits['max_repeat_chars']} }}}}") == []
    assert "template.repetition" in {f.rule for f in scan_template(f"{{{{ 'x' * {limits['max_repeat_chars'] + 1} }}}}")}


def test_work_adds_up_over_calls_and_repetitions():
    """Each loop or repetition under the limit, the whole template over it: the totals go through the call
    graph (a macro's loops times the loops around each call, summed over calls)."""
    loop = "{% macro f() %}{% for i in range(90000) %}{% endfor %}{% endmacro %}"
    assert scan_template(loop + "{{ f() }}") == []
    assert "template.loop_bound" in {f.rule for f in scan_template(loop + "{{ f() }}" * 50)}
    assert scan_template("{{ 'x' * 900000 }}") == []
    assert "template.repetition" in {f.rule for f in scan_template("{{ 'x' * 900000 }}" * 5)}


@pytest.mark.parametrize(
    "text",
    [
        "{{ [1]|tojson(indent=10**9) }}",
        "{{ [1]|batch(10**9, 0)|list }}",
        "{{ '%*d' % (10**9, 1) }}",
        "{{ 'x'|indent(width=10**9, first=true) }}",
        "{% filter indent(10**9) %}x{% endfilter %}",
        "{{ 'x'.zfill(10**9) }}",
        "{{ lipsum(n=10**9) }}",
        "{{ range(messages|length * 1000000)|list }}",
    ],
)
def test_sizes_given_as_arguments_are_bounded(text):
    assert {"template.repetition", "template.loop_bound"} & {f.rule for f in scan_template(text)}, text


def test_a_power_of_a_huge_number_is_flagged():
    assert "template.number" in {f.rule for f in scan_template("{{ (10 ** 1000) ** 1000 }}")}
    assert scan_template("{{ 2 ** 10 }}{{ x ** 2 }}") == []


def test_deep_call_chains_are_analysed_in_linear_time():
    chain = "".join(f"{{% macro f{i}() %}}{{{{ f{i + 1}() }}}}{{% endmacro %}}" for i in range(2000)) + "{{ f0() }}"
    start = time.process_time()
    assert errors(chain) == []
    assert time.process_time() - start < 20
    cycle = chain.replace("{{ f2000() }}", "{{ f0() }}{{ f0() }}")
    assert "template.recursion" in {f.rule for f in scan_template(cycle)}


def test_a_reached_value_is_never_a_key_or_called():
    for text in ("{{ x[d[m.a]] }}", "{{ d[m.a]() }}", "{{ d[m.a][m.b] }}", "{{ d[m.a]|attr(m.b) }}"):
        assert "template.dynamic_attribute" in {f.rule for f in scan_template(text)}, text
    assert errors("{{ d[m.a].b }}{{ d[m.a]['b'] }}{{ d[m.a]|trim }}{{ d[m.a] ~ '' }}") == []


def test_an_analysis_that_does_not_settle_is_a_finding():
    """A chain of assignments written backwards takes one round per link; past the limit nothing is proven."""
    rounds = template_rules().limits["max_flow_rounds"]
    chain = "".join(f"{{% set a{i} = a{i + 1} %}}" for i in range(rounds + 5)) + f"{{% set a{rounds + 5} = 'x' %}}"
    assert [f.rule for f in scan_template(chain + "{{ ''[a0] }}")] == ["template.flow_limit"]
    short = "".join(f"{{% set a{i} = a{i + 1} %}}" for i in range(rounds // 2)) + f"{{% set a{rounds // 2} = 'x' %}}"
    assert scan_template(short + "{{ a0 }}") == []


def test_llama_cpp_templates_are_all_here():
    sources = json.loads((LLAMA_CPP / "SOURCES.json").read_text())
    assert sources["repository"] == "https://github.com/ggml-org/llama.cpp" and len(sources["commit"]) == 40
    assert sorted(sources["files"]) == sorted(p.name for p in LLAMA_CPP.glob("*.jinja"))
    assert len(sources["files"]) > 50


@pytest.mark.parametrize("path", REAL, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_real_templates_give_no_finding(path):
    findings = scan_template(path.read_text(encoding="utf-8"))
    assert findings == [], [f.line() for f in findings]


SAFE = [
    "{% set d = {'user': '<u>', 'assistant': '<a>'} %}{% for m in messages %}{{ d[m['role']|lower] }}{% endfor %}",
    "{% set d = {'<|user|>': 1} %}{% for m in messages %}{{ d['<|' ~ m.role ~ '|>'] }}{% endfor %}",
    "{% for m in messages %}{% set r = m.role|trim %}{{ {'user': 'U'}[r] }}{% endfor %}",
    "{{ messages[0].system }}{% if system %}{{ system }}{% endif %}{{ messages[0].system|default('') }}",
    "{% for k in tool.parameters %}{{ tool.parameters[k].description }}{% endfor %}",
    "{% for i in range(messages|length - 1, -1, -1) %}{{ messages[i].get('content') }}{% endfor %}",
    "{% set ns = namespace(i=0) %}{% for m in messages %}{% set ns.i = ns.i + 1 %}{% endfor %}{{ messages[ns.i - 1]['role'] }}",
    "{% macro walk(v, depth) %}{% if v is mapping %}{% for k, x in v|dictsort %}{{ '  ' * depth }}{{ k }}{{ "
    "walk(x, depth + 1) }}{% endfor %}{% endif %}{% endmacro %}{{ walk(tools, 0) }}",
    "{% for item in tree recursive %}{{ item.name }}{{ loop(item.children) }}{% endfor %}",
    "{{ param['format'] }}{{ item.get('_private_key') }}{{ m.content.split('</think>')[-1].strip() }}",
    "{% for i in range(1000) %}{{ i }}{% endfor %}{{ '=' * 80 }}{{ '<image>' * num_img_tokens }}",
    "{% set d = {'user_token': 'U'} %}{% for m in messages %}{{ d[m.role ~ '_token'] }}{{ d['tok_' ~ m.role] }}{% endfor %}",
]


@pytest.mark.parametrize("text", SAFE)
def test_safe_forms_are_not_flagged(text):
    assert scan_template(text) == [], [f.line() for f in scan_template(text)]


def test_safe_forms_render():
    """The safe forms are real Jinja2 (they render in the sandbox with a conversation)."""
    context = {
        "messages": [{"role": "user", "content": "hi", "system": "s"}],
        "tool": {"parameters": {"a": {"description": "d"}}},
        "tools": {"t": {"x": 1}},
        "tree": [{"name": "n", "children": []}],
        "param": {"format": "f"},
        "item": {"_private_key": 1},
        "m": {"content": "a</think>b"},
        "num_img_tokens": 2,
    }
    results = render([(t, context) for t in SAFE], kind="sandbox")
    assert all(r.status == "ok" for r in results), results
