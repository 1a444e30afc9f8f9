# cmake -DHELP2MAN=<help2man> -DPROGRAM=<program> -DNAME=<name> -DOUT=<page> [-DPYTHONPATH=<dir>]
#       -P help2man.cmake
#
# A man page from the program's --help and --version. A program that cannot say them here
# (ablate-report without its Python packages on the build machine) gets no page and a
# warning, not a failed build: the install then has no page for it.
get_filename_component(dir "${OUT}" DIRECTORY)
file(MAKE_DIRECTORY "${dir}")
# (ablate-report's installed copy looks for its package relative to P/bin: here, the source's)
set(ENV{PYTHONPATH} "${PYTHONPATH}")
execute_process(COMMAND "${PROGRAM}" --help RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(WARNING "no man page for ${NAME}: ${PROGRAM} --help failed (${rc}): ${err}")
  file(WRITE "${OUT}" "")
  return()
endif()
execute_process(COMMAND "${HELP2MAN}" --no-info --no-discard-stderr --name=${NAME} --output=${OUT}.tmp "${PROGRAM}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(WARNING "no man page for ${NAME}: help2man failed (${rc}): ${err}")
  file(REMOVE "${OUT}.tmp")
  file(WRITE "${OUT}" "")
  return()
endif()
file(RENAME "${OUT}.tmp" "${OUT}")
