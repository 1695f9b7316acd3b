# cli.cmake: tests of the `fusec` command-line driver. Each tests/cli/NAME.sh script runs
# against the built binary as `sh NAME.sh $<TARGET_FILE:fusec> tests/cli` and becomes the ctest
# test cli_NAME (exit 0 pass, 77 skip, else fail). Scripts use POSIX sh, and python3 + NumPy
# where available (the parts that need them are skipped otherwise).
set(FUSEC_CLI_TEST_DIR ${CMAKE_CURRENT_LIST_DIR}/cli)
# FUSEC_TEST_SANITIZED tells a script it runs in a sanitizer build (train.sh runs fewer
# --remat modes there).
set(_cli_env "FUSEC_CACHE_DIR=${FUSEC_TEST_CACHE_DIR};FUSEC_NUM_THREADS=2")
if(FUSEC_SANITIZE)
  string(APPEND _cli_env ";FUSEC_TEST_SANITIZED=1")
endif()
foreach(t usage compile run device bench report train mem bisect limits)
  add_test(NAME cli_${t} COMMAND sh ${FUSEC_CLI_TEST_DIR}/${t}.sh $<TARGET_FILE:fusec>
           ${FUSEC_CLI_TEST_DIR})
  set_tests_properties(cli_${t} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS cli
                       ENVIRONMENT "${_cli_env}")
endforeach()
