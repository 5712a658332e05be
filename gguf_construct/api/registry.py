"""Every format the package reads, in one table: how to recognise it, its schema, how to open and validate it.

``FORMATS`` maps a format's name to its ``FormatSpec``; ``detect`` asks the specs' sniffers in ``FORMATS``' order,
and ``load``, ``load_url``, ``schema_for`` and ``validate`` (``validate_file``, ``validate_bytes``) dispatch through the spec
of the format detected. A new format is one more ``FormatSpec`` here: its sniffer, and a binder that imports its
schema, openers and validators (written in their own modules) into a ``FormatParts``.

Each entry holds its sniffer, and a binder: a function whose (real, function-level) imports bring in the
format's schema, file object and validators the first time the format is used, so ``gguf-construct hash``
of a GGUF file loads neither the safetensors, Ollama and legacy readers nor the quantization codecs. The
module sits above ``formats``, ``validation`` and ``api`` and below the command line. ``import gguf_construct``
stays light because the package imports this module on first use (``gguf_construct.__getattr__``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache, partial
from typing import TYPE_CHECKING, Any, Literal, overload

from ..core import rules
from ..core.limits import limits as limits_scope
from ..errors import FormatError
from ..formats.base import map_file, open_regular
from ..formats.gguf import schema as gguf
from ..formats.legacy import magic as legacy_magic
from ..formats.legacy.magic import refuse_non_model
from ..sources.budget import budgeted
from ..sources.options import options
from ..sources.urls import is_remote, scheme_of
from ..validation import Issue, validate_gguf_bytes
from ..validation.gguf_checks import validate_gguf_source
from ..validation.profiles import GGUF_PROFILES, OLLAMA_PROFILES, PROFILES, SAFETENSORS_PROFILES
from .gguf_file import gguf_from_source

if TYPE_CHECKING:
    from construct import Construct

    from ..sources.byte_source import ByteSource
    from ..validation.profiles import GGUFProfile, LegacyProfile, OllamaProfile, Profile, SafetensorsProfile
    from .gguf_file import GGUFFile
    from .legacy_file import LegacyFile
    from .ollama_model import OllamaModel
    from .protocol import ByteOrder, FormatName, LegacyFormatName, ModelFile
    from .safetensors_file import SafetensorsFile


@dataclass(frozen=True)
class FormatParts:
    """What a format's binder imports: its schema, openers and validators."""

    #: the construct schema: ``schema.parse(bytes)`` / ``schema.build(container)``
    schema: Construct
    #: ``open(path, *, strict, profile, byte_order=None, **options)``: the file object (``.format``,
    #: ``.metadata``, ``.tensors``) of a local file
    open: Callable[..., ModelFile]
    #: ``open_source(source, *, strict, profile, byte_order=None, hint=None)``: the same over a
    #: ``sources.byte_source.ByteSource`` (a remote file read by ranges)
    open_source: Callable[..., ModelFile]
    #: ``validate(data, profile) -> list[Issue]`` on the file's bytes
    validate: Callable[[Any, str], list[Issue]]
    #: ``validate_path(path, profile)`` for a format whose file names other files (a manifest: its blobs);
    #: None: ``validate`` on the file's bytes says all
    validate_path: Callable[[Any, str], list[Issue]] | None = None
    #: ``validate_source(source, profile)`` on a ``ByteSource`` read by ranges, without fetching what its
    #: checks do not need (the tensor data); None: ``validate`` on all the source's bytes
    validate_source: Callable[[ByteSource, str], list[Issue]] | None = None


@dataclass(frozen=True)
class FormatSpec:
    """One format: what ``detect`` asks, and (through ``bind``, on first use) what parses, opens and checks it."""

    #: the name ``detect`` returns and ``file.format`` holds
    name: str
    #: ``sniff(head) -> bool`` on the file's first ``PREFIX_SIZE`` bytes; it may raise ``UnknownFormatError``
    #: for bytes that are recognisably this format's but not readable (a known magic with an unknown version)
    sniff: Callable[[bytes], bool]
    #: ``bind() -> FormatParts``: imports the format's modules (called once, the first time a part is asked for)
    bind: Callable[[], FormatParts]
    #: the validation profiles this format has; under any other known profile it is checked under 'spec'
    profiles: tuple[str, ...] = GGUF_PROFILES  # the legacy formats have the same two

    @property
    def parts(self) -> FormatParts:
        return _bound(self.bind)

    @property
    def schema(self) -> Construct:
        return self.parts.schema

    @property
    def open(self) -> Callable[..., ModelFile]:
        return self.parts.open

    @property
    def open_source(self) -> Callable[..., ModelFile]:
        return self.parts.open_source

    @property
    def validate(self) -> Callable[[Any, str], list[Issue]]:
        return self.parts.validate

    @property
    def validate_path(self) -> Callable[[Any, str], list[Issue]] | None:
        return self.parts.validate_path

    @property
    def validate_source(self) -> Callable[[ByteSource, str], list[Issue]] | None:
        return self.parts.validate_source


