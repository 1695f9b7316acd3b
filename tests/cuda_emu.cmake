# cuda_emu.cmake: the CUDA emulation harness (included by tests/CMakeLists.txt; docs/cuda_emu.md).
# tests/unit/test_cuda_emu.c is registered by the unit-test glob; here it gets the shared runner
# (tests/cuda_emu/emu_runner.c: build, batch-compile, run and compare units; difftest.cmake
# compiles it into difftest too), learns which C++ compiler to run on the generated CUDA (the
# project's, overridable at run time with FUSEC_EMU_CXX) and gets its time limit. The emulator
# itself (tests/cuda_emu/*.cc, *.h) is compiled by the runner at run time, with the generated
# units, so it needs no target of its own.
if(TARGET test_cuda_emu)
  target_sources(test_cuda_emu PRIVATE ${CMAKE_CURRENT_LIST_DIR}/cuda_emu/emu_runner.c)
  target_include_directories(test_cuda_emu PRIVATE ${CMAKE_CURRENT_LIST_DIR}/cuda_emu)
  target_compile_definitions(test_cuda_emu PRIVATE FUSEC_CXX="${CMAKE_CXX_COMPILER}")
  target_link_libraries(test_cuda_emu PRIVATE ${CMAKE_DL_LIBS} m)
  set_tests_properties(test_cuda_emu PROPERTIES TIMEOUT 400 LABELS cuda_emu)
endif()
