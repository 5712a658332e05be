"""``set``, ``delete`` and ``rename-tensor``: edit a GGUF file's metadata and tensor names.

Any change (a new type, a longer string, an added or removed key) rewrites the file atomically: the new file
is built beside the target with the tensor data streamed from the memory map, then renamed over it, so an
interrupted edit leaves the old file intact. ``set --in-place`` instead overwrites the value's bytes in the
file when the new record has exactly the old record's size (a scalar of the same type, a string of the same
byte length), as gguf-py's ``gguf_set_metadata`` does; anything else is refused.

Values are given as text and read by the key's type (``--type``, else the existing key's, else the standard
key's, else the JSON value's): ``true``, ``4096``, ``1e-5``, ``'[1, 2, 3]'``, ``'["a", "b"]'``; ``str`` takes
the text as is, or a file's content with ``--value-file``.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Any

from ..api.fileio import check_output, check_writable
from ..api.gguf_file import GGUFFile, load_gguf
from ..api.metadata import infer_type, parse_type
from ..core.limits import LENIENT, limit, limits
from ..core.tables import standard_key
from ..core.untrusted import loads
from ..errors import FormatError, InvalidValueError, LimitError
from ..formats.base import open_regular
from ..formats.gguf.schema import ORDERS, gguf_layout
from .shared import EXIT_BAD, EXIT_OK, add_sync, command, usage

_BOOLS = {"true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}


def _json(text: str) -> Any:
    """A JSON value from the command line through the safe reader: a value too deep, too long or with too
    many digits is a usage error (ValueError), never a RecursionError."""
    try:
        return loads(text, what="the value")
    except LimitError as e:
        raise ValueError(e.message) from None


def parse_value(text: str, type_spec: str | None) -> tuple[Any, str]:
    """(value, type) for the text ``text`` read as ``type_spec`` (None: JSON if it reads as JSON, else str)."""
    if type_spec is None:
        try:
            value = _json(text)
        except InvalidValueError:
            return text, "str"
        if isinstance(value, (dict, type(None))):
            return text, "str"
        return value, infer_type(value)
    vt, _elem = parse_type(type_spec)
    name = vt.name
    if name == "str":
        return text, "str"
    if name == "bool":
        if text.strip().lower() not in _BOOLS:
            raise ValueError(f"{text!r} is not a bool (true/false/1/0)")
        return _BOOLS[text.strip().lower()], "bool"
    if name == "arr":
        try:
            value = _json(text)
        except InvalidValueError as e:
            raise ValueError(e.message) from None
        if not isinstance(value, list):
            raise ValueError(f"{text!r} is not a JSON array")
        return value, type_spec
    if name.startswith(("u", "i")):
        if len(text.strip()) > limit("number_digits") + 3:  # Python refuses int() beyond 4,300 digits
            raise ValueError(f"a number of {len(text.strip())} characters is not a {name}")
        try:
            return int(text, 0), name
        except ValueError:
            raise ValueError(f"{_shown(text)} is not an integer") from None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{_shown(text)} is not a number") from None
    if math.isinf(value) and "inf" not in text.lower():
        raise ValueError(f"{_shown(text)} is beyond the range of {name}")
    return value, name


def check_key(key: str) -> None:
    """Refuse a key the spec forbids (empty, over 65,535 bytes, not ASCII, not dotted lower_snake_case):
    ``set`` must not write what ``validate`` rejects."""
    from ..validation import key_issues

    for issue in key_issues(key):
        if issue.severity == "error":
            raise ValueError(f"{_shown(key)} is not a valid key: {issue.message if len(issue.message) < 120 else issue.rule}")


def _open_for_edit(path: str, repair: bool) -> GGUFFile:
    """The file to edit; ``repair`` (``delete``, ``set --force``) opens it under the generous LENIENT limits so
    that a file too deep or too large for the defaults can still be fixed. The result is checked under the
    default limits before it replaces anything."""
    with limits(LENIENT if repair else None):
        return load_gguf(path, strict=False)


def _check_standard(key: str, type_spec: str, f: GGUFFile, force: bool) -> None:
    std = standard_key(key, f.metadata.get("general.architecture") if key != "general.architecture" else None)
    if std is not None and type_spec not in std.types and not force:
        usage(f"gguf-construct set: {key} is a standard key of type {' or '.join(std.types)}, not {type_spec} (--force to write it anyway)")


def _output(args: argparse.Namespace) -> str:
    """Where an edit writes: ``-o OUT``, which must not be FILE or ``--value-file`` by any name (``output.input``)
    nor anything but a regular file (``output.not_regular``), else FILE itself, replaced atomically (the edit's
    purpose) only while it is still the file that was opened (``output.changed``)."""
    if args.output:
        check_output(args.output, [args.file, getattr(args, "value_file", None)], what="-o")
    else:
        check_writable(args.file, what="FILE")
    return args.output or args.file


def _cmd_set(args: argparse.Namespace) -> int:
    if args.value is not None and args.value_file is not None:
        usage("gguf-construct set: give VALUE or --value-file, not both")
    if args.value is None and args.value_file is None:
        usage(f"gguf-construct set: give a VALUE for {args.key} (or --value-file PATH)")
    try:
        check_key(args.key)
    except ValueError as e:
        usage(f"gguf-construct set: {e}")
    _output(args)
    f = _open_for_edit(args.file, repair=args.force)
    meta = f.metadata
    type_spec = args.type
    if type_spec is None and args.key in meta and meta.type_of(args.key) != "arr[arr]":
        type_spec = meta.type_of(args.key)
    if type_spec is None:
        std = standard_key(args.key, meta.get("general.architecture") if args.key != "general.architecture" else None)
        type_spec = std.type if std else None
    if args.value_file is not None:
        from ..formats.base import read_regular

        try:
            text = read_regular(args.value_file, what="--value-file").decode("utf-8")
        except (FormatError, UnicodeDecodeError) as e:
            usage(f"gguf-construct set: --value-file {args.value_file}: {e.message if isinstance(e, FormatError) else e}")
        type_spec = type_spec or "str"
    else:
        text = args.value
    try:
        value, type_spec = parse_value(text, type_spec)
    except ValueError as e:
        usage(f"gguf-construct set: {args.key} takes {_article(type_spec or 'value')}: {e}")
    try:
        _check_standard(args.key, type_spec, f, args.force)
        if args.in_place:
            return _set_in_place(f, args, value, type_spec)
        meta.set(args.key, value, type=type_spec)
    except (ValueError, KeyError, TypeError, OverflowError) as e:
        usage(f"gguf-construct set: {e.message if isinstance(e, FormatError) else e.args[0] if e.args else e}")
    try:
        f.save(_output(args), keep_valid=not args.force)
    except FormatError as e:  # the value makes a file the reader rejects (general.alignment 0, ...): nothing written
        if e.rule.startswith("output."):
            raise  # the target's fault, not the value's: reported with its rule (exit 2)
        usage(f"gguf-construct set: {args.key}: {e.message}")
    print(f"{_output(args)}: {args.key} = {_shown(meta[args.key])} ({meta.type_of(args.key)})")
    return EXIT_OK


def _article(type_spec: str) -> str:
    """``a u32``, ``an i8``, ``an f32``, ``an arr[str]``: the type named as it is read aloud."""
    return ("an " if type_spec[:1] in "aifv" else "a ") + type_spec


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _set_in_place(f: GGUFFile, args: argparse.Namespace, value: Any, type_spec: str) -> int:
    """Overwrite one record's bytes in the file, when the new record encodes to the same size."""
    if args.output:
        usage("gguf-construct set: --in-place edits FILE itself: drop -o")
    if args.key not in f.metadata:
        usage(f"gguf-construct set: --in-place changes an existing key; {args.key} is not in {args.file}")
    layout = gguf_layout(ORDERS[f.byte_order], f.version >= 2)
    kv_struct = next(sc for sc in layout.subcons if sc.name == "metadata_kv").subcon.subcon
    offset = f.metadata.offset_of(args.key)
    if offset is None:  # a key read from the file always has its place; nothing else can be edited in place
        usage(f"gguf-construct set: {args.key} has no place in {args.file} to edit in place")
    old = kv_struct.build(f.metadata.record(args.key))
    already = f.broken_rules()
    f.metadata.set(args.key, value, type=type_spec)
    new = kv_struct.build(f.metadata.record(args.key))
    if len(new) != len(old):
        usage(
            f"gguf-construct set: the new value takes {len(new)} bytes, the old {len(old)}: "
            "--in-place needs the same size (drop it to rewrite the file)"
        )
    broken = f.broken_rules(edited=True) - already
    if broken and not args.force:  # the same rule as a rewrite's: an edit adds no rule violation
        usage(
            f"gguf-construct set: {args.key}: the edited file would break [{', '.join(sorted(broken))}]; "
            "nothing was written (--force writes it anyway)"
        )
    f.close()

    with open_regular(args.file) as ro:  # the same regular file, checked before it is opened for writing
        fd = os.open(args.file, os.O_RDWR)
        if os.fstat(fd).st_ino != os.fstat(ro.fileno()).st_ino:
            os.close(fd)
            print(f"gguf-construct set: {args.file} changed while it was being edited; nothing written", file=sys.stderr)
            return EXIT_BAD
    with os.fdopen(fd, "r+b") as fh:
        fh.seek(offset)
        if fh.read(len(old)) != old:
            print(f"gguf-construct set: {args.file} changed while it was being edited; nothing written", file=sys.stderr)
            return EXIT_BAD
        fh.seek(offset)
        fh.write(new)
        if args.sync:  # the one write that is no rename: --sync makes it durable too
            fh.flush()
            os.fsync(fh.fileno())
    print(f"{args.file}: {args.key} = {_shown(value)} ({type_spec}), {len(new)} bytes rewritten in place at offset {offset}")
    return EXIT_OK


