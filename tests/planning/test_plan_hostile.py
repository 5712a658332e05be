"""Hostile headers and requests: a plan is made or refused with a PlanError (the CLI exits 1 for a model llama.cpp
refuses, 2 for a request it refuses) or the reader's FormatError, never another exception, and quickly: keys of
every JSON type and boundary value, architectures named like Python attributes, headers of hundreds of layers and
tens of thousands of tensors, numbers past what llama.cpp's parameters hold, and every reader-breaking file of the
fuzzing strategies."""

from __future__ import annotations

import contextlib
import io
import math
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiny_models import BUILDERS, llama, zero_filled

from gguf_construct.cli.main import main
from gguf_construct.errors import FormatError, RemoteLimitError
from gguf_construct.planning import ContextRequest, ModelShape, PlanError, plan, plan_shape
from gguf_construct.planning.shape import KEYS as READ_KEYS
from gguf_construct.sources.budget import Budget
from gguf_construct.sources.options import RemoteOptions, configure
from gguf_construct.testing.strategies import READER_BREAKERS, reader_breaker

KEYS = (
    "block_count",
    "embedding_length",
    "feed_forward_length",
    "attention.head_count",
    "attention.head_count_kv",
    "attention.key_length",
    "context_length",
    "attention.sliding_window",
    "expert_count",
    "wkv.head_size",
    "ssm.inner_size",
)
VALUES = ["12", 1.5, True, -1, 2**40, 0, 1, 2**32 - 1, [4, 4, 4], [-4, 4], ["a", "b"], [[1]], np.array([2, 2])]


def _planned_or_refused(path) -> None:
    start = time.monotonic()
    with contextlib.suppress(PlanError, FormatError):
        plan(path, n_ctx=512)
    assert time.monotonic() - start < 5, "a hostile header must not make the plan slow"


def _plan_with(shape: ModelShape, changes: dict) -> None:
    """The plan of ``shape`` with its metadata changed: made, or refused with a PlanError, quickly."""
    md = {**shape.metadata, **changes}
    start = time.monotonic()
    with contextlib.suppress(PlanError):
        plan_shape(ModelShape.from_metadata(md, shape.tensors, shape.arch), ContextRequest(n_ctx=512))
    assert time.monotonic() - start < 5, f"a hostile header must not make the plan slow: {changes}"


@pytest.mark.parametrize("arch", ["llama", "gemma3", "qwen3moe", "deepseek2", "rwkv7", "mamba"])
def test_hostile_keys(arch):
    shape = ModelShape.of(BUILDERS[arch]())
    for key in KEYS:
        for value in VALUES:
            _plan_with(shape, {f"{arch}.{key}": value})


def test_random_headers(tmp_path):
    rng = np.random.default_rng(0)
    shapes = [ModelShape.of(BUILDERS[arch]()) for arch in ("llama", "gemma2", "qwen3moe", "rwkv6")]
    for _ in range(200):
        shape = shapes[rng.integers(len(shapes))]
        keys = rng.choice(KEYS, 3, replace=False)
        _plan_with(shape, {f"{shape.arch}.{k}": VALUES[rng.integers(len(VALUES))] for k in keys})


