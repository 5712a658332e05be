"""The real 2023 llama files (corpus ``legacy-real/``) through our migration and through llama.cpp's own
``convert_llama_ggml_to_gguf.py``, each output run by today's llama.cpp (``llama-cpp-python``) against the
logits the file's own era computed.

For each file: our ``migrate`` → the largest |logit difference| and whether the argmax agrees; then llama.cpp's
converter in a subprocess → whether it runs, refuses (an error raised by the script itself) or crashes (an error
from deeper down), whether the tensor shapes it wrote equal the source's, whether llama.cpp loads its output, and
the logit difference when it does. llama.cpp is loaded in a subprocess for the converter's outputs, which may be
malformed. Prints a Markdown table (``--json`` for the raw rows); docs/howto/migrate.md has the table.

``--llama-cpp DIR`` is a llama.cpp source tree holding ``convert_llama_ggml_to_gguf.py`` and ``gguf-py/`` (the
script puts that gguf-py first on its path), e.g. from the mirror::

    git -C MIRROR archive HEAD convert_llama_ggml_to_gguf.py gguf-py | tar -x -C /tmp/llama.cpp
    PYTHONPATH=. python benchmarks/legacy_vs_llamacpp.py --llama-cpp /tmp/llama.cpp [--corpus ../shared/corpus] [--smoke]

Nothing of llama.cpp is kept: its converter runs in a temporary directory.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gguf_construct import load  # noqa: E402
from gguf_construct.migration import migrate  # noqa: E402
from tests.oracles import llama_logits  # noqa: E402

LOGITS_IN_SUBPROCESS = """
import sys, numpy
sys.path.insert(0, sys.argv[1])
from tests.oracles import llama_logits
try:
    numpy.save(sys.argv[3], llama_logits(sys.argv[2], [int(i) for i in sys.argv[4].split(',')]))
except ValueError:  # load it again, verbosely, for llama.cpp's reason
    from llama_cpp import Llama
    Llama(model_path=sys.argv[2], n_ctx=64, n_threads=1, verbose=True)
