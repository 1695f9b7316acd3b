# run.sh: `fusec run` on the CPU: --check against the reference interpreter (exit 0), outputs
# written as DIR/NAME.npy (checked with NumPy where available, values included), --input and
# its errors (wrong shape: exit 1; unknown name: exit 2), --out-dir errors, --random.
# Run as `sh run.sh FUSEC SRCDIR`.
. "$2/lib.sh"

# run --check on a small block: exit 0, one check line per output, outputs written.
mkdir o1
if expect 0 run small.tf --device cpu --check --out-dir o1; then
    for name in y out1; do
        [ -s "o1/$name.npy" ] || fail "run did not write o1/$name.npy"
        grep -qE "^check $name: max_abs_err=[^ ]+ max_rel_err=[^ ]+ tol=[^ ]+ ok\$" "$T/stdout" ||
            fail "no passing check line for $name"
    done
    [ "$(ls o1 | wc -l)" -eq 2 ] || fail "unexpected files in o1: $(ls o1)"
fi
# The default device is cpu and the default folder '.'; the same seed gives the same outputs.
if expect 0 run small.tf; then
    for name in y out1; do
        cmp -s "$name.npy" "o1/$name.npy" || fail "run with seed 0 twice: $name.npy differs"
    done
fi
mkdir o2
expect 0 run small.tf --device=cpu --random 12345 --out-dir=o2 &&
    { cmp -s o2/y.npy o1/y.npy && fail "--random 12345 gives the same y as seed 0"; }
expect 0 run small.tf --random 18446744073709551615 --out-dir o2
# --no-fuse runs too, and passes --check.
expect 0 run small.tf --no-fuse --check --out-dir o2 && out_has "check y:"

if [ "$HAVE_NUMPY" = 1 ]; then
    # Outputs are real .npy files with the block's shapes and dtypes, every element written.
    python3 - o1 <<'PY' || fail "the outputs of run are not the expected .npy files"
import sys, numpy as np
d = sys.argv[1]
y = np.load(d + "/y.npy"); s = np.load(d + "/out1.npy")
assert y.dtype == np.float32 and y.shape == (5, 7), (y.dtype, y.shape)
assert s.dtype == np.float32 and s.shape == (5,), (s.dtype, s.shape)
assert np.isfinite(y).all() and np.isfinite(s).all()
assert np.abs(y).max() > 0, "all zeros"
PY
    # Inputs from .npy files (f64 files are converted to the f32 inputs); the outputs agree
    # with NumPy's evaluation of the block.
    python3 - <<'PY' || fail "could not write the input .npy files"
import numpy as np
r = np.random.default_rng(7)
np.save("x.npy", r.standard_normal((5, 7)).astype(np.float32))
np.save("g.npy", (1 + 0.1 * r.standard_normal(7)).astype(np.float32))
np.save("b.npy", r.standard_normal(7))                     # f64: converted to f32
PY
    mkdir o3
    if expect 0 run small.tf --input x=x.npy --input=g=g.npy --input b=b.npy --out-dir o3 --check; then
        python3 - <<'PY' || fail "run's outputs differ from NumPy's evaluation of the block"
import numpy as np
x = np.load("x.npy").astype(np.float64); g = np.load("g.npy").astype(np.float64)
b = np.load("b.npy").astype(np.float32).astype(np.float64)
m = x.mean(-1, keepdims=True); v = ((x - m) ** 2).mean(-1, keepdims=True)
h = (x - m) / np.sqrt(v + 1e-5) * g + b
gl = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3)))
want_y = gl + x; want_s = (h * x).sum(-1)
y = np.load("o3/y.npy"); s = np.load("o3/out1.npy")
ey = np.abs(y - want_y).max() / np.abs(want_y).max(); es = np.abs(s - want_s).max() / np.abs(want_s).max()
assert ey < 1e-4 and es < 1e-4, (ey, es)
PY
    fi
    # --precision bf16 and f16 (docs/precision.md), fused and eager: the f32 .npy inputs are
    # rounded to the type (to nearest even), y is stored in it (an f16 .npy; bf16, which NumPy
    # lacks, written as f32) and the sum stays f32; both within the --check bound a(t) u(t) =
    # 8 u(t) (docs/tolerances.md) of NumPy's evaluation from the rounded inputs.
    for p in bf16 f16; do
        for fuse in "" --no-fuse; do
            rm -rf "o_$p"; mkdir "o_$p"
            expect 0 run small.tf --precision $p $fuse --input x=x.npy --input g=g.npy --input b=b.npy \
                --out-dir "o_$p" --check || continue
            python3 - "$p" <<'PY' || fail "--precision $p $fuse: run's outputs are not NumPy's evaluation within 8 u"