def _cli(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(["plan", *argv])
        except SystemExit as e:  # argparse's usage error
            code = int(e.code or 0)
    assert "Traceback" not in err.getvalue()
    return code, err.getvalue()


def test_a_model_llama_cpp_refuses_is_exit_1_naming_the_key(tmp_path):
    f = BUILDERS["llama"]()
    f.metadata.set("llama.attention.head_count", [4, 4, 4], type="arr[u32]")
    f.save(tmp_path / "a.gguf", keep_valid=False)
    with pytest.raises(PlanError, match="llama.attention.head_count has 3 values for 2 layers") as e:
        plan(tmp_path / "a.gguf")
    assert e.value.rule == "plan.model" and e.value.path == "llama.attention.head_count"
    f.metadata.set("llama.block_count", 100_000, type="u32")
    f.save(tmp_path / "b.gguf", keep_valid=False)
    code, err = _cli(str(tmp_path / "b.gguf"))
    assert code == 1 and "[plan.model] llama.block_count" in err


def test_a_request_llama_cpp_refuses_is_exit_2(tmp_path):
    BUILDERS["llama"]().save(tmp_path / "a.gguf")
    path = str(tmp_path / "a.gguf")
    assert _cli(path, "--ctx", "512")[0] == 0
    code, err = _cli(path, "--ctx", "4096", "--batch", "2048", "--parallel", "1000")
    assert code == 2 and "[plan.request] n_seq_max" in err and "256" in err  # LLAMA_MAX_SEQ
    assert _cli(path, "--ctx", "4096", "--parallel", "256")[0] == 0
    assert _cli(path, "--gpu-mem", "8G")[0] == 2  # without --n-gpu-layers auto it would be ignored
    assert _cli(path, "--n-gpu-layers", "2", "--gpu-mem", "8G")[0] == 2
    for huge in ("9" * 400, "1" + "0" * 30 + "G", "99999999999T", "1e400", "nan", "inf", "-5"):
        assert _cli(path, "--n-gpu-layers", "auto", "--gpu-mem", huge)[0] == 2, huge
    for flag in ("--ctx", "--batch", "--ubatch", "--parallel", "--n-gpu-layers"):
        assert _cli(path, flag, "9" * 400)[0] == 2, flag
        assert _cli(path, flag, str(2**32))[0] == 2, flag


def test_the_api_refuses_bad_requests_as_requests():
    shape = ModelShape.of(BUILDERS["llama"]())
    bad = [
        {"n_seq_max": 257},
        {"n_ctx": 2**32},
        {"n_ctx": -1},
        {"n_batch": 1.5},
        {"n_ubatch": True},
        {"n_ctx": float("nan")},
        {"n_ctx": 10**5000},  # past str()'s 4300 digits: the message must not need them
        {"type_k": "q3_K"},
        {"type_v": ["f16"]},
        {"flash_attn": "maybe"},
        {"kv_unified": "yes"},
    ]
    for change in bad:
        with pytest.raises(PlanError) as e:
            plan_shape(shape, ContextRequest(**{"n_ctx": 512, **change}))
        assert e.value.rule == "plan.request", change
    with pytest.raises(PlanError, match="passes uint32") as e:  # llama.cpp: "n_ctx_seq == 0"
        plan_shape(shape, ContextRequest(n_ctx=2**32 - 1))
    assert e.value.rule == "plan.request"
    with pytest.raises(PlanError, match="passes uint32"):
        plan_shape(shape, ContextRequest(n_ctx=2**32 - 512, n_batch=8, n_seq_max=4))  # each sequence's share padded
    bad_gpu = [
        {"n_gpu_layers": -1},
        {"n_gpu_layers": 2**31},
        {"n_gpu_layers": 10**5000},
        {"n_gpu_layers": "auto"},
        {"gpu_mem": 10**5000, "n_gpu_layers": "auto"},
        {"gpu_mem": math.inf, "n_gpu_layers": "auto"},
        {"gpu_mem": 2**30},
        {"gpu_mem": 2**30, "n_gpu_layers": 1},
    ]
    for gpu in bad_gpu:
        with pytest.raises(PlanError) as e:
            plan_shape(shape, ContextRequest(n_ctx=512), **gpu)
        assert e.value.rule == "plan.request", gpu


def test_auto_with_too_little_memory_says_no_layer_fits(tmp_path):
    BUILDERS["llama"]().save(tmp_path / "a.gguf")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["plan", str(tmp_path / "a.gguf"), "--ctx", "512", "--n-gpu-layers", "auto", "--gpu-mem", "1KiB"]) == 0
    assert "GPU (0 layers offloaded, the most of 3 that fit in" in out.getvalue()
    assert "no layer fits in gpu_mem (1024 bytes)" in out.getvalue()
    p = plan(tmp_path / "a.gguf", n_ctx=512, n_gpu_layers="auto", gpu_mem=2**40)
    assert p.n_gpu_layers == 3 and p.gpu["total_bytes"] <= 2**40
    tight = plan(tmp_path / "a.gguf", n_ctx=512, n_gpu_layers="auto", gpu_mem=p.gpu["total_bytes"] - 1)
    assert tight.n_gpu_layers == 2  # one byte less than all three need: the most that fit is one fewer


