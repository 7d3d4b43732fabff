# Runs etsim twice on one scenario, with and without extra options, and checks that the JSON reports are
# byte-identical. Variables: ETSIM, SCENARIO, EXTRA (options joined with |), WORK_DIR; with FEWER_FLOWS set,
# also that both model the same flows (etsim --stats) and the default run plays fewer of them in SimGrid.
string(REPLACE "|" ";" EXTRA "${EXTRA}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(STATS)
if(FEWER_FLOWS)
  set(STATS --stats)
endif()
execute_process(COMMAND "${ETSIM}" --quiet ${STATS} --json "${WORK_DIR}/default.json" "${SCENARIO}"
                RESULT_VARIABLE rc1 OUTPUT_VARIABLE out1 ERROR_VARIABLE err1)
execute_process(COMMAND "${ETSIM}" --quiet ${STATS} ${EXTRA} --json "${WORK_DIR}/extra.json" "${SCENARIO}"
                RESULT_VARIABLE rc2 OUTPUT_VARIABLE out2 ERROR_VARIABLE err2)
if(NOT rc1 EQUAL 0 OR NOT rc2 EQUAL 0)
  message(FATAL_ERROR "etsim failed (${rc1}, ${rc2}):\n${err1}\n${err2}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${WORK_DIR}/default.json" "${WORK_DIR}/extra.json"
                RESULT_VARIABLE same)
if(NOT same EQUAL 0)
  message(FATAL_ERROR "the reports differ with ${EXTRA}: ${WORK_DIR}/default.json vs ${WORK_DIR}/extra.json")
endif()
if(FEWER_FLOWS)
  set(pattern "flows ([0-9]+) modelled, ([0-9]+) simulated")
  if(NOT err1 MATCHES "${pattern}")
    message(FATAL_ERROR "no flow counts from --stats:\n${err1}")
  endif()
  set(modelled1 ${CMAKE_MATCH_1})
  set(simulated1 ${CMAKE_MATCH_2})
  if(NOT err2 MATCHES "${pattern}")
    message(FATAL_ERROR "no flow counts from --stats with ${EXTRA}:\n${err2}")
  endif()
  if(NOT modelled1 EQUAL CMAKE_MATCH_1 OR NOT simulated1 LESS CMAKE_MATCH_2)
    message(FATAL_ERROR "flows modelled/simulated: ${modelled1}/${simulated1} by default, "
                        "${CMAKE_MATCH_1}/${CMAKE_MATCH_2} with ${EXTRA}: expected the same modelled, fewer simulated")
  endif()
  message(STATUS "flows modelled ${modelled1}; simulated ${simulated1} against ${CMAKE_MATCH_2} with ${EXTRA}")
endif()
message(STATUS "identical reports with and without ${EXTRA}")
