"""Attribute access to the spec's standard keys (``f.meta.general.architecture``), typed by ``schema/keys.json``."""

from __future__ import annotations

from functools import cache
from typing import Any, Protocol, overload

from ..core import rules
from ..core.tables import standard_key, standard_keys
from ..core.untrusted import DIGITS


class KeyStore(Protocol):
    """What the key tree needs of ``api.metadata.Metadata`` (named here, not imported: ``Metadata`` builds on this module)."""

    def __contains__(self, key: object) -> bool: ...
    def __getitem__(self, key: str) -> Any: ...
    @overload
    def get(self, key: str, /) -> Any: ...
    @overload
    def get(self, key: str, default: Any, /) -> Any: ...
    def type_of(self, key: str) -> str: ...
    def set(self, key: str, value: Any, type: str | None = None) -> None: ...
    @overload
    def pop(self, key: str, /) -> Any: ...
    @overload
    def pop(self, key: str, default: Any, /) -> Any: ...


@cache
def _templates() -> frozenset[tuple[str, ...]]:
    """Every standard key as its dotted segments, ``{arch}`` and ``{id}`` kept as placeholders."""
    return frozenset(tuple(k.key.split(".")) for k in standard_keys())


class StandardKeys:
    """Attribute access to the spec's standard keys, typed by the registry in ``schema/keys.json``.

    ``f.meta.general.architecture``, ``f.meta.llm.context_length`` (``llm`` is ``general.architecture``'s
    prefix, the spec's ``[llm]``), ``f.meta.tokenizer.ggml.bos_token_id``, ``f.meta.general.base_model[0].name``,
    ``f.meta.split.count``. A standard key the file lacks reads as None; a name that is no standard key raises
    AttributeError; a value whose type the spec does not allow raises ``UnsupportedTypeError`` (rule ``key.type``)
    so a consumer never works on a mistyped value. Assigning sets the key with its standard type (an existing
    value of another accepted type keeps its type); ``del`` removes it. A key that is also a prefix
    (``general.license`` and ``general.license.name``) reads as its value: reach the longer one by item,
    ``f.meta.general["license.name"]``.
    """

    def __init__(self, metadata: KeyStore):
        object.__setattr__(self, "_meta", metadata)

    def _root(self) -> _KeyNode:
        return _KeyNode(self._meta, (), ())

    def __getattr__(self, name: str) -> Any:
        if name == "llm":
            arch = self._meta.get("general.architecture")
            if not isinstance(arch, str):
                raise AttributeError("llm: the file has no general.architecture to name the [llm] prefix")
            return _KeyNode(self._meta, ("{arch}",), (arch,))
        return getattr(self._root(), name)

    def __getitem__(self, key: str) -> Any:
        return self._root()[key]

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._root(), name, value)

    def __dir__(self) -> list[str]:
        return sorted({"llm", *self._root().__dir__()} - {"{arch}"})

    def __repr__(self) -> str:
        return f"StandardKeys({self._meta!r})"


class _KeyNode:
    """One level of the standard key tree: ``tpl`` is the registry path (with placeholders), ``at`` the concrete one."""

    __slots__ = ("_meta", "_tpl", "_at")

    def __init__(self, meta: KeyStore, tpl: tuple[str, ...], at: tuple[str, ...]):
        object.__setattr__(self, "_meta", meta)
        object.__setattr__(self, "_tpl", tpl)
        object.__setattr__(self, "_at", at)

    def _children(self) -> dict[str, bool]:
        """Next segment → whether some key ends there (a leaf)."""
        n = len(self._tpl)
        out: dict[str, bool] = {}
        for t in _templates():
            if len(t) > n and t[:n] == self._tpl:
                out[t[n]] = out.get(t[n], False) or len(t) == n + 1
        return out

    def _step(self, segment: str) -> tuple[str, str] | None:
        """(template segment, concrete segment) for ``segment``, or None when no standard key continues so."""
        children = self._children()
        if segment in children and not segment.startswith("{"):
            return segment, segment
        if "{id}" in children and DIGITS.match(segment):
            return "{id}", segment
        if not self._tpl and "{arch}" in children and self._meta.get("general.architecture") == segment:
            return "{arch}", segment
        return None

    def _walk(self, dotted: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        tpl, at = self._tpl, self._at
        for seg in dotted.split("."):
            step = _KeyNode(self._meta, tpl, at)._step(seg)
            if step is None:
                raise AttributeError(f"{'.'.join((*at, seg))} is not a standard GGUF key or prefix")
            tpl, at = (*tpl, step[0]), (*at, step[1])
        return tpl, at

    def _resolve(self, tpl: tuple[str, ...], at: tuple[str, ...]) -> Any:
        if tpl in _templates():
            return self._read(".".join(at))
        return _KeyNode(self._meta, tpl, at)

    def _read(self, key: str) -> Any:
        if key not in self._meta:
            return None
        std = standard_key(key, self._meta.get("general.architecture"))
        label = self._meta.type_of(key)
        if std is not None and label not in std.types:
            raise rules.KEY_TYPE.error(f"{key} is {label}, the spec says {' or '.join(std.types)}", path=key)
        return self._meta[key]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._resolve(*self._walk(name))

    def __getitem__(self, key: int | str) -> Any:
        return self._resolve(*self._walk(str(key)))

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value

    def __setitem__(self, key: int | str, value: Any) -> None:
        tpl, at = self._walk(str(key))
        if tpl not in _templates():
            raise AttributeError(f"{'.'.join(at)} is a prefix, not a key")
        full = ".".join(at)
        std = standard_key(full, self._meta.get("general.architecture"))
        kind = std.type if std else None
        if std is not None and full in self._meta and self._meta.type_of(full) in std.types:
            kind = self._meta.type_of(full)
        self._meta.set(full, value, type=kind)

    def __delattr__(self, name: str) -> None:
        tpl, at = self._walk(name)
        self._meta.pop(".".join(at), None)

    def __dir__(self) -> list[str]:
        return sorted(c for c in self._children() if not c.startswith("{"))

    def __repr__(self) -> str:
        return f"<standard keys {'.'.join(self._at) or '(root)'}.*: {', '.join(self.__dir__())}>"
