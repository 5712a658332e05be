"""bench_plan's gguf-parser-go column: the command line it asks with, what it reads from either binary's JSON, and
that a binary which hangs, floods, forks, fails or answers nonsense gives a reason, never a number or a hang.
With ``GGUF_PARSER`` naming a real binary, it is also asked about a dense model, whose KV cache it sizes as
llama.cpp does."""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest

from benchmarks.peers import gguf_parser
from benchmarks.peers.gguf_parser import PeerError, command, estimate, parse, parse_gpu_compute, run

CONTEXT = dict(n_ctx=4096, n_batch=2048, n_ubatch=512, n_seq_max=2, flash_attn=True, type_k="q8_0", type_v="f16", swa_full=False)


def breakdown(weight: dict, kv: dict, computation: dict, total: int) -> dict:
    device = {"weight": weight, "kvCache": kv, "computation": computation}
    gpu = {"computation": {"footprint": 0, "input": 5, "graph": 700, "output": 20}}
    return {"estimate": {"devices": [device, gpu]}, "summary": {"items": [{"ram": {"uma": total, "nonuma": total}}]}}


ANSWER = breakdown(
    {"input": 1000, "compute": 200, "computeOverridden": 30, "output": 4},
    {"key": 500, "value": 70},
    {"footprint": 99_999, "input": 8, "graph": 300, "output": 600},
    total=123_456,
)


