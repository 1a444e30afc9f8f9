/* Prints docs/spec.md's table of knobs as the knob table (src/worker/knobs.c) declares them:
 * name, what it takes, default, units and meaning, with the formatter `ablate train --help`
 * uses (knob_default_text, knob_kind_text); or checks that the docs carry it (doc_block.h):
 *   knob_doc              print the generated block
 *   knob_doc --check MD   exit 1 unless MD holds it between the knobs markers
 *   knob_doc --write MD   replace the block in MD */
#include <stdio.h>

#include "doc_block.h"
#include "worker/knobs.h"

/* " text |": a table cell (a '|' in the text escaped: it would end the cell). */
static void cell(Buf *b, const char *text) {
    buf_addc(b, ' ');
    for (const char *p = text; *p; p++) {
        if (*p == '|') buf_addc(b, '\\');
        buf_addc(b, *p);
    }
    buf_adds(b, " |");
}

static void knob_markdown(Buf *b) {
    buf_adds(b, "| knob | takes | default | units | meaning |\n|---|---|---|---|---|\n");
    for (int i = 0; i < knob_count; i++) {
        const Knob *k = &knob_table[i];
        char kind[256], def[128], text[300];
        knob_kind_text(k, "`, `", kind, sizeof kind);
        knob_default_text(k, def, sizeof def);
        buf_printf(b, "| `%s` |", k->name);
        snprintf(text, sizeof text, k->type == FT_ENUM ? "`%s`" : "%s", kind);
        cell(b, text);
        snprintf(text, sizeof text, "`%s`", def);
        cell(b, text);
        cell(b, k->units ? k->units : "");
        cell(b, k->desc);
        buf_addc(b, '\n');
    }
}

int main(int argc, char **argv) {
    return doc_block_main(argc, argv, "knobs", "knob_doc", knob_markdown);
}
