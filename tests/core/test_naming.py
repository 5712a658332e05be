"""The naming convention: the seed spec's examples and regular expression, size labels against gguf-py."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gguf_construct.core import naming
from gguf_construct.data import example_path

# The seed spec's JavaScript test cases ('Example Node.js Regex Function'), expected values as written there.
SPEC_CASES = [
    (
        "Mixtral-8x7B-v0.1-KQ2.gguf",
        {"BaseName": "Mixtral", "SizeLabel": "8x7B", "FineTune": None, "Version": "v0.1", "Encoding": "KQ2", "Type": None, "Shard": None},
    ),
    (
        "Grok-100B-v1.0-Q4_0-00003-of-00009.gguf",
        {
            "BaseName": "Grok",
            "SizeLabel": "100B",
            "FineTune": None,
            "Version": "v1.0",
            "Encoding": "Q4_0",
            "Type": None,
            "Shard": "00003-of-00009",
        },
    ),
    (
        "Hermes-2-Pro-Llama-3-8B-v1.0-F16.gguf",
        {
            "BaseName": "Hermes-2-Pro-Llama-3",
            "SizeLabel": "8B",
            "FineTune": None,
            "Version": "v1.0",
            "Encoding": "F16",
            "Type": None,
            "Shard": None,
        },
    ),
    (
        "Phi-3-mini-3.8B-ContextLength4k-instruct-v1.0.gguf",
        {
            "BaseName": "Phi-3-mini",
            "SizeLabel": "3.8B-ContextLength4k",
            "FineTune": "instruct",
            "Version": "v1.0",
            "Encoding": None,
            "Type": None,
            "Shard": None,
        },
    ),
    ("not-a-known-arrangement.gguf", None),
]


@pytest.mark.parametrize("filename,expected", SPEC_CASES)
def test_spec_examples(filename, expected):
    parsed = naming.parse(filename)
    assert (parsed.as_dict() if parsed else None) == expected
    if parsed:
        assert parsed.filename() == filename  # format() is parse()'s inverse on conventional names


def test_components():
    p = naming.parse("/models/Grok-100B-v1.0-Q4_0-00003-of-00009.gguf")
    assert (p.shard_no, p.shard_count, p.parameters, p.expert_count) == (3, 9, 100e9, 0)
    m = naming.parse("Mixtral-8x7B-v0.1-KQ2.gguf")
    assert (m.expert_count, m.parameters) == (8, 7e9)
    assert naming.parse("Llama-7B-v1-vocab.gguf").type == "vocab"
    assert (
        naming.format("Hermes 2 Pro", "8B", "Chat Tuned", "1.0", "Q4_K_M", shard=(2, 5))
        == "Hermes-2-Pro-8B-Chat-Tuned-v1.0-Q4_K_M-00002-of-00005.gguf"
    )
    assert naming.shard_of("x-y-00002-of-00005.gguf") == ("x-y", 2, 5)
    with pytest.raises(ValueError):
        naming.shard_suffix(0, 3)  # shard numbers are 1-based


_NAME_CHARS = st.text(alphabet="aZ19-. x_v", max_size=24)
_TAILS = st.sampled_from(
    [".gguf", "-v1.gguf", "-7B-v1.0.gguf", "-8x7B-chat-v0.1-Q4_0.gguf", "-v1-LoRA-00001-of-00002.gguf", "-1B-v2-vocab.gguf"]
)


@settings(max_examples=400, deadline=None)
@given(_NAME_CHARS, _TAILS)
def test_same_language_as_the_spec_expression(head, tail):
    """NAME_PATTERN (unambiguous BaseName) accepts exactly what the spec's expression accepts, with the same groups."""
    name = head + tail
    a, b = naming.SPEC_PATTERN.match(name), naming.NAME_PATTERN.match(name)
    assert (a is None) == (b is None)
    if a:
        assert a.groupdict() == b.groupdict()


def test_hostile_names_take_no_time():
    """Long names of ambiguous segments make the spec's expression backtrack exponentially; ours stays linear-ish."""
    for name in ["A" + "- " * 120 + ".gguf", "A" + "-1 " * 80 + ".gguf", "A-1B-" + "- " * 120 + ".gguf", "x" * 300 + ".gguf"]:
        t = time.perf_counter()
        naming.parse(name)
        assert time.perf_counter() - t < 0.5, name


@pytest.mark.parametrize(
    "n",
    [0, 999, 1000, 1001, 25_792, 999_999, 1_000_001, 3_821_079_552, 7_241_732_096, 70_553_706_496, 1_100_000_000_000, 123_456_789_012_345],
)
def test_size_label_matches_gguf_py(n):
    from gguf.utility import model_weight_count_rounded_notation, size_label

    assert naming.size_label(n) == model_weight_count_rounded_notation(n)
    assert naming.size_label(n // 8, 8) == size_label(n, n // 8, 0, 8)


def test_from_metadata_and_disagreements():
    import gguf_construct as gc

    f = gc.load(example_path())
    derived = naming.from_metadata(f)
    assert (derived.base_name, derived.size_label, derived.encoding) == ("gguf-construct-example", "21K", "F16")
    f.metadata["general.basename"] = "Example"
    f.metadata["general.version"] = "v2.0"
    warnings = naming.disagreements(naming.parse("Other-21K-v1.0-Q8_0.gguf"), f)
    assert any("BaseName" in w for w in warnings) and any("Version" in w for w in warnings) and any("Encoding" in w for w in warnings)
    assert naming.disagreements(naming.parse("Example-21K-v2.0-F16.gguf"), f) == []
    assert any("SizeLabel" in w for w in naming.disagreements(naming.parse("Example-7B-v2.0-F16.gguf"), f))
