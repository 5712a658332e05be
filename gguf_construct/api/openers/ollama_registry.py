"""Ollama models from a registry (``ollama://``): the manifest from ``/v2/{ns}/{model}/manifests/{tag}``, each blob
from ``/v2/{ns}/{model}/blobs/{digest}``.

A registry's model goes through the checks of a local one (``api.ollama_model``): the manifest through
``parse_manifest``, the config and JSON layers through its untrusted-JSON reader (the config must be an object),
each blob's size and digest through ``check_blob_size`` and ``verify_blob``. The config and JSON blobs are read
whole and checked at once; a model or tensor blob's size is checked when it is opened and its digest as soon as
all its bytes have been fetched (reading every tensor, ``convert``, ``hash``), or up front with ``verify=True``
(which reads them all). A GGUF model blob (``application/vnd.ollama.image.model``, what ``ollama pull`` stores)
opens as a GGUFFile; safetensors tensor blobs (the MLX engine's layout) open as one OllamaModel, as
``api.ollama_model.open_model`` does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...core import rules
from ...core.limits import breach, limit
from ...errors import FormatError, RemoteError
from ...formats.ollama.schema import MEDIA_JSON, parse_manifest
from ...sources.budget import budgeted
from ...sources.http import HttpFile, open_http
from ...sources.options import RemoteOptions, options
from ...sources.urls import OllamaName, ollama_name
from ...validation import Issue
from ..gguf_file import GGUFFile, gguf_from_source
from ..ollama_model import OllamaModel, _model_quant_type, _read_json, check_blob_size, join_tensor_blobs, verify_blob
from .over_source import safetensors_from_source

MEDIA_MODEL = "application/vnd.ollama.image.model"
MANIFEST_ACCEPT = "application/vnd.docker.distribution.manifest.v2+json"
#: a manifest larger than this is refused
MAX_MANIFEST = 4 << 20


def fetch_manifest(name: OllamaName, opts: RemoteOptions) -> bytes:
    src = open_http(
        name.manifest_url, opts.replace(first_chunk=MAX_MANIFEST, max_file_bytes=MAX_MANIFEST, download=True), {"Accept": MANIFEST_ACCEPT}
    )
    if src.size > MAX_MANIFEST:
        raise rules.REMOTE_MANIFEST.error(f"the manifest is larger than {MAX_MANIFEST} bytes", url=name.manifest_url)
    return bytes(src.ensure(0, src.size))


def load_ollama(
    source: str, *, strict: bool = True, hint: str | None = None, verify: bool = False, opts: RemoteOptions | None = None
) -> GGUFFile | OllamaModel:
    opts = budgeted(opts or options())
    name = ollama_name(source)
    manifest = parse_manifest(fetch_manifest(name, opts))

    def blob(layer: Any, whole: bool = False) -> Any:
        url = name.blob_url("sha256:" + layer.hex)  # registries address a blob by its canonical digest

        def check(view: memoryview) -> None:
            verify_blob(view, layer, url)

        src = HttpFile(url, opts, on_complete=check).open()
        check_blob_size(src.size, layer, url)
        if whole or verify:
            src.ensure(0, src.size)  # the digest is checked once every byte is in
        return src

    def json_blob(layer: Any, what: str, kind: type = object) -> Any:
        if layer.size > limit("header_bytes"):  # what the reader would refuse, refused before it is fetched
            raise breach("header_bytes", f"{what} of {layer.size} bytes")
        return _read_json(blob(layer, whole=True).view(), what, kind)

    metadata = json_blob(manifest.config, "the config blob", dict)
    json_files = {
        layer.name or layer.digest: json_blob(layer, f"layer {layer.name}") for layer in manifest.layers if layer.media_type == MEDIA_JSON
    }
    models = [layer for layer in manifest.layers if layer.media_type == MEDIA_MODEL]
    if models:
        f = gguf_from_source(blob(models[0]), strict=strict)
        f.manifest = manifest
        return f
    model = OllamaModel(source, manifest, Path("."))
    model.metadata = metadata
    model.json_files.update(json_files)
    join_tensor_blobs(
        model,
        manifest,
        hint or _model_quant_type(model.metadata),
        lambda layer, h: safetensors_from_source(blob(layer), strict=strict, hint=h),
        passthrough=(RemoteError,),
    )
    return model


def validate_ollama(source: str, opts: RemoteOptions | None = None) -> list[Any]:
    """A registry model's manifest, config, blob sizes and every digest (this reads every blob whole)."""
    try:
        load_ollama(source, strict=True, verify=True, opts=opts)
    except FormatError as e:
        return [Issue.from_error(e)]
    return []
