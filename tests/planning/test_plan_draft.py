"""A draft model: its weights, KV cache and compute buffer are llama.cpp's for the draft loaded with
llama-server's draft context (its own model and context, measured beside the main one); they add to the
devices and the totals and ``--fit`` counts them. Next-token-prediction heads are not a draft: the plan says what
llama.cpp does with them."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from gguf_construct.cli.main import main
from gguf_construct.errors import PlanError
from gguf_construct.planning import ContextRequest, Device, DeviceRequest, plan, plan_shape
from gguf_construct.planning.draft import DraftOptions
from tests.planning.plan_inputs import shape_of
from tests.planning.tiny_adapters import saved
from tests.tiny_models import BUILDERS

pytest.importorskip("llama_cpp")

from tests.llama_memory import cpu_features  # noqa: E402
from tests.planning.llama_draft import measure_models  # noqa: E402


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as e:
            code = int(e.code or 0)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("draft")
    return {
        "main": saved(BUILDERS["llama"](n_layer=4, n_embd=512, n_ff=1024, n_head=8, n_head_kv=2), d / "main.gguf"),
        "draft": saved(BUILDERS["llama"](n_layer=2, n_embd=256, n_ff=512, wtype="q8_0"), d / "draft.gguf"),
        "draft gemma2": saved(BUILDERS["gemma2"](), d / "gemma2.gguf"),
        "draft mamba": saved(BUILDERS["mamba"](), d / "mamba.gguf"),
        "mtp": saved(BUILDERS["glm4moe"](n_layer=4, n_nextn=1, wtype="q4_0"), d / "mtp.gguf"),
    }


SETTINGS = {
    "defaults": ({"n_ctx": 1024}, DraftOptions()),
    "two sequences": ({"n_ctx": 2048, "n_seq_max": 2, "n_ubatch": 256}, DraftOptions()),
    "four sequences, unified": ({"n_ctx": 2048, "n_seq_max": 4, "kv_unified": True}, DraftOptions()),
    "a q8_0 draft cache": ({"n_ctx": 1024, "flash_attn": "on"}, DraftOptions(type_k="q8_0", type_v="q8_0")),
    "flash attention off": ({"n_ctx": 768, "flash_attn": "off", "n_batch": 512}, DraftOptions()),
}


@pytest.mark.parametrize("draft", ["draft", "draft gemma2", "draft mamba"])
@pytest.mark.parametrize("case", SETTINGS)
def test_the_draft_is_llama_cpps_with_the_draft_context(case, draft, models):
    """Main and draft loaded at once, the draft's context as llama-server makes it: each plan is llama.cpp's."""
    settings, options = SETTINGS[case]
    p = plan(models["main"], draft=models[draft], draft_options=options, features=cpu_features(), **settings)
    main_only = plan(models["main"], features=cpu_features(), **settings)
    both = {k: v for k, v in settings.items()}
    draft_settings = {**both, "n_ctx": main_only.context.n_ctx, "type_k": options.type_k, "type_v": options.type_v}
    n_seq = settings.get("n_seq_max", 1)
    m_main, m_draft = measure_models(
        {"path": models["main"], **both}, {"path": models[draft], **draft_settings, "n_outputs_max": n_seq, "n_outputs_max_per_seq": 1}
    )
    d = p.draft
    assert (d["model_bytes"], d["kv_bytes"] + d["recurrent_bytes"], d["compute_bytes"]) == (
        m_draft.total("model"),
        m_draft.total("context"),
        m_draft.total("compute"),
    )
    assert d["n_ctx"] == m_draft.n_ctx == m_main.n_ctx
    assert p.total_bytes == main_only.total_bytes + d["total_bytes"]
    assert p.total_bytes == sum(sum(sum(b.values()) for b in m.buffers.values()) for m in (m_main, m_draft))
    assert (p.model_bytes, p.kv_bytes, p.compute_bytes) == (main_only.model_bytes, main_only.kv_bytes, main_only.compute_bytes)


def test_draft_on_devices_and_in_a_fit(models):
    devices = DeviceRequest((Device("RPC0", 2**30), Device("RPC1", 2**30)), n_gpu_layers=5)
    p = plan(models["main"], n_ctx=1024, devices=devices, draft=models["draft"], draft_options=DraftOptions(n_gpu_layers=1), features=())
    req = ContextRequest(n_ctx=1024, n_outputs_max=1)
    alone = plan_shape(shape_of(models["draft"]), req, devices=DeviceRequest(devices.devices, n_gpu_layers=1), features=())
    assert [r["draft_bytes"] for r in p.devices] == [r["total_bytes"] for r in alone.devices]
    assert p.draft["devices"] == alone.devices
    # a device that holds the main model at 4096 cells but not with the draft too: the fit takes a smaller context
    req = DeviceRequest(
        (
            Device(
                "RPC0",
                plan(models["main"], n_ctx=4096, devices=DeviceRequest(devices.devices[:1], n_gpu_layers=5), features=()).devices[1][
                    "total_bytes"
                ]
                + 2**20,
            ),
        )
    )
    fitted = plan(models["main"], fit=True, devices=req, margin=2**20, min_ctx=256, draft=models["draft"], features=())
    assert fitted.fit["fits"] and fitted.devices[1]["total_bytes"] + 2**20 <= req.devices[0].size
    assert fitted.context.n_ctx < 4096 == plan(models["main"], fit=True, devices=req, margin=2**20, min_ctx=256, features=()).context.n_ctx
    args = fitted.fit["llama_cpp_arguments"]
    assert args[args.index("--model-draft") + 1] == str(models["draft"])
    assert fitted.draft["n_ctx"] == fitted.context.n_ctx
    assert args[args.index("--n-gpu-layers-draft") + 1] == str(fitted.draft["n_gpu_layers"])


def test_next_token_prediction_layers_are_noted_not_drafted(models):
    p = plan(models["mtp"], n_ctx=512)
    assert any("next-token-prediction" in n for n in p.notes) and p.draft is None
    assert not any("next-token-prediction" in n for n in plan(models["main"], n_ctx=512).notes)


def test_cli_json_text_and_refusals(models, tmp_path):
    code, out, _ = cli("plan", str(models["main"]), "--ctx", "1024", "--draft", str(models["draft"]), "-ctkd", "q8_0", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["draft"]["n_ctx"] == 1024 and data["draft"]["context"]["type_k"] == "q8_0" and data["draft"]["file"] == str(models["draft"])
    code, out, _ = cli("plan", str(models["main"]), "--ctx", "1024", "-md", str(models["draft"]))
    assert code == 0 and "draft " in out
    assert cli("plan", str(models["main"]), "--draft", str(tmp_path / "missing.gguf"))[0] == 2
    broken = BUILDERS["llama"]()
    del broken.metadata["llama.attention.head_count"]
    code, _, err = cli("plan", str(models["main"]), "--draft", str(saved(broken, tmp_path / "broken.gguf")))
    assert code == 1, err
    for kwargs in (
        dict(draft=models["draft"], draft_options=DraftOptions(n_gpu_layers=-1)),
        dict(draft=models["draft"], draft_options=DraftOptions(n_gpu_layers=True)),
        dict(draft=models["draft"], draft_options=DraftOptions(type_k="q3_K")),
        dict(draft=models["draft"], draft_options={"n_ctx": 256}),
        dict(draft=5),
    ):
        with pytest.raises(PlanError) as e:
            plan(models["main"], **kwargs)
        assert e.value.rule == "plan.request"


def test_the_picture_stacks_adapters_and_draft(models, tmp_path):
    """Without devices, the CPU's bar holds everything the plan totals, the adapter and the draft included."""
    from gguf_construct.api.gguf_file import load_gguf
    from gguf_construct.planning.svg import KINDS, bars
    from tests.planning.tiny_adapters import lora_for

    adapter = saved(lora_for(load_gguf(models["main"]), ["blk.0.attn_q.weight"], rank=16), tmp_path / "a.gguf")
    p = plan(models["main"], n_ctx=512, lora=[str(adapter)], draft=models["draft"], features=())
    (cpu,) = bars(p)
    assert (cpu["adapter_bytes"], cpu["draft_bytes"]) == (p.adapter_bytes, p.draft["total_bytes"])
    assert sum(cpu[k] for k, _, _ in KINDS) == p.total_bytes
    code, _, _ = cli("plan", str(models["main"]), "--ctx", "512", "--draft", str(models["draft"]), "--svg", str(tmp_path / "p.svg"))
    assert code == 0 and "draft model" in (tmp_path / "p.svg").read_text()


