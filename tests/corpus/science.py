"""Everyday scientific NumPy: distances, image filters written with slices, statistics, small
models, time-stepped simulations (n-body, cavity flow). Each says where it comes from: a library function's
NumPy body (scipy.stats, scikit-learn), a course or a blog; where a program is the common idiom rather than one
project's code, it says so."""
from __future__ import annotations

import numpy as np

from . import program


def pairwise_numpy(X):  # Jake VanderPlas, "Numba vs. Cython: Take 2" (pythonic perambulations)
    return np.sqrt(((X[:, None, :] - X) ** 2).sum(-1))


def cosine_similarity(X, Y):  # scikit-learn's cosine_similarity: normalise the rows, then X @ Y.T
    X_normalized = X / np.linalg.norm(X, axis=1, keepdims=True)
    Y_normalized = Y / np.linalg.norm(Y, axis=1, keepdims=True)
    return X_normalized @ Y_normalized.T


def rbf_kernel(X, Y, gamma):  # scikit-learn's rbf_kernel: exp(-gamma ||x - y||^2) via the dot-product trick
    XX = np.einsum("ij,ij->i", X, X)[:, np.newaxis]
    YY = np.einsum("ij,ij->i", Y, Y)[np.newaxis, :]
    distances = -2 * X @ Y.T + XX + YY
    np.maximum(distances, 0, out=distances)
    return np.exp(-gamma * distances)


def box_blur(img):  # 3x3 mean filter with shifted slices (the common idiom)
    return (img[:-2, :-2] + img[:-2, 1:-1] + img[:-2, 2:] +
            img[1:-1, :-2] + img[1:-1, 1:-1] + img[1:-1, 2:] +
            img[2:, :-2] + img[2:, 1:-1] + img[2:, 2:]) / 9.0


def sobel(img):  # Sobel gradient magnitude with shifted slices (the common idiom)
    gx = (img[:-2, 2:] + 2 * img[1:-1, 2:] + img[2:, 2:]) - (img[:-2, :-2] + 2 * img[1:-1, :-2] + img[2:, :-2])
    gy = (img[2:, :-2] + 2 * img[2:, 1:-1] + img[2:, 2:]) - (img[:-2, :-2] + 2 * img[:-2, 1:-1] + img[:-2, 2:])
    return np.hypot(gx, gy)


