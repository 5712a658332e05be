"""A multimodal projector (``plan --mmproj``) planned as llama.cpp's multimodal loader (libmtmd) allocates it: its
weights and the compute buffer it reserves at warmup byte for byte, its graph node for node, its refusals as
libmtmd's, its place on the devices, in ``--json`` and in ``--fit``; hostile projector headers refused quickly."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import time

import numpy as np
import pytest

from gguf_construct.cli.main import main
from gguf_construct.errors import FormatError, PlanError
from gguf_construct.planning import Device, DeviceRequest, plan
from gguf_construct.planning.compute.clip import GRAPHS, _Encoder
from gguf_construct.planning.mmproj import plan_projector
from gguf_construct.sources.options import configure
from gguf_construct.testing.strategies import READER_BREAKERS, reader_breaker
from tests.http_testserver import TestServer
from tests.planning import tiny_mmproj
from tests.planning.tiny_mmproj import mmproj_path, saved, text_model_path

#: (projector type, sizes): encoders of different widths, depths, heads, patch grids and weight types
CASES = [
    ("gemma3", {}),
    ("gemma3", {"matrices": "q4_0"}),
    ("gemma3", {"n_ff": 100}),  # vectors of 400 bytes: the buffer pads them to 416
    ("gemma3", {"image": 128, "n_embd": 96, "n_head": 6, "n_ff": 256, "n_layer": 3}),
    ("gemma3", {"image": 96, "patch": 12, "n_embd": 128, "n_head": 2, "n_ff": 192, "matrices": "q8_0"}),
    ("mlp", {}),
    ("mlp", {"image": 96, "patch": 16, "n_embd": 128, "n_ff": 320, "n_layer": 3}),
    ("mlp", {"cls": True}),  # LLaVA-1.5's CLIP: a class token, a pre-norm
    ("internvl", {}),
    ("internvl", {"merge": 4, "n_layer": 3, "matrices": "q8_0"}),
    ("idefics3", {"merge": 2}),
    ("idefics3", {"merge": 3, "n_layer": 3, "matrices": "q8_0"}),  # an 8 x 8 grid padded to 9 x 9
    ("idefics3", {"merge": 4, "image": 96, "patch": 12, "n_embd": 96, "n_head": 3}),
    ("qwen2a", {}),
    ("qwen2a", {"n_mel": 80, "n_embd": 96, "n_head": 3, "n_ff": 160, "matrices": "q8_0"}),
    ("qwen2a", {"stack": 8}),  # Ultravox: 750 frames stacked by 8, the last row padded
    ("qwen2a", {"stack": 7, "hidden": 64, "n_mel": 32}),
    ("gemma3+qwen2a", {}),  # both encoders in one file: two contexts, the patch embeddings loaded by each
    ("qwen2vl", {}),
    ("qwen2vl", {"patch": 14, "n_embd": 96, "n_head": 6, "n_ff": 192, "n_layer": 3, "matrices": "q8_0"}),
    ("qwen2vl", {"window": 2}),  # Qwen2.5-VL: window attention in layer 0, full in layer 1
    ("pixtral", {}),  # with Mistral Small 3.1's patch merger
    ("pixtral", {"merge": 0, "patch": 16, "n_embd": 96, "n_head": 3, "matrices": "q4_0"}),  # Pixtral 12B's: none
]
#: qwen2vl is warmed up with 46 x 46 merged patches whatever its sizes: without flash attention its KQ matrices
#: alone take over a GiB (and Qwen2.5-VL's window mask 0.3 GiB more), so it is compared with flash attention only
_FLASH_ONLY = ("qwen2vl",)
SETTINGS = [(case, fa) for case in CASES for fa in ("auto", "off") if fa == "auto" or case[0] not in _FLASH_ONLY]


def _id(case) -> str:
    projector, sizes = case
    return projector + "".join(f"-{k}{v}" for k, v in sizes.items())


GRAPH_CASES = [
    ("gemma3", {}),
    ("gemma3", {"n_ff": 100}),
    ("mlp", {}),
    ("mlp", {"cls": True}),
    ("internvl", {}),
    ("idefics3", {"merge": 2}),
    ("qwen2a", {}),
    ("qwen2a", {"stack": 7}),
    ("qwen2vl", {}),
    ("qwen2vl", {"window": 2}),
    ("pixtral", {}),
]


def _plan(mmproj, flash_attn="auto", **kw):
    return plan(text_model_path(), n_ctx=256, mmproj=mmproj, flash_attn=flash_attn, **kw)


@pytest.mark.parametrize(("case", "flash_attn"), SETTINGS, ids=[f"{_id(c)}-{fa}" for c, fa in SETTINGS])
def test_weights_and_compute_equal_libmtmd(case, flash_attn):
    pytest.importorskip("llama_cpp")
    from tests.mtmd_memory import measure

    path = mmproj_path(case[0], **case[1])
    measured = measure(text_model_path(), path, flash_attn)
    assert measured.refused is None, measured.refused
    p = _plan(path, flash_attn).mmproj
    assert p is not None and p.device == "CPU"
    assert {"CPU": p.weights_nbytes} == measured.weights  # clip_get_mem_usage counts the tensors unpadded
    assert {"CPU": p.compute_bytes} == measured.compute
    assert p.compute_bytes > 0 and p.weights_bytes > 0


@pytest.mark.parametrize(
    ("projector", "sizes", "flash_attn"),
    [(p, sizes, fa) for p, sizes in GRAPH_CASES for fa in ("auto", "off") if fa == "auto" or p not in _FLASH_ONLY],
    ids=[f"{_id((p, sizes))}-{fa}" for p, sizes in GRAPH_CASES for fa in ("auto", "off") if fa == "auto" or p not in _FLASH_ONLY],
)
def test_graph_is_libmtmds_node_for_node(projector, sizes, flash_attn):
    """The planned graph is the one libmtmd runs for an image of image_size square, or 30 s of audio (idefics3
    encodes the image twice, the image and its one slice, and qwen2a the audio in two windows, each by the same
    graph); the weights buffer its nodes read is the planned one, padding included."""
    pytest.importorskip("llama_cpp")
    from tests.mtmd_memory import graph_and_weights

    path = mmproj_path(projector, **sizes)
    encoder = plan_projector(path).encoders[0]
    shape = encoder.encoder_shape(flash_attn != "off")
    e = _Encoder(shape)
    e.g.expand(GRAPHS[shape.graph](e))
    ran, buffers = graph_and_weights(text_model_path(), path, flash_attn, encoder.image_size or -30)
    planned = e.g.graph.summary()
    assert buffers == [encoder.weights_bytes]
    assert planned and ran[: len(planned)] == planned and len(ran) % len(planned) == 0
    assert ran == planned * (len(ran) // len(planned))


def test_tensors_the_loader_does_not_ask_for_are_not_planned():
    f = tiny_mmproj.gemma3()
    f.tensors.add("v.unused.weight", np.zeros((64, 64), np.float32))
    f.tensors.add("v.blk.7.attn_q.weight", np.zeros((64, 64), np.float16))  # past the block count
    with_extra = plan_projector(saved(f, "mmproj-extra.gguf"))
    assert with_extra.weights_bytes == plan_projector(mmproj_path("gemma3")).weights_bytes


def test_refusals_are_libmtmds():
    """A language model given as the projector, a projector given as the model, a projector for another width:
    libmtmd refuses each, and so does the plan."""
    pytest.importorskip("llama_cpp")
    from tests.mtmd_memory import measure

    with pytest.raises(PlanError, match="not a multimodal projector"):
        _plan(text_model_path())
    assert measure(text_model_path(), text_model_path()).refused
    with pytest.raises(PlanError, match="give it as mmproj"):
        plan(mmproj_path("gemma3"))
    narrow = text_model_path(128)
    with pytest.raises(PlanError, match="128"):
        plan(narrow, n_ctx=256, mmproj=mmproj_path("gemma3"))
    assert "mismatch" in (measure(narrow, mmproj_path("gemma3")).refused or "")


def _file_name(name: str) -> str:
    return name.replace(" ", "-").replace("^", "p")


def _hostile(change, name: str):
    f = (tiny_mmproj.qwen2a if name in _AUDIO_NAMES else tiny_mmproj.gemma3)()
    change(f.metadata)
    return saved(f, f"mmproj-hostile-{name}.gguf")


HOSTILE = {
    "image 2^31": lambda m: m.set("clip.vision.image_size", 2**31, "u32"),
    "image 2^32-1": lambda m: m.set("clip.vision.image_size", 2**32 - 1, "u32"),
    "patch 0": lambda m: m.set("clip.vision.patch_size", 0, "u32"),
    "patch 65536": lambda m: m.set("clip.vision.patch_size", 65536, "u32"),
    "image below a patch": lambda m: m.set("clip.vision.image_size", 4, "u32"),
    "image of another grid": lambda m: m.set("clip.vision.image_size", 72, "u32"),
    "layers 2^32-1": lambda m: m.set("clip.vision.block_count", 2**32 - 1, "u32"),
    "layers 2^31-1": lambda m: m.set("clip.vision.block_count", 2**31 - 1, "u32"),
    "heads 0": lambda m: m.set("clip.vision.attention.head_count", 0, "u32"),
    "heads not dividing": lambda m: m.set("clip.vision.attention.head_count", 5, "u32"),
    "merge 0": lambda m: m.set("clip.vision.projector.scale_factor", 0, "u32"),
    "image as i32": lambda m: m.set("clip.vision.image_size", 64, "i32"),
    "image as string": lambda m: m.set("clip.vision.image_size", "64", "str"),
    "eps as f64": lambda m: m.set("clip.vision.attention.layer_norm_epsilon", 1e-6, "f64"),
    "encoder flag as u8": lambda m: m.set("clip.has_vision_encoder", 1, "u8"),
    "patch merge type as u32": lambda m: m.set("clip.vision.mm_patch_merge_type", 1, "u32"),
    "no encoder": lambda m: m.set("clip.has_vision_encoder", False, "bool"),
    "unknown projector": lambda m: m.set("clip.projector_type", "nosuch", "str"),
    "idefics3 without a merge factor": lambda m: m.set("clip.projector_type", "idefics3", "str"),
    "qwen2vl with a patch bias": lambda m: m.set("clip.projector_type", "qwen2vl_merger", "str"),
    # libmtmd aborts on an array of two; one of one it reads by accident as the string, or crashes on (["mlp"])
    "projector type as array": lambda m: m.set("clip.projector_type", ["gemma3", "mlp"], "arr[str]"),
    "audio projector for vision": lambda m: m.set("clip.projector_type", "ultravox", "str"),
}
HOSTILE_AUDIO = {
    "mel bins 0": lambda m: m.set("clip.audio.num_mel_bins", 0, "u32"),
    "mel bins 257": lambda m: m.set("clip.audio.num_mel_bins", 257, "u32"),
    "mel bins as f32": lambda m: m.set("clip.audio.num_mel_bins", 16.0, "f32"),
    "vision projector for audio": lambda m: m.set("clip.projector_type", "gemma3", "str"),
}


_AUDIO_NAMES = {_file_name(n) for n in HOSTILE_AUDIO}
ALL_HOSTILE = {**HOSTILE, **HOSTILE_AUDIO}


@pytest.mark.parametrize("name", list(ALL_HOSTILE))
def test_hostile_headers_are_refused_quickly(name):
    path = _hostile(ALL_HOSTILE[name], _file_name(name))
    start = time.monotonic()
    with pytest.raises(PlanError):
        _plan(path)
    assert time.monotonic() - start < 5


@pytest.mark.parametrize("name", list(ALL_HOSTILE))
def test_libmtmd_refuses_the_hostile_headers_too(name):
    """What the plan refuses, libmtmd refuses (or aborts on: a key of another type than it reads)."""
    pytest.importorskip("llama_cpp")
    from tests.mtmd_memory import measure

    path = _hostile(ALL_HOSTILE[name], _file_name(name))
    assert measure(text_model_path(), path).refused


def test_audio_position_embeddings_short_of_the_frames_are_refused():
    """The warmup's 3000 mel frames need 1500 position embeddings: libmtmd asserts it and aborts."""
    path = saved(tiny_mmproj.qwen2a(n_pos=1000), "mmproj-hostile-short-positions.gguf")
    with pytest.raises(PlanError, match="1500"):
        _plan(path)
    if importlib.util.find_spec("llama_cpp"):
        from tests.mtmd_memory import measure

        assert measure(text_model_path(), path).refused