import sys, numpy as np
p = sys.argv[1]
def rnd(a):
    a = np.asarray(a, dtype=np.float32)
    if p == "f16":
        return a.astype(np.float16).astype(np.float64)
    b = a.view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16 << 16           # bf16, to nearest even
    return b.astype(np.uint32).view(np.float32).astype(np.float64)
u = 2.0 ** -8 if p == "bf16" else 2.0 ** -11
x = rnd(np.load("x.npy")); g = rnd(np.load("g.npy")); b = rnd(np.load("b.npy").astype(np.float32))
m = x.mean(-1, keepdims=True); v = ((x - m) ** 2).mean(-1, keepdims=True)
h = (x - m) / np.sqrt(v + 1e-5) * g + b
gl = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3)))
want_y = gl + x; want_s = (h * x).sum(-1)
y = np.load("o_%s/y.npy" % p); s = np.load("o_%s/out1.npy" % p)
assert y.dtype == (np.float16 if p == "f16" else np.float32) and s.dtype == np.float32, (y.dtype, s.dtype)
ey = np.abs(y.astype(np.float64) - want_y).max() / np.abs(want_y).max()
es = np.abs(s - want_s).max() / np.abs(want_s).max()
assert ey <= 8 * u and es <= 8 * u, (ey, es, 8 * u)
assert ey > 0.01 * u, ("suspiciously exact: was it computed in f32?", ey)
PY
        done
    done
else
    echo "note: NumPy not available: skipping the .npy content checks"
fi

# --precision f8 (docs/precision.md, "f8"), fused and eager: the run settles its scales first and
# says so, and --check compares with the reference at the scales the run used.
if [ "$HAVE_NUMPY" = 1 ]; then
    for fuse in "" --no-fuse; do
        rm -rf o_f8; mkdir o_f8
        expect 0 run small.tf --precision f8 $fuse --input x=x.npy --input g=g.npy --input b=b.npy \
            --out-dir o_f8 --check || continue
        out_has "E4M3, scales 2^"
        out_has "(delayed scaling, settled after"
        # the interface is f8 too: x (its scale the largest that fits its file) and y; the 1-D
        # params stay bf16
        grep -qE '^  input  x f8e4m3\[5,7\] from x.npy, scale 2\^-?[0-9]+$' "$T/stdout" || fail "--precision f8: x's line"
        out_has "  input  g bf16[7] from g.npy"
        grep -qE '^  output y f8e4m3\[5,7\] -> o_f8/y.npy \(scale 2\^-?[0-9]+; the file holds its values in f32\)$' "$T/stdout" ||
            fail "--precision f8: y's line"
        sed -n 's/^  input  x .*, scale 2^\(-*[0-9]*\)$/\1/p' "$T/stdout" >o_f8/xscale
        python3 - <<'PY' || fail "--precision f8 $fuse: run's outputs are not NumPy's evaluation within 4 u of E4M3"
import numpy as np
def bf16(a):
    b = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16 << 16
    return b.astype(np.uint32).view(np.float32).astype(np.float64)
def e4m3(a):   # 3 mantissa bits, ties to even, subnormals from 2^-6, saturating at 448
    e = np.floor(np.log2(np.where(a != 0, np.abs(a), 1.0)))
    st = 2.0 ** (np.maximum(e, -6) - 3)
    return np.copysign(np.minimum(np.round(np.abs(a) / st) * st, 448.0), a)
u = 2.0 ** -4   # E4M3: x, the intermediates and y; g and b bf16
x = np.load("x.npy").astype(np.float64)
s = 2.0 ** int(open("o_f8/xscale").read())
assert s * np.abs(x).max() <= 448 < 2 * s * np.abs(x).max(), ("x's scale is not the largest that fits", s)
x = e4m3(x * s) / s; g = bf16(np.load("g.npy")); b = bf16(np.load("b.npy").astype(np.float32))
m = x.mean(-1, keepdims=True); v = ((x - m) ** 2).mean(-1, keepdims=True)
h = (x - m) / np.sqrt(v + 1e-5) * g + b
gl = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3)))
want_y = gl + x; want_s = (h * x).sum(-1)
y = np.load("o_f8/y.npy"); s = np.load("o_f8/out1.npy")
assert y.dtype == np.float32, y.dtype
y = y.astype(np.float64)
ey = np.abs(y - want_y).max() / np.abs(want_y).max(); es = np.abs(s - want_s).max() / np.abs(want_s).max()
assert ey <= 4 * u and es <= 4 * u, (ey, es, 4 * u)
assert max(ey, es) > 2.0 ** -9, ("suspiciously exact: were the intermediates stored in f8?", ey, es)
PY
    done
