#!/bin/sh
# cuda_stub.sh DIFFTEST TEST_CUDA_DEVICE: difftest --device cuda must fail where the GPU's results
# are wrong. With the stub driver of test_cuda_device (FUSEC_LIBCUDA: it works on host memory and
# runs no kernel, so every GPU output stays poisoned), every graph must fail, and in a GPU
# program: the CPU's comparisons pass, the GPU path runs end to end (the probe in a child, the
# inputs copied, programs made for the device, the comparisons) and each reproducer names
# `--device cuda`. Run by ctest as difftest_cuda_stub; 77 (skipped) without a C compiler.
dt=$1
tcd=$2
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
lib=$("$tcd" --write-stub "$tmp")
rc=$?
[ $rc -eq 77 ] && { echo "$lib"; exit 77; }
[ $rc -eq 0 ] || { echo "cuda_stub.sh: test_cuda_device --write-stub failed ($rc): $lib"; exit 1; }
# the tests' kernel cache where ctest gives one (a sanitizer build then finds the plain build's
# objects and cubins), else a scratch one
FUSEC_LIBCUDA=$lib FUSEC_LIBCUBLASLT=/nonexistent/libcublasLt.so FUSEC_CACHE_DIR=${FUSEC_CACHE_DIR:-$tmp/cache} \
    "$dt" --device cuda --seed 7 --count 4 --train-every 2 --nvrtc-every 0 --no-minimize --out "$tmp/out" >"$tmp/log" 2>&1
rc=$?
fail=0
say() { echo "cuda_stub.sh: $*"; fail=1; }
[ $rc -eq 1 ] || say "difftest exited $rc, not 1"
grep -q '^difftest: --device cuda: cuda:0: Fake GPU' "$tmp/log" || say "the probe did not find the stub GPU"
grep -q '^difftest: 4 graphs .*: 0 ok, 0 ill-conditioned (not counted), 4 failed' "$tmp/log" ||
    say "not every graph failed"
n=$(grep -cE '^(fused|eager) CUDA( vs |.* program)|^gradients: (fused|eager) CUDA' "$tmp/log")
[ "$n" -eq 4 ] || say "$n of 4 failures are the GPU's"
grep -qE '^(fused|eager) CPU vs|^gradients: (fused|eager|remat-full) CPU' "$tmp/log" && say "a CPU comparison failed"
r=$(ls "$tmp/out"/*.tf 2>/dev/null | wc -l)
[ "$r" -eq 4 ] || say "$r reproducers, not 4"
for f in "$tmp/out"/*.tf; do
    grep -q -- '--device cuda' "$f" || say "$(basename "$f") does not say --device cuda"
done
[ $fail -eq 0 ] && { echo "cuda_stub.sh: ok (4 of 4 graphs failed on the stub GPU, reproducers name --device cuda)"; exit 0; }
cat "$tmp/log"
exit 1
