#include "contrast.h"

#include <stdlib.h>
#include <string.h>

void contrasts_free(Contrasts *c) {
    if (!c) return;
    for (int i = 0; c->config_name && i < c->n_configs; i++)
        free(c->config_name[i]);
    free(c->config_name);
    free(c->config);
    memset(c, 0, sizeof *c);
}

/* Is run r at the spec's baseline: the variant "baseline" (index 0, or -1 implicit) at
 * the baseline grid point? */
static int at_baseline(const Spec *s, const PlannedRun *r) {
    if (r->variant != (s->n_variants > 0 ? 0 : -1)) return 0;
    for (int a = 0; a < s->n_axes; a++)
        if (r->point[a] != s->replicate.baseline_point[a]) return 0;
    return 1;
}

const char *const contrast_split_names[2] = {"validation", "test"};

int contrasts_build(const Plan *p, Contrasts *c, char err[ABL_ERR_MAX]) {
    const Spec *s = p->spec;
    const SpecReplicate *rep = &s->replicate;
    memset(c, 0, sizeof *c);
    c->n_seeds = s->n_seeds;
    c->baseline = -1;
    if (!rep->on || c->n_seeds < 1 || p->n_runs % c->n_seeds != 0)
        return spec_fail(err, rep->mark, "replicate: the plan is not laid out by configuration");
    c->n_configs = p->n_runs / c->n_seeds;
    c->config_name = calloc((size_t)c->n_configs, sizeof *c->config_name);
    c->config = calloc((size_t)c->n_configs, sizeof *c->config);
    if (!c->config_name || !c->config) {
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
        if (at_baseline(s, first)) c->baseline = k;
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
    for (int k = 0; k < c->n_configs; k++)
        if (k != c->baseline) c->config[c->n_contrasts++] = k;
    return 0;
}
