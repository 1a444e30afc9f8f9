#include "join_ledger.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/record/joined_view.h"
#include "orchestrator/record/journal.h"
#include "orchestrator/record/journal_replicate.h"
#include "util/buf.h"
#include "util/grow.h"

/* join/replicate of out_path into b: 1 read, 0 none yet, -1 unreadable. */
static int read_rule(const char *out_path, Buf *b) {
    char dir[ABL_PATH_MAX], path[ABL_PATH_MAX + 32];
    if (journal_dir_for(out_path, dir, sizeof dir) != 0) return -1;
    snprintf(path, sizeof path, "%s/join/replicate", dir);
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char chunk[4096];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0)
        buf_add(b, chunk, got);
    fclose(f);
    buf_addc(b, '\0');
    return b->oom ? -1 : 1;
}

/* The first line where the texts differ: its start in each (lines end at '\n'). */
static void first_diff(const char *a, const char *b, const char **la, const char **lb) {
    const char *sa = a, *sb = b;
    while (*a && *a == *b) {
        if (*a == '\n') sa = a + 1, sb = b + 1;
        a++, b++;
    }
    *la = sa, *lb = sb;
}

/* The spec key a rule line stands for, and where this process's spec has it. */
static const char *key_of(const char *line, const Spec *s, SpecMark *at) {
    const SpecReplicate *r = &s->replicate;
    *at = r->mark;
    if (!strncmp(line, "alpha ", 6)) return *at = r->alpha_mark, "replicate.alpha";
    if (!strncmp(line, "resolve ", 8)) return *at = r->delta_mark, "replicate.resolve";
    if (!strncmp(line, "seeds ", 6)) return *at = s->seeds_mark, "replicate.seeds";
    if (!strncmp(line, "looks", 5)) return *at = r->looks_mark, "replicate.looks";
    if (!strncmp(line, "budget_core_hours ", 18)) return "replicate.budget";
    if (!strncmp(line, "baseline ", 9)) {
        if (r->baseline_mark.line) *at = r->baseline_mark;
        return "replicate.baseline";
    }
    return "replicate";
}

/* The decisions of every journal of the joined sweep, each once (every process journals
 * the decisions it makes, all from the same results: keyed by contrast, look and whether it
 * is the budget's end, as the view does). -1 when a journal list cannot be had. */
static int ledger(const char *out_path, double *spent, int *looks) {
    char **paths, err[ABL_ERR_MAX];
    int n;
    *spent = 0, *looks = 0;
    if (join_list_journals(out_path, &paths, &n, err) != 0) return -1;
    JournalDecision *d = NULL;
    size_t nd = 0, cap = 0;
    int rc = 0;
    for (int k = 0; k < n && rc == 0; k++) {
        JournalReader *r = journal_reader_open(paths[k], err);
        JournalRecord rec;
        JournalDecision x;
        while (r && journal_reader_next(r, &rec) == 1) {
            if (rec.type != JREC_DECISION || journal_decode_decision(&rec, &x) != 0) continue;
            int budget = !strcmp(x.note, "budget"), seen = 0;
            for (size_t i = 0; i < nd && !seen; i++)
                seen = d[i].contrast == x.contrast && d[i].look == x.look &&
                       budget == !strcmp(d[i].note, "budget");
            if (seen) continue;
            if (GROW(d, cap, nd + 1) != 0) {
                rc = -1;
                break;
            }
            d[nd++] = x;
        }
        if (r) journal_reader_close(r);
    }
    if (rc == 0) *spent = journal_alpha_spent(d, (int)nd, looks);
    free(d);
    join_free_list(paths, n);
    return rc;
}

int join_ledger_check(const char *out_path, const Spec *spec, const char *rule,
                      char err[ABL_ERR_MAX]) {
    const char *mine = rule ? rule : "none\n";
    Buf theirs = {0};
    int got = read_rule(out_path, &theirs);
    if (got <= 0 || !strcmp(theirs.p, mine)) {
        buf_free(&theirs);
        return 0; /* none yet, the same, or unreadable: join.c's check decides */
    }
    const char *lt, *lm;
    first_diff(theirs.p, mine, &lt, &lm);
    int nt = (int)strcspn(lt, "\n"), nm = (int)strcspn(lm, "\n");
    if (!strncmp(lt, "tune ", 5) || !strncmp(lm, "tune ", 5)) {
        /* a tune: sweep's rungs (tune.c): no ledger to account, only the cut to agree on
         * (with replicate: the rule's lines follow, and a difference there is the rule's) */
        spec_fail(err, spec->tune.on ? spec->tune.mark : spec->seeds_mark,
                  "tune: cannot join %s: this sweep was joined with %s ('%.*s' there, '%.*s' "
                  "here); every joined process must use the same spec and --set values",
                  out_path,
                  spec->tune.on ? "other successive-halving rungs (tune.eta, tune.first_rung)"
                                : "a tune: section",
                  nt > 80 ? 80 : nt, lt, nm > 80 ? 80 : nm, lm);
        buf_free(&theirs);
        return -1;
    }
    double alpha = NAN, spent = 0;
    int looks = 0;
    const char *a = strstr(theirs.p, "alpha ");
    if (a && (a == theirs.p || a[-1] == '\n')) alpha = strtod(a + 6, NULL);
    /* a tune: sweep's text has its rungs' line first: the rule, if any, follows */
    const char *rule_there = theirs.p;
    if (!strncmp(rule_there, "tune ", 5)) {
        const char *nl = strchr(rule_there, '\n');
        rule_there = nl ? nl + 1 : rule_there + strlen(rule_there);
    }
    int none_there = !strcmp(rule_there, "none\n") || !*rule_there;
    char what[200];
    if (none_there)
        snprintf(what, sizeof what,
                 "it has none: its runs were planned by seeds: and may have been looked at with "
                 "no rule, so no alpha can be accounted for them");
    else if (ledger(out_path, &spent, &looks) == 0)
        snprintf(what, sizeof what,
                 "'%.*s' there, '%.*s' here; its rule has spent %.4g of alpha %g in %d look%s "
                 "(the alpha ledger)",
                 nt > 60 ? 60 : nt, lt, nm > 60 ? 60 : nm, lm, spent, alpha, looks,
                 looks == 1 ? "" : "s");
    else
        snprintf(what, sizeof what, "'%.*s' there, '%.*s' here", nt > 60 ? 60 : nt, lt,
                 nm > 60 ? 60 : nm, lm);
    SpecMark at;
    const char *key = !rule || !spec->replicate.on ? (at = spec->seeds_mark, "seeds")
                      : none_there                 ? (at = spec->replicate.mark, "replicate")
                                                   : key_of(lm, spec, &at);
    spec_fail(err, at,
              "%s: cannot join %s: this sweep was joined with a different replicate: section "
              "(%s); every joined process must use the same spec and --set values",
              key, out_path, what);
    buf_free(&theirs);
    return -1;
}
