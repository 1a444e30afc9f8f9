/* The instruction sets this binary was compiled for, as data only: this file is compiled
 * with ABLATE_ARCH's flags like the rest of ablate, so the compiler's own feature macros
 * say what the build may use; it holds no code, so nothing here can execute an instruction
 * the CPU lacks. isa_check.c (compiled for the baseline) reads the list at start-up.
 * Each name here must have a row in isa_check.c's table. */
#include "isa_check.h"

const char ablate_isa_arch[] =
#ifdef ABLATE_ISA_ARCH
    ABLATE_ISA_ARCH;
#else
    "none";
#endif

const char ablate_isa_needs[] = ""
#ifdef __SSE3__
                                " SSE3"
#endif
#ifdef __SSSE3__
                                " SSSE3"
#endif
#ifdef __SSE4_1__
                                " SSE4_1"
#endif
#ifdef __SSE4_2__
                                " SSE4_2"
#endif
#ifdef __SSE4A__
                                " SSE4A"
#endif
#ifdef __POPCNT__
                                " POPCNT"
#endif
#ifdef __LAHF_SAHF__
                                " LAHF_SAHF"
#endif
#ifdef __ABM__
                                " ABM"
#endif
#ifdef __LZCNT__
                                " LZCNT"
#endif
#ifdef __MOVBE__
                                " MOVBE"
#endif
#ifdef __XSAVE__
                                " XSAVE"
#endif
#ifdef __AES__
                                " AES"
#endif
#ifdef __PCLMUL__
                                " PCLMUL"
#endif
#ifdef __AVX__
                                " AVX"
#endif
#ifdef __F16C__
                                " F16C"
#endif
#ifdef __FMA__
                                " FMA"
#endif
#ifdef __FMA4__
                                " FMA4"
#endif
#ifdef __XOP__
                                " XOP"
#endif
#ifdef __AVX2__
                                " AVX2"
#endif
#ifdef __BMI__
                                " BMI"
#endif
#ifdef __BMI2__
                                " BMI2"
#endif
#ifdef __ADX__
                                " ADX"
#endif
#ifdef __SHA__
                                " SHA"
#endif
#ifdef __GFNI__
                                " GFNI"
#endif
#ifdef __VAES__
                                " VAES"
#endif
#ifdef __VPCLMULQDQ__
                                " VPCLMULQDQ"
#endif
#ifdef __AVXVNNI__
                                " AVXVNNI"
#endif
#ifdef __AVX512F__
                                " AVX512F"
#endif
#ifdef __AVX512CD__
                                " AVX512CD"
#endif
#ifdef __AVX512BW__
                                " AVX512BW"
#endif
#ifdef __AVX512DQ__
                                " AVX512DQ"
#endif
#ifdef __AVX512VL__
                                " AVX512VL"
#endif
#ifdef __AVX512IFMA__
                                " AVX512IFMA"
#endif
#ifdef __AVX512VBMI__
                                " AVX512VBMI"
#endif
#ifdef __AVX512VBMI2__
                                " AVX512VBMI2"
#endif
#ifdef __AVX512VNNI__
                                " AVX512VNNI"
#endif
#ifdef __AVX512BITALG__
                                " AVX512BITALG"
#endif
#ifdef __AVX512VPOPCNTDQ__
                                " AVX512VPOPCNTDQ"
#endif
#ifdef __AVX512BF16__
                                " AVX512BF16"
#endif
#ifdef __AVX512FP16__
                                " AVX512FP16"
#endif
    ;
