#!/usr/bin/env bash
# check_bad_input.sh: bad inputs get a diagnostic, exit status 1, and no output file.
#
# For each case below, `fusec CASE.tf -o FRESH_DIR/out.cu` must:
#   - exit with status 1 (never 70, an internal error; never a signal; never hang);
#   - print on stderr a line `CASE.tf:LINE:COL: error: ...` (the file as given or its base
#     name), at the line (and column) given where the place is unambiguous;
#   - print whatever else the case requires (the dim's name, both shapes, ...);
#   - leave FRESH_DIR empty.
# Each case is then compiled once more without -o from a directory holding only the source,
# which must hold only the source afterwards (the default output goes beside the input).
# Inputs too large or too random to keep as text (4 KiB of seeded random bytes, 200,000
# nested parentheses) are generated at run time, reproducibly.
#
# Usage: check_bad_input.sh FUSEC [CASE...]     exit 0 all passed, 1 a failure, 77 no fusec
set -u

FUSEC=${1:?usage: check_bad_input.sh FUSEC [CASE...]}
shift
ONLY=" $* "
case $FUSEC in /*) ;; *) FUSEC=$PWD/$FUSEC ;; esac
if [ ! -x "$FUSEC" ]; then
    echo "check_bad_input.sh: SKIP: $FUSEC is not an executable"
    exit 77
fi
PY=$(command -v python3 || true)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fusec-bad-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/src"

npass=0
nfail=0
failed=""

# bad NAME LINE COL [REGEX...]  -- checks $WORK/src/NAME.tf; LINE/COL may be '' (any).
# Each REGEX (grep -E, case-insensitive) must match somewhere on stderr.
bad() {
    local name=$1 line=$2 col=$3
    shift 3
    [ "$ONLY" = "  " ] || case $ONLY in *" $name "*) ;; *) return 0 ;; esac
    local src="$WORK/src/$name.tf" out="$WORK/out-$name" why=""
    mkdir -p "$out"
    timeout 120 "$FUSEC" "$src" -o "$out/out.cu" >"$WORK/$name.stdout" 2>"$WORK/$name.stderr"
    local rc=$?
    local l=${line:-[0-9]+} c=${col:-[0-9]+}
    if [ $rc -eq 124 ]; then why="timed out (120 s)"
    elif [ $rc -ge 128 ]; then why="killed by signal $((rc - 128))"
    elif [ $rc -eq 70 ]; then why="internal error (exit 70)"
    elif [ $rc -ne 1 ]; then why="exit status $rc, expected 1"
    fi
    if ! grep -Eq "^(.*/)?$name\\.tf:$l:$c: error: " "$WORK/$name.stderr"; then
        why="${why:+$why; }no '$name.tf:$l:$c: error: ' line on stderr"
    fi
    local re
    for re in "$@"; do
        grep -Eiq -- "$re" "$WORK/$name.stderr" || why="${why:+$why; }stderr lacks /$re/"
    done
    if [ -n "$(ls -A "$out")" ]; then
        why="${why:+$why; }output left behind: $(ls -A "$out" | tr '\n' ' ')"
    fi
    # Once more without -o: nothing may appear beside the input.
    local side="$WORK/side-$name"
    mkdir -p "$side"
    cp "$src" "$side/"
    (cd "$side" && timeout 120 "$FUSEC" "$name.tf" >/dev/null 2>&1)
    local rc2=$?
    [ $rc2 -eq 1 ] || why="${why:+$why; }without -o: exit status $rc2, expected 1"
    if [ "$(ls -A "$side")" != "$name.tf" ]; then
        why="${why:+$why; }without -o: left $(ls -A "$side" | tr '\n' ' ')"
    fi
    if [ -z "$why" ]; then
        npass=$((npass + 1))
        printf '  %-20s ok    %s\n' "$name" \
            "$(grep -Em1 ': error: ' "$WORK/$name.stderr" | sed "s|^$WORK/src/||" | cut -c1-100)"
    else
        nfail=$((nfail + 1))
        failed="$failed $name"
        printf '  %-20s FAIL  %s\n' "$name" "$why"
        head -c 1500 "$WORK/$name.stderr" | sed 's/^/        | /'
    fi
}

src() { cat >"$WORK/src/$1.tf"; }

# ---- the catalogue ------------------------------------------------------------------------
# Column numbers count bytes from 1; the source lines below are indented by four spaces.

src syntax <<'EOF'
dim N = 4
block f(x: f32[N]) -> f32[N] {
    y = x + * 2
    return y
}
EOF
bad syntax 3 13                          # the unexpected `*`