@pytest.mark.parametrize("arch", ["llama", "gemma3", "qwen3moe", "rwkv7", "glm4moe"])
def test_the_layer_search_counts_what_the_plan_counts(arch):
    """The search for ``auto`` adds up the offloaded layers of one all-offloaded plan: for every n it is the GPU
    total the plan of n layers reports."""
    from gguf_construct.planning.planner import gpu_total
    from gguf_construct.planning.weights import weight_buffers

    shape = _SHAPES[arch]
    everything = weight_buffers(shape, n_gpu_layers=shape.n_layer + 1)
    for n in range(shape.n_layer + 3):
        p = plan_shape(shape, ContextRequest(n_ctx=512), n_gpu_layers=n, features=())
        assert gpu_total(shape, p.kv_layers, p.recurrent_layers, p.compute_bytes, everything, n) == p.gpu.get("total_bytes", 0), n


@pytest.mark.parametrize("arch", ["source", "get", "items", "keys", "__class__", "__init__", "architectures", "llama.x", ""])
def test_architecture_names_are_only_names(arch, tmp_path):
    """An architecture named like the memory table's own note or a Python attribute is an unknown architecture:
    its weights are planned, the rest is noted."""
    f = BUILDERS["llama"]()
    f.metadata.set("general.architecture", arch, type="str")
    f.save(tmp_path / "a.gguf", keep_valid=False)
    p = plan(tmp_path / "a.gguf", n_ctx=512)
    assert p.compute_bytes is None and p.kv_bytes == 0 and p.model_bytes > 0
    assert any("is not in schema/memory.json" in n for n in p.notes)


#: every JSON-representable kind of value, with the boundary numbers
JSON_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([0, 1, -1, -5, 2**31 - 1, 2**32 - 1, 2**32, 2**63, 10**400, -(10**400), 10**5000]),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -0.0, 0.5]),
    st.text(max_size=8),
    st.lists(st.one_of(st.integers(-3, 2**33), st.booleans(), st.floats(), st.text(max_size=2)), max_size=6),
    st.lists(st.lists(st.integers(0, 4), max_size=3), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(0, 4), max_size=3),
)
_SHAPES = {arch: ModelShape.of(BUILDERS[arch]()) for arch in ("llama", "gemma3", "qwen3moe", "deepseek2", "rwkv7", "mamba", "glm4moe")}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(arch=st.sampled_from(sorted(_SHAPES)), key=st.sampled_from(sorted(READ_KEYS)), value=JSON_VALUES)
def test_every_key_with_every_json_value(arch, key, value):
    """Every key the plan reads (``shape.KEYS``), with any JSON value: planned, or refused with PlanError
    (``plan.model``, naming the key when it is the key's type or range); never another exception."""
    shape = _SHAPES[arch]
    md = {**shape.metadata, f"{arch}.{key}": value}
    try:
        plan_shape(ModelShape.from_metadata(md, shape.tensors, arch), ContextRequest(n_ctx=512))
    except PlanError as e:
        assert e.rule == "plan.model", e
        return
    kind = READ_KEYS[key]
    if value is None:
        return
    if kind in ("uint", "layers", "bool"):  # planned: the value was one llama.cpp reads
        assert not isinstance(value, (str, float)), (key, value)
    if kind == "uint":
        assert not isinstance(value, bool) and isinstance(value, int) and 0 <= value < 2**32, (key, value)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    field=st.sampled_from(["n_ctx", "n_batch", "n_ubatch", "n_seq_max", "type_k", "type_v", "flash_attn", "kv_unified", "swa_full"]),
    value=JSON_VALUES,
    gpu=st.one_of(st.none(), st.tuples(st.one_of(st.just("auto"), JSON_VALUES), JSON_VALUES)),
)
def test_every_request_field_with_every_json_value(field, value, gpu):
    """Every context parameter and the GPU parameters, with any JSON value: planned, or refused with PlanError
    (``plan.request``: the request's fault, exit 2); never another exception."""
    request = ContextRequest(**{"n_ctx": 512, field: value})
    extra = {} if gpu is None else {"n_gpu_layers": gpu[0], "gpu_mem": gpu[1]}
    try:
        plan_shape(_SHAPES["llama"], request, **extra)
    except PlanError as e:
        assert e.rule == "plan.request", e


