"""The graphs llama.cpp builds for its recurrent architectures, mamba, mamba2, rwkv6 and rwkv7, in the planning IR.

Each builder repeats llama.cpp's C++ call for call (llama.cpp src/models/mamba.cpp, mamba2.cpp, mamba-base.cpp, rwkv6.cpp,
rwkv6-base.cpp, rwkv7.cpp, rwkv7-base.cpp and the ``build_*`` helpers of src/llama-graph.cpp), including every
``ggml_build_forward_expand``: the node order decides which freed block a later tensor reuses. The recurrent
state (llama.cpp src/llama-memory-recurrent.cpp) is one row of ``n_embd_r`` (the token shift or the conv state)
and one of ``n_embd_s`` (the wkv or ssm state) per cell and layer; while reserving, llama.cpp's memory context is
"full": every one of its ``rs_size`` cells (``max(1, n_seq_max)``) is in use, the head and the zeroed cell are 0.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, cast

from . import builds
from .ggml_ir import Ggml, GgmlTensor
from .llama_blocks import GraphBuilder, ShapeLike

__all__ = ["RECURRENT", "build_mamba", "build_mamba2", "build_rwkv6", "build_rwkv7", "mamba2_layer", "mamba_layer"]

_F32 = 4  # sizeof(float): the element size of the f32 tensors these graphs view into


class RecurrentShape(ShapeLike, Protocol):
    """What the recurrent graphs read of a model beyond ShapeLike (planning.shape.ModelShape provides it)."""

    ssm_d_conv: int
    ssm_d_inner: int
    ssm_d_state: int
    ssm_dt_rank: int
    ssm_n_group: int
    wkv_head_size: int
    token_shift_count: int

    @property
    def n_embd_r(self) -> int: ...

    @property
    def n_embd_s(self) -> int: ...


class _Recurrent:
    """A GraphBuilder with llama_memory_recurrent's context while reserving: the state tensors of each layer
    (``rs_size`` cells of f32), every cell in use, the head and the zeroed cell at 0."""

    def __init__(self, b: GraphBuilder) -> None:
        self.b, self.g, self.shape = b, b.g, cast(RecurrentShape, b.shape)
        self.n_seqs = b.batch.n_seqs
        self.n_tokens = b.batch.n_tokens
        self.n_seq_tokens = b.batch.n_tokens // b.batch.n_seqs
        self.rs_size = max(1, b.ctx.n_seq_max)
        self.n_rs, self.rs_head, self.rs_z = self.rs_size, 0, 0
        self.n_embd = b.shape.n_embd
        self._rest: GgmlTensor | None = None

    def lw(self, il: int, name: str) -> GgmlTensor:
        return self.b.need(f"blk.{il}.{name}")

    def mm(self, il: int, name: str, cur: GgmlTensor) -> GgmlTensor:
        """build_lora_mm of the layer's weight ``name`` (with its scale tensor when the file has one)."""
        return self.b.mm(self.lw(il, f"{name}.weight"), cur, self.b.layer(il, f"{name}.scale"))

    def state(self, kind: str, il: int) -> GgmlTensor:
        """Layer ``il``'s 'r' or 's' state tensor (llama.cpp's cache_r_l / cache_s_l)."""
        size = self.shape.n_embd_r if kind == "r" else self.shape.n_embd_s
        return self.g.external("f32", size, self.rs_size, name=f"cache_{kind}_l{il}")

    def rs_inp(self) -> tuple[GgmlTensor, GgmlTensor]:
        """build_rs_inp: the state copy indices, split in the main and the extra ones."""
        g = self.g
        s_copy = g.input("i32", self.n_rs, name="rs_s_copy")
        main = g.view(s_copy, self.n_seqs)
        extra = g.view(s_copy, self.n_rs - self.n_seqs, offset=self.n_seqs * 4)
        return main, extra

    def rs(
        self,
        inp: tuple[GgmlTensor, GgmlTensor],
        s: GgmlTensor,
        state_size: int,
        get_rows: Callable[[GgmlTensor, GgmlTensor], GgmlTensor] | None = None,
    ) -> GgmlTensor:
        """build_rs: zero one cell in place, gather the states of the batch's sequences (``get_rows``, for mamba
        its ssm_scan), copy the others."""
        g, n_seqs = self.g, self.n_seqs
        main, extra = inp
        states = g.reshape(s, state_size, s.ne[1])
        zero = g.view(states, state_size * (self.rs_z >= 0), offset=self.rs_z * states.nb[1] * (self.rs_z >= 0))
        g.expand(g.scale(zero, inplace=True))
        dst = lambda: g.view(s, state_size, self.n_rs - n_seqs, nb=[s.nb[1]], offset=(self.rs_head + n_seqs) * s.nb[1])  # noqa: E731
        if get_rows is None and builds.feature("rs_gather_all"):  # newer builds: every row at once, then views
            rows = g.get_rows(states, main.view_src or main)
            out = g.expand(g.view(rows, state_size, n_seqs, nb=[rows.nb[1]]))
            states_extra = g.view(rows, state_size, self.n_rs - n_seqs, nb=[rows.nb[1]], offset=n_seqs * rows.nb[1])
            g.expand(g.cpy(states_extra, dst()))
            return out
        out = (get_rows or g.get_rows)(states, main)
        g.expand(out)
        if get_rows is not None and builds.feature("rs_gather_all"):  # newer builds, mamba: every row but the first
            if self._rest is None:  # one view of the copy index past its first cell, for every layer
                self._rest = g.view(main.view_src or main, self.n_rs - 1, offset=4)
            rows = g.get_rows(states, self._rest)
            states_extra = g.view(rows, state_size, self.n_rs - n_seqs, nb=[rows.nb[1]], offset=(n_seqs - 1) * rows.nb[1])
            g.expand(g.cpy(states_extra, dst()))
            return out
        states_extra = g.get_rows(states, extra)
        g.expand(g.cpy(states_extra, dst()))
        return out

    def output(self, cur: GgmlTensor, *, rms: bool) -> None:
        """The final norm and the logits, both results llama.cpp keeps (ggml_set_output)."""
        b = self.b
        cur = b.norm(cur, b.need("output_norm.weight"), b.w("output_norm.bias"), rms=rms)
        cur.output = True
        logits = b.mm(b.output_weight(), cur)
        self.g.expand(logits, output=True)


