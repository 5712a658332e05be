"""The planning tests' RPC tier: tests marked ``rpc_tier`` load models on llama.cpp RPC devices (``rpc-server``
processes on 127.0.0.1) and need a loadable ggml-rpc backend built from llama-cpp-python's llama.cpp
(``GGUF_CONSTRUCT_GGML_RPC``, see tests/planning/rpc_devices.py); without it they are deselected and the summary
says so and how to run them."""

from __future__ import annotations

import os

_NOT_RUN: list[str] = []


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "rpc_tier: needs the ggml-rpc backend (GGUF_CONSTRUCT_GGML_RPC; deselected, and reported, without it)"
    )


def pytest_collection_modifyitems(config, items):
    if os.environ.get("GGUF_CONSTRUCT_GGML_RPC"):
        return
    absent = [item for item in items if item.get_closest_marker("rpc_tier")]
    if absent:
        config.hook.pytest_deselected(items=absent)
        items[:] = [item for item in items if not item.get_closest_marker("rpc_tier")]
        _NOT_RUN.extend(item.nodeid for item in absent)


def pytest_terminal_summary(terminalreporter):
    if _NOT_RUN:
        terminalreporter.write_line(
            f"{len(_NOT_RUN)} RPC-tier tests deselected: they need llama.cpp's ggml-rpc backend "
            "(python -m tests.planning.rpc_devices build DIR, then GGUF_CONSTRUCT_GGML_RPC=DIR/bin/libggml-rpc.so): "
            f"{', '.join(sorted({n.split('::')[0] for n in _NOT_RUN}))}"
        )
