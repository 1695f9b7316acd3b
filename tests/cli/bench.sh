# bench.sh: `fusec bench` on the CPU: the table, and --json printing exactly one JSON object
# with the keys of docs/cli.md (parsed by python3 where available). Run as `sh bench.sh FUSEC
# SRCDIR`.
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

# A source error: exit 1, nothing on stdout.
expect 1 bench bad.tf --json && err_has "bad.tf:6:16: error:"
[ -s "$T/stdout" ] && fail "a failed bench --json printed to stdout"
finish
