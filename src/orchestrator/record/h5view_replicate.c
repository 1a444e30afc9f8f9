/* The view of a replicate: sweep: /contrasts (each configuration against the
 * baseline, as the sweep defined them: plan/contrast.h) with each contrast's current state,
 * /decisions (every look of every contrast, journal order) and the rule's settings as root
 * attributes (replicate_*), all from the journal's REPLICATE and DECISION records
 * (journal_replicate.h). Layout: docs/hdf5-schema.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5view_internal.h"
#include "orchestrator/plan/contrast.h"
#include "orchestrator/plan/sequential.h"
#include "util/grow.h"
#include "util/log.h"

#define VERDICT_LEN 12

static const char *verdict(int v) {
    return seq_verdict_name((SeqVerdict)v);
}

static int same_bits(double a, double b) {
    return !memcmp(&a, &b, sizeof a);
}

/* A joined sweep's processes each journal every decision they make, all from the same
 * results (adaptive.c): a decision another journal holds already is shown once. One that
 * differs (the same contrast and look, and both a budget's end or neither) means the
 * processes decided from different results: the first journal's is kept, with a warning
 * (once per process: the view is rebuilt often). */
static int joined_duplicate(View *v, const JournalDecision *d) {
    static int warned;
    int budget = !strcmp(d->note, "budget");
    for (int i = 0; i < v->n_dec; i++) {
        const JournalDecision *o = &v->dec[i];
        if (o->contrast != d->contrast || o->look != d->look ||
            budget != !strcmp(o->note, "budget"))
            continue;
        int same = o->n == d->n && o->verdict == d->verdict && !strcmp(o->note, d->note) &&
                   same_bits(o->diff, d->diff) && same_bits(o->sd, d->sd) &&
                   same_bits(o->lo, d->lo) && same_bits(o->hi, d->hi) &&
                   same_bits(o->level, d->level);
        if (!same) v->st.decision_conflicts++;
        if (!same && !warned) {
            warned = 1;
            log_warn("joined sweep: two processes decided contrast %d at look %d differently "
                     "(n=%d %s [%+.4f, %+.4f], then n=%d %s [%+.4f, %+.4f]): the view keeps the "
                     "first; their runs' results differ",
                     d->contrast, d->look, o->n, verdict(o->verdict), o->lo, o->hi, d->n,
                     verdict(d->verdict), d->lo, d->hi);
        }
        return 1;
    }
    return 0;
}

int h5v_replicate_record(View *v, JournalReader *r, const JournalRecord *rec) {
    if (rec->type == JREC_REPLICATE) { /* the last session's is the sweep's */
        JournalReplicate jr;
        if (journal_decode_replicate(rec, &jr) != 0) {
            v->st.skipped++;
            return 0;
        }
        v->rep_rd = r;
        v->rep_off = rec->offset;
        return 0;
    }
    if (GROW(v->dec, v->cap_dec, (size_t)v->n_dec + 1) != 0) return -1;
    if (journal_decode_decision(rec, &v->dec[v->n_dec]) != 0) {
        v->st.skipped++;
        return 0;
    }
    if (!v->joined || !joined_duplicate(v, &v->dec[v->n_dec])) v->n_dec++;
    return 0;
}

