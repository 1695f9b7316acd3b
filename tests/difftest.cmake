# difftest.cmake: the random-graph differential tester (tests/difftest/, docs/difftest.md).
#
#   difftest_cpu         300 random graphs (fixed seed 20240601: the known coverage, every op):
#                        fused and eager on the CPU backend vs the reference interpreter (every
#                        10th graph a training program, checked as difftest_train does), every
#                        10th also through NVRTC (sm_80, sm_90; skipped where NVRTC is absent),
#                        every 30th (10 graphs) also through the CUDA emulation (tests/cuda_emu/,
#                        docs/cuda_emu.md: the fused, eager and GPU-shaped AOT units compiled by
#                        the host C++ compiler and run on the CPU; skipped without one). 40 graphs
#                        in a sanitizer build, and there no emulation: the emulated units are not
#                        instrumented anyway, test_cuda_emu runs the shared runner under the
#                        sanitizers, and difftest_emu_selfcheck still runs.
#   difftest_emu_all     40 other graphs, every one through the CUDA emulation (fused, eager
#                        and GPU-shaped units; the device's math modelled at its documented ulp
#                        bounds, docs/cuda_emu.md); about 1-2 min on 2 cores, almost all of it
#                        C++ compiles. Not in a sanitizer build (as above).
#   difftest_fresh       120 graphs (20 in a sanitizer build) of a fresh seed per commit: the
#                        commit hash through `difftest --seed-from` (difftest/commit_seed.sh;
#                        printed first; a fixed seed, said so, without git), every 25th emulated:
#                        each CI run explores new graphs. A failure here is a new bug: keep its
#                        reproducer (difftest/keep.sh) and commit it with the fix.
#   difftest_train       45 training programs (fixed seed 20261201; 20 in a sanitizer build):
#                        compiled with --train fused (--remat auto), eager (--no-fuse --remat none)
#                        and --remat full; forward outputs vs the reference interpreter, every
#                        gradient between the three and vs the reference backward (the
#                        interpreter's own), within fc_block_check_grad_tolerances; every 4th
#                        graph also the --mem-budget sweep; every 10th the backward's kernels
#                        through NVRTC; every 10th (not under sanitizers) through the CUDA
#                        emulation: the AOT training unit, fused and eager, run as its forward
#                        then its backward against the CPU's training programs
#                        (emu_add_train_block, as test_cuda_emu_train does for the examples).
#   difftest_selfcheck   the harness must fail: a corrupted fused result must be caught and
#                        minimized to a reproducer, for every graph.
#   difftest_train_selfcheck  the same for a training check: a corrupted fused gradient (2 graphs).
#   difftest_strict_selfcheck  the same for --strict: a corrupted --strict-rounding result (3 graphs
#                        at bf16) must be caught as not the eager program's bits;
#                        difftest_strict_emu_selfcheck likewise for the emulated --strict-rounding
#                        unit against the emulated eager one (2 small graphs).
#   difftest_emu_selfcheck  the same for the emulation: one element of each emulated fused
#                        result corrupted (2 small graphs) must be caught as a CUDA emulation
#                        mismatch and minimized to a reproducer.
#   difftest_train_emu_selfcheck  the same for emulated training units (2 small graphs).
#   difftest_stream      60 other graphs (20 in a sanitizer build) with FUSEC_CPU_LLC_BYTES=4096
#                        and FUSEC_CPU_L2_BYTES=4096 (products take B in panels, docs/cpu.md):
#                        the CPU programs' non-temporal stores (docs/cpu.md).
#   difftest_bf16, difftest_f16, difftest_f8  60 other graphs each (seed 20261127; 20 in a
#                        sanitizer build) compiled at --precision bf16 / f16 / f8 (docs/precision.md):
#                        as difftest_cpu, and --strict (--strict-rounding bit for bit against eager),
#                        every 20th also emulated
#                        (none in a sanitizer build).
#   difftest_cuda        with a GPU: 100 graphs of the commit's fresh seed (every 5th a training
#                        program, at --precision keep and bf16) also run fused and eager on the
#                        GPU (--device cuda), compared with the reference as the CPU's are;
#                        difftest_cuda_selfcheck: a corrupted GPU result must be caught. Both
#                        skipped (77) where no GPU answers, as in CI; bench/gpu-check.sh runs
#                        thousands at every precision. difftest_cuda_stub runs everywhere: the
#                        GPU path through test_cuda_device's stub driver, which runs no kernel,
#                        so every graph must fail in a GPU program (difftest/cuda_stub.sh).
#   difftest_noisy       the noisy variants used by the conditioning check compile, for 1000
#                        graphs of seed 20240601 (a check of the generator; seconds; 300 in a
#                        sanitizer build).
#   difftest_found_<f>   every reproducer in tests/difftest/found/ (bugs difftest found, since
#                        fixed) replayed as a regression test: CPU fused and eager, NVRTC, and
#                        the CUDA emulation.
# Reproducers of failures go to ${PROJECT_BINARY_DIR}/difftest-failures (FUSEC_DIFFTEST_OUT).
# Run more on demand:  build/difftest --seed S --count N [--jobs 2] [--emu-every K] [--emu-contract], or at length
# tests/difftest/long_run.sh -n 1000 (docs/difftest.md). Keep a failure: tests/difftest/keep.sh FILE.
# The emulation runner (tests/cuda_emu/emu_runner.c) is shared with test_cuda_emu (cuda_emu.cmake).
add_executable(difftest ${CMAKE_CURRENT_LIST_DIR}/difftest/difftest.c ${CMAKE_CURRENT_LIST_DIR}/difftest/gen.c
               ${CMAKE_CURRENT_LIST_DIR}/cuda_emu/emu_runner.c)
