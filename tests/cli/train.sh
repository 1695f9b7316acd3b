# train.sh: `fusec run --train` on the CPU (docs/training.md).
# - every example's gradients against the reference interpreter's own f64 backward (--check),
#   fused with --remat auto, none and full, and eager (--no-fuse);
# - the GPT-2 MLP's gradients against an independent NumPy f64 computation (its analytic
#   backward, itself checked by central finite differences of its forward);
# - a --mem-budget sweep from the floor to what --remat none saves: saved bytes never over
#   the budget, gradients still passing --check; a budget below the floor is an error naming it;
# - the command-line errors of training; bench --train's planned and measured peaks.
# Run as `sh train.sh FUSEC SRCDIR`.
. "$2/lib.sh"
EX=$SRC/../../examples

saved_bytes() { sed -n 's/^  saved  [0-9]* values, \([0-9]*\) bytes.*/\1/p' "$T/stdout"; }

for f in gpt2_mlp quant_mlp gpt2_attn llama_layer gpt2_block residual_ln_gelu softmax_logits; do
    modes="auto none full eager"
    case $f in quant_mlp|gpt2_block|residual_ln_gelu|softmax_logits) modes="auto eager" ;; esac
    # a sanitizer build (FUSEC_TEST_SANITIZED, cli.cmake): auto and eager; --remat none and
    # full run below on gpt2_mlp, with the budget sweep
    [ -n "${FUSEC_TEST_SANITIZED:-}" ] && modes="auto eager"
    for mode in $modes; do
        mkdir -p "o_${f}_$mode"
        if [ "$mode" = eager ]; then set -- --no-fuse --remat none; else set -- --remat "$mode"; fi
        # the perf chain's default [8192, 1024] is a benchmark's size
        [ "$f" = residual_ln_gelu ] && set -- "$@" -D N=64 -D C=256
        if expect 0 run "$EX/$f.tf" --train --check --out-dir "o_${f}_$mode" "$@"; then
            n=$(grep -c '^check grad_.* ok$' "$T/stdout")
            [ "$n" -ge 1 ] || fail "$f $mode: no passing gradient check"
            grep -q 'FAIL' "$T/stdout" && fail "$f $mode: a check failed"
        fi
    done
done

# --remat: none saves the most, full the least (only inputs), auto in between.
expect 0 run "$EX/gpt2_mlp.tf" --train --remat none --out-dir o1 && none=$(saved_bytes)
expect 0 run "$EX/gpt2_mlp.tf" --train --remat full --out-dir o1 && full=$(saved_bytes)
expect 0 run "$EX/gpt2_mlp.tf" --train --out-dir o1 && auto=$(saved_bytes)
if [ -n "$none" ] && [ -n "$full" ] && [ -n "$auto" ]; then
    [ "$full" -le "$auto" ] && [ "$auto" -lt "$none" ] || fail "saved bytes: full $full, auto $auto, none $none"
    [ "$full" -eq 65536 ] || fail "--remat full saves $full bytes; x alone is 65536"
    # the budget sweep
    for b in 65536 200000 800000 $none; do
        if expect 0 run "$EX/gpt2_mlp.tf" --train --check --mem-budget "$b" --out-dir o1; then
            s=$(saved_bytes)
            [ -n "$s" ] && [ "$s" -le "$b" ] || fail "--mem-budget $b: saved $s bytes"
            grep -q 'FAIL' "$T/stdout" && fail "--mem-budget $b: a check failed"
        fi
    done
fi
expect 1 run "$EX/gpt2_mlp.tf" --train --mem-budget 1000 && err_has "at least 65536 bytes"
expect 1 "$EX/gpt2_mlp.tf" --train --mem-budget 1000 -o o1/x.cu && err_has "the floor"
[ -e o1/x.cu ] && fail "a failed compile left o1/x.cu"

