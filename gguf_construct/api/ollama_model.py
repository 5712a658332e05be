"""Ollama model manifests: parse them, check every blob against its sha256 digest, open the model as one set
of tensors, and write a model store.

Layout (``ollama/ollama`` ``manifest/{paths,manifest,layer}.go`` and ``x/mlxrunner/runner.go`` at fb30760): a
models root (``$OLLAMA_MODELS``, by default ``~/.ollama/models``) holds
``manifests/<host>/<namespace>/<model>/<tag>`` (defaults ``registry.ollama.ai``, ``library``, ``latest``) and
``blobs/sha256-<64 hex>``. A manifest is Docker's v2 JSON: ``config`` and
``layers``, each ``{mediaType, digest, size}`` plus optional ``name`` and ``from``. A layer's digest is the
sha256 of its blob's bytes and ``size`` its length. The MLX engine loads every tensor of every
``application/vnd.ollama.image.tensor`` blob, once per digest, taking tensor names from the blob headers; the
layer ``name`` (the tensor, or an expert group's prefix) is informational.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core import rules
from ..core.untrusted import loads
from ..errors import FormatError, InvalidValueError
from ..formats.base import map_untracked, open_regular, real_path
from ..formats.ollama.schema import (
    DIGEST,
    MEDIA_CONFIG,
    MEDIA_JSON,
    MEDIA_TENSOR,
    Layer,
    Manifest,
    parse_manifest,
    split_name,
)
from ..quants.mlx import quant_types
from ..validation.issue import Issue, parse_then_check
from .fileio import write_atomic
from .safetensors_file import SafetensorsFile, SafetensorsTensor, TensorMap, from_bytes


# -- paths -----------------------------------------------------------------------------------------------
def default_root() -> Path:
    return Path(os.environ.get("OLLAMA_MODELS") or Path.home() / ".ollama" / "models")


def split_model(model: str) -> tuple[str, str, str, str]:
    """``[host/][namespace/]model[:tag]`` → (host, namespace, model, tag) with Ollama's defaults, each part checked
    by Ollama's grammar (``formats.ollama.schema.split_name``): ValueError for a name that is no Ollama name."""
    return split_name(model)


def manifest_path(root: str | os.PathLike[str], model: str) -> Path:
    """``<root>/manifests/<host>/<namespace>/<model>/<tag>``: every part a checked name (``split_model``), so the
    path stays under ``<root>/manifests``."""
    host, namespace, name, tag = split_model(model)
    return Path(root) / "manifests" / host / namespace / name / tag


def blob_path(root: str | os.PathLike[str], digest: str) -> Path:
    """``<root>/blobs/sha256-<hex>`` (the digest's colon becomes a dash)."""
    m = DIGEST.match(digest)
    if not m:
        raise rules.MANIFEST_DIGEST.error(f"digest {digest!r} is not sha256:<64 hex digits>")
    return Path(root) / "blobs" / f"sha256-{m.group(1).lower()}"  # one name per blob, whatever the digest's case


def root_of(manifest_file: str | os.PathLike[str]) -> Path:
    """The models root above a manifest file (the parent of its ``manifests`` folder)."""
    p = real_path(manifest_file)
    for parent in p.parents:
        if parent.name == "manifests":
            return parent.parent
    raise rules.MANIFEST_LOCATION.error(f"{manifest_file} is not inside a models root's manifests/ folder, so its blobs cannot be found")


def sha256_of(data: Any) -> str:
    """The hex sha256 of a buffer (a memory map is hashed in place)."""
    return hashlib.sha256(data).hexdigest()


def verify_blob(view: memoryview, layer: Layer, path: str = "") -> None:
    """Raise unless the blob's length is the layer's size and its sha256 the layer's digest (a local blob and a
    registry's, ``api.openers.ollama_registry``, go through this one check)."""
    check_blob_size(len(view), layer, path)
    got = sha256_of(view)
    if got != layer.hex:
        raise rules.BLOB_DIGEST.error(f"blob {path or layer.digest} has sha256 {got}; the manifest says {layer.hex}", path=layer.name or "")


def check_blob_size(size: int, layer: Layer, path: str = "") -> None:
    """Raise unless a blob of ``size`` bytes has the layer's size (known before its bytes are read)."""
    if size != layer.size:
        raise rules.BLOB_SIZE.error(f"blob {path or layer.digest} has {size} bytes; the manifest says {layer.size}", path=layer.name or "")


