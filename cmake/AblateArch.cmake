# The instruction-set level ablate is compiled for (ABLATE_ARCH), and what the start-up
# check (src/cli/isa_check.c) needs to know about it.
#
#   ABLATE_ARCH=x86-64-v3   the default on x86-64: AVX2, FMA, BMI2 (every x86-64 server CPU
#                           since 2013/2017: Haswell, Zen 1); the portable choice for installs
#   ABLATE_ARCH=x86-64-v4   AVX-512 (F, BW, CD, DQ, VL): Skylake-SP and later, Zen 4; the
#                           engine's AVX-512 paths (attention lanes, the own small-GEMM
#                           kernel's wide tiles) are compiled in
#   ABLATE_ARCH=x86-64-v2   SSE4.2 and POPCNT only (old or emulated CPUs; slower)
#   ABLATE_ARCH=native      this machine's CPU (-march=native): the developer and CI build,
#                           whose bit-exact goldens (tests/golden/train_bits.txt) were recorded
#                           with it; a binary that may run on other nodes must not use it
#   ABLATE_ARCH=none        no -march: the compiler's default (non-x86 machines default to it)
#   any other value         passed as -march=VALUE (e.g. skylake-avx512, znver3)
#
# The level is recorded in every results file: c_flags holds the -march flag (the
# provenance written for every sweep). The binary refuses to start, with one line naming
# the missing instruction set, on a CPU that lacks one it was built for (isa_check.c).
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(ablate_arch_default x86-64-v3)
else()
  set(ablate_arch_default none)
endif()
# A build directory configured before ABLATE_ARCH existed had ABLATE_NATIVE (default ON):
# keep what it built, so an existing checkout's goldens keep being compared.
if(NOT DEFINED CACHE{ABLATE_ARCH} AND DEFINED CACHE{ABLATE_NATIVE})
  if(ABLATE_NATIVE)
    set(ablate_arch_default native)
  endif()
  unset(ABLATE_NATIVE CACHE)
endif()
set(ABLATE_ARCH "${ablate_arch_default}" CACHE STRING
    "Instruction-set level: x86-64-v3 (portable default), x86-64-v4, x86-64-v2, native, none, or any -march value")
set_property(CACHE ABLATE_ARCH PROPERTY STRINGS x86-64-v2 x86-64-v3 x86-64-v4 native none)

set(ABLATE_ARCH_FLAGS "")
if(NOT ABLATE_ARCH STREQUAL "none" AND NOT ABLATE_ARCH STREQUAL "")
  set(ABLATE_ARCH_FLAGS "-march=${ABLATE_ARCH}")
  include(CheckCCompilerFlag)
  set(CMAKE_REQUIRED_QUIET ON)
  check_c_compiler_flag("${ABLATE_ARCH_FLAGS}" ABLATE_ARCH_OK_${ABLATE_ARCH})
  unset(CMAKE_REQUIRED_QUIET)
  if(NOT ABLATE_ARCH_OK_${ABLATE_ARCH})
    message(FATAL_ERROR "ABLATE_ARCH=${ABLATE_ARCH}: ${CMAKE_C_COMPILER} does not accept -march=${ABLATE_ARCH} (use x86-64-v2, x86-64-v3, x86-64-v4, native or none)")
  endif()
endif()
# tests/CMakeLists.txt keys the bit-exact goldens by it: "native=ON" is the key the recorded
# sections have; any other level is a key of its own
if(ABLATE_ARCH STREQUAL "native")
  set(ABLATE_NATIVE ON)
else()
  set(ABLATE_NATIVE "OFF arch=${ABLATE_ARCH}")
endif()

# The start-up check is compiled for the baseline of the machine's architecture, so that
# nothing it runs can use an instruction the CPU lacks: x86-64 here (SSE2), whatever
# ABLATE_ARCH says; it reads what the build needs from isa_needs.c, which is compiled with
# ABLATE_ARCH but holds only data.
# (Also with ABLATE_ARCH=none: the level may then come from CFLAGS or a compiler wrapper, such
# as Spack's, which isa_needs.c sees as well; these flags come after those.)
set(ABLATE_ISA_BASELINE_FLAGS "")
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(ABLATE_ISA_BASELINE_FLAGS -march=x86-64 -mtune=generic)
endif()
message(STATUS "ablate: ISA level ${ABLATE_ARCH}")