@cache
def _bound(bind: Callable[[], FormatParts]) -> FormatParts:
    return bind()


# -- each format's binder: its modules are imported here, on first use -------------------------------------
def _gguf() -> FormatParts:
    from .shard_set import open_gguf

    return FormatParts(gguf.GGUF, open_gguf, gguf_from_source, validate_gguf_bytes, validate_source=validate_gguf_source)


def _safetensors() -> FormatParts:
    from ..formats.safetensors.schema import SAFETENSORS
    from ..validation.safetensors_checks import validate_safetensors_bytes, validate_safetensors_source
    from .openers.over_source import safetensors_from_source
    from .safetensors_file import load_safetensors

    return FormatParts(
        SAFETENSORS, load_safetensors, safetensors_from_source, validate_safetensors_bytes, validate_source=validate_safetensors_source
    )


def _ollama() -> FormatParts:
    from ..formats.ollama.schema import OLLAMA_MANIFEST
    from ..validation.ollama_checks import validate_manifest_bytes
    from .ollama_model import load_manifest, validate_manifest_file
    from .openers.over_source import manifest_from_source

    return FormatParts(OLLAMA_MANIFEST, load_manifest, manifest_from_source, validate_manifest_bytes, validate_manifest_file)


def _rwkv() -> FormatParts:
    from ..formats.rwkv.schema import RWKV
    from ..validation.legacy_checks import validate_rwkv_bytes
    from .legacy_file import load_rwkv
    from .openers.over_source import legacy_from_source

    return FormatParts(RWKV, load_rwkv, partial(legacy_from_source, fmt="rwkv"), validate_rwkv_bytes)


def _legacy(name: str) -> Callable[[], FormatParts]:
    def bind() -> FormatParts:
        from ..formats.legacy.schema import GGML
        from ..validation.legacy_checks import validate_legacy_bytes
        from .legacy_file import load_legacy
        from .openers.over_source import legacy_from_source

        return FormatParts(GGML, load_legacy, partial(legacy_from_source, fmt=name), validate_legacy_bytes)

    return bind


def _sniff_safetensors(head: bytes) -> bool:
    from ..formats.safetensors.schema import looks_like_safetensors

    return looks_like_safetensors(head)


def _sniff_ollama(head: bytes) -> bool:
    from ..formats.ollama.schema import sniff

    return sniff(head)


#: Every format, in the order ``detect`` asks them (magics first, then the sniffers that look at a length).
FORMATS: dict[str, FormatSpec] = {
    spec.name: spec
    for spec in (
        FormatSpec("gguf", gguf.sniff, _gguf),
        FormatSpec("safetensors", _sniff_safetensors, _safetensors, SAFETENSORS_PROFILES),
        FormatSpec("ollama", _sniff_ollama, _ollama, OLLAMA_PROFILES),
        FormatSpec("rwkv", legacy_magic.sniffer("rwkv"), _rwkv),
        *(FormatSpec(name, legacy_magic.sniffer(name), _legacy(name)) for name in ("ggml", "ggmf", "ggjt")),
    )
}


#: Bytes ``detect`` needs to tell every known format apart.
PREFIX_SIZE = 16


# -- which format ------------------------------------------------------------------------------------------
def detect(data: Any) -> str:
    """The format name ('gguf') of a byte string, a file prefix or a path; UnknownFormatError otherwise (rule
    ``format.not_a_model`` for what llama.cpp wrote that is no model, ``header.version`` for a known magic with
    an unknown version, ``format.unknown`` for anything else)."""
    head = _prefix(data)
    for spec in FORMATS.values():
        if spec.sniff(head):
            return spec.name
    refuse_non_model(head)
    raise rules.FORMAT_UNKNOWN.error(f"not a known model file (starts with {head[:8].hex(' ')})", offset=0)


