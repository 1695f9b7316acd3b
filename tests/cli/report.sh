# report.sh: --emit report (the roofline table on several targets) and --emit roofline (the
# SVG chart). Run as `sh report.sh FUSEC SRCDIR`.
#   - the target rows: sm_80 and sm_90 with their datasheet figures, the --arch GPU when it is
#     another one, and cpu with the figures FUSEC_CPU_GBPS / FUSEC_CPU_GFLOPS give;
#   - predicted times: a pinned kernel (small.tf at N=5, C=7: 356 bytes, 885 flops) worked
#     out by hand, and every row and total of a larger block checked against
#     max(bytes / bandwidth, flops / peak) with the M / C marks (python3);
#   - bad overrides are refused with the variable named; without them the figures are
#     measured and the rows say so;
#   - the SVG parses as XML (python3 xml.etree), has one point per launch (fused and eager),
#     its labels are generated kernel names, and a source file name with < & " ' and a byte
#     that is not UTF-8 leaves it well-formed.
. "$2/lib.sh"

export FUSEC_CPU_GBPS=0.001 FUSEC_CPU_GFLOPS=0.001

# The target rows, and the pinned kernel: cpu at 1 MB/s and 1 MFLOP/s: 356 bytes take 356 us,
# 885 flops take 885 us: compute-bound, 885 us. sm_80: 356 B / 2039 GB/s = 0.000175 us.
if expect 0 small.tf -D N=5 -D C=7 --emit report -o -; then
    cp "$T/stdout" rep1.txt
    out_has "# sm_80            2039        19500        9.564  datasheet, A100 80GB SXM"
    out_has "# sm_90            3350        66900       19.970  datasheet, H100 SXM [--arch]"
    out_has "# cpu             0.001        0.001        1.000  GB/s given: FUSEC_CPU_GBPS; GFLOP/s given: FUSEC_CPU_GFLOPS"
    grep -q '^# sm_86\|^# sm_89' rep1.txt && fail "--arch sm_90 lists sm_86 or sm_89"
    out_has "sm_80_us       sm_90_us         cpu_us  ops"
    row=$(grep '^0 ' rep1.txt)
    case $row in
    *" 196            160            885      2.486 "*"0.000 M        0.000 M      885.000 C  "*) ;;
    *) fail "the pinned kernel's row is not 196 B read, 160 written, 885 flops, cpu 885.000 C: $row" ;;
    esac
fi
# Bandwidth-bound on the cpu: 356 bytes at 1 MB/s = 356 us against 885 flops at 1 GFLOP/s.
FUSEC_CPU_GFLOPS=1
if expect 0 small.tf -D N=5 -D C=7 --emit report -o -; then
    out_has "# cpu             0.001            1     1000.000  GB/s given: FUSEC_CPU_GBPS; GFLOP/s given: FUSEC_CPU_GFLOPS"
    grep '^0 ' "$T/stdout" | grep -q "     356.000 M  " || fail "cpu time of the pinned kernel is not 356.000 M: $(grep '^0 ' "$T/stdout")"
    grep -q '^ *total .* 356.000$' "$T/stdout" || fail "the total is not 356.000 us on the cpu"
fi
FUSEC_CPU_GFLOPS=0.001
# --arch sm_86 adds its column between sm_80 and sm_90 and is the one marked.
if expect 0 small.tf --arch sm_86 --emit report -o -; then
    out_has "# sm_86             600        31200       52.000  datasheet, A10 [--arch]"
    out_has "sm_80_us       sm_86_us       sm_90_us         cpu_us  ops"
    grep -q '^# sm_90 .*\[--arch\]' "$T/stdout" && fail "sm_90 is marked --arch with --arch sm_86"
fi

# Bad overrides: a usage error naming the variable; nothing written.
for bad in abc 0 -1 inf nan 1e999 "" 12x; do
    MSG="FUSEC_CPU_GBPS='$bad' is not a positive number"
    FUSEC_CPU_GBPS=$bad
    expect_usage small.tf --emit report -o bad.txt
    [ -e bad.txt ] && fail "FUSEC_CPU_GBPS='$bad' wrote bad.txt"
