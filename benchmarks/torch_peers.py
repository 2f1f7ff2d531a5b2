"""PyTorch peers for bench.py: each row written as a PyTorch user writes it, with torch's fused functions
(F.softmax, F.layer_norm, F.rms_norm, F.gelu(approximate="tanh"), F.linear, scaled_dot_product_attention),
run eagerly and under torch.compile. Imported only when torch is; inputs become tensors once, outside timing.
"""
from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

# ---- the kernel rows ----


def gelu(x):
    return F.gelu(x, approximate="tanh")


def axpbz(x, z):
    return 2.0 * x + 3.0 * z + 1


def softmax(x):
    return F.softmax(x, dim=-1)


def layernorm(x):
    return F.layer_norm(x, x.shape[-1:], eps=1e-5)


def rms_norm(x, weight=None, eps=1e-6):
    """F.rms_norm (torch >= 2.4), else the expression torch's own modules used before it."""
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, x.shape[-1:], weight, eps=eps)
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y if weight is None else y * weight


def total(x):
    return x.sum()


def transpose_add(x, y):
    return x.T + y


def matmul(a, b):
    return torch.matmul(a, b)


def linear_gelu(x, w, b):
    return F.gelu(F.linear(x, w, b), approximate="tanh")


def scale_shift(x):
    return x * 2 + 1


# ---- the model rows: the same models as benchmarks/models.py, written the way torch code writes them ----


def ffn(x, fc_w, fc_b, proj_w, proj_b):
    return F.linear(F.gelu(F.linear(x, fc_w, fc_b), approximate="tanh"), proj_w, proj_b)


