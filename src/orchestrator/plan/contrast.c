#include "contrast.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"

static const char *const kind_names[CONTRAST_KINDS] = {"vs_base", "main", "interaction"};

const char *contrast_kind_name(int kind) {
    return kind >= 0 && kind < CONTRAST_KINDS ? kind_names[kind] : "?";
}

void contrasts_free(Contrasts *c) {
    if (!c) return;
    for (int i = 0; c->config_name && i < c->n_configs; i++)
        free(c->config_name[i]);
    free(c->config_name);
    for (int j = 0; c->list && j < c->n_contrasts; j++) {
        free(c->list[j].label);
        free(c->list[j].base_label);
        free(c->list[j].terms);
    }
    free(c->list);
    for (int f = 0; c->level_name && f < c->n_factors; f++) {
        for (int l = 0; c->level_name[f] && l < c->n_levels[f]; l++)
            free(c->level_name[f][l]);
        free(c->level_name[f]);
    }
    for (int f = 0; c->factor_name && f < c->n_factors; f++)
        free(c->factor_name[f]);
    free(c->factor_name);
    free(c->level_name);
    free(c->n_levels);
    free(c->base_level);
    memset(c, 0, sizeof *c);
}

int contrasts_uses(const Contrasts *c, int j, int config) {
    const Contrast *x = &c->list[j];
    for (int t = 0; t < x->n_groups * x->group_size; t++)
        if (x->terms[t].config == config) return 1;
    return 0;
}

double contrasts_diff(const Contrasts *c, int j, const double *loss) {
    const Contrast *x = &c->list[j];
    double sum = 0;
    for (int g = 0; g < x->n_groups; g++) {
        const ContrastTerm *t = &x->terms[g * x->group_size];
        double in = loss[t[0].config];
        for (int i = 1; i < x->group_size; i++)
            in = t[i].sign > 0 ? in + loss[t[i].config] : in - loss[t[i].config];
        sum += in;
    }
    return sum / x->n_groups;
}

/* Is run r at the spec's baseline: the variant "baseline" (index 0, or -1 implicit) at
 * the baseline grid point? With rung (a run of a ladder), the ladder axis at rung's value
 * instead of the baseline point's: the baseline of rung's model size. */
static int at_baseline(const Spec *s, const PlannedRun *r, const PlannedRun *rung) {
    if (r->variant != (s->n_variants > 0 ? 0 : -1)) return 0;
    for (int a = 0; a < s->n_axes; a++) {
        int want = rung && s->ladder && a == s->ladder_axis ? rung->point[a]
                                                            : s->replicate.baseline_point[a];
        if (r->point[a] != want) return 0;
    }
    return 1;
}

const char *const contrast_split_names[2] = {"validation", "test"};

static char *dup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *dup_printf(const char *fmt, ...) {
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    return strdup(tmp);
}

/* The factors: the grid's axes in file order, then the variants (when there are any). */
static int build_factors(const Spec *s, Contrasts *c) {
    int nf = s->n_axes + (s->n_variants > 0);
    c->n_factors = nf;
    if (nf == 0) return 0;
    if (!(c->factor_name = calloc((size_t)nf, sizeof *c->factor_name)) ||
        !(c->level_name = calloc((size_t)nf, sizeof *c->level_name)) ||
        !(c->n_levels = calloc((size_t)nf, sizeof *c->n_levels)) ||
        !(c->base_level = calloc((size_t)nf, sizeof *c->base_level)))
        return -1;
    for (int f = 0; f < nf; f++) {
        int is_axis = f < s->n_axes;
        const SpecAxis *ax = is_axis ? &s->axes[f] : NULL;
        int n = is_axis ? ax->n_points : s->n_variants;
        c->base_level[f] = is_axis ? s->replicate.baseline_point[f] : 0;
        if (!(c->level_name[f] = calloc((size_t)n, sizeof **c->level_name))) return -1;
        c->n_levels[f] = n;
        if (!is_axis) {
            if (!(c->factor_name[f] = strdup("variant"))) return -1;
            for (int l = 0; l < n; l++)
                if (!(c->level_name[f][l] = strdup(s->variants[l].name))) return -1;
            continue;
        }
        Buf b = {0};
        for (int k = 0; k < ax->n_keys; k++)
            buf_printf(&b, "%s%s", k ? "+" : "", ax->cells[k].knob->name);
        buf_addc(&b, '\0');
        if (b.oom) return buf_free(&b), -1;
        c->factor_name[f] = b.p;
        for (int l = 0; l < n; l++) {
            Buf v = {0};
            for (int k = 0; k < ax->n_keys; k++) {
                /* canonical, as run names and /runs write it (1e-2 is 0.01) */
                const SpecAssign *a = &ax->cells[l * ax->n_keys + k];
                RunConfig cfg;
                char val[256], msg[ABL_ERR_MAX];
                run_config_default(&cfg);
                if (knob_set(&cfg, a->knob, a->text, msg) != 0 ||
                    knob_format(&cfg, a->knob, val, sizeof val) < 0)
                    snprintf(val, sizeof val, "%s", a->text);
                buf_printf(&v, "%s%s", k ? "+" : "", val);
            }
            buf_addc(&v, '\0');
            if (v.oom) return buf_free(&v), -1;
            c->level_name[f][l] = v.p;
        }
    }
    return 0;
}

