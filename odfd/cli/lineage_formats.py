"""``odfd inspect lineage`` output: a terminal tree, Graphviz dot, JSON, or a self-contained
HTML page with the graph drawn as SVG (layered left to right, inputs first)."""

from __future__ import annotations

import html
import json
from collections.abc import Callable

from odfd.app.lineage import LineageGraph, LineageNode

FORMATS = ("tree", "dot", "json", "html")


def render(graph: LineageGraph, output_format: str, *, downstream: bool = False) -> str:
    renderers: dict[str, Callable[[LineageGraph], str]] = {
        "tree": lambda g: to_tree(g, downstream=downstream),
        "dot": to_dot,
        "json": lambda g: json.dumps(g.to_json(), indent=2),
        "html": to_html,
    }
    return renderers[output_format](graph)


def _label(node: LineageNode) -> str:
    return f"{node.alias} ({node.kind})"


def to_tree(graph: LineageGraph, *, downstream: bool = False) -> str:
    """Inputs below the dataset; with ``downstream`` a second tree of the datasets reading it.
    A dataset reached twice is printed once in full, then as ``… (shown above)``."""
    lines = [_label(graph.nodes[graph.root])]
    _branches(graph, graph.root, graph.inputs_of, "", set(), lines)
    if downstream:
        lines += ["", f"read by (downstream of {graph.nodes[graph.root].alias}):"]
        lines.append(_label(graph.nodes[graph.root]))
        _branches(graph, graph.root, graph.outputs_of, "", set(), lines)
    return "\n".join(lines)


def _branches(
    graph: LineageGraph,
    node_id: str,
    step: Callable[[str], list[str]],
    prefix: str,
    shown: set[str],
    lines: list[str],
) -> None:
    shown.add(node_id)
    children = sorted(step(node_id), key=lambda child: graph.nodes[child].alias.lower())
    for index, child in enumerate(children):
        last = index == len(children) - 1
        text = _label(graph.nodes[child])
        if child in shown and step(child):
            text += " … (shown above)"
        lines.append(f"{prefix}{'└── ' if last else '├── '}{text}")
        if child not in shown:
            _branches(graph, child, step, prefix + ("    " if last else "│   "), shown, lines)


def _dot_id(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def to_dot(graph: LineageGraph) -> str:
    lines = ["digraph lineage {", "  rankdir=LR;", "  node [shape=box, style=rounded];"]
    for node in sorted(graph.nodes.values(), key=lambda n: n.alias.lower()):
        attributes = [f"label={_dot_id(node.alias)}"]
        if node.id == graph.root:
            attributes.append("penwidth=2")
        if node.kind == "Root":
            attributes.append('fillcolor="#e8f1fb", style="rounded,filled"')
        elif node.kind == "Missing":
            attributes.append("style=dashed")
        lines.append(f"  {_dot_id(node.id)} [{', '.join(attributes)}];")
    for source, target in graph.edges:
        lines.append(f"  {_dot_id(source)} -> {_dot_id(target)};")
    lines.append("}")
    return "\n".join(lines)


_NODE_W, _NODE_H, _GAP_X, _GAP_Y = 220, 36, 80, 18


def layered_layout(graph: LineageGraph) -> dict[str, tuple[int, int]]:
    """Column = longest path from a source (inputs left of what reads them); rows in each
    column ordered by the mean row of the node's inputs, to keep edges short."""
    column: dict[str, int] = {}

    def depth(node_id: str, trail: frozenset[str]) -> int:
        if node_id not in column:
            inputs = [i for i in graph.inputs_of(node_id) if i not in trail]
            column[node_id] = 1 + max((depth(i, trail | {node_id}) for i in inputs), default=-1)
        return column[node_id]

    for node_id in graph.nodes:
        depth(node_id, frozenset())
    rows: dict[str, int] = {}
    by_column: dict[int, list[str]] = {}
    for node_id in sorted(graph.nodes, key=lambda n: graph.nodes[n].alias.lower()):
        by_column.setdefault(column[node_id], []).append(node_id)
    for index in sorted(by_column):

        def weight(node_id: str) -> float:
            placed = [rows[i] for i in graph.inputs_of(node_id) if i in rows]
            return sum(placed) / len(placed) if placed else 0.0

        for row, node_id in enumerate(sorted(by_column[index], key=weight)):
            rows[node_id] = row
    return {
        node_id: (column[node_id] * (_NODE_W + _GAP_X), rows[node_id] * (_NODE_H + _GAP_Y))
        for node_id in graph.nodes
    }


def to_svg(graph: LineageGraph) -> str:
    places = layered_layout(graph)
    width = max(x for x, _ in places.values()) + _NODE_W + 2
    height = max(y for _, y in places.values()) + _NODE_H + 2
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="-1 -1 {width} {height}" font-family="sans-serif" font-size="13">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" '
        'markerHeight="8" orient="auto"><path d="M0,0L10,5L0,10z" fill="#667"/></marker></defs>',
    ]
    for source, target in graph.edges:
        (x1, y1), (x2, y2) = places[source], places[target]
        sx, sy, tx, ty = x1 + _NODE_W, y1 + _NODE_H / 2, x2, y2 + _NODE_H / 2
        mid = (sx + tx) / 2
        parts.append(
            f'<path class="edge" d="M{sx},{sy} C{mid},{sy} {mid},{ty} {tx},{ty}" fill="none" '
            'stroke="#667" marker-end="url(#arrow)"/>'
        )
    for node in graph.nodes.values():
        x, y = places[node.id]
        fill = {"Root": "#e8f1fb", "Missing": "#fff"}.get(node.kind, "#eef7ee")
        stroke = "#223" if node.id == graph.root else "#889"
        dash = ' stroke-dasharray="4 3"' if node.kind == "Missing" else ""
        parts.append(
            f'<g class="node" data-id="{html.escape(node.id)}"><title>{html.escape(node.id)}</title>'
            f'<rect x="{x}" y="{y}" width="{_NODE_W}" height="{_NODE_H}" rx="6" fill="{fill}" '
            f'stroke="{stroke}"{dash}/><text x="{x + 10}" y="{y + 23}">'
            f"{html.escape(node.alias[:30])}</text></g>"
        )
    parts.append("</svg>")
    return "\n".join(parts)


def to_html(graph: LineageGraph) -> str:
    root = graph.nodes[graph.root]
    return (
        '<!doctype html>\n<html><head><meta charset="utf-8">'
        f"<title>Lineage of {html.escape(root.alias)}</title></head>\n"
        f"<body><h1>Lineage of {html.escape(root.alias)}</h1>\n"
        "<p>Inputs on the left, datasets reading them on the right; blue: root datasets, "
        "green: derivatives, dashed: inputs this node does not hold.</p>\n"
        f"{to_svg(graph)}\n"
        f'<script type="application/json" id="lineage">{_script_json(graph)}</script>\n'
        "</body></html>\n"
    )


def _script_json(graph: LineageGraph) -> str:
    return json.dumps(graph.to_json()).replace("</", "<\\/")
