# acceptance.cmake: end-to-end tests of the `fusec` program (included by tests/CMakeLists.txt).
#
# They drive the command line only, as a user would (docs/cli.md), over examples/*.tf:
#   acceptance_numpy_<example>   tests/acceptance/check_numpy.py --only <example>: `fusec run`
#                                on the CPU, fused and --no-fuse, with --check, against float64
#                                NumPy (rel error <= 1e-4), at the file's dims and odd/size-1 dims
#   acceptance_numpy_bf16/_f16   every example at --precision bf16 / f16, fused and eager,
#                                against float64 NumPy from the inputs rounded to the type,
#                                within 8 u of the type (docs/precision.md)
#   acceptance_numpy_train_<p>   --train at keep/bf16/f16/f8: every example's gradients, fused
#                                and eager, against central differences of the NumPy reference
#                                (check_numpy.py GRAD_TOL); _train_mutation must catch a wrong one
#   acceptance_numpy_selftest    the NumPy side alone (ops against known values and loops)
#   acceptance_numpy_mutation    the harness must catch a reference wrong in one element
#   acceptance_emit_<example>    --emit ir/kir/llvm/ptx/report/roofline, and the .cu through
#                                nvcc -Werror (not in a sanitizer build: --no-nvcc)
#   acceptance_emit_names        user names reach generated code only inside comments
#   acceptance_bad_input         the bad-input catalogue: exit 1, file:line:col, no output
# Exit 77 is a skip (no NumPy; no Python; NVRTC or nvcc absent only skips those parts).
# Budget: about 3 minutes for all of them on 2 cores (ctest -j2).

find_package(Python3 COMPONENTS Interpreter)
find_program(FUSEC_BASH bash)
set(_acc ${PROJECT_SOURCE_DIR}/tests/acceptance)
set(_acc_env "FUSEC_CACHE_DIR=${FUSEC_TEST_CACHE_DIR};FUSEC_NUM_THREADS=2")
set(_acc_examples gpt2_mlp quant_mlp gpt2_attn llama_layer softmax_logits keywords gpt2_block
    residual_ln_gelu)

if(NOT Python3_Interpreter_FOUND)
  message(STATUS "acceptance tests: no Python 3 interpreter; only the bad-input test is registered")
else()
  # a sanitizer build leaves nvcc and ptxas out of the emit tests: their time is the CUDA
  # toolchain's, on the code the plain build's tests assemble (fusec emits the same bytes)
  set(_acc_emit_opts)
  if(FUSEC_SANITIZE)
    set(_acc_emit_opts --no-nvcc)
  endif()
  foreach(ex ${_acc_examples})
    add_test(NAME acceptance_numpy_${ex}
             COMMAND ${Python3_EXECUTABLE} ${_acc}/check_numpy.py --fusec $<TARGET_FILE:fusec>
                     --only ${ex})
    add_test(NAME acceptance_emit_${ex}
             COMMAND ${Python3_EXECUTABLE} ${_acc}/check_emit.py --fusec $<TARGET_FILE:fusec>
                     --only ${ex} ${_acc_emit_opts})
    set_tests_properties(acceptance_numpy_${ex} acceptance_emit_${ex} PROPERTIES
                         SKIP_RETURN_CODE 77 TIMEOUT 240 LABELS acceptance
                         ENVIRONMENT "${_acc_env}")
  endforeach()
  # a sanitizer build runs f8's alone (as for the gradients, below)
  set(_acc_p bf16 f16 f8)
  if(FUSEC_SANITIZE)
    set(_acc_p f8)
  endif()
  foreach(_p ${_acc_p})
    add_test(NAME acceptance_numpy_${_p}
             COMMAND ${Python3_EXECUTABLE} ${_acc}/check_numpy.py --fusec $<TARGET_FILE:fusec>
                     --precision ${_p})
    set_tests_properties(acceptance_numpy_${_p} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
                         LABELS acceptance ENVIRONMENT "${_acc_env}")
  endforeach()
  # the gradients (--train) against finite differences of the same NumPy reference, at every
  # precision (check_numpy.py GRAD_TOL; docs/precision.md); a sanitizer build runs f8's alone
  # (the most code: E4M3 values, E5M2 gradients), which keeps the suite's time down
  set(_acc_train_p keep bf16 f16 f8)
  if(FUSEC_SANITIZE)
    set(_acc_train_p f8)
  endif()
  foreach(_p ${_acc_train_p})
    add_test(NAME acceptance_numpy_train_${_p}
             COMMAND ${Python3_EXECUTABLE} ${_acc}/check_numpy.py --fusec $<TARGET_FILE:fusec>
                     --train --precision ${_p})
    set_tests_properties(acceptance_numpy_train_${_p} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
                         LABELS acceptance ENVIRONMENT "${_acc_env}")
  endforeach()
  add_test(NAME acceptance_numpy_train_mutation
           COMMAND ${Python3_EXECUTABLE} ${_acc}/check_numpy.py --fusec $<TARGET_FILE:fusec>
                   --train --only gpt2_mlp --mutate)
  set_tests_properties(acceptance_numpy_train_mutation PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120
                       LABELS acceptance ENVIRONMENT "${_acc_env}")
  add_test(NAME acceptance_numpy_selftest
           COMMAND ${Python3_EXECUTABLE} ${_acc}/check_numpy.py --self-test)
  add_test(NAME acceptance_numpy_mutation
           COMMAND ${Python3_EXECUTABLE} ${_acc}/check_numpy.py --fusec $<TARGET_FILE:fusec>
                   --only gpt2_mlp --mutate)
  add_test(NAME acceptance_emit_names
           COMMAND ${Python3_EXECUTABLE} ${_acc}/check_emit.py --fusec $<TARGET_FILE:fusec>
                   --names-only)
  set_tests_properties(acceptance_numpy_selftest acceptance_numpy_mutation acceptance_emit_names
                       PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 LABELS acceptance
                       ENVIRONMENT "${_acc_env}")
endif()

if(FUSEC_BASH)
  add_test(NAME acceptance_bad_input
           COMMAND ${FUSEC_BASH} ${_acc}/check_bad_input.sh $<TARGET_FILE:fusec>)
  set_tests_properties(acceptance_bad_input PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 180
                       LABELS acceptance ENVIRONMENT "${_acc_env}")
endif()
