/* The view of a tune: sweep's choices (docs/spec.md, "tune"): /tuning, one row per
 * candidate of every configuration, from the journal's TUNE records (journal_tune.h; of a
 * configuration, the one deciding its latest rung counts, the later of equals: a joined
 * sweep's processes each journal every decision, and its journals are read in turn).
 * Layout: docs/hdf5-schema.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5view_internal.h"
#include "util/buf.h"
#include "util/grow.h"

int h5v_tune_record(View *v, const JournalRecord *rec) {
    JournalTune *t = malloc(sizeof *t);
    if (!t) return -1;
    if (journal_decode_tune(rec, t) != 0) {
        free(t);
        v->st.skipped++;
        return 0;
    }
    for (int i = 0; i < v->n_tune; i++)
        if (v->tune[i]->config == t->config && !strcmp(v->tune[i]->name, t->name)) {
            if (t->decided < v->tune[i]->decided) { /* another journal's earlier rung */
                free(t);
                return 0;
            }
            free(v->tune[i]);
            v->tune[i] = t;
            return 0;
        }
    if (GROW(v->tune, v->cap_tune, (size_t)v->n_tune + 1) != 0) {
        free(t);
        return -1;
    }
    v->tune[v->n_tune++] = t;
    return 0;
}

void h5v_tune_free(View *v) {
    for (int i = 0; i < v->n_tune; i++)
        free(v->tune[i]);
    free(v->tune);
    v->tune = NULL;
    v->n_tune = 0;
    v->cap_tune = 0;
}

static const H5Col tune_cols[] = {
    {"configuration", H5C_VSTR, 0, NULL,
     "the configuration tuned: its comparison runs' names without /seedN (baseline/ without "
     "variants or grid: \"\")"},
    {"config", H5C_I32, 0, NULL, "the configuration's index in plan order"},
    {"candidate", H5C_I32, 0, NULL,
     "the candidate's index (the tune.knobs lists' product, the "
     "last knob fastest)"},
    {"knobs", H5C_VSTR, 0, NULL, "the tuned knobs, space-separated (\"train.lr\")"},
    {"values", H5C_VSTR, 0, NULL, "the candidate's values of those knobs, space-separated"},
    {"value", H5C_F64, 0, NULL,
     "the candidate's value of the first tuned knob as a number (NaN if not numeric): the "
     "x axis of the tuning curve"},
    {"rung", H5C_I32, 0, NULL,
     "the last successive-halving rung the candidate reached (0-based; /tuning_rungs has its "
     "result at each)"},
    {"fraction", H5C_F64, 0, "1", "the fraction of the full budget of that rung"},
    {"seeds", H5C_I32, 0, NULL, "tuning seeds with a result in the metric"},
    {"val_loss", H5C_F64, 0, "nats",
     "the selection metric: mean validation loss over those seeds at that rung's step (+inf: "
     "a run diverged; never the test split)"},
    {"chosen", H5C_I32, 0, NULL,
     "1: the value its comparison runs trained at (none while a rung before the last is the "
     "last decided)"},
};
#define N_TUNE_COLS ((int)(sizeof tune_cols / sizeof *tune_cols))

static int set_text(H5Table *c, uint8_t *row, int col, const char *s) {
    return h5t_set_vstr(c, row, col, s, strlen(s));
}

static int write_rungs(View *v, hid_t file, char *err);

int h5v_write_tuning(View *v, hid_t file, char *err) {
    if (!v->n_tune) return 0;
    H5Table c;
    h5t_init(&c);
    int rc = -1;
    if (h5t_create(&c, file, "tuning", tune_cols, N_TUNE_COLS, 1,
                   "A tune: sweep: every candidate of every configuration, its selection metric "
                   "and the choice its comparison runs trained at.",
                   err) != 0 ||
        h5t_schema_add(v->schema, "tuning", tune_cols, N_TUNE_COLS, err) != 0)
        goto done;
    for (int i = 0; i < v->n_tune; i++) {
        const JournalTune *t = v->tune[i];
        char knobs[SPEC_TUNE_MAX_KNOBS * JOURNAL_TUNE_TEXT_MAX + 8] = "";
        for (int k = 0; k < t->n_knobs; k++)
            snprintf(knobs + strlen(knobs), sizeof knobs - strlen(knobs), "%s%s", k ? " " : "",
                     t->knob[k]);
        for (int cand = 0; cand < t->n_cand; cand++) {
            char values[SPEC_TUNE_MAX_KNOBS * JOURNAL_TUNE_TEXT_MAX + 8] = "";
            for (int k = 0; k < t->n_knobs; k++)
                snprintf(values + strlen(values), sizeof values - strlen(values), "%s%s",
                         k ? " " : "", t->value[cand][k]);
            uint8_t *row = h5t_row(&c, err);
            if (!row) goto done;
            if (set_text(&c, row, 0, t->name) || set_text(&c, row, 3, knobs) ||
                set_text(&c, row, 4, values)) {
                snprintf(err, ABL_ERR_MAX, "out of memory");
                goto done;
            }
            char *end;
            double x = strtod(t->value[cand][0], &end);
            int rung = t->rung[cand] > t->decided ? t->decided : t->rung[cand]; /* reached */
            h5t_set_i32(&c, row, 1, t->config);
            h5t_set_i32(&c, row, 2, cand);
            h5t_set_f64(&c, row, 5, end != t->value[cand][0] && !*end ? x : NAN);
            h5t_set_i32(&c, row, 6, rung);
            h5t_set_f64(&c, row, 7, t->frac[rung]);
            h5t_set_i32(&c, row, 8, t->seeds[cand]);
            h5t_set_f64(&c, row, 9, t->metric[cand]);
            h5t_set_i32(&c, row, 10, cand == t->chosen);
        }
    }
    rc = 0;
done:;
    char e2[ABL_ERR_MAX];
    if (h5t_close(&c, rc != 0, rc == 0 ? err : e2) != 0) rc = -1;
    return rc == 0 ? write_rungs(v, file, err) : rc;
}

