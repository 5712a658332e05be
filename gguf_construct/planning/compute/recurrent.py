"""The graphs llama.cpp builds for its recurrent architectures, mamba (v1), rwkv6 and rwkv7, in the planning IR.

Each builder repeats llama.cpp's C++ call for call (llama.cpp src/models/mamba.cpp, mamba-base.cpp, rwkv6.cpp,
rwkv6-base.cpp, rwkv7.cpp, rwkv7-base.cpp and the ``build_*`` helpers of src/llama-graph.cpp), including every
``ggml_build_forward_expand``: the node order decides which freed block a later tensor reuses. The recurrent
state (llama.cpp src/llama-memory-recurrent.cpp) is one row of ``n_embd_r`` (the token shift or the conv state)
and one of ``n_embd_s`` (the wkv or ssm state) per cell and layer; while reserving, llama.cpp's memory context is
"full": every one of its ``rs_size`` cells (``max(1, n_seq_max)``) is in use, the head and the zeroed cell are 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from .graph import Ggml, Graph, Tensor

__all__ = ["Batch", "RecurrentModel", "mamba_graph", "rwkv6_graph", "rwkv7_graph", "RECURRENT_GRAPHS"]

_F32 = 4  # sizeof(float): the element size of the f32 tensors these graphs view into


@dataclass(frozen=True)
class Batch:
    """The ubatch a reserved graph is built for (llama_batch_allocr::ubatch_reserve): ``n_seqs`` sequences of
    ``n_tokens // n_seqs`` tokens each, ``n_outputs`` of them producing logits."""

    n_tokens: int
    n_seqs: int
    n_outputs: int

    @property
    def n_seq_tokens(self) -> int:
        return self.n_tokens // self.n_seqs


@dataclass(frozen=True)
class RecurrentModel:
    """What the recurrent graphs read of a model: its sizes (llama.cpp's hparams) and the optional tensors whose
    presence changes the graph. ``weight_types``: the type of the 2-D weights (only get_rows results depend on a
    weight's type, and they are f32 for every float and quantized type)."""

    arch: str
    n_layer: int
    n_embd: int
    n_vocab: int
    n_ff: int = 0
    # mamba
    d_conv: int = 0
    d_inner: int = 0
    d_state: int = 0
    dt_rank: int = 0
    ssm_dt_b_c_rms: bool = False
    # rwkv6 / rwkv7
    head_size: int = 0
    token_shift_count: int = 2
    time_mix_extra_dim: int = 0
    time_decay_extra_dim: int = 0
    rescale_every_n_layers: int = 0
    n_head_kv: int = 0
    lerp_fused: bool = True
    n_lora_decay: int = 0
    n_lora_iclr: int = 0
    n_lora_value_res_mix: int = 0
    n_lora_gate: int = 0

    @property
    def n_embd_r(self) -> int:
        """The per-cell size of the first state (llama.cpp src/llama-hparams.cpp n_embd_r)."""
        if self.arch == "mamba":
            return (self.d_conv - 1 if self.d_conv else 0) * self.d_inner
        return self.token_shift_count * self.n_embd

    @property
    def n_embd_s(self) -> int:
        """The per-cell size of the second state (llama.cpp src/llama-hparams.cpp n_embd_s)."""
        if self.arch == "mamba":
            return self.d_state * self.d_inner
        return self.n_embd * self.head_size