def fake(tmp_path: Path, body: str) -> str:
    """An executable Python script standing in for the binary."""
    path = tmp_path / "gguf-parser"
    path.write_text(f"#!{sys.executable}\nimport json, os, sys, time\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_the_command_asks_for_the_cpu_with_the_resolved_context() -> None:
    cmd = command("gp", "m.gguf", **CONTEXT)  # type: ignore[arg-type]
    args = {
        flag: cmd[i + 1] for i, flag in enumerate(cmd) if flag.startswith("--") and i + 1 < len(cmd) and not cmd[i + 1].startswith("--")
    }
    assert cmd[0] == "gp" and "--flash-attention" in cmd and "--swa-full" not in cmd
    assert args["--path"] == "m.gguf" and args["--gpu-layers"] == "0" and args["--platform-footprint"] == "0,0"
    assert (args["--ctx-size"], args["--batch-size"], args["--ubatch-size"], args["--parallel-size"]) == ("4096", "2048", "512", "2")
    assert (args["--cache-type-k"], args["--cache-type-v"]) == ("q8_0", "f16")
    off = command("gp", "m.gguf", **{**CONTEXT, "flash_attn": False, "swa_full": True})  # type: ignore[arg-type]
    assert "--flash-attention" not in off and "--swa-full" in off and "--no-mmap" in off
    gpu = command("gp", "m.gguf", gpu_layers=-1, **CONTEXT)  # type: ignore[arg-type]
    assert gpu[gpu.index("--gpu-layers") + 1] == "-1"


def test_components_from_the_breakdown_and_the_total_alone_from_gguf_parser() -> None:
    got = parse(json.dumps(ANSWER).encode())
    assert (got.weights, got.kv, got.compute, got.total) == (1234, 570, 8 + 600, 123_456)
    cli = {"estimate": {"items": [{"ram": {"uma": 77, "nonuma": 77}, "vrams": []}], "type": "model"}}
    assert parse(json.dumps(cli).encode()) == gguf_parser.PeerEstimate(total=77)
    assert parse_gpu_compute(json.dumps(ANSWER).encode()) == 5 + 700
    assert parse_gpu_compute(json.dumps(cli).encode()) is None
    for nonsense in (b"{}", json.dumps({**ANSWER, "estimate": {"devices": [{}]}}).encode(), b"[" * 100_000):
        with pytest.raises(PeerError):
            parse_gpu_compute(nonsense)


def test_the_fake_binary_is_asked_with_the_command_line(tmp_path: Path) -> None:
    binary = fake(tmp_path, f"assert '--json' in sys.argv and '--gpu-layers' in sys.argv\nprint(json.dumps({ANSWER!r}))")
    assert estimate(binary, "m.gguf", **CONTEXT).total == 123_456  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "answer, reason",
    [
        (b"", "not JSON"),
        (b"<html>", "not JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "not JSON|not a non-empty list|no 'estimate'"),
        (b"[]", "no 'estimate'"),
        (b'{"estimate": {"items": []}}', "not a non-empty list"),
        (b'{"estimate": {"items": [{"ram": {"uma": -1}}]}}', "not a byte count"),
        (b'{"estimate": {"items": [{"ram": {"uma": true}}]}}', "not a byte count"),
        (b'{"estimate": {"items": [{"ram": {"uma": 1.5}}]}}', "not a byte count"),
        (b'{"estimate": {"items": [{"ram": {"uma": 1e400}}]}}', "not a byte count"),
        (b'{"estimate": {"items": [{"ram": {"uma": 9223372036854775808}}]}}', "not a byte count"),
        (b'{"estimate": {"items": [{"ram": {"uma": ' + b"9" * 5000 + b"}}]}}", "not JSON"),
        (json.dumps({**ANSWER, "estimate": {"devices": []}}).encode(), "not a non-empty list"),
        (json.dumps({**ANSWER, "estimate": {"devices": [{"weight": {}}]}}).encode(), "no 'kvCache'"),
        (json.dumps(breakdown({}, {}, {}, 1)).encode(), "no 'input'"),
    ],
)
def test_nonsense_is_refused_with_a_reason(answer: bytes, reason: str) -> None:
    with pytest.raises(PeerError, match=reason):
        parse(answer)


@pytest.mark.parametrize(
    "body, reason",
    [
        ("time.sleep(60)", "did not answer within 1 s"),
        ("os.fork() or time.sleep(60)", "did not answer within 1 s"),  # the parent exits, its child keeps stdout
        ("os.fork() or (os.setsid(), time.sleep(5))", "did not answer within 1 s"),  # and leaves the process group
        ("sys.stdout.close(); time.sleep(60)", "did not answer within 1 s"),  # no more output, no exit
        ("sys.stdout.write('x' * 5000)", "more than 4,096 bytes"),
        ("while True: sys.stdout.write('x' * 65536)", "more than 4,096 bytes"),
        ("sys.exit(3)", "exited with status 3"),
        ("os.kill(os.getpid(), 9)", "exited with status -9"),
    ],
)
def test_a_binary_that_misbehaves_is_stopped_with_a_reason(tmp_path: Path, body: str, reason: str) -> None:
    binary = fake(tmp_path, body)
    start = time.monotonic()
    with pytest.raises(PeerError, match=reason):
        run([binary], timeout=1, limit=4096)
    assert time.monotonic() - start < 10


def test_what_cannot_run_is_a_reason(tmp_path: Path) -> None:
    for binary in (str(tmp_path / "absent"), str(tmp_path)):
        with pytest.raises(PeerError, match="cannot run"):
            run([binary])


def test_bench_plan_says_not_available_without_a_binary(capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_plan", Path(__file__).resolve().parents[2] / "benchmarks/bench_plan.py")
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    row = dict(
        model="m",
        settings={"n_ctx": 64},
        plan_parts=bench.parts(100, 10, 50),
        llama_parts=bench.parts(100, 10, 40),
    )
    bench.print_comparison([row], None)
    out = capsys.readouterr().out
    assert "| compute buffer | 0/1 | +25.0% | +25.0% | not available | not available |" in out
    assert "| weights | 1/1 | exact | exact |" in out and "gguf-parser-go: not available" in out
    theirs = dict(weights=80, kv=10, compute=None, compute_gpu=60, total=300)
    bench.print_comparison([{**row, "gguf_parser": theirs}, {**row, "gguf_parser": {"error": "it hung"}}], "gp")
    out = capsys.readouterr().out
    assert "| weights | 2/2 | exact | exact | -20.0% | -20.0% |" in out
    assert "| total | 0/2 | +6.7% | +6.7% | +100.0% | +100.0% |" in out
    assert "| compute buffer | 0/2 | +25.0% | +25.0% | – | – |" in out
    assert "| compute buffer (gguf-parser-go: one GPU holding every layer) | 0/2 | +25.0% | +25.0% | +50.0% | +50.0% |" in out
    assert "| m | n_ctx=64 | it hung |" in out and "no estimate for 1 of 2" in out


@pytest.mark.skipif(not os.environ.get(gguf_parser.ENV), reason=f"{gguf_parser.ENV} names no gguf-parser binary")
def test_a_real_binary_sizes_a_dense_kv_cache_as_llama_cpp(tmp_path: Path) -> None:
    from gguf_construct.planning import plan
    from tests.tiny_models import llama

    path = tmp_path / "m.gguf"
    llama(n_layer=2, n_embd=256, n_ff=512).save(path)
    p = plan(path, n_ctx=4096, flash_attn="off")
    c = p.context
    got = estimate(
        os.environ[gguf_parser.ENV], str(path), n_ctx=c.n_ctx, n_batch=c.n_batch, n_ubatch=c.n_ubatch, n_seq_max=c.n_seq_max,
        flash_attn=c.flash_attn, type_k=c.type_k, type_v=c.type_v, swa_full=c.swa_full,
    )  # fmt: skip
    assert got.total > 0
    on_gpu = gguf_parser.gpu_compute(
        os.environ[gguf_parser.ENV], str(path), n_ctx=c.n_ctx, n_batch=c.n_batch, n_ubatch=c.n_ubatch, n_seq_max=c.n_seq_max,
        flash_attn=c.flash_attn, type_k=c.type_k, type_v=c.type_v, swa_full=c.swa_full,
    )  # fmt: skip
    assert (on_gpu is None) == (got.kv is None)
    if got.kv is not None:  # gguf-parser-breakdown: the components too
        assert got.kv == p.kv_bytes
        assert got.weights is not None and got.weights >= p.weights.total // 2
