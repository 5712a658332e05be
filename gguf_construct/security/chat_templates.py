"""Chat templates are code: scan every ``tokenizer.chat_template*`` value for sandbox escapes.

CVE-2024-34359 showed it: llama-cpp-python rendered a GGUF file's ``tokenizer.chat_template`` with a plain
Jinja2 ``Environment``, and ``().__class__.__base__.__subclasses__()`` reached ``os.popen``. A scanner cannot
run the template (that is the danger), so it parses it with Jinja2's own parser and proves, by a data-flow
analysis of the syntax tree (``gguf_construct.security.templates``), that every attribute name and subscript key is
safe, and that the renderer's work is bounded; whatever it cannot prove is a finding. The rules, names and
limits are data: ``schema/template_rules.json``. Threat model: docs/howto/templates.md. Needs the ``security``
extra (``jinja2>=3.1``).
"""

from __future__ import annotations

import os
import time
import warnings
from typing import Any

from ..core import rules
from ..core.tables import TemplateRules, template_rules
from ..validation import Issue
from .templates.allowlist import WARNING_RULES

SNIPPET = 120  # characters of the offending line shown in a finding


def _jinja() -> Any:
    try:
        import jinja2
        import jinja2.ext
        import jinja2.nodes
        import jinja2.sandbox
    except ImportError:
        from ..errors import MissingExtraError

        raise MissingExtraError("chat template scanning", "security", "jinja2") from None
    return jinja2


def _environment() -> Any:
    """A sandboxed environment that parses what transformers' ``apply_chat_template`` parses: the
    loopcontrols extension (break, continue) and the ``{% generation %}`` block of its AssistantTracker."""
    jinja2 = _jinja()
    nodes = jinja2.nodes

    extension: Any = jinja2.ext.Extension  # jinja2 is an optional import: its classes are not known statically

    class GenerationTag(extension):
        tags = {"generation"}

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return nodes.Scope(body, lineno=lineno)

    return jinja2.sandbox.SandboxedEnvironment(extensions=["jinja2.ext.loopcontrols", GenerationTag])


def template_keys(metadata: Any) -> list[str]:
    """The metadata keys holding chat templates: ``tokenizer.chat_template`` and its named variants."""
    prefix = template_rules().keys
    return [k for k in metadata if k == prefix or k.startswith(prefix + ".")]


def scan_template(
    text: str, key: str = "tokenizer.chat_template", offset: int | None = None, render: bool = False, budget: float | None = None
) -> list[Issue]:
    """Every finding in one template: an ``Issue`` whose path is ``KEY:LINE`` and whose message quotes the
    line. ``offset`` (the key's record in the file) is carried into each finding. With ``render``, a template
    the static checks find no error in is also rendered in Jinja2's sandbox in a child process under the
    limits of ``schema/template_rules.json`` (at most ``budget`` seconds of wall time)."""
    table = template_rules()
    if len(text.encode("utf-8", "surrogatepass")) > table.max_template_bytes:
        return [
            Issue(
                rules.TEMPLATE_SIZE,
                f"{key} holds {len(text):,} characters (at most {table.max_template_bytes:,} bytes are parsed)",
                key,
                offset,
            )
        ]
    jinja2 = _jinja()
    env = _environment()
    try:
        with warnings.catch_warnings():  # string literals are decoded by Python: '\-' warns, and fails under -W error
            warnings.simplefilter("ignore")
            tree = env.parse(text)
    except jinja2.TemplateSyntaxError as e:
        return [_finding("template.syntax", f"does not parse: {_short(e.message)}", key, text, e.lineno or 1, offset)]
    except RecursionError:
        return [_finding("template.syntax", "does not parse: nested too deeply for the parser", key, text, 1, offset)]
    except Exception as e:  # noqa: BLE001 - Jinja2's lexer lets Python's own errors out (an int of 5000 digits)
        return [_finding("template.syntax", f"does not parse: {type(e).__name__}: {_short(str(e))}", key, text, 1, offset)]
    found = _walk(tree, jinja2.nodes, table)
    if render and not any(rule not in WARNING_RULES for rule, _, _ in found):
        from .templates.render import render_check

        found += [(rule, why, line) for line, rule, why in render_check(text, table.limits, budget)]
    return [_finding(rule, why, key, text, line, offset) for rule, why, line in found]


def scan_templates(file: Any, render: bool = True, render_seconds: float | None = None) -> list[Issue]:
    """Every finding in every chat template of a file: a loaded file object (any format with ``metadata``)
    or a path, which is opened leniently. With ``render`` (the default, as ``validate --security`` does), each
    template is also rendered in the sandbox, within ``render_seconds`` of wall time for the whole file
    (``limits.render_total_seconds`` unless given); templates left when it is spent are warnings."""
    if isinstance(file, (str, os.PathLike)):
        from ..api.registry import load

        file = load(file, strict=False)
    meta = file.metadata
    offset_of = getattr(meta, "offset_of", lambda key: None)
    out: list[Issue] = []
    total = template_rules().limits["render_total_seconds"] if render_seconds is None else render_seconds
    deadline = time.monotonic() + total
    for key in template_keys(meta):
        value = meta[key]
        if not isinstance(value, str):
            continue
        left = deadline - time.monotonic()
        out += scan_template(value, key, offset_of(key), render=render and left >= 1.0, budget=left)
        if render and left < 1.0:
            out.append(_finding("template.unrendered", "not rendered: the file's render time is spent", key, value, 1, offset_of(key)))
    return out


def _finding(rule: str, why: str, key: str, text: str, line: int, offset: int | None) -> Issue:
    lines = text.splitlines() or [""]
    snippet = lines[min(max(line, 1), len(lines)) - 1].strip()
    if len(snippet) > SNIPPET:
        snippet = snippet[: SNIPPET - 3] + "..."
    return Issue(rule, f"line {line}: {why}: {snippet!r}", f"{key}:{line}", offset, "warning" if rule in WARNING_RULES else "error")


def _short(message: str | None, width: int = 200) -> str:
    message = message or ""
    return message if len(message) <= width else message[: width - 3] + "..."


def _walk(tree: Any, nodes: Any, table: TemplateRules) -> list[tuple[str, str, int]]:
    """The findings of one parsed template, in source order: the allowlist check and the data-flow analysis
    (``gguf_construct.security.templates``), after the size limit that keeps both linear."""
    from .templates.allowlist import AllowlistCheck
    from .templates.flow import Analysis, AnalysisBudget
    from .templates.syntax import _all

    limit = table.limits["max_nodes"]
    count = sum(1 for _ in zip(range(limit + 1), _all(tree), strict=False))
    if count > limit:
        return [("template.complexity", f"more than {limit:,} syntax nodes: not analysed", 1)]
    try:
        found = Analysis(tree, nodes, table).run()
    except RecursionError:  # a call chain or expression deeper than Python's stack: nothing is proven
        found = [(1, "template.flow_limit", "the template nests deeper than the analysis follows")]
    except AnalysisBudget as e:
        found = [(1, "template.complexity", f"{e}: not analysed")]
    seen = {(line, rule) for line, rule, _ in found}
    found += [f for f in AllowlistCheck(tree, nodes).run() if (f[0], f[1]) not in seen]
    return [(rule, why, line) for line, rule, why in sorted(found, key=lambda f: f[0])]
