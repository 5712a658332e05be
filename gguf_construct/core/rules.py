"""The rule catalogue: every rule id a reader, validator or command can reject an input with, as a ``Rule``.

The table is data (``schema/rules.json``): per rule its exception class, one line of documentation, the upstream
source that states it (``spec``: a key of the table's ``sources``) and, when no breaker in
``gguf_construct.testing.strategies`` makes an input that breaks it, why (``breaker``). Two families come from their own
tables: ``limit.<name>`` from ``schema/limits.json`` and the chat-template rules from ``schema/template_rules.json``.

Raise sites use the catalogue, never a free-standing string: ``raise rules.HEADER_TRUNCATED.error(message,
path=..., offset=...)`` raises the rule's class; ``rule.truncated(...)`` raises ``TruncatedError`` under the same
rule id (the bytes end inside the rule's field: what ``BufferStream.need`` reports). Module attributes are the ids
in upper case with ``.`` as ``_`` (``tensor.ne0`` → ``TENSOR_NE0``); ``rule(id)`` looks one up by its id.

The constants are resolved from the tables at run time (module ``__getattr__``); the block of annotations at the
end of this module, generated from the tables (``python -m gguf_construct.core.rules --write``; a test fails when it is
stale), declares each one to type checkers and IDEs, so that a misspelt rule fails ``mypy``, not an error path.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import errors
from .tables import load_table

#: The exception classes a rule may name (``errors`` and its subclasses in this package).
CLASSES: dict[str, type[errors.FormatError]] = {
    cls.__name__: cls
    for cls in (
        errors.FormatError,
        errors.UnknownFormatError,
        errors.TruncatedError,
        errors.LimitError,
        errors.InvalidValueError,
        errors.UnsupportedTypeError,
        errors.LayoutError,
        errors.DuplicateError,
        errors.MigrationError,
        errors.PlanError,
        errors.ShapeError,
        errors.RemoteError,
        errors.RangeNotSupportedError,
        errors.RemoteChangedError,
        errors.RemoteLimitError,
    )
}


@dataclass(frozen=True)
class Rule:
    """One rule: its stable id, the FormatError subclass that rejects it, what it says, where upstream says it."""

    id: str
    error_class: type[errors.FormatError]
    doc: str
    spec_ref: str
    #: None when a breaker in ``gguf_construct.testing.strategies`` breaks this rule; else why none does
    no_breaker: str | None = None
    #: "request" when the refusal is about what was asked (arguments, paths, the environment such as the memory
    #: the machine has, the network, a model a conversion cannot map), "input" when a model file's bytes break the
    #: rule (the CLI exits 2 and 1)
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


if not TYPE_CHECKING:  # to type checkers, the rules are the annotated names below and nothing else

    def __getattr__(name: str) -> Rule:
        try:
            return _by_constant()[name]
        except KeyError:
            raise AttributeError(f"module {__name__!r} has no rule {name!r}") from None


#: the lines that open and close the generated block (written in two parts, so that this line is not one)
BEGIN = "# -- " + "generated from schema/ by `python -m gguf_construct.core.rules --write`: the rule constants --"
END = "# -- " + "end of the generated rule constants --"


def render_constants() -> str:
    """The generated block: one annotation per rule of the catalogue, in id order."""
    lines = [BEGIN, *(f"{r.constant}: Rule" for r in sorted(catalogue().values(), key=lambda r: r.id)), END]
    return "\n".join(lines) + "\n"


def generated_block(text: str) -> str:
    """The generated block as it stands in ``text`` (empty when there is none)."""
    start = text.rfind(BEGIN)
    end = text.find(END, start)
    return text[start : end + len(END)] + "\n" if start >= 0 and end >= 0 else ""


def write_constants(path: Path = Path(__file__)) -> bool:
    """Rewrite this module's generated block from the tables; True when it changed."""
    text = path.read_text()
    old = generated_block(text)
    new = text.replace(old, render_constants()) if old else text.rstrip("\n") + "\n\n\n" + render_constants()
    if new == text:
        return False
    path.write_text(new)
    return True


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m gguf_construct.core.rules --write")
    print("rewritten" if write_constants() else "up to date")


