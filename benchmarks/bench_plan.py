"""The memory plan against llama.cpp's own accounting at real models' widths, what a plan costs, and the bytes
fetched to plan a remote file.

1. Models with the widths, heads and vocabularies of released ones, two layers each (every layer reuses the same
   compute memory, and the weights and KV cache scale with the depth by rule), fewer experts where a real count
   would make the file large (the count only sizes the router's logits), tensors of zero bytes
   (``tests/tiny_models.zero_filled``: written in a second). For each context setting: ``gguf_construct.plan``
   against ``llama_get_memory_breakdown`` through llama-cpp-python: the model buffers and the KV cache / state
   (equal or not), the compute buffer (bytes, difference), and the plan's time over llama.cpp's time to load the
   model and make the context, within this run. With ``--gguf-parser BINARY`` (or ``GGUF_PARSER``), gguf-parser-go's
   estimate for the same context on the CPU beside them (benchmarks/peers/gguf_parser.py): per component (weights,
   KV cache / state, compute, total), the plan's and gguf-parser-go's median and worst error against llama.cpp;
   without it that column reads "not available".
2. The compute buffer of an 80-layer, Llama-3-70B-like shape planned from metadata alone: its time over the best
   llama.cpp load of step 1.
3. A model split into shards and served by the loopback test server: requests and bytes ``plan(URL)`` fetches,
   against the size of the set.
4. With ``--devices`` (and ``GGUF_CONSTRUCT_GGML_RPC`` naming the ggml-rpc backend, tests/planning/rpc_devices.py):
   models on two or three ``rpc-server`` devices on 127.0.0.1 at several offloads and splits, per device and the
   CPU: the model, KV/state and compute bytes against llama.cpp's (equal or not; the compute buffer's median and
   worst difference).

    PYTHONPATH=. python benchmarks/bench_plan.py [--quick] [--only NAME] [--json] [--devices] [--llama-cpp BUILD] [--gguf-parser BINARY]

Needs the test extra (llama-cpp-python). ``--quick``: one model, two settings, a small remote set (and two device
setups).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.peers import gguf_parser  # noqa: E402
from gguf_construct.api.shard_set import split  # noqa: E402
from gguf_construct.planning import ContextRequest, ModelShape, plan, plan_shape  # noqa: E402
from gguf_construct.planning.context import ResolvedContext  # noqa: E402
from gguf_construct.planning.shape import TensorSpan  # noqa: E402
from tests.http_testserver import TestServer  # noqa: E402
from tests.llama_memory import cpu_features, measure  # noqa: E402
from tests.tiny_models import (  # noqa: E402
    deepseek2,
    gemma3,
    glm4moe,
    gpt_oss,
    llama,
    mamba,
    mamba2,
    qwen3,
    qwen3moe,
    rwkv6,
    rwkv7,
    zero_filled,
)

MODELS = {
    "llama (Llama-3.2-1B widths)": lambda: zero_filled(llama, n_embd=2048, n_ff=8192, n_head=32, n_head_kv=8, n_vocab=128256, wtype="q4_0"),
    "qwen3 (Qwen3-0.6B widths)": lambda: zero_filled(
        qwen3, n_embd=1024, n_ff=3072, n_head=16, n_head_kv=8, head_dim=128, n_vocab=151936, wtype="q4_0"
    ),
    "gemma3 (Gemma-3-1B widths)": lambda: zero_filled(
        gemma3, n_embd=1152, n_ff=6912, n_head=4, n_head_kv=1, head_dim=256, sliding_window=512, n_vocab=262144, wtype="q4_0"
    ),
    "qwen3moe (Qwen3-30B-A3B widths, 16 of 128 experts)": lambda: zero_filled(
        qwen3moe, n_embd=2048, n_head=32, n_head_kv=4, head_dim=128, n_expert=16, n_expert_used=8, n_ff_exp=768,
        n_vocab=151936, wtype="q4_0",
    ),
    "gpt-oss (gpt-oss-20b widths, 8 of 32 experts)": lambda: zero_filled(
        gpt_oss, n_embd=2880, n_head=64, n_head_kv=8, head_dim=64, n_expert=8, n_expert_used=4, n_ff_exp=2880,
        sliding_window=128, n_vocab=201088, wtype="q4_0",
    ),
    "glm4moe (GLM-4.5-Air widths, 16 of 128 experts, a next-token-prediction block)": lambda: zero_filled(
        glm4moe, n_layer=3, n_nextn=1, n_embd=4096, n_ff=10944, n_head=96, n_head_kv=8, head_dim=128, n_expert=16,
        n_expert_used=8, n_ff_exp=1408, n_vocab=151552, wtype="q4_0",
    ),
    "llama with experts (Mixtral-8x7B widths, 4 of 8 experts)": lambda: zero_filled(
        llama, n_embd=4096, n_ff=14336, n_head=32, n_head_kv=8, n_expert=4, n_expert_used=2, n_vocab=32000, wtype="q4_0"
    ),
    "deepseek2 MLA (DeepSeek-V2-Lite widths, 16 of 64 experts)": lambda: zero_filled(
        deepseek2, n_embd=2048, n_head=16, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128,
        n_expert=16, n_expert_used=6, n_expert_shared=2, n_ff_exp=1408, n_ff=10944, n_vocab=102400, wtype="q4_0",
    ),
    "mamba (mamba-1.4b widths)": lambda: zero_filled(mamba, n_embd=2048, d_state=16, dt_rank=128, n_vocab=50280, wtype="q4_0"),
    "mamba2 (Mamba-Codestral-7B widths)": lambda: zero_filled(
        mamba2, n_embd=4096, d_state=128, head_dim=64, n_group=8, n_vocab=32768, wtype="q4_0"
    ),
    "rwkv6 (RWKV-6 1.6B widths)": lambda: zero_filled(
        rwkv6, n_embd=2048, head_size=64, n_ff=7168, time_mix_extra_dim=32, time_decay_extra_dim=64, n_vocab=65536, wtype="q4_0"
    ),
    "rwkv7 (RWKV-7 1.5B widths)": lambda: zero_filled(
        rwkv7, n_embd=2048, head_size=64, n_ff=8192, decay_lora_rank=96, iclr_lora_rank=96, value_residual_mix_lora_rank=64,
        gate_lora_rank=256, n_vocab=65536, wtype="q4_0",
    ),
}  # fmt: skip
SETTINGS = [
    dict(n_ctx=4096),
    dict(n_ctx=4096, flash_attn="off"),
    dict(n_ctx=8192, n_ubatch=2048, n_batch=2048, type_k="q8_0", type_v="q8_0"),
    dict(n_ctx=16384, n_seq_max=4, n_ubatch=256),
]


def rows(models: dict, settings: list[dict], peer: str | None = None) -> list[dict]:
    """Per model and setting: the plan's and llama.cpp's model, cache and compute bytes, and with ``peer`` (a
    gguf-parser binary) gguf-parser-go's for the same context, or the reason it gave none."""
    features = cpu_features()
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, build in models.items():
            path = Path(tmp) / "model.gguf"
            build().save(path)
            for kw in settings:
                t0 = time.perf_counter()
                p = plan(path, features=features, **kw)
                t1 = time.perf_counter()
                m = measure(path, **kw)
                t2 = time.perf_counter()
                row = dict(
                    model=name,
                    settings=kw,
                    n_ctx=m.n_ctx,
                    model_equal=p.model_bytes == m.total("model"),
                    cache_equal=p.kv_bytes + p.recurrent_bytes == m.total("context"),
                    planned=p.compute_bytes,
                    llama_cpp=m.total("compute"),
                    llama_seconds=t2 - t1,
                    time_ratio=(t1 - t0) / (t2 - t1),
                    plan_parts=parts(p.model_bytes, p.kv_bytes + p.recurrent_bytes, p.compute_bytes),
                    llama_parts=parts(m.total("model"), m.total("context"), m.total("compute")),
                )
                if peer:
                    row["gguf_parser"] = peer_parts(peer, path, p.context)
                out.append(row)
                print(json.dumps(out[-1]), file=sys.stderr, flush=True)
    return out