done
FUSEC_CPU_GBPS=0.001
MSG="FUSEC_CPU_GFLOPS='-2' is not a positive number"
FUSEC_CPU_GFLOPS=-2
expect_usage small.tf --emit roofline -o bad.svg
[ -e bad.svg ] && fail "a bad FUSEC_CPU_GFLOPS wrote bad.svg"
FUSEC_CPU_GFLOPS=0.001
MSG=

# Measured figures (no overrides): the cpu row says where they come from.
if (unset FUSEC_CPU_GBPS FUSEC_CPU_GFLOPS; exec "$FUSEC" small.tf --emit report -o - >"$T/stdout" 2>"$T/stderr"); then
    grep -q '^# cpu  .*GB/s measured: STREAM copy, [0-9]* threads\{0,1\}; GFLOP/s measured: .* loop, [0-9]* threads\{0,1\}$' "$T/stdout" ||
        fail "the measured cpu row: $(grep '^# cpu' "$T/stdout")"
else
    fail "--emit report with measured cpu figures failed"; show_stderr
fi
# One overridden, the other measured.
if (unset FUSEC_CPU_GFLOPS; FUSEC_CPU_GBPS=12.5; exec "$FUSEC" small.tf --emit report -o - >"$T/stdout" 2>"$T/stderr"); then
    grep -q '^# cpu              12.5 .*GB/s given: FUSEC_CPU_GBPS; GFLOP/s measured: ' "$T/stdout" ||
        fail "FUSEC_CPU_GBPS alone: $(grep '^# cpu' "$T/stdout")"
else
    fail "--emit report with FUSEC_CPU_GBPS alone failed"; show_stderr
fi

if [ "$HAVE_PYTHON" != 1 ]; then
    echo "note: no python3: the arithmetic of every row and the SVG checks are skipped"
    finish
fi

# Every row and total of a larger block, fused and eager, on every target.
export FUSEC_CPU_GBPS=23.5 FUSEC_CPU_GFLOPS=71.25
cat >blk.tf <<'EOF'
dim N = 37, C = 65, H = 129

block mlp(x: f32[N, C], param g: f32[C], param b: f32[C], param w1: f32[C, H], param w2: f32[H, C])
{
    h = layernorm(x, g, b, eps=1e-5)
    return x + gelu(h @ w1) @ w2
}
EOF
cat >check_report.py <<'EOF'
import sys
text = open(sys.argv[1]).read().splitlines()
want = {"sm_80": (2039.0, 19500.0), "sm_90": (3350.0, 66900.0), "cpu": (23.5, 71.25)}
if len(sys.argv) > 2:
    want[sys.argv[2]] = tuple(float(v) for v in sys.argv[3:5])
targets = {}
for line in text:
    f = line.split()
    if len(f) > 4 and f[0] == "#" and f[1] in want:
        targets[f[1]] = (float(f[2]), float(f[3]))
assert targets == want, (targets, want)
head = next(l for l in text if l.startswith("#    kernel"))
cols = head.split()
tcols = [c[:-3] for c in cols if c.endswith("_us")]
assert sorted(tcols) == sorted(want), tcols
rows = [l for l in text if l[:1].isdigit()]
assert rows, "no kernel rows"
tot = dict.fromkeys(tcols, 0.0)
sums = [0, 0, 0]
for r in rows:
    f = r.split()
    br, bw, fl = int(f[3]), int(f[4]), int(f[5])
    sums = [sums[0] + br, sums[1] + bw, sums[2] + fl]
    assert abs(float(f[6]) - (fl / (br + bw) if br + bw else 0)) <= 0.0005, r
    for i, t in enumerate(tcols):
        got, mark = float(f[8 + 2 * i]), f[9 + 2 * i]
        gbps, gflops = want[t]
        tm, tc = (br + bw) / (gbps * 1e3), fl / (gflops * 1e3)
        exp = max(tm, tc)
        assert abs(got - exp) <= 0.0005 + 1e-6 * exp, (t, r, exp)
        assert mark == ("C" if tc > tm else "M"), (t, r, mark)
        tot[t] += exp
total = next(l for l in text if l.split()[:1] == ["total"]).split()
assert [int(v) for v in total[1:4]] == sums, (total, sums)
for i, t in enumerate(tcols):
    assert abs(float(total[5 + i]) - tot[t]) <= 0.0005 * (len(rows) + 1), (t, total, tot[t])
