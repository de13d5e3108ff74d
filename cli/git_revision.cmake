# Writes OUT, `#define FP8A_GIT_REVISION "<12 hex digits>"` of SOURCE_DIR's HEAD ("unknown" outside
# a git checkout), at every build and only when it changed: the revision a binary reports (and its
# checkpoint is keyed by) is the one it was built from, not the one of the last configure.
set(rev "unknown")
if(GIT)
  execute_process(COMMAND ${GIT} rev-parse --short=12 HEAD WORKING_DIRECTORY ${SOURCE_DIR}
                  OUTPUT_VARIABLE out OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
  if(rc EQUAL 0 AND out MATCHES "^[0-9a-f]+$")
    set(rev "${out}")
  endif()
endif()
set(text "#pragma once\n#define FP8A_GIT_REVISION \"${rev}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE ${OUT} "${text}")
endif()
