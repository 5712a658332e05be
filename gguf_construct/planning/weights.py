"""The model's weight buffers as llama.cpp allocates them (llama.cpp src/llama-model.cpp load_tensors,
src/llama-model-loader.cpp, ggml/src/ggml-cpu/repack.cpp).

Each tensor belongs to the input layer (embeddings: always the CPU), a repeating layer ``blk.N`` or the output
layer. With ``n_gpu_layers`` = g, the output layer is offloaded first (g >= 1) and then the last g - 1 repeating
layers. On the CPU a weight goes to the ``CPU_REPACK`` buffer when the CPU repacks its type (a copy in an
interleaved layout, read from the file at load) and to plain CPU memory otherwise. With mmap, the plain CPU
weights of each file are one ``CPU_Mapped`` buffer spanning their bytes in the file, first to last; without it,
a ``CPU`` buffer with each tensor padded to the alignment. When a model has no ``output.weight`` the output layer
reads ``token_embd.weight``: a second tensor over the same bytes only where it lands in another buffer type
(repacked, or offloaded), else the same tensor.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from .backends import backend_of
from .cache import aligned
from .shape import ModelShape, TensorSpan, architecture, memory_table

__all__ = ["CPU_BUFFERS", "WeightBuffers", "cpu_features", "layer_of", "repacks", "weight_buffers"]

#: the CPU's buffer type names; any other buffer is a device's
CPU_BUFFERS = frozenset({"CPU_Mapped", "CPU", "CPU_REPACK"})

_BLOCK = re.compile(r"blk\.(\d+)\.")
INPUT, OUTPUT = -1, -2  # the input and output "layers"
_INPUT_NAMES = ("token_embd.", "position_embd.", "token_types.", "per_layer_token_embd.")
#: the embeddings' norm is a repeating-layer tensor created with block 0 (src/llama-arch.cpp: "do the norms on
#: the first layer"; src/models/*.cpp create it as tn(LLM_TENSOR_TOKEN_EMBD_NORM, ..., 0)): it goes where layer 0 goes
_LAYER_0_NAMES = ("token_embd_norm.",)


def layer_of(name: str, n_layer: int, output_names: tuple[str, ...] = ()) -> int:
    """The layer a tensor is created for: ``blk.N`` → N, embeddings → INPUT, the embeddings' norm → 0 (unless the
    architecture names it among its ``output_names``: LFM2's final norm is called token_embd_norm), the rest
    (output head, final norm, classifier) → OUTPUT."""
    m = _BLOCK.match(name)
    if m:
        return int(m.group(1))
    if output_names and name.startswith(output_names):
        return OUTPUT
    if name.startswith(_LAYER_0_NAMES):
        return 0
    if name.startswith(_INPUT_NAMES):
        return INPUT
    return OUTPUT


def cpu_features() -> frozenset[str]:
    """This machine's CPU features that decide repacking ('avx2', 'avx512'), from numpy's own detection
    (the same CPUID flags ggml reads)."""
    import importlib

    found: dict[str, bool] = {}
    for where in ("numpy._core._multiarray_umath", "numpy.core._multiarray_umath"):  # numpy 2, numpy 1
        try:
            found = importlib.import_module(where).__cpu_features__
            break
        except (ImportError, AttributeError):
            continue
    names = {"avx2": "AVX2", "avx512": "AVX512F"}
    return frozenset(k for k, v in names.items() if found.get(v))


def repacks(t: TensorSpan, features: Iterable[str]) -> bool:
    """Whether the CPU backend copies ``t`` into its repacked buffer on a CPU with ``features``."""
    table = memory_table().repack
    base = t.name.split(".")[-2] if t.name.count(".") >= 1 else t.name
    if base in table["not_mul_mat"]:
        return False
    if len(t.shape) != (3 if base in table["mul_mat_id"] else 2):  # MUL_MAT repacks matrices, MUL_MAT_ID stacks
        return False
    features = set(features)
    return any(
        r["type"].lower() == t.type.lower() and r["cpu"] in features and t.shape[1] % int(r["rows_multiple"]) == 0 for r in table["types"]
    )


@dataclass(frozen=True)
class WeightBuffers:
    """Bytes of model buffers by llama.cpp's buffer type name ('CPU_Mapped', 'CPU', 'CPU_REPACK', 'GPU'), and by
    layer for the plan's per-layer view (INPUT = -1, OUTPUT = -2)."""

    by_buffer: Mapping[str, int]
    by_layer: Mapping[int, int]
    repacked: tuple[str, ...]

    @property
    def cpu(self) -> int:
        return sum(v for k, v in self.by_buffer.items() if k in CPU_BUFFERS)

    @property
    def gpu(self) -> int:
        """The bytes on devices other than the CPU (all of them)."""
        return sum(v for k, v in self.by_buffer.items() if k not in CPU_BUFFERS)

    @property
    def total(self) -> int:
        return sum(self.by_buffer.values())


