"""Files of forks of llama.cpp that number their own tensor types where ggml numbers its (schema/fork_types.json):
the validator names the fork's type, for an id ggml does not know and for an id ggml gives another type."""

from __future__ import annotations

import pytest

import gguf_construct as gc
from gguf_construct.testing.strategies.hostile import gguf_raw
from gguf_construct.validation import fork_types


def type_messages(data: bytes) -> list[str]:
    return [i.message for i in gc.validate(data, "ggml") if i.rule == "tensor.type"]


@pytest.mark.parametrize(("type_id", "name"), [(45, "TQ3_1S"), (46, "TQ4_1S"), (44, "TURBO3_0")])
def test_an_id_ggml_does_not_know_names_the_fork_type(type_id: int, name: str) -> None:
    data = gguf_raw([], [("blk.0.ffn_up.weight", [256], type_id)], b"\0" * 160)
    (message,) = type_messages(data)
    assert f"ggml type {type_id} is unknown" in message and f"{name} of the TurboQuant forks of llama.cpp" in message


def test_an_id_ggml_knows_whose_data_fits_the_fork_type_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fork numbering TQ3_1S 42, ggml's q2_0: 256 values in 128 bytes are TQ3_1S's size, not q2_0's 72."""
    tq3 = next(t for t in fork_types.fork_types_of(45))
    monkeypatch.setattr(fork_types, "fork_types_of", lambda type_id: [{**tq3, "id": 42}] if type_id == 42 else [])
    fork_file = gguf_raw([], [("blk.0.ffn_up.weight", [256], 42)], b"\0" * 128)
    (message,) = type_messages(fork_file)
    assert message.startswith("type 42 is ggml's q2_0, but its 128 bytes of data for 256 values fit TQ3_1S")
    ggml_file = gguf_raw([], [("blk.0.ffn_up.weight", [256], 42)], b"\0" * 72)
    assert type_messages(ggml_file) == []  # q2_0's own size: ggml's type, as read


def test_without_a_fork_type_for_the_id_nothing_is_said() -> None:
    assert fork_types.describe(42) == "" and fork_types.fitting(42, 256, 128, 32) == []
    assert type_messages(gguf_raw([], [("w", [256], 42)], b"\0" * 128)) == []
