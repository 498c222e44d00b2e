# Runs COMMAND (mpirun and its arguments, separated by "|"), passes when it exits non-zero, its error output
# mentions EXPECT, and it finished without hanging (CTest's timeout would catch a hang).
string(REPLACE "|" ";" command "${COMMAND}")
execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "expected a failure, got exit 0\n${out}")
endif()
string(FIND "${err}" "${EXPECT}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "exit ${rc}; error output does not mention '${EXPECT}':\n${err}")
endif()
message(STATUS "exit ${rc}: ${err}")