def _with_duplicated_output(shape: ModelShape) -> list[TensorSpan]:
    rule = memory_table().duplicated_output
    tensors = list(shape.tensors)
    source = shape.tensor(rule["tensor"])
    if source is not None and shape.tensor(rule["as"]) is None:
        tensors.append(TensorSpan(rule["as"], source.type, source.shape, source.file, source.offset, source.nbytes))
    return tensors


def on_gpu(layer: int, n_layer: int, n_gpu_layers: int) -> bool:
    """llama.cpp's layer placement: i_gpu_start = max(n_layer + 1 - n_gpu_layers, 0); the output layer counts
    as layer n_layer; the input layer stays on the CPU."""
    if layer == INPUT or n_gpu_layers <= 0:
        return False
    index = n_layer if layer == OUTPUT else layer
    return index >= max(n_layer + 1 - n_gpu_layers, 0)


def weight_buffers(
    shape: ModelShape,
    *,
    features: Iterable[str] = (),
    use_mmap: bool = True,
    n_gpu_layers: int = 0,
    device_of: Callable[[str, int], str | None] | None = None,
) -> WeightBuffers:
    """The model's buffers for llama.cpp on a CPU with ``features`` (see ``cpu_features``), ``n_gpu_layers``
    offloaded to one GPU (whose buffer is counted with the CPU's rules). ``device_of(tensor name, layer)``, when
    given, places each tensor instead: the name of the device whose buffer holds it, or None for the CPU
    (``planning.devices``); a device's tensors are sized by its backend's rules (``planning.backends``)."""
    features = frozenset(features)
    by_buffer: dict[str, int] = defaultdict(int)
    by_layer: dict[int, int] = defaultdict(int)
    spans: dict[int, list[int]] = {}
    repacked = []
    placed: dict[str, str] = {}
    duplicate = memory_table().duplicated_output
    # the next-token-prediction blocks at the end (glm4moe's nextn_predict_layers) are created TENSOR_SKIP: not
    # loaded, not repacked (src/models/glm4-moe.cpp); in the usual tensor order they lie inside the mapped span
    skipped_from = shape.n_layer_cached
    entry = architecture(shape.arch) or {}
    output_names = tuple(f"{n}." for n in entry.get("output_tensors", ()))
    for t in _with_duplicated_output(shape):
        layer = layer_of(t.name, shape.n_layer, output_names)
        if skipped_from <= layer < shape.n_layer:
            continue
        device = device_of(t.name, layer) if device_of is not None else ("GPU" if on_gpu(layer, shape.n_layer, n_gpu_layers) else None)
        if device is not None:
            where = device
        elif repacks(t, features):
            where = "CPU_REPACK"
        else:
            where = "CPU_Mapped" if use_mmap else "CPU"
        placed[t.name] = where
        if t.name == duplicate["as"] and shape.tensor(t.name) is None and placed.get(duplicate["tensor"]) == where:
            continue  # the loader reuses the original when both land in the same buffer type (create_tensor)
        if where == "CPU_REPACK":
            repacked.append(t.name)
        if where == "CPU_Mapped":
            first, last = spans.get(t.file, [t.offset, t.offset + t.nbytes])
            spans[t.file] = [min(first, t.offset), max(last, t.offset + t.nbytes)]
            by_layer[layer] += t.nbytes
            continue
        size = backend_of(device).nbytes(t.shape, t.type) if device is not None else aligned(t.nbytes)
        by_buffer[where] += size
        by_layer[layer] += size
    for first, last in spans.values():
        by_buffer["CPU_Mapped"] += last - first
    return WeightBuffers(dict(by_buffer), dict(by_layer), tuple(repacked))