def test_remote_draft_is_planned_from_its_header(models):
    from http_testserver import TestServer

    from gguf_construct.sources.options import configure

    previous = configure(retries=2, backoff=0.01, connect_timeout=5.0, read_timeout=10.0, request_deadline=30.0)
    try:
        with TestServer() as server:
            server.add("/draft.gguf", models["main"].read_bytes())
            remote = plan(models["draft"], n_ctx=512, draft=server.url("/draft.gguf"), features=())
            local = plan(models["draft"], n_ctx=512, draft=models["main"], features=())
            assert {k: v for k, v in remote.draft.items() if k != "file"} == {k: v for k, v in local.draft.items() if k != "file"}
            assert server.counts.bytes < models["main"].stat().st_size / 2
    finally:
        configure(previous)


def test_a_draft_of_an_architecture_without_a_graph_is_unknown_and_not_fitted(models, tmp_path):
    f = BUILDERS["llama"]()
    f.metadata.set("general.architecture", "nonesuch")
    for key in [k for k in f.metadata if k.startswith("llama.")]:
        f.metadata.set(key.replace("llama.", "nonesuch.", 1), f.metadata[key], type=f.metadata.type_of(key))
    unknown = saved(f, tmp_path / "unknown.gguf")
    p = plan(models["main"], n_ctx=512, draft=unknown)
    assert p.draft["compute_bytes"] is None and p.total_bytes is None and p.draft["model_bytes"] > 0
    with pytest.raises(PlanError, match="not modelled") as e:
        plan(models["main"], fit=True, ram=2**34, draft=unknown)
    assert e.value.rule == "plan.request"


