#!/bin/sh
# bench/run.sh: re-run the whole peer benchmark with one command (not part of CI).
# Builds fusec (RelWithDebInfo, build-bench/), makes or reuses a virtual environment with
# bench/requirements.txt (PyTorch, JAX, NumPy, SciPy from PyPI; about 4 GB the first time),
# runs bench/peers.py and rewrites the tables in docs/bench.md between its markers (forward
# rows between peers:begin/end, training rows between peers-train:begin/end; a run rewrites
# only the sections it measured).
#   bench/run.sh                  # everything, default dims, writes docs/bench.md
#   bench/run.sh --no-doc --blocks residual_ln_gelu --repeat 10   # extra args go to peers.py
#   bench/run.sh --no-forward     # the training rows alone
# Environment: FUSEC_BENCH_VENV (default ~/.cache/fusec-bench-venv), PYTHON (default python3),
# FUSEC_BENCH_BUILD (default build-bench), FUSEC_BENCH_QUIET (default 10: seconds to wait, before
# each timed runner, for the CPUs to be 75% idle; the idle fraction found is reported),
# FUSEC_BENCH_NICE (default -15 when run as root, so
# that other work on a shared machine disturbs the timings less; 0 to turn off).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${FUSEC_BENCH_VENV:-$HOME/.cache/fusec-bench-venv}
build=${FUSEC_BENCH_BUILD:-$root/build-bench}
doc="--update-doc $root/docs/bench.md"
if [ "${1:-}" = "--no-doc" ]; then doc=""; shift; fi

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -j2 -C "$build" fusec >/dev/null

if [ ! -x "$venv/bin/python" ]; then
    "${PYTHON:-python3}" -m venv "$venv"
fi
if ! "$venv/bin/pip" install --disable-pip-version-check -q -r "$root/bench/requirements.txt"; then
    echo "run.sh: pip install failed; continuing with what is installed" >&2
fi

mkdir -p "$build/bench"
nice=${FUSEC_BENCH_NICE:-$( [ "$(id -u)" = 0 ] && echo -15 || echo 0 )}
# shellcheck disable=SC2086
exec nice -n "$nice" "$venv/bin/python" "$root/bench/peers.py" --fusec "$build/fusec" \
    --json-out "$build/bench/peers.json" --quiet "${FUSEC_BENCH_QUIET:-10}" $doc "$@"
