"""What fused: the scheduled graph IR as a networkx DiGraph, and as Graphviz DOT with a cluster per kernel
(`f.trace(*args).to_networkx()`, `python -m tracejit graph MODULE:FUNC --arg ... -o graph.svg`)."""

from __future__ import annotations

import shutil
import subprocess

from tracejit.errors import ArgumentError
from tracejit.ir.fuse import Program
from tracejit.ir.graph import Op, format_arg, toposort

ARG_TEXT_MAX = 40  # a node's arg (axis, dtype, slice, constant) as shown, shortened beyond this


def to_networkx(program: Program, name: str):
    """The program's graph as scheduled (long reductions split in two stages, as the kernels compute them):
    node i (topological order) has `op`, `shape`, `dtype`, `arg` (text), `kernel` (the name of the kernel
    that computes it, kernels joined by ", " where a cheap value is recomputed in several, None for an
    argument) and `kernels` (their indices); an edge src -> node has `operands` (the positions it takes
    among the node's operands: (0, 1) for x * x). Graph
    attributes: `name`, `kernels` (every kernel's name, in launch order) and `outputs` (the returned
    nodes). Kernels NumPy runs (a BLAS matmul, a sort on numba) are kernels here too."""
    import networkx as nx

    order = toposort(program.graph)
    ids = {n: i for i, n in enumerate(order)}
    names = [k.name for k in program.kernels]
    g = nx.DiGraph(name=name, kernels=names, outputs=[ids[o] for o in program.graph])
    for n in order:
        kernels = program.node_kernels.get(n, ())
        arg = "" if n.arg is None else format_arg(n.arg)
        if n.op is Op.INPUT:
            arg = f"argument {n.arg}"
        g.add_node(
            ids[n],
            op=n.op.value,
            shape=n.shape,
            dtype=n.dtype.name,
            arg=arg if len(arg) <= ARG_TEXT_MAX else arg[: ARG_TEXT_MAX - 3] + "...",
            kernel=", ".join(names[k] for k in kernels) or None,
            kernels=kernels,
        )
        for pos, s in enumerate(n.srcs):  # x * x: one edge, operands (0, 1)
            if g.has_edge(ids[s], ids[n]):
                g.edges[ids[s], ids[n]]["operands"] += (pos,)
            else:
                g.add_edge(ids[s], ids[n], operands=(pos,))
    return g


def to_dot(g) -> str:
    """Graphviz DOT of a to_networkx graph: a cluster per kernel holding the nodes only it computes; an
    argument, and a value several kernels recompute, outside every cluster."""

    def quote(text) -> str:
        return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'

    def label(i) -> str:
        a = g.nodes[i]
        shape = "x".join(map(str, a["shape"])) or "scalar"
        head = a["op"] + (f" {a['arg']}" if a["arg"] else "")
        return f"{head}\n{a['dtype']}[{shape}]"

    lines = [f"digraph {quote(g.graph['name'])} {{", "  rankdir=TB;", '  node [shape=box, fontname="Helvetica"];']
    outputs = set(g.graph["outputs"])
    for k, kernel in enumerate(g.graph["kernels"]):
        members = [i for i in g.nodes if g.nodes[i]["kernels"] == (k,)]
        lines.append(f"  subgraph cluster_{k} {{")
        lines.append(f"    label={quote(kernel)}; style=rounded; color=steelblue;")
        lines += [f"    n{i} [label={quote(label(i))}{', penwidth=2' if i in outputs else ''}];" for i in members]
        lines.append("  }")
    for i in g.nodes:
        if len(g.nodes[i]["kernels"]) != 1:
            style = "ellipse" if g.nodes[i]["op"] == "input" else "box, style=dashed"
            lines.append(f"  n{i} [label={quote(label(i))}, shape={style}];")
    lines += [f"  n{s} -> n{d};" for s, d in g.edges]
    lines.append("}")
    return "\n".join(lines) + "\n"


def render(dot: str, path: str) -> str | None:
    """Draw DOT into `path` (its suffix names the format: svg, png, pdf, ...) with Graphviz's `dot`; None
    when done, else why not (no `dot` on the PATH, or its error)."""
    fmt = path.rsplit(".", 1)[-1].lower() if "." in path else ""
    if not fmt or fmt == "dot":
        raise ArgumentError(f"-o {path}: name a drawing such as graph.svg, graph.png or graph.pdf")
    exe = shutil.which("dot")
    if exe is None:
        return "Graphviz's `dot` is not installed (apt-get install graphviz, or brew install graphviz)"
    done = subprocess.run([exe, f"-T{fmt}", "-o", path], input=dot, text=True, capture_output=True)
    return None if done.returncode == 0 else f"dot failed: {done.stderr.strip()}"
