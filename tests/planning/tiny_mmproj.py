"""Tiny multimodal projector files (``general.architecture = clip``) and a text model for them, as llama.cpp's
multimodal loader (tools/mtmd/clip.cpp) reads them: the ``clip.*`` keys with the types it reads them as and the
``v.*``/``mm.*`` tensors each projector type's graph uses. Saved once per test session."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from functools import cache
from pathlib import Path

import numpy as np

from gguf_construct.api.gguf_file import GGUFFile, new
from gguf_construct.core.tables import GGML_TYPES
from gguf_construct.quants.quantize import quantize
from tests.planning.tiny import tmp_dir

_ZEROS: ContextVar[bool] = ContextVar("tiny_mmproj_zeros", default=False)


def zero_filled(builder: Callable[..., GGUFFile], **sizes) -> GGUFFile:
    """``builder(**sizes)`` with every tensor's data zero bytes made as the file is written (or left a hole by
    tests.sparse_models.write_sparse): a projector of a released model's widths in a second."""
    token = _ZEROS.set(True)
    try:
        return builder(**sizes)
    finally:
        _ZEROS.reset(token)


#: the vocabulary of the text model: three specials and the 256 byte tokens llama.cpp's SPM tokenizer falls back to
_TOKENS = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]


def text_model(n_embd: int, n_layer: int = 1, n_head: int = 4, dtype=np.float16) -> GGUFFile:
    """A small llama model of width ``n_embd`` (the projector's output width must equal it), with a byte vocabulary
    so that mtmd can tokenize the text around an image."""
    rng = np.random.default_rng(1)
    f = new()
    m = f.metadata
    m["general.architecture"] = "llama"
    for key, value in (
        ("context_length", 256),
        ("embedding_length", n_embd),
        ("block_count", n_layer),
        ("feed_forward_length", n_embd),
        ("rope.dimension_count", n_embd // n_head),
        ("attention.head_count", n_head),
        ("attention.head_count_kv", n_head),
    ):
        m[f"llama.{key}"] = value
    m["llama.attention.layer_norm_rms_epsilon"] = 1e-5
    m["tokenizer.ggml.model"] = "llama"
    m["tokenizer.ggml.tokens"] = _TOKENS
    m["tokenizer.ggml.scores"] = [0.0] * len(_TOKENS)
    m["tokenizer.ggml.token_type"] = [2, 3, 3] + [6] * 256
    f.tensors.add("token_embd.weight", (rng.standard_normal((len(_TOKENS), n_embd)) * 0.1).astype(dtype))
    for i in range(n_layer):
        f.tensors.add(f"blk.{i}.attn_norm.weight", np.ones(n_embd, np.float32))
        for name in ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"):
            f.tensors.add(f"blk.{i}.{name}.weight", (rng.standard_normal((n_embd, n_embd)) * 0.1).astype(dtype))
        f.tensors.add(f"blk.{i}.ffn_norm.weight", np.ones(n_embd, np.float32))
    f.tensors.add("output_norm.weight", np.ones(n_embd, np.float32))
    f.tensors.add("output.weight", (rng.standard_normal((len(_TOKENS), n_embd)) * 0.1).astype(dtype))
    return f


class _Projector:
    """A projector file being built: keys typed as clip.cpp reads them, tensors in ggml order (ne0 first)."""

    def __init__(self, projector: str, dtype, matrices: str | None = None, prefix: str = "v.") -> None:
        self.f = new()
        self.rng = np.random.default_rng(0)
        self.dtype = dtype
        self.matrices = matrices  # a ggml type the encoder blocks' matrices are quantized to (q8_0, q4_0), or None
        self.prefix = prefix
        m = self.f.metadata
        m["general.architecture"] = "clip"
        m.set("clip.projector_type", projector, "str")

    def key(self, key: str, value, kind: str) -> None:
        self.f.metadata.set(key, value, kind)

    def tensor(self, name: str, *ne: int, dtype=None) -> None:
        """A tensor of ggml shape ``ne`` (f32 for vectors unless told, the file's type for matrices)."""
        dt = dtype if dtype is not None else (np.float32 if len(ne) == 1 else self.dtype)
        if _ZEROS.get():
            kind = self.matrices if self.matrices and len(ne) == 2 and name.startswith(self.prefix + "blk.") else np.dtype(dt).name
            kind = {"float16": "f16", "float32": "f32"}.get(kind, kind)
            size = GGML_TYPES.lookup(kind).nbytes(ne[0]) * int(np.prod(ne[1:], dtype=np.int64))
            self.f.tensors.add(name, lambda: bytes(size), kind, ne)
            return
        data = (self.rng.standard_normal(ne[::-1]) * 0.02).astype(dt)
        if self.matrices and len(ne) == 2 and name.startswith(self.prefix + "blk."):
            self.f.tensors.add(name, quantize(data.astype(np.float32), self.matrices), self.matrices, ne)
        else:
            self.f.tensors.add(name, data)


def _vision(
    p: _Projector,
    n_embd: int,
    n_ff: int,
    n_layer: int,
    n_head: int,
    image: int,
    patch: int,
    proj_dim: int,
    positions: bool = True,
    patch_bias: bool = True,
) -> None:
    """The keys and the ViT tensors every vision projector has: patch and position embeddings, the blocks, post norm."""
    p.key("clip.has_vision_encoder", True, "bool")
    p.key("clip.use_gelu", True, "bool")
    for k, v in (
        ("image_size", image),
        ("patch_size", patch),
        ("embedding_length", n_embd),
        ("feed_forward_length", n_ff),
        ("block_count", n_layer),
        ("attention.head_count", n_head),
        ("projection_dim", proj_dim),
    ):
        p.key(f"clip.vision.{k}", v, "u32")
    p.key("clip.vision.attention.layer_norm_epsilon", 1e-6, "f32")
    p.key("clip.vision.image_mean", [0.5, 0.5, 0.5], "arr[f32]")
    p.key("clip.vision.image_std", [0.5, 0.5, 0.5], "arr[f32]")
    p.tensor("v.patch_embd.weight", patch, patch, 3, n_embd, dtype=p.dtype)
    if patch_bias:
        p.tensor("v.patch_embd.bias", n_embd)
    if positions:
        p.tensor("v.position_embd.weight", n_embd, (image // patch) ** 2, dtype=np.float32)  # added to f32 activations
    for i in range(n_layer):
        for name in ("attn_q", "attn_k", "attn_v", "attn_out"):
            p.tensor(f"v.blk.{i}.{name}.weight", n_embd, n_embd)
            p.tensor(f"v.blk.{i}.{name}.bias", n_embd)
        for name in ("ln1", "ln2"):
            p.tensor(f"v.blk.{i}.{name}.weight", n_embd)
            p.tensor(f"v.blk.{i}.{name}.bias", n_embd)
        p.tensor(f"v.blk.{i}.ffn_up.weight", n_embd, n_ff)
        p.tensor(f"v.blk.{i}.ffn_up.bias", n_ff)
        p.tensor(f"v.blk.{i}.ffn_down.weight", n_ff, n_embd)
        p.tensor(f"v.blk.{i}.ffn_down.bias", n_embd)
    p.tensor("v.post_ln.weight", n_embd)
    p.tensor("v.post_ln.bias", n_embd)


def gemma3(
    n_embd=64, n_ff=128, n_layer=2, n_head=4, image=64, patch=8, proj_dim=256, dtype=np.float16, matrices: str | None = None
) -> GGUFFile:
    """Gemma 3's SigLIP encoder and its projector: 2-D average pooling by 4 per side, RMS norm, input projection."""
    p = _Projector("gemma3", dtype, matrices)
    _vision(p, n_embd, n_ff, n_layer, n_head, image, patch, proj_dim)
    p.tensor("mm.input_projection.weight", proj_dim, n_embd)
    p.tensor("mm.soft_emb_norm.weight", n_embd)
    return p.f


def mlp(
    n_embd=64, n_ff=128, n_layer=2, n_head=4, image=64, patch=8, proj_dim=256, dtype=np.float16, matrices: str | None = None, cls=False
) -> GGUFFile:
    """LLaVA's CLIP encoder and its two-layer MLP projector (mm.0, GELU, mm.2)."""
    p = _Projector("mlp", dtype, matrices)
    _vision(p, n_embd, n_ff, n_layer, n_head, image, patch, proj_dim, positions=not cls)
    if cls:  # LLaVA-1.5's CLIP: a class token and a position for it
        p.tensor("v.class_embd", n_embd, dtype=np.float32)
        p.tensor("v.position_embd.weight", n_embd, (image // patch) ** 2 + 1, dtype=np.float32)
        p.tensor("v.pre_ln.weight", n_embd)
        p.tensor("v.pre_ln.bias", n_embd)
    p.tensor("mm.0.weight", n_embd, proj_dim)
    p.tensor("mm.0.bias", proj_dim)
    p.tensor("mm.2.weight", proj_dim, proj_dim)
    p.tensor("mm.2.bias", proj_dim)
    return p.f


def idefics3(
    n_embd=64, n_ff=128, n_layer=2, n_head=4, image=64, patch=8, proj_dim=256, dtype=np.float16, matrices: str | None = None, merge=None
) -> GGUFFile:
    """Idefics3's (SmolVLM's) SigLIP encoder and its projector: the patches shuffled ``merge`` x ``merge`` into one
    (clip.vision.projector.scale_factor; clip.cpp's default when absent), then one matrix (mm.model.fc)."""
    p = _Projector("idefics3", dtype, matrices)
    _vision(p, n_embd, n_ff, n_layer, n_head, image, patch, proj_dim)
    if merge is not None:
        p.key("clip.vision.projector.scale_factor", merge, "u32")
    factor = merge or 3
    p.tensor("mm.model.fc.weight", n_embd * factor * factor, proj_dim)
    return p.f


def qwen2a(
    n_embd=64,
    n_ff=128,
    n_layer=2,
    n_head=4,
    n_mel=16,
    n_pos=1500,
    proj_dim=256,
    dtype=np.float16,
    matrices: str | None = None,
    stack: int = 0,
    hidden: int = 96,
) -> GGUFFile:
    """Qwen2-Audio's Whisper encoder (two 1-D convolutions over the mel frames, the second halving them; K without
    a bias) and its projector: average pooling by 2, then one matrix (mm.a.fc). With ``stack``, Ultravox's
    projector instead: ``stack`` frames stacked into one (clip.audio.projector.stack_factor), RMS norm, a SwiGLU
    MLP of ``hidden`` (mm.a.mlp.1, mm.a.mlp.2) with an RMS norm between."""
    p = _Projector("ultravox" if stack else "qwen2a", dtype, matrices, prefix="a.")
    if stack:
        p.key("clip.audio.projector.stack_factor", stack, "u32")
    p.key("clip.has_audio_encoder", True, "bool")
    p.key("clip.use_gelu", True, "bool")
    for k, v in (
        ("embedding_length", n_embd),
        ("feed_forward_length", n_ff),
        ("block_count", n_layer),
        ("attention.head_count", n_head),
        ("projection_dim", proj_dim),
        ("num_mel_bins", n_mel),
    ):
        p.key(f"clip.audio.{k}", v, "u32")
    p.key("clip.audio.attention.layer_norm_epsilon", 1e-5, "f32")
    p.tensor("a.conv1d.1.weight", 3, n_mel, n_embd, dtype=p.dtype)
    p.tensor("a.conv1d.1.bias", 1, n_embd, dtype=np.float32)
    p.tensor("a.conv1d.2.weight", 3, n_embd, n_embd, dtype=p.dtype)
    p.tensor("a.conv1d.2.bias", 1, n_embd, dtype=np.float32)
    p.tensor("a.position_embd.weight", n_embd, n_pos, dtype=np.float32)
    for i in range(n_layer):
        for name in ("attn_q", "attn_k", "attn_v", "attn_out"):
            p.tensor(f"a.blk.{i}.{name}.weight", n_embd, n_embd)
            if name != "attn_k":
                p.tensor(f"a.blk.{i}.{name}.bias", n_embd)
        for name in ("ln1", "ln2"):
            p.tensor(f"a.blk.{i}.{name}.weight", n_embd)
            p.tensor(f"a.blk.{i}.{name}.bias", n_embd)
        p.tensor(f"a.blk.{i}.ffn_up.weight", n_embd, n_ff)
        p.tensor(f"a.blk.{i}.ffn_up.bias", n_ff)
        p.tensor(f"a.blk.{i}.ffn_down.weight", n_ff, n_embd)
        p.tensor(f"a.blk.{i}.ffn_down.bias", n_embd)
    p.tensor("a.post_ln.weight", n_embd)
    p.tensor("a.post_ln.bias", n_embd)
    if stack:
        p.tensor("mm.a.norm_pre.weight", n_embd * stack)
        p.tensor("mm.a.mlp.1.weight", n_embd * stack, 2 * hidden)
        p.tensor("mm.a.norm_mid.weight", hidden)
        p.tensor("mm.a.mlp.2.weight", hidden, proj_dim)
    else:
        p.tensor("mm.a.fc.weight", n_embd, proj_dim)
        p.tensor("mm.a.fc.bias", proj_dim)
    return p.f


def qwen2vl(
    n_embd=64, n_ff=128, n_layer=2, n_head=4, image=64, patch=8, proj_dim=256, dtype=np.float16, matrices: str | None = None, window=0
) -> GGUFFile:
    """Qwen2-VL's encoder (two patch convolutions, M-RoPE, no learned positions) and its merger: 2 x 2 patches into
    one, then a two-layer GELU MLP (mm.0, mm.2). With ``window`` (clip.vision.n_wa_pattern), Qwen2.5-VL's: RMS
    norms, a SiLU-gated feed-forward, window attention in all but every ``window``-th layer."""
    p = _Projector("qwen2.5vl_merger" if window else "qwen2vl_merger", dtype, matrices)
    _vision(p, n_embd, n_ff, n_layer, n_head, image, patch, proj_dim, positions=False, patch_bias=False)
    if window:
        p.key("clip.vision.n_wa_pattern", window, "u32")
        p.key("clip.use_gelu", False, "bool")
        p.key("clip.use_silu", True, "bool")
        for name in list(p.f.tensors):
            if name.endswith(("ln1.bias", "ln2.bias", "post_ln.bias")):
                del p.f.tensors[name]
        for i in range(n_layer):
            p.tensor(f"v.blk.{i}.ffn_gate.weight", n_embd, n_ff)
            p.tensor(f"v.blk.{i}.ffn_gate.bias", n_ff)
    p.tensor("v.patch_embd.weight.1", patch, patch, 3, n_embd, dtype=p.dtype)
    p.tensor("mm.0.weight", 4 * n_embd, 4 * n_embd)
    p.tensor("mm.0.bias", 4 * n_embd)
    p.tensor("mm.2.weight", 4 * n_embd, proj_dim)
    p.tensor("mm.2.bias", proj_dim)
    return p.f


def pixtral(
    n_embd=64, n_ff=128, n_layer=2, n_head=4, image=64, patch=8, proj_dim=256, dtype=np.float16, matrices: str | None = None, merge=2
) -> GGUFFile:
    """Pixtral's encoder (RMS norms, SiLU-gated feed-forward, 2-D RoPE, no learned positions), Mistral Small 3.1's
    patch merger (``merge`` x ``merge``; none when 0), the two-layer projector and the [IMG_BREAK] row ends."""
    p = _Projector("pixtral", dtype, matrices)
    p.key("clip.has_vision_encoder", True, "bool")
    p.key("clip.use_silu", True, "bool")
    for k, v in (
        ("image_size", image),
        ("patch_size", patch),
        ("embedding_length", n_embd),
        ("feed_forward_length", n_ff),
        ("block_count", n_layer),
        ("attention.head_count", n_head),
        ("projection_dim", proj_dim),
    ):
        p.key(f"clip.vision.{k}", v, "u32")
    if merge:
        p.key("clip.vision.spatial_merge_size", merge, "u32")
    p.key("clip.vision.attention.layer_norm_epsilon", 1e-5, "f32")
    p.key("clip.vision.image_mean", [0.5, 0.5, 0.5], "arr[f32]")
    p.key("clip.vision.image_std", [0.5, 0.5, 0.5], "arr[f32]")
    p.tensor("v.patch_embd.weight", patch, patch, 3, n_embd, dtype=p.dtype)
    p.tensor("v.pre_ln.weight", n_embd)
    for i in range(n_layer):
        for name in ("attn_q", "attn_k", "attn_v", "attn_out"):
            p.tensor(f"v.blk.{i}.{name}.weight", n_embd, n_embd)
        for name in ("ln1", "ln2"):
            p.tensor(f"v.blk.{i}.{name}.weight", n_embd)
        p.tensor(f"v.blk.{i}.ffn_gate.weight", n_embd, n_ff)
        p.tensor(f"v.blk.{i}.ffn_up.weight", n_embd, n_ff)
        p.tensor(f"v.blk.{i}.ffn_down.weight", n_ff, n_embd)
    if merge:
        p.tensor("mm.input_norm.weight", n_embd)
        p.tensor("mm.patch_merger.weight", n_embd * merge * merge, n_embd)
    p.tensor("mm.1.weight", n_embd, proj_dim)
    p.tensor("mm.1.bias", proj_dim)
    p.tensor("mm.2.weight", proj_dim, proj_dim)
    p.tensor("mm.2.bias", proj_dim)
    p.tensor("v.token_embd.img_break", proj_dim)
    return p.f


def internvl(
    n_embd=64, n_ff=128, n_layer=2, n_head=4, image=64, patch=8, proj_dim=256, dtype=np.float16, matrices: str | None = None, merge=2
) -> GGUFFile:
    """InternVL's InternViT (a class token, layer scales) and its projector: the class token dropped, ``merge`` x
    ``merge`` patches shuffled into one, a layer norm and a two-layer GELU MLP (mm.model.mlp.0, .1, .3)."""
    p = _Projector("internvl", dtype, matrices)
    _vision(p, n_embd, n_ff, n_layer, n_head, image, patch, proj_dim, positions=False)
    p.key("clip.vision.projector.scale_factor", merge, "u32")
    p.tensor("v.class_embd", n_embd, dtype=np.float32)
    p.tensor("v.position_embd.weight", n_embd, (image // patch) ** 2 + 1, dtype=np.float32)
    for name in [n for n in p.f.tensors if n.startswith("v.post_ln.")]:
        del p.f.tensors[name]
    for i in range(n_layer):
        p.tensor(f"v.blk.{i}.ls1.weight", n_embd)
        p.tensor(f"v.blk.{i}.ls2.weight", n_embd)
    wide = n_embd * merge * merge
    p.tensor("mm.model.mlp.0.weight", wide)
    p.tensor("mm.model.mlp.0.bias", wide)
    p.tensor("mm.model.mlp.1.weight", wide, proj_dim)
    p.tensor("mm.model.mlp.1.bias", proj_dim)
    p.tensor("mm.model.mlp.3.weight", proj_dim, proj_dim)
    p.tensor("mm.model.mlp.3.bias", proj_dim)
    return p.f


def gemma3_qwen2a(**sizes) -> GGUFFile:
    """One file with two encoders, as omni models ship them: gemma3's vision encoder and qwen2a's audio one, each
    projector named by its modality's key (clip.vision.projector_type, clip.audio.projector_type)."""
    vision, audio = gemma3(**sizes), qwen2a(**sizes)
    f = new()
    for source in (vision, audio):
        for key in source.metadata:
            if key != "clip.projector_type":
                f.metadata.set(key, source.metadata[key], source.metadata.type_of(key))
        for name in source.tensors:
            t = source.tensors[name]
            f.tensors.add(name, t.data.tobytes(), t.type.name, t.shape)
    f.metadata.set("clip.vision.projector_type", "gemma3", "str")
    f.metadata.set("clip.audio.projector_type", "qwen2a", "str")
    return f


#: projector type → its builder
BUILDERS: dict[str, Callable[..., GGUFFile]] = {
    "gemma3": gemma3,
    "mlp": mlp,
    "idefics3": idefics3,
    "qwen2a": qwen2a,
    "qwen2vl": qwen2vl,
    "pixtral": pixtral,
    "internvl": internvl,
    "gemma3+qwen2a": gemma3_qwen2a,
}


def saved(f: GGUFFile, name: str) -> Path:
    path = tmp_dir() / name
    f.save(path)
    return path


@cache
def text_model_path(n_embd: int = 256) -> Path:
    return saved(text_model(n_embd), f"text-{n_embd}.gguf")


@cache
def mmproj_path(projector: str = "gemma3", **sizes) -> Path:
    """A tiny projector of ``projector`` type with ``sizes`` (see the builders), saved once."""
    tag = "-".join(f"{k}{v if not isinstance(v, type) else v.__name__}" for k, v in sorted(sizes.items()))
    return saved(BUILDERS[projector](**sizes), f"mmproj-{projector}{'-' + tag if tag else ''}.gguf")
