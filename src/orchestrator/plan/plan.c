#include "plan.h"

#include "orchestrator/record/journal.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run_id.h"

_Static_assert(PLAN_NAME_MAX < JOURNAL_NAME_MAX, "the journal must keep whole run names");

/* ---- ids ---- */

uint64_t plan_run_hash(const RunConfig *c, uint64_t seed) {
    return run_id_hash(c, &seed);
}

void plan_run_id(const RunConfig *c, uint64_t seed, char id[17]) {
    run_id_format(plan_run_hash(c, seed), id);
}

/* ---- resolving and validating one run ---- */

/* The run-specific assignments: the variant's entries, then one cell per axis key. */
typedef struct {
    const SpecAssign **a;
    int n, cap;
} Layer;

static int budget_slot(const Knob *k) {
    if (!spec_is_budget(k)) return -1;
    return !strcmp(k->name, "train.steps") ? 0 : (!strcmp(k->name, "train.tokens") ? 1 : 2);
}

/* base + every assignment except `skip` (-1 = none), then the budget rule. */
static void resolve(const Spec *s, const Layer *l, int skip, RunConfig *out) {
    *out = s->base;
    int budgets[3] = {0, 0, 0};
    for (int i = 0; i < knob_count; i++) {
        int b = budget_slot(&knob_table[i]);
        if (b >= 0 && s->base_src[i].line > 0) budgets[b] = 1;
    }
    for (int i = 0; i < l->n; i++) {
        if (i == skip) continue;
        char msg[ABL_ERR_MAX];
        knob_set(out, l->a[i]->knob, l->a[i]->text, msg); /* typed at load time */
        int b = budget_slot(l->a[i]->knob);
        if (b >= 0) budgets[b] = 1;
    }
    spec_resolve_budgets(out, budgets);
}

static int validate(const RunConfig *c, char err[ABL_ERR_MAX]) {
    RunConfig v = *c;
    if (v.model.vocab_size == 0) {
        if (v.data.tokenizer == TOK_TOKENS || v.data.tokenizer == TOK_GPT2)
            v.model.vocab_size = v.data.vocab_size > 0 ? v.data.vocab_size : 50257;
        else
            v.model.vocab_size = 256;
    }
    if (run_config_validate(&v, err) != 0) return -1;
    return model_config_validate(&v.model, err);
}

/* Position of knob name in msg as a whole word (full dotted name, or with short_ok the part
 * after the last dot, not itself preceded by a dot), or -1. */
static int mention(const char *msg, const char *name, int short_ok) {
    if (short_ok) {
        const char *dot = strrchr(name, '.');
        if (!dot) return -1;
        name = dot + 1;
    }
    size_t n = strlen(name);
    for (const char *p = strstr(msg, name); p; p = strstr(p + 1, name)) {
        char before = p > msg ? p[-1] : ' ', after = p[n];
        if (isalnum((unsigned char)before) || before == '_' || before == '.') continue;
        if (isalnum((unsigned char)after) || after == '_') continue;
        return (int)(p - msg);
    }
    return -1;
}

/* Of the knobs ks[0..n) (NULL entries skipped), the one the message names first (full names
 * before short names); -1 if none is named. */
static int first_mentioned(const char *msg, const Knob *const *ks, int n) {
    for (int pass = 0; pass < 2; pass++) {
        int best = -1, best_pos = 1 << 30;
        for (int i = 0; i < n; i++) {
            if (!ks[i]) continue;
            int pos = mention(msg, ks[i]->name, pass);
            if (pos >= 0 && pos < best_pos) best = i, best_pos = pos;
        }
        if (best >= 0) return best;
    }
    return -1;
}

static SpecMark fallback_mark(const Spec *s) {
    SpecMark m = {s->path, 1, 1};
    if (s->base_mark.line)
        m = s->base_mark;
    else if (s->data_mark.line)
        m = s->data_mark;
    return m;
}

/* Where to point for an invalid run: an assignment whose removal makes the run valid (the
 * one the message names, else the last); else, if the base alone is invalid, the base key
 * the message names; else the assignment the message names, else the last one. */