target_include_directories(difftest PRIVATE ${FUSEC_INCLUDES} ${CMAKE_CURRENT_LIST_DIR}/cuda_emu)
target_include_directories(difftest SYSTEM PRIVATE ${LLVM_INCLUDE_DIR})
target_compile_definitions(difftest PRIVATE _GNU_SOURCE FUSEC_BINARY_DIR="${PROJECT_BINARY_DIR}"
                           FUSEC_SOURCE_DIR="${PROJECT_SOURCE_DIR}" FUSEC_CXX="${CMAKE_CXX_COMPILER}")
target_compile_options(difftest PRIVATE ${FUSEC_WARNINGS})
target_link_libraries(difftest PRIVATE fusec_static m ${CMAKE_DL_LIBS})
set_target_properties(difftest PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR})

if(FUSEC_SANITIZE)
  set(_dt_count 40)
  set(_dt_fresh 20)
  set(_dt_emu 0)
  set(_dt_found_emu 0)
  set(_dt_fresh_emu 0)
  set(_dt_stream 20)
  set(_dt_train 20)
  set(_dt_train_emu 0)
  set(_dt_prec 20)
  set(_dt_prec_emu 0)
  set(_dt_noisy 300)
else()
  set(_dt_count 300)
  set(_dt_fresh 120)
  set(_dt_emu 30)
  set(_dt_found_emu 1)
  set(_dt_fresh_emu 25)
  set(_dt_stream 60)
  set(_dt_train 45)
  set(_dt_train_emu 10)
  set(_dt_prec 60)
  set(_dt_prec_emu 20)
  set(_dt_noisy 1000)