# -- the model -------------------------------------------------------------------------------------------
@dataclass
class OllamaModel:
    """A model opened from a manifest: ``tensors`` from every tensor blob, ``metadata`` (the config blob's
    JSON), ``blobs`` (digest → SafetensorsFile), ``json_files`` (layer name → parsed JSON)."""

    path: str
    manifest: Manifest
    root: Path
    blobs: dict[str, SafetensorsFile] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    json_files: dict[str, Any] = field(default_factory=dict)
    tensors: Mapping[str, SafetensorsTensor] = field(default_factory=dict)
    format: str = "ollama"

    def close(self) -> None:
        for b in self.blobs.values():
            b.close()

    def __enter__(self) -> OllamaModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _read_json(view: memoryview, what: str, kind: type = object) -> Any:
    """A JSON blob through the safe reader; ``kind`` dict demands an object (the config blob is one)."""
    try:
        value = loads(view, what=what)
    except InvalidValueError as e:
        raise rules.BLOB_JSON.error(e.message, offset=e.offset) from None
    if not isinstance(value, kind):
        raise rules.BLOB_JSON.error(f"{what} is a JSON {type(value).__name__}, not an object")
    return value


def read_manifest(manifest_file: str | os.PathLike[str]) -> Manifest:
    """Parse a manifest file (a regular file only: a FIFO or a directory is refused before it is opened)."""
    with open_regular(manifest_file) as f:
        return parse_manifest(f.read())


def open_model(
    manifest_file: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None, verify: bool = True, strict: bool = True
) -> OllamaModel:
    """Open the model a manifest describes: verify each blob (size and sha256) when ``verify``, load every
    tensor blob once per digest, and merge their logical tensors (a name in two blobs is a DuplicateError)."""
    manifest = read_manifest(manifest_file)
    base = Path(root) if root is not None else root_of(manifest_file)
    model = OllamaModel(os.fspath(manifest_file), manifest, base)
    views: dict[str, memoryview] = {}

    def blob(layer: Layer) -> memoryview:
        if layer.digest not in views:
            p = blob_path(base, layer.digest)
            try:
                view = map_untracked(p)  # one descriptor at most per blob, held by its map: a model has one blob per tensor
            except FileNotFoundError:
                raise rules.BLOB_MISSING.error(f"blob {p} is missing", path=layer.name or layer.digest) from None
            except FormatError as e:  # a directory, a FIFO, a device at the blob's path
                raise rules.BLOB_NOT_REGULAR.error(e.message, path=layer.name or layer.digest) from None
            except OSError as e:  # a symlink loop, no permission: the model's blob, not the manifest, is bad
                raise rules.BLOB_UNREADABLE.error(f"blob {p} cannot be read ({e.strerror or e})", path=layer.name or layer.digest) from None
            if verify:
                verify_blob(view, layer, os.fspath(p))
            views[layer.digest] = view
        return views[layer.digest]

    model.metadata = _read_json(blob(manifest.config), "the config blob", dict)
    for layer in manifest.layers:
        if layer.media_type == MEDIA_JSON:
            model.json_files[layer.name or layer.digest] = _read_json(blob(layer), f"layer {layer.name}")
    join_tensor_blobs(
        model,
        manifest,
        _model_quant_type(model.metadata),
        lambda layer, hint: from_bytes(blob(layer), strict=strict, path=os.fspath(blob_path(base, layer.digest)), hint=hint),
    )
    return model


def join_tensor_blobs(
    model: Any, manifest: Any, hint: str | None, open_blob: Any, passthrough: tuple[type[BaseException], ...] = ()
) -> None:
    """Open every tensor blob of ``manifest`` with ``open_blob(layer, hint)`` and show them as one tensor set in
    ``model.tensors``; local and remote models share it. A blob's FormatError names its layer (``passthrough``
    errors, e.g. a remote read's, go through as they are); a tensor in two blobs is a DuplicateError."""
    merged: dict[str, SafetensorsTensor] = {}
    origin: dict[str, str] = {}
    for layer in manifest.tensor_layers:
        if layer.digest in model.blobs:
            continue
        try:
            f = open_blob(layer, hint)
        except passthrough:
            raise
        except FormatError as e:
            raise type(e)(e.rule, f"blob of layer {layer.name or layer.digest}: {e.message}", path=e.path, offset=e.offset) from None
        if hint is None and f.quant_type:
            hint = f.quant_type  # Ollama: the first blob with a quant_type sets the model-wide default
        model.blobs[layer.digest] = f
        for name, t in f.tensors.items():
            if name in merged:
                raise rules.TENSOR_DUPLICATE.error(
                    f"tensor {name!r} is in the blobs of layers {origin[name]!r} and {layer.name!r}", path=name
                )
            merged[name] = t
            origin[name] = layer.name or layer.digest
    model.tensors = TensorMap(merged)