/* The factorial cell of configuration k's first run: mixed radix over the factors, the
 * first factor slowest. */
static int cell_of(const Spec *s, const Contrasts *c, const PlannedRun *r) {
    int cell = 0;
    for (int f = 0; f < c->n_factors; f++) {
        int l = f < s->n_axes ? r->point[f] : r->variant;
        cell = cell * c->n_levels[f] + l;
    }
    return cell;
}

/* A factorial family needs every cell: the first one missing, named with the exclude that
 * (or one of those that) dropped it. */
static int missing_cell(const Spec *s, const Contrasts *c, int cell, char err[ABL_ERR_MAX]) {
    char what[512] = "";
    size_t len = 0;
    for (int f = c->n_factors - 1, x = cell; f >= 0; f--) {
        int l = x % c->n_levels[f];
        x /= c->n_levels[f];
        char part[256];
        snprintf(part, sizeof part, "%s=%s%s", c->factor_name[f], c->level_name[f][l],
                 len ? " " : "");
        size_t pl = strlen(part);
        if (len + pl + 1 < sizeof what) {
            memmove(what + pl, what, len + 1);
            memcpy(what, part, pl);
            len += pl;
        }
    }
    int line = s->n_excludes ? s->excludes[0].mark.line : 0;
    return spec_fail(err, s->contrasts_mark,
                     "contrasts: %s needs every cell of the factorial, but grid.exclude (line "
                     "%d%s) drops %s; use contrasts: vs_base, or plan every cell",
                     spec_contrasts_name(s->contrasts), line, s->n_excludes > 1 ? " ..." : "",
                     what);
}

/* Adds a contrast of kind kind over factors fa (level la) and fb (level lb, fb -1 for a main
 * effect), from cell_config (configuration per factorial cell). */
static int add_factorial(Contrasts *c, const int *cell_config, int fa, int la, int fb, int lb) {
    Contrast *x = &c->list[c->n_contrasts];
    memset(x, 0, sizeof *x);
    x->kind = fb < 0 ? CONTRAST_MAIN : CONTRAST_INTERACTION;
    x->factor[0] = fa, x->level[0] = la;
    x->factor[1] = fb, x->level[1] = fb < 0 ? -1 : lb;
    x->group_size = fb < 0 ? 2 : 4;
    int others = 1;
    for (int f = 0; f < c->n_factors; f++)
        if (f != fa && f != fb) others *= c->n_levels[f];
    x->n_groups = others;
    if (!(x->terms = calloc((size_t)(others * x->group_size), sizeof *x->terms))) return -1;
    int ba = c->base_level[fa], bb = fb < 0 ? 0 : c->base_level[fb];
    /* the arms of a group: (level on fa, level on fb, sign), in the header's order */
    const int arms[4][3] = {{la, lb, +1}, {la, bb, -1}, {ba, lb, -1}, {ba, bb, +1}};
    const int main_arms[2][3] = {{la, 0, +1}, {ba, 0, -1}};
    int *lv = calloc((size_t)c->n_factors, sizeof *lv);
    if (!lv) return -1;
    for (int g = 0; g < others; g++) {
        /* g in mixed radix over the other factors, the first slowest */
        for (int f = c->n_factors - 1, y = g; f >= 0; f--) {
            if (f == fa || f == fb) continue;
            lv[f] = y % c->n_levels[f];
            y /= c->n_levels[f];
        }
        for (int i = 0; i < x->group_size; i++) {
            const int *arm = fb < 0 ? main_arms[i] : arms[i];
            lv[fa] = arm[0];
            if (fb >= 0) lv[fb] = arm[1];
            int cell = 0;
            for (int f = 0; f < c->n_factors; f++)
                cell = cell * c->n_levels[f] + lv[f];
            x->terms[g * x->group_size + i] = (ContrastTerm){cell_config[cell], arm[2]};
        }
    }
    free(lv);
    if (fb < 0) {
        x->label = dup_printf("%s=%s", c->factor_name[fa], c->level_name[fa][la]);
        x->base_label = dup_printf("%s=%s", c->factor_name[fa], c->level_name[fa][ba]);
    } else {
        x->label = dup_printf("%s=%s x %s=%s", c->factor_name[fa], c->level_name[fa][la],
                              c->factor_name[fb], c->level_name[fb][lb]);
        x->base_label = dup_printf("%s=%s x %s=%s", c->factor_name[fa], c->level_name[fa][ba],
                                   c->factor_name[fb], c->level_name[fb][bb]);
    }
    c->n_contrasts++;
    return x->label && x->base_label ? 0 : -1;
}