endif()
set(_dt_env "FUSEC_CACHE_DIR=${FUSEC_TEST_CACHE_DIR};FUSEC_NUM_THREADS=2;FUSEC_DIFFTEST_OUT=${PROJECT_BINARY_DIR}/difftest-failures")
add_test(NAME difftest_cpu COMMAND difftest --seed 20240601 --count ${_dt_count} --nvrtc-every 10 --emu-every ${_dt_emu} --jobs 2)
add_test(NAME difftest_train COMMAND difftest --train --seed 20261201 --count ${_dt_train} --nvrtc-every 10 --emu-every ${_dt_train_emu} --jobs 2)
add_test(NAME difftest_train_selfcheck
         COMMAND difftest --train --self-check --seed 7 --count 2 --max-stmts 8 --nvrtc-every 0 --out ${PROJECT_BINARY_DIR}/difftest-selfcheck-train)
set_tests_properties(difftest_train difftest_train_selfcheck PROPERTIES LABELS difftest TIMEOUT 600
                     ENVIRONMENT "${_dt_env}")
if(NOT FUSEC_SANITIZE)
  add_test(NAME difftest_emu_all COMMAND difftest --seed 20261125 --count 40 --nvrtc-every 0 --emu-every 1 --jobs 2)
  add_test(NAME difftest_train_emu_selfcheck
           COMMAND difftest --train --self-check-emu --seed 7 --count 2 --max-stmts 8 --emu-every 1 --nvrtc-every 0 --jobs 2
                   --out ${PROJECT_BINARY_DIR}/difftest-selfcheck-train-emu)
  set_tests_properties(difftest_emu_all difftest_train_emu_selfcheck PROPERTIES LABELS difftest TIMEOUT 600
                       ENVIRONMENT "${_dt_env}")
endif()
add_test(NAME difftest_fresh COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/difftest/commit_seed.sh $<TARGET_FILE:difftest> ${PROJECT_SOURCE_DIR}
                                     --count ${_dt_fresh} --nvrtc-every 10 --emu-every ${_dt_fresh_emu} --jobs 2)
add_test(NAME difftest_selfcheck
         COMMAND difftest --self-check --seed 7 --count 3 --nvrtc-every 0 --out ${PROJECT_BINARY_DIR}/difftest-selfcheck)
add_test(NAME difftest_emu_selfcheck
         COMMAND difftest --self-check-emu --seed 7 --count 2 --emu-every 1 --nvrtc-every 0 --max-stmts 6 --jobs 2
                 --out ${PROJECT_BINARY_DIR}/difftest-selfcheck-emu)
add_test(NAME difftest_strict_selfcheck
         COMMAND difftest --precision bf16 --strict --self-check --seed 7 --count 3 --nvrtc-every 0
                 --out ${PROJECT_BINARY_DIR}/difftest-selfcheck-strict)
add_test(NAME difftest_strict_emu_selfcheck
         COMMAND difftest --precision bf16 --strict --self-check-emu --seed 7 --count 2 --emu-every 1 --nvrtc-every 0
                 --max-stmts 6 --jobs 2 --out ${PROJECT_BINARY_DIR}/difftest-selfcheck-strict-emu)
add_test(NAME difftest_noisy COMMAND difftest --verify-noisy --seed 20240601 --count ${_dt_noisy})
set_tests_properties(difftest_cpu difftest_fresh difftest_selfcheck difftest_emu_selfcheck difftest_strict_selfcheck difftest_strict_emu_selfcheck difftest_noisy PROPERTIES LABELS difftest TIMEOUT 600 ENVIRONMENT "${_dt_env}")
# difftest_bf16, difftest_f16: other graphs compiled at --precision bf16 and f16 (pass_precision,
# docs/precision.md), every 10th a training program, every 10th through NVRTC, every 20th through
# the CUDA emulation: the lowered program against the reference run of the same lowered block.
# difftest_f8 likewise at --precision f8; every block calibrates its f8 scales on the graph's
# inputs first (fc_block_calibrate_fp8). --strict: each block also compiled with
# --strict-rounding, whose outputs (and gradients) must be the eager program's bits.
foreach(_p bf16 f16 f8)
  add_test(NAME difftest_${_p} COMMAND difftest --precision ${_p} --strict --seed 20261127 --count ${_dt_prec} --nvrtc-every 10
           --emu-every ${_dt_prec_emu} --jobs 2)
  set_tests_properties(difftest_${_p} PROPERTIES LABELS difftest TIMEOUT 600 ENVIRONMENT "${_dt_env}")
