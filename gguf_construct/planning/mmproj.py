"""A multimodal projector's memory (``--mmproj``) as llama.cpp's multimodal loader allocates it (libmtmd,
tools/mtmd/clip.cpp; the rules are ``schema/memory.json`` ``clip``).

A projector file (``general.architecture = clip``) holds a vision encoder, an audio encoder or both; libmtmd
makes one context per encoder. Each loads the tensors it asks for into one buffer on its device, padded to the
buffer's alignment and in the file's type, and reserves at warmup the compute graph of one image of
``clip.vision.image_size`` square (a dynamic-resolution projector: of its own warmup size; an audio encoder: of
3000 mel frames) (:mod:`.compute.clip`). The device is the first GPU unless ``--no-mmproj-offload``
(``use_gpu = false``) keeps it on the CPU. clip.cpp's own memory counter (``clip_get_mem_usage``) adds the tensors'
sizes without the buffer's padding: ``weights_nbytes`` is that count, ``weights_bytes`` the buffer.

The header is checked as clip.cpp reads it: a key of another type than it reads aborts llama.cpp (its
``gguf_get_val_*`` asserts), sizes that overflow its ``int`` or divide by zero, and tensors it requires, are
refused (rule ``plan.model``). The compute buffer is planned for the projector types with a graph in
``planning.compute.clip``; for the others the weights are planned and a note says the compute buffer is not.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import FormatError, PlanError
from .cache import aligned
from .compute.clip import GRAPHS, EncoderShape, encoder_compute_bytes
from .shape import TensorSpan, _spans, memory_table, refused, shown

__all__ = ["Encoder", "ProjectorPlan", "encoders", "plan_projector"]

_MODALITIES = ("vision", "audio")


def _rules() -> Mapping[str, Any]:
    return memory_table().clip


@dataclass(frozen=True)
class Encoder:
    """One encoder of a projector file as clip.cpp loads it: its modality and projector type, the sizes its graph
    is built from, the tensors it loads and the bytes of its weights buffer."""

    modality: str
    projector: str
    #: the side of the image the warmup graph is built for (for a dynamic-resolution projector, its warmup size)
    image_size: int
    patch_size: int
    n_embd: int
    n_ff: int
    n_head: int
    n_layer: int
    merge: int
    ffn_op: str
    tensors: tuple[TensorSpan, ...]
    #: the width of the embeddings it hands the text model (clip_n_mmproj_embd), or None where not known here
    n_embd_out: int | None
    #: an audio encoder's mel bins and the mel frames of its warmup input (0 for a vision encoder)
    n_mel: int = 0
    n_frames: int = 0
    #: window attention's period (Qwen2.5-VL's clip.vision.n_wa_pattern; 0: none) and clip.{modality}.projection_dim
    window: int = 0
    projection_dim: int = 0

    @property
    def weights_bytes(self) -> int:
        """The weights buffer: each tensor padded to the buffer's alignment."""
        return sum(aligned(t.nbytes) for t in self.tensors)

    @property
    def weights_nbytes(self) -> int:
        """The tensors' own sizes, unpadded: what clip.cpp's memory counter (clip_get_mem_usage, llama-server's
        estimate for its --fit) adds up, a little less than the buffer it allocates."""
        return sum(t.nbytes for t in self.tensors)

    @property
    def graph(self) -> str | None:
        entry = _rules()["projectors"].get(self.projector)
        return entry["graph"] if entry else None

    def encoder_shape(self, flash_attn: bool) -> EncoderShape:
        """What :mod:`.compute.clip` builds the warmup graph from."""
        weights = {t.name: (t.type, t.shape) for t in self.tensors}
        return EncoderShape(
            self.graph or "",
            self.image_size,
            self.patch_size,
            self.n_embd,
            self.n_head,
            self.n_layer,
            self.merge,
            self.ffn_op,
            weights,
            flash_attn,
            self.n_mel,
            self.n_frames,
            self.window,
            self.projection_dim,
        )

    def compute_bytes(self, flash_attn: bool) -> int | None:
        """The compute buffer reserved at warmup, or None for a projector type whose graph is not modelled."""
        if self.graph not in GRAPHS:
            return None
        try:
            return encoder_compute_bytes(self.encoder_shape(flash_attn))
        except FormatError as e:
            raise refused("", f"mmproj {self.projector}: {e.message}") from None


