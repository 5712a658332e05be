"""What a template can make a renderer do, bounded statically and measured dynamically, and what the scanner
itself costs (gguf_construct.security.templates: flow, render; gguf_construct.security.chat_templates).

* String growth: each form makes a real renderer (Jinja2's sandbox, 1 s of CPU, 512 MiB) run out of CPU or
  memory, and each is flagged statically, quickly.
* The dynamic check renders in a bounded child process: what the static model leaves to the data is caught by
  measurement; the sandbox's refusals are findings; real templates render clean; the file's total is bounded.
* The scanner is linear: 8,000 chained ``set`` (182 KB) under a 1 GiB address space, templates past the node
  limit and the step budget refused cleanly.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from jinja_probe import exhausts

from gguf_construct.core.tables import template_rules
from gguf_construct.security.chat_templates import scan_template, scan_templates
from gguf_construct.security.templates.render import render_check

ROOT = Path(__file__).resolve().parents[2]
REAL = sorted((ROOT / "tests" / "data" / "chat_templates").rglob("*.jinja"))
LIMITS = template_rules().limits


def _doublings(n: int) -> str:
    names = [f"s{i}" for i in range(n + 1)]
    return "{% set s0 = 'x' * 1000 %}" + "".join(f"{{% set {b} = {a} ~ {a} %}}" for a, b in zip(names, names[1:], strict=False))


def _fibonacci(n: int) -> str:
    text = "{% set f0 = 'xxxxxxxxxx' %}{% set f1 = 'xxxxxxxxxx' %}"
    return text + "".join(f"{{% set f{i} = f{i - 1} ~ f{i - 2} %}}" for i in range(2, n))


# name: the template; each makes a bounded sandboxed renderer run out of CPU or memory
STRING_GROWTH = {
    "doublings-without-a-loop": _doublings(22) + "{{ s22|length }}",
    "fibonacci-set-chain": _fibonacci(45) + "{{ f44|length }}",
    "replace-empty-method": "{% set s = 'x' * 30000 %}{{ s.replace('', s)|length }}",
    "replace-empty-filter": "{% set s = 'x' * 30000 %}{{ s|replace('', s)|length }}",
    "join-doubling-loop": (
        "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = [ns.s, ns.s]|join %}{% endfor %}{{ ns.s|length }}"
    ),
    "format-doubling-loop": (
        "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = '%s%s'|format(ns.s, ns.s) %}{% endfor %}{{ ns.s|length }}"
    ),
    "printf-doubling-loop": (
        "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = '%s%s' % (ns.s, ns.s) %}{% endfor %}{{ ns.s|length }}"
    ),
    "tojson-indent": "{{ range(100000)|list|tojson(indent=100000)|length }}",
    "indent-string-width": "{{ (range(100000)|join('\\n'))|indent('x' * 100000)|length }}",
    "wordwrap-wrapstring": "{{ ('x ' * 200000)|wordwrap(1, true, 'y' * 100000)|length }}",
    "nested-range-join": "{{ (range(100000)|join(range(100000)|join))|length }}",
}


def _chain(step: str, n: int = 12) -> str:
    """``a`` of 1,000 characters, then ``n`` assignments each built by ``step`` from the one before (``{prev}``)."""
    names = "abcdefghijklmnopqrstuvwxyz"
    return "{% set a = 'x' * 1000 %}" + "".join(f"{{% set {names[i + 1]} = {step.format(prev=names[i])} %}}" for i in range(n))


STRING_GROWTH.update(
    {
        "doubling-through-a-case-filter": _chain("({prev} ~ {prev})|upper", 20) + "{{ u|length }}",
        "doubling-in-set-blocks": "{% set a = 'x' * 1000 %}"
        + "".join(
            f"{{% set {c} %}}{{{{ {p} }}}}{{{{ {p} }}}}{{% endset %}}"
            for p, c in zip("abcdefghijklmnopqrstuv", "bcdefghijklmnopqrstuvw", strict=True)
        )
        + "{{ w|length }}",
        "tojson-doubling-loop": (
            "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = [ns.s, ns.s]|tojson %}{% endfor %}{{ ns.s|length }}"
        ),
    }
)


def test_each_string_growth_form_exhausts_a_real_renderer():
    names = sorted(STRING_GROWTH)
    statuses = dict(zip(names, exhausts([(STRING_GROWTH[n], {}, "sandbox") for n in names]), strict=True))
    assert {n: s for n, s in statuses.items() if s not in ("cpu", "memory")} == {}


@pytest.mark.parametrize("name", sorted(STRING_GROWTH))
def test_each_string_growth_form_is_flagged_statically(name):
    start = time.process_time()
    findings = scan_template(STRING_GROWTH[name])
    assert time.process_time() - start < 2.0
    assert "template.repetition" in {f.rule for f in findings if f.severity == "error"}, (name, [f.line() for f in findings])


def test_string_limits_are_boundaries():
    limit, inserted = LIMITS["max_repeat_chars"], LIMITS["max_inserted_chars"]
    half = limit // 2
    assert scan_template(f"{{% set a = 'x' * {half} %}}{{{{ a ~ a }}}}") == []
    assert "template.repetition" in {f.rule for f in scan_template(f"{{% set a = 'x' * {half + 1} %}}{{{{ a ~ a }}}}")}
    assert scan_template(f"{{{{ messages|join('x' * {inserted}) }}}}") == []
    assert "template.repetition" in {f.rule for f in scan_template(f"{{{{ messages|join('x' * {inserted + 1}) }}}}")}
    assert scan_template(f"{{{{ tools|tojson(indent={inserted}) }}}}") == []
    assert "template.repetition" in {f.rule for f in scan_template(f"{{{{ tools|tojson(indent={inserted + 1}) }}}}")}


# what the static model leaves to the data (loops over the conversation, sizes taken from it): caught by rendering
DATA_SIZED = {
    "loops-cubed-over-the-conversation": (
        "{% for a in messages %}{% for b in messages %}{% for c in messages %}{{ a.role }}{% endfor %}{% endfor %}{% endfor %}"
    ),
    "padding-by-conversation-length": "{{ 'x'|center(messages|length * 100000) }}",
    "repetition-per-message": "{% for m in messages %}{{ m.content * 100000 }}{% endfor %}",
}


@pytest.mark.parametrize("name", sorted(DATA_SIZED))
def test_render_cost_left_to_the_data_is_measured(name):
    text = DATA_SIZED[name]
    assert [f for f in scan_template(text) if f.severity == "error"] == []  # the static model cannot bound it
    start = time.monotonic()
    found = scan_template(text, render=True)
    assert "template.render" in {f.rule for f in found}, (name, [f.line() for f in found])
    assert time.monotonic() - start < LIMITS["render_seconds"] * 3 + 10


def test_the_sandbox_refusing_an_operation_is_a_finding():
    found = render_check("{{ ''.__class__() }}", LIMITS)
    assert [rule for _, rule, _ in found] == ["template.sandbox"], found


def test_a_render_past_the_budget_is_killed():
    start = time.monotonic()
    loops = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"  # the sandbox's range() allows 100,000
    found = render_check(loops, LIMITS, budget=2.0)
    assert time.monotonic() - start < 8
    assert {rule for _, rule, _ in found} == {"template.render"}, found


def test_real_templates_render_clean():
    """Every real template, rendered with the three conversations: no finding (their errors, such as a role
    the template refuses, are not findings)."""
    noisy = {p.name: [f.line() for f in found] for p in REAL if (found := scan_template(p.read_text(encoding="utf-8"), render=True))}
    assert noisy == {}


PARENT_LIMITED = r"""
import json, resource, sys
resource.setrlimit(resource.RLIMIT_CPU, (60, 60))  # a hard CPU limit lower than the render child asks for
from gguf_construct.core.tables import template_rules
from gguf_construct.security.templates.render import render_check
print(json.dumps(render_check("{{ messages[0].content }}", template_rules().limits)))
"""


def test_a_parent_with_lower_hard_limits_gets_a_clean_render():
    """The child never raises a limit (refused): it lowers each to at most the hard limit it inherits."""
    limits = dict(LIMITS, render_seconds=20)  # the child would ask for 82 s of CPU
    script = PARENT_LIMITED.replace("template_rules().limits", repr(limits))
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert child.returncode == 0 and json.loads(child.stdout) == [], child.stdout + child.stderr[-1000:]


class _File:
    def __init__(self, templates):
        self.metadata = {"general.architecture": "llama", **templates}


def test_the_render_time_of_a_file_is_bounded():
    many = _File({f"tokenizer.chat_template.t{i}": "{{ messages[0].content }}" for i in range(50)})
    start = time.monotonic()
    found = scan_templates(many, render_seconds=0)
    assert time.monotonic() - start < 10
    assert len(found) == 50 and {(f.rule, f.severity) for f in found} == {("template.unrendered", "warning")}
    assert scan_templates(_File({"tokenizer.chat_template": "{{ messages[0].content }}"})) == []


SCAN_UNDER_1GIB = r"""
import json, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
from gguf_construct.security.chat_templates import scan_template
out = []
for text in json.load(sys.stdin):
    start = time.process_time()
    rules = sorted({f.rule for f in scan_template(text)})
    out.append([rules, time.process_time() - start])