# Command-line errors.
MSG="--grad-output needs --train" expect_usage run "$EX/gpt2_mlp.tf" --grad-output out0=g.npy
MSG="invalid --remat value 'some'" expect_usage run "$EX/gpt2_mlp.tf" --train --remat some
MSG="has no float output of that name" expect_usage run "$EX/gpt2_mlp.tf" --train --grad-output nope=g.npy
expect 0 run small.tf --remat full && err_has "--remat has no effect without --train"
make_npy_f32 g.npy 3 4
expect 1 run "$EX/gpt2_mlp.tf" --train --grad-output out0=g.npy && err_has "the gradient of output 'out0'"

if [ "$HAVE_NUMPY" = 1 ]; then
    python3 - "$FUSEC" "$EX/gpt2_mlp.tf" <<'PY' || fail "the GPT-2 MLP's gradients differ from NumPy's"
import subprocess, sys, numpy as np
fusec, src = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(20261124)
B, T, C = 2, 64, 128
ins = dict(x=rng.standard_normal((B, T, C)), g=rng.standard_normal(C), b=rng.standard_normal(C),
           w_fc=rng.standard_normal((C, 4 * C)) / np.sqrt(C), b_fc=rng.standard_normal(4 * C),
           w_proj=rng.standard_normal((4 * C, C)) / np.sqrt(4 * C), b_proj=rng.standard_normal(C))
for k, v in ins.items(): np.save(k + ".npy", v.astype(np.float32))
gy = rng.standard_normal((B, T, C)); np.save("gy.npy", gy.astype(np.float32))
ins = {k: np.load(k + ".npy").astype(np.float64) for k in ins}
gy = np.load("gy.npy").astype(np.float64)
c = np.sqrt(2 / np.pi)

def forward(p):
    x = p["x"]; mu = x.mean(-1, keepdims=True); d = x - mu
    r = 1 / np.sqrt((d * d).mean(-1, keepdims=True) + 1e-5); xh = d * r; h = xh * p["g"] + p["b"]
    a = h @ p["w_fc"] + p["b_fc"]; t = np.tanh(c * (a + 0.044715 * a ** 3)); ge = 0.5 * a * (1 + t)
    return x + ge @ p["w_proj"] + p["b_proj"], (xh, r, h, a, t, ge)

def backward(p):
    y, (xh, r, h, a, t, ge) = forward(p)
    g = {"b_proj": gy.sum((0, 1)), "w_proj": np.einsum("btk,btc->kc", ge, gy)}
    dga = 0.5 * (1 + t) + 0.5 * a * (1 - t * t) * c * (1 + 3 * 0.044715 * a * a)
    ga = (gy @ p["w_proj"].T) * dga
    g["w_fc"] = np.einsum("btc,btk->ck", h, ga); g["b_fc"] = ga.sum((0, 1))
    gh = ga @ p["w_fc"].T
    g["g"] = (gh * xh).sum((0, 1)); g["b"] = gh.sum((0, 1)); gx = gh * p["g"]
    g["x"] = gy + r * (gx - gx.mean(-1, keepdims=True) - xh * (gx * xh).mean(-1, keepdims=True))
    return y, g

y, ref = backward(ins)
# the NumPy backward itself against central differences of the NumPy forward, along random directions
for k in ins:
    v = rng.standard_normal(ins[k].shape); h = 1e-6
    pp = dict(ins); pp[k] = ins[k] + h * v; lp = (forward(pp)[0] * gy).sum()
    pm = dict(ins); pm[k] = ins[k] - h * v; lm = (forward(pm)[0] * gy).sum()
    fd, an = (lp - lm) / (2 * h), (ref[k] * v).sum()
    assert abs(fd - an) <= 1e-6 * max(1.0, abs(an)), (k, fd, an)