# -- ops the dense graphs do not use (ggml/src/ggml.c) -----------------------------------------------------------
def _ssm_conv(g: Ggml, sx: GgmlTensor, c: GgmlTensor) -> GgmlTensor:
    return g.new_tensor("f32", c.ne[1], sx.ne[0] - c.ne[0] + 1, sx.ne[2], op="SSM_CONV", src=(sx, c))


def _ssm_scan(
    g: Ggml, s: GgmlTensor, x: GgmlTensor, dt: GgmlTensor, a: GgmlTensor, b: GgmlTensor, c: GgmlTensor, ids: GgmlTensor
) -> GgmlTensor:
    """The outputs y and the new states, concatenated in one 1-D tensor."""
    n = x.ne[0] * x.ne[1] * x.ne[2] * x.ne[3] + s.ne[0] * s.ne[1] * s.ne[2] * ids.ne[0]
    return g.new_tensor("f32", n, op="SSM_SCAN", src=(s, x, dt, a, b, c, ids))


def _wkv(g: Ggml, op: str, k: GgmlTensor, state: GgmlTensor, *src: GgmlTensor) -> GgmlTensor:
    """ggml_rwkv_wkv6 / ggml_rwkv_wkv7: the outputs then the new states, as rows of S * H."""
    s, h, n_tokens = k.ne[0], k.ne[1], k.ne[2]
    return g.new_tensor("f32", s * h, n_tokens + s * state.ne[1], op=op, src=src)


def _l2_norm(g: Ggml, a: GgmlTensor) -> GgmlTensor:
    return g.dup("L2_NORM", a)


def _sub(g: Ggml, a: GgmlTensor, b: GgmlTensor) -> GgmlTensor:
    return g.dup("SUB", a, b)


