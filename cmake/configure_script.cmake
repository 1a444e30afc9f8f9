# cmake -DIN=<script> -DOUT=<file> -DVERSION=X.Y.Z -DSHEBANG=#!... -DLIBEXEC=<rel> \
#       -DPYTHONDIR=<rel> -DSHAREDIR=<rel> -P configure_script.cmake
#
# The installed copy of slurm/submit (ablate-submit) or analysis/ablate-report: the same
# script with its one "installed" line filled in (the version, and where the rest of the
# install is, relative to P/bin, so a moved prefix still works) and, for ablate-report,
# the Python it runs with. A script whose marker line is gone fails the build here rather
# than installing a copy that looks for the source tree.
file(READ "${IN}" text)
get_filename_component(name "${OUT}" NAME)
if(name STREQUAL "ablate-submit")
  set(marker "installed=\"\" # (cmake/configure_script.cmake fills it in the installed copy)")
  set(filled "installed=\"${VERSION}:${LIBEXEC}\" # version:batch scripts' directory, from P/bin")
else()
  set(marker "INSTALLED = None  # (cmake/configure_script.cmake fills it in the installed copy)")
  set(filled "INSTALLED = {\"version\": \"${VERSION}\", \"python\": \"${PYTHONDIR}\", \"share\": \"${SHAREDIR}\"}")
  string(REGEX REPLACE "^#![^\n]*" "${SHEBANG}" text "${text}")
endif()
string(FIND "${text}" "${marker}" at)
if(at LESS 0)
  message(FATAL_ERROR "${IN}: no line '${marker}' to fill in for the installed ${name}")
endif()
string(REPLACE "${marker}" "${filled}" text "${text}")
file(WRITE "${OUT}.tmp" "${text}")
file(CHMOD "${OUT}.tmp" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
file(RENAME "${OUT}.tmp" "${OUT}")
