"""How a device's backend sizes the weights and caches it holds (``schema/memory.json`` ``backends``): its buffer
type's alignment and the padding its ``get_alloc_size`` adds. CUDA (and ROCm, MUSA) and SYCL pad a quantized
tensor's last row to 512 elements and align to 128 bytes; Metal aligns to 32 and Vulkan to the device's storage
buffer offset alignment (taken as 64). A device whose name no kind claims (an RPC server, the CPU) follows the
CPU's rules, the ones checked against llama.cpp; the others are modelled from ggml's source and not verified
here (no GPU).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..core.tables import GGML_TYPES
from ..formats.gguf.offsets import ggml_nbytes
from .shape import memory_table

__all__ = ["CPU_RULES", "Backend", "backend_of"]


@dataclass(frozen=True)
class Backend:
    """A buffer type's sizing rules: ``kind`` (CPU, CUDA, SYCL, Metal, Vulkan), its alignment in bytes and the
    row length in elements a quantized tensor's rows are padded to (0: none)."""

    kind: str
    alignment: int
    quantized_row_padding: int = 0

    def nbytes(self, ne: Sequence[int], ggml_type: str) -> int:
        """The bytes a tensor of shape ``ne`` (ggml order) and ``ggml_type`` takes in this backend's buffer:
        ggml_nbytes, plus the padding of the last row for a quantized type, rounded up to the alignment."""
        size = ggml_nbytes(ne, ggml_type)
        pad = self.quantized_row_padding
        if pad and GGML_TYPES.lookup(ggml_type).block_size > 1 and ne and ne[0] % pad:  # ggml_is_quantized
            size += ggml_nbytes((pad - ne[0] % pad,), ggml_type)
        return -(-size // self.alignment) * self.alignment


CPU_RULES = Backend("CPU", int(memory_table().buffer["alignment"]))


def backend_of(device: str | None) -> Backend:
    """The rules of the backend a device name (as llama.cpp names devices: ``CUDA0``, ``ROCm1``, ``MTL0``,
    ``Vulkan0``, ``SYCL0``, ``RPC0[host:port]``) belongs to; None or an unclaimed name: the CPU's."""
    if device:
        for kind, spec in memory_table().backends["kinds"].items():
            if any(device.startswith(p) for p in spec["prefixes"]):
                return Backend(kind, int(spec["alignment"]), int(spec["quantized_row_padding"]))
    return CPU_RULES
