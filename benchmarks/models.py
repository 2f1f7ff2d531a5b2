"""Model rows for bench.py: transformer layers written as plain NumPy, from the test corpus's picoGPT and
llama3.np code (tests/corpus/transformer.py), at GPT-2 small's width and at the stories15M Llama's.

Each row is (the NumPy function, its static keyword arguments, an input maker); bench.py decorates the
function unchanged with tj.kernel and checks it against the NumPy run before timing it.
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from corpus import transformer as T

N_SEQ = 64
GPT2_EMBD, GPT2_HEADS = 768, 12
LLAMA_DIM, LLAMA_HEADS, LLAMA_HIDDEN = 288, 6, 768   # stories15M, the model llama3.np runs


def llama_block(x, attention_norm, q_weight, k_weight, v_weight, o_weight, ffn_norm, up_weight, gate_weight,
                down_weight, mask, freqs_cos, freqs_sin, n_heads):
    """llama3.np's TransformerBlock.__call__ for a whole prompt (no KV cache): RMSNorm, attention with
    rotary embeddings, residual, RMSNorm, SwiGLU feed-forward, residual; weights as the checkpoint stores
    them ([out, in]), as llama3.np's classes take them."""
    B, L, _ = x.shape
    h = T.RMSNorm(attention_norm, eps=1e-5)(x)
    xq = (h @ q_weight.T).reshape(B, L, n_heads, -1)
    xk = (h @ k_weight.T).reshape(B, L, n_heads, -1)
    xv = (h @ v_weight.T).reshape(B, L, n_heads, -1)
    xq, xk = T.apply_rotary_emb(xq, xk, freqs_cos, freqs_sin)
    z = x + T.llama_scaled_dot_product(xq, xk, xv, mask, o_weight.T)
    return z + T.FeedForward(up_weight, gate_weight, down_weight)(T.RMSNorm(ffn_norm, eps=1e-5)(z))


def normal(rng: np.random.Generator, *shape: int, scale: float = 0.02) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def linear_inputs(rng: np.random.Generator) -> tuple:
    return normal(rng, N_SEQ, 256, scale=1.0), normal(rng, 256, 768), normal(rng, 768)


def gpt2_params(rng: np.random.Generator) -> tuple:
    e = GPT2_EMBD
    return (normal(rng, e, 4 * e), normal(rng, 4 * e), normal(rng, 4 * e, e), normal(rng, e),
            normal(rng, e, 3 * e), normal(rng, 3 * e), normal(rng, e, e), normal(rng, e),
            1 + normal(rng, e), normal(rng, e), 1 + normal(rng, e), normal(rng, e))


def ffn_inputs(rng: np.random.Generator) -> tuple:
    return (normal(rng, N_SEQ, GPT2_EMBD, scale=1.0),) + gpt2_params(rng)[:4]


def gpt2_block_inputs(rng: np.random.Generator) -> tuple:
    return (normal(rng, N_SEQ, GPT2_EMBD, scale=1.0),) + gpt2_params(rng)


def llama_block_inputs(rng: np.random.Generator) -> tuple:
    dim, hidden, head_dim = LLAMA_DIM, LLAMA_HIDDEN, LLAMA_DIM // LLAMA_HEADS
    freqs = np.outer(np.arange(N_SEQ), 1.0 / (10000 ** (np.arange(0, head_dim, 2) / head_dim)))
    mask = np.triu(np.full((N_SEQ, N_SEQ), float("-inf")), k=1).astype(np.float32)
    return (normal(rng, 1, N_SEQ, dim, scale=1.0), 1 + normal(rng, dim), normal(rng, dim, dim),
            normal(rng, dim, dim), normal(rng, dim, dim), normal(rng, dim, dim), 1 + normal(rng, dim),
            normal(rng, hidden, dim), normal(rng, hidden, dim), normal(rng, dim, hidden), mask,
            np.cos(freqs).astype(np.float32), np.sin(freqs).astype(np.float32))


class Model(NamedTuple):
    name: str
    function: Callable
    static: dict
    inputs: Callable[[np.random.Generator], tuple]


MODELS = [
    Model("linear", T.gpt2_linear, {}, linear_inputs),                       # x @ w + b, 64x256 @ 256x768
    Model("ffn", T.gpt2_ffn, {}, ffn_inputs),                                # 768 -> 3072 -> 768, GELU
    Model("gpt2_block", T.gpt2_transformer_block, {"n_head": GPT2_HEADS}, gpt2_block_inputs),
    Model("llama_block", llama_block, {"n_heads": LLAMA_HEADS}, llama_block_inputs),
]