def filter2d_same(image, kernel):  # 'same'-size 2-D filtering: zero padding with np.pad, then shifted slices
    kh, kw = kernel.shape  # (the common idiom of image-processing courses)
    padded = np.pad(image, ((kh // 2, kh // 2), (kw // 2, kw // 2)), mode="constant")
    out = np.zeros_like(image)
    for i in range(kh):
        for j in range(kw):
            out += kernel[i, j] * padded[i:i + image.shape[0], j:j + image.shape[1]]
    return out


def heat_step(u, alpha, dt, dx):  # explicit heat-equation step on a periodic grid: the np.roll Laplacian
    lap = (np.roll(u, 1, axis=0) + np.roll(u, -1, axis=0) +  # (the common idiom of PDE tutorials)
           np.roll(u, 1, axis=1) + np.roll(u, -1, axis=1) - 4 * u) / dx**2
    return u + alpha * dt * lap


def total_variation(img):  # anisotropic total variation, forward differences with the edge repeated
    dx = np.diff(img, axis=1, append=img[:, -1:])  # (as total-variation denoising tutorials write it)
    dy = np.diff(img, axis=0, append=img[-1:, :])
    return np.sum(np.abs(dx)) + np.sum(np.abs(dy))


def slope_and_arc_length(x, y):  # forward-difference derivative and a sampled curve's length with np.diff
    dydx = np.diff(y) / np.diff(x)
    return dydx, np.sum(np.sqrt(np.diff(x) ** 2 + np.diff(y) ** 2))


def rgb2gray(rgb):  # the matplotlib/Stack Overflow "rgb2gray": ITU-R 601 luma weights
    return np.dot(rgb[..., :3], [0.2989, 0.5870, 0.1140])


def to_uint8(img):  # float image in [0, 1] to 8-bit, as image libraries save it
    return np.clip(img * 255, 0, 255).astype(np.uint8)


def zscore(a, axis=0, ddof=0):  # scipy.stats.zscore (its NumPy body)
    mn = a.mean(axis=axis, keepdims=True)
    std = a.std(axis=axis, ddof=ddof, keepdims=True)
    return (a - mn) / std


def covariance(X):  # np.cov(X, rowvar=False) written out, as statistics courses do
    Xc = X - X.mean(axis=0)
    return Xc.T @ Xc / (X.shape[0] - 1), np.cov(X, rowvar=False)


def pearson(x, y):  # Pearson correlation written out, next to np.corrcoef
    xm, ym = x - x.mean(), y - y.mean()
    r = (xm * ym).sum() / np.sqrt((xm ** 2).sum() * (ym ** 2).sum())
    return r, np.corrcoef(x, y)[0, 1]


def moments(a, axis=0):  # scipy.stats.skew and kurtosis (bias=True): central moments over the mean
    mean = a.mean(axis, keepdims=True)
    m2 = ((a - mean) ** 2).mean(axis)
    m3 = ((a - mean) ** 3).mean(axis)
    m4 = ((a - mean) ** 4).mean(axis)
    return m3 / m2 ** 1.5, m4 / m2 ** 2 - 3


def min_max_scale(X):  # scikit-learn's MinMaxScaler(feature_range=(0, 1)).fit_transform
    data_min, data_max = X.min(axis=0), X.max(axis=0)
    return (X - data_min) / (data_max - data_min)


def regression_metrics(y_true, y_pred):  # scikit-learn's r2_score, mean_squared_error, mean_absolute_error
    r2 = 1 - ((y_true - y_pred) ** 2).sum() / ((y_true - y_true.mean()) ** 2).sum()
    rmse = np.sqrt(np.mean((y_true - y_pred) ** 2))
    mae = np.mean(np.abs(y_true - y_pred))
    return r2, rmse, mae


def logistic_regression_step(X, y, w, lr):  # batch gradient descent on the log loss (the textbook version)
    p = 1 / (1 + np.exp(-(X @ w)))
    loss = -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))
    grad = X.T @ (p - y) / len(y)
    return w - lr * grad, loss


def two_layer_net(X, W1, b1, W2, b2):  # CS231n "Putting it together: minimal neural network case study"
    hidden_layer = np.maximum(0, np.dot(X, W1) + b1)  # ReLU activation
    scores = np.dot(hidden_layer, W2) + b2
    exp_scores = np.exp(scores)
    probs = exp_scores / np.sum(exp_scores, axis=1, keepdims=True)
    return probs


def softmax_loss(X, y, W1, b1, W2, b2, reg):  # CS231n's case study: the loss of the two-layer net
    num_examples = X.shape[0]
    hidden_layer = np.maximum(0, np.dot(X, W1) + b1)
    scores = np.dot(hidden_layer, W2) + b2
    exp_scores = np.exp(scores)
    probs = exp_scores / np.sum(exp_scores, axis=1, keepdims=True)
    # compute the loss: average cross-entropy loss and regularization
    correct_logprobs = -np.log(probs[range(num_examples), y])
    data_loss = np.sum(correct_logprobs) / num_examples
    reg_loss = 0.5 * reg * np.sum(W1 * W1) + 0.5 * reg * np.sum(W2 * W2)
    return data_loss + reg_loss


def one_hot(labels, num_classes):  # the Stack Overflow "convert array of indices to one-hot" answer
    return np.eye(num_classes)[labels]


def adjust_gamma(image, gamma):  # PyImageSearch's adjust_gamma, with NumPy's table[image] for cv2.LUT
    invGamma = 1.0 / gamma
    table = ((np.arange(0, 256) / 255.0) ** invGamma * 255).astype("uint8")
    return table[image]


def sharpen_to_uint8(img, amount):  # unsharp masking as image tutorials write it, saved as 8 bits unclipped
    blurred = (img[:-2, 1:-1] + img[2:, 1:-1] + img[1:-1, :-2] + img[1:-1, 2:] + img[1:-1, 1:-1]) / 5
    sharp = img[1:-1, 1:-1] + amount * (img[1:-1, 1:-1] - blurred)
    return (sharp * 255).astype(np.uint8)   # overshoot past [0, 1] wraps around, as NumPy's cast does


def color_quantize(pixels, centers):  # PDSH ch. 5 colour compression: new_colors = centers[predict(data)]
    labels = np.argmin(((pixels[:, None, :] - centers[None, :, :]) ** 2).sum(-1), axis=1)
    return centers[labels]


def kmeans_assign(X, centers):  # the assignment step of k-means (Python Data Science Handbook, ch. 5)
    distances = ((X[:, None, :] - centers[None, :, :]) ** 2).sum(-1)
    labels = np.argmin(distances, axis=1)
    return labels, distances.min(axis=1).sum()


def trapezoid(y, x):  # the trapezoidal rule written out, next to np.trapezoid
    return ((y[1:] + y[:-1]) * np.diff(x)).sum() / 2, np.trapezoid(y, x)


def moving_average(a, n=3):  # the Stack Overflow "moving average with cumsum" answer
    ret = np.cumsum(a, dtype=float)
    ret[n:] = ret[n:] - ret[:-n]
    return ret[n - 1:] / n


def horner(coeffs, x):  # polynomial evaluation by Horner's rule, one coefficient at a time
    result = np.zeros_like(x)
    for c in coeffs:
        result = result * x + c
    return result


def nbody_acc(pos, mass, G, softening):  # Philip Mocz, nbody-python (nbody.py getAcc)
    # positions r = [x,y,z] for all particles
    x = pos[:, 0:1]
    y = pos[:, 1:2]
    z = pos[:, 2:3]

    # matrix that stores all pairwise particle separations: r_j - r_i
    dx = x.T - x
    dy = y.T - y
    dz = z.T - z

    # matrix that stores 1/r^3 for all particle pairwise particle separations
    inv_r3 = (dx**2 + dy**2 + dz**2 + softening**2)
    inv_r3[inv_r3 > 0] = inv_r3[inv_r3 > 0]**(-1.5)

    ax = G * (dx * inv_r3) @ mass
    ay = G * (dy * inv_r3) @ mass
    az = G * (dz * inv_r3) @ mass

    # pack together the acceleration components
    a = np.hstack((ax, ay, az))
    return a


def nbody_energy(pos, vel, mass, G):  # Philip Mocz, nbody-python (nbody.py getEnergy)
    # Kinetic Energy:
    KE = 0.5 * np.sum(np.sum(mass * vel**2))

    # Potential Energy:

    # positions r = [x,y,z] for all particles
    x = pos[:, 0:1]
    y = pos[:, 1:2]
    z = pos[:, 2:3]

    # matrix that stores all pairwise particle separations: r_j - r_i
    dx = x.T - x
    dy = y.T - y
    dz = z.T - z

    # matrix that stores 1/r for all particle pairwise particle separations
    inv_r = np.sqrt(dx**2 + dy**2 + dz**2)
    inv_r[inv_r > 0] = 1.0 / inv_r[inv_r > 0]

    # sum over upper triangle, to count each interaction only once
    PE = G * np.sum(np.sum(np.triu(-(mass * mass.T) * inv_r, 1)))

    return KE, PE


def nbody(mass, pos, vel, Nt, dt, G, softening):  # Philip Mocz, nbody-python (nbody.py main, less its plots)
    # Convert to Center-of-Mass frame
    vel -= np.mean(mass * vel, 0) / np.mean(mass)

    # calculate initial gravitational accelerations
    acc = nbody_acc(pos, mass, G, softening)

    # calculate initial energy of system
    KE, PE = nbody_energy(pos, vel, mass, G)

    # save energies, particle orbits for plotting trails
    pos_save = np.zeros((pos.shape[0], 3, Nt + 1))
    pos_save[:, :, 0] = pos
    KE_save = np.zeros(Nt + 1)
    KE_save[0] = KE
    PE_save = np.zeros(Nt + 1)
    PE_save[0] = PE

    t = 0
    # Simulation Main Loop
    for i in range(Nt):
        # (1/2) kick
        vel += acc * dt / 2.0

        # drift
        pos += vel * dt

        # update accelerations
        acc = nbody_acc(pos, mass, G, softening)

        # (1/2) kick
        vel += acc * dt / 2.0

        # update time
        t += dt

        # get energy of system
        KE, PE = nbody_energy(pos, vel, mass, G)

        # save energies, positions for plotting trail
        pos_save[:, :, i + 1] = pos
        KE_save[i + 1] = KE
        PE_save[i + 1] = PE
    return pos_save, KE_save, PE_save


# Lorena Barba's CFD Python, step 11 (cavity flow with Navier-Stokes), the notebook's functions as written; its
# globals nx, ny and nit are arguments, as npbench's cavity_flow has them.

def build_up_b(b, rho, dt, u, v, dx, dy):
    b[1:-1, 1:-1] = (rho * (1 / dt *
                    ((u[1:-1, 2:] - u[1:-1, 0:-2]) /
                     (2 * dx) + (v[2:, 1:-1] - v[0:-2, 1:-1]) / (2 * dy)) -
                    ((u[1:-1, 2:] - u[1:-1, 0:-2]) / (2 * dx))**2 -
                      2 * ((u[2:, 1:-1] - u[0:-2, 1:-1]) / (2 * dy) *
                           (v[1:-1, 2:] - v[1:-1, 0:-2]) / (2 * dx)) -
                          ((v[2:, 1:-1] - v[0:-2, 1:-1]) / (2 * dy))**2))

    return b


def pressure_poisson(nx, ny, nit, p, dx, dy, b):
    pn = np.empty_like(p)
    pn = p.copy()

    for q in range(nit):
        pn = p.copy()
        p[1:-1, 1:-1] = (((pn[1:-1, 2:] + pn[1:-1, 0:-2]) * dy**2 +
                          (pn[2:, 1:-1] + pn[0:-2, 1:-1]) * dx**2) /
                          (2 * (dx**2 + dy**2)) -
                          dx**2 * dy**2 / (2 * (dx**2 + dy**2)) *
                          b[1:-1, 1:-1])

        p[:, -1] = p[:, -2]  # dp/dx = 0 at x = 2
        p[0, :] = p[1, :]    # dp/dy = 0 at y = 0
        p[:, 0] = p[:, 1]    # dp/dx = 0 at x = 0
        p[-1, :] = 0         # p = 0 at y = 2

    return p


def cavity_flow(nx, ny, nt, nit, u, v, dt, dx, dy, p, rho, nu):
    un = np.empty_like(u)
    vn = np.empty_like(v)
    b = np.zeros((ny, nx))

    for n in range(nt):
        un = u.copy()
        vn = v.copy()

        b = build_up_b(b, rho, dt, u, v, dx, dy)
        p = pressure_poisson(nx, ny, nit, p, dx, dy, b)

        u[1:-1, 1:-1] = (un[1:-1, 1:-1] -
                         un[1:-1, 1:-1] * dt / dx *
                        (un[1:-1, 1:-1] - un[1:-1, 0:-2]) -
                         vn[1:-1, 1:-1] * dt / dy *
                        (un[1:-1, 1:-1] - un[0:-2, 1:-1]) -
                         dt / (2 * rho * dx) * (p[1:-1, 2:] - p[1:-1, 0:-2]) +
                         nu * (dt / dx**2 *
                        (un[1:-1, 2:] - 2 * un[1:-1, 1:-1] + un[1:-1, 0:-2]) +
                         dt / dy**2 *
                        (un[2:, 1:-1] - 2 * un[1:-1, 1:-1] + un[0:-2, 1:-1])))

        v[1:-1, 1:-1] = (vn[1:-1, 1:-1] -
                        un[1:-1, 1:-1] * dt / dx *
                       (vn[1:-1, 1:-1] - vn[1:-1, 0:-2]) -
                        vn[1:-1, 1:-1] * dt / dy *
                       (vn[1:-1, 1:-1] - vn[0:-2, 1:-1]) -
                        dt / (2 * rho * dy) * (p[2:, 1:-1] - p[0:-2, 1:-1]) +
                        nu * (dt / dx**2 *
                       (vn[1:-1, 2:] - 2 * vn[1:-1, 1:-1] + vn[1:-1, 0:-2]) +
                        dt / dy**2 *
                       (vn[2:, 1:-1] - 2 * vn[1:-1, 1:-1] + vn[0:-2, 1:-1])))

        u[0, :] = 0
        u[:, 0] = 0
        u[:, -1] = 0
        u[-1, :] = 1    # set velocity on cavity lid equal to 1
        v[0, :] = 0
        v[-1, :] = 0
        v[:, 0] = 0
        v[:, -1] = 0

    return u, v, p


def einsum_attention(q, k, v):  # multi-head scaled dot-product attention written with einsum (the common idiom)
    scores = np.einsum("bhqd,bhkd->bhqk", q, k) * q.shape[-1] ** -0.5
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    return np.einsum("bhqk,bhkd->bhqd", weights, v)


def gram_matrix(features):  # the style-transfer Gram matrix (Gatys et al.) of each image of a batch
    b, c, h, w = features.shape
    F = features.reshape(b, c, h * w)
    return np.einsum("bij,bkj->bik", F, F) / (c * h * w)


def mahalanobis(X, mu, VI):  # Mahalanobis distance of every row to mu, the vectorised einsum answer (Stack Overflow)
    delta = X - mu
    return np.sqrt(np.einsum("nj,jk,nk->n", delta, VI, delta))


def bilinear_scores(X, W, Y):  # bilinear similarity x_b^T W y_b for a batch of pairs (bilinear attention, RESCAL)
    return np.einsum("bi,ij,bj->b", X, W, Y)


def linear_cka(features_x, features_y):  # google-research representation_similarity: feature_space_linear_cka
    features_x = features_x - np.mean(features_x, 0, keepdims=True)
    features_y = features_y - np.mean(features_y, 0, keepdims=True)

    dot_product_similarity = np.linalg.norm(features_x.T.dot(features_y)) ** 2
    normalization_x = np.linalg.norm(features_x.T.dot(features_x))
    normalization_y = np.linalg.norm(features_y.T.dot(features_y))

    return dot_product_similarity / (normalization_x * normalization_y)


def hsic(K, L):  # the biased HSIC estimate trace(KHLH) / (n-1)^2 (Gretton et al.), the trace of a product by einsum
    n = K.shape[0]
    H = np.eye(n) - np.ones((n, n)) / n
    return np.einsum("ij,ji->", K @ H, L @ H) / (n - 1) ** 2


def rgb_to_yiq(img):  # colour space conversion: one 3x3 matrix applied to every pixel with tensordot (the common idiom)
    yiq_from_rgb = np.array([[0.299, 0.587, 0.114],
                             [0.59590059, -0.27455667, -0.32134392],
                             [0.21153661, -0.52273617, 0.31119955]])
    return np.tensordot(img, yiq_from_rgb, axes=([-1], [1]))

def image_histogram(img):  # OpenCV-Python tutorial "Histograms - 1": the grey-level histogram with NumPy
    hist, bins = np.histogram(img.ravel(), 256, [0, 256])
    return hist, bins


def word_embedding_backward(dout, x, W):  # CS231n assignment 3 (RNN captioning): the embedding's gradient
    dW = np.zeros_like(W)
    np.add.at(dW, x, dout)
    return dW


def coo_matvec(row, col, data, x):  # y = A @ x, A sparse in COO triplets (scipy.sparse's coo_matvec in NumPy)
    y = np.zeros(x.shape[0], dtype=data.dtype)
    np.add.at(y, row, data * x[col])
    return y


def heat_diffusion(u, alpha, steps):  # explicit 2-D heat equation, the grid's interior updated in place (the common idiom)
    for _ in range(steps):
        u[1:-1, 1:-1] += alpha * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2] - 4 * u[1:-1, 1:-1])
    return u


