"""An Ollama model manifest: Docker's v2 manifest JSON, declared here as data classes and a construct.

Layout (Ollama's ``server/manifest.go`` and ``types/model/name.go``): a models root (``$OLLAMA_MODELS``, by
default ``~/.ollama/models``) holds ``manifests/<host>/<namespace>/<model>/<tag>`` (defaults
``registry.ollama.ai``, ``library``, ``latest``) and ``blobs/sha256-<64 hex>``. A manifest has ``config`` and
``layers``, each ``{mediaType, digest, size}`` plus optional ``name`` and ``from``; a layer's digest is the sha256
of its blob's bytes and ``size`` its length.

``OLLAMA_MANIFEST.parse`` gives a ``Manifest`` (checked: schemaVersion 2, layers with mediaType, ``sha256:<hex>``
digest and size); building writes a Manifest as Go's ``json.Encoder`` does (compact, newline), so a manifest
written that way builds back to the same bytes. The blobs it names are opened by ``api.ollama_model.open_model``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ...core import rules
from ...errors import InvalidValueError
from ..base import FileConstruct, as_stream

MEDIA_TENSOR = "application/vnd.ollama.image.tensor"
MEDIA_JSON = "application/vnd.ollama.image.json"
MEDIA_CONFIG = "application/vnd.docker.container.image.v1+json"
MEDIA_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DIGEST = re.compile(r"sha256[:-]([0-9a-fA-F]{64})\Z")
DEFAULT_HOST, DEFAULT_NAMESPACE, DEFAULT_TAG = "registry.ollama.ai", "library", "latest"

#: Ollama's model name parts (``types/model/name.go``: ASCII letters, digits, ``_``, ``-``, ``.``; no ``.`` in a
#: namespace; no ``..``; at most 128 bytes), each also a path component of a models root, so stricter where a
#: path needs it: a part starts with a letter, a digit or ``_`` (never ``.`` or ``-``: no dot segment, no option).
NAME_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,79}\Z")
NAMESPACE_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,79}\Z")
TAG_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}\Z")
#: a registry: a host name (or a bracketed IPv6 address) with an optional port
HOST_PART = re.compile(
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}))*|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?\Z"
)


def split_name(text: str) -> tuple[str, str, str, str]:
    """``[host/][namespace/]model[:tag]`` → (host, namespace, model, tag) with Ollama's defaults, every part
    checked by its grammar (``HOST_PART``, ``NAMESPACE_PART``, ``NAME_PART``, ``TAG_PART``); ValueError naming the
    part otherwise. So each part is one safe path component: no ``/``, ``\\``, NUL, ``..``, absolute path or
    non-ASCII character can reach a path built from it."""
    if not isinstance(text, str) or not text.isascii() or len(text) > 512:
        raise ValueError(f"model name {str(text)[:60]!r}: not an ASCII name of at most 512 characters")
    parts = text.split("/")
    model, colon, tag = parts[-1].partition(":")  # a registry may have a port: the tag is in the last part only
    parts[-1] = model
    if not 1 <= len(parts) <= 3 or not all(parts):
        raise ValueError(f"model name {text[:60]!r}: expected [host/][namespace/]model[:tag]")
    host, namespace, model = [DEFAULT_HOST, DEFAULT_NAMESPACE][: 3 - len(parts)] + parts
    tag = tag if colon else DEFAULT_TAG  # "m:" names an empty tag: refused below
    if not HOST_PART.match(host):
        raise ValueError(f"the registry {host[:60]!r} is not a host name with an optional port")
    for what, part, grammar in (("namespace", namespace, NAMESPACE_PART), ("model", model, NAME_PART), ("tag", tag, TAG_PART)):
        if not grammar.match(part) or ".." in part:
            raise ValueError(
                f"the {what} {part[:40]!r} is not an Ollama name part (ASCII letters, digits, '_', '-'"
                + ("" if what == "namespace" else ", '.'")
                + "; starting with a letter, a digit or '_'; no '..')"
            )
    return host, namespace, model, tag


@dataclass(frozen=True)
class Layer:
    """One manifest entry: media type, ``sha256:<hex>`` digest, size in bytes, and optional name and origin."""

    media_type: str
    digest: str
    size: int
    name: str | None = None
    origin: str | None = None  # the JSON field "from"

    @property
    def hex(self) -> str:
        return DIGEST.match(self.digest).group(1).lower()  # type: ignore[union-attr]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mediaType": self.media_type, "digest": self.digest, "size": self.size}
        if self.origin is not None:
            out["from"] = self.origin
        if self.name is not None:
            out["name"] = self.name
        return out


@dataclass(frozen=True)
class Manifest:
    """A parsed manifest (``schemaVersion`` 2): the config layer and the other layers, in file order."""

    config: Layer
    layers: tuple[Layer, ...]
    schema_version: int = 2
    media_type: str = MEDIA_MANIFEST

    @property
    def tensor_layers(self) -> list[Layer]:
        return [layer for layer in self.layers if layer.media_type == MEDIA_TENSOR]

    def to_bytes(self) -> bytes:
        """The manifest as Go's json.Encoder writes it: compact, then a newline."""
        obj = {
            "schemaVersion": self.schema_version,
            "mediaType": self.media_type,
            "config": self.config.to_json(),
            "layers": [x.to_json() for x in self.layers],
        }
        return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def _layer(obj: Any, path: str) -> Layer:
    if not isinstance(obj, dict):
        raise rules.MANIFEST_LAYER.error("a layer is not a JSON object", path=path)
    for key, kind in (("mediaType", str), ("digest", str), ("size", int)):
        if not isinstance(obj.get(key), kind) or isinstance(obj.get(key), bool):
            raise rules.MANIFEST_LAYER.error(f"{key} is missing or not a {kind.__name__}", path=f"{path}.{key}")
    if not DIGEST.match(obj["digest"]):
        raise rules.MANIFEST_DIGEST.error(f"digest {obj['digest']!r} is not sha256:<64 hex digits>", path=f"{path}.digest")
    if obj["size"] < 0:
        raise rules.MANIFEST_LAYER.error(f"size {obj['size']} is negative", path=f"{path}.size")
    name, origin = obj.get("name"), obj.get("from")
    return Layer(
        obj["mediaType"], obj["digest"], obj["size"], name if isinstance(name, str) else None, origin if isinstance(origin, str) else None
    )


