# One invalid-input case: etsim must exit 2, print exactly the expected error (the whole message, its
# location included), and write nothing. The case's folder reads as CASE and the source tree as SRC, so
# that expected errors hold no machine's paths.
# Variables: ETSIM (binary), CASE_DIR (folder with scenario.json and expected_error.txt), SOURCE_DIR,
# WORK_DIR (scratch).
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
file(READ "${CASE_DIR}/expected_error.txt" expected)
string(STRIP "${expected}" expected)
execute_process(
  COMMAND "${ETSIM}" --analytic --json "${WORK_DIR}/report.json" "${CASE_DIR}/scenario.json"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "expected exit status 2, got ${rc}\nstdout: ${out}\nstderr: ${err}")
endif()
string(REPLACE "${CASE_DIR}" "CASE" got "${err}")
string(REPLACE "${SOURCE_DIR}" "SRC" got "${got}")
string(STRIP "${got}" got)
if(NOT "${got}" STREQUAL "${expected}")
  message(FATAL_ERROR "stderr is not the expected error\nexpected: ${expected}\nstderr:   ${got}")
endif()
if(NOT "${out}" STREQUAL "")
  message(FATAL_ERROR "nothing may be printed to stdout on bad input, got: ${out}")
endif()
file(GLOB leftovers "${WORK_DIR}/*")
if(leftovers)
  message(FATAL_ERROR "files were written on bad input: ${leftovers}")
endif()
message(STATUS "ok: ${err}")
