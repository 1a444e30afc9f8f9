#include "cli_util.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "worker/knobs.h"

/* strtod and strtoull accept leading spaces, signs, hex, "inf" and "nan"; options take plain
 * decimals only. */
static int plain_decimal(const char *s, int allow_point) {
    int digits = 0, points = 0;
    for (; *s; s++) {
        if (*s >= '0' && *s <= '9')
            digits++;
        else if (*s == '.' && allow_point && !points)
            points++;
        else if ((*s == 'e' || *s == 'E') && allow_point && digits)
            return plain_decimal(s[1] == '-' || s[1] == '+' ? s + 2 : s + 1, 0) && s[1];
        else
            return 0;
    }
    return digits > 0;
}

int cli_number(const char *opt, const char *text, CliNumber kind, void *out) {
    static const char *const expects[] = {"a non-negative integer", "a positive number of seconds",
                                          "a positive size in bytes (e.g. 512M, 16G)"};
    char num[64];
    size_t len = strlen(text);
    double scale = 1;
    if (kind == CLI_BYTES && len > 0) { /* strip "B", "iB", then K/M/G/T */
        static const char units[] = "KMGT";
        if (len > 1 && text[len - 1] == 'B') len -= len > 2 && text[len - 2] == 'i' ? 2 : 1;
        const char *u = len > 0 ? strchr(units, text[len - 1] & ~0x20) : NULL;
        if (u && *u) {
            for (const char *q = units; q <= u; q++)
                scale *= 1024;
            len--;
        }
    }
    int ok = len > 0 && len < sizeof num;
    snprintf(num, sizeof num, "%.*s", ok ? (int)len : 0, text);
    ok = ok && plain_decimal(num, kind != CLI_UINT);
    errno = 0;
    if (ok && kind == CLI_UINT) {
        unsigned long long v = strtoull(num, NULL, 10);
        if (errno == 0) {
            *(unsigned long long *)out = v;
            return 0;
        }
    } else if (ok) {
        double v = strtod(num, NULL) * scale;
        if (errno == 0 && v > 0 && v < HUGE_VAL) {
            *(double *)out = v;
            return 0;
        }
    }
    log_cmd("%s expects %s, got '%s'", opt, expects[kind], text);
    return -1;
}

void cli_print_knobs(FILE *f) {
    char val[64], choices[256];
    for (int i = 0; i < knob_count; i++) {
        const Knob *k = &knob_table[i];
        knob_default_text(k, val, sizeof val);
        fprintf(f, "  %-22s %-10s %s", k->name, val, k->desc);
        if (k->type == FT_ENUM) {
            knob_kind_text(k, "|", choices, sizeof choices);
            fprintf(f, " (%s)", choices);
        }
        fputc('\n', f);
    }
}

int cli_output_ok(void) {
    errno = 0;
    int failed = fflush(stdout) != 0;
    int e = errno;
    if (!failed && !ferror(stdout)) return 0;
    log_cmd("cannot write the output: %s", e ? strerror(e) : "write error");
    return -1;
}
