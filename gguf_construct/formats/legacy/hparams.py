"""The hyper-parameter profiles of the legacy formats: what lies between a GGML/GGMF/GGJT file's header and its
tensor records, declared once per program that wrote such files, in the order and names of its loader.

Nothing in an unversioned 'ggml' file names its profile (``formats/legacy/schema.py`` tries them in
``schema/legacy.json``'s ``detect_order``); that table also says which containers each profile occurs in, its
most dimensions, its ``ftype`` enumeration and how its tensor types are dated (``quant_era``). Each profile
here is the tuple of named fields a ``Struct`` is made of; ``ggml_layout`` puts the header before them and the
tensor records after. Context names they use: ``format`` ('ggml'|'ggmf'|'ggjt', from the magic) and the blocks
parsed before them (``this.hparams.n_vocab``).

Every field is little-endian (``Int32sl``: the loaders read ``int32_t``; llama.cpp's ``read_u32`` values are
stored the same way). Sources are cited per profile as repository, file, commit.
"""

from __future__ import annotations

from typing import Any

from construct import Float32l, Int32sl, Rebuild, Struct, len_, this

from ...core import rules
from .legacy_fields import LegacyName, NumpyArray, VocabArray, encoded_len


def int32s(*names: str) -> list[Any]:
    """``int32_t name;`` for each name, in order."""
    return [name / Int32sl for name in names]


def stored_vocab() -> tuple[Any, ...]:
    """``int32_t n_vocab; {uint32_t len; char text[len];}[n_vocab]``: the count of tokens actually stored, then
    the tokens (no scores), as the ggml examples and whisper.cpp write them."""
    return ("vocab_count" / Rebuild(Int32sl, len_(this.vocab)), "vocab" / VocabArray("vocab_count", scored=False))


# ggerganov/llama.cpp, llama.cpp, llama_file_loader::read_hparams and read_vocab, commit dadbed99e (2023-08-21,
# the last legacy loader; the layout is unchanged since 26c084662, 2023-03-10). GGMF and GGJT store a score after
# each token; unversioned GGML files do not.
LLAMA = (
    "hparams" / Struct(*int32s("n_vocab", "n_embd", "n_mult", "n_head", "n_layer", "n_rot", "ftype")),
    "vocab" / VocabArray(this.hparams.n_vocab, scored=this.format != "ggml"),
)

# ggml-org/whisper.cpp, src/whisper.cpp, whisper_model_load, commit 233fe1fc9 (filters: n_mel, n_fft, then
# float data[n_mel][n_fft]; the vocabulary count may be below hparams.n_vocab).
WHISPER = (
    "hparams"
    / Struct(
        *int32s(
            "n_vocab",
            "n_audio_ctx",
            "n_audio_state",
            "n_audio_head",
            "n_audio_layer",
            "n_text_ctx",
            "n_text_state",
            "n_text_head",
            "n_text_layer",
            "n_mels",
            "ftype",
        )
    ),
    "mel_filters"
    / Struct("n_mel" / Int32sl, "n_fft" / Int32sl, "data" / NumpyArray((this.n_mel, this.n_fft), "<f4", rules.MEL_FILTERS_SIZE)),
    *stored_vocab(),
)

# ggml-org/whisper.cpp, src/parakeet.cpp, parakeet_model_load, commit 9efddafb9 (2026-06-16).
PARAKEET = (
    "hparams"
    / Struct(
        *int32s(
            "n_vocab",
            "n_audio_ctx",
            "n_audio_state",
            "n_audio_head",
            "n_audio_layer",
            "n_mels",
            "ftype",
            "n_fft",
            "subsampling_factor",
            "n_subsampling_channels",
            "n_conv_kernel",
            "n_pred_dim",
            "n_pred_layers",
            "n_tdt_durations",
            "n_max_tokens",
        )
    ),
    "mel_filters"
    / Struct("n_mel" / Int32sl, "n_fb" / Int32sl, "data" / NumpyArray((this.n_mel, this.n_fb), "<f4", rules.MEL_FILTERS_SIZE)),
    "window" / Struct("n_window" / Int32sl, "data" / NumpyArray((this.n_window,), "<f4", rules.WINDOW_SIZE)),
    "tdt_durations" / NumpyArray((this.hparams.n_tdt_durations,), "<u4", rules.TDT_DURATIONS_SIZE),
    *stored_vocab(),
)