def parse_manifest(data: bytes | str) -> Manifest:
    """A Manifest from its JSON bytes; FormatError for anything that is not a v2 manifest."""
    from ...core.untrusted import loads

    try:
        obj = loads(data, what="manifest")
    except InvalidValueError as e:
        raise rules.MANIFEST_JSON.error(e.message, offset=e.offset) from None
    if not isinstance(obj, dict):
        raise rules.MANIFEST_OBJECT.error("manifest is not a JSON object")
    if obj.get("schemaVersion") != 2:
        raise rules.MANIFEST_VERSION.error(f"schemaVersion is {obj.get('schemaVersion')!r}, not 2", path="schemaVersion")
    layers = obj.get("layers")
    if not isinstance(layers, list):
        raise rules.MANIFEST_LAYERS.error("layers is missing or not a list", path="layers")
    return Manifest(
        _layer(obj.get("config"), "config"),
        tuple(_layer(x, f"layers[{i}]") for i, x in enumerate(layers)),
        2,
        str(obj.get("mediaType", MEDIA_MANIFEST)),
    )


def sniff(head: bytes) -> bool:
    """A manifest as Go's encoder writes it starts with its first field."""
    return head.startswith(b'{"schemaVersion"')


class ManifestConstruct(FileConstruct):
    what = "an Ollama manifest"

    def _parse(self, stream, context, path):
        s = as_stream(stream)
        raw = bytes(s.view[s.pos :])
        s.pos = s.size
        return parse_manifest(raw)

    def _build(self, obj, stream, context, path):
        stream.write(obj.to_bytes())
        return obj


#: Ollama's model manifest (JSON).
OLLAMA_MANIFEST = ManifestConstruct()
