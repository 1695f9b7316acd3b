# fuzz.cmake: the frontend's libFuzzer target (only with -DFUSEC_FUZZ=ON and clang).
#   cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DFUSEC_FUZZ=ON
#   ninja -C build-fuzz fuzz_frontend && ctest --test-dir build-fuzz -R fuzz_frontend
# The target compiles the frontend and IR sources itself with -fsanitize=fuzzer,address,undefined;
# its seed corpus is tests/fuzz/corpus (example blocks) plus tests/errors/*.tf. The ctest runs it
# for 45 s on a scratch copy of the corpus; any crash, leak or sanitizer report fails it.
if(FUSEC_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "FUSEC_FUZZ needs clang (-DCMAKE_C_COMPILER=clang)")
  endif()
  set(FUZZ_IR_SOURCES ${IR_SOURCES})
  list(FILTER FUZZ_IR_SOURCES EXCLUDE REGEX "kir\\.c$")   # the kernel IR is not the frontend's
  set(FUZZ_SOURCES ${PROJECT_SOURCE_DIR}/tests/fuzz/fuzz_frontend.c ${FE_SOURCES} ${FUZZ_IR_SOURCES}
      ${FLEX_fe_lexer_OUTPUTS} ${BISON_fe_parser_OUTPUTS})
  add_executable(fuzz_frontend ${FUZZ_SOURCES})
  add_dependencies(fuzz_frontend fusec_fe)
  target_include_directories(fuzz_frontend PRIVATE ${FUSEC_INCLUDES})
  target_compile_definitions(fuzz_frontend PRIVATE _GNU_SOURCE FUSEC_VERSION_STRING="${PROJECT_VERSION}")
  target_compile_options(fuzz_frontend PRIVATE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -g -O1)
  target_link_options(fuzz_frontend PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_frontend PRIVATE m)
  file(GLOB FUZZ_SEEDS ${PROJECT_SOURCE_DIR}/tests/fuzz/corpus/* ${PROJECT_SOURCE_DIR}/tests/errors/*.tf)
  add_test(NAME fuzz_frontend
           COMMAND ${CMAKE_COMMAND} -E env sh -c
                   "rm -rf fuzz-corpus && mkdir -p fuzz-corpus && cp \"$@\" fuzz-corpus/ && exec \"${CMAKE_CURRENT_BINARY_DIR}/fuzz_frontend\" -max_total_time=45 -max_len=8192 -timeout=10 -rss_limit_mb=2048 fuzz-corpus"
                   sh ${FUZZ_SEEDS}
           WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties(fuzz_frontend PROPERTIES TIMEOUT 180 LABELS fuzz)
endif()