def parts(weights: int, kv: int, compute: int | None) -> dict:
    return dict(weights=weights, kv=kv, compute=compute, total=None if compute is None else weights + kv + compute)


def peer_parts(binary: str, path: Path, ctx: ResolvedContext) -> dict:
    """gguf-parser-go's components for the context llama.cpp resolved, or ``{"error": why}``."""
    context = dict(
        n_ctx=ctx.n_ctx, n_batch=ctx.n_batch, n_ubatch=ctx.n_ubatch, n_seq_max=ctx.n_seq_max, flash_attn=ctx.flash_attn,
        type_k=ctx.type_k, type_v=ctx.type_v, swa_full=ctx.swa_full,
    )  # fmt: skip
    try:
        got = gguf_parser.estimate(binary, str(path), **context)
        on_gpu = gguf_parser.gpu_compute(binary, str(path), **context)
    except gguf_parser.PeerError as e:
        return {"error": str(e)}
    return dict(weights=got.weights, kv=got.kv, compute=got.compute, compute_gpu=on_gpu, total=got.total)


#: (gguf-parser-go's key, the plan's and llama.cpp's key, label)
COMPONENTS = (
    ("weights", "weights", "weights"),
    ("kv", "kv", "KV cache / state"),
    ("compute", "compute", "compute buffer"),
    ("compute_gpu", "compute", "compute buffer (gguf-parser-go: one GPU holding every layer)"),
    ("total", "total", "total"),
)