/* The factorial family: every cell planned, then the main effects, then (interactions)
 * each pair of factors' non-base levels. */
static int build_factorial(const Plan *p, Contrasts *c, char err[ABL_ERR_MAX]) {
    const Spec *s = p->spec;
    int cells = 1, n = 0;
    for (int f = 0; f < c->n_factors; f++) {
        cells *= c->n_levels[f];
        n += c->n_levels[f] - 1;
    }
    if (s->contrasts == SPEC_CONTRASTS_INTERACTIONS)
        for (int a = 0; a < c->n_factors; a++)
            for (int b = a + 1; b < c->n_factors; b++)
                n += (c->n_levels[a] - 1) * (c->n_levels[b] - 1);
    int *cell_config = malloc(sizeof(int) * (size_t)cells);
    if (!cell_config || !(c->list = calloc((size_t)n + 1, sizeof *c->list))) {
        free(cell_config);
        return spec_fail(err, s->contrasts_mark, "out of memory");
    }
    for (int i = 0; i < cells; i++)
        cell_config[i] = -1;
    for (int k = 0; k < c->n_configs; k++)
        cell_config[cell_of(s, c, &p->runs[contrasts_run(c, k, 0)])] = k;
    for (int i = 0; i < cells; i++)
        if (cell_config[i] < 0) {
            free(cell_config);
            return missing_cell(s, c, i, err);
        }
    int rc = 0;
    for (int f = 0; f < c->n_factors && !rc; f++)
        for (int l = 0; l < c->n_levels[f] && !rc; l++)
            if (l != c->base_level[f]) rc = add_factorial(c, cell_config, f, l, -1, 0);
    if (s->contrasts == SPEC_CONTRASTS_INTERACTIONS)
        for (int a = 0; a < c->n_factors; a++)
            for (int b = a + 1; b < c->n_factors; b++)
                for (int la = 0; la < c->n_levels[a] && !rc; la++)
                    for (int lb = 0; lb < c->n_levels[b] && !rc; lb++)
                        if (la != c->base_level[a] && lb != c->base_level[b])
                            rc = add_factorial(c, cell_config, a, la, b, lb);
    free(cell_config);
    if (rc) return spec_fail(err, s->contrasts_mark, "out of memory");
    if (c->n_contrasts == 0)
        return spec_fail(err, s->contrasts_mark,
                         "contrasts: %s: every factor has a single level, nothing to compare",
                         spec_contrasts_name(s->contrasts));
    return 0;
}

/* The baseline configuration k is compared with: the baseline; on a ladder, the baseline
 * at k's own rung (the baseline variant at replicate.baseline's grid point, the ladder axis
 * at k's value), so that no contrast mixes a model size into an architecture's effect.
 * -1 if that one is not planned (grid.exclude). */
static int baseline_of(const Plan *p, const Contrasts *c, int k) {
    if (!p->spec->ladder) return c->baseline;
    const PlannedRun *me = &p->runs[contrasts_run(c, k, 0)];
    for (int j = 0; j < c->n_configs; j++)
        if (at_baseline(p->spec, &p->runs[contrasts_run(c, j, 0)], me)) return j;
    return -1;
}

/* vs_base: each configuration but the baseline(s), in plan order, minus its baseline
 * (baseline_of). */