class _Builder:
    """llm_graph_context's shared pieces for one reserved graph of a recurrent model."""

    def __init__(self, m: RecurrentModel, batch: Batch, rs_size: int) -> None:
        self.m, self.b, self.rs_size = m, batch, rs_size
        self.g = Ggml()
        self.rs_head, self.rs_z, self.n_rs = 0, 0, rs_size  # the "full" memory context of a reservation

    def w(self, *ne: int) -> Tensor:
        """A model weight (its memory is not in the compute buffer)."""
        return self.g.weight("f32", *ne)

    def inp_embd(self) -> Tensor:
        """build_inp_embd: token rows, and the unused embeddings input (both alternatives are in the graph)."""
        g, n = self.g, self.b.n_tokens
        tokens = g.input("i32", n, name="inp_tokens")
        embd = g.input("f32", self.m.n_embd, n, name="inp_embd")
        cur = g.get_rows(self.w(self.m.n_embd, self.m.n_vocab), tokens)
        g.expand(cur)
        g.expand(embd)
        return cur

    def norm(self, cur: Tensor, bias: bool, rms: bool) -> Tensor:
        """build_norm with a weight (and a bias)."""
        g = self.g
        cur = g.rms_norm(cur) if rms else g.norm(cur)
        cur = g.mul(cur, self.w(cur.ne[0]))
        return g.add(cur, self.w(cur.ne[0])) if bias else cur

    def rs_inp(self) -> tuple[Tensor, Tensor]:
        """build_rs_inp: the state copy indices, split in the main and the extra ones."""
        g = self.g
        s_copy = g.input("i32", self.n_rs, name="rs_s_copy")
        main = g.view(s_copy, self.b.n_seqs)
        extra = g.view(s_copy, self.n_rs - self.b.n_seqs, offset=self.b.n_seqs * 4)
        return main, extra

    def rs(self, inp: tuple[Tensor, Tensor], s: Tensor, state_size: int, get_rows=None) -> Tensor:
        """build_rs: zero one cell in place, gather the states of the batch's sequences (``get_rows``, for mamba
        its ssm_scan), copy the others."""
        g, n_seqs = self.g, self.b.n_seqs
        main, extra = inp
        states = g.reshape(s, state_size, s.ne[1])
        zero = g.view(states, state_size * (self.rs_z >= 0), offset=self.rs_z * states.nb[1] * (self.rs_z >= 0))
        g.expand(g.scale(zero, inplace=True))
        out = (get_rows or g.get_rows)(states, main)
        g.expand(out)
        states_extra = g.get_rows(states, extra)
        dst = g.view(s, state_size, self.n_rs - n_seqs, nb=[s.nb[1]], offset=(self.rs_head + n_seqs) * s.nb[1])
        g.expand(g.cpy(states_extra, dst))
        return out

    def output(self, cur: Tensor, bias: bool, rms: bool) -> Graph:
        """The final norm and the logits, both results llama.cpp keeps (ggml_set_output)."""
        g = self.g
        cur = self.norm(cur, bias, rms)
        cur.output = True
        logits = g.mul_mat(self.w(self.m.n_embd, self.m.n_vocab), cur)
        g.expand(logits, output=True)
        return g.graph


# -- ops the dense graphs do not use (ggml/src/ggml.c) -----------------------------------------------------------
def _ssm_conv(g: Ggml, sx: Tensor, c: Tensor) -> Tensor:
    return g.new_tensor("f32", c.ne[1], sx.ne[0] - c.ne[0] + 1, sx.ne[2], op="SSM_CONV", src=(sx, c))


def _ssm_scan(g: Ggml, s: Tensor, x: Tensor, dt: Tensor, a: Tensor, b: Tensor, c: Tensor, ids: Tensor) -> Tensor:
    """The outputs y and the new states, concatenated in one 1-D tensor."""
    n = x.ne[0] * x.ne[1] * x.ne[2] * x.ne[3] + s.ne[0] * s.ne[1] * s.ne[2] * ids.ne[0]
    return g.new_tensor("f32", n, op="SSM_SCAN", src=(s, x, dt, a, b, c, ids))


def _wkv(g: Ggml, op: str, k: Tensor, state: Tensor, *src: Tensor) -> Tensor:
    """ggml_rwkv_wkv6 / ggml_rwkv_wkv7: the outputs then the new states, as rows of S * H."""
    s, h, n_tokens = k.ne[0], k.ne[1], k.ne[2]
    return g.new_tensor("f32", s * h, n_tokens + s * state.ne[1], op=op, src=src)


def _l2_norm(g: Ggml, a: Tensor) -> Tensor:
    return g.dup("L2_NORM", a)


def _sub(g: Ggml, a: Tensor, b: Tensor) -> Tensor:
    return g.dup("SUB", a, b)


