"""ggml's scheduler over planned graphs (planning.compute.splits): splits, copies of tensors crossing backends,
pipeline-parallel copies and pins, worked by hand on small graphs; one backend leaves a graph as it is. The
per-device buffers against llama.cpp itself are in test_plan_devices.py (the RPC tier)."""

from __future__ import annotations

import pytest

from gguf_construct.api.gguf_file import load_gguf
from gguf_construct.planning import ModelShape, PlanError, plan
from gguf_construct.planning.compute import build_graph, reserved_batches
from gguf_construct.planning.compute.alloc import BufferedGraph, buffer_chunks, reserve_bytes
from gguf_construct.planning.compute.ggml_ir import Ggml, GgmlTensor
from gguf_construct.planning.compute.splits import MAX_COPIES, Placement, schedule
from gguf_construct.planning.context import ContextRequest, resolve
from gguf_construct.planning.devices import Device, DeviceRequest, compute_placement, pipeline_parallel
from tests.tiny_models import gemma3, llama, qwen3moe

DEV, CPU = 0, 1


def _two_matmuls() -> tuple[Ggml, dict[str, GgmlTensor]]:
    """x (an input, 1 KiB) times a weight on the device, then times a weight on the CPU (the result an output)."""
    g = Ggml()
    x = g.input("f32", 64, 4, name="x")
    w0, w1 = g.weight("f32", 64, 64, name="w0"), g.weight("f32", 64, 64, name="w1")
    y = g.mul_mat(w0, x)
    z = g.expand(g.mul_mat(w1, y), output=True)
    return g, {"x": x, "y": y, "z": z, "w0": w0, "w1": w1}


def _placement(copies: int = 1, pin=lambda layer: None) -> Placement:
    homes = {"w0": (DEV, True), "w1": (CPU, True)}
    return Placement(2, lambda t: homes.get(t.name) if t.external else None, pin, copies)


def test_a_tensor_crossing_backends_is_copied_into_the_consumers_buffer():
    """y runs on the device (its weight is there), z on the CPU: x is copied to the device, y back to the CPU.
    Device: x's copy and y (1 KiB each); CPU: x, whose block y's copy then reuses, and z (kept: an output)."""
    g, t = _two_matmuls()
    scheduled = schedule(g.graph, _placement())
    kinds = [(n.op, b) for n, b in zip(scheduled.nodes, scheduled.node_buffers, strict=True)]
    assert kinds == [("NONE", CPU), ("NONE", DEV), ("MUL_MAT", DEV), ("NONE", DEV), ("NONE", CPU), ("MUL_MAT", CPU)]
    copy_of_x, copy_of_y = scheduled.nodes[1], scheduled.nodes[4]
    assert scheduled.sources[id(t["y"])] == (t["w0"], copy_of_x) and scheduled.sources[id(t["z"])] == (t["w1"], copy_of_y)
    assert buffer_chunks(scheduled) == [[2048], [2048]]


def test_pipeline_parallelism_keeps_every_copy_of_every_input():
    """With four copies: the input x and its three copies on the CPU, four copies of x on the device and four of y
    on the CPU, all kept (never freed or reused): device 4 KiB + y, CPU 8 KiB + z."""
    g, _ = _two_matmuls()
    scheduled = schedule(g.graph, _placement(MAX_COPIES))
    assert len(scheduled.kept) == 3 * MAX_COPIES
    assert buffer_chunks(scheduled) == [[5 * 1024], [9 * 1024]]


def _shape(f, tmp_path) -> ModelShape:
    path = tmp_path / "m.gguf"
    f.save(path)
    return ModelShape.of(load_gguf(path))


def test_one_backend_leaves_the_graph_as_it_is(tmp_path):
    """The CPU alone: no split inputs, the nodes and leafs in ggml's order, every reserved graph of a tiny model
    allocated to the bytes the CPU-only allocator gives."""
    shape = _shape(llama(n_layer=3), tmp_path)
    ctx = resolve(shape, ContextRequest(n_ctx=512))
    cpu_only = Placement(1, lambda t: (0, not t.name.startswith("cache_")) if t.external else None, lambda layer: 0)
    for batch in reserved_batches(ctx, ctx.n_ctx):
        graph = build_graph(shape, ctx, batch)
        scheduled = schedule(graph, cpu_only)
        assert scheduled.nodes == graph.nodes and scheduled.leafs == graph.leafs and not scheduled.sources
        assert buffer_chunks(scheduled) == [buffer_chunks(BufferedGraph.of(graph))[0]] == [[reserve_bytes([graph])]]


