"""The rule catalogue: every rule id a reader, validator or command can reject an input with, as a ``Rule``.

The table is data (``schema/rules.json``): per rule its exception class, one line of documentation, the upstream
source that states it (``spec``: a key of the table's ``sources``) and, when no breaker in
``gguf_construct.strategies`` makes an input that breaks it, why (``breaker``). Two families come from their own
tables: ``limit.<name>`` from ``schema/limits.json`` and the chat-template rules from ``schema/template_rules.json``.

Raise sites use the catalogue, never a free-standing string: ``raise rules.HEADER_TRUNCATED.error(message,
path=..., offset=...)`` raises the rule's class; ``rule.truncated(...)`` raises ``TruncatedError`` under the same
rule id (the bytes end inside the rule's field: what ``BufferStream.need`` reports). Module attributes are the ids
in upper case with ``.`` as ``_`` (``tensor.ne0`` → ``TENSOR_NE0``); ``rule(id)`` looks one up by its id.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from . import errors
from .tables import load_table

#: The exception classes a rule may name (``errors`` and its subclasses in this package).
CLASSES: dict[str, type[errors.FormatError]] = {
    cls.__name__: cls
    for cls in (errors.FormatError, errors.UnknownFormatError, errors.TruncatedError, errors.LimitError, errors.InvalidValueError,
                errors.UnsupportedTypeError, errors.LayoutError, errors.DuplicateError, errors.MigrationError, errors.RemoteError,
                errors.RangeNotSupportedError, errors.RemoteChangedError, errors.RemoteLimitError)
}  # fmt: skip


@dataclass(frozen=True)
class Rule:
    """One rule: its stable id, the FormatError subclass that rejects it, what it says, where upstream says it."""

    id: str
    error_class: type[errors.FormatError]
    doc: str
    spec_ref: str
    #: None when a breaker in ``gguf_construct.strategies`` breaks this rule; else why none does
    no_breaker: str | None = None
    #: "request" when the refusal is about what was asked (arguments, paths, the environment, the network, a model
    #: a conversion cannot map), "input" when a model file's bytes break the rule (the CLI exits 2 and 1)
    fault: str = "input"

    def error(self, message: str, **where: Any) -> errors.FormatError:
        """The exception for an input breaking this rule (``where``: ``path``, ``offset``; ``url``/``status`` for
        remote rules)."""
        return self.error_class(self.id, message, **where)

    def truncated(self, message: str, **where: Any) -> errors.TruncatedError:
        """The exception for an input whose bytes end inside this rule's field (a count or length past the end)."""
        return errors.TruncatedError(self.id, message, **where)

    @property
    def constant(self) -> str:
        """The module attribute naming this rule (``header.n_kv`` → ``HEADER_N_KV``)."""
        return constant_name(self.id)

    def __str__(self) -> str:
        return self.id


def constant_name(rule_id: str) -> str:
    return rule_id.upper().replace(".", "_")


@cache
def catalogue() -> dict[str, Rule]:
    """Every rule by id: ``schema/rules.json``, the limits of ``schema/limits.json``, the template rules."""
    table = load_table("rules")
    sources = table.sources
    out: dict[str, Rule] = {}
    for rule_id, row in table.rules.items():
        cls = CLASSES[row.class_name]
        fault = "request" if issubclass(cls, errors.RemoteError) else row.fault  # a remote read failed: never the file's bytes
        out[rule_id] = Rule(rule_id, cls, row.doc, sources[row.spec], row.breaker, fault)
    for lim in load_table("limits").limits:
        name = lim.name
        out[f"limit.{name}"] = Rule(f"limit.{name}", errors.LimitError, lim.doc, sources["gguf-construct"], table.limit_breaker.get(name))
    for rule_id, doc in load_table("template_rules").rules.items():
        out[rule_id] = Rule(rule_id, errors.InvalidValueError, doc, sources["jinja2-sandbox"], table.template_breaker)
    return out


@cache
def _by_constant() -> dict[str, Rule]:
    return {r.constant: r for r in catalogue().values()}


def rule(rule_id: str) -> Rule:
    """The catalogue's rule ``rule_id`` (KeyError for an id the catalogue does not know: a missing row)."""
    return catalogue()[rule_id]


def lookup(rule_id: str) -> Rule | None:
    """The catalogue's rule ``rule_id``, or None for ids outside it (``internal.*``: a check is missing)."""
    return catalogue().get(rule_id)


def is_request_fault(error: errors.FormatError) -> bool:
    """Whether ``error`` refuses the request (a path, an argument, the network) rather than a model file's bytes."""
    found = catalogue().get(error.rule)
    return found is not None and found.fault == "request"


def error_class(rule_id: str) -> type[errors.FormatError]:
    """The class rejecting ``rule_id``; ``FormatError`` itself for ids outside the catalogue (``internal.*``)."""
    found = catalogue().get(rule_id)
    return found.error_class if found is not None else errors.FormatError


def __getattr__(name: str) -> Rule:
    try:
        return _by_constant()[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no rule {name!r}") from None
