"""A report as people read it: Markdown tables, a self-contained HTML page (the tables and the
frontier plot inline, no server and no network), and the frontier plot as a PNG (matplotlib,
through the ``plot`` extra: ``pip install "meve[plot]"``)."""

from __future__ import annotations

import base64
import html as _html
import io
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["EXTRA_HINT", "draw_panel", "html", "markdown", "plot_png", "tables"]

EXTRA_HINT = 'the frontier plot needs matplotlib: pip install "meve[plot]"'
#: how each labelled arm is drawn: (marker, colour); others get a plain dot
STYLE = {"tuned": ("*", "black"), "this config": ("*", "black"), "default": ("x", "grey"), "no labels": ("s", "crimson")}


def _num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _interval(row: Mapping[str, Any]) -> str:
    ci = row.get("margin_ci95")
    margin = f"{float(row['margin']):+.3f}"
    return f"{margin} [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else margin


def tables(data: Mapping[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) of each table: the arms against the frontier, then the top-k curves."""
    arms = [
        [
            label,
            _num(a["evidence"]),
            _num(a["tokens"], 1),
            _num(a["frontier_at_tokens"]),
            _interval(a),
            _num(a.get("answer")),
            _num(a.get("tokens_vs_dense_top3"), 2),
        ]
        for label, a in data["arms"].items()
    ]
    head = ["setting", "evidence", "tokens", "frontier at its tokens", "margin [95% CI]", "answer in context", "tokens / dense top-3"]
    names = list(data["curves"])
    ks = [r["k"] for r in data["curves"][names[0]]] if names else []
    curve_rows = [[str(k), *(f"{_num(rows[i]['evidence'])} @ {_num(rows[i]['tokens'], 1)}" for rows in data["curves"].values())] for i, k in enumerate(ks)]
    return [
        (f"MeVe against the top-k frontier ({data['questions']} questions, {data['passages']} passages)", head, arms),
        ("Top-k curves: evidence @ mean tokens", ["k", *names], curve_rows),
    ]


def markdown(data: Mapping[str, Any]) -> str:
    """The report's tables and notes as Markdown."""
    out = ["# meve evaluation", "", *([data["verdict"], ""] if data.get("verdict") else []), f"Metric: {data['metric']}.", ""]
    for title, head, rows in tables(data):
        out += [f"## {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        out += ["| " + " | ".join(r) + " |" for r in rows]
        out.append("")
    out += [f"- {n}" for n in data.get("notes", [])]
    return "\n".join(out).rstrip() + "\n"


def html(data: Mapping[str, Any], png: bytes | None) -> str:
    """One self-contained page: the tables, the notes and the plot (a base64 ``data:`` image)."""
    esc = _html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>meve evaluation</title>",
        "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto}table{border-collapse:collapse;margin:1em 0}"
        "td,th{border:1px solid #bbb;padding:4px 8px;text-align:right}td:first-child,th:first-child{text-align:left}</style></head><body>",
        "<h1>meve evaluation</h1>",
        *([f"<p><strong>{esc(data['verdict'])}</strong></p>"] if data.get("verdict") else []),
        f"<p>Metric: {esc(data['metric'])}.</p>",
    ]
    for title, head, rows in tables(data):
        parts.append(f"<h2>{esc(title)}</h2><table><tr>" + "".join(f"<th>{esc(h)}</th>" for h in head) + "</tr>")
        parts += ["<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in rows]
        parts.append("</table>")
    if png is not None:
        parts.append(f"<img alt='the top-k frontier and the MeVe settings' src='data:image/png;base64,{base64.b64encode(png).decode('ascii')}'>")
    else:
        parts.append(f"<p>No plot: {esc(EXTRA_HINT)}.</p>")
    parts += ["<ul>", *(f"<li>{esc(n)}</li>" for n in data.get("notes", [])), "</ul></body></html>"]
    return "\n".join(parts) + "\n"


def draw_panel(ax: Any, curves: Mapping[str, Sequence[Mapping[str, Any]]], arms: Mapping[str, tuple[float, float, str, str]]) -> None:
    """One panel: each top-k curve (evidence against mean tokens) and each arm, ``label -> (tokens,
    evidence, marker, colour)``; the benchmarks' frontier picture draws each data set with it."""
    for system, rows in curves.items():
        ax.plot([r["tokens"] for r in rows], [r["evidence"] for r in rows], marker=".", lw=1, label=f"{system} top-k")
    for label, (tokens, evidence, marker, colour) in arms.items():
        ax.scatter([tokens], [evidence], marker=marker, color=colour, s=110 if marker == "*" else 40, zorder=3, label=label)
    ax.set_xlabel("mean tokens", fontsize=8)
    ax.tick_params(labelsize=7)


def _pyplot(required: bool) -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        if required:
            raise ImportError(EXTRA_HINT) from None
        return None
    return plt


def plot_png(data: Mapping[str, Any], *, required: bool = True) -> bytes | None:
    """The frontier plot of a report as PNG bytes; without matplotlib: an ImportError naming the
    extra, or None when not ``required``."""
    plt = _pyplot(required)
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    marks = {label: (float(a["tokens"]), float(a["evidence"]), *STYLE.get(label, ("o", "C3"))) for label, a in data["arms"].items()}
    draw_panel(ax, data["curves"], marks)
    ax.set_ylabel("evidence kept (by text)", fontsize=8)
    ax.set_title(f"{data['questions']} questions, {data['passages']} passages", fontsize=9)
    ax.legend(fontsize=6, loc="lower right")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()
