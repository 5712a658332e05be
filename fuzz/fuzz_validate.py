"""Harness: ``validate_bytes`` (which dispatches on ``detect()``) under both profiles reports no ``internal.*``
rule, and for GGUF the strict loader agrees with the GGUF validator: it raises exactly when validation finds an
error, with the first error's rule."""

from __future__ import annotations

from common import ContractBreach, expect_format_error, main

from gguf_construct import FormatError, from_bytes
from gguf_construct import validate as validate_bytes
from gguf_construct.validation import validate_gguf_bytes


def test_one(data: bytes) -> None:
    for profile in ("spec", "ggml"):
        issues = expect_format_error(lambda profile=profile: validate_bytes(data, profile))
        if issues is None:
            raise ContractBreach("validate_bytes raised instead of reporting")
        internal = [i for i in issues if i.rule.startswith("internal.")]
        if internal:
            raise ContractBreach(f"internal rule reported: {internal[0].line()}")
        if data[:4] != b"GGUF":
            continue  # other formats: their own loaders are fuzzed by fuzz_dispatch
        errors = [i for i in validate_gguf_bytes(data, profile) if i.severity == "error"]
        try:
            from_bytes(data, strict=True, profile=profile)
        except FormatError as e:
            if not errors or e.rule != errors[0].rule:
                raise ContractBreach(f"strict load raised [{e.rule}], validation found {[i.rule for i in errors]}") from e
        else:
            if errors:
                raise ContractBreach(f"strict load accepted a file validation rejects: {errors[0].line()}")


if __name__ == "__main__":
    main(test_one)