static SpecMark blame(const Spec *s, const Layer *l, const char *msg) {
    RunConfig tmp;
    char e2[ABL_ERR_MAX];
    const Knob **ks = calloc((size_t)(l->n > knob_count ? l->n : knob_count) + 1, sizeof *ks);
    int *cand = calloc((size_t)l->n + 1, sizeof *cand);
    SpecMark m = fallback_mark(s);
    if (!ks || !cand) goto out;
    int nc = 0;
    for (int i = 0; i < l->n; i++) {
        resolve(s, l, i, &tmp);
        if (validate(&tmp, e2) == 0) cand[nc++] = i;
    }
    if (nc > 0) {
        for (int i = 0; i < nc; i++)
            ks[i] = l->a[cand[i]]->knob;
        int b = first_mentioned(msg, ks, nc);
        m = l->a[cand[b >= 0 ? b : nc - 1]]->mark;
        goto out;
    }
    Layer none = {NULL, 0, 0};
    resolve(s, &none, -1, &tmp);
    int base_bad = validate(&tmp, e2) != 0;
    if (base_bad) {
        for (int i = 0; i < knob_count; i++)
            ks[i] = s->base_src[i].line > 0 ? &knob_table[i] : NULL;
        int b = first_mentioned(msg, ks, knob_count);
        if (b >= 0) {
            m = s->base_src[b];
            goto out;
        }
    }
    for (int i = 0; i < l->n; i++)
        ks[i] = l->a[i]->knob;
    int b = first_mentioned(msg, ks, l->n);
    if (b >= 0)
        m = l->a[b]->mark;
    else if (!base_bad && l->n > 0)
        m = l->a[l->n - 1]->mark;
out:
    free(ks);
    free(cand);
    return m;
}

/* ---- names ---- */

static void buf_cat(char **buf, size_t *len, size_t *cap, const char *s) {
    size_t n = strlen(s);
    if (!*buf || *len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 64;
        while (c < *len + n + 1)
            c *= 2;
        char *p = realloc(*buf, c);
        if (!p) return; /* caller checks for NULL */
        if (!*buf) p[0] = '\0';
        *buf = p;
        *cap = c;
    }
    memcpy(*buf + *len, s, n + 1);
    *len += n;
}

/* The label of an axis key: the knob's short name unless another axis key shares it. */
static const char *axis_label(const Spec *s, const Knob *k) {
    const char *dot = strrchr(k->name, '.'), *shortn = dot ? dot + 1 : k->name;
    for (int a = 0; a < s->n_axes; a++)
        for (int j = 0; j < s->axes[a].n_keys; j++) {
            const Knob *o = s->axes[a].cells[j].knob;
            const char *od = strrchr(o->name, '.');
            if (o != k && !strcmp(od ? od + 1 : o->name, shortn)) return k->name;
        }
    return shortn;
}

/* "variant/key=value/.../" without the seed part (the caller appends "seed<N>"). */
static char *run_prefix(const Spec *s, int variant, const int *point) {
    char *buf = NULL;
    size_t len = 0, cap = 0;
    buf_cat(&buf, &len, &cap, "");
    if (s->n_variants > 0 || s->n_axes == 0) {
        buf_cat(&buf, &len, &cap, variant >= 0 ? s->variants[variant].name : "baseline");
        buf_cat(&buf, &len, &cap, "/");
    }
    for (int a = 0; a < s->n_axes; a++) {
        const SpecAxis *ax = &s->axes[a];
        for (int j = 0; j < ax->n_keys; j++) {
            const SpecAssign *c = &ax->cells[point[a] * ax->n_keys + j];
            char part[ABL_PATH_MAX + 160];
            snprintf(part, sizeof part, "%s=%s/", axis_label(s, c->knob), c->text);
            for (char *p = strchr(part, '=') + 1; p[1]; p++) /* keep the trailing '/' */
                if (*p == '/' || isspace((unsigned char)*p)) *p = '_';
            buf_cat(&buf, &len, &cap, part);
        }
    }
    return buf;
}

static char *overrides_text(const Layer *l, const RunConfig *c) {
    char *buf = NULL;
    size_t len = 0, cap = 0;
    buf_cat(&buf, &len, &cap, "");
    for (int i = 0; i < l->n; i++) {
        char val[ABL_PATH_MAX + 64];
        knob_format(c, l->a[i]->knob, val, sizeof val);
        if (i) buf_cat(&buf, &len, &cap, " ");
        buf_cat(&buf, &len, &cap, l->a[i]->knob->name);
        buf_cat(&buf, &len, &cap, "=");
        buf_cat(&buf, &len, &cap, val);
    }
    return buf;
}

