# cmake -DSRC=<source dir> -DOUT=<header> -P git_rev.cmake
#
# Runs at every build (not only at configure time), so the revision a binary reports (--version,
# the HDF5 file's git_rev) is the one it was built from: the short commit, with "-dirty" when
# tracked files differ from it, "unknown" outside a git checkout. The header is rewritten only
# when that string changes, so an unchanged revision rebuilds nothing.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY "${SRC}"
                OUTPUT_VARIABLE rev OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT rev)
  set(rev "unknown")
else()
  execute_process(COMMAND git status --porcelain --untracked-files=no WORKING_DIRECTORY "${SRC}"
                  OUTPUT_VARIABLE changes ERROR_QUIET)
  if(changes)
    string(APPEND rev "-dirty")
  endif()
endif()
file(WRITE "${OUT}.tmp" "#define ABLATE_GIT_REV \"${rev}\"\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
