#!/usr/bin/env python3
"""Refit the coefficients of fusec's f32 ndtr (codegen/vecmath_consts.h; the CPU's vndtr and CUDA's fc_ndtr).

ndtr(-a) = e^(-a^2/2) R(a) for a >= 0, and R(a) = Q(a) / (k a Q(a) + P(a)) with k = sqrt(2 pi):
P / Q approximates k G(a), G = 1/(k R) - a (Mills's ratio's correction), P of degree 4 and Q
of degree 5 with P(0) = 2 and Q(0) = 1. The fit is linearised least squares on R's relative
error (an error d in k G moves R by d / (k a + k G)), iteratively reweighted towards minimax,
over a in [0, 14.5]; the coefficients are rounded to f32 one at a time, highest degree first,
each rounding followed by a refit of the rest. Both polynomials are then scaled by 3/4 (P(0) =
1.5, Q(0) = 0.75: near a = 0 they sit inside their binades, which lowers the worst rounding
error; docs/cpu.md). Prints the two C arrays and the fit's error.

Needs numpy and mpmath (pip install numpy mpmath); not part of the build. Check a new set
with `FUSEC_VECMATH_EXHAUSTIVE=1 build/tests/test_vecmath` (every f32 in [2^-30, 16)).
"""
import mpmath as mp
import numpy as np

mp.mp.dps = 40
K = float(mp.sqrt(2 * mp.pi))
A = np.concatenate([np.linspace(0, 14.5, 8000), np.linspace(0, 1, 2000)])


def r_exact(a):
    a = mp.mpf(a)
    return mp.erfc(a / mp.sqrt(2)) / 2 * mp.exp(a * a / 2)


KG = np.array([float(1 / r_exact(x) - mp.sqrt(2 * mp.pi) * mp.mpf(x)) for x in A])  # = P / Q
W = K * A + KG
M_DEG, N_DEG = 4, 5


def fit(fixed):
    """P - KG Q = 0 linearised in the free coefficients; fixed: {('p'|'q', i): value}."""
    va = np.vander(A, max(M_DEG, N_DEG) + 1, increasing=True)
    cols = [('p', i) for i in range(1, M_DEG + 1)] + [('q', i) for i in range(1, N_DEG + 1)]
    free = [c for c in cols if c not in fixed]
    qprev, lw = np.ones_like(A), np.ones_like(A)
    for it in range(80):
        rhs = KG - 2.0  # p0 = 2 and q0 = 1 moved to the right-hand side
        for (t, i), v in fixed.items():
            rhs = rhs - (v * va[:, i] if t == 'p' else -KG * v * va[:, i])
        sol = []
        if free:
            m = np.stack([va[:, i] if t == 'p' else -KG * va[:, i] for t, i in free], axis=1)
            s = lw / (W * qprev)
            sol, *_ = np.linalg.lstsq(m * s[:, None], rhs * s, rcond=None)
        coef = dict(fixed)
        coef.update(dict(zip(free, sol)))
        p = [2.0] + [coef[('p', i)] for i in range(1, M_DEG + 1)]
        q = [1.0] + [coef[('q', i)] for i in range(1, N_DEG + 1)]
        pv, qv = va[:, :M_DEG + 1] @ p, va[:, :N_DEG + 1] @ q
        err = (pv / qv - KG) / W
        qprev = qv
        if it > 10:
            lw = lw * (1 + 20 * np.abs(err) / np.abs(err).max())
    return p, q, float(np.abs(err).max()), free


def main():
    fixed = {}
    while True:
        p, q, err, free = fit(fixed)
        if not free:
            break
        c = max(free, key=lambda c: (c[1], c[0] == 'q'))
        fixed[c] = float(np.float32((p if c[0] == 'p' else q)[c[1]]))
    f = lambda v: '%.9gf' % float(np.float32(v * 0.75))
    print('fit error (relative, of R): %.3g' % err)
    print('static const float P[%d] = {%s};' % (M_DEG + 1, ', '.join(f(x) for x in p)))
    print('static const float Q[%d] = {%s};' % (N_DEG + 1, ', '.join(f(x) for x in q)))


if __name__ == '__main__':
    main()