/* ---- planning ---- */

static int add_layer(Layer *l, const SpecAssign *a) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        const SpecAssign **p = realloc(l->a, (size_t)cap * sizeof *p);
        if (!p) return -1;
        l->a = p;
        l->cap = cap;
    }
    l->a[l->n++] = a;
    return 0;
}

static int excluded(const Spec *s, const RunConfig *c) {
    for (int i = 0; i < s->n_excludes; i++) {
        const SpecExclude *e = &s->excludes[i];
        int all = 1;
        for (int j = 0; j < e->n_assign && all; j++)
            all = knob_equal(c, &e->match, e->assign[j].knob);
        if (all) return 1;
    }
    return 0;
}

/* Where a run's value of knob k came from. */
static SpecMark source_of(const Spec *s, const Layer *l, const Knob *k) {
    for (int i = l->n - 1; i >= 0; i--)
        if (l->a[i]->knob == k) return l->a[i]->mark;
    SpecMark m = s->base_src[k - knob_table];
    return m.line > 0 ? m : fallback_mark(s);
}

static int check_data(const Spec *s, const Layer *l, const RunConfig *c, const char *name,
                      char *ok_path, char err[ABL_ERR_MAX]) {
    if (!strcmp(ok_path, c->data.path)) return 0;
    const Knob *k = knob_find("data.path");
    struct stat st;
    const char *why = NULL;
    if (stat(c->data.path, &st) != 0 || access(c->data.path, R_OK) != 0)
        why = strerror(errno);
    else if (S_ISDIR(st.st_mode))
        why = "it is a directory";
    else if (!S_ISREG(st.st_mode)) /* a FIFO or device would block or never end */
        why = "it is not a regular file";
    if (!why) {
        snprintf(ok_path, ABL_PATH_MAX, "%s", c->data.path);
        return 0;
    }
    int from_run = 0;
    for (int i = 0; i < l->n; i++)
        from_run |= l->a[i]->knob == k;
    if (from_run)
        return spec_fail(err, source_of(s, l, k), "run '%s': data file '%s' is not readable (%s)",
                         name, c->data.path, why);
    return spec_fail(err, source_of(s, l, k), "data file '%s' (data.path) is not readable (%s)",
                     c->data.path, why);
}

static int run_cmp(const void *a, const void *b) {
    const uint64_t *x = a, *y = b; /* {key, index} pairs */
    if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : (x[1] > y[1]);
}

/* The first pair of runs (a < b, smallest b) with the same id (by_name 0) or name (1), by
 * sorting {key, index} pairs: O(n log n) for the largest plans. Returns 0, 1 found, -1 OOM. */
static int first_duplicate(const Plan *p, int by_name, int *a, int *b) {
    uint64_t *pairs = malloc(2 * sizeof *pairs * (size_t)p->n_runs);
    if (!pairs) return -1;
    for (int i = 0; i < p->n_runs; i++) {
        const char *name = p->runs[i].name;
        pairs[2 * i] = by_name ? fnv1a(0xcbf29ce484222325ULL, name, strlen(name))
                               : strtoull(p->runs[i].id, NULL, 16);
        pairs[2 * i + 1] = (uint64_t)i;
    }
    qsort(pairs, (size_t)p->n_runs, 2 * sizeof *pairs, run_cmp);
    *a = *b = -1;
    for (int i = 1, g = 0; i < p->n_runs; i++) { /* g: start of the group of equal keys */
        if (pairs[2 * i] != pairs[2 * g]) {
            g = i;
            continue;
        }
        int y = (int)pairs[2 * i + 1];
        for (int j = g; j < i; j++) { /* names: equal hashes may still differ */
            int x = (int)pairs[2 * j + 1];
            if (by_name && strcmp(p->runs[x].name, p->runs[y].name)) continue;
            if (*b < 0 || y < *b) *a = x, *b = y;
            break;
        }
    }
    free(pairs);
    return *b >= 0;
}

