"""LoRA adapters: each adapter's buffers and the compute buffer with its products are llama.cpp's to the byte
(llama_adapter_lora_init, llama_set_adapters_lora, the re-reserved compute buffer), and what
llama_adapter_lora_init refuses, the plan refuses."""

from __future__ import annotations

import contextlib
import io
import json
import time

import pytest

from gguf_construct.cli.main import main
from gguf_construct.errors import PlanError
from gguf_construct.planning import Device, DeviceRequest, plan
from tests.planning.tiny_adapters import lora_for, saved
from tests.tiny_models import BUILDERS

llama_cpp = pytest.importorskip("llama_cpp")

from tests.llama_memory import cpu_features  # noqa: E402
from tests.planning.llama_adapters import AdapterRefused, measure_with_adapters  # noqa: E402

ATTN = ["blk.0.attn_q.weight", "blk.1.attn_v.weight", "blk.1.attn_output.weight"]
FFN = ["blk.0.ffn_up.weight", "blk.0.ffn_gate.weight", "blk.1.ffn_down.weight"]


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as e:  # argparse's usage errors
            code = int(e.code or 0)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    d = tmp_path_factory.mktemp("lora-bases")
    out = {}
    for name, builder, kw in (
        ("llama f16", "llama", {}),
        ("llama q4_0", "llama", {"wtype": "q4_0"}),  # repacked on AVX2: the adapter falls back to CPU
        ("qwen3moe", "qwen3moe", {}),
    ):
        f = BUILDERS[builder](**kw)
        out[name] = (f, saved(f, d / f"{name.replace(' ', '-')}.gguf"))
    return out


def _compare(base, adapters, tmp_path, **settings):
    """(planned, llama.cpp's) model, context, compute and adapter buffers."""
    paths = [(saved(a, tmp_path / f"a{i}.gguf"), scale) for i, (a, scale) in enumerate(adapters)]
    m, buffers = measure_with_adapters(base, paths, **settings)
    use_mmap = settings.pop("use_mmap", True)
    p = plan(base, lora=[(str(path), scale) for path, scale in paths], features=cpu_features(), use_mmap=use_mmap, **settings)
    planned = (p.model_bytes, p.kv_bytes, p.compute_bytes, [a["buffers"] for a in p.adapters])
    return planned, (m.total("model"), m.total("context"), m.total("compute"), buffers), p


