#include "spec_tune.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The keys a tune: mapping accepts, in the order messages name them. */
static const char *const tune_keys[] = {"knobs", "seeds", "eta", "first_rung", "metric", NULL};
/* The one selection metric: the validation split's loss. */
static const char TUNE_METRIC[] = "val_loss";

static SpecMark mark_at(const Spec *s, const YNode *n) {
    SpecMark m = {s->path, n->line, n->col};
    return m;
}

/* The expanded text of a scalar; NULL with err set. */
static char *scalar(const Spec *s, const YNode *v, const char *what, char err[ABL_ERR_MAX]) {
    if (v->type != YNODE_SCALAR || ydoc_is_null(v)) {
        spec_fail(err, mark_at(s, v), "%s: expected a single value, got %s", what,
                  ydoc_is_null(v) ? "nothing" : ydoc_kind(v));
        return NULL;
    }
    char msg[ABL_ERR_MAX];
    char *t = spec_expand(v->text, msg);
    if (!t) spec_fail(err, mark_at(s, v), "%s", msg);
    return t;
}

static int to_u64(const char *t, uint64_t *out) {
    if (*t < '0' || *t > '9') return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(t, &end, 10);
    if (errno || *end) return -1;
    *out = (uint64_t)v;
    return 0;
}

static int to_double(const char *t, double *out) {
    char *end;
    errno = 0;
    double v = strtod(t, &end);
    if (errno || end == t || *end || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

/* Types text for k and appends it as the next value of knob slot j. */
static int add_value(Spec *s, int j, const Knob *k, char *text, SpecMark m, char err[ABL_ERR_MAX]) {
    SpecTune *t = &s->tune;
    RunConfig a, b;
    run_config_default(&a);
    char msg[ABL_ERR_MAX];
    if (strlen(text) >= SPEC_TUNE_TEXT_MAX) { /* the journal's TUNE record holds it */
        free(text);
        return spec_fail(err, m, "tune.knobs.%s: a value longer than %d bytes", k->name,
                         SPEC_TUNE_TEXT_MAX - 1);
    }
    if (knob_set(&a, k, text, msg) != 0) {
        free(text);
        return spec_fail(err, m, "tune.knobs.%s: %s", k->name, msg);
    }
    for (int i = 0; i < t->n_values[j]; i++) {
        run_config_default(&b);
        knob_set(&b, k, t->values[j][i].text, msg);
        if (knob_equal(&a, &b, k)) {
            spec_fail(err, m, "tune.knobs.%s: the value %s is listed twice (also at line %d)",
                      k->name, text, t->values[j][i].mark.line);
            free(text);
            return -1;
        }
    }
    SpecAssign *v = &t->values[j][t->n_values[j]++];
    v->knob = k;
    v->text = text;
    v->mark = m;
    return 0;
}

/* {log: [LO, HI], n: N}: N values evenly spaced in log, LO and HI included. */
static int parse_log_range(Spec *s, int j, const Knob *k, const YNode *v, char err[ABL_ERR_MAX]) {
    SpecTune *t = &s->tune;
    const YNode *lv = NULL, *nv = NULL;
    for (int i = 0; i < v->n; i++) {
        if (!strcmp(v->keys[i]->text, "log"))
            lv = v->items[i];
        else if (!strcmp(v->keys[i]->text, "n"))
            nv = v->items[i];
        else
            return spec_fail(err, mark_at(s, v->keys[i]),
                             "tune.knobs.%s: unknown key '%s' (a log range is {log: [LO, HI], "
                             "n: N})",
                             k->name, v->keys[i]->text);
    }
    if (!lv || !nv || lv->type != YNODE_SEQ || lv->n != 2)
        return spec_fail(err, mark_at(s, v),
                         "tune.knobs.%s: expected a list of values or a log range {log: [LO, "
                         "HI], n: N}",
                         k->name);
    if (k->type != FT_DOUBLE && k->type != FT_INT && k->type != FT_LONG)
        return spec_fail(err, mark_at(s, v), "tune.knobs.%s: a log range needs a numeric knob",
                         k->name);
    double ends[2];
    for (int e = 0; e < 2; e++) {
        char *txt = scalar(s, lv->items[e], "tune.knobs", err);
        if (!txt) return -1;
        int bad = to_double(txt, &ends[e]) != 0 || !(ends[e] > 0);
        free(txt);
        if (bad)
            return spec_fail(err, mark_at(s, lv->items[e]),
                             "tune.knobs.%s: a log range's ends must be positive numbers", k->name);
    }
    if (!(ends[1] > ends[0]))
        return spec_fail(err, mark_at(s, lv->items[1]),
                         "tune.knobs.%s: a log range's HI must be above its LO", k->name);
    char *txt = scalar(s, nv, "tune.knobs", err);
    if (!txt) return -1;
    uint64_t n = 0;
    int bad = to_u64(txt, &n) != 0 || n < 2 || n > SPEC_TUNE_MAX_CANDIDATES;
    free(txt);
    if (bad)
        return spec_fail(err, mark_at(s, nv), "tune.knobs.%s: n must be a count from 2 to %d",
                         k->name, SPEC_TUNE_MAX_CANDIDATES);
    if (!(t->values[j] = calloc(n, sizeof *t->values[j])))
        return spec_fail(err, mark_at(s, v), "out of memory");
    for (uint64_t i = 0; i < n; i++) {
        double x = ends[0] * pow(ends[1] / ends[0], (double)i / (double)(n - 1));
        char buf[64];
        snprintf(buf, sizeof buf, k->type == FT_DOUBLE ? "%.4g" : "%.0f", x);
        char *text = strdup(buf);
        if (!text) return spec_fail(err, mark_at(s, v), "out of memory");
        if (add_value(s, j, k, text, mark_at(s, v), err) != 0) return -1;
    }
    return 0;
}

/* The knob may be tuned per configuration: not one the grid or a variant sets (those vary
 * between configurations by design) and not a budget (the rungs are fractions of it). */
static int check_knob(const Spec *s, const Knob *k, SpecMark m, char err[ABL_ERR_MAX]) {
    if (spec_is_budget(k))
        return spec_fail(err, m, "tune.knobs: %s is a budget; the rungs are fractions of it",
                         k->name);
    for (int a = 0; a < s->n_axes; a++)
        for (int j = 0; j < s->axes[a].n_keys; j++)
            if (s->axes[a].cells[j].knob == k)
                return spec_fail(err, m,
                                 "tune.knobs: %s is a grid axis (line %d); a tuned knob is "
                                 "chosen per configuration",
                                 k->name, s->axes[a].key_marks[j].line);
    for (int v = 0; v < s->n_variants; v++)
        for (int i = 0; i < s->variants[v].n_assign; i++)
            if (s->variants[v].assign[i].knob == k)
                return spec_fail(err, m,
                                 "tune.knobs: variant '%s' sets %s (line %d); a tuned knob is "
                                 "chosen per configuration",
                                 s->variants[v].name, k->name, s->variants[v].assign[i].mark.line);
    for (int e = 0; e < s->n_excludes; e++)
        for (int i = 0; i < s->excludes[e].n_assign; i++)
            if (s->excludes[e].assign[i].knob == k)
                return spec_fail(err, m, "tune.knobs: grid.exclude names %s (line %d)", k->name,
                                 s->excludes[e].assign[i].mark.line);
    return 0;
}

static int parse_knobs(Spec *s, const YNode *v, char err[ABL_ERR_MAX]) {
    SpecTune *t = &s->tune;
    if (v->type != YNODE_MAP || v->n == 0)
        return spec_fail(err, mark_at(s, v),
                         "tune.knobs: expected a mapping of knob: [values] (e.g. {train.lr: "
                         "[3.0e-3, 1.0e-2, 3.0e-2]}), got %s",
                         ydoc_kind(v));
    if (v->n > SPEC_TUNE_MAX_KNOBS)
        return spec_fail(err, mark_at(s, v->keys[SPEC_TUNE_MAX_KNOBS]),
                         "tune.knobs: at most %d knobs", SPEC_TUNE_MAX_KNOBS);
    double product = 1;
    for (int j = 0; j < v->n; j++) {
        const YNode *key = v->keys[j], *val = v->items[j];
        const Knob *k = knob_find(key->text);
        SpecMark km = mark_at(s, key);
        if (!k) {
            const char *guess = knob_suggest(key->text);
            if (guess)
                return spec_fail(err, km, "tune.knobs: unknown knob '%s' (did you mean '%s'?)",
                                 key->text, guess);
            return spec_fail(err, km, "tune.knobs: unknown knob '%s'", key->text);
        }
        for (int i = 0; i < j; i++)
            if (t->knobs[i] == k)
                return spec_fail(err, km, "tune.knobs: %s is listed twice", k->name);
        if (check_knob(s, k, km, err) != 0) return -1;
        t->knobs[j] = k;
        t->knob_marks[j] = km;
        t->n_knobs = j + 1;
        if (val->type == YNODE_MAP) {
            if (parse_log_range(s, j, k, val, err) != 0) return -1;
        } else if (val->type == YNODE_SEQ && val->n > 0) {
            if (!(t->values[j] = calloc((size_t)val->n, sizeof *t->values[j])))
                return spec_fail(err, km, "out of memory");
            for (int i = 0; i < val->n; i++) {
                char *text = scalar(s, val->items[i], "tune.knobs", err);
                if (!text || add_value(s, j, k, text, mark_at(s, val->items[i]), err) != 0)
                    return -1;
            }
        } else {
            return spec_fail(err, mark_at(s, val),
                             "tune.knobs.%s: expected a list of values or a log range {log: "
                             "[LO, HI], n: N}, got %s",
                             k->name, val->type == YNODE_SEQ ? "an empty list" : ydoc_kind(val));
        }
        product *= t->n_values[j];
    }
    if (product > SPEC_TUNE_MAX_CANDIDATES)
        return spec_fail(err, mark_at(s, v), "tune.knobs: %.0f candidates, more than %d", product,
                         SPEC_TUNE_MAX_CANDIDATES);
    if (product < 2)
        return spec_fail(err, mark_at(s, v),
                         "tune.knobs: one candidate only; give at least two values to choose "
                         "from");
    t->n_candidates = (int)product;
    return 0;
}

/* The tuning seeds: a list, each disjoint from the comparison seeds. */
static int parse_seeds(Spec *s, const YNode *v, char err[ABL_ERR_MAX]) {
    SpecTune *t = &s->tune;
    t->seeds_mark = mark_at(s, v);
    if (v->type != YNODE_SEQ || v->n == 0)
        return spec_fail(err, t->seeds_mark,
                         "tune.seeds: expected a non-empty list of seeds (e.g. [1000]), got %s",
                         v->type == YNODE_SEQ ? "an empty list" : ydoc_kind(v));
    if (!(t->seeds = calloc((size_t)v->n, sizeof *t->seeds)))
        return spec_fail(err, t->seeds_mark, "out of memory");
    for (int i = 0; i < v->n; i++) {
        char *txt = scalar(s, v->items[i], "tune.seeds", err);
        if (!txt) return -1;
        uint64_t x;
        int bad = to_u64(txt, &x);
        free(txt);
        SpecMark m = mark_at(s, v->items[i]);
        if (bad) return spec_fail(err, m, "tune.seeds: expected a non-negative integer seed");
        for (int j = 0; j < t->n_seeds; j++)
            if (t->seeds[j] == x)
                return spec_fail(err, m, "tune.seeds: duplicate seed %llu", (unsigned long long)x);
        for (int j = 0; j < s->n_seeds; j++)
            if (s->seeds[j] == x)
                return spec_fail(err, m,
                                 "tune.seeds: seed %llu is also a comparison seed (%s at line "
                                 "%d); tuning seeds must be disjoint from them, or the runs "
                                 "compared would have chosen their own values",
                                 (unsigned long long)x,
                                 s->replicate.on ? "replicate.seeds" : "seeds",
                                 s->seeds_mark.line > 0 ? s->seeds_mark.line : 1);
        t->seeds[t->n_seeds++] = x;
    }
    return 0;
}

int spec_tune_parse(Spec *s, const YNode *key, const YNode *v, char err[ABL_ERR_MAX]) {
    SpecTune *t = &s->tune;
    t->on = 1;
    t->mark = mark_at(s, key);
    t->eta = 3;
    if (v->type != YNODE_MAP)
        return spec_fail(err, mark_at(s, v),
                         "tune: expected a mapping with knobs, seeds, eta, first_rung and "
                         "metric; got %s",
                         ydoc_kind(v));
    for (int i = 0; i < v->n; i++) {
        int known = 0;
        for (int j = 0; tune_keys[j]; j++)
            known |= !strcmp(v->keys[i]->text, tune_keys[j]);
        if (!known)
            return spec_fail(err, mark_at(s, v->keys[i]),
                             "unknown key 'tune.%s' (expected knobs, seeds, eta, first_rung or "
                             "metric)",
                             v->keys[i]->text);
    }
    const YNode *x;
    if (!(x = ydoc_get(v, "knobs", NULL)))
        return spec_fail(err, t->mark,
                         "tune.knobs is required: the knobs to tune and their candidate values "
                         "(e.g. {train.lr: [3.0e-3, 1.0e-2, 3.0e-2]})");
    if (parse_knobs(s, x, err) != 0) return -1;
    if (!(x = ydoc_get(v, "seeds", NULL)))
        return spec_fail(err, t->mark,
                         "tune.seeds is required: a list of tuning seeds disjoint from the "
                         "comparison seeds (e.g. [1000])");
    if (parse_seeds(s, x, err) != 0) return -1;
    if ((x = ydoc_get(v, "eta", NULL))) {
        char *txt = scalar(s, x, "tune.eta", err);
        if (!txt) return -1;
        uint64_t e = 0;
        int bad = to_u64(txt, &e) != 0 || e < 2 || e > 16;
        free(txt);
        if (bad) return spec_fail(err, mark_at(s, x), "tune.eta: expected an integer from 2 to 16");
        t->eta = (int)e;
    }
    if ((x = ydoc_get(v, "first_rung", NULL))) {
        char *txt = scalar(s, x, "tune.first_rung", err);
        if (!txt) return -1;
        char *end = NULL;
        double f = strtod(txt, &end);
        int bad = end == txt || *end || !(f > 0 && f < 1);
        free(txt);
        if (bad)
            return spec_fail(err, mark_at(s, x),
                             "tune.first_rung: expected the fraction of the budget at which every "
                             "candidate is first judged, greater than 0 and less than 1");
        int keep[SPEC_TUNE_MAX_RUNGS];
        double frac[SPEC_TUNE_MAX_RUNGS];
        int r = spec_tune_rungs(t->n_candidates, t->eta, 0, keep, frac);
        double most = r >= 2 ? pow((double)t->eta, (double)-(r - 2)) : 1;
        if (r < 2 || f * pow((double)t->eta, (double)(r - 2)) >= 1)
            return spec_fail(err, mark_at(s, x),
                             r < 2 ? "tune.first_rung: %d candidate(s) with eta %d make one rung, "
                                     "at the full budget: there is no first cut to place"
                                   : "tune.first_rung: with %d candidates and eta %d the rungs "
                                     "below the last would reach the full budget; give less "
                                     "than %.4g",
                             t->n_candidates, t->eta, most);
        t->first_rung = f;
    }
    if ((x = ydoc_get(v, "metric", NULL))) {
        char *txt = scalar(s, x, "tune.metric", err);
        if (!txt) return -1;
        int bad = strcmp(txt, TUNE_METRIC) != 0;
        if (bad)
            spec_fail(err, mark_at(s, x),
                      "tune.metric: only %s (the validation split's loss) selects, got '%s'; the "
                      "test split is never read for a choice",
                      TUNE_METRIC, txt);
        free(txt);
        if (bad) return -1;
    }
    return 0;
}

void spec_tune_free(SpecTune *t) {
    for (int j = 0; j < SPEC_TUNE_MAX_KNOBS; j++) {
        for (int i = 0; t->values[j] && i < t->n_values[j]; i++)
            free(t->values[j][i].text);
        free(t->values[j]);
    }
    free(t->seeds);
    memset(t, 0, sizeof *t);
}

int spec_tune_value(const SpecTune *t, int c, int k) {
    int stride = 1;
    for (int j = t->n_knobs - 1; j > k; j--)
        stride *= t->n_values[j];
    return (c / stride) % t->n_values[k];
}

void spec_tune_apply(const SpecTune *t, int c, RunConfig *cfg) {
    char msg[ABL_ERR_MAX];
    for (int k = 0; k < t->n_knobs; k++) /* typed at load time */
        knob_set(cfg, t->knobs[k], t->values[k][spec_tune_value(t, c, k)].text, msg);
}

int spec_tune_rungs(int n, int eta, double first, int keep[SPEC_TUNE_MAX_RUNGS],
                    double frac[SPEC_TUNE_MAX_RUNGS]) {
    int r = 0;
    for (int m = n; m > 1 && r < SPEC_TUNE_MAX_RUNGS; m = (m + eta - 1) / eta)
        keep[r++] = m;
    if (r == 0) keep[r++] = n; /* one candidate: one rung, at the full budget */
    /* standard successive halving's first rung: the one at which halving n by eta until one
     * is left would end at the full budget */
    if (!(first > 0)) first = pow((double)eta, (double)-r);
    for (int i = 0; i < r - 1; i++)
        frac[i] = first * pow((double)eta, (double)i);
    frac[r - 1] = 1.0;
    return r;
}

double spec_tune_budgets(int n, int eta, double first) {
    int keep[SPEC_TUNE_MAX_RUNGS];
    double frac[SPEC_TUNE_MAX_RUNGS], total = 0, prev = 0;
    int r = spec_tune_rungs(n, eta, first, keep, frac);
    for (int i = 0; i < r; i++) {
        total += keep[i] * (frac[i] - prev);
        prev = frac[i];
    }
    return total;
}

int spec_tune_best(const double *metric, int n) {
    int best = 0;
    for (int c = 1; c < n; c++)
        if (metric[c] < metric[best]) best = c; /* strictly: a tie keeps the lower index */
    return best;
}

long spec_tune_rung_step(long total_steps, double frac) {
    if (frac >= 1 || total_steps <= 0) return total_steps;
    long s = lround((double)total_steps * frac);
    return s < 1 ? 1 : s > total_steps ? total_steps : s;
}

int spec_tune_promote(const double *metric, const unsigned char *alive, int n, int keep,
                      unsigned char *promoted) {
    int got = 0;
    for (int c = 0; c < n; c++)
        promoted[c] = 0;
    /* keep rounds of "the best not yet promoted": n is at most a few hundred */
    while (got < keep) {
        int best = -1;
        for (int c = 0; c < n; c++)
            if (alive[c] && !promoted[c] && (best < 0 || metric[c] < metric[best])) best = c;
        if (best < 0) break;
        promoted[best] = 1;
        got++;
    }
    return got;
}
