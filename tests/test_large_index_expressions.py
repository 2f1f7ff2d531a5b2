"""Index expressions of moved arrays at sizes where a careless rewrite overflows the GPU kernels' 32-bit
indices: a flip of a concatenation read x[(i * 65535) % 65536] (i * 65535 passes 2**31 at i = 32,769), so a
flip of 65,537 elements read garbage on every SIMT device, and rfft of 2**18 values was wrong there
(ir/symbolic.py's remainders now keep the least magnitude). Every result is compared with NumPy exactly."""
import numpy as np

import tracejit as tj

N = 1 << 16


def movements(x):
    doubled = np.concatenate([x, x[:1]])
    return (np.flip(doubled), doubled[::-1] * 2, np.flip(np.concatenate([x, x[:3]])), np.roll(doubled, -5),
            np.concatenate([x[::-1], x])[::-3], np.pad(x, (2, 3), mode="wrap")[::-1],
            np.flip(x.reshape(256, 256), axis=1).reshape(-1)[::-7])


def test_moved_arrays_past_two_to_the_sixteen_match_numpy_exactly(device):
    x = np.random.default_rng(0).standard_normal(N).astype(np.float32)
    for got, expected in zip(tj.kernel(movements)(x, device=device), movements(x)):
        np.testing.assert_array_equal(np.asarray(got), expected)


def test_a_long_flip_of_a_roll_matches_numpy_exactly(device):
    x = np.random.default_rng(1).standard_normal(3 * N - 7).astype(np.float32)

    def body(x):
        return np.flip(np.concatenate([x, x[:1]])), np.roll(x[::-1], 7)

    for got, expected in zip(tj.kernel(body)(x, device=device), body(x)):
        np.testing.assert_array_equal(np.asarray(got), expected)
