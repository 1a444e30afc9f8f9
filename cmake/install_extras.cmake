# Included by `cmake --install` (CMakeLists.txt's install(CODE)), with the prefix of this
# install: writes the module files and byte-compiles the analysis package.
set(root "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}")
set(PREFIX "${CMAKE_INSTALL_PREFIX}")

# The module files: Lmod (VERSION.lua) and Tcl (VERSION, "#%Module"), in one directory a
# site adds with `module use P/share/ablate/modulefiles` (or copies into its tree).
set(MODULE_DEPENDS_LUA "")
set(MODULE_DEPENDS_TCL "")
foreach(m IN LISTS ABLATE_MODULE_DEPENDS)
  string(APPEND MODULE_DEPENDS_LUA "depends_on(\"${m}\")\n")
  string(APPEND MODULE_DEPENDS_TCL "if { ![ is-loaded ${m} ] } { module load ${m} }\n")
endforeach()
set(dir "${root}/${ABLATE_DATADIR}/ablate/modulefiles/ablate")
configure_file("${ABLATE_TEMPLATES}/modulefile.lua.in" "${dir}/${ABLATE_VERSION}.lua" @ONLY)
configure_file("${ABLATE_TEMPLATES}/modulefile.tcl.in" "${dir}/${ABLATE_VERSION}" @ONLY)
message(STATUS "Installing: ${dir}/${ABLATE_VERSION}.lua and ${dir}/${ABLATE_VERSION}")

if(ABLATE_COMPILE_PYTHON)
  execute_process(COMMAND "${ABLATE_COMPILE_PYTHON}" -m compileall -q -f
                          -d "${PREFIX}/${ABLATE_LIBDIR}/ablate/python"
                          "${root}/${ABLATE_LIBDIR}/ablate/python"
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(WARNING "could not byte-compile ${root}/${ABLATE_LIBDIR}/ablate/python (exit ${rc})")
  endif()
endif()