class _Keys:
    """The projector's metadata read as clip.cpp reads it (``get_u32``, ``get_f32``, ``get_bool``, ``get_string``)."""

    def __init__(self, md: Any) -> None:
        self.md = md
        self.types = _rules()["keys"]

    def _kind(self, key: str) -> str:
        kind = self.types.get(key)
        if kind is None:
            for modality in _MODALITIES:
                kind = kind or self.types.get(key.replace(f"clip.{modality}.", "clip.{modality}.", 1))
        if kind is None:
            raise KeyError(key)
        return kind

    def get(self, key: str, default: Any = None) -> Any:
        """The value of ``key`` (``default`` when absent), refused when its type is not the one clip.cpp reads."""
        if key not in self.md:
            return default
        kind, value = self._kind(key), self.md[key]
        label = self.md.type_of(key) if hasattr(self.md, "type_of") else None
        ok = {
            "u32": label in (None, "u32") and isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**32,
            "f32": label in (None, "f32") and isinstance(value, float),
            "bool": label in (None, "bool") and isinstance(value, bool),
            "str": label in (None, "str") and isinstance(value, str),
        }[kind]
        if not ok:
            raise refused(
                key,
                f"mmproj key {key} is {label or type(value).__name__} {shown(value)}, not the {kind} clip.cpp reads "
                f"(its gguf_get_val_{kind} asserts the type and aborts the process)",
            )
        return value

    def size(self, key: str, default: int | None = None) -> int:
        """A u32 size clip.cpp keeps in an ``int``: refused past INT_MAX (it would turn negative)."""
        value = self.get(key, default)
        if value is None:
            raise refused(key, f"mmproj key {key} is missing")
        if value > int(_rules()["int_max"]):
            raise refused(key, f"mmproj key {key} = {shown(value)} overflows clip.cpp's int")
        return int(value)


_LAYER_NAME = r"blk\.(0|[1-9][0-9]{0,9})\.([a-z0-9_]+\.(?:weight|bias))"


def _layer_tensors(spans: Sequence[TensorSpan], prefix: str, n_layer: int) -> dict[str, set[int]]:
    """For each ``{stem}.{weight|bias}`` of the encoder's layers, the layers below ``n_layer`` that have it (read from
    the names present: a header's block count alone never sizes a loop)."""
    pattern = re.compile(re.escape(prefix) + _LAYER_NAME)
    found: dict[str, set[int]] = {}
    for t in spans:
        m = pattern.fullmatch(t.name)
        if m and int(m.group(1)) < n_layer:
            found.setdefault(m.group(2), set()).add(int(m.group(1)))
    return found


def _first_missing(present: set[int], n: int) -> int | None:
    """The smallest layer in 0..n-1 not in ``present`` (a subset of that range), or None."""
    if len(present) == n:
        return None
    for i, layer in enumerate(sorted(present)):
        if layer != i:
            return i
    return len(present)


def _loaded(spans: Sequence[TensorSpan], modality: str, projector: str, n_layer: int) -> tuple[TensorSpan, ...]:
    """The tensors clip.cpp asks for: the encoder's own, each of its layers', and the projector's. A projector type
    without an entry in the table is taken to load every tensor of its modality (``v.``/``mm.`` for vision,
    ``a.``/``mm.a.`` for audio)."""
    rules = _rules()
    entry = rules["projectors"].get(projector)
    prefix = rules["prefixes"][modality]
    if entry is None:
        audio = ("a.", "mm.a.")
        return tuple(t for t in spans if t.name.startswith(audio) == (modality == "audio") and t.name.startswith((prefix, "mm.")))
    wanted = set(rules["model_tensors"][modality]) | set(entry["tensors"])
    stems = {f"{stem}.{part}" for stem in rules["layer_tensors"] for part in ("weight", "bias")}
    pattern = re.compile(re.escape(prefix) + _LAYER_NAME)

    def used(name: str) -> bool:
        m = pattern.fullmatch(name)
        return m is not None and int(m.group(1)) < n_layer and m.group(2) in stems

    return tuple(t for t in spans if t.name in wanted or used(t.name))


