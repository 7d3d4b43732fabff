# Runs etsim twice on one scenario, with and without extra options, and checks that the JSON reports are
# byte-identical. Variables: ETSIM, SCENARIO, EXTRA (options joined with |), WORK_DIR.
string(REPLACE "|" ";" EXTRA "${EXTRA}")
file(MAKE_DIRECTORY "${WORK_DIR}")
execute_process(COMMAND "${ETSIM}" --quiet --json "${WORK_DIR}/default.json" "${SCENARIO}"
                RESULT_VARIABLE rc1 OUTPUT_VARIABLE out1 ERROR_VARIABLE err1)
execute_process(COMMAND "${ETSIM}" --quiet ${EXTRA} --json "${WORK_DIR}/extra.json" "${SCENARIO}"
                RESULT_VARIABLE rc2 OUTPUT_VARIABLE out2 ERROR_VARIABLE err2)
if(NOT rc1 EQUAL 0 OR NOT rc2 EQUAL 0)
  message(FATAL_ERROR "etsim failed (${rc1}, ${rc2}):\n${err1}\n${err2}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${WORK_DIR}/default.json" "${WORK_DIR}/extra.json"
                RESULT_VARIABLE same)
if(NOT same EQUAL 0)
  message(FATAL_ERROR "the reports differ with ${EXTRA}: ${WORK_DIR}/default.json vs ${WORK_DIR}/extra.json")
endif()
message(STATUS "identical reports with and without ${EXTRA}")
