#include "cli_util.h"

#include <errno.h>
#include <stdlib.h>

#include "worker/knobs.h"

int cli_parse_u64(const char *s, unsigned long long *out) {
    char *end;
    errno = 0;
    if (!s[0] || s[0] == '-') return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

void cli_print_knobs(FILE *f) {
    RunConfig def;
    run_config_default(&def);
    char val[64];
    for (int i = 0; i < knob_count; i++) {
        const Knob *k = &knob_table[i];
        knob_format(&def, k, val, sizeof val);
        if (k->type == KNOB_STRING && !val[0]) snprintf(val, sizeof val, "\"\"");
        if (k->type == KNOB_STRING && val[0] == '\n') snprintf(val, sizeof val, "\"\\n\"");
        fprintf(f, "  %-22s %-10s %s", k->name, val, k->help);
        if (k->type == KNOB_ENUM) {
            fprintf(f, " (");
            for (int j = 0; j < k->n_choices; j++)
                fprintf(f, "%s%s", j ? "|" : "", k->choices[j]);
            fprintf(f, ")");
        }
        fputc('\n', f);
    }
}