fi

# The CPU's f32 -> f8e4m3 store (docs/cpu.md, "Storage conversions") gives the reference's bits
# around every E4M3 value and midpoint (+-1 f32 ulp), in the subnormal range, at saturation and
# for inf and NaN, on this machine's x86 level and on x86-64-v2.
if [ "$HAVE_NUMPY" = 1 ]; then
    python3 - <<'PY' || fail "could not write the f8 conversion inputs"
import numpy as np
ev = sorted({(m * 2.0 ** -9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)) for e in range(16) for m in range(8)} - {480.0})
v = []
for a, b in zip(ev, ev[1:]):
    f = np.float32((a + b) / 2)
    v += [a, f, np.nextafter(f, np.float32(0)), np.nextafter(f, np.float32(1e9))]
v += [448, 463.99, 464, 465, 1e6, 3e38, np.inf, np.nan, 1e-10, 2.0 ** -10, 2.0 ** -6 - 1e-9, 0.0]
rng = np.random.default_rng(7)
v += list(rng.standard_normal(20000) * np.exp(rng.uniform(-15, 8, 20000)))
a = np.array(v, dtype=np.float32)
np.save("cvt.npy", np.concatenate([a, -a]).reshape(1, -1))
open("cvt.tf", "w").write("block c(x: f32[1, %d]) {\n    return cast(x, f8e4m3)\n}\n" % (2 * a.size))
PY
    for lv in "" x86-64-v2; do
        rm -rf cvt_c cvt_r
        FUSEC_CPU=$lv expect 0 run cvt.tf --input x=cvt.npy --out-dir cvt_c &&
            expect 0 run cvt.tf --device reference --input x=cvt.npy --out-dir cvt_r &&
            { cmp -s cvt_c/out0.npy cvt_r/out0.npy || fail "f8e4m3 store${lv:+ at $lv}: not the reference's bits"; }
    done
fi

# --strict-rounding at a --precision: the fused program rounds every intermediate as the eager
# one does, so their outputs are the same bits (docs/precision.md; at f8 both settle to the same
# scales on the same inputs).
for p in bf16 f16 f8; do
    rm -rf "s_$p" "e_$p"
    expect 0 run small.tf --precision $p --strict-rounding --random 5 --out-dir "s_$p" &&
        expect 0 run small.tf --precision $p --no-fuse --random 5 --out-dir "e_$p" &&
        for o in y out1; do
            cmp -s "s_$p/$o.npy" "e_$p/$o.npy" || fail "--precision $p --strict-rounding: $o differs from --no-fuse's"
        done
done

# A wrong-shape .npy: exit 1 naming the file; a missing .npy: exit 1.
make_npy_f32 wrong.npy 3 3
expect 1 run small.tf --input x=wrong.npy --out-dir o2 && err_has "wrong.npy"
if [ "$HAVE_NUMPY" = 1 ]; then
    python3 -c 'import numpy as np; assert np.load("wrong.npy").shape == (3, 3)' ||
        fail "the harness's make_npy_f32 wrote a bad .npy"
fi
make_npy_f32 right.npy 5 7
expect 0 run small.tf --input x=right.npy --out-dir o2
expect 1 run small.tf --input x=nosuch.npy --out-dir o2 && err_has "nosuch.npy"
printf 'not a npy file' >junk.npy
expect 1 run small.tf --input x=junk.npy --out-dir o2 && err_has "junk.npy"
# ... where the library's message names the file, the error line names it once.
[ "$(grep -o 'junk\.npy' "$T/stderr" | wc -l)" -eq 1 ] || fail "junk.npy named twice: $(cat "$T/stderr")"
# A data error: scatter_add with an id outside [0, rows) fails the run (exit 1) naming the
# kernel whose check failed, and writes no output (ids = [0, 7], rows 4).
cat >scat.tf <<'EOF'
block s(x: f32[2, 3], ids: i32[2]) -> f32[4, 3] {
    return scatter_add(x, ids, 4)
}
EOF
make_npy_i32 ids.npy 0 7
expect 1 run scat.tf --input ids=ids.npy --out-dir o8 &&
    err_has "kernel k1_scatter_index: a run-time check failed (run-time data error)"
