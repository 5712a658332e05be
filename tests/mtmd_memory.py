"""llama.cpp's multimodal loader's own account of a projector's memory: the oracle of ``planning.mmproj``.

:func:`measure` loads a text model and a projector with libmtmd (llama-cpp-python's ``mtmd_init_from_file``) on the
CPU and reads ``clip_get_mem_usage`` of its vision and audio contexts (the ``std::map`` it returns by value, walked as
tests/llama_memory.py walks llama.cpp's memory breakdown): the bytes per device of the weights (loaded without
warmup) and of the weights plus the compute buffer reserved at warmup, so the compute buffer is their difference,
exact where the log prints MiB. :func:`graph` encodes one image and lists the nodes the scheduler runs
(``cb_eval``), to compare a planned graph with node for node.

Each measurement runs in a child process (``python -m tests.mtmd_memory``): llama.cpp aborts the process on some
headers (a key of another type than it reads), and its log callback is its own there.
"""

from __future__ import annotations

import ctypes
import json
import os
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Measured", "graph", "graph_and_weights", "measure"]

_FLASH = {"auto": -1, "off": 0, "on": 1}
_TENSOR = 336  # sizeof(struct ggml_tensor): type at 0, buffer at 8, ne at 16, src[10] at 152, view_src at 232
_USAGE_WEIGHTS = 1  # GGML_BACKEND_BUFFER_USAGE_WEIGHTS


@dataclass
class Measured:
    """Bytes per device name: the weights, and the weights with the warmup's compute buffer. ``refused`` is what
    libmtmd said (or the signal that ended it) when it did not load the pair; the byte maps are then empty."""

    weights: dict[str, int]
    total: dict[str, int]
    refused: str | None = None

    @property
    def compute(self) -> dict[str, int]:
        return {k: v - self.weights.get(k, 0) for k, v in self.total.items()}


def _run(*args: str, timeout: float = 120) -> dict[str, Any]:
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-m", "tests.mtmd_memory", *args], capture_output=True, text=True, timeout=timeout, env=env)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        return {"refused": f"exit {done.returncode}: " + (done.stderr.strip().splitlines() or ["no output"])[0][:300]}
    return json.loads(lines[-1])


def measure(text_model: str | os.PathLike[str], mmproj: str | os.PathLike[str], flash_attn: str = "auto") -> Measured:
    """What libmtmd allocates for ``mmproj`` beside ``text_model`` on the CPU, with ``flash_attn``."""
    out = _run("measure", str(text_model), str(mmproj), flash_attn)
    return Measured(out.get("weights", {}), out.get("total", {}), out.get("refused"))


def graph(text_model: str | os.PathLike[str], mmproj: str | os.PathLike[str], flash_attn: str, image: int) -> list[tuple]:
    """The nodes of the graph libmtmd runs for one ``image`` x ``image`` picture (for ``-image`` seconds of silence
    when negative: an audio encoder): (op, type, ne, is view)."""
    return graph_and_weights(text_model, mmproj, flash_attn, image)[0]


def graph_and_weights(
    text_model: str | os.PathLike[str], mmproj: str | os.PathLike[str], flash_attn: str, image: int
) -> tuple[list[tuple], list[int]]:
    """:func:`graph`, and the sizes of the weights buffers its nodes read (the buffer libmtmd allocated for the
    weights, padding included: ``clip_get_mem_usage`` counts the tensors' own sizes)."""
    out = _run("graph", str(text_model), str(mmproj), flash_attn, str(image))
    if "refused" in out:
        raise RuntimeError(out["refused"])
    return [(op, t, tuple(ne), view) for op, t, ne, view in out["nodes"]], out["weights_buffers"]


