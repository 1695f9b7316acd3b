#!/usr/bin/env bash
# Golden `--emit report` of the examples whose fusion the docs and example comments describe
# (docs/examples.md, examples/*.tf headers): for every tests/doc/reports/NAME.report,
# `fusec examples/NAME.tf --emit report -o -` must print it byte for byte. The CPU roofline
# is fixed by FUSEC_CPU_GBPS/FUSEC_CPU_GFLOPS (else it is measured, and changes from run to
# run); the GPU figures are datasheet numbers. With FUSEC_UPDATE_GOLDEN=1 the files are
# rewritten instead (review the diff: a changed kernel list means a doc may need changing).
# usage: reports.sh FUSEC REPO
set -u
fusec=$1; repo=$2
cd "$repo" || exit 1   # file names in the report are relative to the repository
export FUSEC_CPU_GBPS=30 FUSEC_CPU_GFLOPS=200
fail=0; n=0
for golden in tests/doc/reports/*.report; do
  name=$(basename "$golden" .report); n=$((n + 1))
  out=$("$fusec" "examples/$name.tf" --emit report -o - 2>&1); rc=$?
  if [ -n "${FUSEC_UPDATE_GOLDEN:-}" ]; then printf '%s\n' "$out" > "$golden"; echo "updated $golden"; continue; fi
  if [ $rc -ne 0 ]; then echo "FAIL $name: exit $rc: $out"; fail=$((fail + 1)); continue; fi
  if ! diff -u "$golden" <(printf '%s\n' "$out"); then
    echo "FAIL $name: the report differs from $golden; if the compiler's fusion changed on purpose,"
    echo "     update the docs that describe it and rerun with FUSEC_UPDATE_GOLDEN=1"
    fail=$((fail + 1))
  fi
done
echo "fusion_reports: $((n - fail)) passed, $fail failed"
[ $fail -eq 0 ] && [ $n -gt 0 ]
