"""Several devices on one CPU machine, for the planning tests: llama.cpp's RPC backend makes each ``rpc-server``
a device with its own buffers. The servers run here as Python processes serving llama-cpp-python's CPU device
through ``ggml_backend_rpc_start_server`` on 127.0.0.1; the model is loaded in a fresh process (RPC devices are
registered process-wide, for good) with the devices, layers, split and overrides asked for, and llama.cpp's own
memory breakdown per buffer type comes back as JSON.

The RPC library is ggml's ``ggml-rpc`` built as a loadable backend from the llama.cpp that llama-cpp-python
vendors (``GGML_BACKEND_DL=ON GGML_RPC=ON GGML_CPU=OFF``: only ggml-base and ggml-rpc are compiled, about two
minutes on one core), named by ``GGUF_CONSTRUCT_GGML_RPC``; ``rpc_library`` builds it when that is unset and
``GGUF_CONSTRUCT_BUILD_RPC=1`` says a build is wanted (the ``rpc`` test tier).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RPC_VARIABLE = "GGUF_CONSTRUCT_GGML_RPC"

_SERVER = """
import ctypes, os, sys
from tests.llama_memory import lib_dir
where = lib_dir()
ggml = ctypes.CDLL(str(where / "libggml.so"), mode=os.RTLD_GLOBAL)
rpc = ctypes.CDLL(sys.argv[1], mode=os.RTLD_GLOBAL)
ggml.ggml_backend_dev_by_type.restype = ctypes.c_void_p
ggml.ggml_backend_dev_by_type.argtypes = [ctypes.c_int]
cpu = ggml.ggml_backend_dev_by_type(0)  # GGML_BACKEND_DEVICE_TYPE_CPU
devs = (ctypes.c_void_p * 1)(cpu)
rpc.ggml_backend_rpc_start_server.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p]
print("serving", flush=True)
rpc.ggml_backend_rpc_start_server(sys.argv[2].encode(), None, 1, 1, devs)
"""

_MEASURE = """
import json, sys
from tests.llama_memory import _lib, _context
from tests.planning.rpc_devices import rpc_model_params
spec = json.loads(sys.argv[1])
lib = _lib()
L = lib.L
mp, keep = rpc_model_params(lib, spec)
model = L.llama_model_load_from_file(spec["path"].encode(), mp)
if not model:
    print(json.dumps({"refused": "".join(lib.log[-20:])}))
    sys.exit(0)
try:
    ctx = _context(lib, model, **spec["context"])
except RuntimeError as e:
    print(json.dumps({"refused": str(e)}))
    sys.exit(0)