def gray_scott_step(U, V, Du, Dv, F, k, dt):  # one Euler step of Gray-Scott, as N. Rougier's "From Python to NumPy"
    u, v = U[1:-1, 1:-1], V[1:-1, 1:-1]
    Lu = (U[0:-2, 1:-1] + U[1:-1, 0:-2] - 4 * U[1:-1, 1:-1] + U[1:-1, 2:] + U[2:, 1:-1])
    Lv = (V[0:-2, 1:-1] + V[1:-1, 0:-2] - 4 * V[1:-1, 1:-1] + V[1:-1, 2:] + V[2:, 1:-1])
    uvv = u * v * v
    u += dt * (Du * Lu - uvv + F * (1 - u))
    v += dt * (Dv * Lv + uvv - (F + k) * v)
    return U, V


def dirichlet_boundary(u, top, bottom):  # fixed boundary values set in place before a solver step (the common idiom)
    u[0, :] = top
    u[-1, :] = bottom
    u[:, 0] = 0.0
    u[:, -1] = 0.0
    return u


def relu(x):  # ReLU with a boolean mask, in place (the common idiom)
    x[x < 0] = 0
    return x


def relu_backward(dout, x):  # CS231n assignment 2, layers.py relu_backward
    dx = dout.copy()
    dx[x <= 0] = 0
    return dx


