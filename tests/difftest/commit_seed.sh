#!/bin/sh
# commit_seed.sh DIFFTEST SOURCE_DIR [difftest options...]
# Runs difftest with a seed derived from the source tree's commit (`git rev-parse HEAD`, hashed
# by `difftest --seed-from`), so that every commit's CI run explores new graphs; difftest prints
# the seed first thing, and `difftest --seed S` with the same options reproduces the run.
# FUSEC_DIFFTEST_SEED=S forces a seed. Without git or a commit, a fixed seed (20240602) is used,
# and said. Used by ctest's difftest_fresh (tests/difftest.cmake, docs/difftest.md).
dt=$1
src=$2
shift 2
if [ -n "$FUSEC_DIFFTEST_SEED" ]; then
    echo "difftest: seed $FUSEC_DIFFTEST_SEED from FUSEC_DIFFTEST_SEED"
    exec "$dt" --seed "$FUSEC_DIFFTEST_SEED" "$@"
fi
rev=$(git -C "$src" rev-parse HEAD 2>/dev/null)
if [ -n "$rev" ]; then
    exec "$dt" --seed-from "$rev" "$@"
fi
echo "difftest: no git commit for $src (git missing or not a checkout): fixed seed 20240602 instead of a fresh one"
exec "$dt" --seed 20240602 "$@"
