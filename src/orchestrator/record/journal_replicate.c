#include "journal_replicate.h"

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include "orchestrator/plan/sequential.h"
#include "util/buf.h"
#include "util/le.h"

int journal_append_replicate(Journal *j, const JournalReplicate *r, const char *const *names,
                             const char *const *baselines, const JournalContrastFactors *factors) {
    Buf b = {0};
    le_buf_f64(&b, r->alpha);
    le_buf_f64(&b, r->delta);
    le_buf_f64(&b, r->core_hours);
    le_buf_u32(&b, (uint32_t)r->min);
    le_buf_u32(&b, (uint32_t)r->max);
    le_buf_u32(&b, (uint32_t)r->n_looks);
    for (int i = 0; i < r->n_looks; i++)
        le_buf_u32(&b, (uint32_t)r->looks[i]);
    le_buf_u32(&b, (uint32_t)r->n_contrasts);
    for (int k = 0; k < r->n_contrasts; k++) {
        le_buf_str(&b, names[k], strlen(names[k]));
        le_buf_str(&b, baselines[k], strlen(baselines[k]));
        le_buf_str(&b, "seed", 4);
    }
    le_buf_u32(&b, (uint32_t)r->split);
    if (factors) {
        le_buf_u32(&b, 1);
        for (int k = 0; k < r->n_contrasts; k++) {
            const JournalContrastFactors *f = &factors[k];
            le_buf_u32(&b, (uint32_t)f->kind);
            for (int i = 0; i < 2; i++) {
                le_buf_cstr(&b, f->factor[i]);
                le_buf_cstr(&b, f->level[i]);
                le_buf_cstr(&b, f->base_level[i]);
            }
        }
    }
    le_buf_u32(&b, (uint32_t)(r->rule_version > 0 ? r->rule_version : SEQ_RULE_VERSION));
    return journal_append_buf(j, JREC_REPLICATE, JOURNAL_NO_RUN, &b);
}

int journal_append_decision(Journal *j, const JournalDecision *d) {
    Buf b = {0};
    le_buf_u32(&b, (uint32_t)d->contrast);
    le_buf_u32(&b, (uint32_t)(int32_t)d->look);
    le_buf_u32(&b, (uint32_t)d->n);
    le_buf_f64(&b, d->diff);
    le_buf_f64(&b, d->sd);
    le_buf_f64(&b, d->lo);
    le_buf_f64(&b, d->hi);
    le_buf_f64(&b, d->level);
    le_buf_u32(&b, (uint32_t)d->verdict);
    le_buf_str(&b, d->note, strlen(d->note));
    return journal_append_buf(j, JREC_DECISION, JOURNAL_NO_RUN, &b);
}

/* Reads the fixed part; leaves c at the first contrast. */
static int read_head(LeReader *c, const JournalRecord *rec, JournalReplicate *r) {
    if (rec->type != JREC_REPLICATE) return -1;
    memset(r, 0, sizeof *r);
    r->alpha = le_read_f64(c);
    r->delta = le_read_f64(c);
    r->core_hours = le_read_f64(c);
    r->min = (int)le_read_u32(c);
    r->max = (int)le_read_u32(c);
    uint32_t n = le_read_u32(c);
    if (c->bad || n > SPEC_MAX_LOOKS) return -1;
    r->n_looks = (int)n;
    for (uint32_t i = 0; i < n; i++)
        r->looks[i] = (int)le_read_u32(c);
    uint32_t k = le_read_u32(c);
    if (c->bad || k > (uint32_t)rec->len) return -1;
    r->n_contrasts = (int)k;
    return 0;
}

/* Reads what follows the contrasts (c at its start): the split into r (validation when the
 * record ends there), then the factorial part, contrast k's into f (k < 0: none kept); a
 * record without it gives kind 0 and empty strings. */