def relative(estimate: int | None, measured: int) -> float | None:
    """(estimate − measured) / measured, or None without an estimate or a measured amount."""
    if estimate is None or not measured:
        return None
    return (estimate - measured) / measured


def percent(d: float | None) -> str:
    if d is None:
        return "–"
    return "exact" if d == 0 else f"{100 * d:+.1f}%"


def print_comparison(found: list[dict], peer: str | None) -> None:
    """Per component: how often and by how much the plan and gguf-parser-go differ from llama.cpp."""
    import statistics

    print("\n| component | plan = llama.cpp | plan: median | plan: worst | gguf-parser-go: median | gguf-parser-go: worst |")
    print("|---|---:|---:|---:|---:|---:|")
    failed = [r for r in found if "error" in r.get("gguf_parser", {})]
    for theirs_key, key, label in COMPONENTS:
        ours = [d for r in found if (d := relative(r["plan_parts"][key], r["llama_parts"][key])) is not None]
        theirs = [
            d
            for r in found
            if "error" not in r.get("gguf_parser", {"error": ""})
            and (d := relative(r["gguf_parser"][theirs_key], r["llama_parts"][key])) is not None
        ]
        cells = [f"{sum(d == 0 for d in ours)}/{len(found)}"]
        cells += [percent(statistics.median(ours)), percent(max(ours, key=abs))] if ours else ["–", "–"]
        if theirs:
            cells += [percent(statistics.median(theirs)), percent(max(theirs, key=abs))]
        else:
            cells += ["–" if peer else "not available"] * 2  # with gguf-parser itself: its total only
        print(f"| {label} | " + " | ".join(cells) + " |")
    if not peer:
        print(
            f"\ngguf-parser-go: not available (name its binary with --gguf-parser or {gguf_parser.ENV}; "
            "benchmarks/peers/gguf_parser_breakdown gives the components, gguf-parser itself only the total)"
        )
        return
    print("\n| model | settings | weights: plan / gguf-parser-go | KV / state | compute | compute, one GPU | total |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in found:
        s = ", ".join(f"{k}={v}" for k, v in r["settings"].items())
        theirs = r["gguf_parser"]
        if "error" in theirs:
            print(f"| {r['model']} | {s} | {theirs['error']} | | | | |")
            continue
        cells = [
            f"{percent(relative(r['plan_parts'][k], r['llama_parts'][k]))} / {percent(relative(theirs[t], r['llama_parts'][k]))}"
            for t, k, _ in COMPONENTS
        ]
        print(f"| {r['model']} | {s} | " + " | ".join(cells) + " |")
    if failed:
        print(f"\ngguf-parser-go gave no estimate for {len(failed)} of {len(found)} settings (the reasons above)")


def deep_shape(n_layer: int) -> ModelShape:
    """A Llama-3-70B-like shape from metadata alone: what planning a large model costs without reading it."""
    md = {
        "general.architecture": "llama",
        "llama.block_count": n_layer,
        "llama.embedding_length": 8192,
        "llama.feed_forward_length": 28672,
        "llama.attention.head_count": 64,
        "llama.attention.head_count_kv": 8,
        "llama.context_length": 8192,
        "llama.vocab_size": 128256,
    }
    spans = [TensorSpan("token_embd.weight", "q4_0", (8192, 128256), 0, 0, 0)]
    spans += [TensorSpan("output_norm.weight", "f32", (8192,), 0, 0, 0), TensorSpan("output.weight", "q6_K", (8192, 128256), 0, 0, 0)]
    for il in range(n_layer):
        for name, ne in (
            ("attn_norm", (8192,)),
            ("attn_q", (8192, 8192)),
            ("attn_k", (8192, 1024)),
            ("attn_v", (8192, 1024)),
            ("attn_output", (8192, 8192)),
            ("ffn_norm", (8192,)),
            ("ffn_gate", (8192, 28672)),
            ("ffn_up", (8192, 28672)),
            ("ffn_down", (28672, 8192)),
        ):
            spans.append(TensorSpan(f"blk.{il}.{name}.weight", "f32" if len(ne) == 1 else "q4_K", ne, 0, 0, 0))
    return ModelShape.from_metadata(md, spans, "llama")


def remote(folder: Path, quick: bool) -> list[str]:
    sizes = dict(n_layer=2, n_embd=512, n_ff=1024) if quick else dict(n_layer=8, n_embd=1024, n_ff=2816)
    shards = split(llama(**sizes), folder / "remote", max_tensors=20)
    size = sum(s.stat().st_size for s in shards)
    with TestServer() as server:
        for s in shards:
            server.add(f"/m/{s.name}", s.read_bytes())
        start = time.perf_counter()
        p = plan(server.url(f"/m/{shards[0].name}"), n_ctx=4096)
        seconds = time.perf_counter() - start
        assert p.to_json() == plan(shards[0], n_ctx=4096).to_json()
        return [
            "| set | shards | bytes of the set | requests | bytes fetched | fetched / set | seconds |",
            "|---|---:|---:|---:|---:|---:|---:|",
            f"| llama, {sizes['n_layer']} layers, f16 | {len(shards)} | {size:,} | {server.counts.requests} | "
            f"{server.counts.bytes:,} | {server.counts.bytes / size:.4f} | {seconds:.2f} |",
        ]


# the number of rpc-server devices is the tensor split's length (two without one)
DEVICE_SETUPS = [
    dict(n_gpu_layers=3, tensor_split=(1, 1)),
    dict(n_gpu_layers=99, tensor_split=(1, 1, 1)),
    dict(n_gpu_layers=99, tensor_split=(3, 1), n_ctx=4096),
    dict(n_gpu_layers=99, tensor_split=(1, 1), flash_attn="off"),
    dict(n_gpu_layers=2, tensor_split=(1, 0, 1), n_ubatch=16),
    dict(n_gpu_layers=99, split_mode="none", main_gpu=1),
]


def device_rows(models: dict, setups: list[dict]) -> list[dict]:
    """Per model, setup and device (the CPU and two or three RPC devices): planned and measured model, cache,
    compute."""
    from gguf_construct.planning.devices import Device, DeviceRequest
    from tests.planning.rpc_devices import measure_on_devices, rpc_library, rpc_servers

    library = rpc_library()
    if library is None:
        raise SystemExit("--devices needs GGUF_CONSTRUCT_GGML_RPC (python -m tests.planning.rpc_devices build DIR)")
    out = []
    most = max(len(s.get("tensor_split", (1, 1))) for s in setups)
    with tempfile.TemporaryDirectory() as tmp, rpc_servers(most, library) as all_endpoints:
        for label, build in models.items():
            path = Path(tmp) / "m.gguf"
            build().save(path)
            for setup in setups:
                n = len(setup.get("tensor_split", (1, 1)))
                names, endpoints = [f"d{i}" for i in range(n)], all_endpoints[:n]
                ctx = {"n_ctx": 2048, **{k: v for k, v in setup.items() if k in ("n_ctx", "flash_attn", "n_ubatch")}}
                dev = {k: v for k, v in setup.items() if k not in ctx}
                req = DeviceRequest(tuple(Device(n, 64 * 2**30) for n in names), **dev)
                p = plan(path, features=cpu_features(), devices=req, **ctx)
                got = measure_on_devices(path, library, endpoints, names, **dev, **ctx)["buffers"]
                cpu = {"model": 0, "context": 0, "compute": 0}
                for k, v in got.items():
                    if not k.startswith("RPC"):
                        cpu = {part: cpu[part] + v[part] for part in cpu}
                measured = [cpu] + [got.get(f"RPC0[{e}]", {"model": 0, "context": 0, "compute": 0}) for e in endpoints]
                for row, m in zip(p.devices, measured, strict=True):
                    out.append(
                        {
                            "model": label,
                            "setup": setup,
                            "device": row["name"],
                            "model_equal": row["model_bytes"] == m["model"],
                            "cache_equal": row["kv_bytes"] + row["state_bytes"] == m["context"],
                            "compute_planned": row["compute_bytes"],
                            "compute_llama_cpp": m["compute"],
                        }
                    )
    return out


def print_devices(found: list[dict]) -> None:
    import statistics

    print("| model | setup | device | model | KV / state | compute planned | compute llama.cpp | difference |")
    print("|---|---|---|---|---|---:|---:|---:|")
    diffs = []
    for r in found:
        s = ", ".join(f"{k}={v}" for k, v in r["setup"].items())
        same = {True: "equal", False: "differs"}
        if r["compute_llama_cpp"]:
            d = (r["compute_planned"] - r["compute_llama_cpp"]) / r["compute_llama_cpp"]
            diffs.append(d)
            diff = "exact" if d == 0 else f"{100 * d:+.1f}%"
        else:
            diff = "none used" if not r["compute_planned"] else "planned, none used"
        print(
            f"| {r['model']} | {s} | {r['device']} | {same[r['model_equal']]} | {same[r['cache_equal']]} | "
            f"{r['compute_planned']:,} | {r['compute_llama_cpp']:,} | {diff} |"
        )
    n = len(found)
    print(
        f"\nmodel bytes equal on {sum(r['model_equal'] for r in found)}/{n} devices, "
        f"KV/state on {sum(r['cache_equal'] for r in found)}/{n}, "
        f"compute on {sum(r['compute_planned'] == r['compute_llama_cpp'] for r in found)}/{n}; "
        f"compute vs llama.cpp: median {100 * statistics.median(diffs):+.1f}%, "
        f"worst {100 * max(diffs, key=abs):+.1f}% ({len(diffs)} devices with a compute buffer)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one model, two settings, a small remote set: a smoke test")
    ap.add_argument("--only", help="only the models whose name contains this")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    ap.add_argument("--devices", action="store_true", help="only the RPC devices table (needs GGUF_CONSTRUCT_GGML_RPC)")
    ap.add_argument(
        "--llama-cpp",
        help="the llama.cpp build the plan follows (schema/memory.json builds), for an oracle named by "
        "GGUF_CONSTRUCT_LLAMA_CPP_BUILD (default: GGUF_CONSTRUCT_LLAMA_CPP_VERSION, else llama-cpp-python's)",
    )
    ap.add_argument(
        "--gguf-parser",
        metavar="BINARY",
        help=f"gguf-parser-go's gguf-parser (totals) or gguf-parser-breakdown (components) for the comparison (default: {gguf_parser.ENV})",
    )
    args = ap.parse_args()
    from gguf_construct.planning.compute.builds import follow
    from tests.llama_memory import build_name

    follow(args.llama_cpp or build_name())
    models = {k: v for k, v in MODELS.items() if not args.only or args.only in k}
    if args.quick:
        models = dict(list(models.items())[:1])
    if args.devices:
        chosen = {k: v for k, v in models.items() if any(a in k for a in ("llama", "qwen3", "gemma3", "rwkv7"))}
        found_devices = device_rows(chosen, DEVICE_SETUPS[:2] if args.quick else DEVICE_SETUPS)
        print(json.dumps(found_devices, indent=1) if args.json else "", end="")
        if not args.json:
            print_devices(found_devices)
        return
    peer = gguf_parser.binary_from(args.gguf_parser)
    found = rows(models, SETTINGS[:2] if args.quick else SETTINGS, peer)
    if args.json:
        print(json.dumps(found, indent=1))
        return
    print(
        "| model | settings | n_ctx used | model | KV / state | compute planned | compute llama.cpp | difference "
        "| plan time / llama.cpp time |"
    )
    print("|---|---|---:|---|---|---:|---:|---:|---:|")
    for r in found:
        s = ", ".join(f"{k}={v}" for k, v in r["settings"].items())
        same = {True: "equal", False: "differs"}
        if r["planned"] is None:
            diff = "not planned"
        elif r["planned"] == r["llama_cpp"]:
            diff = "exact"
        else:
            diff = f"{100 * (r['planned'] - r['llama_cpp']) / r['llama_cpp']:+.2f}%"
        print(
            f"| {r['model']} | {s} | {r['n_ctx']} | {same[r['model_equal']]} | {same[r['cache_equal']]} | "
            f"{r['planned'] or 0:,} | {r['llama_cpp']:,} | {diff} | {r['time_ratio']:.2f} |"
        )
    print_comparison(found, peer)
    shape = deep_shape(80)
    t = time.perf_counter()
    plan_shape(shape, ContextRequest(n_ctx=8192))
    t_plan = time.perf_counter() - t
    best = min(r["llama_seconds"] for r in found)
    print(f"\nplanning an 80-layer model from its metadata: {t_plan:.3f} s, {t_plan / best:.2f}x the fastest llama.cpp load above")
    with tempfile.TemporaryDirectory() as tmp:
        print()
        print("\n".join(remote(Path(tmp), args.quick)))


if __name__ == "__main__":
    main()
