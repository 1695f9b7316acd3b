# bisect.sh: `fusec run --check --bisect`. A correct block: one line per value, every one ok,
# exit 0. A planted miscompile (FUSEC_PLANT_BUG=OP: the fused program's first OP, after
# decomposition, multiplied by 1 + 2^-4; docs/testing.md) must be found: the check fails (exit 4),
# the bisection stops at the first value that has the planted op in it, names its op, source
# location and kernel, and says that the unfused program gets it right. The unfused program
# (--no-fuse) carries no planted bug, and passes. --bisect without --check is a usage error.
# Run as `sh bisect.sh FUSEC SRCDIR`.
. "$2/lib.sh"

mkdir o
# A correct block: every value ok.
if expect 0 run small.tf --check --bisect --out-dir o; then
    out_has "bisect: each value in order: the prefix of the block that ends at it, fused on cpu, against the reference"
    n=$(grep -cE '^ +[0-9]+ [a-z_]+ at small\.tf:[0-9]+:[0-9]+: kernel k[0-9]+_[a-z_]+ \([a-z_,]+\) max_rel_err=[^ ]+ tol=[^ ]+ ok$' "$T/stdout")
    [ "$n" -eq 5 ] || fail "expected 5 passing bisection lines (layernorm, gelu, add, mul, sum); got $n"
    out_has "    0 layernorm at small.tf:12:9: kernel k0_layernorm (layernorm) "
    out_has "    4 sum at small.tf:14:15: kernel "
    out_has "bisect: every value is within its tolerance"
fi

# A planted miscompile in the gelu (its exp): found at the gelu, step 1, with the kernel that
# writes it; the unfused program is right.
if FUSEC_PLANT_BUG=exp expect 4 run small.tf --check --bisect --out-dir o; then
    err_has "fusec: error: check failed: 1 of 2 outputs and 1 of 1 kernel over tolerance"
    grep -qE '^  k0_sum \(layernorm,gelu,add,mul,sum\): 2 values, worst max_rel_err=[^ ]+ tol=[^ ]+ \(add at small\.tf:13:32\) FAIL$' "$T/stdout" ||
        fail "the per-kernel check did not name k0_sum and the add of y"
    out_has "    0 layernorm at small.tf:12:9: kernel k0_layernorm (layernorm) "
    grep -qE '^    1 gelu at small\.tf:13:9: kernel k0_layernorm \(layernorm,gelu\) max_rel_err=[^ ]+ tol=[^ ]+ FAIL$' "$T/stdout" ||
        fail "the bisection did not stop at the gelu with a FAIL line"
    out_has "bisect: the first value over its tolerance: gelu at small.tf:13:9, written by kernel k0_layernorm"
    out_has "bisect: the unfused program computes it within tolerance"
    grep -q '^    2 ' "$T/stdout" && fail "the bisection went on past the first failure"
fi
# The same bug in the training check: the joint graph's primitives; the first is the exp of the
# gelu's decomposition, in the forward.
if FUSEC_PLANT_BUG=exp expect 4 run small.tf --train --check --bisect --out-dir o; then
    out_has "bisect: the joint graph (forward, then backward), each prefix compiled as a forward program"
    out_has "bisect: the first value over its tolerance: exp (of gelu) at small.tf:13:9, written by kernel k0_layernorm"
fi
# A bug in an op only the backward has: sq's forward is one mul, its backward g*x + g*x has the
# block's only add. The forward's outputs pass, the gradient fails, the bisection finds it past
# the forward, marked backward, and the per-kernel check names the backward's kernel.
cat >sq.tf <<'EOF2'
block sq(x: f32[5, 7]) -> f32[5, 7]
{
    return x * x
}
EOF2
if FUSEC_PLANT_BUG=add expect 4 run sq.tf --train --check --bisect --out-dir o; then
    grep -qE '^check out0: .* ok$' "$T/stdout" || fail "a planted bug in the backward changed the forward"
    grep -qE '^check grad_x: .* FAIL$' "$T/stdout" || fail "a planted bug in the backward left the gradient right"
    grep -qE '^  backward k0_mul \(mul\): 1 value, .* FAIL$' "$T/stdout" || fail "the per-kernel check did not name the backward's kernel"
    out_has "bisect: the first value over its tolerance: backward add (of mul) at sq.tf:3:14"
fi
# Unfused, nothing is planted: every value ok.
FUSEC_PLANT_BUG=exp expect 0 run small.tf --no-fuse --check --bisect --out-dir o &&
    out_has "bisect: every value is within its tolerance"
# On the reference device the program is the interpreter: no kernels, every value exact.
expect 0 run small.tf --device reference --check --bisect --out-dir o &&
    out_has "    0 layernorm at small.tf:12:9: max_rel_err=0.00e+00 tol="
# At bf16 the bound is bf16's, widened by the rounding spread: still every value ok.
expect 0 run small.tf --precision bf16 --check --bisect --out-dir o &&
    out_has "bisect: every value is within its tolerance"

MSG="FUSEC_PLANT_BUG='nope' names no op"; FUSEC_PLANT_BUG=nope expect_usage run small.tf --out-dir o
MSG="--bisect needs --check"; expect_usage run small.tf --bisect --out-dir o
MSG="option '--bisect' is not valid with 'fusec bench'"; expect_usage bench small.tf --bisect
finish
