#!/usr/bin/env python3
"""check_numpy.py: end-to-end acceptance of examples/*.tf against float64 NumPy.

For each example, and for each of a few dim settings (the file's defaults, sizes that are
multiples of no vector width, sizes of 1), this script
  1. draws inputs at realistic scales from a seeded numpy Generator (activations N(0,1),
     weights N(0, 1/fan_in), norm gains 1 + 0.1 N(0,1), biases 0.1 N(0,1); never zeros),
     rounds them to float32 and saves them as .npy (int8 weights, quant_mlp's, are drawn as
     integers in [-127, 127] and saved as int8, exact in the reference);
  2. runs `fusec run FILE --device cpu --input NAME=PATH ... --out-dir DIR --check`, fused
     and again with --no-fuse, into fresh directories pre-filled with NaN "poison" files of
     the expected output names, so an output that is not written cannot pass;
  3. computes the block by hand in float64 NumPy from the same float32-rounded inputs and
     requires, for every output, rel = max|fusec - numpy| / max|numpy| <= 1e-4 (outputs with
     non-finite reference values must be non-finite at the same places with the same value);
  4. for the first dim setting, runs the fused program a second time and requires the
     outputs to be equal bit for bit (docs/cli.md: same thread count, same results).
It prints one table row per (example, dims, mode, output) and exits 1 on any failure,
77 when NumPy is not importable (ctest's skip code), 0 otherwise.

Usage:
  check_numpy.py --fusec build/fusec                    all examples
  check_numpy.py --fusec build/fusec --only gpt2_mlp    one example (repeatable)
  check_numpy.py --self-test                            checks of the NumPy side only
  check_numpy.py --fusec build/fusec --only gpt2_mlp --mutate
      the harness must fail: the reference is changed by 1e-3 of its scale in one element
      (the last), and the script passes only if fusec ran and every comparison caught it.
  --device cuda runs on a GPU instead of the CPU;
  --precision bf16|f16 compiles at that storage precision: the NumPy reference starts from
  the inputs rounded to the type and the bound is 8 u of the type (docs/precision.md);
  --precision f8: the inputs fusec takes in E4M3 (its IR says which: activations and weight
  matrices) rounded to E4M3 with the scale that fits their largest magnitude (checked against
  the scale the run prints), the others to bf16; every intermediate and output E4M3 in fusec
  and unrounded in NumPy, the bound 4 u of E4M3 (0.25); with --train the interface is bf16;
  --full adds each example's default dims where they are skipped for speed
  (residual_ln_gelu's [8192, 1024]); --keep keeps the temp dir; -v prints fusec's output.
  --train checks the gradients instead (`fusec run --train --grad-output ...`, fused and eager,
  on each example's smallest dim setting): every output gets a seeded N(0,1) gradient, and
  each float input's gradient (an int8 input has none) is compared, at GRAD_SAMPLES random elements and at its largest
  one, with the central difference of L = sum over outputs of <gradient, output> computed by
  the same float64 NumPy reference (Richardson-extrapolated, so its own error is far below the
  bound): |fusec - numpy| <= GRAD_TOL[precision] * max|fusec gradient| (the largest element is
  among those checked, so the scale itself is verified).
"""

import argparse
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("check_numpy.py: SKIP: numpy is not importable (pip install numpy, "
          "or apt-get install python3-numpy)")
    sys.exit(77)

REL_TOL = 1e-4
PRECISION = "keep"      # --precision: bf16 or f16 store the blocks in 16 bits (docs/precision.md)
# The bound --check applies to a narrow output, a(t) u(t) = 8 u (docs/tolerances.md)
PRECISION_TOL = {"bf16": 8 * 2.0 ** -8, "f16": 8 * 2.0 ** -11,
                 # f8: the interface is bf16 and every intermediate E4M3 (u = 2^-4); the bound of an
                 # f8 value, a(t) u(t) = 4 u (docs/tolerances.md), against the math unrounded
                 "f8": 4 * 2.0 ** -4}


def round_to_precision(a):
    """a (float32) rounded to the storage type of --precision, to nearest even, in float64."""
    a = np.asarray(a, dtype=np.float32)
    if PRECISION == "f16":
        return a.astype(np.float16).astype(np.float64)
    if PRECISION in ("bf16", "f8"):   # f8: the block's interface is bf16
        b = a.view(np.uint32).astype(np.uint64)
        b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16 << 16
        return b.astype(np.uint32).view(np.float32).astype(np.float64)
    return a.astype(np.float64)


def e4m3(a):
    """a (float64) rounded to OCP E4M3 (3 mantissa bits, subnormals from 2^-6 in steps of
    2^-9, largest 448), to nearest even, saturating."""
    a = np.asarray(a, dtype=np.float64)
    mag = np.abs(a)
    with np.errstate(divide="ignore"):
        e = np.floor(np.log2(np.where(mag > 0, mag, 1.0)))
    step = 2.0 ** (np.maximum(e, -6.0) - 3)
    q = np.minimum(np.round(mag / step) * step, 448.0)   # np.round: half to even
    return np.copysign(q, a)


def e4m3_scale(a):
    """The power of two s for which s * max|a| fits E4M3's 448 and 2 s * max|a| does not
    (1 when a is all zeros): the scale an f8 input gets from its file."""
    m = float(np.max(np.abs(a[np.isfinite(a)]))) if np.isfinite(a).any() else 0.0
    if m == 0:
        return 1.0
    s = 2.0 ** math.floor(math.log2(448.0 / m))
    while s * m > 448.0:
        s /= 2
    while 2 * s * m <= 448.0:
        s *= 2
    return s