def softmax_inplace(X):  # scikit-learn's utils.extmath.softmax (copy=True): in place on a copy
    X = np.copy(X)
    max_prob = np.max(X, axis=1).reshape((-1, 1))
    X -= max_prob
    np.exp(X, X)
    sum_prob = np.sum(X, axis=1).reshape((-1, 1))
    X /= sum_prob
    return X



def temperature_gradient(T, dx):  # heat flux from a temperature field, with np.gradient's central differences
    dTdy, dTdx = np.gradient(T, dx)
    k = 0.6
    return -k * dTdx, -k * dTdy


def resample(t, y, t_new):  # a signal resampled at new times by linear interpolation
    return np.interp(t_new, t, y)


def smooth_and_detrend(y, t):  # a running mean by convolution, a quadratic trend by np.polyval
    kernel = np.ones(5) / 5
    smooth = np.convolve(y, kernel, mode="same")
    trend = np.polyval([0.1, -0.2, 0.05], t)
    return smooth - trend


def triangle_normals(v0, v1, v2):  # unit normals of triangles, np.cross of two edges
    n = np.cross(v1 - v0, v2 - v0)
    return n / np.linalg.norm(n, axis=1, keepdims=True)

def _n(*shape, scale=1.0, low=None):
    def make(rng, dt):
        if low is not None:
            return tuple(rng.uniform(low, low + scale, s).astype(dt) for s in shape)
        return tuple((rng.standard_normal(s) * scale).astype(dt) for s in shape)
    return make



