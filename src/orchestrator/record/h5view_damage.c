/* The view's account of journal damage (h5view_internal.h): bytes between valid records that
 * fail their CRC, which no --resume has handled yet (no DAMAGE record names them). A view
 * built over them silently lacks rows, runs or decisions, or shows a finished run as
 * interrupted; so the view says what it found: the root attributes `journal_damaged_bytes`
 * and `journal_damage`, the sweep status `damaged`, and H5ViewStats for `ablate view`'s exit
 * status. The runs a region may have held are found as resume.c finds them (the damaged
 * record's own header when it survived, else every run in progress at that point), so the
 * view names the runs a --resume would re-run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"
#include "util/grow.h"
#include "h5table.h"
#include "h5view_internal.h"
#include "journal.h"

struct H5Damage {
    int journal; /* View.rd index */
    uint64_t offset, length;
    int record_type; /* of the damaged record when its header survived, else 0 */
    int *runs, n_runs;
};

int h5v_damage_gap(View *v, JournalReader *r, uint64_t offset, uint64_t length) {
    if (GROW(v->dmg, v->cap_dmg, (size_t)v->n_dmg + 1) != 0) return -1;
    H5Damage *d = &v->dmg[v->n_dmg];
    memset(d, 0, sizeof *d);
    d->journal = v->cur_journal;
    d->offset = offset;
    d->length = length;
    uint8_t type;
    uint32_t run;
    JournalDamagedRun held = journal_reader_damaged_run(r, offset, length, v->nruns, &type, &run);
    d->record_type = type;
    if (held == JDMG_RUN) {
        if (!(d->runs = malloc(sizeof *d->runs))) return -1;
        d->runs[d->n_runs++] = (int)run;
    } else if (held == JDMG_UNKNOWN && v->nruns) { /* every run in progress here */
        if (!(d->runs = malloc(sizeof *d->runs * v->nruns))) return -1;
        for (uint32_t i = 0; i < v->nruns; i++)
            if (v->runs[i].planned && (v->runs[i].begun || v->runs[i].n_ev) && !v->runs[i].has_end)
                d->runs[d->n_runs++] = (int)i;
    }
    v->n_dmg++;
    return 0;
}

int h5v_damage_handled(View *v, const JournalRecord *rec) {
    JournalDamage dm;
    if (journal_decode_damage(rec, &dm) != 0) return 0;
    if (GROW(v->dmg_handled, v->cap_dmg_handled, (size_t)v->n_dmg_handled + 1) != 0) return -1;
    v->dmg_handled[v->n_dmg_handled++] = (H5DamageHandled){v->cur_journal, dm.offset};
    return 0;
}

static int handled(const View *v, const H5Damage *d) {
    for (int k = 0; k < v->n_dmg_handled; k++)
        if (v->dmg_handled[k].journal == d->journal && v->dmg_handled[k].offset == d->offset)
            return 1;
    return 0;
}

/* The name of run i as its PLAN record gives it; "run N" when that cannot be read. */
static void run_name(View *v, int i, char *out, size_t n) {
    snprintf(out, n, "run %d", i);
    if (i < 0 || (uint32_t)i >= v->nruns || !v->runs[i].planned || !v->rd) return;
    JournalRecord rec;
    JournalPlan p;
    JournalReader *r = h5v_run_reader(v, &v->runs[i]);
    if (r && journal_reader_read_at(r, v->runs[i].plan_off, &rec) == 0 &&
        journal_decode_plan(&rec, &p) == 0)
        snprintf(out, n, "%s", p.name);
}

void h5v_damage_settle(View *v) {
    v->st.damaged_regions = 0;
    v->st.damaged_bytes = 0;
    v->st.damage[0] = '\0';
    Buf b = {0};
    for (int i = 0; i < v->n_dmg; i++) {
        H5Damage *d = &v->dmg[i];
        if (handled(v, d)) continue;
        v->st.damaged_regions++;
        v->st.damaged_bytes += d->length;
        if (b.len) buf_addc(&b, '\n');
        if (v->nrd > 1) buf_printf(&b, "journal %d ", d->journal); /* which process's */
        const char *type = d->record_type ? journal_type_name(d->record_type) : "";
        buf_printf(&b, "bytes %llu-%llu (%llu)%s%s%s: ", (unsigned long long)d->offset,
                   (unsigned long long)(d->offset + d->length - 1), (unsigned long long)d->length,
                   !type[0]                   ? ""
                   : strchr("aeiou", type[0]) ? ", an "
                                              : ", a ",
                   type, type[0] ? " record" : "");
        if (d->n_runs == 0)
            buf_printf(&b, "no run's records known lost%s",
                       d->record_type == JREC_DECISION ? " (a decision of the rule)" : "");
        for (int k = 0; k < d->n_runs; k++) {
            char name[JOURNAL_NAME_MAX];
            run_name(v, d->runs[k], name, sizeof name);
            buf_printf(&b, "%s%s", k ? ", " : "may hold records of ", name);
        }
    }
    free(v->dmg_text);
    v->dmg_text = NULL;
    if (b.len && !b.oom) {
        snprintf(v->st.damage, sizeof v->st.damage, "%s", b.p);
        v->dmg_text = b.p; /* the whole list, for the file */
    } else {
        buf_free(&b);
    }
}

int h5v_write_damage(View *v, hid_t file) {
    if (h5_attr_i64(file, "journal_damaged_bytes", (long long)v->st.damaged_bytes) != 0) return -1;
    if (v->st.damaged_regions && h5_attr_str(file, "journal_damage", v->dmg_text) != 0) return -1;
    return 0;
}

void h5v_damage_free(View *v) {
    for (int i = 0; i < v->n_dmg; i++)
        free(v->dmg[i].runs);
    free(v->dmg);
    free(v->dmg_handled);
    free(v->dmg_text);
    v->dmg = NULL;
    v->dmg_handled = NULL;
    v->dmg_text = NULL;
    v->n_dmg = v->n_dmg_handled = 0;
    v->cap_dmg = v->cap_dmg_handled = 0;
}
