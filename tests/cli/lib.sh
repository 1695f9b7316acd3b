# lib.sh: helpers for the command-line tests, sourced by every tests/cli/*.sh script.
#
# A script is run as `sh SCRIPT FUSEC SRCDIR`: FUSEC the fusec binary under test, SRCDIR this
# folder (small.tf, bad.tf). Each script gets a fresh scratch folder $T (removed at exit), works
# in $W=$T/w, counts failures with `fail`, and ends with `finish` (exit 0 pass, 1 fail).
#
# expect STATUS ARGS...   runs fusec ARGS, checks the exit status; for a non-zero status also
#                         checks that stderr has a `fusec: error: ` line. stdout and stderr are
#                         kept in $T/stdout and $T/stderr for err_has / out_has.

FUSEC=$1
SRC=$2
if [ -z "$FUSEC" ] || [ -z "$SRC" ]; then
    echo "usage: sh $0 FUSEC SRCDIR" >&2
    exit 2
fi
if [ ! -x "$FUSEC" ]; then
    echo "FAIL: $FUSEC is not an executable" >&2
    exit 1
fi
FAILS=0
T=$(mktemp -d "${TMPDIR:-/tmp}/fusec-cli.XXXXXX") || exit 1
trap 'chmod -R u+w "$T" 2>/dev/null; rm -rf "$T"' EXIT
W=$T/w
mkdir "$W" || exit 1
cp "$SRC/small.tf" "$SRC/bad.tf" "$W/" || exit 1
cd "$W" || exit 1

if python3 -c 'import numpy' >/dev/null 2>&1; then HAVE_NUMPY=1; else HAVE_NUMPY=0; fi
if command -v python3 >/dev/null 2>&1; then HAVE_PYTHON=1; else HAVE_PYTHON=0; fi

fail() {
    echo "FAIL: $*" >&2
    FAILS=$((FAILS + 1))
}

show_stderr() {
    sed 's/^/    stderr: /' "$T/stderr" >&2
}

expect() {
    want=$1
    shift
    "$FUSEC" "$@" >"$T/stdout" 2>"$T/stderr"
    rc=$?
    if [ "$rc" != "$want" ]; then
        fail "fusec $*: exit status $rc, expected $want"
        show_stderr
        return 1
    fi
    if [ "$want" != 0 ] && ! grep -q '^fusec: error: ' "$T/stderr"; then
        fail "fusec $*: exit status $rc without a 'fusec: error: ' line on stderr"
        show_stderr
        return 1
    fi
    return 0
}

# expect_usage ARGS... : exit status 2, the GNU hint, and (if set) $MSG on stderr.
expect_usage() {
    if expect 2 "$@"; then
        grep -qF "Try 'fusec --help'" "$T/stderr" || fail "fusec $*: no --help hint"
        if [ -n "$MSG" ] && ! grep -qF -- "$MSG" "$T/stderr"; then
            fail "fusec $*: stderr lacks '$MSG'"
            show_stderr
        fi
    fi
}

err_has() {
    if ! grep -qF -- "$1" "$T/stderr"; then
        fail "stderr lacks '$1'"
        show_stderr
    fi
}

out_has() {
    if ! grep -qF -- "$1" "$T/stdout"; then
        fail "stdout lacks '$1'"
        sed 's/^/    stdout: /' "$T/stdout" >&2
    fi
}

# no_temps DIR: no temporary output files (.NAME.tmpXXXXXX) are left in DIR.
no_temps() {
    left=$(find "$1" -name '.*.tmp*' 2>/dev/null)
    [ -z "$left" ] || fail "temporary files left in $1: $left"
}

# npy_header DESCR SHAPE: the header of a .npy file (format 1.0: magic, header length, header
# padded to 64 bytes) for dtype DESCR ('<f4') and SHAPE ('2, 3' or '2,'), on standard output.
npy_header() {
    hdr="{'descr': '$1', 'fortran_order': False, 'shape': ($2), }"
    while [ $(( (10 + ${#hdr} + 1) % 64 )) -ne 0 ]; do hdr="$hdr "; done
    hlen=$(( ${#hdr} + 1 ))
    printf '\223NUMPY\001\000'
    printf "\\$(printf '%03o' $((hlen % 256)))\\$(printf '%03o' $((hlen / 256)))"
    printf '%s\n' "$hdr"
}

# make_npy_f32 FILE R C: a little-endian f32 .npy of shape (R, C) filled with 1.0, written
# without NumPy.
make_npy_f32() {
    {
        npy_header '<f4' "$2, $3"
        n=$(( $2 * $3 ))
        while [ "$n" -gt 0 ]; do printf '\000\000\200\077'; n=$((n - 1)); done
    } >"$1"
}

# make_npy_i32 FILE V...: a little-endian i32 .npy of shape (number of Vs,) holding the Vs
# (each in 0..255), written without NumPy.
make_npy_i32() {
    f=$1
    shift
    {
        npy_header '<i4' "$#,"
        for v in "$@"; do printf "\\$(printf '%03o' "$v")\\000\\000\\000"; done
    } >"$f"
}

finish() {
    if [ "$FAILS" -ne 0 ]; then
        echo "$FAILS check(s) failed" >&2
        exit 1
    fi
    echo "all checks passed"
    exit 0
}
