#!/bin/sh
# keep.sh REPRODUCER.tf [NAME] ["what fails"]
# Keeps a difftest reproducer as a regression test: copies it, with its header (the failure, the
# numbers, the input seed that `difftest --replay` reads), to tests/difftest/found/NAME.tf under
# a "# difftest found:" comment; ctest then replays it as difftest_found_NAME (a reconfigure
# picks new files up: the glob in tests/difftest.cmake is CONFIGURE_DEPENDS). NAME defaults to
# seed<S>_graph<G> from the reproducer's header; letters, digits and _ only. It never overwrites.
# Then, if a built difftest is found ($DIFFTEST, else build/difftest), replays the copy and says
# whether it passes now. Every failure difftest finds is kept this way and committed with its
# fix (docs/difftest.md, "Keeping failures").
set -eu
if [ $# -lt 1 ] || [ ! -f "$1" ]; then
    echo "usage: tests/difftest/keep.sh REPRODUCER.tf [NAME] [\"what fails\"]" >&2
    exit 2
fi
repro=$1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
seed=$(sed -n 's/^# graph \([0-9]*\) of --seed \([0-9]*\).*/\2/p' "$repro" | head -n 1)
graph=$(sed -n 's/^# graph \([0-9]*\) of --seed \([0-9]*\).*/\1/p' "$repro" | head -n 1)
name=${2:-}
if [ -z "$name" ]; then
    if [ -z "$seed" ]; then echo "keep.sh: $repro has no difftest header; give a NAME" >&2; exit 2; fi
    name="seed${seed}_graph${graph}"
fi
case $name in
    *[!A-Za-z0-9_]*) echo "keep.sh: NAME '$name': letters, digits and _ only (it names the ctest difftest_found_$name)" >&2; exit 2 ;;
esac
dst="$here/found/$name.tf"
if [ -e "$dst" ]; then echo "keep.sh: $dst exists; choose another NAME" >&2; exit 1; fi
# the failure line of the header: the third comment line ("# mismatch ...", "# compile error ...")
what=${3:-$(sed -n '3s/^# //p' "$repro")}
how=$(sed -n 's/^# reproduce: //p' "$repro" | head -n 1 | sed "s|FILE|tests/difftest/found/$name.tf|")
{
    echo "# difftest found: $what"
    [ -n "$how" ] && echo "#   $how"
    echo "# Status: open. When fixed, say by what here; the file stays as a regression test"
    echo "# (ctest difftest_found_$name)."
    echo "# Kept from $(basename "$repro") by tests/difftest/keep.sh${seed:+ (difftest --seed $seed, graph $graph)}."
    cat "$repro"
} > "$dst"
echo "kept: $dst (ctest difftest_found_$name after a reconfigure)"
dt=${DIFFTEST:-$root/build/difftest}
if [ -x "$dt" ]; then
    if timeout 300 "$dt" --replay "$dst" --nvrtc-every 1 >/dev/null 2>&1; then
        echo "it passes now ($dt --replay $dst)"
    else
        echo "it FAILS now ($dt --replay $dst): commit it together with the fix"
    fi
fi
