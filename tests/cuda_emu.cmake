# cuda_emu.cmake: the CUDA emulation harness (included by tests/CMakeLists.txt; docs/cuda_emu.md).
# tests/unit/test_cuda_emu.c and test_cuda_emu_train.c are registered by the unit-test glob; here
# they get the shared runner (tests/cuda_emu/emu_runner.c: build, batch-compile, run and compare
# units; difftest.cmake compiles it into difftest too), learn which C++ compiler to run on the
# generated CUDA (the project's, overridable at run time with FUSEC_EMU_CXX) and get their time
# limit. The emulator itself (tests/cuda_emu/*.cc, *.h) is compiled by the runner at run time,
# with the generated units, so it needs no target of its own.
foreach(t test_cuda_emu test_cuda_emu_train)
  if(TARGET ${t})
    target_sources(${t} PRIVATE ${CMAKE_CURRENT_LIST_DIR}/cuda_emu/emu_runner.c)
    target_include_directories(${t} PRIVATE ${CMAKE_CURRENT_LIST_DIR}/cuda_emu)
    target_compile_definitions(${t} PRIVATE FUSEC_CXX="${CMAKE_CXX_COMPILER}")
    target_link_libraries(${t} PRIVATE ${CMAKE_DL_LIBS} m)
    set_tests_properties(${t} PROPERTIES TIMEOUT 400 LABELS cuda_emu)
  endif()
endforeach()
# The same at --precision bf16 and f16 (docs/precision.md): every example's units lowered
# (FUSEC_EMU_PRECISION sets emu_precision), forward and training, against the reference run of
# the lowered block; the planted bugs run only on the declared units. A sanitizer build runs
# only the f8 forward of the precisions (the most conversion code; the suite's time), and not
# test_cuda_codegen, whose time is nvcc's.
set(_emu_p bf16 f16)
if(FUSEC_SANITIZE)
  set(_emu_p)
  if(TEST test_cuda_codegen)
    set_tests_properties(test_cuda_codegen PROPERTIES LABELS slow)
  endif()
endif()
foreach(_p ${_emu_p})
  foreach(t test_cuda_emu test_cuda_emu_train)
    if(TARGET ${t})
      add_test(NAME ${t}_${_p} COMMAND ${t})
      set_tests_properties(${t}_${_p} PROPERTIES TIMEOUT 400 LABELS cuda_emu SKIP_RETURN_CODE 77
                           ENVIRONMENT "FUSEC_EMU_PRECISION=${_p}")
    endif()
  endforeach()
endforeach()
# And at --precision f8 (intermediates E4M3, the units taking the f8 state; every emulated run
# starts from a fresh state at the scales the block calibrates on the case's inputs, which the
# reference uses too).
set(_emu_f8 test_cuda_emu test_cuda_emu_train)
if(FUSEC_SANITIZE)
  set(_emu_f8 test_cuda_emu)
endif()
foreach(t ${_emu_f8})
  if(TARGET ${t})
    add_test(NAME ${t}_f8 COMMAND ${t})
    set_tests_properties(${t}_f8 PROPERTIES TIMEOUT 400 LABELS cuda_emu SKIP_RETURN_CODE 77
                         ENVIRONMENT "FUSEC_EMU_PRECISION=f8")
  endif()
endforeach()