def test_a_pinned_norm_runs_on_its_layers_device():
    """llama.cpp pins a layer's norm to the layer's device (small batches, or every layer offloaded): the norm
    then runs there, and its input is copied across."""
    g = Ggml()
    x = g.input("f32", 64, 4, name="x")
    w = g.weight("f32", 64, name="blk.0.attn_norm.weight")
    cur = g.rms_norm(x)
    cur.norm_of_layer = 0
    g.expand(g.mul(cur, w), output=True)
    homes = {"blk.0.attn_norm.weight": (CPU, True)}
    free = schedule(g.graph, Placement(2, lambda t: homes.get(t.name), lambda layer: None))
    pinned = schedule(g.graph, Placement(2, lambda t: homes.get(t.name), lambda layer: DEV))
    assert set(free.node_buffers) == {CPU} and not free.sources
    assert [b for n, b in zip(pinned.nodes, pinned.node_buffers, strict=True) if n is cur] == [DEV]
    assert id(cur) in pinned.sources  # x copied to the device for it, its result copied back for the MUL


def test_llama_cpp_enables_pipeline_parallelism_as_it_does(tmp_path):
    """Several devices, every layer offloaded, split by layer, no overrides (llama_context's constructor)."""
    shape = _shape(qwen3moe(n_layer=3), tmp_path)
    two = (Device("d0", 2**30), Device("d1", 2**30))
    assert pipeline_parallel(shape, DeviceRequest(two, n_gpu_layers=4))
    assert not pipeline_parallel(shape, DeviceRequest(two, n_gpu_layers=3))  # the output layer counts: 3 is partial
    assert not pipeline_parallel(shape, DeviceRequest(two[:1], n_gpu_layers=99))
    assert not pipeline_parallel(shape, DeviceRequest(two, n_gpu_layers=99, split_mode="none"))
    assert not pipeline_parallel(shape, DeviceRequest(two, n_gpu_layers=99, cpu_moe=True))
    assert not pipeline_parallel(shape, DeviceRequest(two, n_gpu_layers=99, overrides=(("ffn_up", "d0"),)))
    full = compute_placement(shape, DeviceRequest(two, n_gpu_layers=99))
    partial = compute_placement(shape, DeviceRequest(two, n_gpu_layers=3, tensor_split=(1, 2)))  # layer 0 CPU, 1 d0, 2 d1
    prompt, token = reserved_batches(resolve(shape, ContextRequest(n_ctx=512)), 512)[:2]
    assert full(prompt).n_copies == MAX_COPIES and partial(prompt).n_copies == 1
    # norms pinned with every layer offloaded, or for batches under 32 tokens
    assert full(prompt).pin(1) == 0 and partial(prompt).pin(1) is None
    assert [partial(token).pin(il) for il in range(3)] == [2, 0, 1]


def test_per_device_compute_adds_up_and_a_device_without_layers_has_none(tmp_path):
    path = tmp_path / "g.gguf"
    gemma3(n_layer=4).save(path)
    devices = (Device("d0", 2**30), Device("d1", 2**30), Device("d2", 2**30))
    p = plan(path, n_ctx=1024, devices=DeviceRequest(devices, n_gpu_layers=3, tensor_split=(1, 0, 1)))
    rows = {r["name"]: r for r in p.devices}
    assert rows["d1"]["compute_bytes"] == 0 and not rows["d1"]["layers"]
    assert rows["d0"]["compute_bytes"] > 0 and rows["d2"]["compute_bytes"] > 0
    assert p.compute_bytes == sum(r["compute_bytes"] for r in p.devices)
    assert not any("pipeline parallelism" in n for n in p.notes)
    full = plan(path, n_ctx=1024, devices=DeviceRequest(devices, n_gpu_layers=99))
    assert any("pipeline parallelism" in n for n in full.notes)


@pytest.mark.parametrize("name", ["RPC0[127.0.0.1:50052]", "CUDA0", "Vulkan0", "MTL0", "GPU0", "SYCL", "SYCL0x", "SYCL0\n"])
def test_split_mode_row_is_refused_where_llama_cpp_has_no_split_buffer(tmp_path, name):
    path = tmp_path / "l.gguf"
    llama(n_layer=2).save(path)
    with pytest.raises(PlanError, match="does not support split buffers") as e:
        plan(path, n_ctx=256, devices=DeviceRequest((Device(name, 2**30),), n_gpu_layers=3, split_mode="row"))
    assert e.value.rule == "plan.request"
    p = plan(path, n_ctx=256, devices=DeviceRequest((Device("SYCL0", 2**30), Device("HTP1", 2**30)), n_gpu_layers=3, split_mode="row"))
    assert any("split mode row" in n for n in p.notes)