def f8_interface_inputs(fusec, tf, dims_args):
    """The inputs a --precision f8 block takes as E4M3 tensors with scales, from its IR."""
    p = subprocess.run([fusec, tf, "--precision", "f8", "--emit", "ir", "-o", "-"] + dims_args,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=RUN_TIMEOUT_S)
    text = p.stdout.decode("utf-8", "replace")
    if p.returncode != 0:
        raise RuntimeError("fusec --emit ir failed: " + text)
    return set(re.findall(r'^\s+(?:input|param) %\d+ "([^"]+)": f8e4m3\[', text, re.M))


def printed_scales(text):
    """{input name: scale} from `fusec run`'s lines "input NAME TYPE ..., scale 2^K"."""
    return {m.group(1): 2.0 ** int(m.group(2))
            for m in re.finditer(r"^  input  (\S+) .*, scale 2\^(-?\d+)$", text, re.M)}


def rel_tol():
    return PRECISION_TOL.get(PRECISION, REL_TOL)


# --train: the bound on a gradient element, relative to the gradient's largest magnitude. A
# gradient goes through about twice the roundings of the forward (the forward's values that
# the backward reads, then the backward's own), so twice the forward's bound: keep 2e-4 (f32
# arithmetic), bf16 16 u, f16 16 u; f8 stores the gradients of its E4M3 values in E5M2
# (u = 2^-3), the bound of an E5M2 value a(t) u(t) = 4 u (docs/tolerances.md).
GRAD_TOL = {"keep": 2e-4, "bf16": 16 * 2.0 ** -8, "f16": 16 * 2.0 ** -11, "f8": 4 * 2.0 ** -3}
GRAD_SAMPLES = 6
HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "examples"))
RUN_TIMEOUT_S = 300
DEVICE = "cpu"          # --device

# ---------------------------------------------------------------------------------------
# The ops, by hand, in float64. Each follows docs/language.md's definition.
# ---------------------------------------------------------------------------------------
_erf_scalar = np.frompyfunc(math.erf, 1, 1)


def erf(x):
    return _erf_scalar(x).astype(np.float64)


def gelu(x, approx="none"):
    if approx == "tanh":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def sigmoid(x):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def silu(x):
    return x * sigmoid(x)


def layernorm(x, g=None, b=None, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)   # biased
    y = (x - mu) / np.sqrt(var + eps)
    if g is not None:
        y = y * g
    if b is not None:
        y = y + b
    return y


def rmsnorm(x, g=None, eps=1e-6):
    y = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)
    return y * g if g is not None else y


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax(x, axis=-1):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def causal_mask(s, value=-np.inf):
    tq, tk = s.shape[-2], s.shape[-1]
    i = np.arange(tq)[:, None]
    j = np.arange(tk)[None, :]
    return np.where(j <= i + (tk - tq), s, value)


def attention(q, k, v, causal=False, scale=None):
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    s = (q @ np.swapaxes(k, -1, -2)) * scale
    if causal:
        s = causal_mask(s)
    return softmax(s, axis=-1) @ v