def _model_quant_type(config: Any) -> str | None:
    ft = config.get("file_type") if isinstance(config, dict) else None

    return ft.lower() if isinstance(ft, str) and ft.lower() in quant_types() else None


def load_manifest(path: str | os.PathLike[str], *, strict: bool = True, **_: Any) -> OllamaModel:
    """The registry loader: ``load(manifest_file)``."""
    return open_model(path, strict=strict)


# -- writing a model store -------------------------------------------------------------------------------
def write_blob(
    root: str | os.PathLike[str], data: bytes, media_type: str, name: str | None = None, *, durable: bool | None = None
) -> Layer:
    """Store ``data`` as a blob under its sha256 (once: an existing blob is kept) and return its layer
    (``durable``: see ``fileio.durability``)."""
    digest = "sha256:" + sha256_of(data)
    p = blob_path(root, digest)
    p.parent.mkdir(parents=True, exist_ok=True)
    if not _holds(p, digest):  # a blob already there is kept only when it is a regular file with these bytes
        write_atomic(p, lambda f: f.write(data), durable=durable)
    return Layer(media_type, digest, len(data), name)


def _holds(path: Path, digest: str) -> bool:
    """Whether ``path`` is a regular file (not a link) whose sha256 is ``digest``: what a store may keep as it is.
    Anything else there (a different file, a link elsewhere) is replaced; a FIFO or a device is refused by the write."""
    try:
        if path.is_symlink() or not path.is_file():
            return False
        return "sha256:" + sha256_of(map_untracked(path)) == digest
    except (OSError, FormatError):
        return False


def write_model(
    root: str | os.PathLike[str],
    model: str,
    tensor_blobs: list[tuple[str, bytes]],
    config: Mapping[str, Any],
    json_files: Mapping[str, Any] | None = None,
    *,
    durable: bool | None = None,
) -> Path:
    """Write blobs and a manifest for ``model`` (``name[:tag]``) under ``root``; returns the manifest path
    (``durable``: see ``fileio.durability``)."""
    target = store_manifest_path(root, model)  # the name checked before any blob is written
    layers = [write_blob(root, data, MEDIA_TENSOR, name, durable=durable) for name, data in tensor_blobs]
    for name, obj in (json_files or {}).items():
        layers.append(write_blob(root, json.dumps(obj, separators=(",", ":")).encode(), MEDIA_JSON, name, durable=durable))
    cfg = write_blob(root, json.dumps(dict(config), separators=(",", ":")).encode(), MEDIA_CONFIG, durable=durable)
    manifest = Manifest(cfg, tuple(layers))
    target.parent.mkdir(parents=True, exist_ok=True)
    store_manifest_path(root, model)  # again, now that its folders exist: none of them a link out of the store
    write_atomic(target, lambda f: f.write(manifest.to_bytes()), read_manifest, durable=durable)
    return target


def store_manifest_path(root: str | os.PathLike[str], model: str) -> Path:
    """Where ``write_model`` puts the manifest of ``model``, refused (``output.name``) unless the name is an Ollama
    name part by part (``split_model``), the path stays under ``<root>/manifests`` once every link that already
    exists is followed, and no other manifest there has the same name but for case (Ollama compares names
    case-insensitively; a case-insensitive file system would give both one file)."""
    try:
        target = manifest_path(root, model)
    except ValueError as e:
        raise rules.OUTPUT_NAME.error(f"--model {model[:80]!r}: {e}") from None
    base = real_path(Path(root) / "manifests")
    if not real_path(target).is_relative_to(base):
        raise rules.OUTPUT_NAME.error(f"--model {model!r}: {target} leads out of {base} (a symbolic link on the way)")
    folder = Path(root) / "manifests"
    for part in target.relative_to(folder).parts:
        try:
            twins = [e.name for e in os.scandir(folder) if e.name != part and e.name.casefold() == part.casefold()]
        except OSError:
            break  # the rest does not exist yet: nothing to collide with
        if twins:
            raise rules.OUTPUT_NAME.error(f"--model {model!r}: {folder / twins[0]} differs from {part!r} only by case")
        folder = folder / part
    return target


def validate_manifest_file(path: str | os.PathLike[str], profile: str = "spec") -> list[Issue]:
    """The manifest's rules, then its blobs' (``open_model`` knows where they are and checks each)."""

    def open_and_close() -> None:
        with open_model(path, strict=True):
            pass

    return parse_then_check(open_and_close, lambda _: [])
