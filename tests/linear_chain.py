"""Closed forms of the DIME chain (diffrl.policies.dis_chain) under a control LINEAR in x, shared by its
oracle tests (test_dis_chain, test_dis_samplers, test_dis_action_kl).

With f_n(x) = A_n x + b_n every transition of the chain (E4) is affine-Gaussian, so the marginals of
x_n, the exact trajectory KL (E8), the exact E[ell] (E7) and the entropy of x_N are closed forms
(numpy, float64, below).
"""
import math

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_platforms", "cpu")

D, N, SIGMA0 = 2, 4, 1.5
PATHS = 20_000


def make_linear(seed: int, scale: float = 0.4):
    rng = np.random.default_rng(seed)
    return scale * rng.normal(size=(N, D, D)), rng.normal(size=(N, D))


def linear_control(A, b):
    A, b = jnp.asarray(A, jnp.float32), jnp.asarray(b, jnp.float32)
    return lambda x, n: jnp.einsum("ij,...j->...i", A[n], x) + b[n]


def step_matrices(A, b, eta, sigma0=SIGMA0):
    """x_{n+1} = M_n x_n + c_n + N(0, diag(2 eta_n)) for the linear control (float64); eta: (N, D)."""
    eye = np.eye(eta.shape[1])[None]
    M = eye + eta[:, :, None] * (A - eye / sigma0**2)
    return M, eta * b


def marginals(A, b, eta, sigma0=SIGMA0):
    """Lists of exact means / covariances of x_0..x_N."""
    M, c = step_matrices(A, b, eta, sigma0)
    d = eta.shape[1]
    means, covs = [np.zeros(d)], [sigma0**2 * np.eye(d)]
    for n in range(len(eta)):
        means.append(M[n] @ means[-1] + c[n])
        covs.append(M[n] @ covs[-1] @ M[n].T + np.diag(2 * eta[n]))
    return means, covs


def gaussian_kl_full(m1, C1, m2, C2):
    C2inv = np.linalg.inv(C2)
    dm = m2 - m1
    return 0.5 * (np.trace(C2inv @ C1) + dm @ C2inv @ dm - len(m1)
                  + np.linalg.slogdet(C2)[1] - np.linalg.slogdet(C1)[1])


def exact_trajectory_kl(old, new, eta_old, eta_new):
    means, covs = marginals(*old, eta_old)
    M_o, c_o = step_matrices(*old, eta_old)
    M_n, c_n = step_matrices(*new, eta_new)
    total = 0.0
    for n in range(len(eta_old)):
        v_o, v_n = 2 * eta_old[n], 2 * eta_new[n]
        Dm, e = M_o[n] - M_n[n], c_o[n] - c_n[n]
        mean_diff = Dm @ means[n] + e
        quad = np.trace(np.diag(1 / v_n) @ Dm @ covs[n] @ Dm.T) + mean_diff @ (mean_diff / v_n)
        total += 0.5 * np.sum(np.log(v_n / v_o) + v_o / v_n - 1) + 0.5 * quad
    return total


def exact_expected_ell(A, b, eta, sigma0=SIGMA0):
    """E[ell] without squashing: E log p0(x0) + sum_n E[log F_n - log B_n]."""
    means, covs = marginals(A, b, eta, sigma0)
    M, _ = step_matrices(A, b, eta, sigma0)
    total = -0.5 * eta.shape[1] * (1 + math.log(2 * math.pi * sigma0**2))
    for n in range(len(eta)):
        var = 2 * eta[n]
        total += -0.5 * np.sum(1 + np.log(2 * math.pi * var))  # + E log F_n
        P = np.diag(1 - eta[n] / sigma0**2)  # residual r = x_n - P x_{n+1} under B_n
        cross = M[n] @ covs[n]  # Cov(x_{n+1}, x_n)
        cov_r = covs[n] - cross.T @ P - P @ cross + P @ covs[n + 1] @ P
        mean_r = means[n] - P @ means[n + 1]
        second = np.diag(cov_r) + mean_r**2
        total += 0.5 * np.sum(second / var + np.log(2 * math.pi * var))  # - E log B_n
    return total


ETA_OLD = np.array([[0.30, 0.25], [0.25, 0.20], [0.15, 0.12], [0.05, 0.04]])
ETA_NEW = ETA_OLD * np.array([1.3, 0.8])  # learned friction moved: variances differ
