/* The start-up check of the build's instruction sets (isa_check.h). This file is compiled
 * for the architecture's baseline (CMakeLists.txt: ABLATE_ISA_BASELINE_FLAGS), never with
 * ABLATE_ARCH, so that the check itself cannot execute what it is checking for. */
#include "isa_check.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/* A set, where CPUID says it is there, and the OS state it needs (XCR0 bits: AVX needs the
 * SSE and AVX registers saved, AVX-512 also the opmask and upper ZMM ones). */
typedef struct {
    const char *name;
    unsigned leaf, subleaf;
    char reg; /* 'a' 'b' 'c' 'd' */
    int bit;
    unsigned xcr0;
} Feature;

#define XCR0_AVX    0x6u
#define XCR0_AVX512 0xe6u

static const Feature features[] = {
    {"SSE3", 1, 0, 'c', 0, 0},
    {"PCLMUL", 1, 0, 'c', 1, 0},
    {"SSSE3", 1, 0, 'c', 9, 0},
    {"FMA", 1, 0, 'c', 12, XCR0_AVX},
    {"SSE4_1", 1, 0, 'c', 19, 0},
    {"SSE4_2", 1, 0, 'c', 20, 0},
    {"MOVBE", 1, 0, 'c', 22, 0},
    {"POPCNT", 1, 0, 'c', 23, 0},
    {"AES", 1, 0, 'c', 25, 0},
    {"XSAVE", 1, 0, 'c', 26, 0},
    {"AVX", 1, 0, 'c', 28, XCR0_AVX},
    {"F16C", 1, 0, 'c', 29, XCR0_AVX},
    {"BMI", 7, 0, 'b', 3, 0},
    {"AVX2", 7, 0, 'b', 5, XCR0_AVX},
    {"BMI2", 7, 0, 'b', 8, 0},
    {"AVX512F", 7, 0, 'b', 16, XCR0_AVX512},
    {"AVX512DQ", 7, 0, 'b', 17, XCR0_AVX512},
    {"ADX", 7, 0, 'b', 19, 0},
    {"AVX512IFMA", 7, 0, 'b', 21, XCR0_AVX512},
    {"AVX512CD", 7, 0, 'b', 28, XCR0_AVX512},
    {"SHA", 7, 0, 'b', 29, 0},
    {"AVX512BW", 7, 0, 'b', 30, XCR0_AVX512},
    {"AVX512VL", 7, 0, 'b', 31, XCR0_AVX512},
    {"AVX512VBMI", 7, 0, 'c', 1, XCR0_AVX512},
    {"AVX512VBMI2", 7, 0, 'c', 6, XCR0_AVX512},
    {"GFNI", 7, 0, 'c', 8, 0},
    {"VAES", 7, 0, 'c', 9, XCR0_AVX},
    {"VPCLMULQDQ", 7, 0, 'c', 10, XCR0_AVX},
    {"AVX512VNNI", 7, 0, 'c', 11, XCR0_AVX512},
    {"AVX512BITALG", 7, 0, 'c', 12, XCR0_AVX512},
    {"AVX512VPOPCNTDQ", 7, 0, 'c', 14, XCR0_AVX512},
    {"AVX512FP16", 7, 0, 'd', 23, XCR0_AVX512},
    {"AVXVNNI", 7, 1, 'a', 4, XCR0_AVX},
    {"AVX512BF16", 7, 1, 'a', 5, XCR0_AVX512},
    {"LAHF_SAHF", 0x80000001u, 0, 'c', 0, 0},
    {"ABM", 0x80000001u, 0, 'c', 5, 0},
    {"LZCNT", 0x80000001u, 0, 'c', 5, 0},
    {"SSE4A", 0x80000001u, 0, 'c', 6, 0},
    {"XOP", 0x80000001u, 0, 'c', 11, XCR0_AVX},
    {"FMA4", 0x80000001u, 0, 'c', 16, XCR0_AVX},
};

/* XCR0, the register state the OS saves (0 when the OS has not enabled XSAVE). */
static unsigned xcr0(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return 0; /* OSXSAVE */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    return lo;
}

static int has(const Feature *f, unsigned os_state) {
    unsigned r[4] = {0, 0, 0, 0};
    if (__get_cpuid_max(f->leaf & 0x80000000u, NULL) < f->leaf) return 0;
    __cpuid_count(f->leaf, f->subleaf, r[0], r[1], r[2], r[3]);
    unsigned v = r[f->reg - 'a'];
    if (!(v & (1u << f->bit))) return 0;
    return (os_state & f->xcr0) == f->xcr0;
}
#endif

int isa_missing(const char *needs, char *out, unsigned long out_size) {
    int n = 0;
    size_t used = 0;
    if (out_size) out[0] = '\0';
#if defined(__x86_64__) || defined(__i386__)
    unsigned os_state = xcr0();
    for (size_t i = 0; i < sizeof features / sizeof *features; i++) {
        const Feature *f = &features[i];
        size_t len = strlen(f->name);
        const char *p = needs;
        int needed = 0;
        while ((p = strstr(p, f->name)) != NULL) { /* a whole word of the list */
            if (p > needs && p[-1] == ' ' && (p[len] == ' ' || p[len] == '\0')) needed = 1;
            p += len;
        }
        if (!needed || has(f, os_state)) continue;
        int w = snprintf(out + used, out_size > used ? out_size - used : 0, "%s%s", n ? ", " : "",
                         f->name);
        if (w > 0) used += (size_t)w < out_size - used ? (size_t)w : out_size - used - 1;
        n++;
    }
#else
    (void)needs;
    (void)used;
#endif
    return n;
}

/* Before main: a constructor runs once the libraries are loaded (their own constructors,
 * OpenBLAS's CPU detection, are built for any CPU) and before anything of this build. */
__attribute__((constructor(101))) static void isa_check(void) {
    char missing[512];
    int n = isa_missing(ablate_isa_needs, missing, sizeof missing);
    if (n == 0) return;
    char line[1024];
    int len = snprintf(line, sizeof line,
                       "ablate: this binary was built for %s, and this CPU lacks %s: use a build "
                       "for this CPU's level (cmake -DABLATE_ARCH=x86-64-v3 or lower, "
                       "docs/site.md)\n",
                       ablate_isa_arch, missing);
    if (len > (int)sizeof line - 1) len = (int)sizeof line - 1;
    if (write(STDERR_FILENO, line, (size_t)len) < 0) {
        /* nothing else to tell */
    }
    _exit(ISA_CHECK_EXIT);
}
