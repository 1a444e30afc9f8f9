/* The start-up check (src/cli/isa_check.h) on a CPU that lacks the build's instruction sets,
 * whatever machine runs the test: this program is linked with isa_check.c and with an
 * isa_needs.c compiled for AMD's Bulldozer (-march=bdver4: XOP, FMA4, SSE4A, which no Intel
 * CPU and no AMD CPU since Zen has), and its main executes an XOP instruction. Without the
 * check it dies with SIGILL; with it, it never reaches main: one line naming XOP (and the
 * others), exit 4. tests/e2e/test_site.py runs it (and skips on a CPU that has XOP). */
#include <stdio.h>

int main(void) {
#if defined(__x86_64__)
    /* vprotd $1, %xmm0, %xmm0: XOP's rotate (the assembler takes it whatever -march says) */
    __asm__ volatile(".byte 0x8f, 0xe8, 0x78, 0xc2, 0xc0, 0x01" ::: "xmm0");
#endif
    puts("isa_probe: main ran");
    return 0;
}
