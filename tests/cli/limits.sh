# limits.sh: fusec under memory pressure fails fast. Under an address-space limit (`ulimit -v`)
# from too small to start to large enough to run, each command either succeeds or exits 1 with a
# `fusec: error: ` line (out of memory, a thread it cannot start) within the time limit, leaves
# no output file behind, and never hangs; below some limit the dynamic loader itself cannot map
# the libraries (exit 127, its own message). Until OpenBLAS was loaded on first use with one
# thread (runtime/blas.c), fusec hung here: OpenBLAS 0.3.21 retries a failed allocation of its
# 128 MiB buffer forever, in its own thread (started before main; exit() then waited for it)
# and in every product's call; LLVM's std::bad_alloc aborted it (exit 134); and NVRTC that could
# not be mapped was "unavailable" (exit 3): `--emit ptx` is in the sweep where NVRTC loads (and
# so was a CUDA driver, or cuBLASLt, that could not be mapped: checked with a stand-in driver).
# Skipped in a sanitizer build (ASan's shadow memory needs more address space than any such
# limit leaves) and where `ulimit -v` cannot be set.
# Run as `sh limits.sh FUSEC SRCDIR`.
. "$2/lib.sh"

if [ "${FUSEC_TEST_SANITIZED:-0}" = 1 ]; then
    echo "skip: a sanitizer build cannot run under ulimit -v"
    exit 77
fi
if ! (ulimit -v 4000000) 2>/dev/null || ! command -v timeout >/dev/null 2>&1; then
    echo "skip: ulimit -v or timeout(1) is not available"
    exit 77
fi

EX=$SRC/../../examples
cat >mlp.tf <<'EOF'
dim B = 2, T = 16, C = 64
block mlp(x: f32[B, T, C], param g: f32[C], param b: f32[C], param w: f32[C, 4*C], param w2: f32[4*C, C]) -> f32[B, T, C]
{
    return x + gelu(layernorm(x, g, b, eps=1e-5) @ w) @ w2
}
EOF

ok=0
loader=0
oom=0
# limited KIB ARGS...: fusec ARGS under `ulimit -v KIB` and a 60 s limit; checks the outcome
limited() {
    kib=$1
    shift
    rm -rf out && mkdir out
    (ulimit -v "$kib" && exec timeout 60 "$FUSEC" "$@") >"$T/stdout" 2>"$T/stderr"
    rc=$?
    case $rc in
    0) ok=$((ok + 1)) ;;
    1)
        oom=$((oom + 1))
        grep -q '^fusec: error: ' "$T/stderr" || { fail "ulimit -v $kib, fusec $*: exit 1 without an error line"; show_stderr; }
        [ -z "$(ls out)" ] || fail "ulimit -v $kib, fusec $*: exit 1 left $(ls out) behind"
        ;;
    127) loader=$((loader + 1)); grep -q 'error while loading shared libraries' "$T/stderr" ||
             { fail "ulimit -v $kib, fusec $*: exit 127 not from the loader"; show_stderr; } ;;
    124) fail "ulimit -v $kib, fusec $*: still running after 60 s (a hang under memory pressure)" ;;
    *) fail "ulimit -v $kib, fusec $*: exit status $rc"; show_stderr ;;
    esac
}

# NVRTC (--emit ptx) where it loads without a limit: under one it is out of memory (exit 1),
# not "unavailable" (exit 3)
if "$FUSEC" mlp.tf --emit ptx -o mlp.ptx >/dev/null 2>&1; then PTX=1; else PTX=0; fi
for kib in 150000 200000 250000 300000 350000 400000 450000 500000 600000 800000 1200000; do
    [ "$PTX" = 1 ] && limited $kib mlp.tf --emit ptx -o out/mlp.ptx
    limited $kib run mlp.tf --random 1 --out-dir out
    limited $kib run mlp.tf --train --precision bf16 --random 2 --out-dir out
    limited $kib run "$EX/gpt2_block.tf" -D T=32 --precision f8 --random 3 --out-dir out
    limited $kib mem "$EX/gpt2_block.tf" --precision f8
    limited $kib mlp.tf --emit llvm -o out/mlp.ll
done
# the CUDA driver that cannot be mapped is out of memory too (exit 1), not "no driver" (exit 3):
# FUSEC_LIBCUDA names a large library that is not a driver (cuBLASLt's), which without a limit
# loads and lacks cuInit (exit 3), and under one cannot be mapped
big=
for d in "${CUDA_HOME:-/usr/local/cuda}/lib64" /usr/local/cuda/lib64; do
    for f in "$d"/libcublasLt.so.*; do
        if [ -f "$f" ]; then big=$f; break 2; fi
    done
done
if [ -n "$big" ]; then
    rm -rf out && mkdir out
    FUSEC_LIBCUDA=$big timeout 60 "$FUSEC" run mlp.tf --device cuda --random 1 --out-dir out >"$T/stdout" 2>"$T/stderr"
    rc=$?
    [ $rc = 3 ] && grep -q 'lacks the entry point cuInit' "$T/stderr" ||
        { fail "FUSEC_LIBCUDA=$big: exit $rc, not 3 with the missing entry point"; show_stderr; }
    (ulimit -v 400000 && FUSEC_LIBCUDA=$big exec timeout 60 "$FUSEC" run mlp.tf --device cuda --random 1 --out-dir out) \
        >"$T/stdout" 2>"$T/stderr"
    rc=$?
    [ $rc = 1 ] && grep -q "^fusec: error: device 'cuda': out of memory: the CUDA driver .* cannot be mapped" "$T/stderr" ||
        { fail "FUSEC_LIBCUDA=$big under ulimit -v 400000: exit $rc, not 1 with out of memory"; show_stderr; }
    [ -z "$(ls out)" ] || fail "FUSEC_LIBCUDA=$big under ulimit -v 400000 left $(ls out) behind"
fi
# the sweep reaches both ends: some runs fail for want of memory, some succeed
echo "limits: $ok ran, $oom failed for want of memory, $loader not started"
[ "$oom" -gt 0 ] || fail "no command failed for want of memory: the limits do not test anything"
[ "$ok" -gt 0 ] || fail "no command succeeded under the largest limits"
finish