# ggml-org/whisper.cpp, src/whisper.cpp, whisper_vad_init_with_params, commit d566358a1 (2025-12-06): the model
# type string, the version (upstream: major, minor, patch), the window and context sizes, one
# {in_channels, out_channels, kernel_size} record per encoder layer, then the LSTM and final convolution sizes.
# No ftype and no vocabulary.
SILERO = (
    "model_type"
    / Struct("length" / Rebuild(Int32sl, lambda ctx: encoded_len(ctx.text)), "text" / LegacyName("length", rules.MODEL_TYPE_LENGTH)),
    "hparams" / Struct(*int32s("version_major", "version_minor", "version_patch", "n_window", "n_context", "n_encoder_layers")),
    "encoder" / NumpyArray((this.hparams.n_encoder_layers, 3), "<i4", rules.ENCODER_SIZE),
    "hparams2" / Struct(*int32s("lstm_input_size", "lstm_hidden_size", "final_conv_in", "final_conv_out")),
)

# ggml-org/ggml, examples/gpt-2/main.cpp, gpt2_model_load, commit 82248c97c (ee07c17b^, 2024-02-10); the
# vocabulary count is stored again before the tokens and must equal hparams.n_vocab.
GPT2 = (
    "hparams" / Struct(*int32s("n_vocab", "n_ctx", "n_embd", "n_head", "n_layer", "ftype")),
    *stored_vocab(),
)

# ggml-org/ggml, examples/gpt-j/main.cpp, gptj_model_load, commit 82248c97c.
GPTJ = (
    "hparams" / Struct(*int32s("n_vocab", "n_ctx", "n_embd", "n_head", "n_layer", "n_rot", "ftype")),
    *stored_vocab(),
)

# ggml-org/ggml, examples/starcoder/main.cpp, starcoder_model_load, commit 82248c97c: the fields of gpt-2.
STARCODER = (
    "hparams" / Struct(*int32s("n_vocab", "n_ctx", "n_embd", "n_head", "n_layer", "ftype")),
    *stored_vocab(),
)

# ggml-org/ggml, examples/gpt-neox/main.cpp, gpt_neox_model_load, commit 82248c97c (also stablelm, dolly-v2):
# hparams.n_vocab tokens follow without a count.
GPTNEOX = (
    "hparams" / Struct(*int32s("n_vocab", "n_ctx", "n_embd", "n_head", "n_layer", "n_rot", "par_res", "ftype")),
    "vocab" / VocabArray(this.hparams.n_vocab, scored=False),
)

# ggml-org/ggml, examples/mpt/main.cpp, mpt_model_load, commit 82248c97c: two float hyper-parameters.
MPT = (
    "hparams"
    / Struct(
        *int32s("d_model", "max_seq_len", "n_heads", "n_layers", "n_vocab"),
        "alibi_bias_max" / Float32l,
        "clip_qkv" / Float32l,
        "ftype" / Int32sl,
    ),
    "vocab" / VocabArray(this.hparams.n_vocab, scored=False),
)

# ggml-org/ggml, examples/replit/main.cpp, replit_model_load, commit 82248c97c: each token has a float score.
REPLIT = (
    "hparams" / Struct(*int32s("d_model", "max_seq_len", "n_heads", "n_layers", "n_vocab", "ftype")),
    "vocab" / VocabArray(this.hparams.n_vocab, scored=True),
)

#: Profile name → its fields (the names of ``schema/legacy.json``'s ``profiles``).
PROFILE_FIELDS: dict[str, tuple[Any, ...]] = {
    "llama": LLAMA,
    "whisper": WHISPER,
    "gpt2": GPT2,
    "gptj": GPTJ,
    "starcoder": STARCODER,
    "gptneox": GPTNEOX,
    "mpt": MPT,
    "replit": REPLIT,
    "parakeet": PARAKEET,
    "silero": SILERO,
}

#: The names of the hyper-parameter blocks (the plausibility check of profile detection looks at these).
HPARAM_BLOCKS = ("hparams", "hparams2")