# -- mamba -------------------------------------------------------------------------------------------------------
def mamba_layer(r: _Recurrent, rs_inp: tuple[GgmlTensor, GgmlTensor], cur: GgmlTensor, il: int) -> GgmlTensor:
    """build_mamba_layer of llama.cpp src/models/mamba-base.cpp: layer ``il``'s Mamba mixer over the normed
    input ``cur``, its states read from and written back to the layer's cache; the output as [n_embd, n_tokens]."""
    b, g, s = r.b, r.g, r.shape
    n_seqs, n_seq_tokens = r.n_seqs, r.n_seq_tokens
    d_conv, d_inner, d_state, dt_rank = s.ssm_d_conv, s.ssm_d_inner, s.ssm_d_state, s.ssm_dt_rank
    dt_b_c_rms = bool(s.metadata.get(f"{s.arch}.ssm.dt_b_c_rms", False))
    conv_states_all, ssm_states_all = r.state("r", il), r.state("s", il)
    conv = r.rs(rs_inp, conv_states_all, conv_states_all.ne[0])
    conv = g.reshape(conv, d_conv - 1, d_inner, n_seqs)
    cur = g.reshape(cur, cur.ne[0], n_seq_tokens, n_seqs)
    xz = r.mm(il, "ssm_in", cur)
    x = g.view(xz, d_inner, xz.ne[1], xz.ne[2], nb=[xz.nb[1], xz.nb[2]])
    z = g.view(xz, d_inner, xz.ne[1], xz.ne[2], nb=[xz.nb[1], xz.nb[2]], offset=d_inner * _F32)
    conv_x = g.concat(conv, g.transpose(x), 0)
    last_conv = g.view(conv_x, d_conv - 1, d_inner, n_seqs, nb=[conv_x.nb[1], conv_x.nb[2]], offset=n_seq_tokens * conv_x.nb[0])
    dst = g.view(conv_states_all, (d_conv - 1) * d_inner * n_seqs, offset=r.rs_head * (d_conv - 1) * d_inner * _F32)
    g.expand(g.cpy(last_conv, dst))
    x = _ssm_conv(g, conv_x, r.lw(il, "ssm_conv1d.weight"))
    x = g.add(x, r.lw(il, "ssm_conv1d.bias"))
    x = g.unary("SILU", x)
    x_db = b.mm(r.lw(il, "ssm_x.weight"), x)
    nb = [x_db.nb[1], x_db.nb[2]]
    dt = g.view(x_db, dt_rank, n_seq_tokens, n_seqs, nb=nb)
    bb = g.view(x_db, d_state, 1, n_seq_tokens, n_seqs, nb=[d_state * _F32, *nb], offset=dt_rank * _F32)
    c = g.view(x_db, d_state, 1, n_seq_tokens, n_seqs, nb=[d_state * _F32, *nb], offset=(dt_rank + d_state) * _F32)
    norms = [b.layer(il, f"ssm_{n}_norm.weight") for n in ("dt", "b", "c")]
    if dt_b_c_rms or all(t is not None for t in norms):
        dt, bb, c = (b.norm(t, w) for t, w in zip((dt, bb, c), norms, strict=True))
    dt = r.mm(il, "ssm_dt", dt if dt.contiguous else g.cont(dt))  # the installed llama.cpp makes a view contiguous first
    dt = g.add(dt, r.lw(il, "ssm_dt.bias"))
    cur = x
    x = g.reshape(x, 1, d_inner, n_seq_tokens, n_seqs)
    a = r.lw(il, "ssm_a")

    def ssm_rows(
        states: GgmlTensor,
        ids: GgmlTensor,
        x: GgmlTensor = x,
        dt: GgmlTensor = dt,
        a: GgmlTensor = a,
        bb: GgmlTensor = bb,
        c: GgmlTensor = c,
    ) -> GgmlTensor:
        ssm = g.reshape(states, d_state, 1, d_inner, r.rs_size)
        return _ssm_scan(g, ssm, x, dt, a, bb, c, ids)

    y_ssm = r.rs(rs_inp, ssm_states_all, ssm_states_all.ne[0], ssm_rows)
    n = d_state * d_inner * n_seqs
    stored = g.view(ssm_states_all, n, offset=r.rs_head * d_state * d_inner * _F32)
    g.expand(g.cpy(g.view(y_ssm, n, offset=x.nb[3] * x.ne[3]), stored))
    y = g.view(y_ssm, d_inner, n_seq_tokens, n_seqs, nb=[x.nb[2], x.nb[3]])
    y = g.add(y, g.mul(cur, r.lw(il, "ssm_d")))
    y = g.glu_split("SWIGLU", g.cont(z), y)
    cur = r.mm(il, "ssm_out", y)
    cur = g.reshape(cur, cur.ne[0], n_seq_tokens * n_seqs)
    return cur


def build_mamba(b: GraphBuilder) -> None:
    """llama.cpp src/models/mamba.cpp with build_mamba_layer of src/models/mamba-base.cpp."""
    r = _Recurrent(b)
    g, s = r.g, r.shape
    inp_l = b.inp_embd()
    rs_inp = r.rs_inp()
    out_ids = b.inp_out_ids()
    for il in range(s.n_layer):
        cur = b.norm(inp_l, r.lw(il, "attn_norm.weight"))
        cur = mamba_layer(r, rs_inp, cur, il)
        if il == s.n_layer - 1:
            cur = g.get_rows(cur, out_ids)
            inp_l = g.get_rows(inp_l, out_ids)
        inp_l = g.add(cur, inp_l)
    r.output(inp_l, rms=True)


