"""What fused, as a graph: Traced.to_networkx and `python -m tracejit graph`."""
from __future__ import annotations

import os
import shutil
import textwrap
from pathlib import Path

import numpy as np
import pytest

import tracejit as tj
from test_api import run_python
from tracejit.frontend.graph_view import to_dot


def block(x, w, b):
    """A linear layer, GELU and a softmax: a matrix product, then one kernel for the rest."""
    h = x @ w + b
    h = 0.5 * h * (1 + np.tanh(0.7978845608 * (h + 0.044715 * h ** 3)))
    e = np.exp(h - h.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


ARGS = (np.ones((8, 16), np.float32), np.ones((16, 24), np.float32), np.ones(24, np.float32))


def test_every_node_names_the_kernel_it_is_fused_into(device):
    f = tj.kernel(block)
    g = f.trace(*ARGS).to_networkx(device)
    kernels = [k.name for k in f.lower(*ARGS, device=device).kernels]
    assert g.graph["kernels"] == kernels and g.graph["name"] == "block"
    inputs = [i for i, a in g.nodes(data=True) if a["op"] == "input"]
    assert sorted(g.nodes[i]["arg"] for i in inputs) == ["argument 0", "argument 1", "argument 2"]
    for i, a in g.nodes(data=True):
        if a["op"] == "input":
            assert a["kernel"] is None and a["kernels"] == () and g.in_degree(i) == 0
        else:
            assert a["kernels"] and all(kernels[k] in a["kernel"] for k in a["kernels"]), (i, a)
    (out,) = g.graph["outputs"]
    want = block(*ARGS)
    assert g.nodes[out]["shape"] == want.shape and g.nodes[out]["dtype"] == want.dtype.name
    assert g.nodes[out]["op"] == "div" and g.out_degree(out) == 0
    assert {g.nodes[i]["op"] for i in g.nodes} >= {"exp", "tanh", "reduce"}
    for d in g.nodes:   # each operand position of a node comes from one edge (x * x: one edge, (0, 1))
        positions = sorted(p for _, _, a in g.in_edges(d, data=True) for p in a["operands"])
        assert positions == list(range(len(positions))), d
    # the softmax's kernel holds its row max, exponent and sum: what fused is visible
    softmax = g.nodes[out]["kernels"]
    assert all(g.nodes[i]["kernels"] == softmax for i in g.nodes if g.nodes[i]["op"] in ("exp", "tanh"))


def test_the_dot_text_has_a_cluster_per_kernel_and_every_node_once():
    g = tj.kernel(block).trace(*ARGS).to_networkx("numba")
    dot = to_dot(g)
    assert dot.startswith('digraph "block" {') and dot.rstrip().endswith("}")
    for k, name in enumerate(g.graph["kernels"]):
        assert f"subgraph cluster_{k} {{" in dot and f'label="{name}"' in dot
    for i in g.nodes:
        assert dot.count(f"  n{i} [") == 1, i
    assert dot.count(" -> ") == g.number_of_edges()
    assert "\\n" in dot and "\n    n" in dot   # labels break lines the DOT way


MODULE = textwrap.dedent('''
    import numpy as np
    import tracejit as tj

    @tj.kernel
    def scaled_softmax(x):
        e = np.exp(x * 2 - (x * 2).max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
''')


@pytest.fixture
def module(tmp_path):
    """PYTHONPATH for a child that imports graph_demo (and this tracejit)."""
    (tmp_path / "graph_demo.py").write_text(MODULE)
    return os.pathsep.join([str(Path(tj.__file__).resolve().parents[1]), str(tmp_path)])


def test_graph_command_draws_with_graphviz_or_says_why_and_prints_the_dot(module, tmp_path):
    args = ("-m", "tracejit", "graph", "graph_demo:scaled_softmax", "--arg", "float32[64,1024]")
    plain = run_python(*args, PYTHONPATH=module)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.startswith('digraph "scaled_softmax"') and "1 kernel(s)" in plain.stderr
    out = tmp_path / "graph.svg"
    drawn = run_python(*args, "-o", str(out), PYTHONPATH=module)
    if shutil.which("dot"):
        assert drawn.returncode == 0, drawn.stderr
        assert "<svg" in out.read_text() and "scaled_softmax" not in drawn.stdout
    else:
        assert drawn.returncode == 1 and "Graphviz's `dot` is not installed" in drawn.stderr
        assert drawn.stdout == plain.stdout
    without = run_python(*args, "-o", str(out), PYTHONPATH=module, PATH="/nonexistent")
    assert without.returncode == 1 and "`dot` is not installed" in without.stderr
    assert without.stdout.startswith("digraph")


@pytest.mark.parametrize("extra, message", [(("-o", "graph.dot"), "name a drawing"),
                                           (("--device", "no-such-device"), "unknown device")])
def test_graph_command_names_what_is_wrong(module, extra, message):
    done = run_python("-m", "tracejit", "graph", "graph_demo:scaled_softmax", "--arg", "float32[4,8]", *extra,
                      PYTHONPATH=module)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
