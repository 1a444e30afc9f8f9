/* join_claims: what claiming costs when processes joined on one sweep (`ablate run --join`)
 * compete for its runs (issue "Clusters", Bench).
 *
 *   join_claims DIR [-n RUNS] [-p PROCS] [-r REPS] [-t SHARE]
 *
 * A synthetic plan of RUNS runs (20,000; ids and names are all join.c reads of a plan) is
 * claimed on a fresh OUT.h5.d/join/ under DIR by PROCS separate processes (16; fork()ed
 * before any Join exists, each with its own join_open, its own flock'd journal and its own
 * name), started together behind a barrier. Each walks the runs as joined.c's j_take()
 * does (plan order, which is most expensive first when costs are equal; a run BUSY
 * elsewhere is looked at again after 1 s; with nothing claimable, it heartbeats and sleeps
 * 200 ms) and marks every run it gets done with join_done() at once, as joined.c does after
 * the RUN_END is synced: training takes no time, so this is the claim protocol at full
 * pressure. One difference from j_take(): each process keeps the index of its first
 * unsettled run and walks from there, where j_take() walks from the start of the queue
 * every time (in-memory checks, O(runs) per take); that scan is not the file system's cost.
 *
 * Scenarios, interleaved in every repetition:
 *   fresh     nobody has claimed anything: every claim is a link() of a new file
 *   peek      fresh, but each process asks join_peek() first and calls join_claim() only
 *             for a run that looks free, so that a process losing the race makes no file
 *             (j_take() calls join_claim() straight away: each loser writes, links and
 *             unlinks a temporary file); PROCS processes only
 *   takeover  a share SHARE (0.5) of the runs, spread evenly, is held by a process that
 *             claimed them with join_claim() and exited without a word, as after kill -9:
 *             its journal unlocked, its heartbeat file still fresh. Each of those runs must
 *             be taken over under join/lock (join_peek, then rename under the flock).
 * fresh and takeover each with 1 process (the reference) and with PROCS processes.
 *
 * Measured per scenario: wall = barrier release -> the last join_done() of any process (all
 * runs claimed and marked done); runs/s = RUNS / wall, overall and per process (its claims /
 * wall); exit = barrier -> the last process has seen that everything is done and exited
 * (includes the 1 s rechecks and 200 ms sleeps of the walk); CPU of all the processes per
 * run. Checked after every scenario (exit status 1 if any fails): every run was claimed
 * (MINE or TAKEN) by exactly one process, runs of the dead process only by TAKEN and the
 * others only by MINE; every claims/ID says "done NAME" with NAME the process that claimed
 * it; no temporary claim file is left. Prints one "JOIN_CLAIMS key=value ..." line per
 * scenario and a summary of medians with the ratios to 1 process. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "orchestrator/schedule/join.h"
#include "orchestrator/record/journal.h"

#define MAX_PROCS 1024

typedef struct {
    char name[JOIN_NAME_MAX];
    long mine, taken, attempts, busy, done_seen;
    double t_last_done, t_exit; /* seconds after the barrier */
    int failed;
    char err[ABL_ERR_MAX];
} ProcStats;

typedef struct {
    ProcStats proc[MAX_PROCS + 1]; /* [procs]: the dead process */
    double t0;                     /* the barrier's release, CLOCK_MONOTONIC */
} Shared;