for mode in (["--remat", "auto"], ["--remat", "none"], ["--remat", "full"], ["--no-fuse"]):
    args = [fusec, "run", src, "--train", "--out-dir", ".", "--grad-output", "out0=gy.npy"] + mode
    args += ["--input=%s=%s.npy" % (k, k) for k in ins]
    subprocess.run(args, check=True, capture_output=True)
    assert np.abs(np.load("out0.npy") - y).max() <= 1e-5 * np.abs(y).max()
    for k, v in ref.items():
        got = np.load("grad_%s.npy" % k)
        err = np.abs(got - v).max() / np.abs(v).max()
        assert got.dtype == np.float32 and got.shape == v.shape, (k, got.dtype, got.shape)
        assert err <= 1e-5, (mode, k, err)   # f32 with reductions of <= 512 terms: measured <= 6e-7
PY
    # bench --train: the planned peak is what the device's high-water mark measures.
    if expect 0 bench "$EX/gpt2_mlp.tf" --train --repeat 3 --json; then
        python3 - "$T/stdout" <<'PY' || fail "bench --train --json"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["train"] is True
for p in ("fused", "eager"):
    q = d[p]
    assert q["planned_peak_bytes"] == q["peak_bytes"] > 0, (p, q["planned_peak_bytes"], q["peak_bytes"])
    assert q["saved_bytes"] > 0
assert d["fused"]["saved_bytes"] < d["eager"]["saved_bytes"]
assert len(d["fused"]["kernels"]) > 5
PY
    fi
fi
# Dynamic loss scaling (the default at --precision f16 with --train). lossy's gradients are
# 2 (x @ w) / 2^20 times a seed near 1: f16 subnormals (below 6e-8 they vanish), so without
# scaling they are off by 1.7% (over the 8 u bound), and with it within the bound; they are
# written as f32, divided by the scale. big's seeds times 1000 overflow f16 at 65536: the scale
# backs off (12 times, to 16) until the gradients are finite.
cat >lossy.tf <<'EOF2'
block lossy(x: f32[4096, 64], param w: f32[64, 256]) -> f32[]
{
    return mean(square(x @ w))
}
EOF2
cat >big.tf <<'EOF2'
block big(x: f32[8, 16]) -> f32[8, 16]
{
    return x * 1000
}
EOF2
mkdir ls1 ls2 ls3
# lossy's [4096, 64] @ [64, 256] in the f64 reference, and its failing check's per-kernel search,
# take 40 s of a sanitizer build's 120 here: it runs big's backoffs alone (the loss scaling's
# code is the same)
if [ -z "${FUSEC_TEST_SANITIZED:-}" ] && expect 4 run lossy.tf --precision f16 --train --check --loss-scale off --out-dir ls1; then
    grep -qE '^check grad_w: .* FAIL$' "$T/stdout" || fail "f16 gradients without loss scaling passed: the test shows nothing"
    grep -q 'loss scale' "$T/stdout" && fail "--loss-scale off printed a loss scale"
fi
if [ -z "${FUSEC_TEST_SANITIZED:-}" ] && expect 0 run lossy.tf --precision f16 --train --check --out-dir ls2; then
    out_has "  loss scale 65536 (dynamic: the outputs' gradients were multiplied by it; 0 backoffs; the gradients are written as f32, divided by it)"
    grep -qE '^check grad_w: .* ok$' "$T/stdout" || fail "f16 gradients with loss scaling are over the bound"
    if [ "$HAVE_NUMPY" = 1 ]; then
        python3 -c "
import numpy as np
a, b = np.load('ls2/grad_w.npy'), np.load('ls1/grad_w.npy')
assert a.dtype == np.float32 and b.dtype == np.float16, (a.dtype, b.dtype)
assert np.abs(a).max() > 1e-4, 'the unscaled gradients are not of the unscaled size'
" || fail "the loss-scaled gradients are not unscaled f32 files"
    fi
