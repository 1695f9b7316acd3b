# bench.sh: `fusec bench` on the CPU: the table, and --json printing exactly one JSON object
# with the keys of docs/cli.md (parsed by python3 where available); the roofline column's
# "in cache" label. Run as `sh bench.sh FUSEC SRCDIR`.
. "$2/lib.sh"

if expect 0 bench small.tf --device cpu --repeat 2; then
    out_has "fused"
    out_has "eager"
    out_has "speedup"
fi

if expect 0 bench small.tf --device=cpu --repeat=3 --json; then
    cp "$T/stdout" bench.json
    if [ "$HAVE_PYTHON" = 1 ]; then
        python3 -m json.tool bench.json >/dev/null || fail "bench --json is not valid JSON"
        python3 - bench.json <<'PY' || fail "bench --json lacks the keys of docs/cli.md"
import json, sys
d = json.load(open(sys.argv[1]))
num = (int, float)
assert isinstance(d["device"], str) and d["device"]
assert isinstance(d["speedup"], num) and d["speedup"] > 0
assert isinstance(d["stream_gbps"], num) and d["stream_gbps"] > 0
for k in ("fused", "eager"):
    p = d[k]
    assert isinstance(p["median_ms"], num) and p["median_ms"] >= 0
    assert isinstance(p["bytes"], int) and p["bytes"] > 0
    assert isinstance(p["kernels"], list) and p["kernels"]
    for e in p["kernels"]:
        assert isinstance(e["name"], str) and e["name"]
        assert isinstance(e["ops"], list) and all(isinstance(o, str) and o for o in e["ops"])
        assert isinstance(e["bytes"], int) and e["bytes"] >= 0
        assert isinstance(e["median_ms"], num)
    assert p["bytes"] == sum(e["bytes"] for e in p["kernels"])
# Eager makes at least as many launches as fused.
assert len(d["eager"]["kernels"]) >= len(d["fused"]["kernels"])
PY
    else
        echo "note: python3 not available: skipping the JSON parse"
        grep -q '"speedup"' bench.json || fail "bench --json lacks speedup"
    fi
    [ "$(wc -l <bench.json)" -eq 1 ] || fail "bench --json printed more than one line"
fi

# The roofline column, without timings: FUSEC_CPU_GBPS replaces the measured STREAM figure.
# A tiny one makes every launch and total faster than it: each says "in cache" (never a
# percentage over 100), and the footnote explains it; a huge one makes none. 1 KB/s: a launch
# of these few hundred bytes would have to take over 0.1 s to miss it (0.001 GB/s did, once,
# under ASan on a loaded CI machine: 1.4 ms for 356 bytes).
export FUSEC_CPU_GBPS=0.000001
if expect 0 bench small.tf --device cpu --repeat 2; then
    out_has "STREAM 1e-06 GB/s (given: FUSEC_CPU_GBPS)"
    rows=$(grep -c '^  [0-9 ][0-9 ]*  *k[0-9]*_\|^  *total ' "$T/stdout")
    cached=$(grep -c '^  [0-9 ][0-9 ]*  *k[0-9]*_.* in cache  \|^  *total .* in cache$' "$T/stdout")
    [ "$rows" -ge 4 ] && [ "$rows" = "$cached" ] || fail "FUSEC_CPU_GBPS=1e-6: $cached of $rows rows say 'in cache'"
    grep -q '%' "$T/stdout" && fail "FUSEC_CPU_GBPS=1e-6: a percentage: $(grep '%' "$T/stdout")"
    out_has "in cache: faster than the STREAM copy, so the bytes came from the caches"
fi
if expect 0 bench small.tf --device cpu --repeat 2 --json; then
    if [ "$HAVE_PYTHON" = 1 ]; then
        python3 - "$T/stdout" <<'PY' || fail "FUSEC_CPU_GBPS=1e-6 --json: in_cache / roofline_fraction"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["stream_gbps"] == 0.000001
for k in ("fused", "eager"):
    for e in d[k]["kernels"]:
        assert e["in_cache"] is True and e["roofline_fraction"] > 1, e
PY
    fi
fi
export FUSEC_CPU_GBPS=1e12
if expect 0 bench small.tf --device cpu --repeat 2; then
    grep -q 'in cache' "$T/stdout" && fail "FUSEC_CPU_GBPS=1e12: $(grep 'in cache' "$T/stdout")"
    grep -q '^  0  .*  *0\.0%  ' "$T/stdout" || fail "FUSEC_CPU_GBPS=1e12: no percentage in launch 0's row"
fi
export FUSEC_CPU_GBPS=fast
MSG="FUSEC_CPU_GBPS='fast' is not a positive number"
expect_usage bench small.tf --device cpu --repeat 2
unset FUSEC_CPU_GBPS MSG

# A source error: exit 1, nothing on stdout.
expect 1 bench bad.tf --json && err_has "bad.tf:6:16: error:"
[ -s "$T/stdout" ] && fail "a failed bench --json printed to stdout"
finish