CASES = {
    "attention, rank 8, f32": ("llama f16", [dict(targets=ATTN)], {}),
    "feed-forward, rank 16, f16, no mmap": ("llama f16", [dict(targets=FFN, rank=16, dtype="f16")], {"use_mmap": False}),
    "repacked base weights, q8_0 pairs": ("llama q4_0", [dict(targets=ATTN + FFN, rank=32, dtype="q8_0")], {}),
    "token embeddings and output": ("llama f16", [dict(targets=["token_embd.weight", "output.weight"], rank=4)], {}),
    "two adapters of other ranks": ("llama f16", [dict(targets=ATTN, rank=4), dict(targets=FFN + ATTN[:1], rank=12, seed=1)], {}),
    "experts' stacks and router": (
        "qwen3moe",
        [dict(targets=["blk.0.ffn_up_exps.weight", "blk.1.ffn_down_exps.weight", "blk.0.ffn_gate_inp.weight"], rank=4)],
        {},
    ),
    "an aLoRA": ("llama f16", [dict(targets=ATTN, invocation_tokens=[5, 6, 7])], {}),
    "a rank past the weight's sizes, f16": ("llama f16", [dict(targets=ATTN[:1] + FFN[:1], rank=2048, dtype="f16")], {}),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("flash_attn", ["on", "off"])
def test_adapters_and_compute_are_llama_cpps(case, flash_attn, bases, tmp_path):
    name, specs, settings = CASES[case]
    f, path = bases[name]
    adapters = [(lora_for(f, **spec), 1.0) for spec in specs]
    planned, measured, p = _compare(path, adapters, tmp_path, n_ctx=512, n_ubatch=128, flash_attn=flash_attn, **settings)
    assert planned == measured
    without = plan(path, n_ctx=512, n_ubatch=128, flash_attn=flash_attn, features=cpu_features(), use_mmap=settings.get("use_mmap", True))
    assert p.compute_bytes >= without.compute_bytes  # the products join the graph (the peak may lie elsewhere)
    assert p.total_bytes == without.total_bytes + p.adapter_bytes + (p.compute_bytes - without.compute_bytes)


def test_scale_zero_loads_the_adapter_without_its_products(bases, tmp_path):
    f, path = bases["llama f16"]
    adapter = lora_for(f, ATTN + FFN, rank=64)
    planned, measured, p = _compare(path, [(adapter, 0.0)], tmp_path, n_ctx=256)
    assert planned == measured
    assert p.compute_bytes == plan(path, n_ctx=256, features=cpu_features()).compute_bytes
    assert p.adapter_bytes > 0


def test_same_adapter_twice_is_two_adapters(bases, tmp_path):
    f, path = bases["llama f16"]
    a = saved(lora_for(f, ATTN), tmp_path / "a.gguf")
    m, buffers = measure_with_adapters(path, [(a, 1.0), (a, 0.5)], n_ctx=256)
    p = plan(path, n_ctx=256, lora=[str(a), (str(a), 0.5)], features=cpu_features())
    assert [x["buffers"] for x in p.adapters] == buffers and len(buffers) == 2
    assert p.compute_bytes == m.total("compute")


def _hostile(f):
    """Adapters llama_adapter_lora_init refuses, each made from a good one."""
    good = lora_for(f, ATTN)

    def edit(fn):
        g = lora_for(f, ATTN)
        fn(g)
        return g

    def rename(g, old, new):
        t = g.tensors[old]
        g.tensors.add(new, t.data, t.type.name, tuple(t.shape))
        del g.tensors[old]

    return {
        "another architecture": lora_for(f, ATTN, arch="qwen2"),
        "not an adapter": edit(lambda g: g.metadata.set("general.type", "model")),
        "not a lora": edit(lambda g: g.metadata.set("adapter.type", "control_vector")),
        "a half of a pair": edit(lambda g: g.tensors.__delitem__("blk.0.attn_q.weight.lora_b")),
        "a suffix it does not know": edit(lambda g: rename(g, "blk.0.attn_q.weight.lora_b", "blk.0.attn_q.weight.lora_c")),
        "a weight the model lacks": edit(
            lambda g: [rename(g, f"blk.0.attn_q.weight.lora_{x}", f"blk.7.attn_q.weight.lora_{x}") for x in "ab"]
        ),
        "shapes of another model": lora_for(BUILDERS["llama"](n_embd=128), ["blk.0.attn_q.weight"]),
        "A not transposed": edit(lambda g: _swap(g, f)),
        "invocation tokens of another type": edit(lambda g: g.metadata.set("adapter.alora.invocation_tokens", [1, 2], type="arr[i32]")),
        "good": good,
    }


def _swap(g, f):
    """A of rank 8, B of rank 4: the ranks do not chain."""
    import numpy as np

    ne = tuple(int(d) for d in f.tensors["blk.0.attn_q.weight"].shape)
    del g.tensors["blk.0.attn_q.weight.lora_b"]
    g.tensors.add("blk.0.attn_q.weight.lora_b", np.zeros((ne[1], 4), np.float32))


@pytest.mark.parametrize(
    "case",
    [
        "another architecture",
        "not an adapter",
        "not a lora",
        "a half of a pair",
        "a suffix it does not know",
        "a weight the model lacks",
        "shapes of another model",
        "A not transposed",
        "invocation tokens of another type",
    ],
)
def test_what_llama_cpp_refuses_is_refused(case, bases, tmp_path):
    f, path = bases["llama f16"]
    adapter = saved(_hostile(f)[case], tmp_path / "hostile.gguf")
    with pytest.raises(AdapterRefused):
        measure_with_adapters(path, [(adapter, 1.0)], n_ctx=256)
    with pytest.raises(PlanError) as e:
        plan(path, n_ctx=256, lora=[str(adapter)])
    assert e.value.rule == "plan.model"
    code, _, err = cli("plan", str(path), "--ctx", "256", "--lora", str(adapter))
    assert code == 1 and "adapter" in err


def test_keys_ggml_aborts_on_are_refused(bases, tmp_path):
    """A type key that is not a string, an alpha that is not f32: llama.cpp aborts the process (not tried here)."""
    f, path = bases["llama f16"]
    for key, value, kind in (("general.type", 1, "u32"), ("adapter.lora.alpha", 16.0, "f64"), ("adapter.type", ["lora"], "arr[str]")):
        g = lora_for(f, ATTN)
        g.metadata.set(key, value, type=kind)
        with pytest.raises(PlanError, match=key.replace(".", r"\.")):
            plan(path, n_ctx=256, lora=[str(saved(g, tmp_path / "k.gguf"))])


def test_an_adapter_cut_short_is_refused_by_both(bases, tmp_path):
    f, path = bases["llama f16"]
    whole = saved(lora_for(f, ATTN, rank=32), tmp_path / "whole.gguf").read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(whole[: len(whole) - 100])
    with pytest.raises(AdapterRefused):
        measure_with_adapters(path, [(cut, 1.0)], n_ctx=256)
    with pytest.raises(PlanError):
        plan(path, n_ctx=256, lora=[str(cut)])


def test_a_huge_rank_in_the_header_is_refused_at_once(bases, tmp_path):
    """A header claiming a rank of 2**40 with no data: refused as cut short, without allocating or reading it."""
    f, path = bases["llama f16"]
    g = lora_for(f, ["blk.0.attn_q.weight"], rank=1)
    blob = saved(g, tmp_path / "small.gguf").read_bytes()
    huge = tmp_path / "huge.gguf"
    rank_field = (1).to_bytes(8, "little")
    # the A tensor's shape (256, 1) in the header: its second dimension becomes 2**40
    at = blob.index(b"blk.0.attn_q.weight.lora_a") + len(b"blk.0.attn_q.weight.lora_a") + 4 + 8
    assert blob[at : at + 8] == rank_field
    huge.write_bytes(blob[:at] + (2**40).to_bytes(8, "little") + blob[at + 8 :])
    start = time.monotonic()
    with pytest.raises(PlanError):
        plan(path, n_ctx=256, lora=[str(huge)])
    assert time.monotonic() - start < 5


def test_adapters_go_to_the_device_of_their_weights_and_fit_counts_them(bases, tmp_path):
    f, path = bases["llama f16"]
    adapter = str(saved(lora_for(f, ATTN + ["output.weight"], rank=64), tmp_path / "a.gguf"))
    devices = DeviceRequest((Device("RPC0", 2**30),), n_gpu_layers=2)
    p = plan(path, n_ctx=256, devices=devices, lora=[adapter], features=())
    cpu, rpc = p.devices
    # layer 1 and the output layer are offloaded, layer 0 stays: its pair is in the CPU's mapped-type buffer
    assert p.adapters[0]["buffers"] == {"CPU_Mapped": cpu["adapter_bytes"], "RPC0": rpc["adapter_bytes"]}
    assert cpu["adapter_bytes"] > 0 and rpc["adapter_bytes"] > 0
    without = plan(path, n_ctx=256, devices=devices, features=())
    assert [r["total_bytes"] for r in p.devices] == [
        w["total_bytes"] + r["adapter_bytes"] + r["compute_bytes"] - w["compute_bytes"]
        for r, w in zip(p.devices, without.devices, strict=True)
    ]
    # a device that holds every layer without the adapter but not with all of its pairs: the fit offloads fewer
    every = plan(path, n_ctx=256, devices=DeviceRequest((Device("RPC0", 2**30),), n_gpu_layers=3), lora=[adapter], features=())
    size = every.devices[1]["total_bytes"] - every.devices[1]["adapter_bytes"] // 2 + 2**20
    req = DeviceRequest((Device("RPC0", size),))
    fitted = plan(path, n_ctx=256, fit=True, devices=req, margin=2**20, lora=[adapter], features=())
    assert fitted.fit["fits"] and fitted.devices[1]["total_bytes"] + 2**20 <= size
    assert fitted.n_gpu_layers < 3 == plan(path, n_ctx=256, fit=True, devices=req, margin=2**20, features=()).n_gpu_layers
    assert "--lora" in fitted.fit["llama_cpp_arguments"]


def test_cli_json_and_usage(bases, tmp_path):
    f, path = bases["llama f16"]
    adapter = str(saved(lora_for(f, ATTN), tmp_path / "a.gguf"))
    code, out, _ = cli("plan", str(path), "--ctx", "256", "--lora", adapter, "--lora-scaled", adapter, "0.5", "--json")
    assert code == 0
    data = json.loads(out)
    assert [a["scale"] for a in data["adapters"]] == [1.0, 0.5] and data["adapter_bytes"] == 2 * data["adapters"][0]["bytes"]
    code, out, _ = cli("plan", str(path), "--ctx", "256", "--lora", adapter)
    assert code == 0 and "LoRA" in out
    assert cli("plan", str(path), "--lora-scaled", adapter, "x")[0] == 2
    assert cli("plan", str(path), "--lora", str(tmp_path / "missing.gguf"))[0] == 2
    assert cli("plan", str(path), "--lora", adapter, "--gpu-mem", "1G", "--n-gpu-layers", "auto")[0] == 2


def test_remote_adapter_is_planned_from_its_header(bases, tmp_path):
    from http_testserver import TestServer

    from gguf_construct.sources.options import configure

    f, path = bases["llama f16"]
    adapter = saved(lora_for(f, ATTN + FFN, rank=256), tmp_path / "a.gguf")
    previous = configure(retries=2, backoff=0.01, connect_timeout=5.0, read_timeout=10.0, request_deadline=30.0)
    try:
        with TestServer() as server:
            server.add("/a.gguf", adapter.read_bytes())
            remote = plan(path, n_ctx=256, lora=[server.url("/a.gguf")], features=())
            local = plan(path, n_ctx=256, lora=[str(adapter)], features=())
            assert remote.adapters[0]["buffers"] == local.adapters[0]["buffers"] and remote.compute_bytes == local.compute_bytes
            assert server.counts.bytes < adapter.stat().st_size / 2
    finally:
        configure(previous)


@pytest.mark.parametrize("wtype", ["f16", "q4_0"])
def test_output_of_tied_embeddings_is_no_tensor_to_adapt(wtype, tmp_path):
    """With no output.weight, llama.cpp's output layer is the embeddings' tensor (or a copy of it in another
    buffer type, still named token_embd.weight): an adapter of output.weight names no tensor of the model."""
    import numpy as np

    f = BUILDERS["gemma2"](wtype=wtype)  # gemma2 ties its output to its embeddings
    assert "output.weight" not in f.tensors
    base = saved(f, tmp_path / "tied.gguf")
    g = lora_for(f, ["blk.0.attn_q.weight"])
    ne = tuple(int(d) for d in f.tensors["token_embd.weight"].shape)
    g.tensors.add("output.weight.lora_a", np.zeros((4, ne[0]), np.float32))
    g.tensors.add("output.weight.lora_b", np.zeros((ne[1], 4), np.float32))
    adapter = saved(g, tmp_path / "out.gguf")
    with pytest.raises(AdapterRefused, match="output.weight"):
        measure_with_adapters(base, [(adapter, 1.0)], n_ctx=256)
    with pytest.raises(PlanError, match="no tensor 'output.weight'"):
        plan(base, n_ctx=256, lora=[str(adapter)], features=cpu_features())


def test_next_token_prediction_weights_take_no_adapter(tmp_path):
    """glm4moe's MTP blocks are created skipped: llama.cpp has no tensor to adapt there."""
    f = BUILDERS["glm4moe"](n_layer=4, n_nextn=1)
    base = saved(f, tmp_path / "mtp.gguf")
    adapter = saved(lora_for(f, ["blk.3.attn_q.weight"]), tmp_path / "a.gguf")
    with pytest.raises(AdapterRefused):
        measure_with_adapters(base, [(adapter, 1.0)], n_ctx=256)
    with pytest.raises(PlanError, match="no tensor"):
        plan(base, n_ctx=256, lora=[str(adapter)])
    kept = saved(lora_for(f, ["blk.2.attn_q.weight"]), tmp_path / "b.gguf")
    m, buffers = measure_with_adapters(base, [(kept, 1.0)], n_ctx=256)
    p = plan(base, n_ctx=256, lora=[str(kept)], features=cpu_features())
    assert [a["buffers"] for a in p.adapters] == buffers and p.compute_bytes == m.total("compute")


def test_names_are_paired_as_llama_cpp_pairs_them(bases, tmp_path):
    """Every '.lora_a' in a name is cut (llama.cpp's replace_all), and '_norm.weight' tensors are skipped."""
    import numpy as np

    f, path = bases["llama f16"]
    g = lora_for(f, ["blk.0.attn_q.weight"])
    g.tensors.add("blk.0.attn_norm.weight", np.ones(256, np.float32))
    t = g.tensors["blk.0.attn_q.weight.lora_a"]
    g.tensors.add("blk.0.attn_q.weight.lora_a.lora_a", t.data, t.type.name, tuple(t.shape))
    del g.tensors["blk.0.attn_q.weight.lora_a"]
    adapter = saved(g, tmp_path / "names.gguf")
    m, buffers = measure_with_adapters(path, [(adapter, 1.0)], n_ctx=256)
    p = plan(path, n_ctx=256, lora=[str(adapter)], features=cpu_features())
    assert [a["buffers"] for a in p.adapters] == buffers and p.compute_bytes == m.total("compute")


def test_request_limits(bases, tmp_path):
    f, path = bases["llama f16"]
    adapter = str(saved(lora_for(f, ATTN), tmp_path / "a.gguf"))
    for scale in (float("nan"), float("inf"), "1"):
        with pytest.raises(PlanError) as e:
            plan(path, n_ctx=256, lora=[(adapter, scale)])
        assert e.value.rule == "plan.request"
    with pytest.raises(PlanError, match="more than 64"):
        plan(path, n_ctx=256, lora=[adapter] * 65)
    for wrong in (adapter, [(adapter, 1.0, 2)], 5, [5]):
        with pytest.raises(PlanError) as e:
            plan(path, n_ctx=256, lora=wrong)
        assert e.value.rule == "plan.request"
    assert cli("plan", str(path), "--ctx", "256", "--lora-scaled", adapter, "1e-3")[0] == 0
    assert cli("plan", str(path), "--lora-scaled", adapter, "inf")[0] == 2


def test_embeddings_adapter_of_a_tied_output_is_refused(tmp_path):
    """The tied output layer multiplies by the embeddings' tensor, so the embeddings' pair (flipped, rows of A)
    joins that product too, where its shapes do not chain: ggml aborts building the graph (not run here)."""
    f = BUILDERS["gemma2"]()
    base = saved(f, tmp_path / "tied.gguf")
    adapter = saved(lora_for(f, ["token_embd.weight"], rank=4), tmp_path / "embd.gguf")
    with pytest.raises(PlanError, match="ggml_mul_mat refuses") as e:
        plan(base, n_ctx=256, lora=[str(adapter)])
    assert e.value.rule == "plan.model"
    assert plan(base, n_ctx=256, lora=[(str(adapter), 0.0)]).adapter_bytes > 0  # loaded, not applied: no product


def test_a_pair_of_more_dimensions_than_its_weight_is_refused(bases, tmp_path):
    """llama.cpp checks the first two dimensions only; a stack of A matrices on a plain weight passes the check
    and makes ggml abort building the product (not run here): the plan refuses it."""
    import numpy as np

    f, path = bases["llama f16"]
    g = lora_for(f, ["blk.0.attn_q.weight"])
    del g.tensors["blk.0.attn_q.weight.lora_a"]
    g.tensors.add("blk.0.attn_q.weight.lora_a", np.zeros((3, 8, 256), np.float32))
    with pytest.raises(PlanError, match="ggml_mul_mat refuses"):
        plan(path, n_ctx=256, lora=[str(saved(g, tmp_path / "stack.gguf"))])


def test_one_gpu_holds_the_pairs_of_its_layers(bases, tmp_path):
    f, path = bases["llama f16"]
    adapter = str(saved(lora_for(f, ATTN + ["output.weight"]), tmp_path / "a.gguf"))
    p = plan(path, n_ctx=256, n_gpu_layers=2, lora=[adapter], features=())
    buffers = p.adapters[0]["buffers"]
    assert set(buffers) == {"CPU_Mapped", "GPU"} and p.gpu["adapter_bytes"] == buffers["GPU"]
    assert p.gpu["total_bytes"] == sum(v for k, v in p.gpu.items() if k != "total_bytes")


@pytest.mark.rpc_tier
@pytest.mark.parametrize("n_gpu_layers", [1, 2, 3])
def test_adapters_on_rpc_devices_are_llama_cpps(n_gpu_layers, bases, tmp_path):
    """Two rpc-server devices: each adapter pair lies in the buffer of the device (or the CPU's type) holding
    its weight, as llama.cpp allocates it, and the model and cache bytes per device are the plan's."""
    from tests.planning.llama_adapters import measure_adapters_on_devices
    from tests.planning.rpc_devices import rpc_library, rpc_servers

    f, path = bases["llama f16"]
    adapter = saved(lora_for(f, ATTN + FFN + ["output.weight", "token_embd.weight"], rank=16), tmp_path / "a.gguf")
    library = rpc_library()
    assert library is not None
    names = ["d0", "d1"]
    devices = DeviceRequest(tuple(Device(n, 8 * 2**30) for n in names), n_gpu_layers=n_gpu_layers)
    p = plan(path, n_ctx=256, devices=devices, lora=[str(adapter)], features=cpu_features())
    with rpc_servers(2, library) as endpoints:
        measured = measure_adapters_on_devices(path, [adapter], library, endpoints, n_gpu_layers, n_ctx=256)
    by_endpoint = {f"RPC0[{e}]": n for n, e in zip(names, endpoints, strict=True)}
    (got,) = measured["adapters"]
    assert {by_endpoint.get(k, k): v for k, v in got.items()} == p.adapters[0]["buffers"]
    rows = {row["name"]: row for row in p.devices}
    for endpoint, name in by_endpoint.items():
        b = measured["buffers"].get(endpoint, {"model": 0, "context": 0})
        assert (rows[name]["model_bytes"], rows[name]["kv_bytes"], rows[name]["adapter_bytes"]) == (
            b["model"],
            b["context"],
            got.get(endpoint, 0),
        )
