# Every view after every kernel kind (tests/views/, written by make.sh there): each block runs
# fused and eager on the CPU and through the CUDA emulation, against the reference interpreter.
# In a sanitizer build, the CPU only (as difftest_cpu: the emulated units are not instrumented),
# each check in its own child with its own leak check.
file(GLOB VIEW_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/views/*.tf)
if(FUSEC_SANITIZE)
  set(_views_run --emu-every 0)
else()
  set(_views_run --emu-every 1)
endif()
foreach(tf ${VIEW_TESTS})
  get_filename_component(name ${tf} NAME_WE)
  add_test(NAME views_${name} COMMAND difftest --replay ${tf} ${_views_run}
           --out ${PROJECT_BINARY_DIR}/views-failures)
  set_tests_properties(views_${name} PROPERTIES LABELS views TIMEOUT 300
                       ENVIRONMENT "FUSEC_CACHE_DIR=${FUSEC_TEST_CACHE_DIR}")
endforeach()
