#include "out_guard.h"

#include <stdio.h>
#include <string.h>

#include "orchestrator/record/journal.h"
#include "util/fsutil.h"

/* input against each output: OUT.h5 itself, and OUT.h5.d/ with everything in it (the
 * journal, checkpoints, the view's segments) */
static int collides(const char *out, const char *dir, const char *input, const char *what,
                    char err[ABL_ERR_MAX]) {
    const char *hit = fs_within(input, out) ? out : fs_within(input, dir) ? dir : NULL;
    if (!hit) return 0;
    snprintf(err, ABL_ERR_MAX,
             "-o %s: %s %s is %s %s, which this sweep writes and --force removes; choose "
             "another output file",
             out, what, input, hit == out ? "the same file as" : "inside", hit);
    return -1;
}

int out_guard_check(const char *out_path, const char *spec_path, const Plan *p,
                    char err[ABL_ERR_MAX]) {
    char dir[ABL_PATH_MAX];
    if (journal_dir_for(out_path, dir, sizeof dir) != 0) {
        snprintf(err, ABL_ERR_MAX, "%s: output path too long", out_path);
        return -1;
    }
    if (collides(out_path, dir, spec_path, "the spec", err) != 0) return -1;
    for (int i = 0; i < p->n_runs; i++) {
        const char *data = p->runs[i].cfg.data.path;
        int seen = 0; /* usually one data file for every run: check each path once */
        for (int k = 0; k < i && !seen; k++)
            seen = !strcmp(p->runs[k].cfg.data.path, data);
        if (!seen && collides(out_path, dir, data, "the data file (data.path)", err) != 0)
            return -1;
    }
    return 0;
}