def test_a_ram_fit_counts_the_draft(models):
    """Without devices the whole plan, draft included, must fit in --ram: a budget that holds the main model at
    its training context holds less context with the draft."""
    alone = plan(models["main"], n_ctx=4096, features=())
    budget = alone.total_bytes + 2**20
    fitted = plan(models["main"], fit=True, ram=budget, margin=2**20, min_ctx=256, draft=models["draft"], features=())
    assert fitted.fit["fits"] and fitted.total_bytes + 2**20 <= budget
    assert fitted.context.n_ctx < 4096 == plan(models["main"], fit=True, ram=budget, margin=2**20, min_ctx=256, features=()).context.n_ctx


MTP_SETTINGS = {
    "defaults": ("f16", {"n_ctx": 512}),
    "no mmap, q4_0 heads repacked": ("q4_0", {"n_ctx": 512, "use_mmap": False}),
    "flash attention off, two sequences": ("f16", {"n_ctx": 1024, "flash_attn": "off", "n_seq_max": 2}),
    "a q8_0 MTP cache": ("q8_0", {"n_ctx": 768, "flash_attn": "on", "type_k": "q8_0", "type_v": "q8_0"}),
}


@pytest.mark.parametrize("case", MTP_SETTINGS)
def test_mtp_is_llama_cpps_heads_and_context(case, tmp_path):
    """llama-server's MTP speculation: the model loaded with its heads (load_mtp), the main context, and a
    context of type MTP over the same model with the draft context's parameters (one output per sequence):
    the heads' bytes, the MTP context's KV cache and compute buffer are llama.cpp's."""
    from tests import llama_memory as lm
    from tests.planning.llama_draft import make_context

    wtype, settings = MTP_SETTINGS[case]
    settings = dict(settings)
    use_mmap = settings.pop("use_mmap", True)
    draft_types = {k: settings.pop(k) for k in ("type_k", "type_v") if k in settings}
    path = saved(BUILDERS["glm4moe"](n_layer=4, n_nextn=1, wtype=wtype), tmp_path / "mtp.gguf")
    options = DraftOptions(**draft_types)
    p = plan(path, mtp=True, draft_options=options, use_mmap=use_mmap, features=cpu_features(), **settings)
    lib = lm._lib()
    L = lib.L
    mp = L.llama_model_default_params()
    mp.n_gpu_layers, mp.load_mtp = 0, True
    mp.load_mode = L.LLAMA_LOAD_MODE_MMAP if use_mmap else L.LLAMA_LOAD_MODE_NONE
    model = L.llama_model_load_from_file(str(path).encode(), mp)
    assert model
    try:
        main = make_context(lib, model, **settings)
        n_seq = settings.get("n_seq_max", 1)
        mtp_settings = {**settings, **draft_types, "n_ctx": L.llama_n_ctx(main)}
        mtp = make_context(lib, model, n_outputs_max=n_seq, n_outputs_max_per_seq=1, ctx_type=1, ctx_other=main, **mtp_settings)
        try:
            m_main, m_mtp = lib.breakdown(main), lib.breakdown(mtp)
        finally:
            L.llama_free(mtp)
            L.llama_free(main)
    finally:
        L.llama_model_free(model)
    total = {part: sum(b[part] for b in m_main.values()) for part in ("model", "context", "compute")}
    assert p.model_bytes + p.draft["model_bytes"] == total["model"]
    assert (p.kv_bytes, p.compute_bytes) == (total["context"], total["compute"])
    assert (p.draft["kv_bytes"], p.draft["compute_bytes"]) == (
        sum(b["context"] for b in m_mtp.values()),
        sum(b["compute"] for b in m_mtp.values()),
    )
    assert p.total_bytes == sum(total.values()) + p.draft["kv_bytes"] + p.draft["compute_bytes"]


