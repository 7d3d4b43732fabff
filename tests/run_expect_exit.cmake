# Runs etsim and checks its exit status and that stdout+stderr contain a text.
# Variables: ETSIM, ARGS (arguments joined with |), EXIT_CODE, EXPECT_TEXT.
string(REPLACE "|" ";" ARGS "${ARGS}")
execute_process(COMMAND "${ETSIM}" ${ARGS} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL EXIT_CODE)
  message(FATAL_ERROR "expected exit status ${EXIT_CODE}, got ${rc}\n${out}\n${err}")
endif()
string(FIND "${out}${err}" "${EXPECT_TEXT}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "output lacks \"${EXPECT_TEXT}\":\n${out}\n${err}")
endif()