static int build_vs_base(const Plan *p, Contrasts *c, char err[ABL_ERR_MAX]) {
    if (!(c->list = calloc((size_t)c->n_configs, sizeof *c->list)))
        return spec_fail(err, p->spec->replicate.mark, "out of memory");
    for (int k = 0; k < c->n_configs; k++) {
        int base = baseline_of(p, c, k);
        if (base < 0)
            return spec_fail(err, p->spec->ladder_mark,
                             "replicate: %s has no baseline at its ladder rung (grid.exclude "
                             "drops it); a ladder's contrasts pair each rung with its own "
                             "baseline",
                             c->config_name[k]);
        if (k == base) continue;
        Contrast *x = &c->list[c->n_contrasts++];
        x->kind = CONTRAST_VS_BASE;
        x->factor[0] = x->factor[1] = x->level[0] = x->level[1] = -1;
        x->n_groups = 1;
        x->group_size = 2;
        if (!(x->terms = calloc(2, sizeof *x->terms)) || !(x->label = strdup(c->config_name[k])) ||
            !(x->base_label = strdup(c->config_name[base])))
            return spec_fail(err, p->spec->replicate.mark, "out of memory");
        x->terms[0] = (ContrastTerm){k, +1};
        x->terms[1] = (ContrastTerm){base, -1};
    }
    return 0;
}

int contrasts_build(const Plan *p, Contrasts *c, char err[ABL_ERR_MAX]) {
    const Spec *s = p->spec;
    const SpecReplicate *rep = &s->replicate;
    memset(c, 0, sizeof *c);
    c->family = s->contrasts;
    c->n_seeds = s->n_seeds;
    c->per = plan_runs_per_config(s);
    c->first = c->per - c->n_seeds;
    c->baseline = -1;
    if (!rep->on || c->n_seeds < 1 || p->n_runs % c->per != 0)
        return spec_fail(err, rep->mark, "replicate: the plan is not laid out by configuration");
    c->n_configs = p->n_runs / c->per;
    c->config_name = calloc((size_t)c->n_configs, sizeof *c->config_name);
    if (!c->config_name) {
        contrasts_free(c);
        return spec_fail(err, rep->mark, "out of memory");
    }
    for (int k = 0; k < c->n_configs; k++) {
        const PlannedRun *first = &p->runs[contrasts_run(c, k, 0)];
        /* every seed index k of a configuration is seed k (spec.c plans seeds 0..max-1) */
        for (int i = 0; i < c->n_seeds; i++) {
            const PlannedRun *r = &p->runs[contrasts_run(c, k, i)];
            if (r->seed != (uint64_t)i || r->variant != first->variant ||
                (s->n_axes && memcmp(r->point, first->point, sizeof(int) * (size_t)s->n_axes))) {
                contrasts_free(c);
                return spec_fail(err, rep->mark,
                                 "replicate: the plan is not laid out by configuration");
            }
        }
        size_t len = strlen(first->name);
        const char *seed = strrchr(first->name, '/');
        len = seed ? (size_t)(seed - first->name) : 0;
        if (!(c->config_name[k] = len ? strndup(first->name, len) : strdup("baseline"))) {
            contrasts_free(c);
            return spec_fail(err, rep->mark, "out of memory");
        }
        if (at_baseline(s, first, NULL)) c->baseline = k;
    }
    if (c->baseline < 0) {
        SpecMark m = rep->baseline_mark.line ? rep->baseline_mark : rep->mark;
        contrasts_free(c);
        return spec_fail(err, m,
                         "replicate.baseline: that configuration is excluded by grid.exclude; "
                         "name one that is planned");
    }
    int tested = 0;
    for (int i = 0; i < p->n_runs; i++)
        tested += p->runs[i].cfg.data.test_fraction > 0;
    if (tested && tested != p->n_runs) {
        contrasts_free(c);
        return spec_fail(err, rep->mark,
                         "replicate: data.test_fraction is 0 in some configurations and not in "
                         "others; the verdicts are on the test split when there is one, so give "
                         "every configuration the same data.test_fraction");
    }
    c->split = tested ? CONTRAST_SPLIT_TEST : CONTRAST_SPLIT_VAL;
    if (build_factors(s, c) != 0) {
        contrasts_free(c);
        return spec_fail(err, rep->mark, "out of memory");
    }
    int rc = 0;
    if (c->family == SPEC_CONTRASTS_VS_BASE) {
        rc = build_vs_base(p, c, err);
    } else {
        rc = build_factorial(p, c, err);
    }
    if (rc != 0) contrasts_free(c);
    return rc;
}