def _encoder(keys: _Keys, spans: Sequence[TensorSpan], modality: str) -> Encoder:
    """The encoder of ``modality``, its header checked as clip.cpp's load_hparams and load_tensors check it."""
    projector = keys.get(f"clip.{modality}.projector_type") or keys.get("clip.projector_type")
    if not projector:
        raise refused("clip.projector_type", "mmproj has no clip.projector_type: clip.cpp cannot tell its projector")
    if projector not in _rules()["projector_types"]:
        raise refused("clip.projector_type", f"mmproj projector type {shown(projector)} is not one clip.cpp knows")
    entry = _rules()["projectors"].get(projector)
    audio_type = projector in _rules()["audio_projector_types"]
    if (entry is not None and entry["modality"] != modality) or (audio_type and modality == "vision"):
        raise refused("clip.projector_type", f"mmproj projector {shown(projector)} is not a {modality} projector")
    k = f"clip.{modality}"
    n_embd, n_head = keys.size(f"{k}.embedding_length"), keys.size(f"{k}.attention.head_count")
    n_layer, n_ff = keys.size(f"{k}.block_count"), keys.size(f"{k}.feed_forward_length")
    projection_dim = keys.size(f"{k}.projection_dim", 0)
    keys.get(f"{k}.attention.layer_norm_epsilon")
    if n_head == 0 or n_embd % n_head:
        raise refused(f"{k}.attention.head_count", f"mmproj has {n_head} heads for width {n_embd}: clip.cpp divides the width by them")
    image_size = patch_size = n_mel = n_frames = 0
    merge = int(entry.get("merge", 1)) if entry else 1
    if modality == "audio":
        n_mel, n_frames = keys.size("clip.audio.num_mel_bins", 0), int(_rules()["warmup_audio_frames"])
        if not 0 < n_mel <= int(_rules()["mel_bins_max"]):
            raise refused(
                "clip.audio.num_mel_bins", f"mmproj has {n_mel} mel bins, not 1 to {_rules()['mel_bins_max']}: clip.cpp refuses it"
            )
        if entry and entry.get("merge_key"):
            merge = keys.size(entry["merge_key"], merge)
            if merge > int(_rules()["merge_max"]):
                raise refused(entry["merge_key"], f"mmproj stacks {merge} frames, past {_rules()['merge_max']}")
    if modality == "vision":
        image_size, patch_size = keys.size("clip.vision.image_size"), keys.size("clip.vision.patch_size")
        if not 0 < patch_size <= int(_rules()["patch_size_max"]):
            raise refused("clip.vision.patch_size", f"mmproj patch size {patch_size} is not 1 to {_rules()['patch_size_max']}")
        if image_size < patch_size:
            raise refused("clip.vision.image_size", f"mmproj images of {image_size} are smaller than a patch ({patch_size})")
        n_patches = (image_size // patch_size) ** 2
        if n_patches > int(_rules()["int_max"]):
            raise refused("clip.vision.image_size", f"mmproj images of {image_size} make {shown(n_patches)} patches, past clip.cpp's int")
        merge_key = entry.get("merge_key") if entry else "clip.vision.projector.scale_factor"
        if merge_key:
            merge = keys.size(merge_key, merge)
            if entry and not int(entry["merge_min"]) <= merge <= int(_rules()["merge_max"]):
                raise refused(
                    merge_key, f"mmproj {projector} merges patches by {merge}, not {entry['merge_min']} to {_rules()['merge_max']}"
                )
        if entry and "warmup_tokens_side" in entry:  # dynamic resolution: warmed up at a size of its own
            image_size = int(entry["warmup_tokens_side"]) * patch_size * merge
            if image_size > int(_rules()["int_max"]) or (image_size // patch_size) ** 2 > int(_rules()["int_max"]):
                raise refused("clip.vision.patch_size", f"mmproj patch size {patch_size} makes a warmup image past clip.cpp's int")
    prefix = _rules()["prefixes"][modality]
    by_name = {t.name: t for t in spans}
    layers = _layer_tensors(spans, prefix, n_layer)
    for stem in _rules()["layer_required"]:
        missing = _first_missing(layers.get(stem, set()), n_layer)
        if missing is not None:
            raise refused(
                f"{k}.block_count", f"mmproj has {n_layer} layers but no tensor {prefix}blk.{missing}.{stem}: clip.cpp refuses it"
            )
    tensors = _loaded(spans, modality, projector, n_layer)
    if entry:
        for name in entry["tensors"][:1]:
            if name not in by_name:
                raise refused("clip.projector_type", f"mmproj {projector} projector has no tensor {name}: clip.cpp refuses it")
        for name in entry.get("forbidden", ()):
            if name in by_name:
                raise refused("clip.projector_type", f"mmproj {projector} projector has a tensor {name}: clip.cpp asserts it has none")
    gelu = keys.get("clip.use_gelu", False)
    silu = keys.get("clip.use_silu", False)
    ffn_op = "GELU" if gelu else ("SILU" if silu else "GELU_QUICK")
    ffn_op = entry.get("ffn_op", ffn_op) if entry else ffn_op
    out = by_name.get(entry["output"]) if entry else None
    axis = int(entry.get("output_axis", 0)) if entry else 0
    width = out.shape[axis] if out and len(out.shape) > axis else None
    window = keys.size(entry["window_key"], 0) if entry and entry.get("window_key") else 0
    return Encoder(
        modality,
        projector,
        image_size,
        patch_size,
        n_embd,
        n_ff,
        n_head,
        n_layer,
        merge,
        ffn_op,
        tensors,
        width,
        n_mel,
        n_frames,
        window,
        projection_dim,
    )


def encoders(f: Any) -> list[Encoder]:
    """The encoders of an opened projector file (vision first), checked as clip.cpp checks them. clip.cpp goes by
    the clip.has_*_encoder keys, not by general.architecture: a file with neither (a language model given as
    ``--mmproj``) is refused."""
    md = f.metadata
    keys = _Keys(md)
    found = [m for m in _MODALITIES if keys.get(f"clip.has_{m}_encoder", False)]
    if not found:
        arch = md.get("general.architecture")
        if arch != _rules()["architecture"]:
            raise refused(
                "general.architecture",
                f"the mmproj file's architecture is {shown(arch)}, not 'clip', and it has no clip encoder: it is not a "
                "multimodal projector (a model given as --mmproj?)",
            )
        raise refused("clip.has_vision_encoder", "the mmproj file has neither a vision nor an audio encoder: clip.cpp refuses it")
    for modality in found:
        for key in _rules()["read_always"][modality]:
            keys.get(key)
    spans = _spans(f)
    return [_encoder(keys, spans, m) for m in found]


@dataclass
class ProjectorPlan:
    """The projector's buffers: per encoder its weights and compute bytes, the device holding them ('CPU' or a
    device name) and notes. ``compute_bytes`` is None when some encoder's graph is not modelled."""

    source: str
    encoders: list[Encoder]
    flash_attn: bool
    device: str = "CPU"
    notes: list[str] = field(default_factory=list)
    #: each encoder's compute buffer (None where not modelled), planned once
    computes: list[int | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.computes:
            self.computes = [e.compute_bytes(self.flash_attn) for e in self.encoders]

    @property
    def weights_bytes(self) -> int:
        return sum(e.weights_bytes for e in self.encoders)

    @property
    def weights_nbytes(self) -> int:
        return sum(e.weights_nbytes for e in self.encoders)

    @property
    def compute_bytes(self) -> int | None:
        parts = self.computes
        return None if any(p is None for p in parts) else sum(p or 0 for p in parts)

    @property
    def total_bytes(self) -> int:
        """Weights and compute (a compute buffer not modelled counts as 0: see ``notes``)."""
        return self.weights_bytes + (self.compute_bytes or 0)

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.source,
            "device": self.device,
            "flash_attn": self.flash_attn,
            "weights_bytes": self.weights_bytes,
            "weights_unpadded_bytes": self.weights_nbytes,
            "compute_bytes": self.compute_bytes,
            "total_bytes": self.total_bytes,
            "encoders": [
                {
                    "modality": e.modality,
                    "projector_type": e.projector,
                    "image_size": e.image_size,
                    "patch_size": e.patch_size,
                    "n_mel": e.n_mel,
                    "n_frames": e.n_frames,
                    "n_layer": e.n_layer,
                    "n_embd": e.n_embd,
                    "n_embd_out": e.n_embd_out,
                    "tensors": len(e.tensors),
                    "weights_bytes": e.weights_bytes,
                    "compute_bytes": compute,
                }
                for e, compute in zip(self.encoders, self.computes, strict=True)
            ],
            "notes": self.notes,
        }


def plan_projector(
    source: str | os.PathLike[str] | Any,
    *,
    flash_attn: str = "auto",
    n_embd_text: int | None = None,
    checkpoint: Callable[[], None] = lambda: None,
) -> ProjectorPlan:
    """The projector at ``source`` (a path, URL or opened file) as libmtmd loads it beside a text model of width
    ``n_embd_text`` (mtmd refuses a projector whose output width differs). ``flash_attn`` is the context's
    setting, which libmtmd takes over ('auto' turns it on where the device supports it: the CPU does)."""
    from ..api.registry import load

    try:
        if hasattr(source, "metadata") and hasattr(source, "tensors"):
            found = encoders(source)
        else:
            f = load(source, format="gguf", strict=False)
            try:
                checkpoint()
                found = encoders(f)
            finally:
                f.close()
    except FormatError as refusal:
        if not isinstance(refusal, PlanError):  # the reader's refusal: say which of the two files it is about
            refusal.message = f"the mmproj file: {refusal.message}"
        raise
    checkpoint()
    p = ProjectorPlan(str(getattr(source, "path", None) or source), found, flash_attn != "off")
    for e in found:
        if n_embd_text is not None and e.n_embd_out is not None and e.n_embd_out != n_embd_text:
            raise refused(
                "clip.projector_type",
                f"the mmproj's {e.modality} projector makes embeddings of {e.n_embd_out} values, the text model takes "
                f"{n_embd_text}: libmtmd refuses the pair (a projector of another model?)",
            )
        if e.graph not in GRAPHS:
            p.notes.append(
                f"the compute buffer of the {shown(e.projector)} {e.modality} projector is not modelled: its weights are planned"
            )
    checkpoint()
    return p
