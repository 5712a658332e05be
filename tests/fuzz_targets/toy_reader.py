"""A deliberately broken reader speaking the fuzz line protocol, for the fuzzer's own tests.

What it does with a file depends on a marker in its bytes: TOY:SEGV (a real NULL dereference), TOY:ABORT (a
GGML_ASSERT-style message, then abort), TOY:LENGTH (an uncaught std::length_error as libstdc++ reports it), TOY:FPE
(SIGFPE), TOY:HANG (sleeps), TOY:MEM (grows until something stops it), TOY:ASAN (an AddressSanitizer report, exit
1), TOY:REFUSED (an allocator's refusal under allocator_may_return_null, then an orderly rejection). Any other file
starting with GGUF is accepted (a view of "unknown"s), anything else rejected. ``--count-starts FILE`` appends a
line to FILE at each start (restarts are counted).
"""

import ctypes
import json
import os
import signal
import sys
import time

if len(sys.argv) > 2 and sys.argv[1] == "--count-starts":
    with open(sys.argv[2], "a") as f:
        f.write("start\n")

ASAN = """=================================================================
==4242==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x602000000011 at pc 0x55d0 bp 0x7ffc sp 0x7ffc
READ of size 8 at 0x602000000011 thread T0
    #0 0x55d0a1 in __interceptor_memcpy ../../../../src/libsanitizer/sanitizer_common/sanitizer_common_interceptors.inc:827
    #1 0x55d0a2 in gguf_read_emplace_helper /src/ggml/src/gguf.cpp:314:17
    #2 0x55d0a3 in gguf_init_from_file_impl /src/ggml/src/gguf.cpp:421:9
    #3 0x55d0a4 in main /src/harness.cpp:12:5
SUMMARY: AddressSanitizer: heap-buffer-overflow /src/ggml/src/gguf.cpp:314:17 in gguf_read_emplace_helper
"""

out = sys.stdout
for line in sys.stdin:
    path = line.rstrip("\n")
    with open(path, "rb") as f:
        data = f.read()
    if b"TOY:SEGV" in data:
        ctypes.string_at(0)
    elif b"TOY:ABORT" in data:
        sys.stderr.write("/src/ggml/src/gguf.cpp:612: GGML_ASSERT(key && key[0]) failed\n")
        sys.stderr.flush()
        os.abort()
    elif b"TOY:LENGTH" in data:
        sys.stderr.write("terminate called after throwing an instance of 'std::length_error'\n  what():  vector::_M_default_append\n")
        sys.stderr.flush()
        os.abort()
    elif b"TOY:FPE" in data:
        os.kill(os.getpid(), signal.SIGFPE)
    elif b"TOY:HANG" in data:
        time.sleep(3600)
    elif b"TOY:MEM" in data:
        hog = []
        while True:
            hog.append(b"\x01" * (32 << 20))
            time.sleep(0.01)
    elif b"TOY:ASAN" in data:
        sys.stderr.write(ASAN)
        sys.stderr.flush()
        os._exit(1)
    elif b"TOY:REFUSED" in data:
        sys.stderr.write("==4242==WARNING: AddressSanitizer failed to allocate 0x10000000000 bytes\n")
        sys.stderr.flush()
        out.write(json.dumps({"ok": False, "error": "failed to allocate tensor data"}) + "\n")
    elif data[:4] == b"GGUF":
        unknown = "unknown"
        view = {"version": unknown, "alignment": unknown, "data_offset": unknown, "kv": unknown, "tensors": unknown}
        out.write(json.dumps({"ok": True, "view": view}) + "\n")
    else:
        out.write(json.dumps({"ok": False, "error": "bad magic"}) + "\n")
    out.flush()