[ ! -e o8/out0.npy ] || fail "a failed run wrote o8/out0.npy"
expect 1 run scat.tf --input ids=ids.npy --out-dir o8 --no-fuse
# A tensor too large for memory: exit 1, "out of memory" said once (a sanitizer build is told
# to return NULL rather than abort on the 11 TB request).
msg=$(ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}allocator_may_return_null=1" \
      "$FUSEC" run small.tf -D N=400000000000 --out-dir o7 2>&1 >/dev/null)
[ $? -eq 1 ] || fail "a tensor of 11 TB: exit status not 1: $msg"
case "$msg" in
*"fusec: error: creating input 'x': out of memory allocating a tensor of 11200000000000 bytes"*) ;;
*) fail "a tensor of 11 TB: unexpected message: $msg" ;;
esac
case "$msg" in *"out of memory: out of memory"*) fail "out of memory said twice: $msg" ;; esac
[ -e o7 ] && fail "a run that failed made its --out-dir o7"
mkdir -p o6/y.npy
expect 1 run small.tf --out-dir o6 && err_has "fusec: error: output 'y': cannot write 'o6/y.npy'"

# An unknown input name: exit 2 listing the block's inputs.
MSG="no input named 'nope'"; expect_usage run small.tf --input nope=right.npy --out-dir o2
err_has "x, g, b"

# A missing --out-dir is made, with its parents, once the block has run; one that is a file,
# or that cannot be made, is exit 1 with nothing run or written.
expect 0 run small.tf --out-dir new/sub/ &&
    { [ -s new/sub/y.npy ] && [ -s new/sub/out1.npy ] || fail "--out-dir new/sub: outputs not written"; }
expect 1 run small.tf --out-dir small.tf && err_has "output directory 'small.tf': Not a directory"
expect 1 run small.tf --out-dir small.tf/sub && err_has "output directory 'small.tf/sub': Not a directory"
expect 1 run bad.tf --out-dir nosuch && err_has "bad.tf: compilation failed"
[ -e nosuch ] && fail "--out-dir nosuch was made by a run that failed"
# The default is the current folder: out0.npy there for an unnamed output (see docs/cli.md).
printf 'dim N = 3\nblock u(x: f32[N]) {\n    return x + 1\n}\n' >unnamed.tf
mkdir here && (cd here && "$FUSEC" run ../unnamed.tf >/dev/null 2>&1) && [ -s here/out0.npy ] ||
    fail "run without --out-dir did not write ./out0.npy"

# A source error in run: exit 1 with the diagnostic, nothing written.
mkdir o4
expect 1 run bad.tf --out-dir o4 && err_has "bad.tf:6:16: error:"
[ -z "$(ls o4)" ] || fail "a failed run wrote $(ls o4)"
# i8 (weight-only quantization): examples/quant_mlp.tf with int8 weights from .npy files, against
# NumPy's dequantization in float64; an i8 output is written as int8; an i8 input follows the rule
# of i32 inputs: an integer file whose values fit (int32 here), never a float file.
if [ "$HAVE_NUMPY" = 1 ]; then
    python3 - <<'PY' || fail "could not write the i8 inputs"
import numpy as np
rng = np.random.default_rng(8)
B, T, C, F = 1, 3, 8, 32
f = lambda *s: rng.standard_normal(s).astype(np.float32)
q = lambda *s: rng.integers(-127, 128, size=s).astype(np.int8)
ins = dict(x=f(B, T, C), g=1 + 0.1 * f(C), b=0.1 * f(C), w_fc=q(C, F), s_fc=(0.01 * (1 + 0.1 * f(F))).astype(np.float32),
           b_fc=0.1 * f(F), w_proj=q(F, C), s_proj=(0.005 * (1 + 0.1 * f(C))).astype(np.float32), b_proj=0.1 * f(C))
for k, v in ins.items():
    np.save("q_%s.npy" % k, v)
np.save("q_w_f32.npy", ins["w_fc"].astype(np.float32))
np.save("q_w_i32.npy", ins["w_fc"].astype(np.int32))
big = ins["w_fc"].astype(np.int32); big[0, 1] = 300
np.save("q_w_big.npy", big)
PY
    qin=""
    for k in x g b s_fc b_fc w_proj s_proj b_proj; do qin="$qin --input $k=q_$k.npy"; done
    # shellcheck disable=SC2086
    if expect 0 run "$SRC/../../examples/quant_mlp.tf" -D B=1 -D T=3 -D C=8 $qin --input w_fc=q_w_fc.npy --check --out-dir oq; then
        out_has "input  w_fc i8[8,32] from q_w_fc.npy"
        python3 - <<'PY' || fail "quant_mlp's output differs from NumPy's dequantized MLP"
