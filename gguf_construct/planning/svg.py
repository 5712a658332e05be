"""A picture of a plan: per device (the CPU first), its memory stacked by kind (weights, KV cache, recurrent
state, compute buffer) against the device's size, as a plain SVG document (no dependency).

Each bar's segment is a ``<rect>`` with ``data-device``, ``data-kind`` and ``data-bytes`` attributes and a
``<title>`` tooltip; a device's size is a dashed ``<line>`` (``data-size``) across its bar. Heights are the bytes
on one linear scale (the root's ``data-scale-bytes`` fill ``data-chart-height`` units above ``data-baseline``),
the largest of every total and size filling the chart.
"""

from __future__ import annotations

from typing import Any
from xml.sax.saxutils import escape, quoteattr

from .planner import Plan

__all__ = ["KINDS", "bars", "plan_svg"]

#: the kinds stacked, bottom first: (plan key, label, colour)
KINDS = (
    ("model_bytes", "weights", "#4e79a7"),
    ("kv_bytes", "KV cache", "#f28e2b"),
    ("state_bytes", "recurrent state", "#59a14f"),
    ("compute_bytes", "compute", "#e15759"),
    ("adapter_bytes", "LoRA adapters", "#b07aa1"),
    ("draft_bytes", "draft model", "#9c755f"),
    ("mmproj_bytes", "projector", "#ff9da7"),
)
_HEIGHT = 320.0  # the chart's height in user units
_BAR, _GAP, _TOP, _LEFT, _BOTTOM = 90.0, 50.0, 40.0, 70.0, 60.0


def bars(p: Plan) -> list[dict[str, Any]]:
    """The plan's devices as bars: name, size (None for the CPU without --ram) and bytes per kind."""
    if p.devices:
        return [{"name": d["name"], "size": d["size"], **{k: d.get(k, 0) for k, _, _ in KINDS}} for d in p.devices]
    cache_on_gpu = p.gpu.get("cache_bytes", 0) if p.gpu else 0
    kv_on_gpu = cache_on_gpu if p.kv_layers else 0  # a model has a KV cache or a recurrent state
    out = [
        {
            "name": "CPU",
            "size": None,
            "model_bytes": p.weights.cpu,
            "kv_bytes": p.kv_bytes - kv_on_gpu,
            "state_bytes": p.recurrent_bytes - (cache_on_gpu - kv_on_gpu),
            "compute_bytes": p.compute_bytes or 0,
            "adapter_bytes": sum(v for a in p.adapters for k, v in a["buffers"].items() if k in ("CPU", "CPU_Mapped")),
            "draft_bytes": (p.draft["total_bytes"] or 0) - p.draft["gpu"].get("total_bytes", 0) if p.draft else 0,
            "mmproj_bytes": p.mmproj.total_bytes if p.mmproj and p.mmproj.device == "CPU" else 0,
        }
    ]
    if p.gpu:
        out.append(
            {
                "name": "GPU",
                "size": p.gpu_mem,
                "model_bytes": p.gpu.get("model_bytes", 0),
                "kv_bytes": kv_on_gpu,
                "state_bytes": cache_on_gpu - kv_on_gpu,
                "compute_bytes": p.gpu.get("compute_bytes", 0),
                "adapter_bytes": p.gpu.get("adapter_bytes", 0),
                "draft_bytes": p.gpu.get("draft_bytes", 0),
                "mmproj_bytes": p.gpu.get("mmproj_bytes", 0),
            }
        )
    return out


def _clean(text: str) -> str:
    """``text`` with the characters XML 1.0 cannot hold (controls, surrogates, U+FFFE/U+FFFF) replaced by U+FFFD."""
    return "".join(c if c in "\t\n" or 32 <= ord(c) < 0xD800 or 0xE000 <= ord(c) < 0xFFFE or ord(c) > 0xFFFF else "\ufffd" for c in text)


def _text(text: str) -> str:
    """``text`` as XML character data."""
    return escape(_clean(text))


def _mib(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB"


def plan_svg(p: Plan, title: str = "") -> str:
    """The SVG document for ``p``; ``title`` (the file's name) heads it."""
    rows = bars(p)
    totals = [sum(r[k] for k, _, _ in KINDS) for r in rows]
    scale_to = max([1, *totals, *(r["size"] or 0 for r in rows)])
    width = _LEFT + len(rows) * (_BAR + _GAP) + 160
    height = _TOP + _HEIGHT + _BOTTOM
    base = _TOP + _HEIGHT
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" data-scale-bytes="{scale_to}" data-chart-height="{_HEIGHT}" data-baseline="{base}">',
        f'<text x="{_LEFT}" y="20" font-family="sans-serif" font-size="14">{_text(title or p.architecture)}: memory by device</text>',
        f'<line x1="{_LEFT - 5}" y1="{base}" x2="{width - 160}" y2="{base}" stroke="#333"/>',
    ]
    for i, row in enumerate(rows):
        x = _LEFT + i * (_BAR + _GAP)
        y = base
        for key, label, colour in KINDS:
            n = int(row[key])
            if n <= 0:
                continue
            h = n / scale_to * _HEIGHT
            y -= h
            out.append(
                f'<rect x="{x:.3f}" y="{y:.6f}" width="{_BAR}" height="{h:.6f}" fill="{colour}" '
                f'data-device={quoteattr(_clean(row["name"]))} data-kind={quoteattr(label)} data-bytes="{n}">'
                f"<title>{_text(row['name'])}: {label} {_mib(n)}</title></rect>"
            )
        if row["size"] is not None:
            ys = base - row["size"] / scale_to * _HEIGHT
            out.append(
                f'<line x1="{x - 8:.3f}" y1="{ys:.6f}" x2="{x + _BAR + 8:.3f}" y2="{ys:.6f}" stroke="#000" stroke-dasharray="4 3" '
                f'data-device={quoteattr(_clean(row["name"]))} data-size="{row["size"]}">'
                f"<title>{_text(row['name'])}: size {_mib(row['size'])}</title></line>"
            )
        label = _text(row["name"] if len(row["name"]) <= 24 else row["name"][:23] + "…")
        out.append(
            f'<text x="{x + _BAR / 2:.3f}" y="{base + 18}" text-anchor="middle" font-family="sans-serif" font-size="12">{label}</text>'
        )
        out.append(
            f'<text x="{x + _BAR / 2:.3f}" y="{base + 34}" text-anchor="middle" font-family="sans-serif" font-size="11">'
            f"{_mib(totals[i])}</text>"
        )
    legend_x = width - 150
    for j, (_, label, colour) in enumerate(KINDS):
        y = _TOP + j * 20
        out.append(f'<rect x="{legend_x}" y="{y}" width="12" height="12" fill="{colour}"/>')
        out.append(f'<text x="{legend_x + 18}" y="{y + 11}" font-family="sans-serif" font-size="12">{label}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
