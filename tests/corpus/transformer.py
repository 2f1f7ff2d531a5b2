"""Transformer pieces as written in two NumPy language models: picoGPT (jaymody/picoGPT, gpt2.py) and
llama3.np (likejazz/llama3.np, llama3.py). Function bodies follow the sources; the program entry points
only unpack the parameter dicts and classes the sources use into kernel arguments."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import program

# ---------------------------------------------------------------------------------------------
# picoGPT (jaymody/picoGPT, gpt2.py)


def gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


def softmax(x):
    exp_x = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return exp_x / np.sum(exp_x, axis=-1, keepdims=True)


def layer_norm(x, g, b, eps: float = 1e-5):
    mean = np.mean(x, axis=-1, keepdims=True)
    variance = np.var(x, axis=-1, keepdims=True)
    x = (x - mean) / np.sqrt(variance + eps)  # normalize x to have mean=0 and var=1 over last axis
    return g * x + b  # scale and offset with gamma/beta params


def linear(x, w, b):  # [m, in], [in, out], [out] -> [m, out]
    return x @ w + b


def ffn(x, c_fc, c_proj):  # [n_seq, n_embd] -> [n_seq, n_embd]
    a = gelu(linear(x, **c_fc))  # project up
    x = linear(a, **c_proj)  # project back down
    return x


def attention(q, k, v, mask):  # [n_q, d_k], [n_k, d_k], [n_k, d_v], [n_q, n_k] -> [n_q, d_v]
    return softmax(q @ k.T / np.sqrt(q.shape[-1]) + mask) @ v


def mha(x, c_attn, c_proj, n_head):  # [n_seq, n_embd] -> [n_seq, n_embd]
    x = linear(x, **c_attn)  # qkv projection
    qkv = np.split(x, 3, axis=-1)  # split into qkv
    qkv_heads = list(map(lambda x: np.split(x, n_head, axis=-1), qkv))  # split into heads
    causal_mask = (1 - np.tri(x.shape[0], dtype=x.dtype)) * -1e10  # hide future inputs
    out_heads = [attention(q, k, v, causal_mask) for q, k, v in zip(*qkv_heads)]  # attention per head
    x = np.hstack(out_heads)  # merge heads
    x = linear(x, **c_proj)  # out projection
    return x


def transformer_block(x, mlp, attn, ln_1, ln_2, n_head):  # [n_seq, n_embd] -> [n_seq, n_embd]
    x = x + mha(layer_norm(x, **ln_1), **attn, n_head=n_head)  # multi-head causal self attention
    x = x + ffn(layer_norm(x, **ln_2), **mlp)  # position-wise feed forward network
    return x


def gpt2(inputs, wte, wpe, blocks, ln_f, n_head):  # [n_seq] -> [n_seq, n_vocab]
    x = wte[inputs] + wpe[range(len(inputs))]  # token + positional embeddings
    for block in blocks:
        x = transformer_block(x, **block, n_head=n_head)
    x = layer_norm(x, **ln_f)
    return x @ wte.T  # projection to vocab


# entry points: the sources pass parameters as dicts of arrays; a kernel takes the arrays


def gpt2_gelu(x):
    return gelu(x)


def gpt2_embeddings(inputs, wte, wpe):  # the first line of gpt2(): token plus positional embeddings
    return wte[inputs] + wpe[range(len(inputs))]


def gpt2_softmax(x):
    return softmax(x)


def gpt2_layer_norm(x, g, b):
    return layer_norm(x, g, b)


def gpt2_linear(x, w, b):
    return linear(x, w, b)


def gpt2_ffn(x, fc_w, fc_b, proj_w, proj_b):
    return ffn(x, {"w": fc_w, "b": fc_b}, {"w": proj_w, "b": proj_b})


def gpt2_attention(q, k, v, mask):
    return attention(q, k, v, mask)


def gpt2_mha(x, attn_w, attn_b, proj_w, proj_b, n_head):
    return mha(x, {"w": attn_w, "b": attn_b}, {"w": proj_w, "b": proj_b}, n_head)


def _block(fc_w, fc_b, mproj_w, mproj_b, attn_w, attn_b, aproj_w, aproj_b, g1, b1, g2, b2):
    return {"mlp": {"c_fc": {"w": fc_w, "b": fc_b}, "c_proj": {"w": mproj_w, "b": mproj_b}},
            "attn": {"c_attn": {"w": attn_w, "b": attn_b}, "c_proj": {"w": aproj_w, "b": aproj_b}},
            "ln_1": {"g": g1, "b": b1}, "ln_2": {"g": g2, "b": b2}}


def gpt2_transformer_block(x, fc_w, fc_b, mproj_w, mproj_b, attn_w, attn_b, aproj_w, aproj_b,
                           g1, b1, g2, b2, n_head):
    block = _block(fc_w, fc_b, mproj_w, mproj_b, attn_w, attn_b, aproj_w, aproj_b, g1, b1, g2, b2)
    return transformer_block(x, **block, n_head=n_head)


def gpt2_forward(inputs, wte, wpe, fc_w, fc_b, mproj_w, mproj_b, attn_w, attn_b, aproj_w, aproj_b,
                 g1, b1, g2, b2, gf, bf, n_head):
    block = _block(fc_w, fc_b, mproj_w, mproj_b, attn_w, attn_b, aproj_w, aproj_b, g1, b1, g2, b2)
    return gpt2(inputs, wte, wpe, [block], {"g": gf, "b": bf}, n_head)


def gpt2_greedy_token(logits):
    return np.argmax(logits[-1])  # greedy sampling, from picoGPT's generate()


# ---------------------------------------------------------------------------------------------
# llama3.np (likejazz/llama3.np, llama3.py)


@dataclass(frozen=True)
class ModelArgs:  # the fields of llama3.np's config.ModelArgs that the code below reads
    dim: int = 16
    n_heads: int = 4
    n_kv_heads: int | None = 2
    max_batch_size: int = 1
    max_seq_len: int = 8
    norm_eps: float = 1e-5


def silu(x):
    return x * (1 / (1 + np.exp(-x)))


def apply_rotary_emb(xq, xk, freqs_cos, freqs_sin):
    xqri = xq.reshape(xq.shape[:-1] + (-1, 2))
    xkri = xk.reshape(xk.shape[:-1] + (-1, 2))

    xq_r, xq_i = np.split(xqri, 2, axis=-1)
    xk_r, xk_i = np.split(xkri, 2, axis=-1)

    xq_r = xq_r.squeeze(-1)
    xq_i = xq_i.squeeze(-1)
    xk_r = xk_r.squeeze(-1)
    xk_i = xk_i.squeeze(-1)

    freqs_cos = np.expand_dims(freqs_cos, axis=(0, 2))
    freqs_sin = np.expand_dims(freqs_sin, axis=(0, 2))

    xq_out_r = xq_r * freqs_cos - xq_i * freqs_sin
    xq_out_i = xq_r * freqs_sin + xq_i * freqs_cos
    xk_out_r = xk_r * freqs_cos - xk_i * freqs_sin
    xk_out_i = xk_r * freqs_sin + xk_i * freqs_cos

    xq_out = np.stack([xq_out_r, xq_out_i], axis=-1)
    xk_out = np.stack([xk_out_r, xk_out_i], axis=-1)
    xq_out = xq_out.reshape(xq_out.shape[:-2] + (-1,))
    xk_out = xk_out.reshape(xk_out.shape[:-2] + (-1,))

    return xq_out, xk_out


def repeat_kv(x, n_rep: int):
    if n_rep == 1:
        return x
    z = np.repeat(x, n_rep, axis=2)
    return z


class FeedForward:
    def __init__(self, up_weight, gate_weight, down_weight):
        self.up_weight = up_weight.T
        self.gate_weight = gate_weight.T
        self.down_weight = down_weight.T

    def __call__(self, x):
        swish = silu(x @ self.gate_weight)
        x_V = x @ self.up_weight
        x = swish * x_V
        x = x @ self.down_weight
        return x


class RMSNorm:
    def __init__(self, weight, eps: float):
        self.weight = weight
        self.eps = eps

    def __call__(self, x):
        z = (x ** 2).mean(-1, keepdims=True) + self.eps
        z = x / np.sqrt(z)
        return z * self.weight


class Attention:
    def __init__(self, q_weight, k_weight, v_weight, o_weight, args: ModelArgs):
        self.n_kv_heads = args.n_heads if args.n_kv_heads is None else args.n_kv_heads
        assert args.n_heads % self.n_kv_heads == 0
        self.n_local_heads = args.n_heads
        self.n_local_kv_heads = self.n_kv_heads
        self.n_rep = self.n_local_heads // self.n_local_kv_heads
        self.head_dim = args.dim // args.n_heads

        self.q_weight = q_weight.T
        self.k_weight = k_weight.T
        self.v_weight = v_weight.T
        self.o_weight = o_weight.T

        self.cache_k = np.zeros((args.max_batch_size, args.max_seq_len, self.n_local_kv_heads, self.head_dim))
        self.cache_v = np.zeros((args.max_batch_size, args.max_seq_len, self.n_local_kv_heads, self.head_dim))

    def __call__(self, x, start_pos: int, mask, freqs_cos, freqs_sin):
        B, L, _ = x.shape

        xq = x @ self.q_weight
        xk = x @ self.k_weight
        xv = x @ self.v_weight

        xq = xq.reshape(B, L, self.n_local_heads, self.head_dim)
        xk = xk.reshape(B, L, self.n_local_kv_heads, self.head_dim)
        xv = xv.reshape(B, L, self.n_local_kv_heads, self.head_dim)

        xq, xk = apply_rotary_emb(xq, xk, freqs_cos, freqs_sin)  # RoPE

        self.cache_k[:B, start_pos: start_pos + L] = xk  # KV cache
        self.cache_v[:B, start_pos: start_pos + L] = xv
        ks = self.cache_k[:B, : start_pos + L]
        vs = self.cache_v[:B, : start_pos + L]

        xk = repeat_kv(ks, self.n_rep)  # GQA
        xv = repeat_kv(vs, self.n_rep)

        xq = xq.transpose(0, 2, 1, 3)
        xk = xk.transpose(0, 2, 1, 3)
        xv = xv.transpose(0, 2, 1, 3)

        attention = xq @ xk.transpose(0, 1, 3, 2) / math.sqrt(self.head_dim)  # scaled dot-product attention
        if mask is not None:
            attention = attention + mask[None, None, :, :]
        attention = softmax(attention)
        output = attention @ xv

        output = output.transpose(0, 2, 1, 3).reshape(B, L, -1)
        output = output @ self.o_weight
        return output


def llama_silu(x):
    return silu(x)


def llama_rms_norm(x, weight):
    return RMSNorm(weight, eps=1e-5)(x)


def llama_feed_forward(x, up_weight, gate_weight, down_weight):
    return FeedForward(up_weight, gate_weight, down_weight)(x)


def llama_rotary_embedding(xq, xk, freqs_cos, freqs_sin):
    return apply_rotary_emb(xq, xk, freqs_cos, freqs_sin)


def llama_attention(x, q_weight, k_weight, v_weight, o_weight, mask, freqs_cos, freqs_sin):
    return Attention(q_weight, k_weight, v_weight, o_weight, ModelArgs())(x, 0, mask, freqs_cos, freqs_sin)


def llama_scaled_dot_product(xq, xk, xv, mask, o_weight):
    # the part of Attention.__call__ after the KV cache, with n_rep == 1
    B, L = xq.shape[0], xq.shape[1]
    head_dim = xq.shape[-1]
    xq = xq.transpose(0, 2, 1, 3)
    xk = xk.transpose(0, 2, 1, 3)
    xv = xv.transpose(0, 2, 1, 3)
    attention = xq @ xk.transpose(0, 1, 3, 2) / math.sqrt(head_dim)
    if mask is not None:
        attention = attention + mask[None, None, :, :]
    attention = softmax(attention)
    output = attention @ xv
    output = output.transpose(0, 2, 1, 3).reshape(B, L, -1)
    return output @ o_weight


def llama_causal_mask_softmax(scores, start_pos):
    # the mask of Llama.__call__ (built from the sequence length), applied as Attention.__call__ does
    L = scores.shape[-2]
    mask = np.full((L, L), float("-inf"))
    mask = np.triu(mask, k=1)
    mask = np.concatenate([np.zeros((L, start_pos)), mask], axis=1)
    return softmax(scores + mask[None, None, :, :])


def llama_rope_tables(positions, head_dim):
    # Llama.__init__'s RoPE tables, with the positions np.arange(args.max_seq_len) passed in
    base = 10000
    inv_freq = 1.0 / (base ** (np.arange(0, head_dim, 2)[: (head_dim // 2)] / head_dim))
    t = positions
    freqs = np.outer(t, inv_freq)
    return np.cos(freqs), np.sin(freqs)


def llama_repeat_kv(x):  # grouped-query attention's key/value heads, each repeated for 2 query heads
    return repeat_kv(x, 2)


def llama_greedy_token(logits):
    return logits[:, -1, :].argmax(-1, keepdims=True)  # from Llama.generate()


# ---------------------------------------------------------------------------------------------
# tensor2tensor (tensorflow/tensor2tensor, layers/common_attention.py get_timing_signal_1d): the
# Transformer's sinusoidal position signal, its TensorFlow ops written with their NumPy names


def timing_signal(positions, channels, min_timescale=1.0, max_timescale=1.0e4):
    num_timescales = channels // 2
    log_timescale_increment = (math.log(float(max_timescale) / float(min_timescale)) /
                               max(float(num_timescales) - 1, 1))
    inv_timescales = min_timescale * np.exp(np.arange(num_timescales).astype(np.float32) * -log_timescale_increment)
    scaled_time = np.expand_dims(positions, 1) * np.expand_dims(inv_timescales, 0)
    signal = np.concatenate([np.sin(scaled_time), np.cos(scaled_time)], axis=1)
    signal = np.pad(signal, [[0, 0], [0, np.mod(channels, 2)]])
    return signal


# ---------------------------------------------------------------------------------------------
# inputs: small model shapes (8 tokens, 16 features, 2-4 heads), float32 as the checkpoints are

N_SEQ, N_EMBD, N_VOCAB = 8, 16, 32


def _f(rng, dtype, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def _block_params(rng, dtype):
    e = N_EMBD
    return (_f(rng, dtype, e, 4 * e, scale=0.2), _f(rng, dtype, 4 * e, scale=0.1),
            _f(rng, dtype, 4 * e, e, scale=0.2), _f(rng, dtype, e, scale=0.1),
            _f(rng, dtype, e, 3 * e, scale=0.2), _f(rng, dtype, 3 * e, scale=0.1),
            _f(rng, dtype, e, e, scale=0.2), _f(rng, dtype, e, scale=0.1),
            1 + _f(rng, dtype, e, scale=0.1), _f(rng, dtype, e, scale=0.1),
            1 + _f(rng, dtype, e, scale=0.1), _f(rng, dtype, e, scale=0.1))


def _causal_mask(dtype):
    return ((1 - np.tri(N_SEQ)) * -1e10).astype(dtype)


def _rope(dtype, n=N_SEQ, head_dim=4):
    freqs = np.outer(np.arange(n), 1.0 / (10000 ** (np.arange(0, head_dim, 2) / head_dim)))
    return np.cos(freqs).astype(dtype), np.sin(freqs).astype(dtype)


def _llama_mask(dtype, n=N_SEQ):
    return np.triu(np.full((n, n), float("-inf")), k=1).astype(dtype)


F32 = ("float32",)
E = N_EMBD
PROGRAMS = [
    program(gpt2_gelu, lambda rng, dt: (_f(rng, dt, N_SEQ, 4 * E, scale=2),), F32),
    program(gpt2_embeddings, lambda rng, dt: (rng.integers(0, N_VOCAB, N_SEQ), _f(rng, dt, N_VOCAB, E),
                                              _f(rng, dt, 16, E, scale=0.1)), F32),
    program(gpt2_softmax, lambda rng, dt: (_f(rng, dt, N_SEQ, N_VOCAB, scale=3),), F32),
    program(gpt2_layer_norm, lambda rng, dt: (_f(rng, dt, N_SEQ, E, scale=2), 1 + _f(rng, dt, E, scale=0.1),
                                              _f(rng, dt, E, scale=0.1)), F32),
    program(gpt2_linear, lambda rng, dt: (_f(rng, dt, N_SEQ, E), _f(rng, dt, E, 3 * E, scale=0.2),
                                          _f(rng, dt, 3 * E, scale=0.1)), F32),
    program(gpt2_ffn, lambda rng, dt: (_f(rng, dt, N_SEQ, E),) + _block_params(rng, dt)[:4], F32),
    program(gpt2_attention, lambda rng, dt: (_f(rng, dt, N_SEQ, 8), _f(rng, dt, N_SEQ, 8), _f(rng, dt, N_SEQ, 8),
                                             _causal_mask(dt)), F32),
    program(gpt2_mha, lambda rng, dt: (_f(rng, dt, N_SEQ, E),) + _block_params(rng, dt)[4:8], F32,
            static={"n_head": 2}),
    program(gpt2_transformer_block, lambda rng, dt: (_f(rng, dt, N_SEQ, E),) + _block_params(rng, dt), F32,
            static={"n_head": 2}),
    program(gpt2_forward, lambda rng, dt: (rng.integers(0, N_VOCAB, N_SEQ), _f(rng, dt, N_VOCAB, E, scale=0.5),
                                           _f(rng, dt, 16, E, scale=0.1)) + _block_params(rng, dt)
            + (1 + _f(rng, dt, E, scale=0.1), _f(rng, dt, E, scale=0.1)), F32, static={"n_head": 2}),
    program(gpt2_greedy_token, lambda rng, dt: (_f(rng, dt, N_SEQ, N_VOCAB),), F32),
    program(llama_silu, lambda rng, dt: (_f(rng, dt, 1, N_SEQ, 40, scale=3),), F32),
    program(llama_rms_norm, lambda rng, dt: (_f(rng, dt, 1, N_SEQ, E), 1 + _f(rng, dt, E, scale=0.1)), F32),
    program(llama_feed_forward, lambda rng, dt: (_f(rng, dt, 1, N_SEQ, E), _f(rng, dt, 40, E, scale=0.2),
                                                 _f(rng, dt, 40, E, scale=0.2), _f(rng, dt, E, 40, scale=0.2)),
            F32),
    program(llama_rotary_embedding, lambda rng, dt: (_f(rng, dt, 1, N_SEQ, 4, 4), _f(rng, dt, 1, N_SEQ, 2, 4))
            + _rope(dt), F32),
    program(llama_attention, lambda rng, dt: (_f(rng, dt, 1, N_SEQ, E), _f(rng, dt, E, E, scale=0.3),
                                              _f(rng, dt, 8, E, scale=0.3), _f(rng, dt, 8, E, scale=0.3),
                                              _f(rng, dt, E, E, scale=0.3), _llama_mask(dt)) + _rope(dt),
            F32),
    program(llama_scaled_dot_product, lambda rng, dt: (_f(rng, dt, 1, N_SEQ, 4, 4), _f(rng, dt, 1, N_SEQ, 4, 4),
                                                       _f(rng, dt, 1, N_SEQ, 4, 4), _llama_mask(dt),
                                                       _f(rng, dt, E, E, scale=0.3)), F32),
    program(llama_causal_mask_softmax, lambda rng, dt: (_f(rng, dt, 1, 4, N_SEQ, N_SEQ, scale=2),), F32,
            static={"start_pos": 0}),
    program(llama_rope_tables, lambda rng, dt: (np.arange(N_SEQ),), ("int64",), static={"head_dim": 8}),
    program(llama_repeat_kv, lambda rng, dt: (_f(rng, dt, 1, N_SEQ, 2, 4),), F32),
    program(timing_signal, lambda rng, dt: (np.arange(N_SEQ, dtype=dt),), F32, static={"channels": 15}),
    program(llama_greedy_token, lambda rng, dt: (_f(rng, dt, 1, N_SEQ, N_VOCAB),), F32),
]