/* Where two runs that should differ part: the variant, else the first axis value. */
static SpecMark parting_mark(const Spec *s, const PlannedRun *ra, const PlannedRun *rb) {
    SpecMark m = s->seeds_mark.line ? s->seeds_mark : fallback_mark(s);
    if (ra->variant != rb->variant && rb->variant >= 0) return s->variants[rb->variant].mark;
    for (int x = 0; x < s->n_axes; x++)
        if (ra->point[x] != rb->point[x])
            return s->axes[x].cells[rb->point[x] * s->axes[x].n_keys].mark;
    return m;
}

static int check_duplicates(const Spec *s, const Plan *p, char err[ABL_ERR_MAX]) {
    if (p->n_runs < 2) return 0;
    int a, b;
    for (int by_name = 0; by_name < 2; by_name++) {
        int found = first_duplicate(p, by_name, &a, &b);
        if (found < 0) return spec_fail(err, fallback_mark(s), "out of memory");
        if (!found) continue;
        const PlannedRun *ra = &p->runs[a], *rb = &p->runs[b];
        if (!by_name)
            return spec_fail(err, parting_mark(s, ra, rb),
                             "runs '%s' and '%s' have the same configuration and seed (id %s); "
                             "remove one of them",
                             ra->name, rb->name, ra->id);
        return spec_fail(err, parting_mark(s, ra, rb),
                         "two runs would be named '%s' (ids %s and %s): a name writes '/' and "
                         "spaces in values as '_'; make the values differ otherwise",
                         ra->name, ra->id, rb->id);
    }
    return 0;
}

/* A run name longer than PLAN_NAME_MAX: blamed on its longest grid value (else the variant). */
static int name_too_long(const Spec *s, const Layer *l, int variant, const char *name,
                         char err[ABL_ERR_MAX]) {
    SpecMark m = variant >= 0 ? s->variants[variant].mark : fallback_mark(s);
    size_t longest = 0;
    for (int i = 0; i < l->n; i++) {
        int on_axis = variant < 0 || i >= s->variants[variant].n_assign;
        if (on_axis && strlen(l->a[i]->text) > longest)
            longest = strlen(l->a[i]->text), m = l->a[i]->mark;
    }
    return spec_fail(err, m, "run name '%.60s...' is %zu bytes, more than %d: shorten this value",
                     name, strlen(name), PLAN_NAME_MAX);
}