print(json.dumps({"n_ctx": L.llama_n_ctx(ctx), "buffers": lib.breakdown(ctx)}))
"""


def rpc_model_params(lib: Any, spec: dict[str, Any]) -> tuple[Any, list[Any]]:
    """llama_model_params for ``spec``'s model spread over its RPC ``endpoints`` (each an rpc-server), with its
    layers, split mode, main device, tensor split and overrides, through either bindings of the oracle (``lib``:
    ``tests.llama_memory._lib()``); and what must stay alive while the model loads. Run in the measuring process."""
    import ctypes

    from tests.llama_memory import lib_dir

    L = lib.L
    ggml = ctypes.CDLL(str(lib_dir() / "libggml.so"), mode=os.RTLD_GLOBAL)
    rpc = ctypes.CDLL(spec["rpc"], mode=os.RTLD_GLOBAL)
    rpc.ggml_backend_rpc_add_server.restype = ctypes.c_void_p
    rpc.ggml_backend_rpc_add_server.argtypes = [ctypes.c_char_p]
    ggml.ggml_backend_register.argtypes = [ctypes.c_void_p]
    ggml.ggml_backend_reg_dev_get.restype = ctypes.c_void_p
    ggml.ggml_backend_reg_dev_get.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    ggml.ggml_backend_dev_by_type.restype = ctypes.c_void_p
    ggml.ggml_backend_dev_buffer_type.restype = ctypes.c_void_p
    ggml.ggml_backend_dev_buffer_type.argtypes = [ctypes.c_void_p]
    devices = []
    for endpoint in spec["endpoints"]:
        reg = rpc.ggml_backend_rpc_add_server(endpoint.encode())
        ggml.ggml_backend_register(reg)
        devices.append(ggml.ggml_backend_reg_dev_get(reg, 0))
    mp = L.llama_model_default_params()
    mp.load_mode = L.LLAMA_LOAD_MODE_MMAP if spec.get("use_mmap", True) else L.LLAMA_LOAD_MODE_NONE
    mp.n_gpu_layers = spec["n_gpu_layers"]
    mp.split_mode = {"none": 0, "layer": 1, "row": 2}[spec.get("split_mode", "layer")]
    mp.main_gpu = spec.get("main_gpu", 0)
    split = list(spec.get("tensor_split", ())) + [0.0] * (16 - len(spec.get("tensor_split", ())))
    cpu = ggml.ggml_backend_dev_by_type(0)
    rows = [
        (pattern.encode(), ggml.ggml_backend_dev_buffer_type(cpu if target == "CPU" else devices[spec["names"].index(target)]))
        for pattern, target in spec.get("overrides", ())
    ]
    keep: list[Any] = []
    if lib.cffi:  # a newer llama.h's structs, through llama-cpp-py-sync's declarations
        ffi = lib.ffi
        owned = ffi.new("ggml_backend_dev_t[]", [ffi.cast("ggml_backend_dev_t", d) for d in devices] + [ffi.NULL])
        owned_split = ffi.new("float[16]", split)
        keep += [owned, owned_split]  # the struct holds pointers only
        mp.devices, mp.tensor_split = owned, owned_split
        if rows:
            patterns = [ffi.new("char[]", p) for p, _ in rows]
            table = ffi.new("struct llama_model_tensor_buft_override[]", len(rows) + 1)
            for i, (pattern, (_, buft)) in enumerate(zip(patterns, rows)):
                table[i].pattern, table[i].buft = pattern, ffi.cast("ggml_backend_buffer_type_t", buft)
            keep += [patterns, table]
            mp.tensor_buft_overrides = table
        return mp, keep
    dev_array = (ctypes.c_void_p * (len(devices) + 1))(*devices, None)
    split_array = (ctypes.c_float * 16)(*split)
    keep += [dev_array, split_array]
    mp.devices = ctypes.cast(dev_array, ctypes.c_void_p)
    mp.tensor_split = split_array
    if rows:

        class Override(ctypes.Structure):
            _fields_ = [("pattern", ctypes.c_char_p), ("buft", ctypes.c_void_p)]

        table = (Override * (len(rows) + 1))(*[Override(p, b) for p, b in rows], Override(None, None))
        keep.append(table)
        mp.tensor_buft_overrides = ctypes.cast(table, ctypes.c_void_p)
    return mp, keep


def rpc_library() -> Path | None:
    """The loadable ggml-rpc backend: ``GGUF_CONSTRUCT_GGML_RPC``, or None when there is none."""
    named = os.environ.get(RPC_VARIABLE)
    if named:
        path = Path(named)
        if not path.is_file():
            raise RuntimeError(f"{RPC_VARIABLE}={named}: no such file (a libggml-rpc.so built with GGML_BACKEND_DL=ON)")
        return path
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


@contextlib.contextmanager
def rpc_servers(n: int, library: Path, timeout: float = 30.0) -> Iterator[list[str]]:
    """``n`` RPC servers on 127.0.0.1, each a process serving the CPU; stopped (and waited for) on exit."""
    procs: list[subprocess.Popen] = []
    endpoints = []
    try:
        for _ in range(n):
            endpoint = f"127.0.0.1:{_free_port()}"
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", _SERVER, str(library), endpoint],
                    cwd=ROOT,
                    env=_env(),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
            endpoints.append(endpoint)
        deadline = time.monotonic() + timeout
        for endpoint, proc in zip(endpoints, procs, strict=True):
            host, port = endpoint.split(":")
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"the RPC server for {endpoint} exited with {proc.returncode}")
                with contextlib.suppress(OSError), socket.create_connection((host, int(port)), timeout=1):
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the RPC server for {endpoint} did not listen within {timeout} s")
                time.sleep(0.1)
        yield endpoints
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def measure_on_devices(
    path: Path,
    library: Path,
    endpoints: Sequence[str],
    names: Sequence[str],
    *,
    n_gpu_layers: int,
    split_mode: str = "layer",
    tensor_split: Sequence[float] = (),
    main_gpu: int = 0,
    overrides: Sequence[tuple[str, str]] = (),
    use_mmap: bool = True,
    **context,
) -> dict:
    """llama.cpp's memory breakdown (buffer type name -> model/context/compute bytes) for ``path`` loaded with
    these RPC devices (``names`` are the plan's names for them, in the same order), or {"refused": log}."""
    ctx = dict(n_ctx=512, n_batch=2048, n_ubatch=512, n_seq_max=1, type_k="f16", type_v="f16", flash_attn="auto")
    ctx.update(swa_full=False, kv_unified=False)
    ctx.update(context)
    spec = {
        "path": str(path),
        "rpc": str(library),
        "endpoints": list(endpoints),
        "names": list(names),
        "n_gpu_layers": n_gpu_layers,
        "split_mode": split_mode,
        "tensor_split": list(tensor_split) + [0.0] * (16 - len(tensor_split)),
        "main_gpu": main_gpu,
        "overrides": [list(o) for o in overrides],
        "use_mmap": use_mmap,
        "context": ctx,
    }
    r = subprocess.run(
        [sys.executable, "-c", _MEASURE, json.dumps(spec)], capture_output=True, text=True, timeout=300, cwd=ROOT, env=_env()
    )
    if r.returncode != 0:
        raise RuntimeError(f"the measuring process failed ({r.returncode}): {r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def build(directory: Path, jobs: int = 1) -> Path:
    """Build the loadable ggml-rpc backend in ``directory`` from the llama.cpp that the installed
    llama-cpp-python vendors (its sdist, from the package index): ggml-base and ggml-rpc only."""
    import importlib.metadata
    import tarfile

    version = importlib.metadata.version("llama-cpp-python")
    directory.mkdir(parents=True, exist_ok=True)
    sdist = directory / "sdist"
    pip = [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps", "-d", str(sdist), f"llama-cpp-python=={version}"]
    subprocess.run(pip, check=True, timeout=900)
    archive = next(sdist.glob("llama_cpp_python-*.tar.gz"))
    with tarfile.open(archive) as tar:
        tar.extractall(sdist, filter="data")
    source = next(sdist.glob("llama_cpp_python-*/vendor/llama.cpp"))
    out = directory / "build"
    flags = ["-DGGML_BACKEND_DL=ON", "-DGGML_RPC=ON", "-DGGML_CPU=OFF", "-DBUILD_SHARED_LIBS=ON", "-DGGML_NATIVE=OFF", "-DLLAMA_CURL=OFF"]
    flags += [
        "-DLLAMA_OPENSSL=OFF",
        "-DLLAMA_BUILD_TESTS=OFF",
        "-DLLAMA_BUILD_EXAMPLES=OFF",
        "-DLLAMA_BUILD_TOOLS=OFF",
        "-DLLAMA_BUILD_SERVER=OFF",
    ]
    subprocess.run(["cmake", "-S", str(source), "-B", str(out), "-DCMAKE_BUILD_TYPE=Release", *flags], check=True, timeout=900)
    subprocess.run(["cmake", "--build", str(out), "--target", "ggml-rpc", f"-j{jobs}"], check=True, timeout=3600)
    return out / "bin" / "libggml-rpc.so"


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "build":
        sys.exit("usage: python -m tests.planning.rpc_devices build DIR")
    print(build(Path(sys.argv[2]), jobs=os.cpu_count() or 1))