def _prefix(data: Any) -> bytes:
    if isinstance(data, (str, os.PathLike)):
        with open_regular(data) as f:
            return bytes(f.read(PREFIX_SIZE))
    return bytes(memoryview(data)[:PREFIX_SIZE])


def schema_for(data: Any) -> Construct:
    """The construct schema for the detected format."""
    return FORMATS[detect(data)].schema


def profile_for(spec: FormatSpec, profile: str) -> str:
    """``profile`` if the format has it; 'spec' for a known profile that says nothing about this format (e.g.
    'hf' on a GGUF file); an unknown name is left for the validator to refuse."""
    return "spec" if profile not in spec.profiles and profile in PROFILES else profile


# -- opening -----------------------------------------------------------------------------------------------
@overload
def load(
    path: str | os.PathLike[str],
    *,
    format: Literal["gguf"],
    strict: bool = ...,
    profile: GGUFProfile = ...,
    byte_order: ByteOrder | None = ...,
    limits: Mapping[str, int] | None = ...,
) -> GGUFFile: ...
@overload
def load(
    path: str | os.PathLike[str],
    *,
    format: Literal["safetensors"],
    strict: bool = ...,
    profile: SafetensorsProfile = ...,
    byte_order: ByteOrder | None = ...,
    limits: Mapping[str, int] | None = ...,
) -> SafetensorsFile: ...
@overload
def load(
    path: str | os.PathLike[str],
    *,
    format: LegacyFormatName,
    strict: bool = ...,
    profile: LegacyProfile = ...,
    byte_order: ByteOrder | None = ...,
    limits: Mapping[str, int] | None = ...,
) -> LegacyFile: ...
@overload
def load(
    path: str | os.PathLike[str],
    *,
    format: Literal["ollama"],
    strict: bool = ...,
    profile: OllamaProfile = ...,
    byte_order: ByteOrder | None = ...,
    limits: Mapping[str, int] | None = ...,
) -> OllamaModel: ...
@overload
def load(
    path: str | os.PathLike[str],
    *,
    format: None = None,
    strict: bool = ...,
    profile: Profile = ...,
    byte_order: ByteOrder | None = ...,
    limits: Mapping[str, int] | None = ...,
) -> ModelFile: ...
def load(
    path: str | os.PathLike[str],
    *,
    format: FormatName | None = None,
    strict: bool = True,
    profile: Profile = "spec",
    byte_order: ByteOrder | None = None,
    limits: Mapping[str, int] | None = None,
) -> ModelFile:
    """Open any model file ``detect()`` knows: a ``GGUFFile`` for GGUF, the format's own file object otherwise
    (each a ``ModelFile``: see ``api.protocol``). ``format`` demands one format (an ``UnknownFormatError``, rule
    ``format.expected``, for any other, before anything is parsed) and tells a type checker which class comes back.
    The first shard of a gguf-split set (``*-00001-of-0000N.gguf``, N > 1) opens the whole set as one model
    (``api.shard_set.load_shards``; ``api.gguf_file.load_gguf`` opens the shard alone). ``path`` may also be an
    http(s)://, hf://, ollama:// or fsspec URL: only the header is fetched, each tensor when read
    (``load_url``). ``limits`` changes named resource limits (``schema/limits.json``, e.g. ``{"nesting": 32}``)
    for this call."""
    with limits_scope(limits):
        if is_remote(path):
            f = load_url(os.fspath(path), strict=strict, profile=profile, byte_order=byte_order)
            if format is not None and f.format != format:  # known once the source is open
                f.close()
                raise _not_expected(path, f.format, format)
            return f
        spec = FORMATS[detect(path)]
        if format is not None and spec.name != format:
            raise _not_expected(path, spec.name, format)
        return spec.open(path, strict=strict, profile=profile_for(spec, profile), byte_order=byte_order)


def _not_expected(path: str | os.PathLike[str], found: str, expected: str) -> FormatError:
    return rules.FORMAT_EXPECTED.error(f"{os.fspath(path)} is a {found} file, not {expected}", offset=0)