fi
if expect 0 run big.tf --precision f16 --train --check --out-dir ls3; then
    out_has "  loss scale 16 (dynamic: the outputs' gradients were multiplied by it; 12 backoffs;"
    grep -qE '^check grad_x: .* ok$' "$T/stdout" || fail "the backed-off gradients are wrong"
fi
# A gradient through a kink at bf16: exp(-|v|) of a layernorm. The op-by-op rounding (eager's)
# puts some v exactly at 0, where abs' gradient is 0, while the fused kernel keeps v in f32, a
# few units on either side: both legal, 0.1-0.8 apart. --check widens a gradient's tolerance by
# the rounding spread of its 16-bit intermediates as it does an output's (fused and eager pass,
# the spread printed); the unwidened bound (the strict program's) is what eager and strict meet.
mkdir kink1 kink2
for m in "" --no-fuse; do
    # shellcheck disable=SC2086
    if expect 0 run "$EX/keywords.tf" --precision bf16 --train --check --random 7 $m --out-dir kink1; then
        grep -qE '^  \(grad___global__: tol = 3\.1e-02 \+ 2 x [0-9.e+-]+, the rounding spread of its 16/8-bit intermediates\)$' "$T/stdout" ||
            fail "keywords.tf bf16 ${m:-fused}: no gradient spread printed"
        grep -q 'FAIL' "$T/stdout" && fail "keywords.tf bf16 ${m:-fused}: a check failed"
    fi
done
# the spread is what lets the fused program pass: its gradient is further from the reference than
# the bound without it
if [ "$HAVE_NUMPY" = 1 ] && expect 0 run "$EX/keywords.tf" --precision bf16 --train --check --random 7 --out-dir kink1; then
    r=$(sed -n 's/^check grad___global__: max_abs_err=[^ ]* max_rel_err=\([^ ]*\) tol=.*/\1/p' "$T/stdout")
    python3 -c "import sys; sys.exit(0 if float('$r') > 3.1e-2 else 1)" ||
        fail "keywords.tf bf16 fused: grad___global__ within the unwidened bound ($r): the test shows nothing"
fi
# Two gradients that cancel into an e5m2 value's: -2.24 reaches it as -2 and cancels a 2 to 0
# (fused and eager alike, as an autograd engine adds them in the value's dtype) where the f64
# reference has -0.24. The rounding spread does not cover it (both meanings round the explicit
# cast); --check widens the failing gradient's tolerance by how much rounding each contribution
# moves the reference's (fc_block_grad_noise_spread) and says so (docs/tolerances.md)
mkdir f8c
for m in "" --no-fuse; do
    # shellcheck disable=SC2086
    if expect 0 run "$SRC/../difftest/found/illcond_f8_grad_contributions.tf" --precision bf16 --train --check \
        --random 15985692255779912395 $m --out-dir f8c; then
        grep -qE '^check grad_x1: max_abs_err=2\.42e-01 max_rel_err=1\.00e\+00 tol=[0-9.e+-]+ ok$' "$T/stdout" ||
            fail "f8 cancelling gradient ${m:-fused}: grad_x1 not the cancelled 0 within the widened tolerance"
        grep -qE "^  \(grad_x1: tol = 5\.0e-01 \+ 2 x [0-9.e+-]+, how much rounding the gradients in their dtypes moves the reference's\)$" "$T/stdout" ||
            fail "f8 cancelling gradient ${m:-fused}: the widening is not printed"
    fi
done
# bf16 has f32's range: no scaling unless asked for
expect 0 run big.tf --precision bf16 --train --out-dir ls3 && { grep -q 'loss scale' "$T/stdout" && fail "loss scaling at bf16 by default"; }
# f8 gradients saturate instead of overflowing: the f16 default goes without scaling (a warning),
# asking for it is an error (exit 1)
printf 'block s(x: f32[4]) -> f8e4m3[4]\n{\n    return cast(x, f8e4m3)\n}\n' >f8.tf
expect 0 run f8.tf --precision f16 --train --out-dir ls3 &&
    err_has "fusec: warning: no loss scaling: the backward stores a gradient in f8e4m3, which saturates instead of overflowing: a loss scale too large for it would go unseen"