"""


def compare(got: np.ndarray, want: np.ndarray) -> dict[str, Any]:
    if got.shape != want.shape:
        return {"max_diff": None, "argmax_agrees": False, "note": f"{got.shape[0]} logits, not {want.shape[0]}"}
    top5 = bool(np.array_equal(np.argsort(-got, kind="stable")[:5], np.argsort(-want, kind="stable")[:5]))
    return {"max_diff": float(np.abs(got - want).max()), "argmax_agrees": bool(got.argmax() == want.argmax()), "top5_agrees": top5}


def ours(src: Path, e: dict[str, Any], want: np.ndarray, tmp: Path) -> dict[str, Any]:
    out = tmp / "ours.gguf"
    report = migrate(src, out)
    written = {"copied": report.copied, "re-encoded": report.reencoded, "widened to F16/F32": report.widened}
    return {"tensors": {k: v for k, v in written.items() if v}, **compare(llama_logits(out, e["token_ids"]), want)}


def failure(stderr: str, script: Path) -> tuple[str, str]:
    """'refuses' when the script raised the error itself, else 'crashes'; with the last line of the traceback."""
    frames = re.findall(r'File "([^"]+)", line \d+', stderr)
    last = (stderr.strip().splitlines() or ["(no output)"])[-1]
    own = bool(frames) and Path(frames[-1]).name == script.name and last.startswith("ValueError")
    return ("refuses" if own else "crashes"), last


def shapes_agree(src: Path, out: Path) -> tuple[bool, str]:
    """The converter's tensor shapes against the source's (same order; ggml ``ne``)."""
    a, b = load(src, strict=False), load(out, strict=False)
    for t, (oname, u) in zip(a.tensors.values(), b.tensors.items()):
        if list(t.shape) != list(u.shape):
            return False, f"{oname}: ne {list(u.shape)}, source {list(t.shape)}"
    return len(a.tensors) == len(b.tensors), ""


def theirs(src: Path, e: dict[str, Any], want: np.ndarray, tmp: Path, llama_cpp: Path) -> dict[str, Any]:
    script = llama_cpp / "convert_llama_ggml_to_gguf.py"
    out = tmp / "theirs.gguf"
    run = subprocess.run(
        [sys.executable, str(script), "-i", str(src), "-o", str(out)], capture_output=True, text=True, timeout=600, cwd=tmp
    )
    if run.returncode != 0 or not out.exists():
        status, message = failure(run.stderr, script)
        return {"status": status, "message": message}
    row: dict[str, Any] = {"status": "runs"}
    row["shapes_agree"], row["shape_note"] = shapes_agree(src, out)
    npy = tmp / "theirs.npy"
    ids = ",".join(map(str, e["token_ids"]))
    ev = subprocess.run(
        [sys.executable, "-c", LOGITS_IN_SUBPROCESS, str(ROOT), str(out), str(npy), ids], capture_output=True, text=True, timeout=600
    )
    if ev.returncode != 0 or not npy.exists():
        reasons = [ln for ln in ev.stderr.splitlines() if ln.startswith("gguf_init_from_reader:") or "error" in ln.lower()]
        row.update(loads=False, message=(reasons or ev.stderr.strip().splitlines() or [f"exit code {ev.returncode}"])[0])
        return row
    row.update(loads=True, **compare(np.load(npy), want))
    return row


def measure(corpus: Path, llama_cpp: Path, smoke: bool) -> list[dict[str, Any]]:
    base = corpus / "legacy-real"
    entries = json.loads((base / "manifest.json").read_text(encoding="utf-8"))
    entries.sort(key=lambda e: (["ggml", "ggmf", "ggjt"].index(e["format"]), e["version"] or 0, e["file"]))
    if smoke:
        entries = entries[:1]
    rows = []
    for e in entries:
        src, want = base / e["file"], np.fromfile(base / e["logits_file"], "<f4")
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            rows.append({"file": e["file"], "entry": e, "ours": ours(src, e, want, tmp), "llama.cpp": theirs(src, e, want, tmp, llama_cpp)})
    return rows


def fmt_diff(r: dict[str, Any]) -> str:
    if r.get("max_diff") is None:
        return r.get("note", "-")
    ranks = "argmax and top 5 agree" if r["top5_agrees"] else ("argmax agrees" if r["argmax_agrees"] else "argmax DIFFERS")
    return f"{r['max_diff']:.2g}, {ranks}"


def brief(message: str, limit: int = 110) -> str:
    """A long message cut after its first sentence."""
    if len(message) <= limit or ". " not in message:
        return message
    return message[: message.index(". ") + 1] + " …"


def describe_theirs(r: dict[str, Any]) -> str:
    if r["status"] != "runs":
        return f"{r['status']}: `{brief(r['message'])}`"
    text = "runs" + ("" if r["shapes_agree"] else f"; wrong dimensions ({r['shape_note']})")
    if not r["loads"]:
        return text + f"; llama.cpp cannot load it: `{brief(r['message'])}`"
    return text + f"; llama.cpp: {fmt_diff(r)}"


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| file | format | era (writer commit, date) | tensor types | our migration: tensors | ours in "
        "llama.cpp: max \\|Δlogit\\| | llama.cpp's convert_llama_ggml_to_gguf.py |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        e = r["entry"]
        fmt = e["format"].upper() + (f" v{e['version']}" if e["version"] else "")
        types = ", ".join(f"{k} ×{v}" for k, v in sorted(e["tensor_types"].items(), key=lambda kv: -kv[1]))
        era = f"{e['commit_written'][:9]}, {e['commit_written_date'][:10]}"
        written = ", ".join(f"{v} {k}" for k, v in r["ours"]["tensors"].items())
        lines.append(
            f"| {Path(r['file']).name} | {fmt} ({e['ftype_name']}) | {era} | {types} | {written} "
            f"| {fmt_diff(r['ours'])} | {describe_theirs(r['llama.cpp'])} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--llama-cpp", type=Path, required=True, metavar="DIR", help="llama.cpp tree with convert_llama_ggml_to_gguf.py and gguf-py/"
    )
    ap.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus", help="the corpus folder holding legacy-real/")
    ap.add_argument("--smoke", action="store_true", help="the first file only")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = ap.parse_args()
    rows = measure(args.corpus, args.llama_cpp.resolve(), args.smoke)
    if args.json:
        print(json.dumps([{k: v for k, v in r.items() if k != "entry"} for r in rows], indent=1))
    else:
        print(table(rows))


if __name__ == "__main__":
    main()
