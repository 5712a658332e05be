"""Hypothesis strategies that draw model files from the schemas: valid files of every shape, and files broken in
one labelled way at a time, to test any reader (ours, gguf-py's, ggml's, or your own).

``hypothesis`` is an optional dependency, needed only by this package (``pip install hypothesis``)::

    from hypothesis import given
    from gguf_construct.testing.strategies import gguf_bytes, invalid_gguf

    @given(gguf_bytes())
    def test_my_reader_reads_valid_files(data): ...

    @given(invalid_gguf())
    def test_my_reader_rejects_broken_files(case):  # case.data, case.label ('S3.array_count'), case.rules

Each format has its own module; this package re-exports every module's public names. A new format adds one
``from .<module> import *`` line below.

Imports: anything in the library, never ``cli``.
"""

try:
    import hypothesis  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the environment
    from ...errors import MissingExtraError

    raise MissingExtraError("gguf_construct.testing.strategies", "fuzz", "hypothesis") from e

from .boundary import *  # noqa: F403  (one derived quantity at a 32/63/64-bit boundary, the rest consistent)
from .draws import *  # noqa: F403  (draw_examples)
from .gguf_broken import *  # noqa: F403  (GGUF v1-v3 broken in one labelled way)
from .hostile import *  # noqa: F403  (crafted inputs: huge digits, deep JSON, zero-and-huge shapes, special files)
from .reader_breakers import *  # noqa: F403  (GGUF files aimed at what broke real readers, by class name)
from .valid_gguf import *  # noqa: F403  (GGUF v1-v3)
from .valid_legacy import *  # noqa: F403  (GGML/GGMF/GGJT every profile, rwkv.cpp 100/101)
from .valid_safetensors import *  # noqa: F403  (safetensors files: HF, MLX, Ollama writers)
