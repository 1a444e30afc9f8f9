#include "plan.h"
#include "contrast.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "id_index.h"
#include "run_id.h"
#include "spec_tune.h"
#include "util/buf.h"
#include "util/grow.h"

/* ---- ids ---- */

int plan_runs_per_config(const Spec *s) {
    return s->n_seeds + (s->tune.on ? s->tune.n_candidates * s->tune.n_seeds : 0);
}

uint64_t plan_run_hash(const RunConfig *c, uint64_t seed) {
    return run_id_hash(c, &seed);
}

void plan_run_id(const RunConfig *c, uint64_t seed, char id[RUN_ID_CHARS]) {
    run_id_format(plan_run_hash(c, seed), id);
}

/* ---- resolving and validating one run ---- */

/* The run-specific assignments: the variant's entries, then one cell per axis key. */
typedef struct {
    const SpecAssign **a;
    int n;
    size_t cap;
} Layer;

/* base + every assignment except `skip` (-1 = none), then the budget rule. */
static void resolve(const Spec *s, const Layer *l, int skip, RunConfig *out) {
    *out = s->base;
    int budgets[SPEC_BUDGETS] = {0};
    for (int i = 0; i < knob_count; i++) {
        int b = spec_budget_index(&knob_table[i]);
        if (b >= 0 && s->base_src[i].line > 0) budgets[b] = 1;
    }
    for (int i = 0; i < l->n; i++) {
        if (i == skip) continue;
        char msg[ABL_ERR_MAX];
        knob_set(out, l->a[i]->knob, l->a[i]->text, msg); /* typed at load time */
        int b = spec_budget_index(l->a[i]->knob);
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

/* The built string, or NULL (and nothing kept) if an add ran out of memory. */
static char *buf_string(Buf *b) {
    if (!b->oom) return b->p;
    buf_free(b);
    return NULL;
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
    Buf b = {0};
    buf_adds(&b, "");
    if (s->n_variants > 0 || s->n_axes == 0) {
        buf_adds(&b, variant >= 0 ? s->variants[variant].name : "baseline");
        buf_adds(&b, "/");
    }
    for (int a = 0; a < s->n_axes; a++) {
        const SpecAxis *ax = &s->axes[a];
        for (int j = 0; j < ax->n_keys; j++) {
            const SpecAssign *c = &ax->cells[point[a] * ax->n_keys + j];
            char part[ABL_PATH_MAX + 160];
            snprintf(part, sizeof part, "%s=%s/", axis_label(s, c->knob), c->text);
            for (char *p = strchr(part, '=') + 1; p[1]; p++) /* keep the trailing '/' */
                if (*p == '/' || isspace((unsigned char)*p)) *p = '_';
            buf_adds(&b, part);
        }
    }
    return buf_string(&b);
}

static char *overrides_text(const Layer *l, const RunConfig *c) {
    Buf b = {0};
    buf_adds(&b, "");
    for (int i = 0; i < l->n; i++) {
        char val[ABL_PATH_MAX + 64];
        knob_format(c, l->a[i]->knob, val, sizeof val);
        if (i) buf_adds(&b, " ");
        buf_adds(&b, l->a[i]->knob->name);
        buf_adds(&b, "=");
        buf_adds(&b, val);
    }
    return buf_string(&b);
}

/* ---- planning ---- */

static int add_layer(Layer *l, const SpecAssign *a) {
    if (GROW(l->a, l->cap, (size_t)l->n + 1) != 0) return -1;
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
        pairs[2 * i] =
            by_name ? fnv1a(FNV1A_BASIS, name, strlen(name)) : strtoull(p->runs[i].id, NULL, 16);
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

/* The (variant, grid point) combinations grid.exclude keeps, visited depth first (the last
 * axis moving fastest, as the run order) without ever holding the whole product: an exclude
 * entry is tested as soon as every knob it names is fixed (deep: the last axis that sets
 * one; a budget knob depends on every budget axis), and a match drops the whole subtree.
 * So the run limit applies after exclusion, and a grid of millions of points that
 * excludes down to a few runs is planned in about the time of those runs. */
typedef struct Walk Walk;
struct Walk {
    const Spec *s;
    Plan *p;
    int variant;
    int *point, *deep; /* point: per axis; deep: per exclude entry */
    Layer l;
    long long kept, visited;
    long long max_runs; /* plan_max_runs() */
    size_t cap;         /* of p->runs */
    int (*leaf)(Walk *w, char err[ABL_ERR_MAX]);
    char *ok_path;
    int configs; /* configurations built so far (PlannedRun.config) */
};

/* Nodes a walk may visit: bounds the time of a grid whose exclusions prune late. */
#define PLAN_VISITS_PER_RUN 100LL

long long plan_max_runs(char err[ABL_ERR_MAX]) {
    const char *v = getenv("ABLATE_MAX_RUNS");
    if (!v || !v[0]) return PLAN_MAX_RUNS_DEFAULT;
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (errno || *end || n < 1 || n > PLAN_MAX_RUNS_CEILING) {
        snprintf(err, ABL_ERR_MAX,
                 "ABLATE_MAX_RUNS='%s': the most runs a spec may plan must be an integer from 1 "
                 "to %d",
                 v, PLAN_MAX_RUNS_CEILING);
        return -1;
    }
    return n;
}

static int exclude_depth(const Spec *s, const SpecExclude *e) {
    int deep = -1;
    for (int a = 0; a < s->n_axes; a++)
        for (int j = 0; j < s->axes[a].n_keys; j++) {
            const Knob *k = s->axes[a].cells[j].knob;
            for (int i = 0; i < e->n_assign; i++)
                if (e->assign[i].knob == k ||
                    (spec_is_budget(k) && spec_is_budget(e->assign[i].knob)))
                    deep = a;
        }
    return deep;
}

/* Whether an entry decided at this depth drops the partial point. */
static int pruned(const Walk *w, int depth) {
    const Spec *s = w->s;
    int any = 0;
    for (int i = 0; i < s->n_excludes && !any; i++)
        any = w->deep[i] == depth;
    if (!any) return 0;
    RunConfig cfg;
    resolve(s, &w->l, -1, &cfg);
    for (int i = 0; i < s->n_excludes; i++) {
        const SpecExclude *e = &s->excludes[i];
        if (w->deep[i] != depth) continue;
        int all = 1;
        for (int j = 0; j < e->n_assign && all; j++)
            all = knob_equal(&cfg, &e->match, e->assign[j].knob);
        if (all) return 1;
    }
    return 0;
}

static void add_excluded(Walk *w, int from_axis) {
    double n = 1;
    for (int a = from_axis; a < w->s->n_axes; a++)
        n *= w->s->axes[a].n_points;
    double t = (double)w->p->n_excluded + n;
    w->p->n_excluded = t > INT_MAX ? INT_MAX : (int)t;
}

static int walk(Walk *w, int a, char err[ABL_ERR_MAX]) {
    const Spec *s = w->s;
    if (++w->visited > PLAN_VISITS_PER_RUN * w->max_runs)
        return spec_fail(err, fallback_mark(s),
                         "the grid has too many points to plan (more than %lld examined); "
                         "make it smaller or exclude with fewer, earlier axes",
                         PLAN_VISITS_PER_RUN * w->max_runs);
    if (a == s->n_axes) {
        w->kept++;
        return w->leaf(w, err);
    }
    int n0 = w->l.n;
    for (int v = 0; v < s->axes[a].n_points; v++) {
        w->l.n = n0;
        w->point[a] = v;
        for (int j = 0; j < s->axes[a].n_keys; j++)
            if (add_layer(&w->l, &s->axes[a].cells[v * s->axes[a].n_keys + j]) != 0)
                return spec_fail(err, fallback_mark(s), "out of memory");
        if (pruned(w, a)) {
            add_excluded(w, a + 1);
            continue;
        }
        if (walk(w, a + 1, err) != 0) return -1;
    }
    w->l.n = n0;
    return 0;
}

/* Walks every variant; 0, or -1 with err set. */
static int walk_all(Walk *w, char err[ABL_ERR_MAX]) {
    const Spec *s = w->s;
    int n_var = s->n_variants > 0 ? s->n_variants : 1;
    for (int v = 0; v < n_var; v++) {
        w->variant = s->n_variants > 0 ? v : -1;
        w->l.n = 0;
        if (w->variant >= 0)
            for (int i = 0; i < s->variants[w->variant].n_assign; i++)
                if (add_layer(&w->l, &s->variants[w->variant].assign[i]) != 0)
                    return spec_fail(err, fallback_mark(s), "out of memory");
        if (pruned(w, -1)) {
            add_excluded(w, 0);
            continue;
        }
        if (walk(w, 0, err) != 0) return -1;
    }
    return 0;
}

/* The count pass: stops as soon as the kept points' runs pass the limit. */
static int count_leaf(Walk *w, char err[ABL_ERR_MAX]) {
    if (w->kept * plan_runs_per_config(w->s) <= w->max_runs) return 0;
    return spec_fail(err, fallback_mark(w->s),
                     "the spec plans more than %lld runs after grid.exclude, the limit: set "
                     "ABLATE_MAX_RUNS to more to allow them (up to %d)",
                     w->max_runs, PLAN_MAX_RUNS_CEILING);
}

/* One planned run of the current point: name prefix + mid + "seed<N>". */
static int add_run(Walk *w, const char *prefix, const char *mid, const RunConfig *cfg,
                   uint64_t seed, const char id[RUN_ID_CHARS], int tune_candidate,
                   char err[ABL_ERR_MAX]) {
    const Spec *s = w->s;
    Plan *p = w->p;
    if (GROW(p->runs, w->cap, (size_t)p->n_runs + 1) != 0)
        return spec_fail(err, fallback_mark(s), "out of memory");
    PlannedRun *r = &p->runs[p->n_runs];
    memset(r, 0, sizeof *r);
    p->n_runs++;
    r->index = p->n_runs - 1;
    r->seed = seed;
    r->cfg = *cfg;
    r->variant = w->variant;
    r->config = w->configs;
    r->tune_candidate = tune_candidate;
    memcpy(r->id, id, RUN_ID_CHARS);
    size_t nlen = strlen(prefix) + strlen(mid) + 32;
    r->name = malloc(nlen);
    r->overrides = overrides_text(&w->l, cfg);
    if (s->n_axes > 0) r->point = malloc((size_t)s->n_axes * sizeof *r->point);
    if (!r->name || !r->overrides || (s->n_axes > 0 && !r->point))
        return spec_fail(err, fallback_mark(s), "out of memory");
    snprintf(r->name, nlen, "%s%sseed%llu", prefix, mid, (unsigned long long)seed);
    if (strlen(r->name) > PLAN_NAME_MAX) return name_too_long(s, &w->l, w->variant, r->name, err);
    if (s->n_axes > 0) memcpy(r->point, w->point, (size_t)s->n_axes * sizeof *w->point);
    return 0;
}

/* A tune: sweep's tuning runs of the current point: every candidate at every tuning seed,
 * named "<prefix>tune/<knob>=<value>/.../seed<N>", ids as any run's (they train what they
 * say). */
static int add_tuning_runs(Walk *w, const char *prefix, const RunConfig *cfg,
                           char err[ABL_ERR_MAX]) {
    const Spec *s = w->s;
    const SpecTune *t = &s->tune;
    for (int c = 0; c < t->n_candidates; c++) {
        RunConfig tc = *cfg;
        spec_tune_apply(t, c, &tc);
        char msg[ABL_ERR_MAX];
        if (validate(&tc, msg) != 0) {
            SpecMark m = t->values[0][spec_tune_value(t, c, 0)].mark;
            for (int k = 0; k < t->n_knobs; k++)
                if (mention(msg, t->knobs[k]->name, 0) >= 0 ||
                    mention(msg, t->knobs[k]->name, 1) >= 0)
                    m = t->values[k][spec_tune_value(t, c, k)].mark;
            return spec_fail(err, m, "tuning run '%stune/...': %s", prefix, msg);
        }
        Buf mid = {0};
        buf_adds(&mid, "tune/");
        for (int k = 0; k < t->n_knobs; k++) {
            char part[ABL_PATH_MAX + 160];
            const char *dot = strrchr(t->knobs[k]->name, '.');
            snprintf(part, sizeof part, "%s=%s/", dot ? dot + 1 : t->knobs[k]->name,
                     t->values[k][spec_tune_value(t, c, k)].text);
            for (char *q = strchr(part, '=') + 1; q[1]; q++)
                if (*q == '/' || isspace((unsigned char)*q)) *q = '_';
            buf_adds(&mid, part);
        }
        char *mids = buf_string(&mid);
        if (!mids) return spec_fail(err, fallback_mark(s), "out of memory");
        for (int si = 0; si < t->n_seeds; si++) {
            char id[RUN_ID_CHARS];
            plan_run_id(&tc, t->seeds[si], id);
            if (add_run(w, prefix, mids, &tc, t->seeds[si], id, c, err) != 0) {
                free(mids);
                return -1;
            }
        }
        free(mids);
    }
    return 0;
}

/* The build pass: one planned run per seed of a kept point (after its tuning runs in a
 * tune: sweep). */
static int build_leaf(Walk *w, char err[ABL_ERR_MAX]) {
    const Spec *s = w->s;
    Plan *p = w->p;
    Layer l = w->l;
    int variant = w->variant, *point = w->point;
    char *ok_path = w->ok_path;
    RunConfig cfg;
    char *prefix = run_prefix(s, variant, point);
    if (!prefix) return spec_fail(err, fallback_mark(s), "out of memory");
    resolve(s, &l, -1, &cfg);
    if (excluded(s, &cfg)) { /* decided by the walk already; kept as the definition */
        p->n_excluded++;
        free(prefix);
        return 0;
    }
    char msg[ABL_ERR_MAX];
    if (validate(&cfg, msg) != 0) {
        spec_fail(err, blame(s, &l, msg), "run '%sseed%llu': %s", prefix,
                  (unsigned long long)s->seeds[0], msg);
        free(prefix);
        return -1;
    }
    char name0[ABL_PATH_MAX];
    snprintf(name0, sizeof name0, "%sseed%llu", prefix, (unsigned long long)s->seeds[0]);
    if (check_data(s, &l, &cfg, name0, ok_path, err) != 0) {
        free(prefix);
        return -1;
    }
    if (s->tune.on && add_tuning_runs(w, prefix, &cfg, err) != 0) {
        free(prefix);
        return -1;
    }
    for (int si = 0; si < s->n_seeds; si++) {
        char id[RUN_ID_CHARS];
        if (s->tune.on) /* the tuned knobs' values are chosen later: the id says "tuned" */
            run_id_format(run_id_hash_tuned(&cfg, s->tune.knobs, s->tune.n_knobs, &s->seeds[si]),
                          id);
        else
            plan_run_id(&cfg, s->seeds[si], id);
        if (add_run(w, prefix, "", &cfg, s->seeds[si], id, -1, err) != 0) {
            free(prefix);
            return -1;
        }
    }
    w->configs++;
    free(prefix);
    return 0;
}

int plan_build(const Spec *s, Plan *p, char err[ABL_ERR_MAX]) {
    memset(p, 0, sizeof *p);
    p->spec = s;
    err[0] = '\0';
    int n_var = s->n_variants > 0 ? s->n_variants : 1;
    double total = (double)n_var * plan_runs_per_config(s);
    for (int a = 0; a < s->n_axes; a++)
        total *= s->axes[a].n_points;
    long long max_runs = plan_max_runs(err);
    if (max_runs < 0) return -1; /* not the spec's fault: the message names the variable */
    if (total > max_runs && s->n_excludes == 0)
        return spec_fail(err, fallback_mark(s),
                         "the spec plans %.0f runs, more than the limit of %lld: set "
                         "ABLATE_MAX_RUNS=%.0f to allow them (up to %d)",
                         total, max_runs, total, PLAN_MAX_RUNS_CEILING);
    Walk w = {.s = s, .p = p, .max_runs = max_runs};
    w.point = calloc((size_t)s->n_axes + 1, sizeof *w.point);
    w.deep = calloc((size_t)s->n_excludes + 1, sizeof *w.deep);
    w.ok_path = calloc(ABL_PATH_MAX, 1);
    int rc = -1;
    if (!w.point || !w.deep || !w.ok_path) {
        spec_fail(err, fallback_mark(s), "out of memory");
        goto out;
    }
    for (int i = 0; i < s->n_excludes; i++)
        w.deep[i] = exclude_depth(s, &s->excludes[i]);
    if (total > max_runs) { /* count what exclusion keeps before building anything */
        w.leaf = count_leaf;
        if (walk_all(&w, err) != 0) goto out;
        p->n_excluded = 0;
        w.kept = w.visited = 0;
    }
    w.leaf = build_leaf;
    if (walk_all(&w, err) != 0) goto out;
    if (p->n_runs == 0) {
        spec_fail(err, s->n_excludes ? s->excludes[0].mark : fallback_mark(s),
                  "the spec plans no runs (grid.exclude drops all %d)", p->n_excluded);
        goto out;
    }
    if (check_duplicates(s, p, err) != 0) goto out;
    if (s->replicate.on) { /* the baseline must be planned (contrast.h) */
        Contrasts c;
        if (contrasts_build(p, &c, err) != 0) goto out;
        contrasts_free(&c);
    }
    rc = 0;
out:
    free(w.point);
    free(w.deep);
    free(w.l.a);
    free(w.ok_path);
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
        if (!strcmp(p->runs[i].id, id)) return id_index_count_compares(i + 1), i;
    id_index_count_compares(p->n_runs); /* counted: a search per run is what tests catch */
    return -1;
}
