# cmake -DSRC=<source dir> -DOUT=<header> -P git_rev.cmake
#
# Runs at every build (not only at configure time), so the revision a binary reports (--version,
# the HDF5 file's git_rev) is the one it was built from: the short commit, with "-dirty" when
# tracked files differ from it. Outside a git checkout (a release tarball from
# scripts/release.sh) it is the commit `git archive` wrote into cmake/git_rev.txt (its
# export-subst attribute, .gitattributes), else "unknown". The header is rewritten only
# when that string changes, so an unchanged revision rebuilds nothing.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY "${SRC}"
                OUTPUT_VARIABLE rev OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT rev OR NOT EXISTS "${SRC}/.git")
  set(rev "unknown")
  if(EXISTS "${SRC}/cmake/git_rev.txt")
    file(STRINGS "${SRC}/cmake/git_rev.txt" archived LIMIT_COUNT 1)
    if(archived MATCHES "^([0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f])[0-9a-f]*$")
      set(rev "${CMAKE_MATCH_1}")
    endif()
  endif()
else()
  execute_process(COMMAND git status --porcelain --untracked-files=no WORKING_DIRECTORY "${SRC}"
                  OUTPUT_VARIABLE changes ERROR_QUIET)
  if(changes)
    string(APPEND rev "-dirty")
  endif()
endif()
file(WRITE "${OUT}.tmp" "#define ABLATE_GIT_REV \"${rev}\"\n")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUT}.tmp" "${OUT}")
file(REMOVE "${OUT}.tmp")
