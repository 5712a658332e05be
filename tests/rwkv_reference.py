"""A numpy RWKV v6/v7 forward pass over an rwkv.cpp file, written from rwkv.cpp's graph (rwkv_graph.inc:
rwkv_att_v6/v7, rwkv_ffn_v6/v7, ggml's wkv6/wkv7 recurrences), in float64: an oracle for model sizes no
reference logits exist for (several heads, unequal LoRA ranks). It reads rwkv.cpp's layout, never the GGUF one,
so it checks the migration's reshapes independently of llama.cpp.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gguf_construct.api.legacy_file import load_rwkv


def _norm(x: np.ndarray, eps: float) -> np.ndarray:
    """ggml_norm over the last axis."""
    mean = x.mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + eps)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


class RwkvReference:
    """Token-by-token evaluation of an rwkv.cpp v6 or v7 file; :meth:`logits` after a prompt."""

    def __init__(self, path: str | Path):
        f = load_rwkv(path)
        self.p = {name: t.to_numpy().astype(np.float64) for name, t in f.tensors.items()}
        self.version, self.n_layer, self.d = f.metadata["architecture"], f.metadata["n_layer"], f.metadata["n_embed"]
        self.head_size = self.p["blocks.0.att.time_faaaa"].shape[1] if self.version == "v6.0" else self.p["blocks.0.att.r_k"].shape[1]
        self.n_head = self.d // self.head_size

    def _w(self, name: str) -> np.ndarray:
        return self.p[name]

    def logits(self, tokens: list[int]) -> np.ndarray:
        H, N = self.n_head, self.head_size
        att_x = [np.zeros(self.d) for _ in range(self.n_layer)]
        ffn_x = [np.zeros(self.d) for _ in range(self.n_layer)]
        state = [np.zeros((H, N, N)) for _ in range(self.n_layer)]
        for token in tokens:
            x = _norm(self._w("emb.weight")[token], 1e-5) * self._w("blocks.0.ln0.weight") + self._w("blocks.0.ln0.bias")
            v_first = None
            for i in range(self.n_layer):
                b = f"blocks.{i}."
                xa = _norm(x, 1e-5) * self._w(b + "ln1.weight") + self._w(b + "ln1.bias")
                if self.version == "v6.0":
                    out, state[i] = self._att_v6(b, xa, att_x[i], state[i])
                else:
                    out, state[i], v_first = self._att_v7(b, xa, att_x[i], state[i], v_first)
                att_x[i] = xa
                x = x + out
                xf = _norm(x, 1e-5) * self._w(b + "ln2.weight") + self._w(b + "ln2.bias")
                x = x + (self._ffn_v6 if self.version == "v6.0" else self._ffn_v7)(b, xf, ffn_x[i])
                ffn_x[i] = xf
            x = _norm(x, 1e-5) * self._w("ln_out.weight") + self._w("ln_out.bias")
        return self._w("head.weight") @ x

    def _group_norm(self, b: str, y: np.ndarray) -> np.ndarray:
        return _norm(y.reshape(self.n_head, self.head_size), 64e-5).reshape(-1) * self._w(b + "att.ln_x.weight") + self._w(
            b + "att.ln_x.bias"
        )

    def _att_v6(self, b: str, x: np.ndarray, prev: np.ndarray, S: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        H, N, w = self.n_head, self.head_size, self._w
        sx = prev - x
        xxx = np.tanh(w(b + "att.time_maa_w1") @ (x + sx * w(b + "att.time_maa_x"))).reshape(5, -1)
        m = [w(b + "att.time_maa_w2")[j] @ xxx[j] for j in range(5)]
        xw, xk, xv, xr, xg = (x + sx * (w(b + f"att.time_maa_{c}") + m[j]) for j, c in enumerate("wkvrg"))
        r, k, v = (w(b + f"att.{n}.weight") @ z for n, z in (("receptance", xr), ("key", xk), ("value", xv)))
        g = w(b + "att.gate.weight") @ xg
        g = g * _sigmoid(g)
        decay = w(b + "att.time_decay_w2") @ np.tanh(w(b + "att.time_decay_w1") @ xw) + w(b + "att.time_decay").reshape(-1)
        decay = np.exp(-np.exp(decay)).reshape(H, N)
        u = w(b + "att.time_faaaa").reshape(H, N)
        r, k, v = r.reshape(H, N), k.reshape(H, N), v.reshape(H, N)
        kv = k[:, :, None] * v[:, None, :]  # [h, key i, value j]
        y = np.einsum("hi,hij->hj", r, u[:, :, None] * kv + S)
        S = S * decay[:, :, None] + kv
        return w(b + "att.output.weight") @ (self._group_norm(b, y.reshape(-1)) * g), S

    def _att_v7(self, b: str, x: np.ndarray, prev: np.ndarray, S: np.ndarray, v_first: np.ndarray | None):
        H, N, w = self.n_head, self.head_size, self._w
        sx = prev - x
        mix = w(b + "att.x_rwkvag").reshape(6, -1)
        xr, xw, xk, xv, xa, xg = (x + sx * mix[j] for j in range(6))
        r = w(b + "att.receptance.weight") @ xr
        g = w(b + "att.g2") @ _sigmoid(w(b + "att.g1") @ xg)
        a = _sigmoid(w(b + "att.a2") @ (w(b + "att.a1") @ xa) + w(b + "att.a0").reshape(-1))
        decay = w(b + "att.w2") @ np.tanh(w(b + "att.w1") @ xw) + w(b + "att.w0").reshape(-1)
        decay = np.exp(-0.606531 * _sigmoid(decay))
        k = w(b + "att.key.weight") @ xk
        kk = (k * w(b + "att.k_k").reshape(-1)).reshape(H, N)
        kk = kk / np.maximum(np.linalg.norm(kk, axis=1, keepdims=True), 1e-12)
        ka = k * w(b + "att.k_a").reshape(-1)
        k = k + a * ka - ka
        v = w(b + "att.value.weight") @ xv
        if v_first is None:
            v_first = v
        else:
            v = v + (v_first - v) * _sigmoid(w(b + "att.v2") @ (w(b + "att.v1") @ xv) + w(b + "att.v0").reshape(-1))
        r, k, v, decay, a = (z.reshape(H, N) for z in (r, k, v, decay, a))
        aa, bb = -kk, kk * a
        # ggml's wkv7: S[h, i (value), j (key)]
        sa = np.einsum("hij,hj->hi", S, aa)
        S = S * decay[:, None, :] + v[:, :, None] * k[:, None, :] + sa[:, :, None] * bb[:, None, :]
        y = np.einsum("hij,hj->hi", S, r)
        out = self._group_norm(b, y.reshape(-1))
        out = out + (v * (k * r * w(b + "att.r_k").reshape(H, N)).sum(1, keepdims=True)).reshape(-1)
        return w(b + "att.output.weight") @ (out * g), S, v_first

    def _ffn_v6(self, b: str, x: np.ndarray, prev: np.ndarray) -> np.ndarray:
        w = self._w
        sx = prev - x
        xk, xr = x + sx * w(b + "ffn.time_maa_k"), x + sx * w(b + "ffn.time_maa_r")
        r = _sigmoid(w(b + "ffn.receptance.weight") @ xr)
        return r * (w(b + "ffn.value.weight") @ np.maximum(w(b + "ffn.key.weight") @ xk, 0) ** 2)

    def _ffn_v7(self, b: str, x: np.ndarray, prev: np.ndarray) -> np.ndarray:
        w = self._w
        xk = x + (prev - x) * w(b + "ffn.x_k").reshape(-1)
        return w(b + "ffn.value.weight") @ np.maximum(w(b + "ffn.key.weight") @ xk, 0) ** 2