static const H5Col contrast_cols[] = {
    {"contrast", H5C_I32, 0, NULL, "contrast number (the contrast column of /decisions)"},
    {"configuration", H5C_VSTR, 0, NULL,
     "the configuration compared: its run names without /seedN"},
    {"baseline", H5C_VSTR, 0, NULL, "the configuration it is compared against"},
    {"pairing", H5C_STR, 8, NULL, "how runs pair: seed (seed k of one with seed k of the other)"},
    {"verdict", H5C_STR, VERDICT_LEN, NULL,
     "open, better, worse, equivalent, unresolved or unstable: its last decision's"},
    {"n", H5C_I32, 0, "seeds", "pairs its last look used (0: not looked at yet)"},
    {"difference", H5C_F64, 0, "nats/token",
     "mean paired difference at its last look (configuration - baseline) of final_test_loss "
     "or final_val_loss: the split root attribute replicate_split names"},
    {"lo", H5C_F64, 0, "nats/token",
     "its interval at that look (simultaneous over looks and contrasts)"},
    {"hi", H5C_F64, 0, "nats/token", "upper end of that interval"},
    {"kind", H5C_STR, 12, NULL,
     "vs_base (a configuration against the baseline), main (a main effect: a level of "
     "factor against its base level, averaged over every other factor's levels) or "
     "interaction (a two-way interaction of level of factor with level2 of factor2)"},
    {"factor", H5C_VSTR, 0, NULL,
     "main, interaction: the grid knob (a zip group's knobs joined by +), or variant; "
     "vs_base: empty"},
    {"level", H5C_VSTR, 0, NULL,
     "the level of factor compared, as run names write it (a zip group: its values joined by +)"},
    {"base_level", H5C_VSTR, 0, NULL,
     "factor's base level (the replicate.baseline grid point's; the variant baseline)"},
    {"factor2", H5C_VSTR, 0, NULL, "interaction: the second factor; else empty"},
    {"level2", H5C_VSTR, 0, NULL, "interaction: the level of factor2"},
    {"base_level2", H5C_VSTR, 0, NULL, "interaction: factor2's base level"},
};
#define N_CONTRAST_COLS ((int)(sizeof contrast_cols / sizeof *contrast_cols))

static const H5Col decision_cols[] = {
    {"look", H5C_I32, 0, NULL,
     "index into the looks (root attribute replicate_looks); -1: ended before its first look"},
    {"contrast", H5C_I32, 0, NULL, "row of /contrasts"},
    {"n", H5C_I32, 0, "seeds",
     "pairs used: the first n usable pairs in seed order, exactly (a dropped pair is replaced by "
     "the next seed index)"},
    {"difference", H5C_F64, 0, "nats/token",
     "mean paired difference (configuration - baseline) of the loss on the split "
     "replicate_split names (final_test_loss or final_val_loss)"},
    {"sd", H5C_F64, 0, "nats/token", "standard deviation of the paired differences"},
    {"lo", H5C_F64, 0, "nats/token", "lower end of the interval at the look's level"},
    {"hi", H5C_F64, 0, "nats/token", "upper end of that interval"},
    {"level", H5C_F64, 0, "1", "two-sided level the rule spent at this look for one contrast"},
    {"verdict", H5C_STR, VERDICT_LEN, NULL,
     "open (more seeds), better, worse, equivalent, unresolved or unstable"},
    {"note", H5C_VSTR, 0, NULL,
     "the pairs the look skipped (dropped: RUN why; ...), or why it ended without the rule "
     "(budget; unstable: K of MAX seeds dropped, ...)"},
};
#define N_DECISION_COLS ((int)(sizeof decision_cols / sizeof *decision_cols))

