# Golden files of the printed graph IR and kernel IR (tests/golden/run.sh).
add_test(NAME golden COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/golden/run.sh $<TARGET_FILE:fusec>
         ${CMAKE_CURRENT_SOURCE_DIR}/golden)
set_tests_properties(golden PROPERTIES LABELS golden TIMEOUT 120)
