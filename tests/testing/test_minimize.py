"""Minimization through the schema: records, array items, string characters and data go before bytes do, the
finding holds at every step, and the budgets are kept."""

from __future__ import annotations

import time

from conftest import DATA
from construct import Container

from gguf_construct.formats.gguf.schema import GGUF
from gguf_construct.testing.fuzzing.minimize import ddmin, minimize
from gguf_construct.validation.gguf_checks import validate_gguf_bytes

BIG = (DATA / "generated/ggml-writer-all-types.gguf").read_bytes()  # 47 KB: 21 keys, 32 tensors


def with_kv(data: bytes, kv: Container, at: int = 5) -> bytes:
    c = GGUF.parse(data)
    kvs = [Container(key=x.key, value_type=str(x.value_type), value=x.value) for x in c.metadata_kv]
    kvs.insert(at, kv)
    infos = [Container(name=t.name, dimensions=list(t.dimensions), type=t.type, offset=int(t.offset)) for t in c.tensor_infos]
    return GGUF.build(
        Container(version=c.version, byte_order=c.byte_order, metadata_kv=kvs, tensor_infos=infos, tensor_data=bytes(c.tensor_data))
    )


def rejected_with(rule: str):
    calls = []

    def still_fails(data: bytes) -> bool:
        calls.append(len(data))
        return any(i.rule == rule for i in validate_gguf_bytes(data, "spec"))

    return still_fails, calls


def test_schema_steps_shrink_a_corpus_file_to_the_one_record_that_matters():
    data = with_kv(BIG, Container(key="", value_type="u32", value=7))
    still_fails, calls = rejected_with("key.empty")
    small = minimize(data, still_fails, seconds=60, max_calls=120)
    assert still_fails(small)
    c = GGUF.parse(small)
    assert [kv.key for kv in c.metadata_kv] == [""] and not c.tensor_infos
    assert len(small) <= 48 and len(calls) <= 121
    # byte-chunk deletion alone, with the same number of calls, stays far larger
    assert len(ddmin(data, rejected_with("key.empty")[0], 120)) > 10 * len(small)


def test_arrays_and_strings_are_shortened_and_data_zeroed():
    long_tokens = Container(
        key="tokenizer.ggml.tokens", value_type="arr", value=Container(type="str", len=300, array=[f"tok{i}" for i in range(300)])
    )
    data = with_kv(BIG, long_tokens, at=0)
    data = with_kv(data, Container(key="", value_type="str", value="x" * 500))

    def still_fails(d: bytes) -> bool:  # needs the empty key and a token array, of any length
        try:
            c = GGUF.parse(d)
        except Exception:
            return False
        keys = {kv.key: kv for kv in c.metadata_kv}
        return "" in keys and "tokenizer.ggml.tokens" in keys and bool(c.tensor_infos)

    small = minimize(data, still_fails, seconds=60, max_calls=200)
    c = GGUF.parse(small)
    keys = {kv.key: kv for kv in c.metadata_kv}
    assert set(keys) == {"", "tokenizer.ggml.tokens"} and len(c.tensor_infos) == 1
    assert int(keys["tokenizer.ggml.tokens"].value.len) == 1 and len(keys[""].value) <= 1
    assert not any(bytes(c.tensor_data))


def test_budgets_are_kept_and_unparseable_input_goes_to_bytes():
    calls = []

    def slow(d: bytes) -> bool:
        calls.append(1)
        time.sleep(0.01)
        return b"GGUF" in d

    start = time.monotonic()
    minimize(BIG, slow, seconds=0.5, max_calls=10_000)
    assert time.monotonic() - start < 5
    calls.clear()
    junk = b"\xff" * 200 + b"GGUF" + b"\xee" * 200
    assert minimize(junk, slow, seconds=30, max_calls=80) == b"GGUF" and len(calls) <= 81


def test_the_finding_holds_for_what_is_returned():
    data = with_kv(BIG, Container(key="general.alignment", value_type="u64", value=32))
    still_fails, _ = rejected_with("alignment.type")
    small = minimize(data, still_fails, seconds=60, max_calls=100)
    assert still_fails(small) and len(small) < len(data) // 20
