# Regression blocks (tests/regress/*.tf), found by the differential tester: each must compile
# and pass `fusec run --check` fused and eager.
file(GLOB REGRESS_BLOCKS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/regress/*.tf)
foreach(tf ${REGRESS_BLOCKS})
  get_filename_component(name ${tf} NAME_WE)
  foreach(mode fused eager)
    set(extra "")
    if(mode STREQUAL "eager")
      set(extra "--no-fuse")
    endif()
    add_test(NAME regress_${name}_${mode}
             COMMAND $<TARGET_FILE:fusec> run ${tf} --device cpu --check ${extra} --out-dir ${CMAKE_CURRENT_BINARY_DIR})
    set_tests_properties(regress_${name}_${mode} PROPERTIES LABELS regress TIMEOUT 60)
  endforeach()
endforeach()