static int n_runs = 20000, n_procs = 16, reps = 3;
static double dead_share = 0.5;
static Plan plan;
static Shared *sh;
static uint8_t *owner; /* (n_procs + 1) x n_runs: 1 MINE, 2 TAKEN */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t splitmix64(uint64_t x) { /* a bijection: distinct runs, distinct ids */
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static void make_plan(void) {
    plan.n_runs = n_runs;
    plan.runs = calloc((size_t)n_runs, sizeof *plan.runs);
    for (int i = 0; i < n_runs; i++) {
        PlannedRun *r = &plan.runs[i];
        r->index = i;
        r->seed = (uint64_t)i;
        snprintf(r->id, sizeof r->id, "%016llx", (unsigned long long)splitmix64((uint64_t)i));
        r->name = malloc(32);
        snprintf(r->name, 32, "bench/seed%d", i);
    }
}

/* Runs held by the dead process: SHARE of them, spread evenly over the plan. */
static int dead_holds(int i, double share) {
    return (long)((i + 1) * share) > (long)(i * share);
}

/* A process's own journal, locked while it lives, as `ablate run --join` keeps it. */
static Journal *own_journal(Join *j, char err[ABL_ERR_MAX]) {
    char path[ABL_PATH_MAX + 2 * JOIN_NAME_MAX];
    join_journal_of(j, NULL, path, sizeof path);
    return journal_create(path, err);
}

/* The process that dies: claims its share with join_claim() and exits (its journal lock is
 * released by the exit, its heartbeat file stays, its claims say "held"). */
static void dead_process(const char *out, double share) {
    ProcStats *ps = &sh->proc[n_procs];
    Join *j = join_open(out, &plan, NULL, JOIN_DEFAULT_LEASE, ps->err);
    Journal *jr = j ? own_journal(j, ps->err) : NULL;
    if (!jr) _exit(ps->failed = 1);
    snprintf(ps->name, sizeof ps->name, "%s", join_name(j));
    char prev[JOIN_NAME_MAX];
    for (int i = 0; i < n_runs; i++) {
        if (!dead_holds(i, share)) continue;
        if (join_claim(j, plan.runs[i].id, prev, ps->err) != CLAIM_MINE) _exit(ps->failed = 1);
        owner[(size_t)n_procs * (size_t)n_runs + (size_t)i] = 1;
        ps->mine++;
    }
    _exit(0); /* no join_close, no journal_close: as if killed */
}

/* One competing process: joined.c's j_take() and run_local() loop, training nothing. */
static void compete(int p, const char *out, int peek, int ready_fd, int go_fd) {
    ProcStats *ps = &sh->proc[p];
    Join *j = join_open(out, &plan, NULL, JOIN_DEFAULT_LEASE, ps->err);
    Journal *jr = j ? own_journal(j, ps->err) : NULL;
    char c = jr ? 'r' : 'x';
    if (j) snprintf(ps->name, sizeof ps->name, "%s", join_name(j));
    if (write(ready_fd, &c, 1) != 1 || !jr) _exit(ps->failed = 1);
    close(ready_fd);
    while (read(go_fd, &c, 1) < 0 && errno == EINTR) { /* released when the parent closes it */
    }
    close(go_fd);
    uint8_t *finished = calloc((size_t)n_runs, 1);
    double *recheck = calloc((size_t)n_runs, sizeof *recheck);
    uint8_t *mine_row = owner + (size_t)p * (size_t)n_runs;
    int first = 0, left = n_runs;
    char prev[JOIN_NAME_MAX];
    while (left > 0 && !ps->failed) {
        int got = -1;
        double now = now_s();
        while (first < n_runs && finished[first])
            first++;
        for (int i = first; i < n_runs && got < 0; i++) {
            if (finished[i] || recheck[i] > now) continue;
            int mine;
            ClaimResult r = CLAIM_MINE;
            if (peek) r = join_peek(j, plan.runs[i].id, &mine, prev); /* no file made to lose */
            if (r == CLAIM_MINE) ps->attempts++, r = join_claim(j, plan.runs[i].id, prev, ps->err);
            switch (r) {
            case CLAIM_ERROR:
                ps->failed = 1;
                break;
            case CLAIM_DONE:
                ps->done_seen++;
                finished[i] = 1, left--;
                break;
            case CLAIM_BUSY:
                ps->busy++;
                recheck[i] = now + 1.0;
                break;
            case CLAIM_TAKEN:
                ps->taken++;
                mine_row[i] = 2, got = i;
                break;
            case CLAIM_MINE:
                ps->mine++;
                mine_row[i] = 1, got = i;
                break;
            }
            if (ps->failed) break;
        }
        if (got < 0) { /* the rest is held by live processes: watch them */
            join_heartbeat(j, now_s());
            struct timespec ts = {0, 200000000};
            if (left > 0 && !ps->failed) nanosleep(&ts, NULL);
            continue;
        }
        JoinResult res = {.status = RUN_DONE, .final_val_loss = 1.0, .train_seconds = 0.001};
        if (join_done(j, plan.runs[got].id, &res, ps->err) < 0) ps->failed = 1;
        ps->t_last_done = now_s() - sh->t0;
        finished[got] = 1, left--;
    }
    ps->t_exit = now_s() - sh->t0;
    free(finished);
    free(recheck);
    journal_close(jr);
    join_close(j);
    _exit(ps->failed);
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)ftw;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static double cpu_children(void) {
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
           (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}

typedef struct {
    double wall, exit_s, rate, cpu_us;
    double per_min, per_med, per_max; /* runs/s of one process */
    long lost, taken;
} Result;

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Every run claimed by exactly one live process, the right way, and marked done by it. */
static int check(const char *base, int np, double share, long *twice, long *unclaimed) {
    int bad = 0;
    *twice = *unclaimed = 0;
    for (int i = 0; i < n_runs; i++) {
        int n = 0, who = -1;
        for (int p = 0; p < np; p++)
            if (owner[(size_t)p * (size_t)n_runs + (size_t)i]) n++, who = p;
        if (n > 1) ++*twice;
        if (n == 0) ++*unclaimed;
        if (n != 1) continue;
        int dead = share > 0 && dead_holds(i, share);
        int how = owner[(size_t)who * (size_t)n_runs + (size_t)i];
        if (how != (dead ? 2 : 1)) {
            if (bad++ < 3)
                fprintf(stderr, "join_claims: run %d %s by process %d, expected %s\n", i,
                        how == 2 ? "taken over" : "claimed fresh", who,
                        dead ? "a takeover" : "a fresh claim");
        }
        char path[ABL_PATH_MAX + 64], text[JOIN_NAME_MAX + 16], want[JOIN_NAME_MAX + 16];
        snprintf(path, sizeof path, "%s/join/claims/%s", base, plan.runs[i].id);
        snprintf(want, sizeof want, "done %s\n", sh->proc[who].name);
        FILE *f = fopen(path, "r");
        size_t got = f ? fread(text, 1, sizeof text - 1, f) : 0;
        if (f) fclose(f);
        text[got] = '\0';
        /* its first line names the process that finished it; a result line follows */
        if (strncmp(text, want, strlen(want)) != 0 && bad++ < 3)
            fprintf(stderr, "join_claims: %s says '%.*s', expected '%.*s'\n", path,
                    (int)strcspn(text, "\n"), text, (int)strcspn(want, "\n"), want);
    }
    char dir[ABL_PATH_MAX + 64];
    snprintf(dir, sizeof dir, "%s/join/claims", base);
    DIR *d = opendir(dir);
    struct dirent *e;
    long tmp = 0, files = 0;
    while (d && (e = readdir(d)))
        if (e->d_name[0] == '.' && strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            tmp++;
        else if (e->d_name[0] != '.')
            files++;
    if (d) closedir(d);
    if (tmp || files != n_runs)
        bad++, fprintf(stderr,
                       "join_claims: %s holds %ld claims for %d runs and %ld temporary files\n",
                       dir, files, n_runs, tmp);
    if (*twice || *unclaimed)
        fprintf(stderr, "join_claims: %ld run(s) claimed twice, %ld never claimed\n", *twice,
                *unclaimed);
    return bad || *twice || *unclaimed;
}

static int scenario(const char *dir, const char *what, int np, double share, int peek, int rep,
                    Result *res) {
    char out[ABL_PATH_MAX], base[ABL_PATH_MAX + 8];
    snprintf(out, sizeof out, "%s/%s-p%d-r%d.h5", dir, what, np, rep);
    snprintf(base, sizeof base, "%s.d", out);
    memset(sh, 0, sizeof *sh);
    memset(owner, 0, (size_t)(n_procs + 1) * (size_t)n_runs);
    if (share > 0) {
        pid_t pid = fork();
        if (pid == 0) dead_process(out, share);
        int st;
        waitpid(pid, &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "join_claims: the dead process's claims failed: %s\n",
                    sh->proc[n_procs].err);
            return 1;
        }
    }
    int ready[2], go[2];
    if (pipe(ready) != 0 || pipe(go) != 0) return perror("pipe"), 1;
    double cpu0 = cpu_children();
    pid_t *pids = calloc((size_t)np, sizeof *pids);
    for (int p = 0; p < np; p++) {
        if ((pids[p] = fork()) == 0) {
            close(ready[0]), close(go[1]);
            compete(p, out, peek, ready[1], go[0]);
        }
    }
    close(ready[1]), close(go[0]);
    int n_ready = 0, failed = 0;
    char c;
    while (n_ready < np && read(ready[0], &c, 1) == 1)
        n_ready++, failed |= c != 'r';
    close(ready[0]);
    sh->t0 = now_s();
    close(go[1]); /* the barrier: every process reads EOF at once */
    for (int p = 0; p < np; p++) {
        int st;
        waitpid(pids[p], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            failed = 1;
            fprintf(stderr, "join_claims: process %d failed: %s\n", p, sh->proc[p].err);
        }
    }
    free(pids);
    double cpu = cpu_children() - cpu0;
    long twice = 0, unclaimed = 0;
    int bad = failed || check(base, np, share, &twice, &unclaimed);
    double wall = 0, exit_s = 0, per[MAX_PROCS];
    long mine_min = -1, mine_max = 0, lost = 0, taken = 0, calls = 0;
    for (int p = 0; p < np; p++) {
        ProcStats *ps = &sh->proc[p];
        if (ps->t_last_done > wall) wall = ps->t_last_done;
        if (ps->t_exit > exit_s) exit_s = ps->t_exit;
        long got = ps->mine + ps->taken;
        if (mine_min < 0 || got < mine_min) mine_min = got;
        if (got > mine_max) mine_max = got;
        lost += ps->busy + ps->done_seen;
        taken += ps->taken;
        calls += ps->attempts;
    }
    for (int p = 0; p < np; p++)
        per[p] = (double)(sh->proc[p].mine + sh->proc[p].taken) / wall;
    res->wall = wall;
    res->exit_s = exit_s;
    res->rate = n_runs / wall;
    res->cpu_us = 1e6 * cpu / n_runs;
    res->lost = lost;
    res->taken = taken;
    res->per_min = per[0], res->per_max = per[0];
    for (int p = 0; p < np; p++)
        res->per_min = per[p] < res->per_min ? per[p] : res->per_min,
        res->per_max = per[p] > res->per_max ? per[p] : res->per_max;
    res->per_med = median(per, np);
    printf("JOIN_CLAIMS scenario=%s procs=%d runs=%d rep=%d dead_held=%ld wall_s=%.3f "
           "runs_per_s=%.0f per_proc_runs_per_s=%.0f/%.0f/%.0f claims_per_proc=%ld..%ld "
           "taken_over=%ld claim_calls=%ld lost=%ld exit_s=%.3f cpu_us_per_run=%.1f twice=%ld "
           "unclaimed=%ld %s\n",
           what, np, n_runs, rep, share > 0 ? sh->proc[n_procs].mine : 0L, wall, res->rate,
           res->per_min, res->per_med, res->per_max, mine_min, mine_max, taken, calls, lost, exit_s,
           res->cpu_us, twice, unclaimed, bad ? "FAILED" : "ok");
    fflush(stdout);
    nftw(base, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return bad;
}

int main(int argc, char **argv) {
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: join_claims DIR [-n RUNS] [-p PROCS] [-r REPS] [-t SHARE]\n");
        return 2;
    }
    const char *dir = argv[1];
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-n"))
            n_runs = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-p"))
            n_procs = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-r"))
            reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-t"))
            dead_share = atof(argv[i + 1]);
        else
            return fprintf(stderr, "join_claims: unknown option %s\n", argv[i]), 2;
    }
    if ((argc - 2) % 2 || n_runs < 1 || n_runs > PLAN_MAX_RUNS_DEFAULT || n_procs < 1 ||
        n_procs > MAX_PROCS || reps < 1 || !(dead_share > 0 && dead_share <= 1)) {
        fprintf(stderr,
                "join_claims: bad options (1 <= RUNS <= %d, 1 <= PROCS <= %d, "
                "REPS >= 1, 0 < SHARE <= 1)\n",
                PLAN_MAX_RUNS_DEFAULT, MAX_PROCS);
        return 2;
    }
    make_plan();
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    owner = mmap(NULL, (size_t)(n_procs + 1) * (size_t)n_runs, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED || owner == MAP_FAILED) return perror("mmap"), 1;
    struct {
        const char *what;
        int procs;
        double share;
        int peek;
    } sc[] = {{"fresh", 1, 0, 0},
              {"fresh", n_procs, 0, 0},
              {"peek", n_procs, 0, 1},
              {"takeover", 1, dead_share, 0},
              {"takeover", n_procs, dead_share, 0}};
    enum { NSC = sizeof sc / sizeof sc[0] };
    Result *all = calloc((size_t)(NSC * reps), sizeof *all);
    int bad = 0;
    for (int r = 0; r < reps; r++)
        for (int k = 0; k < NSC; k++) /* interleaved: the machine's load hits every one alike */
            bad |= scenario(dir, sc[k].what, sc[k].procs, sc[k].share, sc[k].peek, r + 1,
                            &all[r * NSC + k]);
    printf("\nsummary: medians of %d repetition(s); %d runs, %.0f%% of them held by a dead "
           "process in the takeover scenarios\n",
           reps, n_runs, 100 * dead_share);
    printf("%-9s %5s %10s %9s %22s %8s %12s %8s\n", "scenario", "procs", "runs/s", "wall_s",
           "per process runs/s", "exit_s", "cpu_us/run", "vs 1");
    double ref = 0;
    for (int k = 0; k < NSC; k++) {
        double v[5][64];
        int n = reps < 64 ? reps : 64;
        for (int r = 0; r < n; r++) {
            Result *x = &all[r * NSC + k];
            v[0][r] = x->rate, v[1][r] = x->wall, v[2][r] = x->per_med, v[3][r] = x->exit_s,
            v[4][r] = x->cpu_us;
        }
        double rate = median(v[0], n);
        if (sc[k].procs == 1) ref = rate;
        char vs[32] = "-";
        if (sc[k].procs > 1 && ref > 0) snprintf(vs, sizeof vs, "x%.2f", rate / ref);
        printf("%-9s %5d %10.0f %9.3f %22.0f %8.3f %12.1f %8s\n", sc[k].what, sc[k].procs, rate,
               median(v[1], n), median(v[2], n), median(v[3], n), median(v[4], n), vs);
    }
    printf("%s\n", bad ? "FAILED: see the messages above" : "every run claimed exactly once: ok");
    free(all);
    for (int i = 0; i < n_runs; i++)
        free(plan.runs[i].name);
    free(plan.runs);
    return bad;
}