def split_heads(x, h):
    b, t, c = x.shape
    return x.reshape(b, t, h, c // h).transpose(0, 2, 1, 3)


def merge_heads(o):
    b, h, t, d = o.shape
    return o.transpose(0, 2, 1, 3).reshape(b, t, h * d)


def rope(x, cos, sin):
    x1, x2 = np.split(x, 2, axis=-1)
    return x * cos + np.concatenate([-x2, x1], axis=-1) * sin


def rope_tables(t, d, base=10000.0, start=5):
    """cos/sin tables [t, d] in the rotate-half layout. Positions start at `start` (as when
    continuing after a prompt) so that no entry of sin is zero."""
    inv_freq = base ** (-np.arange(0, d, 2, dtype=np.float64) / d)      # [d/2]
    ang = np.outer(np.arange(start, start + t, dtype=np.float64), inv_freq)  # [t, d/2]
    emb = np.concatenate([ang, ang], axis=-1)
    return np.cos(emb), np.sin(emb)


# ---------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------
class Gen:
    """Realistic, seeded, never-zero inputs."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def _nz(self, a):
        a = np.asarray(a, dtype=np.float64)
        a[np.float32(a) == 0] = 1e-3            # never an exact zero after rounding
        return a

    def act(self, *shape):
        return self._nz(self.rng.standard_normal(shape))

    def weight(self, fan_in, *shape):
        return self._nz(self.rng.standard_normal(shape) / math.sqrt(fan_in))

    def gain(self, *shape):
        return self._nz(1.0 + 0.1 * self.rng.standard_normal(shape))

    def bias(self, *shape):
        return self._nz(0.1 * self.rng.standard_normal(shape))

    def qweight(self, *shape):
        """int8 weights: integers uniform in [-127, 127], never zero."""
        q = self.rng.integers(-127, 128, size=shape).astype(np.int8)
        q[q == 0] = 1
        return q

    def qscale(self, fan_in, *shape):
        """Per-output-channel scales of qweight: the dequantized weights have variance
        about 1/fan_in, as Gen.weight's (a uniform [-127, 127] has variance 127^2 / 3)."""
        return math.sqrt(3.0) / (127.0 * math.sqrt(fan_in)) * self.gain(*shape)


def as_file(a):
    """An input as its .npy file holds it: int8 arrays as they are (an i8 input), anything
    else rounded to float32."""
    if np.asarray(a).dtype == np.int8:
        return np.asarray(a)
    return np.asarray(a, dtype=np.float32)


def as_reference(a):
    """The values the reference computes with: an int8 input exactly (no precision changes
    an i8 value), a float one rounded to the storage type of --precision."""
    return a.astype(np.float64) if a.dtype == np.int8 else round_to_precision(a)


# ---------------------------------------------------------------------------------------
# The examples: inputs (in any order; names as in the .tf file), the reference, the
# names of the outputs (docs/language.md: a returned plain name keeps it, else outK), and the
# dim settings to run (None: the file's defaults, no -D).
# ---------------------------------------------------------------------------------------
def mlp_inputs(d, g):
    B, T, C = d["B"], d["T"], d["C"]
    return {"x": g.act(B, T, C), "g": g.gain(C), "b": g.bias(C),
            "w_fc": g.weight(C, C, 4 * C), "b_fc": g.bias(4 * C),
            "w_proj": g.weight(4 * C, 4 * C, C), "b_proj": g.bias(C)}


def mlp_ref(d, i):
    h = layernorm(i["x"], i["g"], i["b"], eps=1e-5)
    u = gelu(h @ i["w_fc"] + i["b_fc"], approx="tanh")
    return {"out0": i["x"] + u @ i["w_proj"] + i["b_proj"]}


def quant_mlp_inputs(d, g):
    B, T, C = d["B"], d["T"], d["C"]
    return {"x": g.act(B, T, C), "g": g.gain(C), "b": g.bias(C),
            "w_fc": g.qweight(C, 4 * C), "s_fc": g.qscale(C, 4 * C), "b_fc": g.bias(4 * C),
            "w_proj": g.qweight(4 * C, C), "s_proj": g.qscale(4 * C, C), "b_proj": g.bias(C)}


def quant_mlp_ref(d, i):
    """gpt2_mlp with weights dequantized per output channel, in float64."""
    h = layernorm(i["x"], i["g"], i["b"], eps=1e-5)
    u = gelu(h @ (i["w_fc"] * i["s_fc"]) + i["b_fc"], approx="tanh")
    return {"out0": i["x"] + u @ (i["w_proj"] * i["s_proj"]) + i["b_proj"]}


def attn_inputs(d, g):
    B, T, C = d["B"], d["T"], d["C"]
    return {"x": g.act(B, T, C), "w_qkv": g.weight(C, C, 3 * C), "b_qkv": g.bias(3 * C),
            "w_o": g.weight(C, C, C), "b_o": g.bias(C)}


def attn_ref(d, i):
    H, C = d["H"], d["C"]
    q, k, v = np.split(i["x"] @ i["w_qkv"] + i["b_qkv"], 3, axis=-1)
    q, k, v = split_heads(q, H), split_heads(k, H), split_heads(v, H)
    s = q @ np.swapaxes(k, -1, -2) * (1.0 / math.sqrt(C // H))
    o = softmax(causal_mask(s)) @ v
    return {"out0": merge_heads(o) @ i["w_o"] + i["b_o"]}


def llama_inputs(d, g):
    B, T, C, H, F = d["B"], d["T"], d["C"], d["H"], d["F"]
    cos, sin = rope_tables(T, C // H)
    return {"x": g.act(B, T, C), "cos": cos, "sin": sin,
            "g_attn": g.gain(C), "wq": g.weight(C, C, C), "wk": g.weight(C, C, C),
            "wv": g.weight(C, C, C), "wo": g.weight(C, C, C), "g_mlp": g.gain(C),
            "w1": g.weight(C, C, F), "w3": g.weight(C, C, F), "w2": g.weight(F, F, C)}


def llama_ref(d, i):
    H = d["H"]
    x = i["x"]
    h = rmsnorm(x, i["g_attn"], eps=1e-6)
    q = rope(split_heads(h @ i["wq"], H), i["cos"], i["sin"])
    k = rope(split_heads(h @ i["wk"], H), i["cos"], i["sin"])
    v = split_heads(h @ i["wv"], H)
    o = merge_heads(attention(q, k, v, causal=True))
    x = x + o @ i["wo"]
    h = rmsnorm(x, i["g_mlp"], eps=1e-6)
    return {"out0": x + (silu(h @ i["w1"]) * (h @ i["w3"])) @ i["w2"]}


def softmax_logits_inputs(d, g):
    return {"logits": g.act(d["B"], d["V"])}


def softmax_logits_ref(d, i):
    z = i["logits"] * 1000.0
    return {"p": softmax(z), "lp": log_softmax(z)}


def keywords_inputs(d, g):
    N, M = d["N"], d["M"]
    return {"int": g.act(N, M), "float": g.gain(M), "threadIdx": g.act(M),
            "__global__": g.weight(M, M, M), "blockDim": g.bias(M)}


def keywords_ref(d, i):
    def float_block(x, t):
        return softmax(x * t, axis=-1) + sigmoid(x)
    s = float_block(i["int"], i["threadIdx"])
    v = layernorm(s @ i["__global__"], i["float"], i["blockDim"], eps=1e-5)
    r = gelu(v, approx="tanh") * 0.5 + np.exp(-np.abs(v))
    return {"int": r, "out1": r.mean(axis=-1)}


def block_inputs(d, g):
    B, T, C = d["B"], d["T"], d["C"]
    return {"x": g.act(B, T, C),
            "ln1_g": g.gain(C), "ln1_b": g.bias(C),
            "w_qkv": g.weight(C, C, 3 * C), "b_qkv": g.bias(3 * C),
            "w_o": g.weight(C, C, C), "b_o": g.bias(C),
            "ln2_g": g.gain(C), "ln2_b": g.bias(C),
            "w_fc": g.weight(C, C, 4 * C), "b_fc": g.bias(4 * C),
            "w_proj": g.weight(4 * C, 4 * C, C), "b_proj": g.bias(C)}


def block_ref(d, i):
    H = d["H"]

    def attn(x):
        q, k, v = np.split(x @ i["w_qkv"] + i["b_qkv"], 3, axis=-1)
        o = attention(split_heads(q, H), split_heads(k, H), split_heads(v, H), causal=True)
        return merge_heads(o) @ i["w_o"] + i["b_o"]

    def mlp(x):
        return gelu(x @ i["w_fc"] + i["b_fc"], approx="tanh") @ i["w_proj"] + i["b_proj"]

    x = i["x"]
    x = x + attn(layernorm(x, i["ln1_g"], i["ln1_b"]))
    x = x + mlp(layernorm(x, i["ln2_g"], i["ln2_b"]))
    return {"x": x}


def rlg_inputs(d, g):
    N, C = d["N"], d["C"]
    return {"x": g.act(N, C), "y": g.act(N, C), "g": g.gain(C), "b": g.bias(C),
            "bias": g.bias(C)}


def rlg_ref(d, i):
    r = i["x"] + i["y"]
    return {"r": r, "out1": gelu(layernorm(r, i["g"], i["b"], eps=1e-5) + i["bias"])}


EXAMPLES = {
    # name: (inputs, reference, variants, variants added by --full)
    "gpt2_mlp": (mlp_inputs, mlp_ref,
                 [None, {"B": 1, "T": 37, "C": 33}], []),
    "quant_mlp": (quant_mlp_inputs, quant_mlp_ref,
                  [None, {"B": 1, "T": 37, "C": 33}], []),
    "gpt2_attn": (attn_inputs, attn_ref,
                  [None, {"B": 1, "T": 37, "C": 63, "H": 7}, {"B": 3, "T": 1, "C": 12, "H": 2}],
                  []),
    "llama_layer": (llama_inputs, llama_ref,
                    [None, {"B": 1, "T": 19, "C": 60, "H": 3, "F": 161}], []),
    "softmax_logits": (softmax_logits_inputs, softmax_logits_ref,
                       [None, {"B": 1, "V": 129}, {"B": 3, "V": 1}], []),
    "keywords": (keywords_inputs, keywords_ref, [None, {"N": 1, "M": 7}], []),
    "gpt2_block": (block_inputs, block_ref,
                   [None, {"B": 1, "T": 23, "C": 36, "H": 3}], []),
    "residual_ln_gelu": (rlg_inputs, rlg_ref,
                         [{"N": 77, "C": 333}, {"N": 2, "C": 1}], [None]),
}


def parse_dims(path):
    """The dim defaults declared in a .tf file: {name: int}. Dims without a default map
    to None. Only `dim` declarations are read (one or more lines, comma-separated)."""
    src = open(path, encoding="utf-8").read()
    src = re.sub(r"#[^\n]*", "", src)
    dims = {}
    for m in re.finditer(r"\bdim\b((?:\s*[A-Za-z_]\w*\s*(?:=\s*\d+)?\s*,)*\s*[A-Za-z_]\w*"
                         r"\s*(?:=\s*\d+)?)", src):
        for item in m.group(1).split(","):
            name, _, val = item.partition("=")
            dims[name.strip()] = int(val) if val.strip() else None
    return dims


# ---------------------------------------------------------------------------------------
# Comparison
# ---------------------------------------------------------------------------------------
def compare(got, ref):
    """Returns (ok, max_abs_err, rel_err, note). rel = max|got - ref| / max|ref| over the
    finite reference values; non-finite reference values must be matched exactly."""
    if got is None:
        return False, math.inf, math.inf, "missing"
    if got.shape != ref.shape:
        return False, math.inf, math.inf, "shape %s, expected %s" % (got.shape, ref.shape)
    # f32, or at --precision f16 an f16 file (bf16 is written as f32); the values a block keeps
    # f32 (sums, means, the loss) stay f32
    if got.dtype != np.float32 and not (PRECISION == "f16" and got.dtype == np.float16):
        return False, math.inf, math.inf, "dtype %s, expected float32" % got.dtype
    g = got.astype(np.float64)
    fin = np.isfinite(ref)
    if not np.array_equal(g[~fin], ref[~fin]):
        return False, math.inf, math.inf, "non-finite reference values not matched"
    if g.size == 0 or not fin.any():
        return True, 0.0, 0.0, ""
    gf, rf = g[fin], ref[fin]
    if not np.isfinite(gf).all():
        n = int((~np.isfinite(gf)).sum())
        return False, math.inf, math.inf, "%d non-finite values (NaN: unwritten?)" % n
    abs_err = float(np.max(np.abs(gf - rf)))
    scale = float(np.max(np.abs(rf)))
    rel = abs_err / scale if scale > 0 else abs_err
    return rel <= rel_tol(), abs_err, rel, ""


def mutate(ref):
    """A reference wrong by 1e-3 of its scale in one element, the last (where tail
    handling lives)."""
    out = {}
    for name, r in ref.items():
        r = r.copy()
        flat = r.reshape(-1)
        scale = float(np.max(np.abs(r[np.isfinite(r)]))) if np.isfinite(r).any() else 1.0
        flat[-1] += 1e-3 * (scale if scale > 0 else 1.0)
        out[name] = r
    return out


# ---------------------------------------------------------------------------------------
# Running fusec
# ---------------------------------------------------------------------------------------
def save_npy(path, a):
    np.save(path, np.ascontiguousarray(a))


def poison(out_dir, ref):
    os.makedirs(out_dir)
    for name, r in ref.items():
        save_npy(os.path.join(out_dir, name + ".npy"), np.full(r.shape, np.nan, np.float32))


def run_fusec(fusec, example_file, dims_args, input_args, out_dir, extra, verbose):
    cmd = [fusec, "run", example_file, "--device", DEVICE] + input_args + \
          ["--out-dir", out_dir] + dims_args + extra
    env = dict(os.environ)
    env.setdefault("FUSEC_NUM_THREADS", "2")
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                           timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, "timed out after %d s: %s" % (RUN_TIMEOUT_S, " ".join(cmd)), cmd
    text = p.stdout.decode("utf-8", "replace")
    if verbose:
        print("$ " + " ".join(cmd))
        print(text.rstrip())
    return p.returncode, text, cmd


def load_outputs(out_dir, names):
    got = {}
    for n in names:
        path = os.path.join(out_dir, n + ".npy")
        try:
            got[n] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            print("  cannot read %s: %s" % (path, e))
            got[n] = None
    extra = sorted(f[:-4] for f in os.listdir(out_dir)
                   if f.endswith(".npy") and f[:-4] not in names)
    return got, extra


def describe(rc):
    if rc is None:
        return "timeout"
    if rc < 0:
        return "signal %d" % -rc
    return "exit %d" % rc


class Table:
    def __init__(self):
        self.rows = []

    def add(self, *row):
        self.rows.append(tuple(str(c) for c in row))
        print("  " + "  ".join(self.rows[-1]), flush=True)

    def show(self, header):
        rows = [header] + self.rows
        w = [max(len(r[k]) for r in rows) for k in range(len(header))]
        print()
        for k, r in enumerate(rows):
            print("  ".join(c.ljust(w[j]) for j, c in enumerate(r)).rstrip())
            if k == 0:
                print("  ".join("-" * x for x in w))


def fusec_failed(table, name, label, mode, rc, text, cmd):
    """A row for a fusec run that did not exit 0, then its command and the end of its output."""
    table.add(name, label, mode, "-", "-", "-", "-", "FAIL (fusec %s)" % describe(rc))
    print("    $ " + " ".join(cmd))
    for line in (text or "").rstrip().splitlines()[-15:]:
        print("    | " + line)


def variant_dims(defaults, over):
    """The dims of a variant (the file's defaults, overridden), its label and its -D args."""
    d = dict(defaults)
    d.update(over or {})
    label = "defaults" if over is None else ",".join("%s=%d" % kv for kv in over.items())
    dims_args = []
    for k, v in (over or {}).items():
        dims_args += ["-D", "%s=%d" % (k, v)]
    return d, label, dims_args


def loss(reference, d, inputs, gouts):
    """L = sum over outputs of <gradient, output>, in float64."""
    with np.errstate(over="ignore", under="ignore"):
        out = reference(d, inputs)
    return math.fsum(float(np.sum(gouts[o] * out[o])) for o in gouts)


def fd_partial(reference, d, inputs, gouts, name, e):
    """dL/d inputs[name].flat[e] by central differences at h and h/2, Richardson-extrapolated
    (error O(h^4)); h = 1e-4 max(1, |x|)."""
    x = inputs[name]
    v = float(x.flat[e])
    h = 1e-4 * max(1.0, abs(v))

    def at(t):
        a = x.copy()
        a.flat[e] = t
        return loss(reference, d, dict(inputs, **{name: a}), gouts)

    d1 = (at(v + h) - at(v - h)) / (2 * h)
    d2 = (at(v + h / 2) - at(v - h / 2)) / h
    return (4 * d2 - d1) / 3


def check_example_train(name, args, work, table):
    """--train: each float input's gradient against finite differences of the NumPy
    reference, on the example's smallest dim setting; returns the number of failures."""
    make_inputs, reference, variants, _ = EXAMPLES[name]
    tf = os.path.join(EXAMPLES_DIR, name + ".tf")
    defaults = parse_dims(tf)
    d, label, dims_args = variant_dims(defaults, variants[1] if len(variants) > 1 else variants[0])
    seed = 5000 + sum(map(ord, name))
    gen = Gen(seed)
    vdir = os.path.join(work, "%s-train" % name)
    os.makedirs(vdir)
    input_args, inputs, floats = [], {}, []
    for n, a in make_inputs(d, gen).items():
        a32 = as_file(a)
        path = os.path.join(vdir, "in_%s.npy" % len(input_args))
        save_npy(path, a32)
        input_args += ["--input", "%s=%s" % (n, path)]
        inputs[n] = as_reference(a32)
        if a32.dtype != np.int8:
            floats.append(n)        # an int8 input has no gradient
    with np.errstate(over="ignore", under="ignore"):
        ref = reference(d, inputs)
    gouts = {}
    for o, r in ref.items():
        g32 = np.asarray(gen.act(*r.shape), dtype=np.float32).reshape(r.shape)
        path = os.path.join(vdir, "gout_%s.npy" % o)
        save_npy(path, g32)
        input_args += ["--grad-output", "%s=%s" % (o, path)]
        gouts[o] = round_to_precision(g32).reshape(r.shape)
    rng = np.random.default_rng(seed)
    failures = 0
    for mode, flags in (("fused", []), ("eager", ["--no-fuse"])):
        out_dir = os.path.join(vdir, "out-" + mode)
        poison(out_dir, {"grad_" + n: inputs[n] for n in floats})
        prec = ["--precision", PRECISION] if PRECISION != "keep" else []
        rc, text, cmd = run_fusec(args.fusec, tf, dims_args, input_args, out_dir,
                                  flags + prec + ["--train", "--check"], args.verbose)
        if rc != 0:
            failures += 1
            fusec_failed(table, name, label, mode, rc, text, cmd)
            continue
        got, extra = load_outputs(out_dir, ["grad_" + n for n in floats])
        if any(e.startswith("grad_") for e in extra):   # e.g. a gradient of an int8 input
            failures += 1
            table.add(name, label, mode, ",".join(extra), "-", "-", "-", "FAIL (unexpected gradients)")
        for n in floats:
            x = inputs[n]
            g = got["grad_" + n]
            if g is None or g.shape != x.shape or not np.isfinite(g).all():
                failures += 1
                table.add(name, label, mode, "grad_" + n, "-", "-", "-",
                          "FAIL (%s)" % ("missing" if g is None else "shape %s" % (g.shape,)
                                         if g.shape != x.shape else "non-finite values"))
                continue
            g = g.astype(np.float64)
            top = int(np.argmax(np.abs(g)))
            picks = sorted({top} | set(int(e) for e in rng.integers(0, x.size, GRAD_SAMPLES)))
            scale = float(np.abs(g.flat[top]))
            worst = worst_mut = 0.0
            for e in picks:
                fd = fd_partial(reference, d, inputs, gouts, n, e)
                worst = max(worst, abs(float(g.flat[e]) - fd))
                # --mutate: the reference's largest element off by twice the bound
                fd_mut = fd + (2 * GRAD_TOL[PRECISION] * scale if e == top else 0.0)
                worst_mut = max(worst_mut, abs(float(g.flat[e]) - fd_mut))
            rel = worst / scale if scale > 0 else worst
            ok = rel <= GRAD_TOL[PRECISION]
            note = ""
            if args.mutate:
                caught = worst_mut / scale > GRAD_TOL[PRECISION] if scale > 0 else False
                note = (" (mutation caught)" if caught else " (mutation NOT caught)") if ok else \
                    " (fails even unmutated)"
                ok = ok and caught
            failures += not ok
            table.add(name, label, mode, "grad_" + n, "x".join(map(str, x.shape)) or "scalar",
                      "%.3g" % worst, "%.3g" % rel, ("ok" if ok else "FAIL") + note)
    return failures


def check_example(name, args, work, table):
    """Runs every variant of one example; returns the number of failures."""
    make_inputs, reference, variants, full_variants = EXAMPLES[name]
    tf = os.path.join(EXAMPLES_DIR, name + ".tf")
    if not os.path.exists(tf):
        table.add(name, "-", "-", "-", "-", "-", "-", "FAIL (missing %s)" % tf)
        return 1
    defaults = parse_dims(tf)
    if args.full:
        variants = variants + full_variants
    if args.mutate:
        variants = variants[:1]
    failures = 0
    for vi, over in enumerate(variants):
        d, label, dims_args = variant_dims(defaults, over)
        seed = 1000 + 17 * vi + sum(map(ord, name))
        inputs64 = make_inputs(d, Gen(seed))
        vdir = os.path.join(work, "%s-%d" % (name, vi))
        os.makedirs(vdir)
        input_args, inputs, scales = [], {}, {}
        f8in = f8_interface_inputs(args.fusec, tf, dims_args) if PRECISION == "f8" else set()
        for n, a in inputs64.items():
            a32 = as_file(a)
            path = os.path.join(vdir, "in_%d.npy" % len(input_args))
            save_npy(path, a32)
            input_args += ["--input", "%s=%s" % (n, path)]
            if n in f8in:                           # E4M3 at the scale that fits the file
                scales[n] = e4m3_scale(a32.astype(np.float64))
                inputs[n] = e4m3(a32.astype(np.float64) * scales[n]) / scales[n]
            else:
                inputs[n] = as_reference(a32)       # the same rounded values, in f64
        with np.errstate(over="ignore", under="ignore"):
            ref = reference(d, inputs)
        ref_mut = mutate(ref) if args.mutate else None
        modes = [("fused", [])] if args.mutate else [("fused", []), ("eager", ["--no-fuse"])]
        first_fused = None
        for mode, flags in modes:
            out_dir = os.path.join(vdir, "out-" + mode)
            poison(out_dir, ref)
            prec = ["--precision", PRECISION] if PRECISION != "keep" else []
            rc, text, cmd = run_fusec(args.fusec, tf, dims_args, input_args, out_dir,
                                      flags + prec + ["--check"], args.verbose)
            if rc != 0:
                failures += 1
                fusec_failed(table, name, label, mode, rc, text, cmd)
                if args.mutate:
                    return failures + 1
                continue
            if printed_scales(text) != scales:
                failures += 1
                table.add(name, label, mode, "-", "-", "-", "-", "FAIL (input scales %s, expected %s)"
                          % (printed_scales(text), scales))
            got, extra = load_outputs(out_dir, list(ref))
            if extra:
                failures += 1
                table.add(name, label, mode, ",".join(extra), "-", "-", "-",
                          "FAIL (unexpected outputs; expected %s)" % ",".join(ref))
            mode_ok = not extra
            for out, r in ref.items():
                ok, abs_err, rel, note = compare(got[out], r)
                if args.mutate:
                    # The output must pass against the true reference and fail against
                    # the mutated one: the harness notices a single wrong element.
                    caught = not compare(got[out], ref_mut[out])[0]
                    note = ("mutation caught" if caught else "mutation NOT caught") \
                        if ok else "fails even unmutated: " + (note or "over tolerance")
                    ok = ok and caught
                if not ok:
                    failures += 1
                    mode_ok = False
                table.add(name, label, mode, out, "x".join(map(str, r.shape)) or "scalar",
                          "%.3g" % abs_err, "%.3g" % rel,
                          ("ok" if ok else "FAIL") + (" (%s)" % note if note else ""))
            if mode == "fused" and mode_ok:
                first_fused = got       # correct outputs: worth repeating
        # Determinism: a second fused run gives the same bits.
        if vi == 0 and not args.mutate and first_fused is not None:
            out_dir = os.path.join(vdir, "out-repeat")
            poison(out_dir, ref)
            rc, text, cmd = run_fusec(args.fusec, tf, dims_args, input_args, out_dir,
                                      ["--precision", PRECISION] if PRECISION != "keep" else [],
                                      args.verbose)
            if rc != 0:
                failures += 1
                table.add(name, label, "repeat", "-", "-", "-", "-",
                          "FAIL (fusec %s)" % describe(rc))
            else:
                again, _ = load_outputs(out_dir, list(ref))
                for out in ref:
                    same = again[out] is not None and \
                        again[out].tobytes() == first_fused[out].tobytes()
                    if not same:
                        failures += 1
                    table.add(name, label, "repeat", out, "-", "-", "-",
                              "ok (bitwise equal)" if same else "FAIL (differs from 1st run)")
    return failures


# ---------------------------------------------------------------------------------------
# Self-test of the NumPy side (no fusec needed)
# ---------------------------------------------------------------------------------------
def self_test():
    fails = []

    def expect(cond, what):
        print("  %-66s %s" % (what, "ok" if cond else "FAIL"))
        if not cond:
            fails.append(what)

    rng = np.random.default_rng(7)
    # compare() itself
    r = rng.standard_normal((5, 7))
    r32 = r.astype(np.float32)
    expect(compare(r32, r32.astype(np.float64))[0], "compare: equal arrays pass")
    expect(compare(r32, r)[0], "compare: float32 rounding passes")
    bad = r32.copy()
    bad[-1, -1] += np.float32(2e-4 * np.abs(r).max())
    expect(not compare(bad, r)[0], "compare: one element off by 2e-4 of the scale fails")
    bad = r32.copy()
    bad[2, 3] = np.nan
    expect(not compare(bad, r)[0], "compare: a NaN (unwritten element) fails")
    expect(not compare(r32[:, :6], r)[0], "compare: a wrong shape fails")
    expect(not compare(r, r)[0], "compare: a float64 output (wrong dtype) fails")
    expect(not compare(None, r)[0], "compare: a missing output fails")
    # E4M3: 3 mantissa bits, ties to even, saturating at 448, subnormals in steps of 2^-9
    q = e4m3(np.array([1.0625, 1.1875, 17.0, 500.0, -2.5e-3, 2.0 ** -10, 0.0]))
    expect(list(q) == [1.0, 1.25, 16.0, 448.0, -2.0 ** -9, 0.0, 0.0], "e4m3: ties to even, saturation, subnormals")
    expect(e4m3_scale(np.array([3.0, -100.0])) == 4.0 and e4m3_scale(np.array([448.0])) == 1.0 and
           e4m3_scale(np.array([449.0])) == 0.5 and e4m3_scale(np.zeros(3)) == 1.0, "e4m3_scale: the largest that fits")
    ri = r.copy()
    ri[0, 0] = -np.inf
    gi = ri.astype(np.float32)
    expect(compare(gi, ri)[0], "compare: matching -inf passes")
    gi[0, 0] = 0
    expect(not compare(gi, ri)[0], "compare: unmatched -inf fails")
    m = mutate({"a": r})["a"]
    expect(not compare(r32, m)[0], "mutate: the mutated reference is caught")

    # The ops against known values and independent formulations
    expect(abs(gelu(np.array([1.0]))[0] - 0.8413447460685429) < 1e-15, "gelu(1) exact")
    expect(abs(gelu(np.array([1.0]), "tanh")[0] - 0.8411919906082768) < 1e-15, "gelu(1) tanh")
    xs = np.linspace(-6, 6, 1001)
    expect(np.max(np.abs(gelu(xs) - gelu(xs, "tanh"))) < 1e-3, "gelu: tanh form within 1e-3")
    expect(abs(silu(np.array([1.0]))[0] - 0.7310585786300049) < 1e-15, "silu(1)")
    x = rng.standard_normal((4, 33)) * 3 + 2
    y = layernorm(x)
    expect(np.allclose(y.mean(-1), 0, atol=1e-12) and np.allclose(y.var(-1), 1, atol=1e-4),
           "layernorm: mean 0, variance 1 (eps aside)")
    y = rmsnorm(x)
    expect(np.allclose(np.sqrt((y * y).mean(-1)), 1, atol=1e-5), "rmsnorm: unit RMS")
    z = rng.standard_normal((3, 50257)) * 1000
    p, lp = softmax(z), log_softmax(z)
    expect(np.isfinite(p).all() and np.isfinite(lp).all() and np.allclose(p.sum(-1), 1),
           "softmax/log_softmax of logits*1000: finite, rows sum to 1")
    z = rng.standard_normal((3, 40))
    expect(np.allclose(np.log(softmax(z)), log_softmax(z), atol=1e-14),
           "log_softmax == log(softmax) on moderate logits")
    # causal attention against a loop over queries, Tq < Tk included
    for tq, tk in ((6, 6), (3, 7), (1, 1)):
        q = rng.standard_normal((2, tq, 5))
        k = rng.standard_normal((2, tk, 5))
        v = rng.standard_normal((2, tk, 4))
        o = attention(q, k, v, causal=True)
        o2 = np.zeros_like(o)
        for b in range(2):
            for i in range(tq):
                jmax = i + (tk - tq)
                s = np.array([q[b, i] @ k[b, j] / math.sqrt(5) for j in range(jmax + 1)])
                w = np.exp(s - s.max())
                w /= w.sum()
                o2[b, i] = sum(w[j] * v[b, j] for j in range(jmax + 1))
        expect(np.allclose(o, o2, atol=1e-13), "causal attention == loop (Tq=%d, Tk=%d)" % (tq, tk))
    # rotate-half rope == rotating each pair (x[i], x[i + D/2]) as a complex number
    t, dd = 9, 8
    cos, sin = rope_tables(t, dd)
    x = rng.standard_normal((2, 3, t, dd))
    zc = (x[..., :dd // 2] + 1j * x[..., dd // 2:]) * np.exp(1j * np.arccos(cos[:, :dd // 2])
                                                             * np.sign(sin[:, :dd // 2]))
    y = rope(x, cos, sin)
    expect(np.allclose(y[..., :dd // 2], zc.real, atol=1e-12) and
           np.allclose(y[..., dd // 2:], zc.imag, atol=1e-12), "rope == complex rotation")
    expect(np.all(sin != 0) and np.all(np.abs(np.linalg.norm(y, axis=-1) -
                                               np.linalg.norm(x, axis=-1)) < 1e-12),
           "rope tables: no zero, rotation keeps the norm")
    # heads round trip
    x = rng.standard_normal((2, 5, 12))
    expect(np.array_equal(merge_heads(split_heads(x, 3)), x), "split_heads/merge_heads round trip")
    # input generator: never zeros, the right scales, deterministic
    g = Gen(3)
    w = g.weight(400, 400, 300)
    expect(abs(w.std() * 20 - 1) < 0.02 and np.all(np.float32(w) != 0), "Gen.weight: N(0, 1/fan_in), no zeros")
    expect(np.array_equal(Gen(5).act(3, 4), Gen(5).act(3, 4)), "Gen: seeded")
    q = Gen(3).qweight(400, 300)
    sq = Gen(3).qscale(400, 300)
    expect(q.dtype == np.int8 and q.min() == -127 and q.max() == 127 and np.all(q != 0) and
           abs((q * sq).std() * 20 - 1) < 0.05, "Gen.qweight/qscale: int8 in [-127, 127], no zeros, "
           "dequantized N(0, 1/fan_in)-like")
    # every example: the dims parse, the inputs match and the reference is finite
    for name, (mk, ref_fn, variants, full) in EXAMPLES.items():
        tf = os.path.join(EXAMPLES_DIR, name + ".tf")
        if not os.path.exists(tf):
            expect(False, "%s: %s exists" % (name, tf))
            continue
        d = parse_dims(tf)
        ok = all(v is not None for v in d.values())
        for over in variants:
            dv = dict(d)
            dv.update(over or {})
            ins = mk(dv, Gen(1))
            with np.errstate(over="ignore", under="ignore"):
                out = ref_fn(dv, {k: np.float64(np.float32(a)) for k, a in ins.items()})
            ok = ok and all(np.isfinite(o).all() for o in out.values())
            ok = ok and all(np.all(np.float32(a) != 0) for a in ins.values())
            src = open(tf, encoding="utf-8").read()
            ok = ok and all(re.search(r"(?<![\w])%s\s*:" % re.escape(k), src) for k in ins)
        expect(ok, "%s: dims %s parse; inputs named as in the file; reference finite" % (name, d))
        # The same math done in float32 throughout passes with a wide margin (so 1e-4 is a
        # tolerance an f32 implementation can meet, not one tuned to pass).
        worst = 0.0
        for over in variants:
            dv = dict(d)
            dv.update(over or {})
            ins = mk(dv, Gen(2))
            with np.errstate(over="ignore", under="ignore"):
                r64 = ref_fn(dv, {k: np.float64(np.float32(a)) for k, a in ins.items()})
                r32 = ref_fn(dv, {k: np.float32(a) for k, a in ins.items()})
            for o in r64:
                ok32, _, rel, _ = compare(np.asarray(r32[o], np.float32), r64[o])
                worst = max(worst, rel if ok32 else math.inf)
        expect(worst <= REL_TOL / 20, "%s: a float32 NumPy run is within %g (worst %.2g)"
               % (name, REL_TOL / 20, worst))
    print()
    if fails:
        print("check_numpy.py --self-test: %d FAILED" % len(fails))
        return 1
    print("check_numpy.py --self-test: all passed")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fusec", help="path of the fusec program")
    ap.add_argument("--only", action="append", choices=sorted(EXAMPLES),
                    help="run only this example (repeatable)")
    ap.add_argument("--self-test", action="store_true", help="test the NumPy side only")
    ap.add_argument("--mutate", action="store_true",
                    help="the harness must catch a reference wrong in one element")
    ap.add_argument("--full", action="store_true", help="also the large default dims")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                    help="the device fusec runs on (default cpu)")
    ap.add_argument("--precision", default="keep", choices=("keep", "bf16", "f16", "f8"),
                    help="compile at this storage precision; the reference starts from the "
                         "inputs rounded to it (bf16 at f8), and the bound is 8 u of the type "
                         "(4 u of E4M3 at f8)")
    ap.add_argument("--train", action="store_true",
                    help="check the gradients (fusec run --train) against finite differences "
                         "of the NumPy reference")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("-v", "--verbose", action="store_true", help="print fusec's output")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    if not args.fusec:
        ap.error("--fusec PATH is required (or --self-test)")
    args.fusec = os.path.abspath(args.fusec)
    global DEVICE, PRECISION
    DEVICE = args.device
    PRECISION = args.precision
    if not os.access(args.fusec, os.X_OK):
        print("check_numpy.py: %s is not an executable" % args.fusec)
        return 1
    names = args.only or list(EXAMPLES)
    work = tempfile.mkdtemp(prefix="fusec-accept-")
    table = Table()
    failures = 0
    try:
        for name in names:
            print("%s:" % name, flush=True)
            failures += (check_example_train if args.train else check_example)(name, args, work, table)
    finally:
        if args.keep:
            print("kept %s" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    table.show(("example", "dims", "mode", "output", "shape", "max_abs_err", "rel_err",
                "status"))
    print()
    if args.mutate:
        print("check_numpy.py --mutate: %s" % ("the harness caught the mutation" if failures == 0
                                               else "FAILED (fusec did not run, or a mutation "
                                                    "went unnoticed)"))
    else:
        print("check_numpy.py: %s (tolerance: max|fusec-numpy|/max|%s| <= %g%s)"
              % ("all passed" if failures == 0 else "%d FAILED" % failures,
                 "fusec gradient" if args.train else "numpy",
                 GRAD_TOL[PRECISION] if args.train else rel_tol(),
                 "" if PRECISION == "keep" else ", --precision " + PRECISION))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