static const H5Col rung_cols[] = {
    {"configuration", H5C_VSTR, 0, NULL, "the configuration tuned (as in /tuning)"},
    {"config", H5C_I32, 0, NULL, "the configuration's index in plan order"},
    {"candidate", H5C_I32, 0, NULL, "the candidate's index (as in /tuning)"},
    {"values", H5C_VSTR, 0, NULL, "the candidate's values of the tuned knobs, space-separated"},
    {"rung", H5C_I32, 0, NULL, "the successive-halving rung (0-based)"},
    {"fraction", H5C_F64, 0, "1", "the fraction of the full budget the rung trains to"},
    {"val_loss", H5C_F64, 0, "nats",
     "mean validation loss at the rung's step over the tuning seeds (+inf: a run diverged)"},
    {"promoted", H5C_I32, 0, NULL,
     "1: trained on to the next rung (at the last rung: the choice); 0: ended at this rung"},
};
#define N_RUNG_COLS ((int)(sizeof rung_cols / sizeof *rung_cols))

/* /tuning_rungs: every rung result of every candidate, from each configuration's last
 * record (a rung not decided yet is not in it). */
static int write_rungs(View *v, hid_t file, char *err) {
    H5Table c;
    h5t_init(&c);
    int rc = -1;
    if (h5t_create(&c, file, "tuning_rungs", rung_cols, N_RUNG_COLS, 1,
                   "A tune: sweep's successive halving: each candidate's result at every rung "
                   "it reached, and whether it trained on.",
                   err) != 0 ||
        h5t_schema_add(v->schema, "tuning_rungs", rung_cols, N_RUNG_COLS, err) != 0)
        goto done;
    for (int i = 0; i < v->n_tune; i++) {
        const JournalTune *t = v->tune[i];
        for (int cand = 0; cand < t->n_cand; cand++) {
            char values[SPEC_TUNE_MAX_KNOBS * JOURNAL_TUNE_TEXT_MAX + 8] = "";
            for (int k = 0; k < t->n_knobs; k++)
                snprintf(values + strlen(values), sizeof values - strlen(values), "%s%s",
                         k ? " " : "", t->value[cand][k]);
            for (int r = 0; r <= t->decided; r++) {
                if (isnan(t->at[cand][r])) continue; /* not reached */
                uint8_t *row = h5t_row(&c, err);
                if (!row) goto done;
                if (set_text(&c, row, 0, t->name) || set_text(&c, row, 3, values)) {
                    snprintf(err, ABL_ERR_MAX, "out of memory");
                    goto done;
                }
                int on = r < t->n_rungs - 1 ? t->rung[cand] > r : cand == t->chosen;
                h5t_set_i32(&c, row, 1, t->config);
                h5t_set_i32(&c, row, 2, cand);
                h5t_set_i32(&c, row, 4, r);
                h5t_set_f64(&c, row, 5, t->frac[r]);
                h5t_set_f64(&c, row, 6, t->at[cand][r]);
                h5t_set_i32(&c, row, 7, on);
            }
        }
    }
    rc = 0;
done:;
    char e2[ABL_ERR_MAX];
    if (h5t_close(&c, rc != 0, rc == 0 ? err : e2) != 0) rc = -1;
    return rc;
}

void h5v_tuning_markdown(Buf *b, const char *head) {
    buf_printf(b,
               "\n#### `/tuning`\nOnly in a `tune:` sweep (docs/spec.md, \"tune\"): one row per "
               "candidate of each configuration whose value was chosen.\n\n%s",
               head);
    h5v_md_rows(b, tune_cols, N_TUNE_COLS);
    buf_printf(b,
               "\n#### `/tuning_rungs`\nOnly in a `tune:` sweep: one row per rung result of each "
               "candidate (successive halving: every candidate at the first rung, the best "
               "ceil(k/eta) of them at the next, ..., the full budget at the last).\n\n%s",
               head);
    h5v_md_rows(b, rung_cols, N_RUNG_COLS);
}