import math, numpy as np
i = {k: np.load("q_%s.npy" % k).astype(np.float64) for k in "x g b w_fc s_fc b_fc w_proj s_proj b_proj".split()}
x = i["x"]; m = x.mean(-1, keepdims=True); v = ((x - m) ** 2).mean(-1, keepdims=True)
h = (x - m) / np.sqrt(v + 1e-5) * i["g"] + i["b"]
a = h @ (i["w_fc"] * i["s_fc"]) + i["b_fc"]
u = 0.5 * a * (1 + np.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a ** 3)))
ref = x + u @ (i["w_proj"] * i["s_proj"]) + i["b_proj"]
got = np.load("oq/out0.npy")
assert got.dtype == np.float32 and got.shape == ref.shape, (got.dtype, got.shape)
rel = np.abs(got - ref).max() / np.abs(ref).max()
assert rel < 1e-5, rel
PY
    fi
    # shellcheck disable=SC2086
    expect 0 run "$SRC/../../examples/quant_mlp.tf" -D B=1 -D T=3 -D C=8 $qin --input w_fc=q_w_i32.npy --out-dir oq2 ||
        fail "an int32 file whose values fit an i8 input was refused"
    # shellcheck disable=SC2086
    expect 1 run "$SRC/../../examples/quant_mlp.tf" -D B=1 -D T=3 -D C=8 $qin --input w_fc=q_w_f32.npy --out-dir oq3 &&
        err_has "q_w_f32.npy: cannot load float data (f32) into a tensor of dtype i8"
    # shellcheck disable=SC2086
    expect 1 run "$SRC/../../examples/quant_mlp.tf" -D B=1 -D T=3 -D C=8 $qin --input w_fc=q_w_big.npy --out-dir oq4 &&
        err_has "q_w_big.npy: value 300 at index 1 does not fit in i8"
    printf 'block c(x: f32[5]) -> i8[5] {\n    return cast(x, i8)\n}\n' >tocast.tf
    python3 -c 'import numpy as np; np.save("c_x.npy", np.array([127.9, -128.9, 300, float("nan"), -0.7], np.float32))'
    expect 0 run tocast.tf --input x=c_x.npy --out-dir oc &&
        python3 -c 'import numpy as np; a = np.load("oc/out0.npy"); assert a.dtype == np.int8 and a.tolist() == [127, -128, 127, 0, 0], a' ||
        fail "cast to i8 written as int8 .npy: $(cat "$T/stderr")"
fi
# An i8 weight's product on the CPU takes B in panels (docs/cpu.md, "Products of narrow
# weights"): with a 4 KiB L2, six panels of 16 rows; with this machine's, one. Against NumPy
# in f64, and the operand kernel reads the weight's bytes and writes none.
cat >wq.tf <<'EOF2'
block q(x: f32[16, 96], param w: i8[96, 256], param s: f32[256]) -> f32[16, 256]
{
    return x @ (cast(w, f32) * s)
}
EOF2
if [ "$HAVE_NUMPY" = 1 ]; then
    python3 -c "
import numpy as np
r = np.random.default_rng(5)
np.save('wq_x.npy', r.standard_normal((16, 96)).astype(np.float32))
np.save('wq_w.npy', r.integers(-127, 128, (96, 256)).astype(np.int8))
np.save('wq_s.npy', (r.standard_normal(256) / 700).astype(np.float32))"
    for l2 in 4096 ""; do
        rm -rf o_wq
        if [ -n "$l2" ]; then export FUSEC_CPU_L2_BYTES=$l2; fi
        expect 0 run wq.tf --input x=wq_x.npy --input w=wq_w.npy --input s=wq_s.npy --check --out-dir o_wq &&
            python3 -c "
import numpy as np
x, w, s = (np.load('wq_%s.npy' % n).astype(np.float64) for n in 'xws')
want = x @ (w * s); got = np.load('o_wq/out0.npy')
e = np.abs(got - want).max() / np.abs(want).max()
assert e < 1e-5, e" || fail "L2 '$l2': the i8 product in panels differs from NumPy's"
        if expect 0 bench wq.tf --device cpu --repeat 2; then
            grep -qE '^  0 +k0_operand +25600 ' "$T/stdout" || fail "L2 '$l2': the operand kernel's bytes are not the weight's and scales' (25600)"
        fi
        unset FUSEC_CPU_L2_BYTES
    done
fi
no_temps "$W"
finish
