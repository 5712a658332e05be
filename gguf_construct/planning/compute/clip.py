"""The compute graph llama.cpp's multimodal loader reserves for a vision projector (tools/mtmd/clip.cpp
``clip_graph``, models/siglip.cpp, models/llava.cpp), built on the graph IR (:mod:`.ggml_ir`) and allocated as
ggml-alloc allocates it (:mod:`.alloc`).

At load (``warmup``) libmtmd builds the graph of one image of ``image_size`` x ``image_size`` and reserves it: the
compute buffer is that graph's. The patch embedding is a 2-D convolution (``ggml_conv_2d``: IM2COL, then a matrix
product); each encoder layer is pre-norm attention (flash attention unless it is turned off: the CPU supports
it, so ``auto`` turns it on) and a GELU feed-forward; the projector after it depends on the type (``graph`` in
``schema/memory.json`` ``clip.projectors``): ``gemma3`` (SigLIP, then a 2-D average pooling by ``merge`` per
side, RMS norm and the input projection), ``idefics3`` (SigLIP, then ``merge`` x ``merge`` patches shuffled into
one and a matrix) or ``llava`` (every layer but the last, position embeddings gathered by index, the patch rows
gathered, a two-layer GELU MLP).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .alloc import reserve_bytes
from .ggml_ir import Ggml, GgmlTensor, refuse

__all__ = ["EncoderShape", "GRAPHS", "encoder_compute_bytes"]


@dataclass(frozen=True)
class EncoderShape:
    """What the encoder graph is sized by: the hyperparameters clip.cpp reads and the weights it uses (name →
    (type, ggml shape)); ``flash_attn`` is whether the graph uses flash attention."""

    graph: str
    image_size: int
    patch_size: int
    n_embd: int
    n_head: int
    n_layer: int
    merge: int
    ffn_op: str
    weights: Mapping[str, tuple[str, tuple[int, ...]]]
    flash_attn: bool
    #: an audio encoder's mel bins and the frames of its warmup input (0 for a vision encoder)
    n_mel: int = 0
    n_frames: int = 0
    #: window attention's period (clip.vision.n_wa_pattern; 0: none) and the projection width (projection_dim)
    window: int = 0
    projection_dim: int = 0


#: build_ffn's gated form of each activation
_GATED = {"SILU": "SWIGLU", "GELU": "GEGLU", "GELU_ERF": "GEGLU_ERF", "GELU_QUICK": "GEGLU_QUICK"}


class _Encoder:
    """One graph being built: ``Ggml`` plus the encoder's weights as external tensors."""

    def __init__(self, s: EncoderShape) -> None:
        self.s = s
        self.g = Ggml()
        self.prefix = "a." if s.n_frames else "v."
        self.rms = False  # build_norm's NORM_TYPE_RMS (no bias) instead of a layer norm
        self.n_side = s.image_size // s.patch_size if s.patch_size else 0
        self.n_patches = self.n_side * self.n_side

    def w(self, name: str) -> GgmlTensor | None:
        found = self.s.weights.get(name)
        if found is None:
            return None
        ggml_type, ne = found
        return self.g.weight(ggml_type, *ne, name=name)

    def need(self, name: str) -> GgmlTensor:
        t = self.w(name)
        if t is None:
            raise refuse(f"the graph needs tensor {name!r}, which the file does not have")
        return t

    # -- ggml operations the language-model graphs do not use ---------------------------------------------
    def im2col(self, kernel: GgmlTensor, inp: GgmlTensor, stride: int) -> GgmlTensor:
        """ggml_im2col (2-D, no padding or dilation), the result in the kernel's type."""
        kw, kh, ic, _ = kernel.ne
        ow = (inp.ne[0] - kw) // stride + 1
        oh = (inp.ne[1] - kh) // stride + 1
        if kernel.ne[2] != inp.ne[2] or ow <= 0 or oh <= 0:
            raise refuse(f"IM2COL: a {list(kernel.ne)} kernel does not fit a {list(inp.ne)} image")
        return self.g.new_tensor(kernel.type, ic * kh * kw, ow, oh, inp.ne[3], op="IM2COL", src=[kernel, inp])

    def conv_2d(self, kernel: GgmlTensor, inp: GgmlTensor, stride: int) -> GgmlTensor:
        """ggml_conv_2d: IM2COL, a matrix product with the reshaped kernel, back to [OW, OH, OC, N]."""
        g = self.g
        cols = self.im2col(kernel, inp, stride)
        flat = g.reshape(cols, cols.ne[0], cols.ne[3] * cols.ne[2] * cols.ne[1])
        k = g.reshape(kernel, kernel.ne[0] * kernel.ne[1] * kernel.ne[2], kernel.ne[3])
        out = g.mul_mat(flat, k)
        out = g.reshape(out, cols.ne[1], cols.ne[2], cols.ne[3], kernel.ne[3])
        return g.cont(g.permute(out, 0, 1, 3, 2))

    def conv_1d_ph(self, kernel: GgmlTensor, inp: GgmlTensor, stride: int) -> GgmlTensor:
        """ggml_conv_1d_ph: a 1-D convolution padded by half the kernel (IM2COL to f16, a matrix product)."""
        g = self.g
        k, ic, oc = kernel.ne[0], kernel.ne[1], kernel.ne[2]
        ow = (inp.ne[0] + 2 * (k // 2) - (k - 1) - 1) // stride + 1
        if ic != inp.ne[1] or ow <= 0:
            raise refuse(f"IM2COL: a {list(kernel.ne)} kernel does not fit a {list(inp.ne)} input")
        cols = g.new_tensor("f16", ic * k, ow, inp.ne[2], 1, op="IM2COL", src=[kernel, inp])
        out = g.mul_mat(g.reshape(cols, cols.ne[0], cols.ne[2] * cols.ne[1]), g.reshape(kernel, k * ic, oc))
        return g.reshape(out, ow, oc, cols.ne[2])

    def pool_1d_avg(self, a: GgmlTensor, k: int) -> GgmlTensor:
        """ggml_pool_1d (average, kernel = stride = ``k``, no padding)."""
        return self.g.new_tensor("f32", (a.ne[0] - k) // k + 1, a.ne[1], a.ne[2], a.ne[3], op="POOL_1D", src=[a])

    def pool_2d_avg(self, a: GgmlTensor, k: int) -> GgmlTensor:
        """ggml_pool_2d (average, kernel = stride = ``k``, no padding)."""
        ne0, ne1 = (a.ne[0] - k) // k + 1, (a.ne[1] - k) // k + 1
        if k <= 0 or ne0 <= 0 or ne1 <= 0:
            raise refuse(f"POOL_2D: a {k} x {k} pool over {list(a.ne)}")
        return self.g.new_tensor("f32", ne0, ne1, a.ne[2], a.ne[3], op="POOL_2D", src=[a])

    # -- clip_graph's helpers ------------------------------------------------------------------------------
    def norm(self, cur: GgmlTensor, prefix: str) -> GgmlTensor:
        """build_norm (a layer norm, or an RMS norm for the encoders that use it) with ``prefix``.weight and .bias
        where the file has them."""
        g = self.g
        cur = g.rms_norm(cur) if self.rms else g.norm(cur)
        w, b = self.w(f"{prefix}.weight"), self.w(f"{prefix}.bias")
        if w is not None:
            cur = g.mul(cur, w)
        if b is not None:
            cur = g.add(cur, b)
        return cur

    def linear(self, cur: GgmlTensor, prefix: str) -> GgmlTensor:
        """build_mm with ``prefix``.weight, then its bias where the file has one."""
        cur = self.g.mul_mat(self.need(f"{prefix}.weight"), cur)
        b = self.w(f"{prefix}.bias")
        return self.g.add(cur, b) if b is not None else cur

    def inp(self) -> GgmlTensor:
        """build_inp: the image (an input), the patch convolution, [n_embd, n_patches], the patch bias."""
        g, s = self.g, self.s
        raw = g.input("f32", s.image_size, s.image_size, 3, 1, name="inp_raw")
        x = self.conv_2d(self.need("v.patch_embd.weight"), raw, s.patch_size)
        x = g.reshape(x, self.n_patches, x.ne[2])
        x = g.cont(g.transpose(x))
        bias = self.w("v.patch_embd.bias")
        return g.add(x, bias) if bias is not None else x

    def with_class(self, x: GgmlTensor) -> GgmlTensor:
        """The class embedding (repeated to a row per image) concatenated after the patches."""
        cls = self.need("v.class_embd")
        return self.g.concat(x, self.g.repeat(cls, self.g.new_tensor(cls.type, self.s.n_embd, 1, 1, 1)), 1)

    def attn(self, il: int, q: GgmlTensor, k: GgmlTensor, v: GgmlTensor, n_pos: int, mask: GgmlTensor | None = None) -> GgmlTensor:
        """build_attn: Q, K, V expanded first, then flash attention (K, V and a mask cast to f16) or KQ, a softmax
        (masked when given), KQV."""
        g, s = self.g, self.s
        for t in (q, k, v):
            g.expand(t)
        qp, kp = g.permute(q, 0, 2, 1, 3), g.permute(k, 0, 2, 1, 3)
        if s.flash_attn:
            vp = g.permute(v, 0, 2, 1, 3)
            k16, v16 = g.cast(kp, "f16"), g.cast(vp, "f16")
            out = g.flash_attn_ext(qp, k16, v16, g.cast(mask, "f16") if mask is not None else None)
            cur = g.reshape(out, out.ne[0] * out.ne[1], out.ne[2] * out.ne[3])
        else:
            vt = g.cont(g.permute(v, 1, 2, 0, 3))
            kq = g.soft_max_ext(g.mul_mat(kp, qp), mask)
            kqv = g.permute(g.mul_mat(vt, kq), 0, 2, 1, 3)
            cur = g.cont(kqv, kqv.ne[0] * kqv.ne[1], kqv.ne[2] * kqv.ne[3])
        return self.linear(cur, f"{self.prefix}blk.{il}.attn_out")

    def layer(
        self,
        il: int,
        inp_l: GgmlTensor,
        n_pos: int,
        rotate: Callable[[GgmlTensor], GgmlTensor] | None = None,
        mask: GgmlTensor | None = None,
    ) -> GgmlTensor:
        """One encoder layer of build_vit: norm, attention (Q and K rotated by ``rotate`` when given: RoPE),
        residual, norm, feed-forward (gated where the layer has ffn_gate), residual."""
        g, s = self.g, self.s
        d_head = s.n_embd // s.n_head
        blk = f"{self.prefix}blk.{il}"
        cur = self.norm(inp_l, f"{blk}.ln1")
        heads = []
        for name in ("attn_q", "attn_k", "attn_v"):
            heads.append(g.reshape(self.linear(cur, f"{blk}.{name}"), d_head, s.n_head, n_pos))
        if rotate is not None:
            heads[0], heads[1] = rotate(heads[0]), rotate(heads[1])
        cur = self.attn(il, heads[0], heads[1], heads[2], n_pos, mask)
        scale = self.w(f"{blk}.ls1.weight")
        cur = g.add(g.mul(cur, scale) if scale is not None else cur, inp_l)
        inp_l = cur
        cur = self.norm(cur, f"{blk}.ln2")
        up = self.linear(cur, f"{blk}.ffn_up")
        if self.w(f"{blk}.ffn_gate.weight") is not None:
            cur = g.glu_split(_GATED[s.ffn_op], self.linear(cur, f"{blk}.ffn_gate"), up)
        else:
            cur = g.unary(s.ffn_op, up)
        cur = self.linear(cur, f"{blk}.ffn_down")
        scale = self.w(f"{blk}.ls2.weight")
        return g.add(inp_l, g.mul(cur, scale) if scale is not None else cur)


def _vit(
    e: _Encoder,
    x: GgmlTensor,
    n_pos: int,
    pos: GgmlTensor | None,
    avgpool: bool = False,
    rotate: Callable[[GgmlTensor], GgmlTensor] | None = None,
) -> GgmlTensor:
    """clip_graph::build_vit: learned position embeddings, pre norm, the layers, (an audio encoder's average
    pooling by 2), post norm, as [n_embd, n_pos]."""
    g, s, p = e.g, e.s, e.prefix
    x = g.reshape(g.add(x, pos) if pos is not None else x, s.n_embd, n_pos)
    if e.w(f"{p}pre_ln.weight") is not None:
        x = e.norm(x, f"{p}pre_ln")
    for il in range(s.n_layer):
        x = e.layer(il, x, n_pos, rotate)
    if avgpool:
        x = g.cont(g.transpose(e.pool_1d_avg(g.cont(g.transpose(x)), 2)))
    if e.w(f"{p}post_ln.weight") is not None:
        x = e.norm(x, f"{p}post_ln")
    return g.reshape(x, s.n_embd, x.ne[1])


def _siglip_vit(e: _Encoder) -> GgmlTensor:
    """models/siglip.cpp up to its projector."""
    return _vit(e, e.inp(), e.n_patches, e.need("v.position_embd.weight"))


def _gemma3(e: _Encoder) -> GgmlTensor:
    """SigLIP with Gemma 3's projector: 2-D average pooling by ``merge``, RMS norm, the input projection."""
    g, s = e.g, e.s
    x = g.cont(g.transpose(_siglip_vit(e)), e.n_side, e.n_side, s.n_embd, 1)
    x = e.pool_2d_avg(x, s.merge)
    x = g.reshape(x, x.ne[0] * x.ne[0], s.n_embd, 1)
    x = g.cont(g.transpose(x))
    x = g.mul(g.rms_norm(x), e.need("mm.soft_emb_norm.weight"))
    proj = g.cont(g.transpose(e.need("mm.input_projection.weight")))
    return g.mul_mat(proj, x)


def _idefics3(e: _Encoder) -> GgmlTensor:
    """SigLIP with Idefics3's projector: build_patch_merge_permute (``merge`` x ``merge`` patches into one, the
    grid padded to a multiple of it), then mm.model.fc."""
    g, s = e.g, e.s
    x = _siglip_vit(e)
    factor, width, height = s.merge, e.n_side, e.n_side
    x = g.reshape(x, s.n_embd, width, height)
    pad_w, pad_h = -width % factor, -height % factor
    if pad_w or pad_h:
        x = g.pad(x, 0, pad_w, pad_h)
        width, height = width + pad_w, height + pad_h
    x = g.permute(g.reshape(x, s.n_embd * factor, width // factor, height), 0, 2, 1, 3)
    x = g.permute(g.cont(x, s.n_embd * factor * factor, height // factor, width // factor), 0, 2, 1, 3)
    x = g.cont(x, x.ne[0], x.ne[1] * x.ne[2])
    return g.mul_mat(e.need("mm.model.fc.weight"), x)


def _llava(e: _Encoder) -> GgmlTensor:
    """models/llava.cpp with the MLP projector: every layer but the last, the patch rows gathered, mm.0, GELU, mm.2."""
    g, s = e.g, e.s
    n_pos = e.n_patches + (1 if "v.class_embd" in s.weights else 0)
    x = e.inp()
    if "v.class_embd" in s.weights:  # concatenated as it is (InternVL repeats it first)
        x = g.concat(x, e.need("v.class_embd"), 1)
    positions = g.input("i32", n_pos, name="positions")
    x = g.add(x, g.get_rows(e.need("v.position_embd.weight"), positions))
    if e.w("v.pre_ln.weight") is not None:
        x = e.norm(x, "v.pre_ln")
    for il in range(s.n_layer - 1):
        x = e.layer(il, x, n_pos)
    if e.w("v.post_ln.weight") is not None:
        x = e.norm(x, "v.post_ln")
    x = g.reshape(x, x.ne[0], x.ne[1])
    patches = g.input("i32", e.n_patches, name="patches")
    x = g.get_rows(x, patches)
    x = g.unary("GELU", e.linear(x, "mm.0"))
    if "mm.2.weight" in s.weights:
        x = e.linear(x, "mm.2")
    return x


def _whisper(e: _Encoder, avgpool: bool) -> GgmlTensor:
    """models/whisper-enc.cpp up to its projector: two 1-D convolutions with GELU (the second halves the frames),
    the layers over the first n_frames / 2 position embeddings, (average pooling), post norm."""
    g, s = e.g, e.s
    x = g.input("f32", s.n_frames, s.n_mel, 1, 1, name="inp_raw")
    for index, stride in ((1, 1), (2, 2)):
        x = g.unary("GELU_ERF", g.add(e.conv_1d_ph(e.need(f"a.conv1d.{index}.weight"), x, stride), e.need(f"a.conv1d.{index}.bias")))
    x = g.cont(g.transpose(x))
    n_pos = s.n_frames // 2
    table = e.need("a.position_embd.weight")
    if table.ne[1] < n_pos:
        raise refuse(f"the audio position embeddings have {table.ne[1]} rows, the graph needs {n_pos}")
    pos = g.view(table, table.ne[0], n_pos, nb=[table.nb[1]])
    return _vit(e, x, n_pos, pos, avgpool=avgpool)


def _qwen2a(e: _Encoder) -> GgmlTensor:
    """Whisper with Qwen2-Audio's projector: average pooling by 2, then mm.a.fc."""
    return e.linear(_whisper(e, avgpool=True), "mm.a.fc")


def _ultravox(e: _Encoder) -> GgmlTensor:
    """Whisper with Ultravox's projector: ``merge`` (the stack factor) frames stacked into one row (padded as
    build_stack pads), RMS norm, mm.a.mlp.1, SwiGLU, RMS norm, mm.a.mlp.2."""
    g, s = e.g, e.s
    x = _whisper(e, avgpool=False)
    if s.merge > 1:
        total, stride = x.ne[0] * x.ne[1], s.n_embd * s.merge
        # GGML_PAD(total, stride) is a bit mask, right only for a power of two: llama.cpp's padding, kept as it is
        pad = ((total + stride - 1) & ~(stride - 1)) - total
        if pad > 0:
            x = g.pad(g.view(x, total), pad)
        x = g.view(x, stride, (total + pad) // stride, nb=[4 * stride])  # fewer rows where the mask rounds down
    x = g.mul(g.rms_norm(x), e.need("mm.a.norm_pre.weight"))
    x = g.glu("SWIGLU", g.mul_mat(e.need("mm.a.mlp.1.weight"), x))
    x = g.mul(g.rms_norm(x), e.need("mm.a.norm_mid.weight"))
    return g.mul_mat(e.need("mm.a.mlp.2.weight"), x)


def _qwen2vl(e: _Encoder) -> GgmlTensor:
    """models/qwen2vl.cpp: two patch convolutions added, 2 x 2 patches made neighbours, M-RoPE in every layer, post
    norm, then 4 patches' features through a GELU MLP (mm.0, mm.2). Qwen2.5-VL (``window``: n_wa_pattern) has RMS
    norms and window attention (the patches reordered into windows by index, a mask, every ``window``-th layer
    attending to all), its output put back in order."""
    g, s = e.g, e.s
    e.rms = s.window > 0
    raw = g.input("f32", s.image_size, s.image_size, 3, 1, name="inp_raw")
    x = g.add(e.conv_2d(e.need("v.patch_embd.weight"), raw, s.patch_size), e.conv_2d(e.need("v.patch_embd.weight.1"), raw, s.patch_size))
    x = g.cont(g.permute(x, 1, 2, 0, 3), s.n_embd * 2, e.n_side // 2, e.n_side, 1)
    x = g.reshape(x, s.n_embd * 2, e.n_side // 2, 2, e.n_side // 2)
    x = g.cont(g.permute(x, 0, 2, 1, 3), s.n_embd, e.n_patches, 1)
    positions = g.input("i32", e.n_patches * 4, name="positions")
    if e.w("v.pre_ln.weight") is not None:
        x = e.norm(x, "v.pre_ln")
    mask = None
    if s.window:
        inv_window_idx = g.input("i32", e.n_patches // 4, name="inv_window_idx")
        mask = g.input("f32", e.n_patches, e.n_patches, name="window_mask")
        if s.flash_attn:
            mask = g.cast(mask, "f16")
        x = g.get_rows(g.reshape(x, s.n_embd * 4, e.n_patches // 4), inv_window_idx)
        x = g.reshape(x, s.n_embd, e.n_patches, 1)
    for il in range(s.n_layer):
        full = not s.window or (il + 1) % s.window == 0
        x = e.layer(il, x, e.n_patches, lambda t: g.rope(t, positions), None if full else mask)
    if e.w("v.post_ln.weight") is not None:
        x = e.norm(x, "v.post_ln")
    x = g.reshape(x, s.n_embd * 4, e.n_patches // 4, 1)
    x = e.linear(g.unary("GELU", e.linear(x, "mm.0")), "mm.2")
    if s.window:
        window_idx = g.input("i32", e.n_patches // 4, name="window_idx")
        x = g.get_rows(g.reshape(x, s.projection_dim, e.n_patches // 4), window_idx)
        x = g.reshape(x, s.projection_dim, e.n_patches // 4, 1)
    return x


def _pixtral(e: _Encoder) -> GgmlTensor:
    """models/pixtral.cpp: RMS norms, 2-D RoPE (rows, then columns), no learned positions; Mistral Small 3.1's patch
    merger (``merge`` x ``merge`` patches by an IM2COL) where the file has one; a two-layer GELU MLP (mm.1, mm.2);
    an [IMG_BREAK] embedding after each row but the last."""
    g, s = e.g, e.s
    e.rms = True
    pos_h, pos_w = g.input("i32", e.n_patches, name="pos_h"), g.input("i32", e.n_patches, name="pos_w")
    x = _vit(e, e.inp(), e.n_patches, None, rotate=lambda t: g.rope(g.rope(t, pos_h), pos_w))
    if "mm.patch_merger.weight" in s.weights:
        x = g.mul(g.rms_norm(x), e.need("mm.input_norm.weight"))
        x = g.cont(g.permute(g.reshape(x, s.n_embd, e.n_side, e.n_side), 2, 0, 1, 3))
        kernel = g.view(x, s.merge, s.merge, x.ne[2], nb=[0, 0])
        x = e.im2col(kernel, x, s.merge)
        x = g.mul_mat(e.need("mm.patch_merger.weight"), g.reshape(x, x.ne[0], x.ne[1] * x.ne[2]))
    x = e.linear(g.unary("GELU", e.linear(x, "mm.1")), "mm.2")
    if "v.token_embd.img_break" in s.weights:
        side = e.n_side // s.merge
        rows = g.reshape(x, x.ne[0], side, side)
        tok = g.add(g.scale(g.new_tensor("f32", x.ne[0], 1, side)), e.need("v.token_embd.img_break"))
        joined = g.concat(rows, tok, 1)
        x = g.view(joined, x.ne[0], side * side + side - 1, nb=[joined.nb[1]])
    return x


def _internvl(e: _Encoder) -> GgmlTensor:
    """models/internvl.cpp: InternViT with a class token (dropped after the layers), ``merge`` x ``merge`` patches
    shuffled into one, a layer norm and a two-layer GELU MLP (mm.model.mlp.0, .1, .3)."""
    g, s = e.g, e.s
    e.rms = s.n_embd == 3200 and s.n_layer == 45  # InternViT-6B (InternVL 2.5/3 26B and larger) uses RMS norms
    x = _vit(e, e.with_class(e.inp()), e.n_patches + 1, e.need("v.position_embd.weight"))
    x = g.cont(g.view(x, s.n_embd, e.n_patches, nb=[x.nb[1]]))
    f, side = s.merge, e.n_side
    x = g.permute(g.reshape(x, s.n_embd * f, side // f, side, 1), 0, 2, 1, 3)
    x = g.permute(g.cont(x, s.n_embd * f * f, side // f, side // f, 1), 0, 2, 1, 3)
    x = g.cont(x, s.n_embd * f * f, x.ne[1] * x.ne[2])
    e.rms = False  # the projector's norm is a layer norm whatever the encoder's
    x = e.norm(x, "mm.model.mlp.0")
    return e.linear(g.unary("GELU", e.linear(x, "mm.model.mlp.1")), "mm.model.mlp.3")


#: the graph builders by ``schema/memory.json`` ``clip.projectors[...].graph``
GRAPHS = {
    "gemma3": _gemma3,
    "idefics3": _idefics3,
    "llava": _llava,
    "qwen2a": _qwen2a,
    "ultravox": _ultravox,
    "qwen2vl": _qwen2vl,
    "pixtral": _pixtral,
    "internvl": _internvl,
}


def encoder_compute_bytes(s: EncoderShape) -> int:
    """The CPU compute buffer libmtmd reserves for the encoder at warmup, in bytes."""
    e = _Encoder(s)
    e.g.expand(GRAPHS[s.graph](e))
    return reserve_bytes([e.g.graph])
