# device.sh: --device cuda where no GPU or libcuda is present must exit 3 with a clear error
# and write nothing; where a GPU is present it must work (exit 0). Run as `sh device.sh FUSEC
# SRCDIR`.
. "$2/lib.sh"

mkdir o
"$FUSEC" run small.tf --device cuda --out-dir o >"$T/stdout" 2>"$T/stderr"
rc=$?
case $rc in
0)
    echo "note: a CUDA device is present: run --device cuda succeeded"
    [ -s o/y.npy ] || fail "run --device cuda did not write o/y.npy"
    expect 0 run small.tf --device cuda --check --out-dir o
    ;;
3)
    err_has "fusec: error: "
    err_has "cuda"
    [ -z "$(ls o)" ] || fail "a run on an unavailable device wrote $(ls o)"
    expect 3 bench small.tf --device cuda --repeat 1
    expect 3 bench small.tf --device cuda --repeat 1 --json
    [ -s "$T/stdout" ] && fail "bench --json on an unavailable device printed to stdout"
    ;;
*)
    fail "run --device cuda: exit status $rc, expected 3 (no GPU) or 0"
    show_stderr
    ;;
esac
# FUSEC_CPU: a lower x86 level gives the same checked result; a bad value is exit 2, named.
export FUSEC_CPU
if grep -q ' avx2 ' /proc/cpuinfo 2>/dev/null; then
    FUSEC_CPU=x86-64-v3
    expect 0 run small.tf --random 3 --check --out-dir o
fi
FUSEC_CPU=x86-64-v2
expect 0 run small.tf --random 3 --check --out-dir o
FUSEC_CPU=x86-64-v9
expect 2 run small.tf --random 3 --out-dir o && err_has "FUSEC_CPU='x86-64-v9' is not native"
# the CPU's LLVM IR depends on the level too (its vector width): the same error, no file
expect 2 small.tf --emit llvm -o o.ll && err_has "FUSEC_CPU='x86-64-v9' is not native"
[ ! -e o.ll ] || fail "--emit llvm with a bad FUSEC_CPU wrote o.ll"
unset FUSEC_CPU
no_temps "$W"
finish