def test_a_declared_layer_past_the_tensors_is_refused_without_looping():
    f = tiny_mmproj.gemma3()
    f.metadata.set("clip.vision.block_count", 2**31 - 1, "u32")
    f.tensors.add("v.blk.2147483646.attn_q.weight", np.zeros((64, 64), np.float16))
    start = time.monotonic()
    with pytest.raises(PlanError, match="v.blk.2.attn_q.weight"):
        _plan(saved(f, "mmproj-far-layer.gguf"))
    assert time.monotonic() - start < 5


def test_a_known_projector_without_a_graph_plans_its_weights_with_a_note():
    f = tiny_mmproj.gemma3()
    f.metadata.set("clip.projector_type", "lfm2", "str")
    p = _plan(saved(f, "mmproj-lfm2.gguf")).mmproj
    assert p is not None and p.compute_bytes is None
    assert p.weights_bytes == plan_projector(mmproj_path("gemma3")).weights_bytes
    assert any("not modelled" in n for n in p.notes)


def test_devices_offload_and_totals():
    projector = plan_projector(mmproj_path("gemma3"))
    alone = _plan(mmproj_path("gemma3"))
    without = plan(text_model_path(), n_ctx=256)
    assert alone.total_bytes == without.total_bytes + projector.total_bytes
    devices = DeviceRequest((Device("RPC0", 2**30), Device("RPC1", 2**30)), 2)
    on = _plan(mmproj_path("gemma3"), devices=devices)
    assert on.mmproj is not None and on.mmproj.device == "RPC0"
    assert [row["mmproj_bytes"] for row in on.devices] == [0, projector.total_bytes, 0]
    off = _plan(mmproj_path("gemma3"), devices=devices, mmproj_offload=False)
    assert [row["mmproj_bytes"] for row in off.devices] == [projector.total_bytes, 0, 0]
    assert off.devices[0]["total_bytes"] - on.devices[0]["total_bytes"] == projector.total_bytes


