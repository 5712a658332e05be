"""Chat template scanning (gguf_construct.security.chat_templates, ``validate --security``).

Benign: the real chat templates of popular models in tests/data/chat_templates (sources in SOURCES.json),
none may be flagged. Hostile: the CVE-2024-34359 proof of concept and the payload families of public SSTI
lists (sandbox escapes through dunder chains, Jinja2's globals, ``self``, string-built attribute names), every
one flagged with its rule.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import corpus_file

import gguf_construct as gc
from gguf_construct.core.tables import template_rules
from gguf_construct.security.chat_templates import scan_template, scan_templates, template_keys

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = sorted((ROOT / "tests" / "data" / "chat_templates").glob("*.jinja"))


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "gguf_construct.cli.main", *map(str, args)], capture_output=True, text=True, timeout=120, cwd=ROOT
    )


def test_the_benign_set_covers_the_popular_families():
    names = " ".join(p.name.lower() for p in TEMPLATES)
    for family in (
        "llama-3.1",
        "llama-3-8b",
        "mistral-7b",
        "mistral-nemo",
        "qwen2.5",
        "gemma-2",
        "phi-3",
        "chatml",
        "deepseek",
        "command-r",
        "zephyr",
        "vicuna",
    ):
        assert family in names, family
    sources = json.loads((ROOT / "tests" / "data" / "chat_templates" / "SOURCES.json").read_text())
    assert sorted(sources) == [p.name for p in TEMPLATES]
    assert len(TEMPLATES) >= 12


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.stem)
def test_real_templates_are_not_flagged(path):
    assert scan_template(path.read_text(encoding="utf-8")) == []


# (payload, rules that must all be among the findings)
HOSTILE = {
    # CVE-2024-34359, the proof of concept published with the advisory (retr0reg / Checkmarx)
    "cve-2024-34359": (
        '{% for x in ().__class__.__base__.__subclasses__() %}{% if "warning" in x.__name__ '
        "%}{{x()._module.__builtins__['__import__']('os').popen(\"touch /tmp/retr0reg\")}}{%endif%}{% endfor %}",
        {"template.dunder", "template.private", "template.introspection"},
    ),
    "mro-subclasses": ("{{ ''.__class__.__mro__[1].__subclasses__() }}", {"template.dunder"}),
    "mro-method": ("{{ ''.__class__.mro()[1].__subclasses__()[40]('/etc/passwd').read() }}", {"template.dunder", "template.introspection"}),
    "cycler": (
        "{{ cycler.__init__.__globals__.os.popen('id').read() }}",
        {"template.global_object", "template.dunder", "template.introspection"},
    ),
    "joiner": ("{{ joiner.__init__.__globals__.os.popen('id').read() }}", {"template.global_object", "template.dunder"}),
    "namespace": ("{{ namespace.__init__.__globals__.os.popen('id').read() }}", {"template.global_object", "template.dunder"}),
    "lipsum": ("{{ lipsum.__globals__['os'].popen('id').read() }}", {"template.global_object", "template.dunder"}),
    "lipsum-item": ("{{ lipsum['__globals__'] }}", {"template.global_object", "template.dunder"}),
    "range": ("{{ range.__init__.__globals__ }}", {"template.global_object", "template.dunder"}),
    "dict-mro": ("{{ dict.mro()[-1].__subclasses__() }}", {"template.global_object", "template.introspection"}),
    "self-context": (
        "{{ self._TemplateReference__context.cycler.__init__.__globals__.os.popen('id').read() }}",
        {"template.self", "template.private"},
    ),
    "self-init": ("{{ self.__init__.__globals__.__builtins__.__import__('os').popen('id').read() }}", {"template.self", "template.dunder"}),
    "self-dict": ("{{ self.__dict__ }}", {"template.self", "template.dunder"}),
    "attr-hex-escapes": (
        "{{ request|attr('application')|attr('\\x5f\\x5fglobals\\x5f\\x5f')"
        "|attr('\\x5f\\x5fgetitem\\x5f\\x5f')('\\x5f\\x5fbuiltins\\x5f\\x5f') }}",
        {"template.dunder"},
    ),
    "attr-join": ("{{ ()|attr(['_'*2,'class','_'*2]|join) }}", {"template.dynamic_attribute"}),
    "attr-variable": ("{% set n = request.args.n %}{{ ()|attr(n) }}", {"template.dynamic_attribute"}),
    "item-concat": ("{{ ''['__cla' ~ 'ss__'] }}", {"template.dunder"}),
    "item-plus": ("{{ ''['_' * 2 + 'class' + '_' * 2] }}", {"template.dunder"}),
    "item-printf": ("{{ ''['%c%c%s%c%c' % (95, 95, 'class', 95, 95)] }}", {"template.dynamic_attribute"}),
    "item-format": ("{{ ''['{0}{0}class{0}{0}'.format('_')] }}", {"template.dynamic_attribute"}),
    "item-via-set": ("{% set a = '__cla' %}{% set b = a ~ 'ss__' %}{{ ''[b] }}", {"template.dunder"}),
    "item-join-filter": ("{{ ''[('_','_','class','_','_')|join] }}", {"template.dynamic_attribute"}),
    "map-attribute": ("{{ ()|map(attribute='__class__')|list }}", {"template.dunder"}),
    "selectattr-dotted": ("{{ messages|selectattr('0.__class__.__mro__') }}", {"template.dunder"}),
    "sort-attribute-variable": ("{% set k = '__cla' ~ 'ss__' %}{{ messages|sort(attribute=k) }}", {"template.dunder"}),
    "getattr-call": ("{{ getattr(messages, '__class__') }}", {"template.dynamic_attribute"}),
    "func-globals": ("{{ x.func_globals }}", {"template.introspection"}),
    "frame-walk": ("{{ g.gi_frame.f_back.f_globals }}", {"template.introspection"}),
    "unparseable": ("{% for m in messages %}{{ m.__class__ ", {"template.syntax"}),
    "deep-nesting": ("{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}", {"template.syntax"}),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_templates_are_flagged(name):
    payload, rules = HOSTILE[name]
    findings = scan_template(payload)
    assert rules <= {f.rule for f in findings}, (name, [f.line() for f in findings])
    assert all(f.rule in template_rules().rules for f in findings)
    assert all(f.path.startswith("tokenizer.chat_template:") for f in findings)
    assert all(f.severity == "error" for f in findings if f.rule in rules)


def test_findings_name_the_line_and_quote_it():
    text = "{% for m in messages %}\n{{ m['content'] }}\n  {{ cycler.__init__.__globals__ }}\n{% endfor %}"
    findings = scan_template(text, "tokenizer.chat_template.tool_use", offset=1234)
    assert findings and {f.path for f in findings} == {"tokenizer.chat_template.tool_use:3"}
    assert all(f.offset == 1234 and "line 3" in f.message and "{{ cycler.__init__.__globals__ }}" in f.message for f in findings)
    syntax = scan_template("a\nb\n{{ x.y ")
    assert [f.rule for f in syntax] == ["template.syntax"] and "line 3" in syntax[0].message


def test_near_misses_are_not_flagged():
    """Underscores inside names, macros named with underscores, subscripts by variables, namespace() calls,
    string concatenation outside subscripts, self.block() for a defined block."""
    for text in (
        "{% macro __render(m) %}{{ m.content }}{% endmacro %}{{ __render(messages[0]) }}",
        "{% set ns = namespace(found=false) %}{% for m in messages %}{% set ns.found = true %}{% endfor %}{{ ns.found }}",
        "{{ messages[idx]['role'] + '\\n' + message.tool_calls[0].function.arguments|tojson }}",
        "{% for k in tool.parameters %}{{ tool.parameters[k] }}{% endfor %}",
        "{{ message.content.split('</think>')[-1].lstrip('\\n') }}",
        "{% block body %}x{% endblock %}{{ self.body() }}",
        "{{ m|attr('content') }}",
    ):
        assert scan_template(text) == [], text


def test_oversized_templates_are_not_parsed():
    limit = template_rules().max_template_bytes
    assert [f.rule for f in scan_template("x" * (limit + 1))] == ["template.size"]


def hostile_file(path, template):
    f = gc.new()
    f.metadata["general.architecture"] = "llama"
    f.metadata["tokenizer.chat_template"] = "{{ messages[0]['content'] }}"
    f.metadata["tokenizer.chat_template.rag"] = template
    f.tensors.add("w", np.zeros(32, np.float32))
    f.save(path)
    return path


def test_scan_templates_reads_every_template_key(tmp_path):
    path = hostile_file(tmp_path / "hostile.gguf", HOSTILE["cycler"][0])
    f = gc.load(path)
    assert template_keys(f.metadata) == ["tokenizer.chat_template", "tokenizer.chat_template.rag"]
    findings = scan_templates(path)
    assert findings and {f.path for f in findings} == {"tokenizer.chat_template.rag:1"}
    assert all(i.offset == f.metadata.offset_of("tokenizer.chat_template.rag") for i in findings)


def test_validate_security_exits_1_on_a_hostile_template_and_0_on_a_real_one(tmp_path):
    hostile = hostile_file(tmp_path / "hostile.gguf", HOSTILE["cve-2024-34359"][0])
    r = cli("validate", "--security", hostile)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "[template.dunder] tokenizer.chat_template.rag:1" in r.stdout
    assert cli("validate", hostile).returncode == 0  # the structure is fine: only --security looks at templates
    benign = hostile_file(tmp_path / "benign.gguf", (ROOT / "tests/data/chat_templates/meta-llama-Llama-3.1-8B-Instruct.jinja").read_text())
    ok = cli("validate", "--security", benign)
    assert ok.returncode == 0 and "chat templates" in ok.stdout, ok.stdout + ok.stderr
    j = cli("validate", "--security", "--json", hostile)
    rules = {i["rule"] for i in json.loads(j.stdout)[0]["issues"]}
    assert {"template.dunder", "template.private", "template.introspection"} <= rules


def test_the_corpus_chat_template_is_not_flagged():
    """The one corpus file with a chat template (Phi-3's, committed to llama.cpp): clean, through the CLI too."""
    path = corpus_file("gguf/v3-phi-3-vocab-old.gguf")
    assert template_keys(gc.load(path, strict=False).metadata) == ["tokenizer.chat_template"]
    assert scan_templates(path) == []
    r = cli("validate", "--security", path)
    assert r.returncode == 0 and "chat templates" in r.stdout, r.stdout + r.stderr


def test_parser_failures_are_findings_not_exceptions():
    """Jinja2's lexer lets Python's own errors out (int() of 5000 digits raises ValueError); a scanner of
    hostile input must turn every failure into a finding. Plus 300 seeded mutations of the real templates."""
    import random

    for text in ("{{ 1" + "0" * 5000 + " }}", "{{ '\\N{no such name}' }}", "{{ '\\x' }}", "{% if a %}" * 3000, "\ud800{{ x }}"):
        findings = scan_template(text)
        assert all(f.rule == "template.syntax" for f in findings), findings
    rnd = random.Random(12)
    texts = [p.read_text(encoding="utf-8") for p in TEMPLATES]
    pieces = [*"{}%#()[]'\"._~|+-*/\\ \nabc0_", "{{", "}}", "{%", "%}", "__", "set ", "endfor", "\\x5f", "\\N{"]
    for _ in range(300):
        t = rnd.choice(texts)
        for _ in range(rnd.randint(1, 6)):
            i = rnd.randrange(len(t) + 1)
            t = t[:i] + "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 5))) + t[i + rnd.randint(0, 20) :]
        assert all(f.rule in template_rules().rules for f in scan_template(t))


def sandbox():
    """Jinja2's ImmutableSandboxedEnvironment set up as transformers' apply_chat_template sets it up."""
    import datetime

    from jinja2.exceptions import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = lambda x, indent=None, separators=None, sort_keys=False, ensure_ascii=False: json.dumps(
        x, indent=indent, separators=separators, sort_keys=sort_keys, ensure_ascii=ensure_ascii
    )
    env.globals.update(raise_exception=raise_exception, strftime_now=lambda fmt: datetime.datetime(2026, 1, 1).strftime(fmt))
    return env


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.stem)
def test_the_benign_templates_really_render(path):
    """The benign set is real: each template renders a conversation in the sandbox, as transformers does."""
    messages = [
        {"role": "user", "content": "Hello there"},
        {"role": "assistant", "content": "Hi! How can I help?"},
        {"role": "user", "content": "Tell me a joke"},
    ]
    out = (
        sandbox()
        .from_string(path.read_text(encoding="utf-8"))
        .render(messages=messages, bos_token="<s>", eos_token="</s>", add_generation_prompt=True)
    )
    assert "Hello there" in out and "Tell me a joke" in out


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.stem)
def test_llama_cpp_python_renders_the_benign_templates(path):
    """The consumer CVE-2024-34359 was found in: llama-cpp-python's Jinja2ChatFormatter (sandboxed since the
    fix) renders every benign template into a prompt holding the conversation."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    formatter = Jinja2ChatFormatter(path.read_text(encoding="utf-8"), eos_token="</s>", bos_token="<s>")
    tool = {
        "type": "function",
        "function": {
            "name": "joke",
            "description": "Tell a joke",
            "parameters": {"type": "object", "properties": {"topic": {"type": "string", "description": "what about"}}, "required": []},
        },
    }
    messages = [
        {"role": "user", "content": "Hello there"},
        {"role": "assistant", "content": "Hi!"},
        {"role": "user", "content": "Tell me a joke"},
    ]
    prompt = formatter(messages=messages, tools=[tool]).prompt  # the *-tool_use templates iterate over tools
    assert "Hello there" in prompt and "Tell me a joke" in prompt


@pytest.mark.parametrize(
    "payload",
    [
        "{{ ''.__class__.__name__ }}",
        "{{ self._TemplateReference__context.keys }}",
        "{{ cycler.__init__.__globals__ }}",
        "{{ (()|attr('__class__')).__name__ }}",
        "{{ lipsum['__globals__'].os }}",
        "{{ ((1,)|map(attribute='__class__')|first).__name__ }}",
    ],
)
def test_what_the_sandbox_refuses_is_flagged(payload):
    """The oracle for the underscore rules: Jinja2's sandbox refuses these when rendering (it hands back an
    undefined for the unsafe attribute, which raises SecurityError once used; harmless ends only: nothing here
    calls anything even outside a sandbox), and the scanner flags each one without rendering."""
    from jinja_probe import render  # hostile input: rendered in a child bounded in CPU time and memory

    [result] = render([(payload, {})], kind="sandbox")
    assert result.status == "error" and result.output.startswith("SecurityError"), result
    assert {"template.dunder", "template.private"} & {f.rule for f in scan_template(payload)}


def test_validate_security_renders_what_the_static_checks_cannot_bound(tmp_path):
    """A cost that depends on the conversation passes the static checks and is caught by the sandboxed render
    that ``validate --security`` runs: exit 1, a template.render finding."""
    cubed = "{% for a in messages %}{% for b in messages %}{% for c in messages %}{{ a.role }}{% endfor %}{% endfor %}{% endfor %}"
    assert [f for f in scan_template(cubed) if f.severity == "error"] == []
    r = cli("validate", "--security", hostile_file(tmp_path / "cubed.gguf", cubed))
    assert r.returncode == 1 and "[template.render] tokenizer.chat_template.rag:1" in r.stdout, r.stdout + r.stderr
