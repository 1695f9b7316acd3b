#!/usr/bin/env bash
# Golden tests: for every tests/golden/NAME.tf, the printed graph IR (--emit ir) and kernel
# IR (--emit kir) must equal NAME.ir and NAME.kir byte for byte. A first line
# "#! OPTIONS" gives extra compile options; a second line "#! file PATH" compiles PATH
# (relative to this folder: an example) instead of NAME.tf's own text. For every NAME.cuhead, the interface comment of an
# AOT unit (below). With FUSEC_UPDATE_GOLDEN=1 the expected files are rewritten instead (review
# the diff).
# usage: run.sh FUSEC GOLDEN_DIR
set -u
fusec=$(cd "$(dirname "$1")" && pwd)/$(basename "$1"); dir=$2
cd "$dir" || exit 1   # names in the output are relative to the golden folder
fail=0; n=0
for tf in *.tf; do
  name=${tf%.tf}
  opts=""
  first=$(head -n1 "$tf")
  case "$first" in "#! "*) opts=${first#"#! "} ;; esac
  src=$tf
  second=$(sed -n 2p "$tf")
  case "$second" in "#! file "*) src=${second#"#! file "} ;; esac
  for kind in ir kir; do
    n=$((n + 1))
    # shellcheck disable=SC2086
    out=$("$fusec" "$src" --emit "$kind" -o - $opts 2>&1)
    rc=$?
    if [ -n "${FUSEC_UPDATE_GOLDEN:-}" ]; then
      printf '%s\n' "$out" > "$name.$kind"; echo "updated $name.$kind"; continue
    fi
    if [ $rc -ne 0 ]; then echo "FAIL $name.$kind: exit $rc: $out"; fail=$((fail + 1)); continue; fi
    if ! diff -u "$name.$kind" <(printf '%s\n' "$out") > /tmp/golden_diff.$$; then
      echo "FAIL $name.$kind differs:"; head -40 /tmp/golden_diff.$$; fail=$((fail + 1))
    fi
    rm -f /tmp/golden_diff.$$
  done
done
# The interface comment at the top of an AOT unit (--emit cuda): every NAME.cuhead holds, after a
# first line "#! ARGS" (fusec's arguments, paths relative to the golden folder), the unit's text
# up to the end of its first comment.
for head in *.cuhead; do
  [ -e "$head" ] || continue
  n=$((n + 1))
  first=$(head -n1 "$head")
  args=${first#"#! "}
  # shellcheck disable=SC2086
  out=$("$fusec" $args --emit cuda -o - 2>&1 | sed '/\*\/$/q')
  if [ -n "${FUSEC_UPDATE_GOLDEN:-}" ]; then
    printf '%s\n%s\n' "$first" "$out" > "$head"; echo "updated $head"; continue
  fi
  if ! diff -u <(tail -n +2 "$head") <(printf '%s\n' "$out") > /tmp/golden_diff.$$; then
    echo "FAIL $head differs:"; head -40 /tmp/golden_diff.$$; fail=$((fail + 1))
  fi
  rm -f /tmp/golden_diff.$$
done
echo "golden: $((n - fail)) passed, $fail failed"
[ $fail -eq 0 ]
