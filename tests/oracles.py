"""The reference readers, reduced to one plain shape for comparison: ggml's C reader and gguf-py's GGUFReader.

Each returns ``{"version", "alignment", "data_offset", "kv": [(key, type, value)], "tensors": [(name, type,
offset, nbytes)]}`` with values as Python data (arrays as lists, floats as float32 bit patterns).
"""

from __future__ import annotations

import ctypes
import struct

import numpy as np

_NUMPY = {"u8": "u1", "i8": "i1", "u16": "u2", "i16": "i2", "u32": "u4", "i32": "i4", "f32": "f4", "bool": "u1", "u64": "u8", "i64": "i8", "f64": "f8"}


def norm(value, vtype):
    """A value in comparable form: floats as their bit patterns, bools as 0/1, arrays as lists."""
    if hasattr(value, "bits"):
        return value.bits  # a NaN whose payload a Python float would not keep
    if vtype == "f32":
        return struct.unpack("<I", struct.pack("<f", value))[0] if not isinstance(value, int) else value
    if vtype == "f64":
        return struct.unpack("<Q", struct.pack("<d", value))[0]
    if vtype == "bool":
        return int(value)
    return value


def norm_array(values, etype):
    if etype in ("f32", "f64"):
        arr = np.asarray(values, dtype="<" + _NUMPY[etype])
        return arr.view("<u" + str(arr.itemsize)).tolist()
    if etype == "str":
        return list(values)
    return [int(v) for v in np.asarray(values).tolist()]


def ggml_read(path):
    """What ggml's C reader (through ggml-python) sees, or None when it refuses the file."""
    import ggml

    ctx = ggml.gguf_init_from_file(str(path).encode(), ggml.gguf_init_params(no_alloc=True, ctx=None))
    if not ctx:
        return None
    try:
        kvs = []
        for i in range(ggml.gguf_get_n_kv(ctx)):
            key = ggml.gguf_get_key(ctx, i).decode()
            vtype = ggml.gguf_type_name(ggml.gguf_get_kv_type(ctx, i)).decode()
            if vtype == "arr":
                etype = ggml.gguf_type_name(ggml.gguf_get_arr_type(ctx, i)).decode()
                n = ggml.gguf_get_arr_n(ctx, i)
                if etype == "str":
                    value = [ggml.gguf_get_arr_str(ctx, i, j).decode() for j in range(n)]
                else:
                    size = np.dtype(_NUMPY[etype]).itemsize
                    raw = ctypes.string_at(ggml.gguf_get_arr_data(ctx, i), n * size) if n else b""
                    value = norm_array(np.frombuffer(raw, dtype=_NUMPY[etype]), etype)
                kvs.append((key, f"arr[{etype}]", value))
            elif vtype == "str":
                kvs.append((key, vtype, ggml.gguf_get_val_str(ctx, i).decode()))
            else:
                getter = {"bool": "bool"}.get(vtype, vtype)
                value = getattr(ggml, f"gguf_get_val_{getter}")(ctx, i)
                kvs.append((key, vtype, norm(value, vtype)))
        tensors = [
            (ggml.gguf_get_tensor_name(ctx, i).decode(), ggml.ggml_type_name(ggml.gguf_get_tensor_type(ctx, i)).decode(),
             ggml.gguf_get_tensor_offset(ctx, i), ggml.gguf_get_tensor_size(ctx, i))
            for i in range(ggml.gguf_get_n_tensors(ctx))
        ]  # fmt: skip
        return {"version": ggml.gguf_get_version(ctx), "alignment": ggml.gguf_get_alignment(ctx), "data_offset": ggml.gguf_get_data_offset(ctx), "kv": kvs, "tensors": tensors}
    finally:
        ggml.gguf_free(ctx)


def gguf_py_read(path):
    """What gguf-py's GGUFReader sees (it raises on files it refuses)."""
    from gguf import GGUFReader, GGUFValueType

    names = {GGUFValueType.UINT8: "u8", GGUFValueType.INT8: "i8", GGUFValueType.UINT16: "u16", GGUFValueType.INT16: "i16",
             GGUFValueType.UINT32: "u32", GGUFValueType.INT32: "i32", GGUFValueType.FLOAT32: "f32", GGUFValueType.BOOL: "bool",
             GGUFValueType.STRING: "str", GGUFValueType.ARRAY: "arr", GGUFValueType.UINT64: "u64", GGUFValueType.INT64: "i64",
             GGUFValueType.FLOAT64: "f64"}  # fmt: skip
    r = GGUFReader(path)
    kvs = []
    for key, field in r.fields.items():
        if key.startswith("GGUF."):
            continue  # the reader's own pseudo-fields for the header
        vtype = names[field.types[0]]
        if vtype == "arr":
            etype = names[field.types[1]] if len(field.types) > 1 else None
            if etype == "str":
                value = [bytes(field.parts[i]).decode() for i in field.data]
            elif etype is None:
                value = []
            else:
                value = norm_array(np.concatenate([field.parts[i] for i in field.data]) if field.data else [], etype)
            kvs.append((key, f"arr[{etype}]", value))
        else:
            kvs.append((key, vtype, norm(field.contents(), vtype)))
    tensors = [(t.name, t.tensor_type.name.lower(), int(t.data_offset) - r.data_offset, int(t.n_bytes)) for t in r.tensors]
    return {"version": int(r.fields["GGUF.version"].parts[-1][0]), "alignment": r.alignment, "data_offset": r.data_offset, "kv": kvs, "tensors": tensors}


def ours(path):
    """The same shape from gguf_construct."""
    from gguf_construct import load

    f = load(path, strict=False)
    kvs = []
    for field in f.metadata.fields():
        if field.type == "arr":
            value = field.value if field.array_type != "arr" else None
            kvs.append((field.key, field.type_label, norm_array(value, field.array_type) if value is not None else None))
        else:
            kvs.append((field.key, field.type, norm(field.value, field.type)))
    tensors = [(t.name, t.type.name, t.offset, t.nbytes) for t in f.tensors.values()]
    return {"version": f.version, "alignment": f.alignment, "data_offset": f.data_offset, "kv": kvs, "tensors": tensors}