int plan_build(const Spec *s, Plan *p, char err[ABL_ERR_MAX]) {
    memset(p, 0, sizeof *p);
    p->spec = s;
    err[0] = '\0';
    int n_var = s->n_variants > 0 ? s->n_variants : 1;
    double total = (double)n_var * s->n_seeds;
    long n_points = 1;
    for (int a = 0; a < s->n_axes; a++) {
        total *= s->axes[a].n_points;
        if (total <= PLAN_MAX_RUNS) n_points *= s->axes[a].n_points;
    }
    if (total > PLAN_MAX_RUNS)
        return spec_fail(err, fallback_mark(s), "the spec plans %.0f runs (more than %d)", total,
                         PLAN_MAX_RUNS);
    int *point = calloc((size_t)s->n_axes + 1, sizeof *point);
    Layer l = {NULL, 0, 0};
    char *ok_path = calloc(ABL_PATH_MAX, 1);
    int cap = 0, rc = -1;
    RunConfig cfg;
    if (!point || !ok_path) {
        spec_fail(err, fallback_mark(s), "out of memory");
        goto out;
    }
    for (int v = 0; v < n_var; v++) {
        int variant = s->n_variants > 0 ? v : -1;
        for (long pt = 0; pt < n_points; pt++) {
            long rem = pt; /* odometer: the last axis moves fastest */
            for (int a = s->n_axes - 1; a >= 0; a--) {
                point[a] = (int)(rem % s->axes[a].n_points);
                rem /= s->axes[a].n_points;
            }
            l.n = 0;
            int oom = 0;
            if (variant >= 0)
                for (int i = 0; i < s->variants[variant].n_assign; i++)
                    oom |= add_layer(&l, &s->variants[variant].assign[i]);
            for (int a = 0; a < s->n_axes; a++)
                for (int j = 0; j < s->axes[a].n_keys; j++)
                    oom |= add_layer(&l, &s->axes[a].cells[point[a] * s->axes[a].n_keys + j]);
            char *prefix = oom ? NULL : run_prefix(s, variant, point);
            if (!prefix) {
                spec_fail(err, fallback_mark(s), "out of memory");
                goto out;
            }
            resolve(s, &l, -1, &cfg);
            if (excluded(s, &cfg)) {
                p->n_excluded++;
                free(prefix);
                continue;
            }
            char msg[ABL_ERR_MAX];
            if (validate(&cfg, msg) != 0) {
                spec_fail(err, blame(s, &l, msg), "run '%sseed%llu': %s", prefix,
                          (unsigned long long)s->seeds[0], msg);
                free(prefix);
                goto out;
            }
            char name0[ABL_PATH_MAX];
            snprintf(name0, sizeof name0, "%sseed%llu", prefix, (unsigned long long)s->seeds[0]);
            if (check_data(s, &l, &cfg, name0, ok_path, err) != 0) {
                free(prefix);
                goto out;
            }
            for (int si = 0; si < s->n_seeds; si++) {
                if (p->n_runs == cap) {
                    int ncap = cap ? 2 * cap : 64;
                    PlannedRun *r = realloc(p->runs, (size_t)ncap * sizeof *r);
                    if (!r) {
                        free(prefix);
                        spec_fail(err, fallback_mark(s), "out of memory");
                        goto out;
                    }
                    p->runs = r;
                    cap = ncap;
                }
                PlannedRun *r = &p->runs[p->n_runs];
                memset(r, 0, sizeof *r);
                p->n_runs++;
                r->index = p->n_runs - 1;
                r->seed = s->seeds[si];
                r->cfg = cfg;
                r->variant = variant;
                plan_run_id(&cfg, r->seed, r->id);
                size_t nlen = strlen(prefix) + 32;
                r->name = malloc(nlen);
                r->overrides = overrides_text(&l, &cfg);
                if (s->n_axes > 0) r->point = malloc((size_t)s->n_axes * sizeof *r->point);
                if (!r->name || !r->overrides || (s->n_axes > 0 && !r->point)) {
                    free(prefix);
                    spec_fail(err, fallback_mark(s), "out of memory");
                    goto out;
                }
                snprintf(r->name, nlen, "%sseed%llu", prefix, (unsigned long long)r->seed);
                if (strlen(r->name) > PLAN_NAME_MAX) {
                    name_too_long(s, &l, variant, r->name, err);
                    free(prefix);
                    goto out;
                }
                if (s->n_axes > 0) memcpy(r->point, point, (size_t)s->n_axes * sizeof *point);
            }
            free(prefix);
        }
    }
    if (p->n_runs == 0) {
        spec_fail(err, s->n_excludes ? s->excludes[0].mark : fallback_mark(s),
                  "the spec plans no runs (grid.exclude drops all %d)", p->n_excluded);
        goto out;
    }
    if (check_duplicates(s, p, err) != 0) goto out;
    rc = 0;
out:
    free(point);
    free(l.a);
    free(ok_path);
    if (rc != 0) plan_free(p);
    return rc;
}

void plan_free(Plan *p) {
    if (!p) return;
    for (int i = 0; i < p->n_runs; i++) {
        free(p->runs[i].name);
        free(p->runs[i].overrides);
        free(p->runs[i].point);
    }
    free(p->runs);
    memset(p, 0, sizeof *p);
}

SpecMark plan_source(const Plan *p, const PlannedRun *r, const Knob *k, int *from_run) {
    const Spec *s = p->spec;
    if (from_run) *from_run = 1;
    for (int a = s->n_axes - 1; a >= 0; a--) /* the planner's order: variant, then axes */
        for (int j = s->axes[a].n_keys - 1; j >= 0; j--) {
            const SpecAssign *c = &s->axes[a].cells[r->point[a] * s->axes[a].n_keys + j];
            if (c->knob == k) return c->mark;
        }
    if (r->variant >= 0)
        for (int i = s->variants[r->variant].n_assign - 1; i >= 0; i--)
            if (s->variants[r->variant].assign[i].knob == k)
                return s->variants[r->variant].assign[i].mark;
    if (from_run) *from_run = 0;
    Layer none = {NULL, 0, 0};
    return source_of(s, &none, k);
}

int plan_find_id(const Plan *p, const char *id) {
    for (int i = 0; i < p->n_runs; i++)
        if (!strcmp(p->runs[i].id, id)) return i;
    return -1;
}
