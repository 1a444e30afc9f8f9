/* ablate view OUT.h5: rebuild the view from the journal, without training. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/log.h"
#include "commands.h"
#include "orchestrator/record/h5view.h"
#include "orchestrator/record/joined_view.h"
#include "orchestrator/record/journal.h"

static void view_usage(FILE *f) {
    fprintf(f, "usage: ablate view OUT.h5\n\n"
               "Rebuilds OUT.h5 from its journal (OUT.h5.d/journal, or every process's journal\n"
               "of a sweep run with --join) without training: after a\n"
               "sweep stopped abnormally (its runs in progress then show as interrupted), after\n"
               "a view could not be written (a full disk), or to see a running sweep's latest\n"
               "rows now. Safe while the sweep runs; it takes no lock and refuses nothing.\n"
               "It checks every record's CRC: damaged bytes between records that no --resume\n"
               "has handled are reported (a line each, with the runs they may have held) and\n"
               "the file's status reads \"damaged\"; `ablate run SPEC -o OUT.h5 --resume`\n"
               "saves those bytes and trains the runs again.\n"
               "Exit status: 0 written, 1 the journal cannot be read or the file written,\n"
               "2 usage, 3 written, but the journal is damaged (the view may lack or misstate\n"
               "the runs named).\n");
}

static int report(const char *out, const H5ViewStats *st);

int cmd_view(int argc, char **argv) {
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            view_usage(stdout);
            return 0;
        }
        if (argv[i][0] == '-' || out) {
            log_cmd("unexpected argument '%s' (see --help)", argv[i]);
            return 2;
        }
        out = argv[i];
    }
    if (!out || !out[0]) {
        log_cmd("no file given (see --help)");
        return 2;
    }
    char journal[ABL_PATH_MAX], err[ABL_ERR_MAX];
    H5ViewStats st;
    if (join_exists(out)) { /* a joined sweep: every process's journal */
        if (join_build_view(out, NULL, UINT64_MAX, 0, &st, err) != 0) {
            log_cmd("%s", err);
            return 1;
        }
        return report(out, &st);
    }
    if (journal_path_for(out, journal, sizeof journal) != 0) {
        log_cmd("%s: path too long", out);
        return 2;
    }
    if (access(journal, R_OK) != 0) {
        log_cmd("%s has no journal %s to build it from", out, journal);
        return 1;
    }
    if (h5view_build_stats(journal, out, &st, err) != 0) {
        log_cmd("%s", err);
        return 1;
    }
    /* the live view's segments, once no sweep is writing (a running one still uses them) */
    int lock = journal_lock_existing(journal, err);
    if (lock >= 0) {
        h5live_remove_segments(out);
        close(lock);
    }
    return report(out, &st);
}

static int report(const char *out, const H5ViewStats *st) {
    log_cmd("%s: %ld runs (%ld done), %lld step rows, from %llu journal bytes "
            "in %.2f s",
            out, st->runs, st->runs_done, st->steps, (unsigned long long)st->journal_bytes,
            st->seconds);
    if (!st->damaged_regions) return 0;
    /* the SLURM finish job runs view before the report: damage must stop it, said */
    log_cmd("%s: the journal has %ld damaged region%s (%llu bytes) that no --resume has "
            "handled; the view may lack or misstate the runs named; `ablate run SPEC -o %s "
            "--resume` saves the bytes and trains them again:",
            out, st->damaged_regions, st->damaged_regions == 1 ? "" : "s", st->damaged_bytes, out);
    for (const char *p = st->damage; *p;) {
        const char *nl = strchr(p, '\n');
        int n = nl ? (int)(nl - p) : (int)strlen(p);
        log_cmd("%s: damaged %.*s", out, n, p);
        p += n + (nl != NULL);
    }
    return 3;
}