def test_fit_leaves_room_for_the_projector():
    projector = plan_projector(mmproj_path("gemma3"))
    bare = plan(text_model_path(), devices=DeviceRequest((Device("RPC0", 2**30),)), fit=True, margin=0)
    # a device as large as the model's full offload at the smallest context: with the projector, less fits
    need = bare.devices[1]["total_bytes"]
    tight = DeviceRequest((Device("RPC0", need),))
    fitted = plan(text_model_path(), devices=tight, fit=True, margin=0, mmproj=mmproj_path("gemma3"))
    assert fitted.fit is not None
    assert "--mmproj" in fitted.fit["llama_cpp_arguments"]
    row = fitted.devices[1]
    assert row["total_bytes"] <= need and row["mmproj_bytes"] == projector.total_bytes
    assert fitted.fit["n_gpu_layers"] < bare.fit["n_gpu_layers"] or fitted.context.n_ctx < bare.context.n_ctx


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["plan", *args])
    return code, out.getvalue(), err.getvalue()


def test_cli_json_text_and_exit_codes():
    mm = str(mmproj_path("mlp"))
    code, out, _ = _cli(str(text_model_path()), "--ctx", "256", "--mmproj", mm, "--json")
    assert code == 0
    section = json.loads(out)["mmproj"]
    expected = plan_projector(mm)
    assert section["weights_bytes"] == expected.weights_bytes and section["compute_bytes"] == expected.compute_bytes
    assert section["device"] == "CPU" and section["encoders"][0]["projector_type"] == "mlp"
    code, out, _ = _cli(str(text_model_path()), "--ctx", "256", "--mmproj", mm, "--device", "RPC0=1G")
    assert code == 0 and "mmproj" in out and "on RPC0" in out
    code, out, _ = _cli(str(text_model_path()), "--ctx", "256", "--mmproj", mm, "--device", "RPC0=1G", "--no-mmproj-offload", "--json")
    assert code == 0 and json.loads(out)["mmproj"]["device"] == "CPU"
    assert _cli(mm)[0] == 1  # a projector given as the model
    assert _cli(str(text_model_path()), "--mmproj", str(text_model_path()))[0] == 1  # a model given as the projector
    assert _cli(str(text_model_path()), "--mmproj", str(mmproj_path("mlp")) + ".missing")[0] == 2