endforeach()
# difftest_stream: other graphs with a 4 KiB last-level cache (FUSEC_CPU_LLC_BYTES), so that every
# CPU kernel writing more than 2 KiB, or reading and writing more than 4 KiB, uses non-temporal
# stores (docs/cpu.md).
add_test(NAME difftest_stream COMMAND difftest --seed 20261121 --count ${_dt_stream} --nvrtc-every 0 --jobs 2)
set_tests_properties(difftest_stream PROPERTIES LABELS difftest TIMEOUT 600
                     ENVIRONMENT "${_dt_env};FUSEC_CPU_LLC_BYTES=4096;FUSEC_CPU_L2_BYTES=4096")
# difftest_cuda: the GPU's programs too (skipped without a GPU: exit 77)
foreach(_p keep bf16)
  add_test(NAME difftest_cuda_${_p} COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/difftest/commit_seed.sh $<TARGET_FILE:difftest>
           ${PROJECT_SOURCE_DIR} --device cuda --precision ${_p} --count 100 --train-every 5 --nvrtc-every 0 --jobs 2)
endforeach()
add_test(NAME difftest_cuda_selfcheck COMMAND difftest --device cuda --self-check --seed 7 --count 3 --nvrtc-every 0
         --out ${PROJECT_BINARY_DIR}/difftest-selfcheck-cuda)
set_tests_properties(difftest_cuda_keep difftest_cuda_bf16 difftest_cuda_selfcheck PROPERTIES LABELS "difftest;gpu" TIMEOUT 600
                     SKIP_RETURN_CODE 77 ENVIRONMENT "${_dt_env}")
# difftest_cuda_stub: the GPU path without a GPU, through test_cuda_device's stub driver (no kernel
# runs): every graph must fail in a GPU program, none in the CPU's (difftest/cuda_stub.sh)
add_test(NAME difftest_cuda_stub COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/difftest/cuda_stub.sh $<TARGET_FILE:difftest>
                                         $<TARGET_FILE:test_cuda_device>)
set_tests_properties(difftest_cuda_stub PROPERTIES LABELS difftest TIMEOUT 300 SKIP_RETURN_CODE 77)
file(GLOB _dt_found CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/difftest/found/*.tf)
foreach(f ${_dt_found})
  get_filename_component(_n ${f} NAME_WE)
  add_test(NAME difftest_found_${_n} COMMAND difftest --replay ${f} --nvrtc-every 1 --emu-every ${_dt_found_emu})
  set_tests_properties(difftest_found_${_n} PROPERTIES LABELS difftest TIMEOUT 120 ENVIRONMENT "${_dt_env}")
endforeach()
# The emulation models what a GPU does with contraction: the reproducers of the GPU-only FMA
# failures (found/gpu_fma_*.tf) must fail again when the emulated units are compiled with
# contraction everywhere (--emu-contract), as they did on the H100.
if(NOT FUSEC_SANITIZE)
  file(GLOB _dt_fma CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/difftest/found/gpu_fma_*.tf)
  foreach(f ${_dt_fma})
    get_filename_component(_n ${f} NAME_WE)
    add_test(NAME difftest_contract_${_n} COMMAND difftest --replay ${f} --emu-every 1 --emu-contract --no-minimize
             --out ${PROJECT_BINARY_DIR}/difftest-contract)
    set_tests_properties(difftest_contract_${_n} PROPERTIES LABELS difftest TIMEOUT 120
                         PASS_REGULAR_EXPRESSION "CUDA emulation mismatch: the fused unit"
                         ENVIRONMENT "${_dt_env}")
  endforeach()
endif()
