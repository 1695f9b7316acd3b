# Documentation tests (tests/doc/):
# - ops_doc: docs/ops.md, the list of ops, must equal what tools/gen_opdoc.c prints from
#   ir/ops.def and frontend/opsig.def (update: cmake --build build --target update_ops_doc);
# - doctest: every command of README.md and docs/*.md runs (tests/doc/doctest.py, its
#   conventions in its header and in docs/testing.md); doctest_fixture_broken runs it on a
#   page with a broken command and must fail, so the doc-test is known to catch one;
# - fusion_reports: the fusion that docs and example comments describe, pinned by golden
#   `--emit report` files (tests/doc/reports/, FUSEC_UPDATE_GOLDEN=1 rewrites them).
add_executable(gen_opdoc ${PROJECT_SOURCE_DIR}/tools/gen_opdoc.c)
target_include_directories(gen_opdoc PRIVATE ${FUSEC_INCLUDES})
target_compile_options(gen_opdoc PRIVATE ${FUSEC_WARNINGS})
target_compile_definitions(gen_opdoc PRIVATE _GNU_SOURCE)
# generated at build time; the test compares the checked-in copy with it
add_custom_command(OUTPUT ${PROJECT_BINARY_DIR}/docs/ops.md
                   COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/docs
                   COMMAND gen_opdoc -o ${PROJECT_BINARY_DIR}/docs/ops.md
                   DEPENDS gen_opdoc VERBATIM)
add_custom_target(ops_md ALL DEPENDS ${PROJECT_BINARY_DIR}/docs/ops.md)
add_custom_target(update_ops_doc COMMAND gen_opdoc -o ${PROJECT_SOURCE_DIR}/docs/ops.md VERBATIM)
add_test(NAME ops_doc COMMAND gen_opdoc --check ${PROJECT_SOURCE_DIR}/docs/ops.md)
set_tests_properties(ops_doc PROPERTIES LABELS doc TIMEOUT 30)

find_program(FUSEC_PYTHON3 python3)
if(FUSEC_PYTHON3)
  add_test(NAME doctest COMMAND ${FUSEC_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/doc/doctest.py
           --repo ${PROJECT_SOURCE_DIR} --build $<TARGET_FILE_DIR:fusec> --timeout 60)
  # a sanitizer build leaves the pages' commands to the Werror build (label slow: the suite's time)
  if(FUSEC_SANITIZE)
    set(_doctest_labels "doc;slow")
  else()
    set(_doctest_labels doc)
  endif()
  set_tests_properties(doctest PROPERTIES LABELS "${_doctest_labels}" TIMEOUT 300
                       ENVIRONMENT "FUSEC_CACHE_DIR=${FUSEC_TEST_CACHE_DIR};FUSEC_NUM_THREADS=2")
  add_test(NAME doctest_fixture_broken COMMAND ${FUSEC_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/doc/doctest.py
           --repo ${PROJECT_SOURCE_DIR} --build $<TARGET_FILE_DIR:fusec> --timeout 20
           ${CMAKE_CURRENT_SOURCE_DIR}/doc/fixtures/broken.md)
  set_tests_properties(doctest_fixture_broken PROPERTIES LABELS doc TIMEOUT 60 WILL_FAIL TRUE)
endif()

add_test(NAME fusion_reports COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/doc/reports.sh $<TARGET_FILE:fusec>
         ${PROJECT_SOURCE_DIR})
set_tests_properties(fusion_reports PROPERTIES LABELS "doc;golden" TIMEOUT 120)