expect 1 run f8.tf --precision f16 --train --loss-scale dynamic --out-dir ls3 &&
    err_has "fusec: error: --loss-scale dynamic: the backward stores a gradient in f8e4m3, which saturates"
# --precision f8 trains (docs/precision.md, "f8"): whole steps run until the scales of the
# values (E4M3) and of their gradients (E5M2) settle, the forward saves E4M3 values, the
# gradients are checked against the oracle's at the scales the run used
for fuse in "" --no-fuse; do
    if expect 0 run "$EX/gpt2_mlp.tf" -D B=1 -D T=8 --precision f8 --train --check $fuse --out-dir f8t; then
        out_has "  f8     6 tensors in E4M3, scales 2^6 .. 2^7; 6 gradients in E5M2, scales 2^14 .. 2^15 (delayed scaling, settled after 3 steps)"
        out_has "check grad_w_fc:"
        [ -e f8t/grad_w_proj.npy ] || fail "--precision f8 --train $fuse: no grad_w_proj.npy"
    fi
done
# --strict-rounding: the fused training step gives the eager one's bits, E5M2 gradients included
# (without it, keywords.tf's out1 and grad_int differ: fusion keeps intermediates in f32)
for sr in --strict-rounding ""; do
    rm -rf f8s f8e
    expect 0 run "$EX/keywords.tf" -D N=1 -D M=7 --precision f8 --train $sr --out-dir f8s &&
        expect 0 run "$EX/keywords.tf" -D N=1 -D M=7 --precision f8 --train $sr --no-fuse --out-dir f8e || continue
    ndiff=0
    for o in int out1 grad_int grad_float grad_threadIdx grad___global__ grad_blockDim; do
        [ -e "f8s/$o.npy" ] || fail "--precision f8 --train $sr: no $o.npy"
        cmp -s "f8s/$o.npy" "f8e/$o.npy" || ndiff=$((ndiff + 1))
    done
    if [ -n "$sr" ]; then [ "$ndiff" = 0 ] || fail "--precision f8 --train --strict-rounding: $ndiff files differ from --no-fuse's"
    else [ "$ndiff" -gt 0 ] || fail "--precision f8 --train: fused and eager are the same bits (the check above proves nothing)"; fi
done
# its E5M2 gradients have scales of their own: no loss scaling
expect 1 run "$EX/gpt2_mlp.tf" -D B=1 -D T=8 --precision f8 --train --loss-scale dynamic --out-dir f8t &&
    err_has "fusec: error: --loss-scale dynamic: the backward stores a gradient in f8e5m2, which saturates"
# forward only: no gradient slots, and the interface is f8 (with --train above it is bf16): the
# activation and the weight matrices in E4M3 with the scales that fit them, the output too
if expect 0 run "$EX/gpt2_mlp.tf" -D B=1 -D T=8 --precision f8 --out-dir f8t; then
    out_has "  f8     7 tensors in E4M3, scales 2^6 .. 2^7 (delayed scaling, settled after 3 runs)"
    out_has "  input  x f8e4m3[1,8,128] random (seed 0), scale 2^7"
    out_has "  input  w_fc f8e4m3[128,512] random (seed 0), scale 2^10"
    out_has "  input  b_fc bf16[512] random (seed 0)"
    out_has "  output out0 f8e4m3[1,8,128] -> f8t/out0.npy (scale 2^6; the file holds its values in f32)"
fi
MSG="--loss-scale needs --train"; expect_usage run big.tf --loss-scale dynamic --out-dir ls3
MSG="invalid --loss-scale value 'on' (expected dynamic or off)"; expect_usage run big.tf --train --loss-scale on --out-dir ls3
finish
