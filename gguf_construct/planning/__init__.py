"""Will it fit? llama.cpp's memory for a model, planned from the GGUF header alone (local, sharded or remote).

``plan(path, n_ctx=..., ...)`` returns a ``Plan`` (:mod:`.planner`), over several devices with a
``DeviceRequest`` (:mod:`.devices`), with LoRA adapters (:mod:`.lora_adapters`), a draft model with its
``DraftOptions`` (:mod:`.draft`) and a multimodal projector (``mmproj=``, :mod:`.mmproj`), fitted with ``fit=True``
(:mod:`.fit`), drawn by :mod:`.svg`; ``ModelShape`` is the header as llama.cpp
reads it (:mod:`.shape`), ``ContextRequest`` the context parameters (:mod:`.context`). What llama.cpp refuses
is refused with ``PlanError`` (a ``FormatError``: rule ``plan.model`` for the model, ``plan.request`` for the
request).

Layer: above the file objects (it opens files through ``api.registry``), beside ``convert`` and ``migration``.
"""

from __future__ import annotations

from ..errors import PlanError, ShapeError
from .context import ContextRequest
from .devices import Device, DeviceRequest
from .draft import DraftOptions
from .planner import Plan, plan, plan_shape
from .shape import ModelShape

__all__ = [
    "ContextRequest",
    "Device",
    "DeviceRequest",
    "DraftOptions",
    "ModelShape",
    "Plan",
    "PlanError",
    "ShapeError",
    "plan",
    "plan_shape",
]