static int attr_f64(hid_t loc, const char *name, double value) {
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(loc, name, H5T_IEEE_F64LE, s, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = a < 0 ? -1 : H5Awrite(a, H5T_NATIVE_DOUBLE, &value);
    if (a >= 0) H5Aclose(a);
    H5Sclose(s);
    return rc < 0 ? -1 : 0;
}

static int root_attrs(hid_t file, const JournalReplicate *r, const View *v) {
    int taken = 0;
    double spent = journal_alpha_spent(v->dec, v->n_dec, &taken);
    char looks[SPEC_MAX_LOOKS * 12] = "";
    for (int i = 0; i < r->n_looks; i++)
        snprintf(looks + strlen(looks), sizeof looks - strlen(looks), "%s%d", i ? "," : "",
                 r->looks[i]);
    return attr_f64(file, "replicate_alpha", r->alpha) ||
           attr_f64(file, "replicate_delta", r->delta) ||
           attr_f64(file, "replicate_core_hours", r->core_hours) ||
           h5_attr_i32(file, "replicate_min", r->min) ||
           h5_attr_i32(file, "replicate_max", r->max) ||
           h5_attr_str(file, "replicate_looks", looks) ||
           h5_attr_str(file, "replicate_split", r->split == 1 ? "test" : "validation") ||
           h5_attr_str(file, "replicate_rule", "plan/sequential.h, docs/analysis.md") ||
           h5_attr_i32(file, "replicate_rule_version", r->rule_version) ||
           attr_f64(file, "replicate_alpha_spent", spent) ||
           h5_attr_i32(file, "replicate_looks_taken", taken);
}

int h5v_write_replicate(View *v, hid_t file, char *err) {
    if (!v->rep_rd) return 0;
    JournalRecord rec;
    JournalReplicate jr;
    if (journal_reader_read_at(v->rep_rd, v->rep_off, &rec) != 0 ||
        journal_decode_replicate(&rec, &jr) != 0) {
        snprintf(err, ABL_ERR_MAX, "cannot re-read the replicate record: %s",
                 journal_reader_error(v->rep_rd));
        return -1;
    }
    /* the rule's record is re-read per contrast below: keep the payload */
    uint8_t *payload = malloc(rec.len + 1);
    if (!payload) return snprintf(err, ABL_ERR_MAX, "out of memory"), -1;
    memcpy(payload, rec.payload, rec.len);
    rec.payload = payload;
    int rc = -1;
    H5Table c, d;
    h5t_init(&c);
    h5t_init(&d);
    if (root_attrs(file, &jr, v) != 0) {
        h5_err(err, "cannot write the replicate attributes");
        goto done;
    }
    if (h5t_create(&c, file, "contrasts", contrast_cols, N_CONTRAST_COLS, 1,
                   "A replicate: sweep's contrasts: each configuration against the baseline, "
                   "or the grid's main effects and interactions, paired by seed, as the "
                   "sweep defined them, and where each stands.",
                   err) != 0 ||
        h5t_schema_add(v->schema, "contrasts", contrast_cols, N_CONTRAST_COLS, err) != 0)
        goto done;
    for (int k = 0; k < jr.n_contrasts; k++) {
        const char *cf, *bl, *pr;
        size_t cl, bn, pl;
        if (journal_replicate_contrast(&rec, k, &cf, &cl, &bl, &bn, &pr, &pl) != 0) {
            snprintf(err, ABL_ERR_MAX, "malformed replicate record");
            goto done;
        }
        const JournalDecision *last = NULL;
        for (int i = 0; i < v->n_dec; i++)
            if (v->dec[i].contrast == k) last = &v->dec[i];
        uint8_t *row = h5t_row(&c, err);
        if (!row) goto done;
        char pairing[8];
        snprintf(pairing, sizeof pairing, "%.*s", (int)pl, pr);
        h5t_set_i32(&c, row, 0, k);
        if (h5t_set_vstr(&c, row, 1, cf, cl) != 0 || h5t_set_vstr(&c, row, 2, bl, bn) != 0) {
            snprintf(err, ABL_ERR_MAX, "out of memory");
            goto done;
        }
        h5t_set_str(&c, row, 3, pairing, 8);
        h5t_set_str(&c, row, 4, verdict(last ? last->verdict : SEQ_OPEN), VERDICT_LEN);
        h5t_set_i32(&c, row, 5, last ? last->n : 0);
        h5t_set_f64(&c, row, 6, last ? last->diff : NAN);
        h5t_set_f64(&c, row, 7, last ? last->lo : NAN);
        h5t_set_f64(&c, row, 8, last ? last->hi : NAN);
        JournalContrastFactors f;
        if (journal_replicate_factors(&rec, k, &f) != 0) {
            snprintf(err, ABL_ERR_MAX, "malformed replicate record");
            goto done;
        }
        h5t_set_str(&c, row, 9, contrast_kind_name(f.kind), 12);
        for (int i = 0; i < 2; i++)
            if (h5t_set_vstr(&c, row, 10 + 3 * i, f.factor[i] ? f.factor[i] : "",
                             f.factor_len[i]) != 0 ||
                h5t_set_vstr(&c, row, 11 + 3 * i, f.level[i] ? f.level[i] : "", f.level_len[i]) !=
                    0 ||
                h5t_set_vstr(&c, row, 12 + 3 * i, f.base_level[i] ? f.base_level[i] : "",
                             f.base_level_len[i]) != 0) {
                snprintf(err, ABL_ERR_MAX, "out of memory");
                goto done;
            }
    }
    if (h5t_create(&d, file, "decisions", decision_cols, N_DECISION_COLS, 1,
                   "Every look of every contrast of a replicate: sweep, in the order they "
                   "were made; a contrast's last row is its verdict (sequential: valid over "
                   "every look and contrast at the family-wise replicate_alpha).",
                   err) != 0 ||
        h5t_schema_add(v->schema, "decisions", decision_cols, N_DECISION_COLS, err) != 0)
        goto done;
    for (int i = 0; i < v->n_dec; i++) {
        const JournalDecision *x = &v->dec[i];
        uint8_t *row = h5t_row(&d, err);
        if (!row) goto done;
        h5t_set_i32(&d, row, 0, x->look);
        h5t_set_i32(&d, row, 1, x->contrast);
        h5t_set_i32(&d, row, 2, x->n);
        h5t_set_f64(&d, row, 3, x->diff);
        h5t_set_f64(&d, row, 4, x->sd);
        h5t_set_f64(&d, row, 5, x->lo);
        h5t_set_f64(&d, row, 6, x->hi);
        h5t_set_f64(&d, row, 7, x->level);
        h5t_set_str(&d, row, 8, verdict(x->verdict), VERDICT_LEN);
        if (h5t_set_vstr(&d, row, 9, x->note, strlen(x->note)) != 0) {
            snprintf(err, ABL_ERR_MAX, "out of memory");
            goto done;
        }
    }
    rc = 0;
done:;
    char e2[ABL_ERR_MAX];
    if (h5t_close(&c, rc != 0, rc == 0 ? err : e2) != 0) rc = -1;
    if (h5t_close(&d, rc != 0, rc == 0 ? err : e2) != 0) rc = -1;
    free(payload);
    return rc;
}

void h5v_replicate_markdown(Buf *b, const char *head) {
    buf_printf(b,
               "\n#### `/contrasts`\nOnly in a `replicate:` sweep (docs/spec.md): one row per "
               "contrast, paired by seed: each configuration against the baseline "
               "(`contrasts: vs_base`), or the main effects and two-way interactions of the "
               "grid's factors (`contrasts: main_effects`, `interactions`; docs/spec.md, "
               "\"Factorial contrasts\"), in the family's order: main effects by factor and "
               "level, then interactions by pair of factors.\n\n%s",
               head);
    h5v_md_rows(b, contrast_cols, N_CONTRAST_COLS);
    buf_printf(b,
               "\n#### `/decisions`\nOnly in a `replicate:` sweep: every look of every "
               "contrast, in the order made (a joined sweep: each once, though every process "
               "journals it); a contrast's last row is its verdict. The rule's "
               "settings are root attributes: `replicate_alpha`, `replicate_delta`, "
               "`replicate_looks` (comma-separated seed counts), `replicate_min`, "
               "`replicate_max`, `replicate_core_hours` (0: no budget), `replicate_rule`, "
               "`replicate_rule_version` (the version of the rule that took the looks, 1 to "
               "this binary's; a resumed sweep keeps the one it began with: docs/analysis.md), "
               "`replicate_split` (`test`: the differences are of `final_test_loss`, the "
               "held-out test split, when every run has one (data.test_fraction > 0); "
               "`validation`: of `final_val_loss`). The alpha ledger of the file: "
               "`replicate_alpha_spent`, the sum of `level` over the looks taken (rows with an "
               "interval, the budget's end not counted again: at most `replicate_alpha`), and "
               "`replicate_looks_taken`, how many; a `--resume` under another rule is refused "
               "naming them (docs/spec.md).\n\n%s",
               head);
    h5v_md_rows(b, decision_cols, N_DECISION_COLS);
}