marks = {f for r in rows for f in r.split() if f in ("M", "C")}
print("%d rows ok, marks %s" % (len(rows), "".join(sorted(marks))))
EOF
for mode in "" --no-fuse; do
    if expect 0 blk.tf $mode --emit report -o rep.txt; then
        python3 check_report.py rep.txt >"$T/py" 2>&1 || { fail "report arithmetic ($mode)"; cat "$T/py" >&2; }
    fi
done
if expect 0 blk.tf --arch sm_89 --emit report -o rep.txt; then
    python3 check_report.py rep.txt sm_89 300 30300 >"$T/py" 2>&1 || { fail "report arithmetic (--arch sm_89)"; cat "$T/py" >&2; }
fi
# the harness can fail: a wrong cpu bandwidth in the checker is caught
FUSEC_CPU_GBPS=24
if expect 0 blk.tf --emit report -o rep_wrong.txt; then
    python3 check_report.py rep_wrong.txt >/dev/null 2>&1 && fail "check_report.py accepted a report made with another bandwidth"
fi
FUSEC_CPU_GBPS=23.5

# The SVG: well-formed, one point per launch, generated labels.
cat >check_svg.py <<'EOF'
import re, sys
import xml.etree.ElementTree as ET
svg, report = sys.argv[1], sys.argv[2]
ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(svg).getroot()
assert root.tag == ns + "svg", root.tag
launches = sum(1 for l in open(report) if l[:1].isdigit())
points = [c for c in root.iter(ns + "circle") if c.get("class") == "point"]
assert len(points) == launches, (len(points), launches)
labels = [t.text for t in root.iter(ns + "text") if t.get("class") == "label"]
assert len(labels) == launches and all(re.fullmatch(r"k[0-9]+_[a-z0-9_]+", s) for s in labels), labels
roofs = [p for p in root.iter(ns + "polyline") if p.get("class") == "roof"]
assert len(roofs) == int(sys.argv[3]), len(roofs)
for c in points:
    x, y = float(c.get("cx")), float(c.get("cy"))
    assert 0 <= x <= float(root.get("width")) and 0 <= y <= float(root.get("height")), (x, y)
if len(sys.argv) > 4:
    desc = "".join(root.find(ns + "desc").itertext())
    assert sys.argv[4] in desc, desc
print("%d points ok" % len(points))
EOF
for mode in "" --no-fuse; do
    if expect 0 blk.tf $mode --emit roofline -o chart.svg && expect 0 blk.tf $mode --emit report -o rep.txt; then
        python3 check_svg.py chart.svg rep.txt 3 >"$T/py" 2>&1 || { fail "roofline SVG ($mode)"; cat "$T/py" >&2; }
    fi
done
if expect 0 blk.tf --arch sm_86 --emit roofline -o chart.svg && expect 0 blk.tf --emit report -o rep.txt; then
    python3 check_svg.py chart.svg rep.txt 4 >"$T/py" 2>&1 || { fail "roofline SVG (--arch sm_86)"; cat "$T/py" >&2; }
fi
# the default output name ends in .svg
expect 0 blk.tf --emit roofline && { [ -s blk.svg ] || fail "--emit roofline did not write blk.svg"; }
# XML special characters in the (user-written) file name, and a byte that is not UTF-8
cp blk.tf 'we<&"'"'"'ird>.tf'
if expect 0 'we<&"'"'"'ird>.tf' --emit roofline -o weird.svg && expect 0 blk.tf --emit report -o rep.txt; then
    python3 check_svg.py weird.svg rep.txt 3 'we<&"'"'"'ird>.tf' >"$T/py" 2>&1 || { fail "roofline SVG of we<&\"'ird>.tf"; cat "$T/py" >&2; }
    grep -q 'we<&' weird.svg && fail "the file name reached the SVG unescaped"
fi
bad=$(printf 'x\377y.tf')
cp blk.tf "$bad"
if expect 0 "$bad" --emit roofline -o bad8.svg; then
    python3 check_svg.py bad8.svg rep.txt 3 'x?y.tf' >"$T/py" 2>&1 || { fail "roofline SVG of a non-UTF-8 file name"; cat "$T/py" >&2; }
fi
no_temps "$W"
finish
