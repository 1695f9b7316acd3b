#!/usr/bin/env python3
"""bench/peers.py: fusec beside PyTorch eager, torch.compile and JAX jit on the same blocks.

What it owns: the peer benchmark (outside CI), forward rows (--blocks) and training rows
(--train-blocks). For each forward block below it
  1. makes one set of seeded inputs (NumPy), computes the block in NumPy float64 (the
     reference), runs `fusec run --input ...` on those inputs and every peer on them, and
     checks every output against the reference: max |out - ref| / max |ref| <= --rtol
     (default 1e-4), so that every figure in the table is for the same numbers;
  2. makes each peer's first call (torch.compile's and jax.jit's compilation happen there,
     and are not timed), then runs --rounds interleaved rounds: per round one
     `fusec bench FILE.tf --device cpu --json -D ...` (fused and eager programs, STREAM copy
     bandwidth measured in the same run) and, per peer, --warmup calls and --repeat timed
     calls of the whole block; figures are medians of the round medians, with the spread;
  3. prints a markdown table (and optionally writes it, with the machine and versions, into
     docs/bench.md between the markers, and all figures as JSON).
For each training block the same, for one training step: the forward and the backward from
one seeded output gradient gy (the gradients of loss = sum(out * gy) with respect to every
float input and param). fusec: `fusec run --train --grad-output NAME=gy.npy` for the check,
`fusec bench --train --json` for the time (fused with --remat auto against eager with
--no-fuse --remat none) and its saved / planned / measured peak bytes; torch eager and
torch.compile: outs = f(*args); torch.autograd.grad(outs, args, gy) (torch.compile's
AOTAutograd compiles forward and backward); JAX: jax.jit of jax.vjp. Every output and
gradient is checked against a float64 reference: jax.vjp under jax.enable_x64 (else torch
f64 autograd, else a NumPy backward written by hand, for the MLP), whose forward is checked
against the NumPy f64 forward and whose gradients against the other f64 candidates'.
Entry point: main(). Invariants: the peers run with the same thread count as fusec
(--threads, default 2, FUSEC_NUM_THREADS for fusec, torch.set_num_threads for torch, XLA's
CPU thread pool for JAX via the cpu count it sees); fp32 everywhere; the same math as the
.tf files (op by op, no fused library attention).
Re-run everything with bench/run.sh.
"""

import argparse
import datetime
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402


# ---------------------------------------------------------------------------------------
# The blocks: the .tf file, its dims, the inputs, and the same math in NumPy f64, torch, JAX.
# ---------------------------------------------------------------------------------------

def _ln_np(x, g, b, eps=1e-5):
    m = x.mean(axis=-1, keepdims=True)
    v = ((x - m) ** 2).mean(axis=-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * g + b


def _gelu_tanh_np(z):
    return 0.5 * z * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (z + 0.044715 * z ** 3)))


def _gelu_erf_np(z):
    try:
        from scipy.special import erf
    except ImportError:  # slow but exact
        erf = np.vectorize(math.erf)
    return 0.5 * z * (1.0 + erf(z / math.sqrt(2.0)))


def mlp_inputs(rng, d):
    B, T, C = d["B"], d["T"], d["C"]
    return {
        "x": rng.standard_normal((B, T, C)),
        "g": 1.0 + 0.1 * rng.standard_normal(C),
        "b": 0.1 * rng.standard_normal(C),
        "w_fc": 0.02 * rng.standard_normal((C, 4 * C)),
        "b_fc": 0.02 * rng.standard_normal(4 * C),
        "w_proj": 0.02 * rng.standard_normal((4 * C, C)),
        "b_proj": 0.02 * rng.standard_normal(C),
    }


def mlp_np(a, d):
    h = _ln_np(a["x"], a["g"], a["b"])
    u = _gelu_tanh_np(h @ a["w_fc"] + a["b_fc"])
    return [a["x"] + u @ a["w_proj"] + a["b_proj"]]