def test_every_key_the_plan_reads_is_declared():
    """The keys read anywhere in the planner are the ones checked once (``shape.KEYS``): a key read without a
    check would let a string or NaN through to an ``int()`` in a graph."""
    import pathlib
    import re

    import gguf_construct.planning as planning

    found = set()
    for path in pathlib.Path(planning.__file__).parent.rglob("*.py"):
        found |= set(re.findall(r'get\(f"\{[a-z.]*arch\}\.([a-z_.]+)"', path.read_text()))
        found |= set(re.findall(r'key_(?:int|float)\("([a-z_.]+)"\)', path.read_text()))
    assert found and found <= set(READ_KEYS), found - set(READ_KEYS)


@pytest.fixture(scope="module")
def huge_header(tmp_path_factory):
    """A 512-layer llama header with a one-element weight scale and input scale for each of every layer's seven
    matrices (tensors llama.cpp's loader creates): 11,779 tensors."""
    f = zero_filled(llama, n_layer=512, n_embd=64, n_ff=128, n_head=2, n_head_kv=2, n_vocab=64)
    for i in range(512):
        for matrix in ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_down", "ffn_up"):
            for scale in ("scale", "input_scale"):
                f.tensors.add(f"blk.{i}.{matrix}.{scale}", np.ones(1, dtype=np.float32))
    path = tmp_path_factory.mktemp("huge") / "huge.gguf"
    f.save(path, keep_valid=False)
    return path


def test_a_header_of_512_layers_and_12k_tensors_plans_quickly(huge_header):
    path = huge_header
    start = time.monotonic()
    p = plan(path, n_ctx=512, n_gpu_layers="auto", gpu_mem=2**24)
    took = time.monotonic() - start
    assert 0 < p.n_gpu_layers < 513 and p.gpu["total_bytes"] <= 2**24
    assert took < 20, f"{took:.1f} s: lookups or the layer search are not linear any more"  # about 2.5 s on 2 loaded cores


def test_the_remote_deadline_stops_planning_between_steps(huge_header):
    """``--max-seconds`` (the command's budget) is checked by the plan's steps, not only by fetches: a plan that
    outlasts it stops at the next step."""
    path = huge_header
    previous = configure(budget=Budget(RemoteOptions(max_seconds=0.05)))
    try:
        start = time.monotonic()
        with pytest.raises(RemoteLimitError) as e:
            plan(path, n_ctx=512, n_gpu_layers="auto", gpu_mem=2**24)
        assert e.value.rule == "remote.deadline"
        assert time.monotonic() - start < 5
    finally:
        configure(previous)


@pytest.mark.parametrize("name", sorted(READER_BREAKERS))
def test_reader_breaking_files(name, tmp_path):
    for seed in range(3):
        path = tmp_path / f"{name}-{seed}.gguf"
        path.write_bytes(reader_breaker(name, seed))
        _planned_or_refused(path)