def mamba2_layer(r: _Recurrent, rs_inp: tuple[GgmlTensor, GgmlTensor], cur: GgmlTensor, il: int) -> GgmlTensor:
    """build_mamba2_layer of llama.cpp src/models/mamba-base.cpp, as the installed build makes it: the input
    projection reshaped after the product, the states stored as 2-D views, the grouped norm's output flattened to
    2-D before the output projection."""
    b, g, s = r.b, r.g, r.shape
    n_seqs, n_seq_tokens = r.n_seqs, r.n_seq_tokens
    d_conv, d_inner, d_state = s.ssm_d_conv, s.ssm_d_inner, s.ssm_d_state
    n_head, n_group = s.ssm_dt_rank, s.ssm_n_group
    if not n_head or not n_group or d_inner % n_head or d_inner % n_group:
        raise ValueError(f"mamba2: d_inner {d_inner} in {n_head} heads and {n_group} groups")
    head_dim = d_inner // n_head
    conv_dim = d_inner + 2 * n_group * d_state
    conv_states_all, ssm_states_all = r.state("r", il), r.state("s", il)
    conv = r.rs(rs_inp, conv_states_all, conv_states_all.ne[0])
    conv = g.reshape(conv, d_conv - 1, conv_dim, n_seqs)
    zx = r.mm(il, "ssm_in", cur)
    zx = g.reshape(zx, zx.ne[0], n_seq_tokens, n_seqs)
    nb = [zx.nb[1], zx.nb[2]]
    z = g.view(zx, head_dim, n_head, n_seq_tokens, n_seqs, nb=[head_dim * _F32, *nb])
    xbc = g.view(zx, conv_dim, n_seq_tokens, n_seqs, nb=nb, offset=d_inner * _F32)
    dt = g.view(zx, n_head, n_seq_tokens, n_seqs, nb=nb, offset=(2 * d_inner + 2 * n_group * d_state) * _F32)
    conv_x = g.concat(conv, g.transpose(xbc), 0)
    last_conv = g.view(conv_x, d_conv - 1, conv_dim, n_seqs, nb=[conv_x.nb[1], conv_x.nb[2]], offset=n_seq_tokens * conv_x.nb[0])
    n_r = conv_states_all.ne[0]
    g.expand(g.cpy(last_conv, g.view(conv_states_all, n_r, n_seqs, nb=[conv_states_all.nb[1]], offset=r.rs_head * n_r * _F32)))
    xbc = _ssm_conv(g, conv_x, r.lw(il, "ssm_conv1d.weight"))
    xbc = g.add(xbc, r.lw(il, "ssm_conv1d.bias"))
    xbc = g.unary("SILU", xbc)
    xnb = [xbc.nb[1], xbc.nb[2]]
    x = g.view(xbc, head_dim, n_head, n_seq_tokens, n_seqs, nb=[head_dim * _F32, *xnb])
    bb = g.view(xbc, d_state, n_group, n_seq_tokens, n_seqs, nb=[d_state * _F32, *xnb], offset=d_inner * _F32)
    c = g.view(xbc, d_state, n_group, n_seq_tokens, n_seqs, nb=[d_state * _F32, *xnb], offset=(d_inner + n_group * d_state) * _F32)
    dt = g.add(g.cont(dt), r.lw(il, "ssm_dt.bias"))
    a = r.lw(il, "ssm_a")

    def ssm_rows(
        states: GgmlTensor,
        ids: GgmlTensor,
        x: GgmlTensor = x,
        dt: GgmlTensor = dt,
        a: GgmlTensor = a,
        bb: GgmlTensor = bb,
        c: GgmlTensor = c,
    ) -> GgmlTensor:
        ssm = g.reshape(states, d_state, head_dim, n_head, r.rs_size)
        return _ssm_scan(g, ssm, x, dt, a, bb, c, ids)

    y_ssm = r.rs(rs_inp, ssm_states_all, ssm_states_all.ne[0], ssm_rows)
    n_s = ssm_states_all.ne[0]
    x_elems = x.ne[0] * x.ne[1] * x.ne[2] * x.ne[3]
    stored = g.view(y_ssm, n_s, n_seqs, nb=[n_s * _F32], offset=x_elems * _F32)
    g.expand(g.cpy(stored, g.view(ssm_states_all, n_s, n_seqs, nb=[ssm_states_all.nb[1]], offset=r.rs_head * n_s * _F32)))
    y = g.view(y_ssm, head_dim, n_head, n_seq_tokens, n_seqs, nb=[x.nb[1], n_head * x.nb[1], n_seq_tokens * n_head * x.nb[1]])
    y = g.add(y, g.mul(x, r.lw(il, "ssm_d")))
    y = g.glu_split("SWIGLU", g.cont(z), y)
    norm = b.layer(il, "ssm_norm.weight")
    if norm is not None:
        y = g.reshape(y, d_inner // n_group, n_group, n_seq_tokens, n_seqs)
        y = b.norm(y, norm)
    y = g.reshape(y, d_inner, n_seq_tokens * n_seqs)
    cur = r.mm(il, "ssm_out", y)
    return cur


def build_mamba2(b: GraphBuilder) -> None:
    """llama.cpp src/models/mamba2.cpp with build_mamba2_layer of src/models/mamba-base.cpp."""
    r = _Recurrent(b)
    g, s = r.g, r.shape
    inp_l = b.inp_embd()
    rs_inp = r.rs_inp()
    out_ids = b.inp_out_ids()
    for il in range(s.n_layer):
        cur = b.norm(inp_l, r.lw(il, "attn_norm.weight"))
        cur = mamba2_layer(r, rs_inp, cur, il)
        if il == s.n_layer - 1:
            cur = g.get_rows(cur, out_ids)
            inp_l = g.get_rows(inp_l, out_ids)
        inp_l = g.add(cur, inp_l)
    r.output(inp_l, rms=True)


# -- rwkv6 / rwkv7: the token shift and the layer loop they share ------------------------------------------------
TimeMix = Callable[[_Recurrent, tuple[GgmlTensor, GgmlTensor], GgmlTensor, GgmlTensor, dict[str, GgmlTensor], int], GgmlTensor]
ChannelMix = Callable[[_Recurrent, int, GgmlTensor, GgmlTensor], GgmlTensor]


def _build_rwkv(b: GraphBuilder, time_mix: TimeMix, channel_mix: ChannelMix) -> None:
    """The layer loop of llama.cpp src/models/rwkv6.cpp and rwkv7.cpp (the same but for the mixes)."""
    r = _Recurrent(b)
    g, s = r.g, r.shape
    n_embd, n_seqs, n_seq_tokens, n_tokens = r.n_embd, r.n_seqs, r.n_seq_tokens, r.n_tokens
    shift_count = s.token_shift_count
    rescale = int(s.metadata.get(f"{s.arch}.rescale_every_n_layers", 0) or 0)
    inp_l = b.inp_embd()
    inp_l = b.norm(inp_l, b.need("token_embd_norm.weight"), b.need("token_embd_norm.bias"), rms=False)
    rs_inp = r.rs_inp()
    out_ids = b.inp_out_ids()
    first: dict[str, GgmlTensor] = {}  # rwkv7's first layer value
    for il in range(s.n_layer):
        inp_l = g.reshape(inp_l, n_embd, n_seq_tokens, n_seqs)
        cache_r = r.state("r", il)  # build_rwkv_token_shift_load
        token_shift = g.reshape(r.rs(rs_inp, cache_r, cache_r.ne[0]), n_embd, shift_count, n_seqs)
        nb = [token_shift.nb[1], token_shift.nb[2]]
        att_shift = g.view(token_shift, n_embd, 1, n_seqs, nb=nb)
        ffn_shift = g.view(token_shift, n_embd, 1, n_seqs, nb=nb, offset=n_embd * _F32)
        att_norm = b.norm(inp_l, r.lw(il, "attn_norm.weight"), r.lw(il, "attn_norm.bias"), rms=False)
        x_prev = g.concat(att_shift, g.view(att_norm, n_embd, n_seq_tokens - 1, n_seqs, nb=[att_norm.nb[1], att_norm.nb[2]]), 1)
        cur = time_mix(r, rs_inp, att_norm, x_prev, first, il)
        ffn_inp = g.add(cur, inp_l)
        ffn_norm = b.norm(ffn_inp, r.lw(il, "attn_norm_2.weight"), r.lw(il, "attn_norm_2.bias"), rms=False)
        x_prev = g.concat(ffn_shift, g.view(ffn_norm, n_embd, n_seq_tokens - 1, n_seqs, nb=[ffn_norm.nb[1], ffn_norm.nb[2]]), 1)
        last = (n_seq_tokens - 1) * n_embd * _F32
        token_shift = g.concat(
            g.view(att_norm, n_embd, 1, n_seqs, nb=[att_norm.nb[1], att_norm.nb[2]], offset=last),
            g.view(ffn_norm, n_embd, 1, n_seqs, nb=[ffn_norm.nb[1], ffn_norm.nb[2]], offset=last),
            1,
        )
        n_r = cache_r.ne[0]  # build_rwkv_token_shift_store
        g.expand(g.cpy(g.view(token_shift, n_embd * n_seqs * shift_count), g.view(cache_r, n_r * n_seqs, offset=n_r * r.rs_head * _F32)))
        ffn_inp = g.reshape(ffn_inp, n_embd, n_tokens)
        ffn_norm = g.reshape(ffn_norm, n_embd, n_tokens)
        x_prev = g.reshape(x_prev, n_embd, n_tokens)
        if il == s.n_layer - 1:
            ffn_inp = g.get_rows(ffn_inp, out_ids)
            ffn_norm = g.get_rows(ffn_norm, out_ids)
            x_prev = g.get_rows(x_prev, out_ids)
        cur = channel_mix(r, il, ffn_norm, x_prev)
        cur = g.add(cur, ffn_inp)
        if rescale and (il + 1) % rescale == 0:
            cur = g.scale(cur)
        inp_l = cur
    r.output(inp_l, rms=False)


def _wkv_state_store(r: _Recurrent, wkv_output: GgmlTensor, cache_s: GgmlTensor, head_size: int) -> GgmlTensor:
    """The new wkv state copied back into the layer's cache_s; returns the outputs part."""
    g, n_embd = r.g, r.n_embd
    cur = g.view(wkv_output, n_embd * r.n_tokens)
    wkv_state = g.view(wkv_output, n_embd * head_size * r.n_seqs, offset=n_embd * r.n_tokens * _F32)
    n_s = cache_s.ne[0]
    g.expand(g.cpy(wkv_state, g.view(cache_s, n_s * r.n_seqs, offset=n_s * r.rs_head * _F32)))
    return cur


def _group_norm(r: _Recurrent, il: int, cur: GgmlTensor, n_head: int) -> GgmlTensor:
    """The per-head layer norm of the wkv outputs with the time-mix ln weight and bias (when the file has them)."""
    g, n_embd = r.g, r.n_embd
    w, bias = r.b.layer(il, "time_mix_ln.weight"), r.b.layer(il, "time_mix_ln.bias")
    if w is None or bias is None:
        return g.reshape(cur, n_embd, r.n_tokens)
    cur = g.reshape(cur, n_embd // n_head, n_head, r.n_tokens)
    cur = g.norm(cur)
    cur = g.reshape(cur, n_embd, r.n_tokens)
    return g.add(g.mul(cur, w), bias)


def _lerp(r: _Recurrent, il: int, name: str, sx: GgmlTensor, cur: GgmlTensor) -> GgmlTensor:
    g = r.g
    return g.add(g.mul(sx, r.lw(il, f"{name}.weight")), cur)


def _rwkv6_time_mix(
    r: _Recurrent, rs_inp: tuple[GgmlTensor, GgmlTensor], cur: GgmlTensor, x_prev: GgmlTensor, first: dict[str, GgmlTensor], il: int
) -> GgmlTensor:
    """build_rwkv6_time_mix of llama.cpp src/models/rwkv6-base.cpp (rwkv6: time_mix_first is present)."""
    b, g, s = r.b, r.g, r.shape
    n_embd, n_tokens = r.n_embd, r.n_tokens
    head_size = s.wkv_head_size
    n_head, n_head_kv = n_embd // head_size, s.n_head_kv[il]
    cache_s = r.state("s", il)
    sx = _sub(g, x_prev, cur)
    sx = g.reshape(sx, n_embd, n_tokens)
    cur = g.reshape(cur, n_embd, n_tokens)
    xxx = _lerp(r, il, "time_mix_lerp_x", sx, cur)
    w1, w2 = r.lw(il, "time_mix_w1.weight"), r.lw(il, "time_mix_w2.weight")
    xxx = g.reshape(g.unary("TANH", g.mul_mat(w1, xxx)), w1.ne[1] // 5, 1, 5, n_tokens)
    xxx = g.cont(g.permute(xxx, 0, 1, 3, 2))
    xxx = g.mul_mat(g.reshape(w2, w2.ne[0], w2.ne[1], 1, 5), xxx)
    fused = b.layer(il, "time_mix_lerp_fused.weight")
    offsets = [n_embd * n_tokens * i * _F32 for i in range(5)]
    if fused is not None:
        sx = g.reshape(sx, n_embd, 1, n_tokens)
        cur = g.reshape(cur, n_embd, 1, n_tokens)
        xxx = g.add(g.mul(g.add(xxx, fused), sx), cur)
        xw, xk, xv, xr, xg = (g.view(xxx, n_embd, n_tokens, nb=[xxx.nb[1]], offset=o) for o in offsets)
    else:
        views = [g.view(xxx, n_embd, n_tokens, nb=[xxx.nb[1]], offset=o) for o in offsets]
        xw, xk, xv, xr, xg = (
            g.add(g.mul(g.add(v, r.lw(il, f"time_mix_lerp_{n}.weight")), sx), cur) for v, n in zip(views, "wkvrg", strict=True)
        )
    rr = r.mm(il, "time_mix_receptance", xr)
    k = r.mm(il, "time_mix_key", xk)
    v = r.mm(il, "time_mix_value", xv)
    for name in ("receptance", "key", "value"):
        bias = b.layer(il, f"time_mix_{name}.bias")
        if bias is not None:
            if name == "receptance":
                rr = g.add(rr, bias)
            elif name == "key":
                k = g.add(k, bias)
            else:
                v = g.add(v, bias)
    gate = g.unary("SILU", r.mm(il, "time_mix_gate", xg))
    if n_head_kv not in (0, n_head):
        k = g.reshape(k, head_size, 1, n_head_kv, n_tokens)
        v = g.reshape(v, head_size, 1, n_head_kv, n_tokens)
        tmp = g.new_tensor("f32", head_size, n_head // n_head_kv, n_head_kv, n_tokens)
        k = g.repeat(k, tmp)
        v = g.repeat(v, tmp)
    k = g.reshape(k, head_size, n_head, n_tokens)
    v = g.reshape(v, head_size, n_head, n_tokens)
    rr = g.reshape(rr, head_size, n_head, n_tokens)
    w = g.mul_mat(r.lw(il, "time_mix_decay_w2.weight"), g.unary("TANH", g.mul_mat(r.lw(il, "time_mix_decay_w1.weight"), xw)))
    w = g.add(w, r.lw(il, "time_mix_decay.weight"))
    w = g.unary("EXP", g.unary("NEG", g.unary("EXP", w)))
    w = g.reshape(w, head_size, n_head, n_tokens)
    wkv_state = r.rs(rs_inp, cache_s, cache_s.ne[0])
    out = _wkv(g, "RWKV_WKV6", k, wkv_state, k, v, rr, r.lw(il, "time_mix_first.weight"), w, wkv_state)
    cur = _wkv_state_store(r, out, cache_s, head_size)
    cur = _group_norm(r, il, cur, n_head)
    cur = g.mul(cur, gate)
    cur = r.mm(il, "time_mix_output", cur)
    return g.reshape(cur, n_embd, r.n_seq_tokens, r.n_seqs)


def _rwkv6_channel_mix(r: _Recurrent, il: int, cur: GgmlTensor, x_prev: GgmlTensor) -> GgmlTensor:
    g = r.g
    sx = _sub(g, x_prev, cur)
    xk = _lerp(r, il, "channel_mix_lerp_k", sx, cur)
    xr = _lerp(r, il, "channel_mix_lerp_r", sx, cur)
    rr = g.unary("SIGMOID", r.mm(il, "channel_mix_receptance", xr))
    k = g.dup("SQR", g.unary("RELU", r.mm(il, "channel_mix_key", xk)))
    return g.mul(rr, r.mm(il, "channel_mix_value", k))


def build_rwkv6(b: GraphBuilder) -> None:
    """llama.cpp src/models/rwkv6.cpp with build_rwkv6_time_mix / channel_mix of src/models/rwkv6-base.cpp."""
    _build_rwkv(b, _rwkv6_time_mix, _rwkv6_channel_mix)


def _lora(r: _Recurrent, il: int, name: str, x: GgmlTensor, act: str | None = None) -> GgmlTensor:
    """``{name}2 @ act({name}1 @ x)``: one of rwkv7's low-rank projections."""
    g = r.g
    inner = g.mul_mat(r.lw(il, f"{name}1.weight"), x)
    return g.mul_mat(r.lw(il, f"{name}2.weight"), g.unary(act, inner) if act else inner)


def _rwkv7_time_mix(
    r: _Recurrent, rs_inp: tuple[GgmlTensor, GgmlTensor], cur: GgmlTensor, x_prev: GgmlTensor, first: dict[str, GgmlTensor], il: int
) -> GgmlTensor:
    """build_rwkv7_time_mix of llama.cpp src/models/rwkv7-base.cpp."""
    b, g, s = r.b, r.g, r.shape
    n_embd, n_tokens = r.n_embd, r.n_tokens
    head_size = s.wkv_head_size
    head_count = n_embd // head_size
    has_gating = b.layer(il, "time_mix_g1.weight") is not None and b.layer(il, "time_mix_g2.weight") is not None
    cache_s = r.state("s", il)
    sx = _sub(g, x_prev, cur)
    dummy = g.new_tensor("f32", n_embd, r.n_seq_tokens, r.n_seqs, 6 if has_gating else 5)
    sx = g.repeat(sx, dummy)
    xxx = g.add(g.mul(sx, r.lw(il, "time_mix_lerp_fused.weight")), cur)
    xr, xw, xk, xv, xa, *xg = (
        g.view(xxx, n_embd, n_tokens, nb=[xxx.nb[1]], offset=n_embd * n_tokens * i * _F32) for i in range(6 if has_gating else 5)
    )
    rr = r.mm(il, "time_mix_receptance", xr)
    w = g.add(_lora(r, il, "time_mix_w", xw, "TANH"), r.lw(il, "time_mix_w0.weight"))
    w = g.unary("EXP", g.scale(g.unary("SIGMOID", w)))
    k = r.mm(il, "time_mix_key", xk)
    v = r.mm(il, "time_mix_value", xv)
    if "v" not in first:
        first["v"] = v
    else:
        mix = g.unary("SIGMOID", g.add(_lora(r, il, "time_mix_v", xv), r.lw(il, "time_mix_v0.weight")))
        v = g.add(v, g.mul(_sub(g, first["v"], v), mix))
    gate = (
        g.mul_mat(r.lw(il, "time_mix_g2.weight"), g.unary("SIGMOID", g.mul_mat(r.lw(il, "time_mix_g1.weight"), xg[0])))
        if has_gating
        else None
    )
    a = g.unary("SIGMOID", g.add(_lora(r, il, "time_mix_a", xa), r.lw(il, "time_mix_a0.weight")))
    kk = g.reshape(g.mul(k, r.lw(il, "time_mix_k_k.weight")), head_size, head_count, n_tokens)
    kk = _l2_norm(g, kk)
    ka = g.mul(k, r.lw(il, "time_mix_k_a.weight"))
    k = g.add(k, _sub(g, g.mul(a, ka), ka))
    rr, w, k, v, a = (g.reshape(t, head_size, head_count, n_tokens) for t in (rr, w, k, v, a))
    wkv_state = r.rs(rs_inp, cache_s, cache_s.ne[0])
    out = _wkv(g, "RWKV_WKV7", k, wkv_state, rr, w, k, v, g.unary("NEG", kk), g.mul(kk, a), wkv_state)
    cur = _wkv_state_store(r, out, cache_s, head_size)
    cur = _group_norm(r, il, cur, head_count)
    rk = g.sum_rows(g.mul(g.mul(k, rr), g.reshape(r.lw(il, "time_mix_r_k.weight"), head_size, head_count)))
    cur = g.add(cur, g.reshape(g.mul(v, rk), n_embd, n_tokens))
    if gate is not None:
        cur = g.mul(cur, gate)
    cur = r.mm(il, "time_mix_output", cur)
    return g.reshape(cur, n_embd, r.n_seq_tokens, r.n_seqs)


def _rwkv7_channel_mix(r: _Recurrent, il: int, cur: GgmlTensor, x_prev: GgmlTensor) -> GgmlTensor:
    g = r.g
    sx = _sub(g, x_prev, cur)
    xk = _lerp(r, il, "channel_mix_lerp_k", sx, cur)
    k = g.dup("SQR", g.unary("RELU", r.mm(il, "channel_mix_key", xk)))
    return r.mm(il, "channel_mix_value", k)


def build_rwkv7(b: GraphBuilder) -> None:
    """llama.cpp src/models/rwkv7.cpp with build_rwkv7_time_mix / channel_mix of src/models/rwkv7-base.cpp."""
    _build_rwkv(b, _rwkv7_time_mix, _rwkv7_channel_mix)


#: architecture name → the function building its graph into a GraphBuilder
RECURRENT: dict[str, Callable[[GraphBuilder], None]] = {
    "mamba": build_mamba,
    "mamba2": build_mamba2,
    "rwkv6": build_rwkv6,
    "rwkv7": build_rwkv7,
}
