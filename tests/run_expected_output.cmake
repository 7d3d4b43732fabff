# Expected-output (tesh-style) test: run etsim from the source tree and compare stdout with a stored file,
# so any change in a prediction shows up in review. Set ET_UPDATE_EXPECTED=1 to rewrite the stored file.
# Variables: ETSIM, SOURCE_DIR, ARGS (arguments joined with |), EXPECTED (file).
string(REPLACE "|" ";" ARGS "${ARGS}")
execute_process(COMMAND "${ETSIM}" ${ARGS} WORKING_DIRECTORY "${SOURCE_DIR}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "etsim exited with ${rc}\n${err}")
endif()
if(DEFINED ENV{ET_UPDATE_EXPECTED})
  file(WRITE "${EXPECTED}" "${out}")
  message(STATUS "rewrote ${EXPECTED}")
  return()
endif()
file(READ "${EXPECTED}" want)
if(NOT out STREQUAL want)
  file(WRITE "${EXPECTED}.actual" "${out}")
  execute_process(COMMAND diff -u "${EXPECTED}" "${EXPECTED}.actual" OUTPUT_VARIABLE d)
  message(FATAL_ERROR "output differs from ${EXPECTED} (actual output in ${EXPECTED}.actual; rerun with "
                      "ET_UPDATE_EXPECTED=1 if the change is intended):\n${d}")
endif()