def test_mtp_requests_llama_cpp_cannot_make_are_refused(models):
    for kwargs in (
        dict(mtp=True, draft=models["draft"]),
        dict(mtp="yes"),
        dict(mtp=True, devices=DeviceRequest((Device("RPC0", 2**30),), n_gpu_layers=2)),
    ):
        with pytest.raises(PlanError) as e:
            plan(models["mtp"], n_ctx=512, **kwargs)
        assert e.value.rule == "plan.request"
    with pytest.raises(PlanError, match="no next-token-prediction layers"):
        plan(models["main"], n_ctx=512, mtp=True)
    code, out, _ = cli("plan", str(models["mtp"]), "--ctx", "512", "--mtp", "--json")
    data = json.loads(out)
    assert code == 0 and data["draft"]["kind"] == "mtp" and data["draft"]["layers"] == [3]
    code, _, _ = cli("plan", str(models["mtp"]), "--fit", "--ram", "16G", "--mtp", "--json")
    assert code == 0


@pytest.mark.parametrize("flash_attn", ["on", "off"])
def test_mtp_graph_is_llama_cpps_node_for_node(flash_attn, models):
    from gguf_construct.planning.compute.llama_blocks import Batch, GraphBuilder
    from gguf_construct.planning.compute.mtp import build_glm4moe_mtp
    from gguf_construct.planning.context import resolve
    from tests import llama_memory as lm
    from tests.planning.llama_draft import make_context, reserved_nodes

    lib = lm._lib()
    L = lib.L
    mp = L.llama_model_default_params()
    mp.n_gpu_layers, mp.load_mtp = 0, True
    model = L.llama_model_load_from_file(str(models["mtp"]).encode(), mp)
    try:
        main = make_context(lib, model, n_ctx=512, n_seq_max=2, flash_attn=flash_attn)
        mtp = make_context(
            lib, model, n_ctx=512, n_seq_max=2, flash_attn=flash_attn, n_outputs_max=2, n_outputs_max_per_seq=1, ctx_type=1, ctx_other=main
        )
        try:
            ref = [(op, t, tuple(ne), view) for op, t, ne, view in reserved_nodes(mtp, 16, 2, 2)]
        finally:
            L.llama_free(mtp)
            L.llama_free(main)
    finally:
        L.llama_model_free(model)
    shape = shape_of(models["mtp"])
    b = GraphBuilder(shape, resolve(shape, ContextRequest(n_ctx=512, n_seq_max=2, flash_attn=flash_attn, n_outputs_max=2)), Batch(16, 2, 2))
    build_glm4moe_mtp(b)
    assert [(op, t, tuple(ne), view) for op, t, ne, view in b.g.graph.summary()] == ref


@pytest.mark.rpc_tier
def test_draft_on_rpc_devices_is_llama_cpps(models):
    """The draft spread over two rpc-server devices with its own offload: its model and cache bytes per device
    are llama.cpp's for the draft loaded there (the main context's cells), and they join the main plan's rows."""
    from tests.planning.rpc_devices import measure_on_devices, rpc_library, rpc_servers

    library = rpc_library()
    assert library is not None
    names = ["d0", "d1"]
    devices = DeviceRequest(tuple(Device(n, 8 * 2**30) for n in names), n_gpu_layers=5)
    p = plan(
        models["main"],
        n_ctx=1024,
        devices=devices,
        draft=models["draft"],
        draft_options=DraftOptions(n_gpu_layers=2),
        features=cpu_features(),
    )
    with rpc_servers(2, library) as endpoints:
        measured = measure_on_devices(models["draft"], library, endpoints, names, n_gpu_layers=2, n_ctx=1024)
    assert "refused" not in measured, measured
    rows = {row["name"]: row for row in p.draft["devices"]}
    for name, endpoint in zip(names, endpoints, strict=True):
        got = measured["buffers"].get(f"RPC0[{endpoint}]", {"model": 0, "context": 0})
        assert (rows[name]["model_bytes"], rows[name]["kv_bytes"]) == (got["model"], got["context"]), name
    assert any(rows[name]["model_bytes"] for name in names)
    assert [r["draft_bytes"] for r in p.devices] == [r["total_bytes"] for r in p.draft["devices"]]


def test_mtp_models_llama_cpp_cannot_draft_with_are_refused(tmp_path):
    """Two MTP blocks (llama.cpp's MTP graph asserts one), or a block without its projection: plan.model."""
    two = saved(BUILDERS["glm4moe"](n_layer=5, n_nextn=2), tmp_path / "two.gguf")
    with pytest.raises(PlanError, match="exactly one") as e:
        plan(two, n_ctx=512, mtp=True)
    assert e.value.rule == "plan.model"
    f = BUILDERS["glm4moe"](n_layer=4, n_nextn=1)
    del f.tensors["blk.3.nextn.eh_proj.weight"]
    with pytest.raises(PlanError, match="eh_proj") as e:
        plan(saved(f, tmp_path / "no-proj.gguf"), n_ctx=512, mtp=True)
    assert e.value.rule == "plan.model"