@pytest.mark.parametrize("name", sorted(READER_BREAKERS))
def test_reader_breaking_files_as_the_projector(name, tmp_path):
    """Files that break readers, given as the projector: refused with a FormatError that says it is the mmproj file
    (or planned), never another exception, quickly."""
    for seed in range(3):
        path = tmp_path / f"{name}-{seed}.gguf"
        path.write_bytes(reader_breaker(name, seed))
        start = time.monotonic()
        try:
            _plan(path)
        except PlanError:
            pass
        except FormatError as e:
            assert "mmproj" in e.describe()
        assert time.monotonic() - start < 5


def test_a_garbage_projector_exits_1_naming_it():
    path = saved(tiny_mmproj.gemma3(), "mmproj-garbage.gguf")
    path.write_bytes(b"\x85\x32" * 50)
    code, _, err = _cli(str(text_model_path()), "--mmproj", str(path))
    assert code == 1 and "mmproj file" in err


VALUES = ["12", 1.5, True, -1, 2**40, 0, 1, 2**31, 2**32 - 1, [4, 4, 4], ["a", "b"], [[1]]]
VISION_KEYS = [
    "clip.vision.image_size",
    "clip.vision.patch_size",
    "clip.vision.embedding_length",
    "clip.vision.feed_forward_length",
    "clip.vision.block_count",
    "clip.vision.attention.head_count",
    "clip.vision.projection_dim",
    "clip.vision.attention.layer_norm_epsilon",
    "clip.vision.projector.scale_factor",
    "clip.has_vision_encoder",
    "clip.use_gelu",
    "clip.projector_type",
]


