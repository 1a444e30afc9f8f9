/* join_timeshim: an LD_PRELOAD library that timestamps the claims of an unmodified
 * `ablate run --join` process, for bench/sweep_dispatch.sh --join (the joined counterpart of
 * bench/sweep_timeshim.c, which sees runs through MPI messages; an in-process joined process
 * sends none).
 *
 *   cc -O2 -shared -fPIC -o libjoin_timeshim.so bench/join_timeshim.c -ldl
 *   JOIN_SHIM_DIR=DIR LD_PRELOAD=.../libjoin_timeshim.so ablate run SPEC -o OUT.h5 --join
 *
 * join.c claims a run by link()ing a temporary file to OUT.h5.d/join/claims/ID (a takeover,
 * a release and "done" rename() one over it; the first line of the file says which), so
 * wrapping link() and rename() of libc sees every claim change this process makes, the
 * moment it makes it. fdatasync() (the journal's sync) is timed too. At exit, DIR/PID.tsv
 * gets one line per event, times in seconds of CLOCK_MONOTONIC (one clock for every process
 * of the machine, = Python's time.monotonic()):
 *   start     t                 the library was loaded (the process started)
 *   claim     t ID              a first claim: link() to claims/ID succeeded
 *   held      t ID              a takeover: a "held" file renamed over claims/ID
 *   done      t ID              "done" renamed over claims/ID (the run's RUN_END is synced)
 *   released  t ID              "released" renamed over claims/ID
 *   sync      t seconds         an fdatasync() that began at t took that long
 *   exit      t                 the process exits
 * The cost is a clock_gettime per claim change and per sync, and reading the first line of
 * the file being renamed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SHIM_MAX 200000

typedef struct {
    char what[12];
    char id[20];
    double t, dur;
} Rec;

static Rec *recs;
static int nrec; /* claims come from the main thread, syncs also from the view thread */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void rec(const char *what, const char *id, double t, double dur) {
    if (!recs) return;
    int k = __atomic_fetch_add(&nrec, 1, __ATOMIC_RELAXED);
    if (k >= SHIM_MAX) return;
    Rec *r = &recs[k];
    snprintf(r->what, sizeof r->what, "%s", what);
    snprintf(r->id, sizeof r->id, "%s", id ? id : "-");
    r->t = t;
    r->dur = dur;
}

/* The run id when path is OUT.h5.d/join/claims/ID, else NULL. */
static const char *claim_id(const char *path) {
    const char *p = path ? strstr(path, "/join/claims/") : NULL;
    if (!p) return NULL;
    p += strlen("/join/claims/");
    return *p && *p != '.' && !strchr(p, '/') ? p : NULL;
}

__attribute__((constructor)) static void shim_start(void) {
    recs = calloc(SHIM_MAX, sizeof *recs);
    rec("start", NULL, now_s(), 0);
}

int link(const char *from, const char *to) {
    static int (*real)(const char *, const char *);
    if (!real) real = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "link");
    int rc = real(from, to);
    const char *id = claim_id(to);
    if (rc == 0 && id) rec("claim", id, now_s(), 0);
    return rc;
}

int rename(const char *from, const char *to) {
    static int (*real)(const char *, const char *);
    if (!real) real = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
    const char *id = claim_id(to);
    char state[16] = "";
    if (id) { /* "held NAME", "released NAME" or "done NAME" */
        int fd = open(from, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, state, sizeof state - 1) : 0;
        if (fd >= 0) close(fd);
        state[n > 0 ? n : 0] = '\0';
        state[strcspn(state, " \n")] = '\0';
    }
    int rc = real(from, to);
    if (rc == 0 && id && state[0]) rec(state, id, now_s(), 0);
    return rc;
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    double t = now_s();
    int rc = real(fd);
    rec("sync", NULL, t, now_s() - t);
    return rc;
}

__attribute__((destructor)) static void shim_exit(void) {
    rec("exit", NULL, now_s(), 0);
    const char *dir = getenv("JOIN_SHIM_DIR");
    if (!dir || !recs) return;
    char path[4096];
    snprintf(path, sizeof path, "%s/%ld.tsv", dir, (long)getpid());
    FILE *f = fopen(path, "w");
    if (!f) return;
    int n = nrec < SHIM_MAX ? nrec : SHIM_MAX;
    for (int i = 0; i < n; i++)
        fprintf(f, "%s\t%.6f\t%s\t%.6f\n", recs[i].what, recs[i].t, recs[i].id, recs[i].dur);
    fclose(f);
}