print(json.dumps(out))
"""


def test_the_scanner_is_linear_under_a_1_gib_address_space():
    chain = "{% set v0 = 'x' %}" + "".join(f"{{% set v{i} = v{i - 1} %}}" for i in range(1, 8000)) + "{{ v7999 }}"
    appends = "{% set l = [] %}" + "".join(f"{{% set _{i} = l.append({i}) %}}" for i in range(8000))
    wide = "{{ " + " ~ ".join(["a"] * (LIMITS["max_nodes"] + 1)) + " }}"
    alternatives = "{% set a = " + " if c else ".join(f"'s{i}'" for i in range(60)) + " %}" + "{{ a ~ a }}" * 20000
    cases = [chain, appends, wide, alternatives]
    assert len(chain) > 180_000 and all(len(c.encode()) <= template_rules().max_template_bytes for c in cases)
    child = subprocess.run(
        [sys.executable, "-c", SCAN_UNDER_1GIB], input=json.dumps(cases), capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert child.returncode == 0, child.stderr[-2000:]
    (chain_rules, chain_s), (append_rules, _), (wide_rules, _), (alt_rules, _) = json.loads(child.stdout)
    assert chain_rules == [] and chain_s < 10
    assert append_rules == []
    assert wide_rules == ["template.complexity"]  # past limits.max_nodes: refused before any analysis
    assert alt_rules == ["template.complexity"]  # past limits.max_analysis_steps
