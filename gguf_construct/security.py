"""Chat templates are code: scan every ``tokenizer.chat_template*`` value for sandbox escapes.

CVE-2024-34359 showed it: llama-cpp-python rendered a GGUF file's ``tokenizer.chat_template`` with a plain
Jinja2 ``Environment``, and ``().__class__.__base__.__subclasses__()`` reached ``os.popen``. A scanner cannot
run the template (that is the danger), so it parses it with Jinja2's ``SandboxedEnvironment`` and walks the
syntax tree for what no chat template needs: underscored and introspection attributes, attribute access on
Jinja2's global callables or on ``self``, and attribute names built at render time. The rules and the names
they look for are data: ``schema/template_rules.json``. Needs the ``security`` extra (``jinja2>=3.1``).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from . import rules
from .tables import TemplateRules, template_rules
from .validation import Issue

SNIPPET = 120  # characters of the offending line shown in a finding


def _jinja() -> Any:
    try:
        import jinja2
        import jinja2.ext
        import jinja2.nodes
        import jinja2.sandbox
    except ImportError:
        from .errors import MissingExtraError

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


def scan_template(text: str, key: str = "tokenizer.chat_template", offset: int | None = None) -> list[Issue]:
    """Every finding in one template: an ``Issue`` whose path is ``KEY:LINE`` and whose message quotes the
    line. ``offset`` (the key's record in the file) is carried into each finding."""
    table = template_rules()
    if len(text.encode("utf-8", "surrogatepass")) > table.max_template_bytes:
        return [Issue(rules.TEMPLATE_SIZE, f"{key} holds {len(text):,} characters (at most {table.max_template_bytes:,} bytes are parsed)", key, offset)]
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
    return [_finding(rule, why, key, text, line, offset) for rule, why, line in _walk(tree, jinja2.nodes, table)]


def scan_templates(file: Any) -> list[Issue]:
    """Every finding in every chat template of a file: a loaded file object (any format with ``metadata``)
    or a path, which is opened leniently."""
    if isinstance(file, (str, os.PathLike)):
        from .registry import load

        file = load(file, strict=False)
    meta = file.metadata
    offset_of = getattr(meta, "offset_of", lambda key: None)
    out: list[Issue] = []
    for key in template_keys(meta):
        value = meta[key]
        if isinstance(value, str):
            out += scan_template(value, key, offset_of(key))
    return out


def _finding(rule: str, why: str, key: str, text: str, line: int, offset: int | None) -> Issue:
    lines = text.splitlines() or [""]
    snippet = lines[min(max(line, 1), len(lines)) - 1].strip()
    if len(snippet) > SNIPPET:
        snippet = snippet[: SNIPPET - 3] + "..."
    return Issue(rule, f"line {line}: {why}: {snippet!r}", f"{key}:{line}", offset)


def _short(message: str | None, width: int = 200) -> str:
    message = message or ""
    return message if len(message) <= width else message[: width - 3] + "..."


def _children(node: Any) -> Iterator[Any]:
    return node.iter_child_nodes()


def _walk(tree: Any, nodes: Any, table: TemplateRules) -> list[tuple[str, str, int]]:
    """The findings of one parsed template, in source order (an explicit stack: no recursion limit)."""
    introspection = set(table.introspection_attributes)
    global_objects = set(table.global_objects)
    builders = table.string_builders
    attr_callables = set(table.attribute_callables)
    attr_filters = table.attribute_filters
    all_nodes = []
    stack = [tree]
    while stack:
        node = stack.pop()
        all_nodes.append(node)
        stack.extend(_children(node))
    assigned = {n.name for n in all_nodes if isinstance(n, nodes.Name) and n.ctx == "store"}
    built_names = _string_built_names(all_nodes, nodes, builders)
    blocks = {n.name for n in all_nodes if isinstance(n, nodes.Block)}
    out: list[tuple[int, str, str]] = []  # (line, rule, why), sorted by line below

    def name_rule(name: str) -> tuple[str, str] | None:
        if name.startswith("__"):
            return "template.dunder", f"access to {name}"
        if name.startswith("_"):
            return "template.private", f"access to {name}"
        if name in introspection:
            return "template.introspection", f"access to {name}"
        return None

    for node in all_nodes:
        line = getattr(node, "lineno", 1) or 1
        target = None
        if isinstance(node, nodes.Getattr):
            target, name = node.node, node.attr
        elif isinstance(node, nodes.Getitem):
            target = node.node
            key = node.arg
            name = key.value if isinstance(key, nodes.Const) and isinstance(key.value, str) else None
            if name is None and _builds_string(key, nodes, builders, built_names):
                out.append((line, "template.dynamic_attribute", "a subscript whose key is built from strings"))
        elif isinstance(node, nodes.Filter) and node.name == "attr":
            arg = node.args[0] if node.args else None
            name = arg.value if isinstance(arg, nodes.Const) and isinstance(arg.value, str) else None
            if name is None:
                out.append((line, "template.dynamic_attribute", "the attr filter with a name computed at render time"))
        elif isinstance(node, nodes.Filter) and node.name in attr_filters:
            for arg in _attribute_arguments(node, attr_filters[node.name]):
                if not (isinstance(arg, nodes.Const) and isinstance(arg.value, str)):
                    out.append((line, "template.dynamic_attribute", f"the {node.name} filter with an attribute name computed at render time"))
                    continue
                for segment in arg.value.split("."):  # Jinja2 follows dotted attribute paths
                    hit = name_rule(segment)
                    if hit:
                        out.append((line, hit[0], f"{hit[1]} through the {node.name} filter"))
            continue
        elif isinstance(node, nodes.Call) and isinstance(node.node, nodes.Name) and node.node.name in attr_callables and node.node.name not in assigned:
            out.append((line, "template.dynamic_attribute", f"{node.node.name}() takes attribute names as strings"))
            continue
        else:
            continue
        if name is not None:
            hit = name_rule(name)
            if hit:
                out.append((line, *hit))
        if isinstance(target, nodes.Name) and target.ctx == "load" and target.name not in assigned:
            if target.name in global_objects:
                out.append((line, "template.global_object", f"access through the global {target.name}"))
            elif target.name == "self" and name not in blocks:
                out.append((line, "template.self", "access through self, the template reference"))
    out.sort(key=lambda f: f[0])
    return [(rule, why, line) for line, rule, why in out]


def _attribute_arguments(node: Any, position: int | None) -> list[Any]:
    """The arguments of a filter call that name attributes: ``attribute=`` and, for selectattr, rejectattr and
    groupby, the first positional one."""
    args = [kw.value for kw in node.kwargs if kw.key == "attribute"]
    if position is not None and len(node.args) > position:
        args.append(node.args[position])
    return args


def _builds_string(expr: Any, nodes: Any, builders: Mapping[str, Sequence[str]], built_names: set[str]) -> bool:
    """Whether ``expr`` makes a string out of pieces: ``~``, ``+`` or ``%`` with a string constant, a
    string-building filter or method, or a variable assigned from one of those."""
    if isinstance(expr, nodes.Concat):
        return True
    if isinstance(expr, (nodes.Add, nodes.Mod, nodes.Mul)):
        return any(isinstance(side, nodes.Const) and isinstance(side.value, str) for side in (expr.left, expr.right)) or any(
            _builds_string(side, nodes, builders, built_names) for side in (expr.left, expr.right)
        )
    if isinstance(expr, nodes.Filter):
        return expr.name in builders["filters"]
    if isinstance(expr, nodes.Call) and isinstance(expr.node, nodes.Getattr):
        return expr.node.attr in builders["methods"]
    if isinstance(expr, nodes.Name):
        return expr.name in built_names
    return False


def _string_built_names(all_nodes: list[Any], nodes: Any, builders: Mapping[str, Sequence[str]]) -> set[str]:
    """Variables a ``{% set %}`` gives a string built from pieces (followed through chains of such sets)."""
    sets = [(n.target.name, n.node) for n in all_nodes if isinstance(n, nodes.Assign) and isinstance(n.target, nodes.Name)]
    built: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, value in sets:
            if name not in built and _builds_string(value, nodes, builders, built):
                built.add(name)
                changed = True
    return built
