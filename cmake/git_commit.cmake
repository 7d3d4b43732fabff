# Run at build time (cmake -P, from the et_git_commit target): writes OUT, a header defining ET_GIT_COMMIT as
# SRC's commit (12 hex digits, "-dirty" when tracked files differ from it; "unknown" outside git), touching
# it only when that changes, so measured.json and calibrated profiles name the commit that was built.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SRC}
  OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit "unknown")
else()
  execute_process(COMMAND git status --porcelain --untracked-files=no WORKING_DIRECTORY ${SRC}
    OUTPUT_VARIABLE changes OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT changes STREQUAL "")
    set(commit "${commit}-dirty")
  endif()
endif()
file(WRITE ${OUT}.tmp "#define ET_GIT_COMMIT \"${commit}\"\n")
configure_file(${OUT}.tmp ${OUT} COPYONLY)
file(REMOVE ${OUT}.tmp)