def mlp_grad_np(a, gys, d):
    """The MLP's gradients by hand in NumPy f64 (an autodiff-free cross-check of the
    reference): y = x + gelu_tanh(ln(x) @ w_fc + b_fc) @ w_proj + b_proj."""
    x, gy = a["x"], gys[0]
    xc = x - x.mean(axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt((xc * xc).mean(axis=-1, keepdims=True) + 1e-5)
    xh = xc * rstd
    h = xh * a["g"] + a["b"]
    z = h @ a["w_fc"] + a["b_fc"]
    c = math.sqrt(2.0 / math.pi)
    t = np.tanh(c * (z + 0.044715 * z ** 3))
    u = 0.5 * z * (1.0 + t)
    rows = tuple(range(x.ndim - 1))
    g = {"b_proj": gy.sum(axis=rows), "w_proj": np.tensordot(u, gy, axes=(rows, rows))}
    gz = (gy @ a["w_proj"].T) * (0.5 * (1.0 + t) +
                                 0.5 * z * (1.0 - t * t) * c * (1.0 + 3 * 0.044715 * z * z))
    g["w_fc"] = np.tensordot(h, gz, axes=(rows, rows))
    g["b_fc"] = gz.sum(axis=rows)
    gh = gz @ a["w_fc"].T
    g["g"] = (gh * xh).sum(axis=rows)
    g["b"] = gh.sum(axis=rows)
    gxh = gh * a["g"]
    g["x"] = gy + rstd * (gxh - gxh.mean(axis=-1, keepdims=True) -
                          xh * (gxh * xh).mean(axis=-1, keepdims=True))
    return {k: g[k] for k in a}


def mlp_torch(torch):
    F = torch.nn.functional

    def f(x, g, b, w_fc, b_fc, w_proj, b_proj):
        h = F.layer_norm(x, (x.shape[-1],), g, b, eps=1e-5)
        u = F.gelu(h @ w_fc + b_fc, approximate="tanh")
        return (x + u @ w_proj + b_proj,)
    return f


def _ln_jax(jax, jnp, x, g, b, eps=1e-5):
    m = jnp.mean(x, axis=-1, keepdims=True)
    v = jnp.mean(jnp.square(x - m), axis=-1, keepdims=True)
    return (x - m) * jax.lax.rsqrt(v + eps) * g + b


def mlp_jax(jax, jnp):
    def f(x, g, b, w_fc, b_fc, w_proj, b_proj):
        h = _ln_jax(jax, jnp, x, g, b)
        u = jax.nn.gelu(h @ w_fc + b_fc, approximate=True)
        return (x + u @ w_proj + b_proj,)
    return f


def attn_inputs(rng, d):
    B, T, C = d["B"], d["T"], d["C"]
    return {
        "x": rng.standard_normal((B, T, C)),
        "w_qkv": 0.02 * rng.standard_normal((C, 3 * C)),
        "b_qkv": 0.02 * rng.standard_normal(3 * C),
        "w_o": 0.02 * rng.standard_normal((C, C)),
        "b_o": 0.02 * rng.standard_normal(C),
    }


def _heads_np(t, d):
    B, T, C, H = d["B"], d["T"], d["C"], d["H"]
    return t.reshape(B, T, H, C // H).transpose(0, 2, 1, 3)


def _causal_attn_np(q, k, v, d):
    """softmax(causal_mask(q @ kT / sqrt(D))) @ v over [B, H, T, D], merged back to [B, T, C]."""
    B, T, C = d["B"], d["T"], d["C"]
    s = q @ k.transpose(0, 1, 3, 2) * (1.0 / math.sqrt(q.shape[-1]))
    s = np.where(np.tril(np.ones((T, T), dtype=bool)), s, -np.inf)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    return (p @ v).transpose(0, 2, 1, 3).reshape(B, T, C)


def attn_np(a, d):
    qkv = a["x"] @ a["w_qkv"] + a["b_qkv"]
    q, k, v = (_heads_np(t, d) for t in np.split(qkv, 3, axis=-1))
    return [_causal_attn_np(q, k, v, d) @ a["w_o"] + a["b_o"]]


def _causal_attn_torch(torch, d):
    """[B, T, C] -> heads, and softmax(causal_mask(q @ kT / sqrt(D))) @ v merged back."""
    B, T, C, H = d["B"], d["T"], d["C"], d["H"]
    D = C // H
    mask = torch.ones(T, T, dtype=torch.bool).tril()

    def heads(t):
        return t.reshape(B, T, H, D).transpose(1, 2)

    def attn(q, k, v):
        s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(D))
        s = s.masked_fill(~mask, float("-inf"))
        return (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, T, C)
    return heads, attn


def attn_torch(torch, d):
    heads, attn = _causal_attn_torch(torch, d)

    def f(x, w_qkv, b_qkv, w_o, b_o):
        q, k, v = (heads(t) for t in (x @ w_qkv + b_qkv).split(d["C"], dim=-1))
        return (attn(q, k, v) @ w_o + b_o,)
    return f


def _causal_attn_jax(jax, jnp, d):
    B, T, C, H = d["B"], d["T"], d["C"], d["H"]
    D = C // H

    def heads(t):
        return t.reshape(B, T, H, D).transpose(0, 2, 1, 3)

    def attn(q, k, v):
        s = (q @ k.transpose(0, 1, 3, 2)) * (1.0 / math.sqrt(D))
        s = jnp.where(jnp.tril(jnp.ones((T, T), dtype=bool)), s, -jnp.inf)
        o = jax.nn.softmax(s, axis=-1) @ v
        return o.transpose(0, 2, 1, 3).reshape(B, T, C)
    return heads, attn


def attn_jax(jax, jnp, d):
    heads, attn = _causal_attn_jax(jax, jnp, d)

    def f(x, w_qkv, b_qkv, w_o, b_o):
        q, k, v = (heads(t) for t in jnp.split(x @ w_qkv + b_qkv, 3, axis=-1))
        return (attn(q, k, v) @ w_o + b_o,)
    return f


def rlg_inputs(rng, d):
    N, C = d["N"], d["C"]
    return {
        "x": rng.standard_normal((N, C)),
        "y": rng.standard_normal((N, C)),
        "g": 1.0 + 0.1 * rng.standard_normal(C),
        "b": 0.1 * rng.standard_normal(C),
        "bias": 0.1 * rng.standard_normal(C),
    }


def rlg_np(a, d):
    r = a["x"] + a["y"]
    return [r, _gelu_erf_np(_ln_np(r, a["g"], a["b"]) + a["bias"])]


def rlg_torch(torch):
    F = torch.nn.functional

    def f(x, y, g, b, bias):
        r = x + y
        return (r, F.gelu(F.layer_norm(r, (r.shape[-1],), g, b, eps=1e-5) + bias))
    return f


def rlg_jax(jax, jnp):
    def f(x, y, g, b, bias):
        r = x + y
        return (r, jax.nn.gelu(_ln_jax(jax, jnp, r, g, b) + bias, approximate=False))
    return f


def _ln_params(rng, C):
    return 1.0 + 0.1 * rng.standard_normal(C), 0.1 * rng.standard_normal(C)


def block_inputs(rng, d):
    B, T, C = d["B"], d["T"], d["C"]
    a = {"x": rng.standard_normal((B, T, C))}
    a["ln1_g"], a["ln1_b"] = _ln_params(rng, C)
    for name, shape in (("w_qkv", (C, 3 * C)), ("b_qkv", 3 * C), ("w_o", (C, C)), ("b_o", C)):
        a[name] = 0.02 * rng.standard_normal(shape)
    a["ln2_g"], a["ln2_b"] = _ln_params(rng, C)
    for name, shape in (("w_fc", (C, 4 * C)), ("b_fc", 4 * C), ("w_proj", (4 * C, C)),
                        ("b_proj", C)):
        a[name] = 0.02 * rng.standard_normal(shape)
    return a


def block_np(a, d):
    h = _ln_np(a["x"], a["ln1_g"], a["ln1_b"])
    x = a["x"] + attn_np(dict(a, x=h), d)[0]
    h = _ln_np(x, a["ln2_g"], a["ln2_b"])
    return [x + _gelu_tanh_np(h @ a["w_fc"] + a["b_fc"]) @ a["w_proj"] + a["b_proj"]]


def block_torch(torch, d):
    F = torch.nn.functional
    attn = attn_torch(torch, d)

    def f(x, ln1_g, ln1_b, w_qkv, b_qkv, w_o, b_o, ln2_g, ln2_b, w_fc, b_fc, w_proj, b_proj):
        C = x.shape[-1]
        x = x + attn(F.layer_norm(x, (C,), ln1_g, ln1_b, eps=1e-5), w_qkv, b_qkv, w_o, b_o)[0]
        h = F.layer_norm(x, (C,), ln2_g, ln2_b, eps=1e-5)
        return (x + F.gelu(h @ w_fc + b_fc, approximate="tanh") @ w_proj + b_proj,)
    return f


def block_jax(jax, jnp, d):
    attn = attn_jax(jax, jnp, d)

    def f(x, ln1_g, ln1_b, w_qkv, b_qkv, w_o, b_o, ln2_g, ln2_b, w_fc, b_fc, w_proj, b_proj):
        x = x + attn(_ln_jax(jax, jnp, x, ln1_g, ln1_b), w_qkv, b_qkv, w_o, b_o)[0]
        h = _ln_jax(jax, jnp, x, ln2_g, ln2_b)
        return (x + jax.nn.gelu(h @ w_fc + b_fc, approximate=True) @ w_proj + b_proj,)
    return f


def llama_inputs(rng, d):
    B, T, C, H, F = d["B"], d["T"], d["C"], d["H"], d["F"]
    D = C // H
    # rotary tables as Hugging Face's LLaMA builds them: each frequency in both halves
    ang = np.arange(T)[:, None] * (10000.0 ** (-np.arange(0, D, 2) / D))[None, :]
    ang = np.concatenate([ang, ang], axis=-1)
    a = {"x": rng.standard_normal((B, T, C)), "cos": np.cos(ang), "sin": np.sin(ang),
         "g_attn": 1.0 + 0.1 * rng.standard_normal(C)}
    for name in ("wq", "wk", "wv", "wo"):
        a[name] = 0.02 * rng.standard_normal((C, C))
    a["g_mlp"] = 1.0 + 0.1 * rng.standard_normal(C)
    for name, shape in (("w1", (C, F)), ("w3", (C, F)), ("w2", (F, C))):
        a[name] = 0.02 * rng.standard_normal(shape)
    return a


def _rms_np(x, g, eps=1e-6):
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * g


def _rope_np(t, cos, sin):
    x1, x2 = np.split(t, 2, axis=-1)
    return t * cos + np.concatenate([-x2, x1], axis=-1) * sin


def llama_np(a, d):
    h = _rms_np(a["x"], a["g_attn"])
    q = _rope_np(_heads_np(h @ a["wq"], d), a["cos"], a["sin"])
    k = _rope_np(_heads_np(h @ a["wk"], d), a["cos"], a["sin"])
    x = a["x"] + _causal_attn_np(q, k, _heads_np(h @ a["wv"], d), d) @ a["wo"]
    h = _rms_np(x, a["g_mlp"])
    z = h @ a["w1"]
    return [x + (z / (1.0 + np.exp(-z)) * (h @ a["w3"])) @ a["w2"]]


def llama_torch(torch, d):
    F = torch.nn.functional
    heads, attn = _causal_attn_torch(torch, d)

    def rms(x, g):
        return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + 1e-6) * g

    def rope(t, cos, sin):
        x1, x2 = t.chunk(2, dim=-1)
        return t * cos + torch.cat([-x2, x1], dim=-1) * sin

    def f(x, cos, sin, g_attn, wq, wk, wv, wo, g_mlp, w1, w3, w2):
        h = rms(x, g_attn)
        q, k = rope(heads(h @ wq), cos, sin), rope(heads(h @ wk), cos, sin)
        x = x + attn(q, k, heads(h @ wv)) @ wo
        h = rms(x, g_mlp)
        return (x + (F.silu(h @ w1) * (h @ w3)) @ w2,)
    return f