def gpt2_block(x, fc_w, fc_b, mproj_w, mproj_b, attn_w, attn_b, aproj_w, aproj_b, g1, b1, g2, b2, n_head):
    n_seq, n_embd = x.shape
    h = F.layer_norm(x, (n_embd,), g1, b1)
    q, k, v = F.linear(h, attn_w, attn_b).view(n_seq, 3, n_head, n_embd // n_head).permute(1, 2, 0, 3)
    a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    x = x + F.linear(a.transpose(0, 1).reshape(n_seq, n_embd), aproj_w, aproj_b)
    return x + ffn(F.layer_norm(x, (n_embd,), g2, b2), fc_w, fc_b, mproj_w, mproj_b)


def rotary(x, freqs_cos, freqs_sin):
    """llama2.c's model.py apply_rotary_emb (real and imaginary parts interleaved), for one tensor."""
    r, i = x.reshape(x.shape[:-1] + (-1, 2)).unbind(-1)
    cos, sin = freqs_cos[None, :, None, :], freqs_sin[None, :, None, :]
    return torch.stack([r * cos - i * sin, r * sin + i * cos], dim=-1).flatten(3)


def llama_block(x, attention_norm, q_weight, k_weight, v_weight, o_weight, ffn_norm, up_weight, gate_weight,
                down_weight, mask, freqs_cos, freqs_sin, n_heads):
    """`mask` is the causal mask the NumPy code adds; here is_causal=True says the same."""
    B, L, dim = x.shape
    h = rms_norm(x, attention_norm, eps=1e-5)
    q = rotary(F.linear(h, q_weight).view(B, L, n_heads, -1), freqs_cos, freqs_sin)
    k = rotary(F.linear(h, k_weight).view(B, L, n_heads, -1), freqs_cos, freqs_sin)
    v = F.linear(h, v_weight).view(B, L, n_heads, -1)
    a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
    z = x + F.linear(a.transpose(1, 2).reshape(B, L, dim), o_weight)
    h = rms_norm(z, ffn_norm, eps=1e-5)
    return z + F.linear(F.silu(F.linear(h, gate_weight)) * F.linear(h, up_weight), down_weight)


# ---- the same models computing NumPy's dtypes ----
# picoGPT's `np.sqrt(2 / np.pi)` (in gelu) and `np.sqrt(q.shape[-1])` (in attention) are NumPy float64
# scalars, which under NEP 50 promote float32 arrays: NumPy, and tracejit, which returns NumPy's dtypes,
# compute the GELU, the attention from its scaling on, and every layer after them in float64, casting
# each float32 weight those layers meet to float64 on every call. The ports above stay float32 (what a
# torch user writes); these compute what the NumPy code computes, with the same fused functions, so the
# table can say how much of a gap is the float64 arithmetic and copies the NumPy program asks for.


def ffn_numpy_dtypes(x, fc_w, fc_b, proj_w, proj_b):
    a = F.gelu(F.linear(x, fc_w.to(x.dtype), fc_b.to(x.dtype)).double(), approximate="tanh")
    return F.linear(a, proj_w.double(), proj_b.double())


def gpt2_block_numpy_dtypes(x, fc_w, fc_b, mproj_w, mproj_b, attn_w, attn_b, aproj_w, aproj_b, g1, b1, g2, b2,
                            n_head):
    n_seq, n_embd = x.shape
    h = F.layer_norm(x, (n_embd,), g1, b1)
    q, k, v = F.linear(h, attn_w, attn_b).view(n_seq, 3, n_head, n_embd // n_head).permute(1, 2, 0, 3)
    a = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True)
    x = x + F.linear(a.transpose(0, 1).reshape(n_seq, n_embd), aproj_w.double(), aproj_b.double())
    h = F.layer_norm(x, (n_embd,), g2.double(), b2.double())
    return x + ffn_numpy_dtypes(h, fc_w, fc_b, mproj_w, mproj_b)


# ---- inputs: NumPy arrays -> tensors, once ----


def tensors(*arrays: np.ndarray) -> tuple:
    return tuple(torch.from_numpy(a) for a in arrays)


def linear_layout(x: np.ndarray, *params: np.ndarray) -> tuple:
    """picoGPT keeps a linear layer's weight as [in, out]; nn.Linear keeps [out, in] (what F.linear takes)."""
    return (torch.from_numpy(x),) + tuple(torch.from_numpy(np.ascontiguousarray(p.T)) for p in params)


# row -> (function, input conversion)
PEERS: dict[str, tuple[Callable, Callable]] = {
    "gelu": (gelu, tensors), "axpbz": (axpbz, tensors), "softmax": (softmax, tensors),
    "layernorm": (layernorm, tensors), "rmsnorm": (rms_norm, tensors), "sum": (total, tensors),
    "transpose_add": (transpose_add, tensors), "matmul": (matmul, tensors),
    "linear_gelu": (linear_gelu, linear_layout), "dispatch": (scale_shift, tensors),
    "linear": (F.linear, linear_layout), "ffn": (ffn, linear_layout),
    "gpt2_block": (gpt2_block, linear_layout), "llama_block": (llama_block, tensors),
}


# row -> a port computing NumPy's dtypes, for the rows whose NumPy code promotes to float64
NUMPY_DTYPES: dict[str, Callable] = {"ffn": ffn_numpy_dtypes, "gpt2_block": gpt2_block_numpy_dtypes}


def resident(fn: Callable, convert: Callable) -> Callable:
    """`fn` on tensors converted once per set of NumPy inputs (outside the timed calls)."""
    converted: dict[tuple, tuple] = {}

    def call(*inputs):
        key = tuple(map(id, inputs))
        if key not in converted:
            converted[key] = (inputs, convert(*inputs))   # keeps the inputs alive, so ids stay unique
        return fn(*converted[key][1])
    return call


@functools.cache
def compiled(fn: Callable) -> Callable:
    return torch.compile(fn, dynamic=False)


def lazily_compiled(fn: Callable) -> Callable:
    """torch.compile(fn), made at the first call: importing Dynamo takes seconds, which a process that only
    loads the rows (the tests, a --first-call child of another column) need not pay. Dynamo and Inductor
    compile at the first call in any case."""
    def call(*args, **kwargs):
        return compiled(fn)(*args, **kwargs)
    return call


def columns(row: str, static: dict) -> dict[str, Callable]:
    """The "torch" and "compile" columns of a row: eager, and torch.compile'd; for a row whose NumPy code
    computes in float64, also "torch_np", torch eager in the same dtypes."""
    fn, convert = PEERS[row]
    columns = {"torch": resident(functools.partial(fn, **static), convert),
               "compile": resident(functools.partial(lazily_compiled(fn), **static), convert)}
    if row in NUMPY_DTYPES:   # "torch_np": torch eager computing the NumPy program's dtypes
        columns["torch_np"] = resident(functools.partial(NUMPY_DTYPES[row], **static), convert)
    return columns


def setup(threads: int) -> dict:
    """Runs torch on as many threads as tracejit's numba device; returns what the table header shows."""
    torch.set_num_threads(threads)
    return {"torch": torch.__version__, "torch_threads": torch.get_num_threads()}