# -- the child process ---------------------------------------------------------------------------------------
class _Child:
    def __init__(self, text_model: str) -> None:
        from llama_cpp import llama_cpp as L
        from llama_cpp import mtmd_cpp as M

        self.L, self.M = L, M
        self.log: list[str] = []

        @L.llama_log_callback
        def _log(level, text, user_data):  # noqa: ARG001
            self.log.append(text.decode("utf-8", "replace"))

        self._log = _log  # kept alive: llama.cpp holds the pointer
        L.llama_log_set(_log, None)
        M.mtmd_log_set(_log, None)
        L.llama_backend_init()
        lib = Path(M.__file__).parent / "lib"
        self.base = ctypes.CDLL(str(lib / "libggml-base.so"))
        for name, res, args in (
            ("ggml_backend_dev_name", ctypes.c_char_p, [ctypes.c_void_p]),
            ("ggml_op_desc", ctypes.c_char_p, [ctypes.c_void_p]),
            ("ggml_type_name", ctypes.c_char_p, [ctypes.c_int]),
            ("ggml_backend_buffer_get_size", ctypes.c_size_t, [ctypes.c_void_p]),
            ("ggml_backend_buffer_get_usage", ctypes.c_int, [ctypes.c_void_p]),
        ):
            fn = getattr(self.base, name)
            fn.restype, fn.argtypes = res, args
        mtmd = ctypes.CDLL(str(lib / "libmtmd.so"))
        self.usage_fn = mtmd._Z18clip_get_mem_usagePK8clip_ctx
        self.usage_fn.restype, self.usage_fn.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_void_p]
        mp = L.llama_model_default_params()
        mp.n_gpu_layers = 0
        self.model = L.llama_model_load_from_file(text_model.encode(), mp)
        if not self.model:
            raise RuntimeError("llama.cpp refused the text model")

    def context(self, mmproj: str, flash_attn: str, warmup: bool, cb_eval: Any = None) -> Any:
        p = self.M.mtmd_context_params_default()
        p.use_gpu, p.warmup, p.n_threads, p.print_timings = False, warmup, 1, False
        p.flash_attn_type = _FLASH[flash_attn]
        if cb_eval is not None:
            p.cb_eval = cb_eval
        ctx = self.M.mtmd_init_from_file(mmproj.encode(), self.model, p)
        if not ctx:
            raise LookupError("".join(self.log[-3:]).strip() or "mtmd_init_from_file returned NULL")
        return ctx

    def usage(self, ctx: Any) -> dict[str, int]:
        """clip_get_mem_usage of the context's vision and audio encoders, summed per device (the std::map walked)."""
        found: dict[str, int] = {}
        for clip in struct.unpack("<2Q", ctypes.string_at(ctx, 16)):  # mtmd_context's first members: ctx_v, ctx_a
            if not clip:
                continue
            out = (ctypes.c_uint8 * 48)()
            self.usage_fn(ctypes.addressof(out), clip)
            root = struct.unpack_from("<Q", bytes(out), 24)[0]
            stack = [root] if root else []
            while stack:
                node = stack.pop()
                left, right = struct.unpack("<2Q", ctypes.string_at(node + 16, 16))
                dev, size = struct.unpack("<2Q", ctypes.string_at(node + 32, 16))
                name = self.base.ggml_backend_dev_name(dev).decode()
                found[name] = found.get(name, 0) + size
                stack += [n for n in (left, right) if n]
        return found

    def nodes(self, mmproj: str, flash_attn: str, image: int) -> tuple[list[list[Any]], dict[int, int]]:
        """The nodes run, and the weights buffers their sources lie in (address → allocated size)."""
        M = self.M
        seen: list[list[Any]] = []
        weights: dict[int, int] = {}

        @self.L.ggml_backend_sched_eval_callback
        def _eval(t, ask, user_data):  # noqa: ARG001
            if ask:
                raw = ctypes.string_at(t, _TENSOR)
                ne = list(struct.unpack_from("<4q", raw, 16))
                view = struct.unpack_from("<Q", raw, 232)[0] != 0
                kind = self.base.ggml_type_name(struct.unpack_from("<i", raw, 0)[0]).decode()
                seen.append([self.base.ggml_op_desc(t).decode(), kind, ne, view])
                for src in struct.unpack_from("<10Q", raw, 152):
                    buffer = struct.unpack_from("<Q", ctypes.string_at(src, 16), 8)[0] if src else 0
                    if buffer and self.base.ggml_backend_buffer_get_usage(buffer) == _USAGE_WEIGHTS:
                        weights[buffer] = self.base.ggml_backend_buffer_get_size(buffer)
            return False

        ctx = self.context(mmproj, flash_attn, True, _eval)
        if image > 0:
            pixels = (ctypes.c_ubyte * (image * image * 3))()
            bitmap = M.mtmd_bitmap_init(image, image, pixels)
        else:  # -image seconds of silence at the encoder's sample rate
            samples = -image * M.mtmd_get_audio_sample_rate(ctx)
            bitmap = M.mtmd_bitmap_init_from_audio(samples, (ctypes.c_float * samples)())
        chunks = M.mtmd_input_chunks_init()
        text = M.mtmd_input_text()
        text.text = M.mtmd_default_marker()
        text.text_len, text.add_special, text.parse_special = len(text.text), False, True
        if M.mtmd_tokenize(ctx, chunks, ctypes.byref(text), (M.mtmd_bitmap_p_ctypes * 1)(bitmap), 1):
            raise RuntimeError("mtmd_tokenize failed: " + "".join(self.log[-2:]))
        for i in range(M.mtmd_input_chunks_size(chunks)):
            chunk = M.mtmd_input_chunks_get(chunks, i)
            if M.mtmd_input_chunk_get_type(chunk) != 0 and M.mtmd_encode_chunk(ctx, chunk):
                raise RuntimeError("mtmd_encode_chunk failed")
        return seen, weights


def _main(argv: list[str]) -> None:
    what, text_model, mmproj, flash_attn = argv[:4]
    child = _Child(text_model)
    try:
        if what == "graph":
            nodes, weights = child.nodes(mmproj, flash_attn, int(argv[4]))
            print(json.dumps({"nodes": nodes, "weights_buffers": list(weights.values())}))
            return
        weights = child.usage(child.context(mmproj, flash_attn, False))
        total = child.usage(child.context(mmproj, flash_attn, True))
        print(json.dumps({"weights": weights, "total": total}))
    except LookupError as e:
        print(json.dumps({"refused": str(e)}))


if __name__ == "__main__":
    _main(sys.argv[1:])
