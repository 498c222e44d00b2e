# Runs the docs runner on data/stale.md and passes when it fails naming exactly the broken blocks.
string(REPLACE "|" ";" command "${COMMAND}")
execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "expected the runner to fail, got exit 0\n${out}${err}")
endif()
foreach(expected
    "stale.md:3: 'thdpack --version': output line 1 differs"
    "stale.md:8: C++ block line 1 does not compile"
    "stale.md:12: block of language '(none)' cannot be run"
    "stale.md:16: sh block exited 2: thdpack: error: unknown workload 'nope'"
    "stale.md:22: a text block that is not the output"
    "stale.md: 6 blocks run, 1 illustrative, 5 failed")
  string(FIND "${out}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "runner output lacks '${expected}':\n${out}${err}")
  endif()
endforeach()
message(STATUS "${out}")