def llama_jax(jax, jnp, d):
    heads, attn = _causal_attn_jax(jax, jnp, d)

    def rms(x, g):
        return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * g

    def rope(t, cos, sin):
        x1, x2 = jnp.split(t, 2, axis=-1)
        return t * cos + jnp.concatenate([-x2, x1], axis=-1) * sin

    def f(x, cos, sin, g_attn, wq, wk, wv, wo, g_mlp, w1, w3, w2):
        h = rms(x, g_attn)
        q, k = rope(heads(h @ wq), cos, sin), rope(heads(h @ wk), cos, sin)
        x = x + attn(q, k, heads(h @ wv)) @ wo
        h = rms(x, g_mlp)
        return (x + (jax.nn.silu(h @ w1) * (h @ w3)) @ w2,)
    return f


BLOCKS = [
    {
        "name": "gpt2_mlp", "label": "GPT-2 MLP (LN, FC+GELU-tanh, proj, residual)",
        "tf": "examples/gpt2_mlp.tf", "dims": {"B": 4, "T": 256, "C": 768},
        "inputs": mlp_inputs, "ref": mlp_np, "grad_np": mlp_grad_np,
        "torch": lambda torch, d: mlp_torch(torch), "jax": lambda jax, jnp, d: mlp_jax(jax, jnp),
        "forward": True, "train": True,
    },
    {
        "name": "gpt2_attn", "label": "GPT-2 causal attention (QKV, 12 heads, softmax, out proj)",
        "tf": "examples/gpt2_attn.tf", "dims": {"B": 4, "T": 256, "C": 768, "H": 12},
        "inputs": attn_inputs, "ref": attn_np,
        "torch": attn_torch, "jax": attn_jax, "forward": True, "train": False,
    },
    {
        "name": "residual_ln_gelu", "label": "residual + layernorm + bias + GELU (erf), 2 outputs",
        "tf": "examples/residual_ln_gelu.tf", "dims": {"N": 8192, "C": 1024},
        "inputs": rlg_inputs, "ref": rlg_np,
        "torch": lambda torch, d: rlg_torch(torch), "jax": lambda jax, jnp, d: rlg_jax(jax, jnp),
        "forward": True, "train": False,
    },
    {
        "name": "gpt2_block", "label": "GPT-2 block (LN, attention, residual, LN, MLP, residual)",
        "tf": "examples/gpt2_block.tf", "dims": {"B": 4, "T": 256, "C": 768, "H": 12},
        "inputs": block_inputs, "ref": block_np,
        "torch": block_torch, "jax": block_jax, "forward": False, "train": True,
    },
    {
        "name": "llama_layer", "label": "LLaMA layer (RMSNorm, RoPE, attention, SwiGLU)",
        "tf": "examples/llama_layer.tf", "dims": {"B": 4, "T": 256, "C": 768, "H": 12, "F": 2048},
        "inputs": llama_inputs, "ref": llama_np,
        "torch": llama_torch, "jax": llama_jax, "forward": False, "train": True,
    },
]


# ---------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------

def log(msg):
    print(msg, file=sys.stderr, flush=True)


def rel_err(out, ref):
    out = np.asarray(out, dtype=np.float64)
    if out.shape != ref.shape:
        return float("inf")
    scale = float(np.max(np.abs(ref)))
    err = float(np.max(np.abs(out - ref)))
    if not math.isfinite(err):
        return float("inf")
    return err / scale if scale > 0 else err


def spread(times_ms):
    t = sorted(times_ms)
    q = statistics.quantiles(t, n=4) if len(t) >= 2 else [t[0]] * 3
    return {"median_ms": statistics.median(t), "min_ms": t[0], "max_ms": t[-1],
            "q1_ms": q[0], "q3_ms": q[2], "n": len(t)}


QUIET = {"seconds": 0.0}


def time_calls(fn, warmup, repeat):
    idle = wait_quiet(QUIET["seconds"])
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    res = spread(ts)
    res["idle_before"] = idle
    res["times_ms"] = ts
    return res


def cpu_idle(interval=0.5):
    """Fraction of the CPUs idle over `interval` seconds (from /proc/stat), or None."""
    def snap():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return v[3] + v[4], sum(v)
    try:
        i0, t0 = snap()
        time.sleep(interval)
        i1, t1 = snap()
    except (OSError, ValueError, IndexError):
        return None
    return (i1 - i0) / (t1 - t0) if t1 > t0 else None


def wait_quiet(seconds, want=0.75):
    """Wait up to `seconds` for the machine to be `want` idle; return the last idle fraction."""
    deadline = time.time() + seconds
    idle = cpu_idle()
    while seconds > 0 and idle is not None and idle < want and time.time() < deadline:
        idle = cpu_idle()
    return idle


def dim_args(dims):
    out = []
    for k, v in dims.items():
        out += ["-D", "%s=%d" % (k, v)]
    return out


def fusec_env(threads):
    env = dict(os.environ)
    env["FUSEC_NUM_THREADS"] = str(threads)
    return env


# ---------------------------------------------------------------------------------------
# fusec
# ---------------------------------------------------------------------------------------