# -- mamba -------------------------------------------------------------------------------------------------------
def mamba_graph(m: RecurrentModel, batch: Batch, rs_size: int) -> Graph:
    """llama.cpp src/models/mamba.cpp with build_mamba_layer of src/models/mamba-base.cpp."""
    x_ = _Builder(m, batch, rs_size)
    g = x_.g
    n_seqs, n_seq_tokens = batch.n_seqs, batch.n_seq_tokens
    d_conv, d_inner, d_state, dt_rank = m.d_conv, m.d_inner, m.d_state, m.dt_rank
    inp_l = x_.inp_embd()
    rs_inp = x_.rs_inp()
    out_ids = g.input("i32", batch.n_outputs, name="out_ids")
    for il in range(m.n_layer):
        cur = x_.norm(inp_l, bias=False, rms=True)
        conv_states_all = g.external("f32", m.n_embd_r, rs_size, name=f"cache_r_l{il}")
        ssm_states_all = g.external("f32", m.n_embd_s, rs_size, name=f"cache_s_l{il}")
        conv = x_.rs(rs_inp, conv_states_all, m.n_embd_r)
        conv = g.reshape(conv, d_conv - 1, d_inner, n_seqs)
        cur = g.reshape(cur, cur.ne[0], n_seq_tokens, n_seqs)
        xz = g.mul_mat(x_.w(m.n_embd, 2 * d_inner), cur)
        x = g.view(xz, d_inner, xz.ne[1], xz.ne[2], nb=[xz.nb[1], xz.nb[2]])
        z = g.view(xz, d_inner, xz.ne[1], xz.ne[2], nb=[xz.nb[1], xz.nb[2]], offset=d_inner * _F32)
        conv_x = g.concat(conv, g.transpose(x), 0)
        last_conv = g.view(conv_x, d_conv - 1, d_inner, n_seqs, nb=[conv_x.nb[1], conv_x.nb[2]], offset=n_seq_tokens * conv_x.nb[0])
        dst = g.view(conv_states_all, (d_conv - 1) * d_inner * n_seqs, offset=x_.rs_head * (d_conv - 1) * d_inner * _F32)
        g.expand(g.cpy(last_conv, dst))
        x = _ssm_conv(g, conv_x, x_.w(d_conv, d_inner))
        x = g.add(x, x_.w(d_inner))
        x = g.unary("SILU", x)
        x_db = g.mul_mat(x_.w(d_inner, dt_rank + 2 * d_state), x)
        dt = g.view(x_db, dt_rank, n_seq_tokens, n_seqs, nb=[x_db.nb[1], x_db.nb[2]])
        b = g.view(x_db, d_state, 1, n_seq_tokens, n_seqs, nb=[d_state * _F32, x_db.nb[1], x_db.nb[2]], offset=dt_rank * _F32)
        c = g.view(x_db, d_state, 1, n_seq_tokens, n_seqs, nb=[d_state * _F32, x_db.nb[1], x_db.nb[2]], offset=(dt_rank + d_state) * _F32)
        if m.ssm_dt_b_c_rms:
            dt, b, c = (g.rms_norm(t) for t in (dt, b, c))
        dt = g.mul_mat(x_.w(dt_rank, d_inner), g.cont(dt))  # the installed llama.cpp makes dt contiguous first
        dt = g.add(dt, x_.w(d_inner))
        cur = x
        x = g.reshape(x, 1, d_inner, n_seq_tokens, n_seqs)
        a = x_.w(d_state, d_inner)

        def ssm_rows(states: Tensor, ids: Tensor, x=x, dt=dt, a=a, b=b, c=c) -> Tensor:
            ssm = g.reshape(states, d_state, 1, d_inner, rs_size)
            return _ssm_scan(g, ssm, x, dt, a, b, c, ids)

        y_ssm = x_.rs(rs_inp, ssm_states_all, m.n_embd_s, ssm_rows)
        n = d_state * d_inner * n_seqs
        g.expand(g.cpy(g.view(y_ssm, n, offset=x.nb[3] * x.ne[3]), g.view(ssm_states_all, n, offset=x_.rs_head * n // n_seqs * _F32)))
        y = g.view(y_ssm, d_inner, n_seq_tokens, n_seqs, nb=[x.nb[2], x.nb[3]])
        y = g.add(y, g.mul(cur, x_.w(d_inner)))
        y = g.glu_split("SWIGLU", g.cont(z), y)
        cur = g.mul_mat(x_.w(d_inner, m.n_embd), y)
        cur = g.reshape(cur, cur.ne[0], n_seq_tokens * n_seqs)
        if il == m.n_layer - 1:
            cur = g.get_rows(cur, out_ids)
            inp_l = g.get_rows(inp_l, out_ids)
        inp_l = g.add(cur, inp_l)
    return x_.output(inp_l, bias=False, rms=True)


# -- rwkv6 / rwkv7: the token shift and the layer loop they share ------------------------------------------------
def _token_shift_load(x_: _Builder, rs_inp: tuple[Tensor, Tensor], il: int) -> tuple[Tensor, Tensor]:
    """build_rwkv_token_shift_load; returns the shift and the layer's cache_r tensor."""
    m, g = x_.m, x_.g
    cache_r = g.external("f32", m.n_embd_r, x_.rs_size, name=f"cache_r_l{il}")
    shift = x_.rs(rs_inp, cache_r, m.n_embd_r)
    return g.reshape(shift, m.n_embd, m.token_shift_count, x_.b.n_seqs), cache_r


def _rwkv_graph(m: RecurrentModel, batch: Batch, rs_size: int, time_mix, channel_mix) -> Graph:
    """The layer loop of llama.cpp src/models/rwkv6.cpp and rwkv7.cpp (the same but for the mixes)."""
    x_ = _Builder(m, batch, rs_size)
    g = x_.g
    n_embd, n_seqs, n_seq_tokens, n_tokens = m.n_embd, batch.n_seqs, batch.n_seq_tokens, batch.n_tokens
    inp_l = x_.inp_embd()
    inp_l = x_.norm(inp_l, bias=True, rms=False)
    rs_inp = x_.rs_inp()
    out_ids = g.input("i32", batch.n_outputs, name="out_ids")
    state: dict[str, Tensor] = {}  # rwkv7's first layer value
    for il in range(m.n_layer):
        inp_l = g.reshape(inp_l, n_embd, n_seq_tokens, n_seqs)
        token_shift, cache_r = _token_shift_load(x_, rs_inp, il)
        nb = [token_shift.nb[1], token_shift.nb[2]]
        att_shift = g.view(token_shift, n_embd, 1, n_seqs, nb=nb)
        ffn_shift = g.view(token_shift, n_embd, 1, n_seqs, nb=nb, offset=n_embd * _F32)
        att_norm = x_.norm(inp_l, bias=True, rms=False)
        x_prev = g.concat(att_shift, g.view(att_norm, n_embd, n_seq_tokens - 1, n_seqs, nb=[att_norm.nb[1], att_norm.nb[2]]), 1)
        cur = time_mix(x_, rs_inp, att_norm, x_prev, state, il)
        ffn_inp = g.add(cur, inp_l)
        ffn_norm = x_.norm(ffn_inp, bias=True, rms=False)
        x_prev = g.concat(ffn_shift, g.view(ffn_norm, n_embd, n_seq_tokens - 1, n_seqs, nb=[ffn_norm.nb[1], ffn_norm.nb[2]]), 1)
        last = (n_seq_tokens - 1) * n_embd * _F32
        token_shift = g.concat(
            g.view(att_norm, n_embd, 1, n_seqs, nb=[att_norm.nb[1], att_norm.nb[2]], offset=last),
            g.view(ffn_norm, n_embd, 1, n_seqs, nb=[ffn_norm.nb[1], ffn_norm.nb[2]], offset=last),
            1,
        )
        n = n_embd * n_seqs * m.token_shift_count
        g.expand(g.cpy(g.view(token_shift, n), g.view(cache_r, m.n_embd_r * n_seqs, offset=m.n_embd_r * x_.rs_head * _F32)))
        ffn_inp = g.reshape(ffn_inp, n_embd, n_tokens)
        ffn_norm = g.reshape(ffn_norm, n_embd, n_tokens)
        x_prev = g.reshape(x_prev, n_embd, n_tokens)
        if m.arch == "rwkv6":
            cur = g.reshape(cur, n_embd, n_tokens)
        if il == m.n_layer - 1:
            ffn_inp = g.get_rows(ffn_inp, out_ids)
            ffn_norm = g.get_rows(ffn_norm, out_ids)
            x_prev = g.get_rows(x_prev, out_ids)
            if m.arch == "rwkv6":
                cur = g.get_rows(cur, out_ids)
        cur = channel_mix(x_, ffn_norm, x_prev)
        cur = g.add(cur, ffn_inp)
        if m.rescale_every_n_layers and (il + 1) % m.rescale_every_n_layers == 0:
            cur = g.scale(cur)
        inp_l = cur
    return x_.output(inp_l, bias=True, rms=False)


def _wkv_state_store(x_: _Builder, wkv_output: Tensor, il_state: Tensor) -> Tensor:
    """The new wkv state copied back into the layer's cache_s; returns the outputs part."""
    m, g, n_tokens, n_seqs = x_.m, x_.g, x_.b.n_tokens, x_.b.n_seqs
    cur = g.view(wkv_output, m.n_embd * n_tokens)
    wkv_state = g.view(wkv_output, m.n_embd * m.head_size * n_seqs, offset=m.n_embd * n_tokens * _F32)
    g.expand(g.cpy(wkv_state, g.view(il_state, m.n_embd_s * n_seqs, offset=m.n_embd_s * x_.rs_head * _F32)))
    return cur


def _group_norm(x_: _Builder, cur: Tensor, n_head: int) -> Tensor:
    """The per-head layer norm of the wkv outputs, then the time-mix ln weight and bias."""
    g, n_embd, n_tokens = x_.g, x_.m.n_embd, x_.b.n_tokens
    cur = g.reshape(cur, n_embd // n_head, n_head, n_tokens)
    cur = g.norm(cur)
    cur = g.reshape(cur, n_embd, n_tokens)
    return g.add(g.mul(cur, x_.w(n_embd)), x_.w(n_embd))


def _rwkv6_time_mix(x_: _Builder, rs_inp, cur: Tensor, x_prev: Tensor, state: dict, il: int) -> Tensor:
    """build_rwkv6_time_mix of llama.cpp src/models/rwkv6-base.cpp (rwkv6, not its qrwkv variant)."""
    m, g, b = x_.m, x_.g, x_.b
    n_embd, n_tokens, head_size = m.n_embd, b.n_tokens, m.head_size
    n_head = n_embd // head_size
    tm = m.time_mix_extra_dim
    cache_s = g.external("f32", m.n_embd_s, x_.rs_size, name=f"cache_s_l{il}")
    sx = _sub(g, x_prev, cur)
    sx = g.reshape(sx, n_embd, n_tokens)
    cur = g.reshape(cur, n_embd, n_tokens)
    xxx = g.add(g.mul(sx, x_.w(n_embd, 1, 1)), cur)
    xxx = g.reshape(g.unary("TANH", g.mul_mat(x_.w(n_embd, tm * 5), xxx)), tm, 1, 5, n_tokens)
    xxx = g.cont(g.permute(xxx, 0, 1, 3, 2))
    xxx = g.mul_mat(g.reshape(x_.w(tm, n_embd, 5), tm, n_embd, 1, 5), xxx)
    views = []
    if m.lerp_fused:
        sx = g.reshape(sx, n_embd, 1, n_tokens)
        cur = g.reshape(cur, n_embd, 1, n_tokens)
        xxx = g.add(g.mul(g.add(xxx, x_.w(n_embd, 1, 1, 5)), sx), cur)
        views = [g.view(xxx, n_embd, n_tokens, nb=[xxx.nb[1]], offset=n_embd * n_tokens * i * _F32) for i in range(5)]
    else:
        for i in range(5):
            v = g.view(xxx, n_embd, n_tokens, nb=[xxx.nb[1]], offset=n_embd * n_tokens * i * _F32)
            views.append(g.add(g.mul(g.add(v, x_.w(n_embd, 1, 1)), sx), cur))
    xw, xk, xv, xr, xg = views
    r = g.mul_mat(x_.w(n_embd, n_embd), xr)
    k = g.mul_mat(x_.w(n_embd, n_embd), xk)
    v = g.mul_mat(x_.w(n_embd, n_embd), xv)
    gate = g.unary("SILU", g.mul_mat(x_.w(n_embd, n_embd), xg))
    if m.n_head_kv not in (0, n_head):
        k = g.reshape(k, head_size, 1, m.n_head_kv, n_tokens)
        v = g.reshape(v, head_size, 1, m.n_head_kv, n_tokens)
        tmp = g.new_tensor("f32", head_size, n_head // m.n_head_kv, m.n_head_kv, n_tokens)
        k = g.repeat(k, tmp)
        v = g.repeat(v, tmp)
    k = g.reshape(k, head_size, n_head, n_tokens)
    v = g.reshape(v, head_size, n_head, n_tokens)
    r = g.reshape(r, head_size, n_head, n_tokens)
    td = m.time_decay_extra_dim
    w = g.mul_mat(x_.w(td, n_embd), g.unary("TANH", g.mul_mat(x_.w(n_embd, td), xw)))
    w = g.add(w, x_.w(n_embd))
    w = g.unary("EXP", g.unary("NEG", g.unary("EXP", w)))
    w = g.reshape(w, head_size, n_head, n_tokens)
    wkv_state = x_.rs(rs_inp, cache_s, m.n_embd_s)
    out = _wkv(g, "RWKV_WKV6", k, wkv_state, k, v, r, x_.w(head_size, n_head), w, wkv_state)
    cur = _wkv_state_store(x_, out, cache_s)
    cur = _group_norm(x_, cur, n_head)
    cur = g.mul(cur, gate)
    cur = g.mul_mat(x_.w(n_embd, n_embd), cur)
    return g.reshape(cur, n_embd, b.n_seq_tokens, b.n_seqs)


def _rwkv6_channel_mix(x_: _Builder, cur: Tensor, x_prev: Tensor) -> Tensor:
    m, g = x_.m, x_.g
    sx = _sub(g, x_prev, cur)
    xk = g.add(g.mul(sx, x_.w(m.n_embd, 1, 1)), cur)
    xr = g.add(g.mul(sx, x_.w(m.n_embd, 1, 1)), cur)
    r = g.unary("SIGMOID", g.mul_mat(x_.w(m.n_embd, m.n_embd), xr))
    k = g.dup("SQR", g.unary("RELU", g.mul_mat(x_.w(m.n_embd, m.n_ff), xk)))
    return g.mul(r, g.mul_mat(x_.w(m.n_ff, m.n_embd), k))


def rwkv6_graph(m: RecurrentModel, batch: Batch, rs_size: int) -> Graph:
    """llama.cpp src/models/rwkv6.cpp with build_rwkv6_time_mix / channel_mix of src/models/rwkv6-base.cpp."""
    return _rwkv_graph(m, batch, rs_size, _rwkv6_time_mix, _rwkv6_channel_mix)


def _rwkv7_time_mix(x_: _Builder, rs_inp, cur: Tensor, x_prev: Tensor, state: dict, il: int) -> Tensor:
    """build_rwkv7_time_mix of llama.cpp src/models/rwkv7-base.cpp."""
    m, g, b = x_.m, x_.g, x_.b
    n_embd, n_tokens, head_size = m.n_embd, b.n_tokens, m.head_size
    head_count = n_embd // head_size
    has_gating = m.n_lora_gate > 0
    cache_s = g.external("f32", m.n_embd_s, x_.rs_size, name=f"cache_s_l{il}")
    sx = _sub(g, x_prev, cur)
    dummy = g.new_tensor("f32", n_embd, b.n_seq_tokens, b.n_seqs, 6 if has_gating else 5)
    sx = g.repeat(sx, dummy)
    xxx = g.add(g.mul(sx, x_.w(n_embd, 1, 1, 6)), cur)
    xr, xw, xk, xv, xa, *rest = (
        g.view(xxx, n_embd, n_tokens, nb=[xxx.nb[1]], offset=n_embd * n_tokens * i * _F32) for i in range(6 if has_gating else 5)
    )
    r = g.mul_mat(x_.w(n_embd, n_embd), xr)
    w = g.add(g.mul_mat(x_.w(m.n_lora_decay, n_embd), g.unary("TANH", g.mul_mat(x_.w(n_embd, m.n_lora_decay), xw))), x_.w(n_embd))
    w = g.unary("EXP", g.scale(g.unary("SIGMOID", w)))
    k = g.mul_mat(x_.w(n_embd, n_embd), xk)
    v = g.mul_mat(x_.w(n_embd, n_embd), xv)
    if "v_first" not in state:
        state["v_first"] = v
    else:
        rank = m.n_lora_value_res_mix
        mix = g.unary("SIGMOID", g.add(g.mul_mat(x_.w(rank, n_embd), g.mul_mat(x_.w(n_embd, rank), xv)), x_.w(n_embd)))
        v = g.add(v, g.mul(_sub(g, state["v_first"], v), mix))
    gate = None
    if has_gating:
        gate = g.mul_mat(x_.w(m.n_lora_gate, n_embd), g.unary("SIGMOID", g.mul_mat(x_.w(n_embd, m.n_lora_gate), rest[0])))
    rank = m.n_lora_iclr
    a = g.unary("SIGMOID", g.add(g.mul_mat(x_.w(rank, n_embd), g.mul_mat(x_.w(n_embd, rank), xa)), x_.w(n_embd)))
    kk = g.reshape(g.mul(k, x_.w(n_embd)), head_size, head_count, n_tokens)
    kk = _l2_norm(g, kk)
    ka = g.mul(k, x_.w(n_embd))
    k = g.add(k, _sub(g, g.mul(a, ka), ka))
    r, w, k, v, a = (g.reshape(t, head_size, head_count, n_tokens) for t in (r, w, k, v, a))
    wkv_state = x_.rs(rs_inp, cache_s, m.n_embd_s)
    out = _wkv(g, "RWKV_WKV7", k, wkv_state, r, w, k, v, g.unary("NEG", kk), g.mul(kk, a), wkv_state)
    cur = _wkv_state_store(x_, out, cache_s)
    cur = _group_norm(x_, cur, head_count)
    rk = g.sum_rows(g.mul(g.mul(k, r), g.reshape(x_.w(n_embd), head_size, head_count)))
    cur = g.add(cur, g.reshape(g.mul(v, rk), n_embd, n_tokens))
    if gate is not None:
        cur = g.mul(cur, gate)
    cur = g.mul_mat(x_.w(n_embd, n_embd), cur)
    return g.reshape(cur, n_embd, b.n_seq_tokens, b.n_seqs)


def _rwkv7_channel_mix(x_: _Builder, cur: Tensor, x_prev: Tensor) -> Tensor:
    m, g = x_.m, x_.g
    sx = _sub(g, x_prev, cur)
    xk = g.add(g.mul(sx, x_.w(m.n_embd, 1, 1)), cur)
    k = g.dup("SQR", g.unary("RELU", g.mul_mat(x_.w(m.n_embd, m.n_ff), xk)))
    return g.mul_mat(x_.w(m.n_ff, m.n_embd), k)


def rwkv7_graph(m: RecurrentModel, batch: Batch, rs_size: int) -> Graph:
    """llama.cpp src/models/rwkv7.cpp with build_rwkv7_time_mix / channel_mix of src/models/rwkv7-base.cpp."""
    return _rwkv_graph(m, batch, rs_size, _rwkv7_time_mix, _rwkv7_channel_mix)


RECURRENT_GRAPHS = {"mamba": mamba_graph, "rwkv6": rwkv6_graph, "rwkv7": rwkv7_graph}
