"""``safe_open``: the safetensors library's way of reading a file, for code written against it.

``gguf_construct.load`` shows every format alike: ``tensor.shape`` in ggml order (fastest dimension first) and
``to_numpy()`` as float32. A safetensors user expects the library's view instead, which this gives::

    with gguf_construct.safe_open("model.safetensors", framework="numpy") as f:
        for name in f.keys():                      # the stored tensors, sorted by name
            array = f.get_tensor(name)             # native dtype (F16 stays float16), numpy/PyTorch order
        f.metadata()                               # __metadata__, or None

The same works on a GGUF file: plain tensors keep their type (F16, I32 …; BF16 through PyTorch), quantized ones
are dequantized to float32; shapes are in numpy order (ggml's reversed) and ``metadata()`` holds the string keys.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..formats.gguf.schema import MAGIC
from .gguf_file import load_gguf

FRAMEWORKS = ("numpy", "np", "pt", "torch")
#: GGUF's plain types as stored: numpy dtype codes (BF16 as its bits)
_GGUF_PLAIN = {"F32": "f4", "F16": "f2", "BF16": "u2", "F64": "f8", "I8": "i1", "I16": "i2", "I32": "i4", "I64": "i8"}


class safe_open:  # noqa: N801 - the safetensors library's name, so that code written for it reads the same
    """A safetensors (or GGUF) file opened for ``keys()``, ``get_tensor(name)`` and ``metadata()``, as
    ``safetensors.safe_open`` does; ``framework`` is "numpy" (or "np") or "pt" (PyTorch tensors, CPU)."""

    def __init__(self, filename: str | os.PathLike[str], framework: str = "numpy", device: str = "cpu"):
        if framework not in FRAMEWORKS:
            raise ValueError(f"framework must be one of {FRAMEWORKS}, not {framework!r}")
        if device != "cpu":
            raise ValueError("only device='cpu' is supported")
        from .safetensors_file import load_safetensors

        self._framework = "pt" if framework in ("pt", "torch") else "numpy"
        from ..formats.base import open_regular

        with open_regular(filename) as f:  # a FIFO or a device is refused (file.not_regular), never waited on
            magic = f.read(4)
        # a GGUF file starts with its magic (in either byte order); anything else is read as safetensors, strictly
        opened: Any = load_gguf(filename) if magic == MAGIC else load_safetensors(filename)
        self._file: Any = opened
        self._tensors: Any = opened.entries if opened.format == "safetensors" else opened.tensors

    def __enter__(self) -> safe_open:
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()

    def keys(self) -> list[str]:
        """The tensor names, sorted (as the safetensors library lists them); for safetensors, the stored tensors
        (a quantized weight's ``.scale``/``.bias`` companions too)."""
        return sorted(self._tensors)

    def metadata(self) -> dict[str, str] | None:
        """``__metadata__`` (None when the file has none); for GGUF, the keys whose values are strings."""
        md = self._file.metadata
        if self._file.format == "gguf":
            md = {k: v for k, v in md.items() if isinstance(v, str)}
        return dict(md) if md else None

    def get_tensor(self, name: str) -> Any:
        """The tensor as the file stores it: its own dtype, numpy order, a writable copy (a ``torch.Tensor`` with
        framework "pt"). BF16 has no numpy dtype: with "numpy" it raises TypeError, as the safetensors library does."""
        t = self._tensors[name]
        if self._file.format == "safetensors":
            dtype = t.entry.dtype
            _check_whole_bytes(name, dtype)
            array, shape = t.array(), tuple(t.entry.shape)
        else:
            dtype, shape = t.type.name.upper(), tuple(reversed(t.shape))
            order = "<" if t.byte_order == "little" else ">"
            if dtype in _GGUF_PLAIN:
                array = np.frombuffer(t.data, dtype=order + _GGUF_PLAIN[dtype])
            else:
                dtype, array = "F32", t.to_numpy()
            array = np.asarray(array).reshape(shape)
        if dtype == "BF16":
            return self._bf16(array.reshape(shape))
        out = np.array(array, dtype=array.dtype.newbyteorder("="), copy=True).reshape(shape)
        if self._framework == "pt":
            import torch  # optional: only with framework "pt"

            return torch.from_numpy(out)
        return out

    def _bf16(self, bits: np.ndarray) -> Any:
        if self._framework != "pt":
            raise TypeError(
                "BF16 has no numpy dtype: open the file with framework='pt', or read float32 "
                "values with gguf_construct.load(...).tensors[name].to_numpy()"
            )
        import torch  # optional: only with framework "pt"

        return torch.from_numpy(np.array(bits, dtype=np.int16, copy=True)).view(torch.bfloat16)


def _check_whole_bytes(name: str, dtype: str) -> None:
    """Refuse (``tensor.dtype``) a dtype that packs values into fewer bits than a byte (F4, F6_E2M3, F6_E3M2):
    numpy has no such dtype and neither does mlx; the safetensors library refuses them with numpy too (an
    AttributeError or an error naming the dtype), here a clean ``UnsupportedTypeError`` saying where the values are."""
    from ..core import rules
    from ..formats.safetensors.dtypes import dtypes

    bits = dtypes()[dtype].bits
    if bits % 8:
        raise rules.TENSOR_DTYPE.error(
            f"{dtype} packs {bits}-bit values, which numpy has no dtype for (the safetensors library refuses it with numpy "
            "too); its packed bytes are gguf_construct.load(path).tensors[name].data",
            path=name,
        )


__all__ = ["safe_open"]
