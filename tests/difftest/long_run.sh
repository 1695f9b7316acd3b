#!/bin/sh
# long_run.sh [-n GRAPHS] [-s "SEED SEED..."] [-j JOBS] [-e EMU_EVERY] [-o DIR] [-b DIFFTEST] [-- difftest options]
# The random-graph tester at length: GRAPHS graphs (default 1000) split over the seeds (default
# 4 seeds from the clock, printed), each seed one `difftest --jobs JOBS --emu-every EMU_EVERY`
# run (defaults 2 and 50) under a wall-clock limit (5 s a graph, at least 10 min; difftest's own
# --timeout still bounds each graph). Failures are minimized and written under DIR (default
# ./difftest-long-<date>/seed-S/), each run's log as DIR/seed-S.log. Prints per-seed lines, the
# totals per failure class and the rate in graphs per second (wall clock, everything included).
# Exit status 0 when nothing failed. docs/difftest.md gives measured rates.
set -u
graphs=1000 jobs=2 emu=50 out= seeds= dt=
here=$(cd "$(dirname "$0")" && pwd)
while getopts n:s:j:e:o:b: opt; do
    case $opt in
        n) graphs=$OPTARG ;; s) seeds=$OPTARG ;; j) jobs=$OPTARG ;; e) emu=$OPTARG ;;
        o) out=$OPTARG ;; b) dt=$OPTARG ;;
        *) sed -n '2,9s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ "${1:-}" = "--" ] && shift
dt=${dt:-${DIFFTEST:-$here/../../build/difftest}}
[ -x "$dt" ] || { echo "long_run.sh: no difftest at $dt (build it, or -b PATH)" >&2; exit 2; }
if [ -z "$seeds" ]; then
    base=$(date +%s)
    seeds="$base $((base + 1)) $((base + 2)) $((base + 3))"
fi
out=${out:-./difftest-long-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
nseeds=$(echo $seeds | wc -w)
per=$(( (graphs + nseeds - 1) / nseeds ))
limit=$(( per * 5 > 600 ? per * 5 : 600 ))
echo "long_run: $graphs graphs over seeds $seeds ($per each), --jobs $jobs, --emu-every $emu, limit ${limit} s a seed, out $out"
start=$(date +%s.%N)
total=0 failed=0 ill=0 runs_bad=0 left=$graphs
classes=$out/classes.txt
: > "$classes"
for s in $seeds; do
    n=$(( left < per ? left : per ))
    [ "$n" -le 0 ] && break
    left=$((left - n))
    log=$out/seed-$s.log
    t0=$(date +%s.%N)
    timeout "$limit" "$dt" --seed "$s" --count "$n" --jobs "$jobs" --emu-every "$emu" --out "$out/seed-$s" "$@" > "$log" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    sum=$(grep -E '^difftest: [0-9]+ graphs \(' "$log" | tail -n 1)
    if [ -z "$sum" ]; then
        echo "  seed $s: no summary (exit $rc$( [ $rc -eq 124 ] && echo ': the wall-clock limit' )); see $log"
        runs_bad=$((runs_bad + 1))
        continue
    fi
    g=$(echo "$sum" | sed 's/^difftest: \([0-9]*\) graphs.*/\1/')
    f=$(echo "$sum" | sed 's/.* \([0-9]*\) failed$/\1/')
    i=$(echo "$sum" | sed 's/.* \([0-9]*\) ill-conditioned.*/\1/')
    total=$((total + g)) failed=$((failed + f)) ill=$((ill + i))
    # the per-class lines that follow the summary ("  mismatch: 3")
    sed -n '/^difftest: [0-9]* graphs (/,/^  NVRTC/p' "$log" | grep -E '^  [a-zA-Z ]+: [0-9]+$' >> "$classes"
    echo "  seed $s: $g graphs, $f failed, $i ill-conditioned, $(echo "$t0 $t1" | awk '{printf "%.0f", $2 - $1}') s"
done
el=$(echo "$start $(date +%s.%N)" | awk '{printf "%.1f", $2 - $1}')
echo "long_run: $total graphs in $el s: $failed failed, $ill ill-conditioned (not counted)$( [ $runs_bad -gt 0 ] && echo ", $runs_bad run(s) without a summary")"
if [ -s "$classes" ]; then
    awk -F': ' '{sub(/^ +/, "", $1); n[$1] += $2} END {for (c in n) printf "  %s: %d\n", c, n[c]}' "$classes" | sort
fi
echo "long_run: rate $(echo "$total $el" | awk '{printf "%.2f", ($2 > 0) ? $1 / $2 : 0}') graphs/s (wall clock, $(nproc) cores, --jobs $jobs, emulation every $emu); reproducers under $out/"
[ "$failed" -eq 0 ] && [ "$runs_bad" -eq 0 ]