# -- generated from schema/ by `python -m gguf_construct.core.rules --write`: the rule constants --
ALIGNMENT_TYPE: Rule
ALIGNMENT_VALUE: Rule
ALIGNMENT_ZERO: Rule
ARRAY_LENGTH: Rule
ARRAY_NESTED: Rule
ARRAY_TRUNCATED: Rule
BLOB_DIGEST: Rule
BLOB_JSON: Rule
BLOB_MISSING: Rule
BLOB_NOT_REGULAR: Rule
BLOB_SIZE: Rule
BLOB_UNREADABLE: Rule
CONVERT_GGUF_KEYS: Rule
DATA_GAP: Rule
DATA_PADDING: Rule
DATA_TRAILING: Rule
ENCODER_SIZE: Rule
EXPORT_ARCHITECTURE: Rule
EXPORT_FILE_TYPE: Rule
EXPORT_GQA: Rule
EXPORT_HPARAMS: Rule
EXPORT_METADATA: Rule
EXPORT_MISSING: Rule
EXPORT_N_MULT: Rule
EXPORT_RESCALE: Rule
EXPORT_SHAPE: Rule
EXPORT_TENSOR_NAME: Rule
EXPORT_TYPE: Rule
EXPORT_VERIFY: Rule
FILE_NOT_REGULAR: Rule
FILE_READ: Rule
FORMAT_EXPECTED: Rule
FORMAT_NOT_A_MODEL: Rule
FORMAT_UNKNOWN: Rule
HEADER_DATA_TYPE: Rule
HEADER_ENTRY: Rule
HEADER_JSON: Rule
HEADER_MAGIC: Rule
HEADER_N_KV: Rule
HEADER_N_LAYER: Rule
HEADER_N_TENSORS: Rule
HEADER_OBJECT: Rule
HEADER_PADDING: Rule
HEADER_PROFILE: Rule
HEADER_SHAPE: Rule
HEADER_SIZE: Rule
HEADER_TRUNCATED: Rule
HEADER_UTF8: Rule
HEADER_VALUE: Rule
HEADER_VERSION: Rule
HPARAMS_FTYPE: Rule
HPARAMS_IMPLAUSIBLE: Rule
HPARAMS_N_ROT: Rule
HPARAMS_VALUE: Rule
IMATRIX_DATASET: Rule
IMATRIX_DATASET_UTF8: Rule
IMATRIX_ENTRIES: Rule
IMATRIX_FINITE: Rule
IMATRIX_KIND: Rule
IMATRIX_NAME: Rule
IMATRIX_NAME_UTF8: Rule
IMATRIX_PAIRS: Rule
IMATRIX_TRAILING: Rule
IMATRIX_VALUES: Rule
INTERNAL_MEMORY: Rule
JSON_SYNTAX: Rule
JSON_UTF8: Rule
KEY_ARRAY_LENGTH: Rule
KEY_ASCII: Rule
KEY_DUPLICATE: Rule
KEY_EMPTY: Rule
KEY_LENGTH: Rule
KEY_MISSING: Rule
KEY_SYNTAX: Rule
KEY_TYPE: Rule
KEYS_FORMAT: Rule
LIMIT_ARRAY_LENGTH: Rule
LIMIT_DIMENSIONS: Rule
LIMIT_HEADER_BYTES: Rule
LIMIT_KV_COUNT: Rule
LIMIT_NESTING: Rule
LIMIT_NUMBER_DIGITS: Rule
LIMIT_OBJECTS_FREE: Rule
LIMIT_OBJECTS_PER_KIB: Rule
LIMIT_STRING_LENGTH: Rule
LIMIT_STRINGS_PER_KIB: Rule
LIMIT_TENSOR_COUNT: Rule
LOADER_TYPE: Rule
LOADER_VERSION: Rule
MANIFEST_DIGEST: Rule
MANIFEST_JSON: Rule
MANIFEST_LAYER: Rule
MANIFEST_LAYERS: Rule
MANIFEST_LOCATION: Rule
MANIFEST_OBJECT: Rule
MANIFEST_VERSION: Rule
MEL_FILTERS_N_MEL: Rule
MEL_FILTERS_SIZE: Rule
METADATA_DUPLICATE: Rule
METADATA_OBJECT: Rule
METADATA_VALUE: Rule
MIGRATE_DUPLICATE: Rule
MIGRATE_FILE_TYPE: Rule
MIGRATE_GQA: Rule
MIGRATE_HPARAMS: Rule
MIGRATE_MISSING: Rule
MIGRATE_N_FF: Rule
MIGRATE_RESHAPE: Rule
MIGRATE_RWKV_VERSION: Rule
MIGRATE_SHAPE: Rule
MIGRATE_TENSOR_NAME: Rule
MIGRATE_TOKEN: Rule
MIGRATE_TYPE: Rule
MIGRATE_VERIFY: Rule
MIGRATE_VOCAB: Rule
MIGRATE_VOCAB_SIZE: Rule
MODEL_PARAMETERS: Rule
MODEL_TYPE_LENGTH: Rule
MODEL_TYPE_LENGTH_UTF8: Rule
OUTPUT_CHANGED: Rule
OUTPUT_FOREIGN: Rule
OUTPUT_INPUT: Rule
OUTPUT_NAME: Rule
OUTPUT_NOT_REGULAR: Rule
OUTPUT_SUFFIX: Rule
PARAMETER_KEY: Rule
PARAMETER_KEY_UTF8: Rule
PARAMETER_MISSING: Rule
PARAMETER_TRUNCATED: Rule
PARSE_INVALID: Rule
PARSE_TRUNCATED: Rule
PLAN_MODEL: Rule
PLAN_REQUEST: Rule
QUANT_BIAS: Rule
QUANT_BIAS_SHAPE: Rule
QUANT_GLOBAL_SCALE: Rule
QUANT_GROUP_SIZE: Rule
QUANT_MODE: Rule
QUANT_PARAMS: Rule
QUANT_SCALE_DTYPE: Rule
QUANT_SCALE_SHAPE: Rule
QUANT_SHAPE: Rule
QUANT_TYPE: Rule
QUANTIZE_GRID: Rule
QUANTIZE_IMATRIX: Rule
QUANTIZE_TYPE: Rule
QUANTIZE_VALUES: Rule
REMOTE_CHANGED: Rule
REMOTE_CONNECTION: Rule
REMOTE_CONTENT_LENGTH: Rule
REMOTE_CONTENT_RANGE: Rule
REMOTE_DASK_STALLED: Rule
REMOTE_DEADLINE: Rule
REMOTE_DROPPED: Rule
REMOTE_MANIFEST: Rule
REMOTE_MAX_BYTES: Rule
REMOTE_MAX_HEADER: Rule
REMOTE_MAX_REQUESTS: Rule
REMOTE_MISSING_EXTRA: Rule
REMOTE_NAME: Rule
REMOTE_NO_RANGES: Rule
REMOTE_OPEN: Rule
REMOTE_READ: Rule
REMOTE_REDIRECTS: Rule
REMOTE_SCHEME: Rule
REMOTE_SIZE: Rule
REMOTE_STATUS: Rule
REMOTE_URL: Rule
SPLIT_BYTE_ORDER: Rule
SPLIT_COUNT: Rule
SPLIT_DUPLICATE: Rule
SPLIT_KEYS: Rule
SPLIT_MISSING: Rule
SPLIT_NO: Rule
SPLIT_TENSORS_COUNT: Rule
STRING_LENGTH: Rule
STRING_TRUNCATED: Rule
STRING_UTF8: Rule
TDT_DURATIONS_SIZE: Rule
TEMPLATE_COMPLEXITY: Rule
TEMPLATE_DUNDER: Rule
TEMPLATE_DYNAMIC_ATTRIBUTE: Rule
TEMPLATE_FLOW_LIMIT: Rule
TEMPLATE_FORMAT: Rule
TEMPLATE_GLOBAL_OBJECT: Rule
TEMPLATE_INTROSPECTION: Rule
TEMPLATE_LITERAL_ATTRIBUTE: Rule
TEMPLATE_LOADER: Rule
TEMPLATE_LOOP_BOUND: Rule
TEMPLATE_LOOP_GROWTH: Rule
TEMPLATE_MEMBER: Rule
TEMPLATE_NUMBER: Rule
TEMPLATE_PRIVATE: Rule
TEMPLATE_RECURSION: Rule
TEMPLATE_RENDER: Rule
TEMPLATE_REPETITION: Rule
TEMPLATE_SANDBOX: Rule
TEMPLATE_SELF: Rule
TEMPLATE_SIZE: Rule
TEMPLATE_SYNTAX: Rule
TEMPLATE_UNKNOWN: Rule
TEMPLATE_UNRENDERED: Rule
TENSOR_ARCHITECTURE: Rule
TENSOR_BLOCK: Rule
TENSOR_BLOCK_INDEX: Rule
TENSOR_BLOCKS: Rule
TENSOR_BOUNDS: Rule
TENSOR_BYTE_ORDER: Rule
TENSOR_COMPLEX: Rule
TENSOR_DATA: Rule
TENSOR_DATA_OFFSETS: Rule
TENSOR_DTYPE: Rule
TENSOR_DUPLICATE: Rule
TENSOR_LAYOUT: Rule
TENSOR_N_DIMS: Rule
TENSOR_NAME: Rule
TENSOR_NAME_UTF8: Rule
TENSOR_NAME_LENGTH: Rule
TENSOR_NBYTES_OVERFLOW: Rule
TENSOR_NE: Rule
TENSOR_NE0: Rule
TENSOR_NE_OVERFLOW: Rule
TENSOR_OFFSET_ALIGNMENT: Rule
TENSOR_OFFSET_INCONSISTENT: Rule
TENSOR_OVERLAP: Rule
TENSOR_PADDING: Rule
TENSOR_PARTIAL_BLOCK: Rule
TENSOR_SHAPE: Rule
TENSOR_SIZE: Rule
TENSOR_TRUNCATED: Rule
TENSOR_TYPE: Rule
TOKENIZER_BYTE_TOKEN: Rule
TOKENIZER_DUPLICATE: Rule
TOKENIZER_LENGTH: Rule
TOKENIZER_TOKEN_ID: Rule
TYPES_USER: Rule
VALUE_BOOL: Rule
VALUE_TRUNCATED: Rule
VALUE_TYPE: Rule
VALUE_TYPE_V1: Rule
VOCAB_COUNT: Rule
VOCAB_ID: Rule
VOCAB_LENGTH: Rule
VOCAB_LINE: Rule
VOCAB_SIZE: Rule
VOCAB_TOKEN: Rule
VOCAB_TRUNCATED: Rule
VOCAB_UTF8: Rule
WINDOW_SIZE: Rule
WRITE_INVALID: Rule
# -- end of the generated rule constants --