def fusec_check(fusec, blk, inputs, refs, threads, extra):
    """fusec run on the same inputs; every output checked against the f64 reference."""
    with tempfile.TemporaryDirectory(prefix="fusec-peers-") as tmp:
        outdir = os.path.join(tmp, "out")
        os.mkdir(outdir)
        cmd = [fusec, "run", os.path.join(ROOT, blk["tf"]), "--device", "cpu",
               "--out-dir", outdir] + extra + dim_args(blk["dims"])
        for name, arr in inputs.items():
            p = os.path.join(tmp, "in_%s.npy" % name)
            np.save(p, arr.astype(np.float32))
            cmd += ["--input", "%s=%s" % (name, p)]
        r = subprocess.run(cmd, env=fusec_env(threads), capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("fusec run failed (%d): %s" % (r.returncode, r.stderr.strip()))
        files = sorted(f for f in os.listdir(outdir) if f.endswith(".npy"))
        if len(files) != len(refs):
            raise RuntimeError("fusec run wrote %s, expected %d outputs" % (files, len(refs)))
        outs = _order_outputs(r.stdout + r.stderr, files, outdir)
        errs = [rel_err(o, ref) for o, ref in zip(outs, refs)]
    return errs


def _order_outputs(text, files, outdir):
    # Outputs are written as DIR/NAME.npy; their declaration order is the order in which
    # fusec names them on its output, else alphabetical.
    pos = {}
    for f in files:
        i = text.find(f[:-4])
        pos[f] = i if i >= 0 else 1 << 30
    ordered = sorted(files, key=lambda f: (pos[f], f))
    return [np.load(os.path.join(outdir, f)) for f in ordered]


def fusec_bench(fusec, blk, threads, repeat, runs=1, extra=()):
    cmd = [fusec, "bench", os.path.join(ROOT, blk["tf"]), "--device", "cpu", "--json",
           "--repeat", str(repeat)] + list(extra) + dim_args(blk["dims"])
    results = []
    idles = []
    for _ in range(runs):
        idles.append(wait_quiet(QUIET["seconds"]))
        r = subprocess.run(cmd, env=fusec_env(threads), capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("fusec bench failed (%d): %s" % (r.returncode, r.stderr.strip()))
        results.append(json.loads(r.stdout))
    fused = [j["fused"]["median_ms"] for j in results]
    eager = [j["eager"]["median_ms"] for j in results]
    # keep the run whose fused median is the median of the runs (its STREAM figure with it)
    mid = sorted(range(runs), key=lambda i: fused[i])[runs // 2]
    return {"cmd": " ".join(cmd[:1] + [os.path.relpath(a, ROOT) if a.startswith(ROOT) else a
                                       for a in cmd[1:]]),
            "json": results[mid], "fused_runs_ms": fused, "eager_runs_ms": eager,
            "stream_runs_gbps": [j["stream_gbps"] for j in results], "idle_before": idles}


# ---------------------------------------------------------------------------------------
# Peers
# ---------------------------------------------------------------------------------------

def load_torch(threads):
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        log("torch not available: %s" % e)
        return None
    torch.set_num_threads(threads)
    return torch


def load_jax():
    try:
        import jax
        import jax.numpy as jnp
        jax.config.update("jax_platforms", "cpu")
        jax.config.update("jax_default_matmul_precision", "highest")
    except Exception as e:  # noqa: BLE001
        log("jax not available: %s" % e)
        return None, None
    return jax, jnp


def prepare_torch(torch, blk, inputs, refs, compile_mode):
    """Build the torch callables; make the first call (compilation) and check the outputs."""
    res = {}
    args = [torch.from_numpy(v.astype(np.float32)) for v in inputs.values()]
    f = blk["torch"](torch, blk["dims"])
    variants = [("torch_eager", f)]
    if compile_mode is not None:
        variants.append(("torch_compile", torch.compile(f, mode=compile_mode or None)))
    for key, fn in variants:
        def call(fn=fn):
            with torch.inference_mode():
                return fn(*args)
        t0 = time.perf_counter()
        outs = call()
        first = (time.perf_counter() - t0) * 1e3
        res[key] = {"call": call, "first_call_ms": first,
                    "rel_err": [rel_err(o.numpy(), r) for o, r in zip(outs, refs)]}
    return res


def prepare_jax(jax, jnp, blk, inputs, refs):
    args = [jnp.asarray(v.astype(np.float32)) for v in inputs.values()]
    fn = jax.jit(blk["jax"](jax, jnp, blk["dims"]))

    def call():
        return jax.block_until_ready(fn(*args))
    t0 = time.perf_counter()
    outs = call()
    first = (time.perf_counter() - t0) * 1e3
    return {"jax_jit": {"call": call, "first_call_ms": first,
                        "rel_err": [rel_err(np.asarray(o), r) for o, r in zip(outs, refs)]}}


def combine_rounds(rounds):
    """Per-runner figures over interleaved rounds: median of the round medians; the spread
    (min, max, quartiles) over every timed call of every round."""
    calls = [t for r in rounds for t in r["times_ms"]]
    res = spread(calls)
    res["median_ms"] = statistics.median(r["median_ms"] for r in rounds)
    res["round_medians_ms"] = [r["median_ms"] for r in rounds]
    res["idle_before"] = [r["idle_before"] for r in rounds]
    return res


# ---------------------------------------------------------------------------------------
# Training steps: the forward, then the backward from the output gradients gy (the gradient
# of loss = sum(out * gy) with respect to every float input and param), for fusec and peers.
# ---------------------------------------------------------------------------------------

def fusec_signature(fusec, blk):
    """The block's float inputs, its params and its outputs in order, from `--emit ir`."""
    r = subprocess.run([fusec, os.path.join(ROOT, blk["tf"]), "--emit", "ir", "-o", "-"] +
                       dim_args(blk["dims"]), capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("fusec --emit ir failed (%d): %s" % (r.returncode, r.stderr.strip()))
    sig = {"input": [], "param": [], "output": []}
    for m in re.finditer(r'^\s*(input|param|output) %\d+ "(\w+)"', r.stdout, re.M):
        sig[m.group(1)].append(m.group(2))
    return sig


def train_errs(outs, grads, refs, grefs):
    """Relative errors, keyed `out NAME` / `grad NAME`, of outputs (a list in order) and
    gradients (a dict by input name); every gradient is checked when grefs is given."""
    errs = {"out%d" % i: rel_err(o, r) for i, (o, r) in enumerate(zip(outs, refs))}
    for k, ref in (grefs or {}).items():
        errs["grad_" + k] = rel_err(grads[k], ref) if k in grads else float("inf")
    return errs


def fusec_train_check(fusec, blk, sig, inputs, gys, refs, grefs, threads, extra):
    """fusec run --train on the same inputs and output gradients; outputs and gradients
    checked against the f64 references."""
    with tempfile.TemporaryDirectory(prefix="fusec-peers-") as tmp:
        outdir = os.path.join(tmp, "out")
        cmd = [fusec, "run", os.path.join(ROOT, blk["tf"]), "--device", "cpu", "--train",
               "--out-dir", outdir] + extra + dim_args(blk["dims"])
        for name, arr in inputs.items():
            p = os.path.join(tmp, "in_%s.npy" % name)
            np.save(p, arr.astype(np.float32))
            cmd += ["--input", "%s=%s" % (name, p)]
        for name, gy in zip(sig["output"], gys):
            p = os.path.join(tmp, "gy_%s.npy" % name)
            np.save(p, gy.astype(np.float32))
            cmd += ["--grad-output", "%s=%s" % (name, p)]
        r = subprocess.run(cmd, env=fusec_env(threads), capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("fusec run --train failed (%d): %s" % (r.returncode,
                                                                      r.stderr.strip()))
        outs = [np.load(os.path.join(outdir, n + ".npy")) for n in sig["output"]]
        grads = {k: np.load(os.path.join(outdir, "grad_%s.npy" % k)) for k in inputs
                 if os.path.exists(os.path.join(outdir, "grad_%s.npy" % k))}
    return train_errs(outs, grads, refs, grefs)


def grad_reference(blk, inputs, gys, refs, torch, jax, jnp):
    """The f64 gradients every runner is checked against. Candidates, first found wins:
    JAX f64 (jax.vjp of the block's JAX function under jax.enable_x64), torch f64 (autograd of
    its torch function), NumPy f64 by hand (blocks that have one). Each candidate's forward is
    checked against the NumPy f64 forward, and the others' gradients against the winner's."""
    cands = []
    d = blk["dims"]
    if jax is not None:
        with jax.enable_x64(True):
            args = [jnp.asarray(v) for v in inputs.values()]
            outs, vjp = jax.vjp(blk["jax"](jax, jnp, d), *args)
            gs = vjp(tuple(jnp.asarray(g) for g in gys))
            cands.append(("JAX f64 (jax.vjp)", [np.asarray(o) for o in outs],
                          {k: np.asarray(g) for k, g in zip(inputs, gs)}))
    if torch is not None:
        args = [torch.from_numpy(v).requires_grad_() for v in inputs.values()]
        outs = blk["torch"](torch, d)(*args)
        gs = torch.autograd.grad(outs, args, [torch.from_numpy(g) for g in gys])
        cands.append(("torch f64 (autograd)", [o.detach().numpy() for o in outs],
                      {k: g.numpy() for k, g in zip(inputs, gs)}))
    if blk.get("grad_np"):
        cands.append(("NumPy f64 by hand", refs, blk["grad_np"](inputs, gys, d)))
    if not cands:
        return {"source": None, "grads": None, "forward_rel_err": {}, "cross_rel_err": {}}
    src, _, grads = cands[0]
    return {"source": src, "grads": grads,
            "forward_rel_err": {c[0]: max(rel_err(o, r) for o, r in zip(c[1], refs))
                                for c in cands},
            "cross_rel_err": {c[0]: max(rel_err(c[2][k], grads[k]) for k in grads)
                              for c in cands[1:]}}


def torch_saved_bytes(torch, f, args, is_param):
    """Bytes of the distinct storages torch autograd saves for the backward in one eager
    forward, params not counted (as fusec counts its saved bytes)."""
    params = {a.untyped_storage().data_ptr() for a, p in zip(args, is_param) if p}
    seen = {}

    def pack(t):
        st = t.untyped_storage()
        if st.data_ptr() not in params:
            seen[st.data_ptr()] = st.nbytes()
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        f(*args)
    return sum(seen.values())


def prepare_torch_train(torch, blk, sig, inputs, gys, refs, grefs, compile_mode):
    """torch training steps: outs = f(*args); torch.autograd.grad(outs, args, gy), i.e. the
    gradients of sum(out * gy) (torch.compile: AOTAutograd compiles forward and backward)."""
    res = {}
    args = [torch.from_numpy(v.astype(np.float32)).requires_grad_() for v in inputs.values()]
    gy = [torch.from_numpy(g.astype(np.float32)) for g in gys]
    f = blk["torch"](torch, blk["dims"])
    variants = [("torch_eager", f)]
    if compile_mode is not None:
        variants.append(("torch_compile", torch.compile(f, mode=compile_mode or None)))
    for key, fn in variants:
        def call(fn=fn):
            outs = fn(*args)
            return outs, torch.autograd.grad(outs, args, gy)
        t0 = time.perf_counter()
        outs, grads = call()
        first = (time.perf_counter() - t0) * 1e3
        res[key] = {"call": call, "first_call_ms": first, "errs": train_errs(
            [o.detach().numpy() for o in outs], {k: g.numpy() for k, g in zip(inputs, grads)},
            refs, grefs)}
    res["torch_eager"]["saved_bytes"] = torch_saved_bytes(
        torch, f, args, [k in sig["param"] for k in inputs])
    return res


def prepare_jax_train(jax, jnp, blk, inputs, gys, refs, grefs):
    f = blk["jax"](jax, jnp, blk["dims"])

    def step(args, gy):
        outs, vjp = jax.vjp(f, *args)
        return outs, vjp(gy)
    fn = jax.jit(step)
    args = tuple(jnp.asarray(v.astype(np.float32)) for v in inputs.values())
    gy = tuple(jnp.asarray(g.astype(np.float32)) for g in gys)

    def call():
        return jax.block_until_ready(fn(args, gy))
    t0 = time.perf_counter()
    outs, grads = call()
    first = (time.perf_counter() - t0) * 1e3
    return {"jax_jit": {"call": call, "first_call_ms": first, "errs": train_errs(
        [np.asarray(o) for o in outs], {k: np.asarray(g) for k, g in zip(inputs, grads)},
        refs, grefs)}}


# ---------------------------------------------------------------------------------------
# Matrix products alone: the library fusec calls (the system OpenBLAS, through CBLAS, as
# runtime/blas.c does: one call per product of a batch) beside torch's and XLA's.
# ---------------------------------------------------------------------------------------

GEMMS = [  # (label, batch, m, k, n): the MLP's first product, attention's q @ kT
    ("MLP fc: [1024,768] @ [768,3072]", 1, 1024, 768, 3072),
    ("attn scores: 48 x [256,64] @ [64,256]", 48, 256, 64, 256),
]


def openblas_sgemm(threads):
    import ctypes
    import ctypes.util
    for name in ("libopenblas.so.0", ctypes.util.find_library("openblas")):
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            lib = None
    if lib is None:
        return None, None
    lib.openblas_get_config.restype = ctypes.c_char_p
    lib.openblas_set_num_threads.argtypes = [ctypes.c_int]
    f = lib.cblas_sgemm
    P = ctypes.c_void_p
    I = ctypes.c_int
    f.argtypes = [I, I, I, I, I, I, ctypes.c_float, P, I, P, I, ctypes.c_float, P, I]

    def gemm(a, b, c):
        lib.openblas_set_num_threads(threads)
        batch, m, k = a.shape
        n = b.shape[2]
        pa, pb, pc = a.ctypes.data, b.ctypes.data, c.ctypes.data
        for i in range(batch):
            f(101, 111, 111, m, n, k, 1.0, pa + 4 * i * m * k, k, pb + 4 * i * k * n, n, 0.0,
              pc + 4 * i * m * n, n)
    return gemm, lib.openblas_get_config().decode()


def run_gemms(torch, jax, jnp, threads, warmup, repeat):
    rows = []
    gemm, cfg = openblas_sgemm(threads)
    rng = np.random.default_rng(1)
    for label, batch, m, k, n in GEMMS:
        a = rng.standard_normal((batch, m, k), dtype=np.float32)
        b = rng.standard_normal((batch, k, n), dtype=np.float32)
        flops = 2.0 * batch * m * k * n
        row = {"label": label, "flops": flops}
        if gemm is not None:
            c = np.empty((batch, m, n), dtype=np.float32)
            row["openblas"] = time_calls(lambda: gemm(a, b, c), warmup, repeat)
        if torch is not None:
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)
            with torch.inference_mode():
                row["torch"] = time_calls(lambda: torch.matmul(ta, tb), warmup, repeat)
        if jax is not None:
            ja, jb = jnp.asarray(a), jnp.asarray(b)
            mm = jax.jit(jnp.matmul)
            row["jax"] = time_calls(lambda: jax.block_until_ready(mm(ja, jb)), warmup, repeat)
        rows.append(row)
    return rows, cfg


def gemm_table(rows, cfg):
    t = ("| product | OpenBLAS (what fusec calls) | torch.matmul | jax.jit(matmul) "
         "| CPU idle before |\n"
         "| --- | ---: | ---: | ---: | ---: |\n")
    for r in rows:
        cells = []
        for key in ("openblas", "torch", "jax"):
            x = r.get(key)
            cells.append("n/a" if x is None else "%s ms, %.0f GFLOP/s" % (
                fmt_ms(x), r["flops"] / (x["median_ms"] * 1e-3) / 1e9))
        t += "| %s | %s | %s |\n" % (r["label"], " | ".join(cells), fmt_idle(
            [r[k]["idle_before"] for k in ("openblas", "torch", "jax") if k in r]))
    return t + "\nOpenBLAS: %s\n" % (cfg or "not found")


# ---------------------------------------------------------------------------------------
# Machine, versions, table
# ---------------------------------------------------------------------------------------

def machine_info():
    info = {"platform": platform.platform(), "python": platform.python_version(),
            "numpy": np.__version__}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            k, _, v = line.partition(":")
            k, v = k.strip(), v.strip()
            if k == "Model name":
                info["cpu"] = v
            elif k == "CPU(s)":
                info["cpus"] = v
            elif k == "L3 cache":
                info["l3"] = v
            elif k in ("CPU family", "Model", "Hypervisor vendor"):
                info[k.lower().replace(" ", "_")] = v
            elif k == "Flags":
                flags = v.split()
                info["avx512"] = "avx512f" in flags
                info["isa"] = [f for f in flags if f in ("avx2", "fma") or f.startswith("avx512")]
    except OSError:
        pass
    try:
        with open("/proc/meminfo") as f:
            kb = int(re.search(r"MemTotal:\s+(\d+)", f.read()).group(1))
        info["memory_gib"] = round(kb / 2 ** 20, 1)
    except (OSError, AttributeError):
        pass
    try:
        info["fusec_commit"] = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                              capture_output=True, text=True).stdout.strip()
        # docs/ does not count: the run itself rewrites docs/bench.md
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no",
                                "--", ".", ":!docs"], capture_output=True, text=True).stdout.strip()
        info["fusec_dirty"] = bool(dirty)
    except OSError:
        pass
    try:
        with open("/proc/loadavg") as f:
            info["loadavg"] = " ".join(f.read().split()[:3])
    except OSError:
        pass
    info["date"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return info


def fmt_ms(d):
    if d is None:
        return "n/a"
    return "%.3g" % d["median_ms"] if d["median_ms"] < 100 else "%.0f" % d["median_ms"]


def fmt_ms_num(x):
    if x is None:
        return "n/a"
    return "%.3g" % x if x < 100 else "%.0f" % x


def fmt_idle(xs):
    return ", ".join("n/a" if x is None else "%.0f%%" % (100 * x) for x in xs)


def dims_str(d):
    return " ".join("%s=%d" % kv for kv in d.items())


def make_tables(rows):
    head = ("| block | dims | fusec fused ms | fusec eager ms | torch eager ms | torch.compile ms "
            "| jax jit ms | bytes moved (fusec model) | fused GB/s | fraction of STREAM "
            "| fused GFLOP/s |\n"
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
    body = ""
    for r in rows:
        fj = r["fusec"]["json"]
        fused_ms = statistics.median(r["fusec"]["fused_runs_ms"])
        eager_ms = statistics.median(r["fusec"]["eager_runs_ms"])
        nbytes = fj["fused"]["bytes"]
        flops = sum(k.get("flops") or 0 for k in fj["fused"]["kernels"])
        gbps = nbytes / (fused_ms * 1e-3) / 1e9
        stream = fj["stream_gbps"]
        p = r["peers"]
        body += "| %s | %s | %s | %s | %s | %s | %s | %.1f MB | %.1f | %.2f | %.1f |\n" % (
            r["name"], dims_str(r["dims"]), fmt_ms_num(fused_ms),
            fmt_ms_num(eager_ms), fmt_ms(p.get("torch_eager")),
            fmt_ms(p.get("torch_compile")), fmt_ms(p.get("jax_jit")), nbytes / 1e6, gbps,
            gbps / stream if stream else float("nan"), flops / (fused_ms * 1e-3) / 1e9)
    # spread and correctness
    head2 = ("| block | runner | median ms | min–max ms (fusec: of the round medians; peers: "
             "of all timed calls) | IQR ms | max rel. error vs NumPy f64 "
             "| CPU idle before |\n"
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |\n")
    body2 = ""
    for r in rows:
        fr = r["fusec"]
        for key, runs, ferr in (("fusec fused", fr["fused_runs_ms"], r["fusec_rel_err"]),
                                ("fusec eager", fr["eager_runs_ms"], r["fusec_eager_rel_err"])):
            ferr_s = "%.1e" % max(ferr)
            s = spread(runs)
            body2 += "| %s | %s | %s | %s–%s (%d rounds) | | %s | %s |\n" % (
                r["name"], key, fmt_ms_num(statistics.median(runs)), fmt_ms_num(s["min_ms"]),
                fmt_ms_num(s["max_ms"]), len(runs), ferr_s, fmt_idle(fr["idle_before"]))
        for key, label in (("torch_eager", "torch eager"), ("torch_compile", "torch.compile"),
                           ("jax_jit", "jax jit")):
            t = r["peers"].get(key)
            if t is None:
                continue
            body2 += "| %s | %s | %s | %s–%s | %s–%s | %.1e | %s |\n" % (
                r["name"], label, fmt_ms(t), fmt_ms_num(t["min_ms"]), fmt_ms_num(t["max_ms"]),
                fmt_ms_num(t["q1_ms"]), fmt_ms_num(t["q3_ms"]), max(t["rel_err"]),
                fmt_idle(t["idle_before"]))
    # fusec per launch (the run kept for the main table)
    body3 = ""
    for r in rows:
        fj = r["fusec"]["json"]
        body3 += "\n`%s` (%s), STREAM %.1f GB/s\n\n" % (r["name"], dims_str(r["dims"]),
                                                       fj["stream_gbps"] or float("nan"))
        body3 += ("| program | # | kernel | ops | ms | MB | GB/s | GFLOP/s |\n"
                  "| --- | ---: | --- | --- | ---: | ---: | ---: | ---: |\n")
        for prog in ("fused", "eager"):
            for i, k in enumerate(fj[prog]["kernels"]):
                ms = k["median_ms"] or float("nan")
                body3 += "| %s | %d | %s | %s | %s | %.1f | %.1f | %.1f |\n" % (
                    prog, i, k["name"], ",".join(k["ops"]), fmt_ms_num(ms), k["bytes"] / 1e6,
                    k["bytes"] / (ms * 1e-3) / 1e9, (k.get("flops") or 0) / (ms * 1e-3) / 1e9)
    return head + body, head2 + body2, body3


def split_phases(kernels):
    """A training program's launches: the forward's, then the backward's (names restart at k0)."""
    idx = [int(re.match(r"k(\d+)", k["name"]).group(1)) for k in kernels]
    cut = next((i for i in range(1, len(idx)) if idx[i] <= idx[i - 1]), len(idx))
    return kernels[:cut], kernels[cut:]


def fmt_err(errs, prefix):
    """The largest relative error among the keys with this prefix, and the worst key's name."""
    sel = {k: v for k, v in errs.items() if k.startswith(prefix)}
    if not sel:
        return "n/a"
    worst = max(sel, key=lambda k: (not math.isfinite(sel[k]), sel[k]))
    name = worst[len(prefix):] if prefix.endswith("_") else worst
    return "%.1e" % sel[worst] if len(sel) == 1 else "%.1e (%s)" % (sel[worst], name)


def make_train_tables(rows):
    peers = (("torch_eager", "torch eager"), ("torch_compile", "torch.compile"),
             ("jax_jit", "jax jit"))
    t1 = ("| block | dims | fusec fused ms | fusec eager ms | torch eager ms | torch.compile ms "
          "| jax jit ms | fused vs fusec eager | fused vs torch eager | fused vs torch.compile "
          "| fused vs jax jit |\n"
          "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
    t2 = ("| block | runner | saved MB (activations) | planned peak MB | measured peak MB "
          "| launches fwd + bwd | fwd + bwd ms (sum of launch medians) |\n"
          "| --- | --- | ---: | ---: | ---: | ---: | ---: |\n")
    t3 = ("| block | runner | median ms | min–max ms (fusec: of the round medians; peers: of "
          "all timed calls) | IQR ms | max rel. error, outputs "
          "| max rel. error, gradients (worst) "
          "| first call ms | CPU idle before |\n"
          "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
    notes = ""
    for r in rows:
        fr, p = r["fusec"], r["peers"]
        fused = statistics.median(fr["fused_runs_ms"])
        eager = statistics.median(fr["eager_runs_ms"])
        others = [eager] + [p[k]["median_ms"] if k in p else None for k, _ in peers]
        t1 += "| %s | %s | %s | %s | %s |\n" % (
            r["name"], dims_str(r["dims"]), fmt_ms_num(fused),
            " | ".join(fmt_ms_num(x) for x in others),
            " | ".join("n/a" if x is None else "%.2fx" % (x / fused) for x in others))
        for prog, label in (("fused", "fusec fused (--remat auto)"),
                            ("eager", "fusec eager (--no-fuse --remat none)")):
            j = fr["json"][prog]
            fwd, bwd = split_phases(j["kernels"])
            t2 += "| %s | %s | %.1f | %.1f | %.1f | %d + %d | %s + %s |\n" % (
                r["name"], label, j["saved_bytes"] / 1e6, j["planned_peak_bytes"] / 1e6,
                j["peak_bytes"] / 1e6, len(fwd), len(bwd),
                fmt_ms_num(sum(k["median_ms"] or 0 for k in fwd)),
                fmt_ms_num(sum(k["median_ms"] or 0 for k in bwd)))
        if "torch_eager" in p:
            t2 += "| %s | torch eager (autograd's saved tensors) | %.1f | | | | |\n" % (
                r["name"], p["torch_eager"]["saved_bytes"] / 1e6)
        for key, runs in (("fusec fused", fr["fused_runs_ms"]),
                          ("fusec eager", fr["eager_runs_ms"])):
            sp = spread(runs)
            t3 += "| %s | %s | %s | %s–%s (%d rounds) | | %s | %s | | %s |\n" % (
                r["name"], key, fmt_ms_num(statistics.median(runs)), fmt_ms_num(sp["min_ms"]),
                fmt_ms_num(sp["max_ms"]), len(runs), fmt_err(r["errs"][key], "out"),
                fmt_err(r["errs"][key], "grad_"), fmt_idle(fr["idle_before"]))
        for key, label in peers:
            t = p.get(key)
            if t is None:
                continue
            t3 += "| %s | %s | %s | %s–%s | %s–%s | %s | %s | %s | %s |\n" % (
                r["name"], label, fmt_ms(t), fmt_ms_num(t["min_ms"]), fmt_ms_num(t["max_ms"]),
                fmt_ms_num(t["q1_ms"]), fmt_ms_num(t["q3_ms"]), fmt_err(t["errs"], "out"),
                fmt_err(t["errs"], "grad_"), fmt_ms_num(t["first_call_ms"]),
                fmt_idle(t["idle_before"]))
        g = r["grad_reference"]
        notes += "- `%s`: %s" % (r["name"], "gradients against %s; " % g["source"]
                                 if g["source"] else "no f64 gradient reference (no JAX, no "
                                 "torch, no NumPy backward): gradients unchecked")
        if g["forward_rel_err"]:
            notes += "the forward of each f64 candidate against the NumPy f64 forward: %s" % (
                ", ".join("%s %.1e" % kv for kv in g["forward_rel_err"].items()))
        if g["cross_rel_err"]:
            notes += "; their gradients against the reference's: %s" % ", ".join(
                "%s %.1e" % kv for kv in g["cross_rel_err"].items())
        notes += "\n"
    return ("\n### Median time of one training step: forward + backward (lower is better)\n\n" +
            t1 + "\nSpeedups are the other runner's median over fusec fused's (above 1: fusec "
            "fused is faster).\n\n### Memory of one training step\n\n" + t2 +
            "\n### Spread and agreement with the float64 reference\n\n" + t3 +
            "\nThe float64 gradient reference of each block:\n\n" + notes)


def machine_md(info, versions, stream_list):
    lines = [
        "- CPU: %s (family %s, model %s%s), %s CPU(s)%s, L3 %s; memory %s GiB" % (
            info.get("cpu", "?"), info.get("cpu_family", "?"), info.get("model", "?"),
            ", a %s guest" % info["hypervisor_vendor"] if "hypervisor_vendor" in info else "",
            info.get("cpus", "?"), ", AVX-512" if info.get("avx512") else ", no AVX-512",
            info.get("l3", "?"), info.get("memory_gib", "?")),
        "- ISA (lscpu flags): x86-64, %s" % (", ".join(info.get("isa", [])) or "?"),
        "- OS: %s" % info["platform"],
        "- fusec commit %s%s, built RelWithDebInfo (build-bench)" % (
            info.get("fusec_commit", "?"),
            " plus uncommitted changes outside docs/" if info.get("fusec_dirty") else ""),
        "- %s" % ", ".join(["Python " + info["python"], "NumPy " + info["numpy"]] +
                           ["%s %s" % kv for kv in versions.items()]),
        "- STREAM copy measured by `fusec bench` in the same run: %s GB/s" % (
            ", ".join("%.1f" % s for s in stream_list)),
        "- Threads: 2 everywhere (FUSEC_NUM_THREADS=2, torch.set_num_threads(2), XLA on 2 cores)",
        "- Timing: %s interleaved rounds; per round and runner %s warm-up calls (`fusec bench`: 3) "
        "and %s timed calls" % (
            info.get("rounds", "?"), info.get("warmup", "?"), info.get("repeat", "?")),
        "- Peers' allocator: glibc malloc %s" % (
            "keeping freed memory (MALLOC_MMAP_MAX_=0, MALLOC_TRIM_THRESHOLD_=1 TiB)"
            if os.environ.get("MALLOC_MMAP_MAX_") == "0" else "as it comes"),
        "- Peers' OpenMP threads: %s" % (
            "OMP_WAIT_POLICY=PASSIVE (block when idle, as fusec's pool does)"
            if os.environ.get("OMP_WAIT_POLICY") == "PASSIVE" else "the runtime's default waiting"),
        "- Measured %s; load average (1, 5, 15 min) before the run: %s, after: %s" % (
            info["date"], info.get("loadavg_before", "?"), info.get("loadavg", "?")),
    ]
    return "\n".join(lines) + "\n"


def update_doc(path, text, tag="peers"):
    with open(path) as f:
        doc = f.read()
    begin, end = "<!-- %s:begin -->" % tag, "<!-- %s:end -->" % tag
    i, j = doc.find(begin), doc.find(end)
    if i < 0 or j < i:
        raise RuntimeError("%s has no %s ... %s markers" % (path, begin, end))
    doc = doc[:i + len(begin)] + "\n" + text + doc[j:]
    with open(path, "w") as f:
        f.write(doc)


# ---------------------------------------------------------------------------------------
# One block: its check, then interleaved rounds
# ---------------------------------------------------------------------------------------

def block_data(blk, seed):
    """The block's seeded inputs, rounded to f32 (the reference sees them as the runners do),
    its NumPy f64 outputs, and the generator (the output gradients are drawn next)."""
    rng = np.random.default_rng(seed)
    inputs = blk["inputs"](rng, blk["dims"])
    inputs = {k: v.astype(np.float32).astype(np.float64) for k, v in inputs.items()}
    return rng, inputs, blk["ref"](inputs, blk["dims"])


def interleaved(args, blk, peers, extra=()):
    """--rounds rounds, each one `fusec bench` invocation then --repeat timed calls of every
    peer, so that load from other work on the machine falls on all runners alike."""
    fruns, prounds = [], {k: [] for k in peers}
    for rnd in range(args.rounds):
        log("   round %d/%d: %s" % (rnd + 1, args.rounds, ", ".join(
            [" ".join(["fusec bench"] + list(extra))] + list(peers))))
        fruns.append(fusec_bench(args.fusec, blk, args.threads, args.repeat, extra=extra))
        for key, p in peers.items():
            prounds[key].append(time_calls(p["call"], args.warmup, args.repeat))
    fj = [f["json"] for f in fruns]
    fused = [j["fused"]["median_ms"] for j in fj]
    mid = sorted(range(len(fj)), key=lambda i: fused[i])[len(fj) // 2]
    fusec = {"cmd": fruns[0]["cmd"], "json": fj[mid], "fused_runs_ms": fused,
             "eager_runs_ms": [j["eager"]["median_ms"] for j in fj],
             "stream_runs_gbps": [j["stream_gbps"] for j in fj],
             "idle_before": [f["idle_before"][0] for f in fruns]}
    timed = {}
    for key, p in peers.items():
        t = combine_rounds(prounds[key])
        t.update((k, v) for k, v in p.items() if k != "call")
        timed[key] = t
    return fusec, timed


def run_forward(args, blk, torch, jax, jnp):
    log("== %s %s" % (blk["name"], dims_str(blk["dims"])))
    _, inputs, refs = block_data(blk, args.seed)
    row = {"name": blk["name"], "label": blk["label"], "tf": blk["tf"], "dims": blk["dims"]}
    log("   fusec run (check against NumPy f64)")
    row["fusec_rel_err"] = fusec_check(args.fusec, blk, inputs, refs, args.threads, [])
    row["fusec_eager_rel_err"] = fusec_check(args.fusec, blk, inputs, refs, args.threads,
                                             ["--no-fuse"])
    peers = {}
    if torch is not None:
        log("   torch eager%s: first call" % ("" if args.no_compile else " + torch.compile"))
        peers.update(prepare_torch(torch, blk, inputs, refs, None if args.no_compile else ""))
    if jax is not None:
        log("   jax jit: first call")
        peers.update(prepare_jax(jax, jnp, blk, inputs, refs))
    row["fusec"], row["peers"] = interleaved(args, blk, peers)
    row["errs"] = dict([("fusec fused", row["fusec_rel_err"]),
                        ("fusec eager", row["fusec_eager_rel_err"])] +
                       [(k, v["rel_err"]) for k, v in row["peers"].items()])
    return row


def run_train(args, blk, torch, jax, jnp):
    log("== training step: %s %s" % (blk["name"], dims_str(blk["dims"])))
    rng, inputs, refs = block_data(blk, args.seed)
    gys = [rng.standard_normal(r.shape).astype(np.float32).astype(np.float64) for r in refs]
    sig = fusec_signature(args.fusec, blk)
    if len(sig["output"]) != len(refs) or list(inputs) != sig["input"] + sig["param"]:
        raise RuntimeError("%s: fusec's signature %s does not match the peers' inputs %s"
                           % (blk["tf"], sig, list(inputs)))
    log("   f64 gradient reference")
    ref = grad_reference(blk, inputs, gys, refs, torch, jax, jnp)
    grefs = ref.pop("grads")
    row = {"name": blk["name"], "label": blk["label"], "tf": blk["tf"], "dims": blk["dims"],
           "grad_reference": ref}
    log("   fusec run --train (check against %s)" % (ref["source"] or "no gradient reference"))
    row["errs"] = {
        "fusec fused": fusec_train_check(args.fusec, blk, sig, inputs, gys, refs, grefs,
                                         args.threads, []),
        "fusec eager": fusec_train_check(args.fusec, blk, sig, inputs, gys, refs, grefs,
                                         args.threads, ["--no-fuse", "--remat", "none"])}
    peers = {}
    if torch is not None and not args.no_torch:
        log("   torch eager%s: first step" % ("" if args.no_compile else " + torch.compile"))
        peers.update(prepare_torch_train(torch, blk, sig, inputs, gys, refs, grefs,
                                         None if args.no_compile else ""))
    if jax is not None and not args.no_jax:
        log("   jax jit: first step")
        peers.update(prepare_jax_train(jax, jnp, blk, inputs, gys, refs, grefs))
    row["fusec"], row["peers"] = interleaved(args, blk, peers, ["--train"])
    row["errs"].update((k, v["errs"]) for k, v in row["peers"].items())
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fusec", default=os.path.join(ROOT, "build-bench", "fusec"))
    names = ", ".join(b["name"] for b in BLOCKS)
    ap.add_argument("--blocks", default=",".join(b["name"] for b in BLOCKS if b["forward"]),
                    help="blocks timed forward, comma-separated, from: " + names +
                    " (default: %(default)s)")
    ap.add_argument("--train-blocks",
                    default=",".join(b["name"] for b in BLOCKS if b["train"]),
                    help="blocks timed as training steps (forward + backward), from: " +
                    names + " (default: %(default)s)")
    ap.add_argument("--no-forward", action="store_true", help="no forward rows")
    ap.add_argument("--no-train", action="store_true", help="no training rows")
    ap.add_argument("-D", dest="defs", action="append", default=[], metavar="BLOCK.NAME=VALUE",
                    help="override a dim of one block, e.g. -D gpt2_mlp.T=128")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3,
                    help="interleaved rounds per block: one `fusec bench` invocation and "
                    "--repeat timed calls of each peer per round")
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--no-jax", action="store_true")
    ap.add_argument("--no-gemm", action="store_true",
                    help="skip the table of matrix products alone")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--malloc", choices=("retain", "default"), default="retain",
                    help="retain (default): glibc keeps freed memory (MALLOC_MMAP_MAX_=0, "
                    "MALLOC_TRIM_THRESHOLD_ huge) so the peers' per-call output tensors do not "
                    "page-fault fresh memory on every call; default: glibc as it comes")
    ap.add_argument("--omp-wait", choices=("passive", "default"), default="passive",
                    help="passive (default): OMP_WAIT_POLICY=PASSIVE, OpenMP threads (torch, "
                    "MKL, Inductor) block between parallel regions as fusec's pool does; "
                    "default: the OpenMP runtime's spin-then-sleep")
    ap.add_argument("--quiet", type=float, default=0.0, metavar="SECONDS",
                    help="before each timed runner, wait up to SECONDS for the CPUs to be "
                    "at least 75%% idle (other processes); the idle fraction found is reported")
    ap.add_argument("--json-out", help="write every figure to this JSON file")
    ap.add_argument("--update-doc", help="replace the table between the markers in this file")
    args = ap.parse_args()
    # Both settings must be in the environment before libc and libgomp start: re-execute.
    want_env = {}
    if args.malloc == "retain":
        want_env.update(MALLOC_MMAP_MAX_="0", MALLOC_TRIM_THRESHOLD_="1099511627776")
    if args.omp_wait == "passive":
        want_env["OMP_WAIT_POLICY"] = "PASSIVE"
    if any(os.environ.get(k) != v for k, v in want_env.items()):
        os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ, **want_env))

    if not os.access(args.fusec, os.X_OK):
        sys.exit("peers.py: no fusec at %s (build it, or pass --fusec)" % args.fusec)
    def pick(names, off):
        want = [] if off else [n for n in names.split(",") if n]
        unknown = set(want) - {b["name"] for b in BLOCKS}
        if unknown:
            sys.exit("peers.py: unknown block(s) %s" % ", ".join(sorted(unknown)))
        return [dict(b, dims=dict(b["dims"])) for b in BLOCKS if b["name"] in want]
    blocks = pick(args.blocks, args.no_forward)
    train_blocks = pick(args.train_blocks, args.no_train)
    for dflt in args.defs:
        m = re.fullmatch(r"(\w+)\.(\w+)=(\d+)", dflt)
        if not m:
            sys.exit("peers.py: bad -D %s (want BLOCK.NAME=VALUE)" % dflt)
        for b in blocks + train_blocks:
            if b["name"] == m.group(1):
                b["dims"][m.group(2)] = int(m.group(3))

    QUIET["seconds"] = args.quiet
    # The peers see as many cores as fusec uses.
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    torch = None if args.no_torch else load_torch(args.threads)
    jax, jnp = (None, None) if args.no_jax else load_jax()
    versions = {}
    if torch is not None:
        versions["torch"] = torch.__version__
    if jax is not None:
        import jaxlib
        versions["jax"] = jax.__version__
        versions["jaxlib"] = jaxlib.__version__

    try:
        with open("/proc/loadavg") as f:
            load_before = " ".join(f.read().split()[:3])
    except OSError:
        load_before = "?"
    rows = [run_forward(args, blk, torch, jax, jnp) for blk in blocks]
    train_rows = [run_train(args, blk, torch, jax, jnp) for blk in train_blocks]
    failed = False
    for row in rows + train_rows:
        for who, errs in row["errs"].items():
            vals = errs.values() if isinstance(errs, dict) else errs
            if not all(e <= args.rtol for e in vals):  # a NaN fails too
                log("!! %s on %s: relative error %s over %g" % (who, row["name"], errs,
                                                                args.rtol))
                failed = True

    gemm_md = ""
    if rows and not args.no_gemm:
        log("== matrix products alone")
        grows, cfg = run_gemms(torch, jax, jnp, args.threads, args.warmup, args.repeat)
        gemm_md = ("\n### Matrix products alone (median, %d threads)\n\n" % args.threads +
                   gemm_table(grows, cfg))
    info = machine_info()
    info["loadavg_before"] = load_before
    info.update(rounds=args.rounds, warmup=args.warmup, repeat=args.repeat)
    sections = []
    if rows:
        main_t, spread_t, launch_t = make_tables(rows)
        streams = [r["fusec"]["json"]["stream_gbps"] for r in rows]
        sections.append(("peers", "### Machine and versions\n\n" +
                         machine_md(info, versions, streams) +
                         "\n### Median time of one forward call (lower is better)\n\n" + main_t +
                         "\n### Spread and agreement with NumPy float64\n\n" + spread_t +
                         "\n### fusec per launch (median of each launch, from the `fusec bench` "
                         "run above)\n" + launch_t + gemm_md))
    if train_rows:
        streams = [r["fusec"]["json"]["stream_gbps"] for r in train_rows]
        sections.append(("peers-train", "### Machine and versions (training run)\n\n" +
                         machine_md(info, versions, streams) + make_train_tables(train_rows)))
    for _, md in sections:
        print(md)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"machine": info, "versions": versions, "args": vars(args), "rows": rows,
                       "train_rows": train_rows}, f, indent=1, default=str)
    if args.update_doc:
        for tag, md in sections:
            update_doc(args.update_doc, md, tag)
    if failed:
        sys.exit("peers.py: some runner disagrees with NumPy float64 beyond --rtol")


if __name__ == "__main__":
    main()