static int read_tail(LeReader *c, JournalReplicate *r, int k, JournalContrastFactors *f) {
    JournalContrastFactors none = {0}, skip;
    int n = r->n_contrasts;
    if (f) *f = none;
    r->split = 0;
    r->rule_version = 1; /* a record without it: the rule before the versions */
    if (c->p == c->end) return 0;
    r->split = (int)le_read_u32(c);
    if (c->bad || r->split < 0 || r->split > 1) return -1;
    /* the factorial part is longer than the 4 bytes of the rule version that ends a record */
    if (le_left(c) > 4) {
        if (le_read_u32(c) != 1 || c->bad) return -1;
        for (int i = 0; i < n; i++) {
            JournalContrastFactors *x = i == k && f ? f : &skip;
            x->kind = (int)le_read_u32(c);
            for (int s = 0; s < 2; s++) {
                x->factor[s] = le_read_str(c, &x->factor_len[s]);
                x->level[s] = le_read_str(c, &x->level_len[s]);
                x->base_level[s] = le_read_str(c, &x->base_level_len[s]);
            }
            if (c->bad || x->kind < 0 || x->kind > 2) return -1;
        }
    }
    if (le_left(c) == 4) r->rule_version = (int)le_read_u32(c);
    return c->p == c->end && !c->bad && r->rule_version >= 1 ? 0 : -1;
}

/* Skips the contrast strings (c after the head). */
static void skip_contrasts(LeReader *c, int n) {
    for (int k = 0; k < n; k++) {
        size_t len;
        le_read_str(c, &len);
        le_read_str(c, &len);
        le_read_str(c, &len);
    }
}

int journal_decode_replicate(const JournalRecord *rec, JournalReplicate *r) {
    LeReader c = le_reader(rec->payload, rec->len);
    if (read_head(&c, rec, r) != 0) return -1;
    skip_contrasts(&c, r->n_contrasts);
    if (c.bad) return -1;
    return read_tail(&c, r, -1, NULL);
}

int journal_replicate_factors(const JournalRecord *rec, int k, JournalContrastFactors *f) {
    LeReader c = le_reader(rec->payload, rec->len);
    JournalReplicate r;
    if (read_head(&c, rec, &r) != 0 || k < 0 || k >= r.n_contrasts) return -1;
    skip_contrasts(&c, r.n_contrasts);
    if (c.bad) return -1;
    return read_tail(&c, &r, k, f);
}

int journal_replicate_contrast(const JournalRecord *rec, int k, const char **config,
                               size_t *config_len, const char **baseline, size_t *baseline_len,
                               const char **pairing, size_t *pairing_len) {
    LeReader c = le_reader(rec->payload, rec->len);
    JournalReplicate r;
    if (read_head(&c, rec, &r) != 0 || k < 0 || k >= r.n_contrasts) return -1;
    for (int i = 0; i <= k; i++) {
        *config = le_read_str(&c, config_len);
        *baseline = le_read_str(&c, baseline_len);
        *pairing = le_read_str(&c, pairing_len);
    }
    return c.bad ? -1 : 0;
}

int journal_decode_decision(const JournalRecord *rec, JournalDecision *d) {
    LeReader c = le_reader(rec->payload, rec->len);
    if (rec->type != JREC_DECISION) return -1;
    memset(d, 0, sizeof *d);
    d->contrast = (int)le_read_u32(&c);
    d->look = (int)(int32_t)le_read_u32(&c);
    d->n = (int)le_read_u32(&c);
    d->diff = le_read_f64(&c);
    d->sd = le_read_f64(&c);
    d->lo = le_read_f64(&c);
    d->hi = le_read_f64(&c);
    d->level = le_read_f64(&c);
    d->verdict = (int)le_read_u32(&c);
    size_t n;
    const char *note = le_read_str(&c, &n);
    if (c.bad || c.p != c.end) return -1;
    snprintf(d->note, sizeof d->note, "%.*s", (int)n, note);
    return 0;
}

double journal_alpha_spent(const JournalDecision *d, int n, int *looks) {
    double spent = 0;
    int k = 0;
    for (int i = 0; i < n; i++) {
        const JournalDecision *x = &d[i];
        if (x->look < 0 || !isfinite(x->level) || !isfinite(x->lo) || !isfinite(x->hi) ||
            !strcmp(x->note, "budget"))
            continue;
        spent += x->level;
        k++;
    }
    if (looks) *looks = k;
    return spent;
}