@pytest.mark.parametrize("key", VISION_KEYS)
def test_every_key_with_every_kind_of_value(key, tmp_path):
    """Each key clip.cpp reads, set to values of every GGUF type and boundary: planned or refused with a PlanError,
    never another exception, quickly."""
    for i, value in enumerate(VALUES):
        f = tiny_mmproj.gemma3()
        if key in f.metadata:
            del f.metadata[key]
        f.metadata.set(key, value)  # of the type the value infers
        path = tmp_path / f"{i}.gguf"
        f.save(path)
        start = time.monotonic()
        with contextlib.suppress(PlanError):
            _plan(path)
        assert time.monotonic() - start < 5, (key, value)


def test_auto_layers_leave_room_for_the_projector_on_the_gpu():
    projector = plan_projector(mmproj_path("mlp"))
    bare = plan(text_model_path(), n_ctx=256, n_gpu_layers=2)
    gpu_mem = bare.gpu["total_bytes"] + projector.total_bytes // 2  # two layers fit, not with the projector
    without = plan(text_model_path(), n_ctx=256, n_gpu_layers="auto", gpu_mem=gpu_mem)
    with_it = _plan(mmproj_path("mlp"), n_gpu_layers="auto", gpu_mem=gpu_mem)
    assert without.n_gpu_layers >= 2 and with_it.n_gpu_layers < without.n_gpu_layers
    assert with_it.gpu_mem == gpu_mem and with_it.mmproj is not None and with_it.mmproj.device == "GPU"
    assert with_it.gpu["total_bytes"] <= gpu_mem and with_it.gpu["mmproj_bytes"] == projector.total_bytes
    on_cpu = _plan(mmproj_path("mlp"), n_gpu_layers="auto", gpu_mem=gpu_mem, mmproj_offload=False)
    assert on_cpu.n_gpu_layers == without.n_gpu_layers and on_cpu.mmproj.device == "CPU"


def test_a_remote_projector_is_planned_from_its_header():
    """An mmproj URL (a loopback server here): the same plan as the local file, from the header alone."""
    path = mmproj_path("gemma3", n_embd=256, n_ff=1024, n_layer=4)  # megabytes: more than the first read
    previous = configure(retries=2, backoff=0.01, connect_timeout=5.0, read_timeout=10.0, request_deadline=30.0)
    try:
        with TestServer() as server:
            url = server.add("/mmproj.gguf", path.read_bytes())
            remote = _plan(url).mmproj
            assert remote is not None and remote.to_json() | {"file": ""} == _plan(path).mmproj.to_json() | {"file": ""}
            assert 0 < server.counts.bytes < path.stat().st_size / 2  # the header, not the weights
    finally:
        configure(previous)


def test_a_projector_is_known_by_its_encoder_keys_not_its_architecture():
    """libmtmd loads a projector whatever general.architecture says (or without one), by its clip.has_* keys."""
    plain = plan_projector(mmproj_path("gemma3"))
    for name, change in (
        ("no-arch", lambda m: m.__delitem__("general.architecture")),
        ("llama-arch", lambda m: m.set("general.architecture", "llama")),
    ):
        f = tiny_mmproj.gemma3()
        change(f.metadata)
        path = saved(f, f"mmproj-{name}.gguf")
        p = _plan(path).mmproj
        assert p is not None and (p.weights_bytes, p.compute_bytes) == (plain.weights_bytes, plain.compute_bytes)
        if importlib.util.find_spec("llama_cpp"):
            from tests.mtmd_memory import measure

            measured = measure(text_model_path(), path)
            assert measured.weights == {"CPU": p.weights_nbytes} and measured.compute == {"CPU": p.compute_bytes}