def _spd(rng, n, dt):
    """A symmetric positive definite matrix (an inverse covariance)."""
    m = rng.standard_normal((n, n))
    return (m @ m.T + n * np.eye(n)).astype(dt)

BOTH = ("float64", "float32")
F64 = ("float64",)
PROGRAMS = [
    program(pairwise_numpy, _n((30, 3)), BOTH),
    program(cosine_similarity, _n((10, 8), (12, 8)), BOTH),
    program(rbf_kernel, lambda rng, dt: _n((10, 4), (12, 4))(rng, dt) + (0.5,), BOTH),
    program(box_blur, _n((24, 20)), BOTH),
    program(sobel, _n((24, 20)), BOTH),
    program(filter2d_same, lambda rng, dt: _n((24, 20), scale=1, low=0)(rng, dt)
            + (np.array([[1, 2, 1], [2, 4, 2], [1, 2, 1]], dt) / 16,), BOTH),
    program(heat_step, lambda rng, dt: _n((24, 20), scale=1, low=0)(rng, dt) + (0.1, 0.1, 1.0), BOTH),
    program(total_variation, _n((24, 20), scale=1, low=0), BOTH),
    program(slope_and_arc_length, lambda rng, dt: (np.sort(rng.uniform(0, 3, 50)).astype(dt),
                                                   rng.standard_normal(50).astype(dt)), BOTH),
    program(rgb2gray, _n((12, 10, 3), scale=1, low=0), BOTH),
    program(to_uint8, _n((12, 10, 3), scale=1.2, low=-0.1), BOTH),
    program(zscore, _n((50, 6), scale=3), BOTH, static={"axis": 0, "ddof": 0}),
    program(covariance, _n((50, 4)), BOTH),
    program(pearson, _n(100, 100), BOTH),
    program(moments, _n((200, 3)), BOTH, static={"axis": 0}),
    program(min_max_scale, _n((40, 5)), BOTH),
    program(regression_metrics, _n(200, 200), BOTH),
    program(logistic_regression_step, lambda rng, dt: (rng.standard_normal((64, 5)).astype(dt),
                                                       rng.integers(0, 2, 64).astype(dt),
                                                       (rng.standard_normal(5) * 0.1).astype(dt), 0.1), BOTH),
    program(two_layer_net, lambda rng, dt: _n((16, 2), (2, 10), 10, (10, 3), 3, scale=0.5)(rng, dt), BOTH),
    program(kmeans_assign, _n((60, 2), (4, 2), scale=2), BOTH),
    program(softmax_loss, lambda rng, dt: (_n((16, 2))(rng, dt)[0], rng.integers(0, 3, 16).astype(np.int32))
            + _n((2, 10), 10, (10, 3), 3, scale=0.5)(rng, dt) + (1e-3,), BOTH),
    program(one_hot, lambda rng, dt: (rng.integers(0, 10, 20),), ("int64",), static={"num_classes": 10}),
    program(sharpen_to_uint8, lambda rng, dt: _n((24, 20), scale=1, low=0)(rng, dt) + (1.5,), BOTH),
    program(adjust_gamma, lambda rng, dt: (rng.integers(0, 256, (12, 10, 3)).astype(np.uint8), 2.2), ("uint8",)),
    program(color_quantize, lambda rng, dt: (rng.uniform(0, 1, (64, 3)).astype(dt),
                                             rng.uniform(0, 1, (8, 3)).astype(dt)), BOTH),
    program(trapezoid, lambda rng, dt: (np.sin(np.linspace(0, 3, 101)).astype(dt), np.linspace(0, 3, 101).astype(dt)),
            BOTH),
    program(moving_average, _n(50), BOTH, static={"n": 3}),
    program(horner, lambda rng, dt: (np.array([1.5, -2.0, 0.5, 3.0], dt), rng.uniform(-2, 2, 100).astype(dt)), BOTH),
    program(einsum_attention, _n((2, 4, 8, 16), (2, 4, 8, 16), (2, 4, 8, 16)), BOTH),
    program(gram_matrix, _n((2, 3, 4, 5)), BOTH),
    program(mahalanobis, lambda rng, dt: _n((20, 3), 3)(rng, dt) + (_spd(rng, 3, dt),), BOTH),
    program(bilinear_scores, _n((8, 5), (5, 6), (8, 6)), BOTH),
    program(linear_cka, _n((20, 4), (20, 3)), BOTH),
    program(hsic, lambda rng, dt: tuple(x @ x.T for x in _n((10, 3), (10, 4))(rng, dt)), BOTH),
    program(rgb_to_yiq, _n((12, 10, 3), scale=1, low=0), BOTH),
    program(nbody_acc, lambda rng, dt: (rng.standard_normal((20, 3)).astype(dt),
                                        np.full((20, 1), 20.0 / 20, dt), 1.0, 0.1), BOTH),
    program(nbody, lambda rng, dt: (np.full((12, 1), 20.0 / 12, dt), rng.standard_normal((12, 3)).astype(dt),
                                    rng.standard_normal((12, 3)).astype(dt), 6, 0.01, 1.0, 0.1), F64),
    program(cavity_flow, lambda rng, dt: (9, 9, 5, 6, np.zeros((9, 9), dt), np.zeros((9, 9), dt), 0.001, 0.25, 0.25,
                                          np.zeros((9, 9), dt), 1.0, 0.1), F64),
    program(image_histogram, lambda rng, dt: (rng.integers(0, 256, (32, 24)).astype(np.uint8),), ("uint8",)),
    program(word_embedding_backward, lambda rng, dt: (rng.standard_normal((4, 6, 8)).astype(dt),
                                                      rng.integers(0, 10, (4, 6)), rng.standard_normal((10, 8)).astype(dt)),
            BOTH),
    program(coo_matvec, lambda rng, dt: (rng.integers(0, 4000, 100_000).astype(np.int32),   # 10^5 nonzeros:
                                         rng.integers(0, 4000, 100_000).astype(np.int32),   # the atomic scatter
                                         rng.standard_normal(100_000).astype(dt), rng.standard_normal(4000).astype(dt)),
            BOTH, reordered_atol={"float32": 1e-4, "float64": 1e-12}),   # ~25 products of ~0.6 a row
    program(heat_diffusion, lambda rng, dt: _n((24, 20), low=0)(rng, dt) + (0.1,), BOTH, static={"steps": 4}),
    program(gray_scott_step, lambda rng, dt: (np.ones((18, 18), dt), (rng.random((18, 18)) * 0.25).astype(dt),
                                              0.16, 0.08, 0.035, 0.065, 1.0), BOTH),
    program(dirichlet_boundary, lambda rng, dt: _n((12, 9))(rng, dt) + (1.0, -0.5), BOTH),
    program(relu, _n((30, 7)), BOTH),
    program(relu_backward, _n((30, 7), (30, 7)), BOTH),
    program(softmax_inplace, _n((16, 10), scale=3), BOTH),
    program(temperature_gradient, lambda rng, dt: _n((9, 11), low=0)(rng, dt) + (0.25,), BOTH),
    program(resample, lambda rng, dt: (np.linspace(0, 2, 30).astype(dt), rng.random(30).astype(dt),
                                       rng.uniform(-0.1, 2.1, 45).astype(dt)), BOTH),
    program(smooth_and_detrend, lambda rng, dt: (rng.random(40).astype(dt), np.linspace(0, 1, 40).astype(dt)), BOTH),
    program(triangle_normals, _n((12, 3), (12, 3), (12, 3)), BOTH),
]