def load_url(
    source: str,
    *,
    strict: bool = True,
    profile: str = "spec",
    byte_order: str | None = None,
    shards: bool = True,
    hint: str | None = None,
    opts: Any = None,
) -> ModelFile:
    """``load()`` for a remote source: a GGUFFile (a ShardedGGUF from a first shard's URL when ``shards``), a
    SafetensorsFile, an OllamaModel (``ollama://``) or a LegacyFile."""
    opts = budgeted(opts or options())  # one budget for every file and request of this source (see remote.budget)
    if scheme_of(source) == "ollama":
        from .openers.ollama_registry import load_ollama

        return load_ollama(source, strict=strict, hint=hint, opts=opts)
    from ..sources.opening import open_source

    src = open_source(source, opts)
    fmt = detect_source(src)
    if fmt == "gguf" and shards and byte_order is None:
        from .openers.remote_shards import first_shard_urls, load_remote_shards

        urls = first_shard_urls(source)
        if urls:
            return load_remote_shards(urls, src, strict=strict, profile=profile_for(FORMATS[fmt], profile), opts=opts)
    return load_source(src, fmt, strict=strict, profile=profile, byte_order=byte_order, hint=hint)


def detect_source(src: ByteSource) -> str:
    """``detect`` on the first bytes of a byte source."""
    return detect(bytes(src.ensure(0, PREFIX_SIZE)))


def load_source(
    src: ByteSource,
    fmt: str | None = None,
    *,
    strict: bool = True,
    profile: str = "spec",
    byte_order: str | None = None,
    hint: str | None = None,
) -> ModelFile:
    """The file object of a byte source, through its format's ``open_source``."""
    spec = FORMATS[fmt or detect_source(src)]
    return spec.open_source(src, strict=strict, profile=profile_for(spec, profile), byte_order=byte_order, hint=hint)


# -- validating --------------------------------------------------------------------------------------------
def validate(
    source: str | os.PathLike[str] | bytes | bytearray | memoryview,
    profile: Profile = "spec",
    *,
    limits: Mapping[str, int] | None = None,
) -> list[Issue]:
    """Every rule ``source`` breaks under ``profile``, as ``Issue`` records: ``source`` is a path or URL (any
    format ``detect`` knows; a manifest's blobs are checked too) or the bytes of a file; empty when it breaks none.
    A file the schema cannot read gives one issue from its ``FormatError``. ``limits`` changes named resource
    limits for this call, as for ``load``."""
    with limits_scope(limits):
        if isinstance(source, (str, os.PathLike)):
            return validate_file(source, profile)
        return validate_bytes(source, profile)


def validate_file(path: Any, profile: str = "spec") -> list[Issue]:
    """Parse and check a file (or a URL: ``validate_url``); a file the schema cannot read gives one issue from
    its FormatError."""
    if is_remote(path):
        return validate_url(path, profile)

    try:
        view = map_file(path)
    except OSError as e:
        return [Issue(rules.FILE_READ, str(e))]
    except FormatError as e:  # not a regular file
        return [Issue.from_error(e)]
    try:
        spec = FORMATS[detect(view)]
    except FormatError:
        return validate_bytes(view, profile)  # it says why detect refused (or checks GGUF's rules on unknown bytes)
    if spec.validate_path is not None:  # a manifest: its blobs are checked too
        return spec.validate_path(path, profile)
    return spec.validate(view, profile_for(spec, profile))


def validate_bytes(data: Any, profile: str = "spec") -> list[Issue]:
    """Every rule ``data`` breaks, for whichever format ``detect()`` names (GGUF rules for unknown bytes)."""
    try:
        fmt = detect(data)
    except FormatError as e:
        if e.rule != "format.unknown":  # recognised, and rejected for a reason of its own (a vocabulary dump, ...)
            return [Issue.from_error(e)]
        fmt = "gguf"  # no known magic: GGUF's rules say what is wrong with it
    spec = FORMATS[fmt]
    return spec.validate(data, profile_for(spec, profile))


def validate_url(source: str, profile: str = "spec") -> list[Any]:
    """``validate_file`` for a remote source: every issue of its header (and of the whole file for the formats
    that are read whole); a failure to read is one issue with its rule (``remote.*``)."""
    opts = budgeted(options())
    try:
        if scheme_of(source) == "ollama":
            from .openers.ollama_registry import validate_ollama

            return validate_ollama(source, opts)
        from ..sources.opening import open_source

        src = open_source(source, opts)
        spec = FORMATS[detect_source(src)]
        profile = profile_for(spec, profile)
        if spec.validate_source is not None:
            return spec.validate_source(src, profile)
        return spec.validate(src.ensure(0, src.size), profile)
    except FormatError as e:
        return [Issue.from_error(e)]
