# install.cmake: the `install` test (included by tests/CMakeLists.txt).
#
# install_package: `cmake --install` of this build into a fresh prefix under the build tree,
# then, as a user would: examples/c configured and built against that prefix with
# find_package(fusec) (shared and static), and gpt2_jit.c / fused_vs_eager.c compiled with
# `cc $(pkg-config --cflags --libs fusec)` (and fusec-static); every program run on the CPU
# with small dims and its exit status checked; a failing run must be seen as failing.
# The steps are in tests/install/check_install.cmake (run with cmake -P). Budget: ~20 s.
# In a sanitizer build the consumers are built with the same -fsanitize flags.
find_program(FUSEC_PKG_CONFIG NAMES pkg-config pkgconf)
add_test(NAME install_package
         COMMAND ${CMAKE_COMMAND}
                 -DBUILD_DIR=${PROJECT_BINARY_DIR}
                 -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
                 -DWORK_DIR=${PROJECT_BINARY_DIR}/install-test
                 -DCONFIG=$<CONFIG>
                 -DGENERATOR=${CMAKE_GENERATOR}
                 -DMAKE_PROGRAM=${CMAKE_MAKE_PROGRAM}
                 -DC_COMPILER=${CMAKE_C_COMPILER}
                 -DSANITIZE=${FUSEC_SANITIZE}
                 -DPKG_CONFIG=${FUSEC_PKG_CONFIG}
                 -P ${CMAKE_CURRENT_LIST_DIR}/install/check_install.cmake)
set_tests_properties(install_package PROPERTIES LABELS install TIMEOUT 300
                     ENVIRONMENT "FUSEC_CACHE_DIR=${FUSEC_TEST_CACHE_DIR};FUSEC_NUM_THREADS=2")