src undefined <<'EOF'
dim N = 4
block f(x: f32[N]) -> f32[N] {
    y = x + z
    return y
}
EOF
bad undefined 3 13 "\bz\b"               # names the undefined `z`, at `z`

src two_errors <<'EOF'
dim N = 4
block f(x: f32[N]) -> f32[N] {
    y = x + p
    z = y * q
    return z
}
EOF
bad two_errors 3 13 "two_errors\.tf:4:13: error: "   # the second, independent error too

src shape <<'EOF'
block f(a: f32[5, 7], b: f32[5, 9]) -> f32[5, 7] {
    return a + b
}
EOF
bad shape 2 "" "[[(] *5 *, *7 *[])]" "[[(] *5 *, *9 *[])]"   # prints both shapes

src matmul <<'EOF'
block f(a: f32[5, 7], b: f32[8, 3]) -> f32[5, 3] {
    return a @ b
}
EOF
bad matmul 2 ""

src unbound <<'EOF'
dim N = 4, K
block f(x: f32[N, K]) -> f32[N, K] {
    return x * 2.0
}
EOF
bad unbound "" "" "\bK\b"                # names the dim

src reshape <<'EOF'
block f(x: f32[6, 4]) -> f32[5, 5] {
    return reshape(x, [5, 5])
}
EOF
bad reshape 2 ""

src reshape_two_neg <<'EOF'
block f(x: f32[6, 4]) -> f32[6, 4] {
    return reshape(x, [-1, -1])
}
EOF
bad reshape_two_neg 2 ""

src axis <<'EOF'
block f(x: f32[6, 4]) -> f32[6] {
    return sum(x, axis=2)
}
EOF
bad axis 2 ""

src overflow <<'EOF'
dim A = 4294967296
block f(x: f32[A, A]) -> f32[A, A] {
    return x + 1.0
}
EOF
bad overflow "" ""                       # 2^64 elements: overflows int64

src overflow_bytes <<'EOF'
dim A = 2147483648
block f(x: f32[A, A]) -> f32[A, A] {
    return x + 1.0
}
EOF
bad overflow_bytes "" ""                 # 2^62 elements fit; 2^64 bytes do not

src zero_dim <<'EOF'
dim N = 0
block f(x: f32[N]) -> f32[N] {
    return x + 1.0
}
EOF
bad zero_dim "" ""

src inexact_div <<'EOF'
dim C = 10, H = 3
block f(x: f32[C]) -> f32[C / H] {
    return reshape(x, [C / H, -1])
}
EOF
bad inexact_div 2 "" "\b10\b" "\b3\b"     # shows both values

src recursion <<'EOF'
dim N = 4
block f(x: f32[N]) -> f32[N] {
    return f(x) + 1.0
}
EOF
bad recursion 3 ""

src mutual_recursion <<'EOF'
dim N = 4
block a(x: f32[N]) -> f32[N] {
    return b(x)
}
block b(x: f32[N]) -> f32[N] {
    return a(x)
}
EOF
bad mutual_recursion "" ""

src eps_zero <<'EOF'
block f(x: f32[3, 5]) -> f32[3, 5] {
    return layernorm(x, eps=0.0)
}
EOF
bad eps_zero 2 ""

src dup_arg <<'EOF'
block f(x: f32[3, 5]) -> f32[3, 5] {
    return softmax(x, axis=-1, axis=0)
}
EOF
bad dup_arg 2 ""

src unterminated_string <<'EOF'
block f(x: f32[3, 5]) -> f32[3, 5] {
    return gelu(x, approx="tanh)
}
EOF
bad unterminated_string 2 ""

printf 'block f(x: f32[3, 5]) -> f32[3, 5] {\n    return gelu(x' >"$WORK/src/truncated.tf"
bad truncated "" ""

if [ -n "$PY" ]; then
    "$PY" -c '
import random, sys
random.seed(20240521)
sys.stdout.buffer.write(bytes(random.getrandbits(8) for _ in range(4096)))' >"$WORK/src/random_bytes.tf"
    bad random_bytes "" ""

    "$PY" -c '
import sys
n = 200000
sys.stdout.write("block f(x: f32[4]) -> f32[4] {\n    return " + "(" * n + "x" + ")" * n + "\n}\n")' \
        >"$WORK/src/deep_parens.tf"
    bad deep_parens 2 ""
else
    echo "  random_bytes, deep_parens: SKIPPED (python3 not found to generate them)"
fi

echo
if [ $nfail -ne 0 ]; then
    echo "check_bad_input.sh: $npass passed, $nfail FAILED:$failed"
    exit 1
fi
echo "check_bad_input.sh: all $npass passed"
exit 0