def _cmd_delete(args: argparse.Namespace) -> int:
    _output(args)
    f = _open_for_edit(args.file, repair=True)
    missing = [k for k in args.keys if k not in f.metadata]
    if missing and not args.missing_ok:
        usage(f"gguf-construct delete: no key {missing[0]!r} in {args.file}")
    for key in args.keys:
        f.metadata.pop(key, None)
    f.save(_output(args))
    print(f"{_output(args)}: deleted {len(args.keys) - len(missing)} keys")
    return EXIT_OK


def rename_tensor(f: GGUFFile, old: str, new: str) -> None:
    """Rename a tensor in place of the file's tensor list (order and data unchanged)."""
    if old not in f.tensors:
        raise KeyError(f"no tensor {old!r}")
    f.tensors.rename(old, new)


def _cmd_rename(args: argparse.Namespace) -> int:
    _output(args)
    f = load_gguf(args.file, strict=False)
    try:
        rename_tensor(f, args.old, args.new)
    except (KeyError, ValueError) as e:
        usage(f"gguf-construct rename-tensor: {e.args[0]}")
    f.save(_output(args))
    print(f"{_output(args)}: {args.old} -> {args.new}")
    return EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub,
        "set",
        _cmd_set,
        description=(
            "Set KEY to VALUE. The type is --type, else the existing key's, else the standard key's, else read from "
            "VALUE as JSON (a number, true/false, a list) or str. A standard key must get one of its standard types "
            "(--force overrides). The file is rewritten atomically, tensor data streamed; --in-place overwrites the "
            "record's bytes instead, when the new value has the same encoded size."
        ),
        epilog="examples: set m.gguf general.name 'My model';  set m.gguf llama.context_length 8192;  "
        "set m.gguf tokenizer.chat_template --value-file t.jinja;  set m.gguf my.ids '[1,2,3]' --type 'arr[u16]'",
    )
    p.add_argument("file", metavar="FILE", help="the GGUF file to edit")
    p.add_argument("key", metavar="KEY", help="the metadata key, e.g. general.name")
    p.add_argument("value", metavar="VALUE", nargs="?", help="the value as text (or give --value-file)")
    p.add_argument("--value-file", metavar="PATH", help="read a str value from a UTF-8 text file (e.g. a chat template)")
    p.add_argument("--type", metavar="T", help="u8 i8 u16 i16 u32 i32 u64 i64 f32 f64 bool str, or arr[T]")
    p.add_argument("--in-place", action="store_true", help="overwrite the value's bytes in FILE (same encoded size only)")
    p.add_argument(
        "--force", action="store_true", help="allow a non-standard type for a standard key; open FILE under generous limits to repair it"
    )

    d = command(
        sub,
        "delete",
        _cmd_delete,
        description="Remove KEYs from FILE's metadata.",
    )
    d.add_argument("file", metavar="FILE", help="the GGUF file to edit")
    d.add_argument("keys", metavar="KEY", nargs="+", help="the metadata keys to remove")
    d.add_argument("--missing-ok", action="store_true", help="ignore keys the file does not have")

    r = command(
        sub,
        "rename-tensor",
        _cmd_rename,
        description="Rename tensor OLD to NEW; order and data are unchanged.",
    )
    r.add_argument("file", metavar="FILE", help="the GGUF file to edit")
    r.add_argument("old", metavar="OLD", help="the tensor's name now")
    r.add_argument("new", metavar="NEW", help="its new name")

    for edits in (p, d, r):
        edits.add_argument(
            "-o", "--output", metavar="OUT", help="write the result here instead of replacing FILE (FILE is then left untouched)"
        )
        add_sync(edits)
