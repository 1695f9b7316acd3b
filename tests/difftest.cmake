# difftest.cmake: the random-graph differential tester (tests/difftest/, docs/difftest.md).
#
#   difftest_cpu         500 random graphs (fixed seed): fused and eager on the CPU backend vs
#                        the reference interpreter, every 10th also through NVRTC (sm_80, sm_90;
#                        skipped where NVRTC is absent). 60 graphs in a sanitizer build.
#   difftest_selfcheck   the harness must fail: a corrupted fused result must be caught and
#                        minimized to a reproducer, for every graph.
#   difftest_noisy       the noisy variants used by the conditioning check compile, for the
#                        500 graphs of difftest_cpu (a check of the generator; seconds).
#   difftest_found_<f>   every reproducer in tests/difftest/found/ (bugs difftest found, since
#                        fixed) replayed as a regression test.
# Reproducers of failures go to ${PROJECT_BINARY_DIR}/difftest-failures (FUSEC_DIFFTEST_OUT).
# Run more on demand:  build/difftest --seed S --count N [--jobs 2]
add_executable(difftest ${CMAKE_CURRENT_LIST_DIR}/difftest/difftest.c ${CMAKE_CURRENT_LIST_DIR}/difftest/gen.c)
target_include_directories(difftest PRIVATE ${FUSEC_INCLUDES})
target_include_directories(difftest SYSTEM PRIVATE ${LLVM_INCLUDE_DIR})
target_compile_definitions(difftest PRIVATE _GNU_SOURCE FUSEC_BINARY_DIR="${PROJECT_BINARY_DIR}")
target_compile_options(difftest PRIVATE ${FUSEC_WARNINGS})
target_link_libraries(difftest PRIVATE fusec_static m)
set_target_properties(difftest PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR})

if(FUSEC_SANITIZE)
  set(_dt_count 60)
else()
  set(_dt_count 500)
endif()
set(_dt_env "FUSEC_CACHE_DIR=${PROJECT_BINARY_DIR}/test-cache;FUSEC_NUM_THREADS=2;FUSEC_DIFFTEST_OUT=${PROJECT_BINARY_DIR}/difftest-failures")
add_test(NAME difftest_cpu COMMAND difftest --seed 20240601 --count ${_dt_count} --nvrtc-every 10 --jobs 2)
add_test(NAME difftest_selfcheck
         COMMAND difftest --self-check --seed 7 --count 3 --nvrtc-every 0 --out ${PROJECT_BINARY_DIR}/difftest-selfcheck)
add_test(NAME difftest_noisy COMMAND difftest --verify-noisy --seed 20240601 --count 500)
set_tests_properties(difftest_cpu difftest_selfcheck difftest_noisy PROPERTIES LABELS difftest TIMEOUT 600 ENVIRONMENT "${_dt_env}")
file(GLOB _dt_found CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/difftest/found/*.tf)
foreach(f ${_dt_found})
  get_filename_component(_n ${f} NAME_WE)
  add_test(NAME difftest_found_${_n} COMMAND difftest --replay ${f} --nvrtc-every 1)
  set_tests_properties(difftest_found_${_n} PROPERTIES LABELS difftest TIMEOUT 120 ENVIRONMENT "${_dt_env}")
endforeach()
