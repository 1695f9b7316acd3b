# Every view after every kernel kind (tests/views/, written by make.sh there): each block runs
# fused and eager on the CPU and through the CUDA emulation, against the reference interpreter.
file(GLOB VIEW_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/views/*.tf)
foreach(tf ${VIEW_TESTS})
  get_filename_component(name ${tf} NAME_WE)
  add_test(NAME views_${name} COMMAND difftest --replay ${tf} --emu-every 1
           --out ${PROJECT_BINARY_DIR}/views-failures)
  set_tests_properties(views_${name} PROPERTIES LABELS views TIMEOUT 300
                       ENVIRONMENT "FUSEC_CACHE_DIR=${PROJECT_BINARY_DIR}/test-cache")
endforeach()
