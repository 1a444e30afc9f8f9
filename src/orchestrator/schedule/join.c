/* `ablate run --join`: the claims, heartbeats and plan check of join.h. */
#define _GNU_SOURCE /* O_CLOEXEC, utimensat */
#include "join.h"

#include <ftw.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/buf.h"
#include "util/clock.h"
#include "util/fsutil.h"
#include "util/grow.h"
#include "orchestrator/plan/id_index.h"
#include "orchestrator/record/journal.h"
#include "util/log.h"

#define CLAIM_TEXT_MAX   (JOIN_NAME_MAX + 160) /* a done claim's result line included */
#define JOIN_ALIVE_CACHE 64
/* seconds a holder found alive is taken to be: a gone one is seen late by at most this,
 * against a lease of a minute */
#define JOIN_ALIVE_FOR 1.0

struct Join {
    char dir[ABL_PATH_MAX];   /* OUT.h5.d/join */
    char name[JOIN_NAME_MAX]; /* this process */
    char alive[ABL_PATH_MAX + JOIN_NAME_MAX + 32];
    double lease;
    double last_beat;      /* clock of our last touch (caller's clock) */
    struct timespec mtime; /* our heartbeat's mtime after the last touch (file system clock) */
    int lock_fd;           /* join/lock */
    int done_fd;           /* join/done, appended to (-1: a sweep begun without one) */
    long long done_off;    /* of its next line not read yet */
    int rungs_fd;          /* join/rungs (a tune: sweep's), opened when first needed: -1 */
    long long rungs_off;   /* of its next line not read yet */
    /* holders found alive lately: every look at a run another process holds would probe
     * its journal's lock again (an open and a flock per look: with many processes, most
     * of a claimed run's system calls) */
    struct {
        char name[JOIN_NAME_MAX];
        double at; /* clock_seconds() of the probe */
    } alive_seen[JOIN_ALIVE_CACHE];
    int n_alive_seen;
};

/* read_claim calls of the process (tests: what a start-up costs in claim files read) */
static long g_claim_reads;

static int mkdir_p1(const char *path) {
    return mkdir(path, 0777) == 0 || errno == EEXIST ? 0 : -1;
}

static void path_in(const Join *j, char *buf, size_t n, const char *a, const char *b) {
    snprintf(buf, n, "%s/%s%s%s", j->dir, a, b ? "/" : "", b ? b : "");
}

/* ---------------------------------------------------------------- the plan */

static int plan_text(const Plan *p, Buf *b) {
    for (int i = 0; i < p->n_runs; i++) {
        buf_adds(b, p->runs[i].id);
        buf_addc(b, ' ');
        buf_adds(b, p->runs[i].name);
        buf_addc(b, '\n');
    }
    return b->oom ? -1 : 0;
}

/* The first line where two texts differ, for the message; unit names a line of them (a plan's
 * line is a run, the replicate: rule's a line). */
static void first_difference(const char *unit, const char *a, size_t an, const char *b, size_t bn,
                             char *out, size_t n) {
    size_t i = 0, line = 1, start = 0;
    while (i < an && i < bn && a[i] == b[i]) {
        if (a[i] == '\n') line++, start = i + 1;
        i++;
    }
    const char *ea = memchr(a + start, '\n', an - start), *eb = memchr(b + start, '\n', bn - start);
    int la = (int)((ea ? (size_t)(ea - a) : an) - start);
    int lb = (int)((eb ? (size_t)(eb - b) : bn) - start);
    snprintf(out, n, "%s %zu is '%.*s' there and '%.*s' here", unit, line, la > 100 ? 100 : la,
             start < an ? a + start : "", lb > 100 ? 100 : lb, start < bn ? b + start : "");
}

/* A file every process must agree on (the plan, the replicate: rule): written once (tmp +
 * link, which fails if another process wrote it first), then every joining process compares
 * its own text with it. what names it in the message. */
static int check_file(Join *j, const char *name, const Buf *mine, const char *what,
                      char err[ABL_ERR_MAX]) {
    char path[ABL_PATH_MAX + 16], tmp[ABL_PATH_MAX + JOIN_NAME_MAX + 32];
    path_in(j, path, sizeof path, name, NULL);
    snprintf(tmp, sizeof tmp, "%s.tmp.%s", path, j->name);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);
    int ok = fd >= 0 && write(fd, mine->p, mine->len) == (ssize_t)mine->len && fsync(fd) == 0;
    if (fd >= 0) close(fd);
    if (ok && link(tmp, path) != 0 && errno != EEXIST) ok = 0;
    int e = errno;
    unlink(tmp);
    if (!ok) {
        snprintf(err, ABL_ERR_MAX, "cannot write %s: %s", path, strerror(e));
        return -1;
    }
    FILE *f = fopen(path, "rb");
    Buf theirs = {0};
    char chunk[65536];
    size_t got;
    while (f && (got = fread(chunk, 1, sizeof chunk, f)) > 0)
        buf_add(&theirs, chunk, got);
    if (f) fclose(f);
    int rc = 0;
    if (!f || theirs.oom) {
        snprintf(err, ABL_ERR_MAX, "cannot read %s", path);
        rc = -1;
    } else if (theirs.len != mine->len || memcmp(theirs.p, mine->p, mine->len) != 0) {
        char diff[300];
        first_difference(strcmp(name, "plan") ? "line" : "run", theirs.p ? theirs.p : "",
                         theirs.len, mine->p, mine->len, diff, sizeof diff);
        snprintf(err, ABL_ERR_MAX,
                 "%s: this sweep was joined with a different %s (%s): every joined process "
                 "must use the same spec and --set values",
                 path, what, diff);
        rc = -1;
    }
    buf_free(&theirs);
    return rc;
}

static int check_plan(Join *j, const Plan *p, const char *replicate, char err[ABL_ERR_MAX]) {
    Buf mine = {0}, rep = {0};
    buf_adds(&rep, replicate ? replicate : "none\n");
    if (plan_text(p, &mine) != 0 || rep.oom) {
        buf_free(&mine);
        buf_free(&rep);
        return snprintf(err, ABL_ERR_MAX, "out of memory"), -1;
    }
    int rc = check_file(j, "plan", &mine, "plan", err);
    if (rc == 0) rc = check_file(j, "replicate", &rep, "replicate: or tune: section", err);
    buf_free(&mine);
    buf_free(&rep);
    return rc;
}

/* ---------------------------------------------------------------- open, heartbeat */

static int touch(Join *j) {
    int fd = open(j->alive, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0) return -1;
    /* NULL times: "now" by the file system's clock (NFS: the server's) */
    int rc = futimens(fd, NULL);
    struct stat st;
    if (rc == 0 && fstat(fd, &st) == 0) j->mtime = st.st_mtim;
    close(fd);
    return rc;
}

Join *join_open(const char *out_path, const Plan *p, const char *replicate, double lease,
                char err[ABL_ERR_MAX]) {
    Join *j = calloc(1, sizeof *j);
    if (!j) return snprintf(err, ABL_ERR_MAX, "out of memory"), NULL;
    j->lock_fd = j->done_fd = j->rungs_fd = -1;
    j->lease = lease > 0 ? lease : JOIN_DEFAULT_LEASE;
    char base[ABL_PATH_MAX], host[HOST_MAX] = "", stamp[32];
    if (journal_dir_for(out_path, base, sizeof base) != 0 ||
        snprintf(j->dir, sizeof j->dir, "%s/join", base) >= (int)sizeof j->dir - 64) {
        snprintf(err, ABL_ERR_MAX, "%s: output path too long", out_path);
        free(j);
        return NULL;
    }
    gethostname(host, sizeof host - 1);
    for (char *c = host; *c; c++)
        if (*c == '/' || *c == ' ') *c = '_';
    clock_utc_format(stamp, sizeof stamp, CLOCK_UTC_COMPACT);
    /* a second join of the same process within a second (tests: two processes in one) gets
     * a number of its own */
    static int opened;
    int k = opened++;
    if (k)
        snprintf(j->name, sizeof j->name, "%s-%s-%ld-%d", stamp, host, (long)getpid(), k + 1);
    else
        snprintf(j->name, sizeof j->name, "%s-%s-%ld", stamp, host, (long)getpid());
    char path[ABL_PATH_MAX + JOIN_NAME_MAX + 32];
    snprintf(path, sizeof path, "%s", j->dir);
    static const char *const dirs[] = {"procs", "claims"};
    int ok = mkdir_p1(base) == 0 && mkdir_p1(j->dir) == 0;
    for (int i = 0; ok && i < 2; i++) {
        path_in(j, path, sizeof path, dirs[i], NULL);
        ok = mkdir_p1(path) == 0;
    }
    if (!ok) {
        snprintf(err, ABL_ERR_MAX, "cannot create %s: %s", path, strerror(errno));
        goto fail;
    }
    path_in(j, path, sizeof path, "lock", NULL);
    j->lock_fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (j->lock_fd < 0) {
        snprintf(err, ABL_ERR_MAX, "cannot create %s: %s", path, strerror(errno));
        goto fail;
    }
    /* join/done is made with the sweep, before its plan: a sweep that has one has every
     * done run in it but those of a process killed between its claim and its line (and,
     * while a claim is renamed, the line being written); one begun without it (by an older
     * ablate) is read claim by claim */
    path_in(j, path, sizeof path, "plan", NULL);
    int first = access(path, F_OK) != 0 && errno == ENOENT;
    path_in(j, path, sizeof path, "done", NULL);
    j->done_fd =
        open(path, O_RDWR | O_APPEND | O_NOFOLLOW | O_CLOEXEC | (first ? O_CREAT : 0), 0666);
    if (j->done_fd < 0 && (first || errno != ENOENT)) {
        snprintf(err, ABL_ERR_MAX, "cannot open %s: %s", path, strerror(errno));
        goto fail;
    }
    /* before this process leaves any trace: a refused one must not look like a member */
    if (check_plan(j, p, replicate, err) != 0) goto fail;
    path_in(j, path, sizeof path, "procs", j->name);
    snprintf(j->alive, sizeof j->alive, "%s/alive", path);
    if (mkdir(path, 0777) != 0 || touch(j) != 0) {
        snprintf(err, ABL_ERR_MAX, "cannot create %s: %s", path, strerror(errno));
        j->alive[0] = '\0';
        goto fail;
    }
    fs_fsync(j->dir, 1);
    return j;
fail:
    join_close(j);
    return NULL;
}

void join_close(Join *j) {
    if (!j) return;
    if (j->lock_fd >= 0) close(j->lock_fd);
    if (j->done_fd >= 0) close(j->done_fd);
    if (j->rungs_fd >= 0) close(j->rungs_fd);
    if (j->alive[0]) unlink(j->alive); /* we are gone: our claims can be taken at once */
    free(j);
}

const char *join_name(const Join *j) {
    return j->name;
}

double join_lease(const Join *j) {
    return j->lease;
}

void join_journal_of(const Join *j, const char *name, char *buf, size_t n) {
    snprintf(buf, n, "%s/procs/%s/journal", j->dir, name ? name : j->name);
}

int join_heartbeat(Join *j, double now) {
    if (now - j->last_beat < j->lease / 4) return 0;
    j->last_beat = now;
    return touch(j) == 0 ? 1 : -1;
}

/* ---------------------------------------------------------------- claims */

typedef enum { C_NONE, C_HELD, C_RELEASED, C_DONE, C_UNREADABLE } ClaimState;

static ClaimState read_claim(const char *path, char holder[JOIN_NAME_MAX]) {
    holder[0] = '\0';
    g_claim_reads++;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? C_NONE : C_UNREADABLE;
    char t[CLAIM_TEXT_MAX + 1];
    ssize_t n = read(fd, t, CLAIM_TEXT_MAX);
    close(fd);
    if (n <= 0) return C_UNREADABLE;
    t[n] = '\0';
    char *nl = strchr(t, '\n'), *sp = strchr(t, ' ');
    if (!nl || !sp || sp > nl) return C_UNREADABLE;
    *nl = '\0';
    snprintf(holder, JOIN_NAME_MAX, "%s", sp + 1);
    *sp = '\0';
    return !strcmp(t, "held")       ? C_HELD
           : !strcmp(t, "released") ? C_RELEASED
           : !strcmp(t, "done")     ? C_DONE
                                    : C_UNREADABLE;
}

/* Writes "STATE NAME\n" (and the line more, if any) to a temporary file beside claims/ID;
 * its path in tmp. */
static int write_tmp(Join *j, const char *id, const char *state, const char *more, char *tmp,
                     size_t n) {
    snprintf(tmp, n, "%s/claims/.%s.%s", j->dir, id, j->name);
    char t[CLAIM_TEXT_MAX + 16];
    int len = snprintf(t, sizeof t, "%s %s\n%s", state, j->name, more ? more : "");
    if (len < 0 || len >= (int)sizeof t) return -1;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0) return -1;
    int ok = write(fd, t, (size_t)len) == len;
    return close(fd) == 0 && ok ? 0 : -1;
}

static double ts_diff(struct timespec a, struct timespec b) {
    return (double)(a.tv_sec - b.tv_sec) + 1e-9 * (double)(a.tv_nsec - b.tv_nsec);
}

static int holder_gone_now(Join *j, const char *name);

/* Is process NAME gone? Its journal's flock is free, or its heartbeat is older than the
 * lease (or missing: it left). A holder found alive is taken to be for JOIN_ALIVE_FOR. */
static int holder_gone(Join *j, const char *name) {
    if (!strcmp(name, j->name)) return 0;
    double now = clock_seconds();
    int slot = -1;
    for (int k = 0; k < j->n_alive_seen; k++)
        if (!strcmp(j->alive_seen[k].name, name)) slot = k;
    if (slot >= 0 && now - j->alive_seen[slot].at < JOIN_ALIVE_FOR) return 0;
    int gone = holder_gone_now(j, name);
    if (!gone) { /* remembered, in its slot, a free one, or the oldest's */
        if (slot < 0 && j->n_alive_seen < JOIN_ALIVE_CACHE) slot = j->n_alive_seen++;
        if (slot < 0) {
            slot = 0;
            for (int k = 1; k < j->n_alive_seen; k++)
                if (j->alive_seen[k].at < j->alive_seen[slot].at) slot = k;
        }
        snprintf(j->alive_seen[slot].name, JOIN_NAME_MAX, "%s", name);
        j->alive_seen[slot].at = now;
    } else if (slot >= 0) {
        j->alive_seen[slot].at = -1e300; /* probe it again next time */
    }
    return gone;
}

/* holder_gone without the memory of live holders */
static int holder_gone_now(Join *j, const char *name) {
    char path[ABL_PATH_MAX + JOIN_NAME_MAX + 32];
    join_journal_of(j, name, path, sizeof path);
    /* not journal_lock_existing: that one carries on where flock is unsupported, which here
     * would call every holder gone; a failed flock leaves the question to the heartbeat.
     * For writing: NFS grants an exclusive flock only then (flock(2), NOTES) */
    int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
        int free_lock = flock(fd, LOCK_EX | LOCK_NB) == 0;
        close(fd); /* releases it again */
        if (free_lock) return 1;
    }
    snprintf(path, sizeof path, "%s/procs/%s/alive", j->dir, name);
    struct stat st;
    if (stat(path, &st) != 0) return errno == ENOENT;
    return ts_diff(j->mtime, st.st_mtim) > j->lease;
}

/* join/lock, around every change to a claim another process may have written; where the
 * file system has no flock (ENOLCK, EOPNOTSUPP) it carries on unlocked. */
static int lock_claims(Join *j, char err[ABL_ERR_MAX]) {
    if (flock(j->lock_fd, LOCK_EX) == 0 || errno == ENOLCK || errno == EOPNOTSUPP) return 0;
    snprintf(err, ABL_ERR_MAX, "cannot lock %s/lock: %s", j->dir, strerror(errno));
    return -1;
}

/* claims/ID of run id: 0, or -1 when the path is too long */
static int claim_path(const Join *j, const char *id, char *buf, size_t n) {
    return snprintf(buf, n, "%s/claims/%s", j->dir, id) < (int)n ? 0 : -1;
}

/* claim_path, with a message when the path is too long */
static int claim_path_of(const Join *j, const char *id, char *buf, size_t n,
                         char err[ABL_ERR_MAX]) {
    if (claim_path(j, id, buf, n) == 0) return 0;
    snprintf(err, ABL_ERR_MAX, "%s: path too long", j->dir);
    return -1;
}

ClaimResult join_peek(Join *j, const char *id, int *mine, char prev[JOIN_NAME_MAX]) {
    char path[ABL_PATH_MAX + 64];
    *mine = 0;
    claim_path(j, id, path, sizeof path);
    ClaimState s = read_claim(path, prev);
    if (s == C_DONE) return CLAIM_DONE;
    if (s == C_NONE || s == C_RELEASED) return CLAIM_MINE;
    if (s == C_HELD && !strcmp(prev, j->name)) return *mine = 1, CLAIM_BUSY;
    if (s == C_HELD && holder_gone(j, prev)) return CLAIM_MINE;
    if (s == C_UNREADABLE) { /* another process's claim being replaced, or damage */
        struct stat st;
        if (stat(path, &st) == 0 && ts_diff(j->mtime, st.st_mtim) > j->lease) return CLAIM_MINE;
    }
    return CLAIM_BUSY;
}

/* Replaces claims/ID with "STATE us" under the lock if check(state, holder) still holds. */
typedef int (*ClaimCheck)(Join *j, ClaimState s, const char *holder);

static int replace(Join *j, const char *id, const char *state, const char *more, ClaimCheck check,
                   const char *log_line, char prev[JOIN_NAME_MAX], char err[ABL_ERR_MAX]) {
    char path[ABL_PATH_MAX + 64], tmp[ABL_PATH_MAX + JOIN_NAME_MAX + 64];
    claim_path(j, id, path, sizeof path);
    if (lock_claims(j, err) != 0) return -1;
    ClaimState s = read_claim(path, prev);
    int rc = 1;
    if (check(j, s, prev)) {
        rc = 0;
        if (write_tmp(j, id, state, more, tmp, sizeof tmp) != 0 || rename(tmp, path) != 0) {
            snprintf(err, ABL_ERR_MAX, "cannot write %s: %s", path, strerror(errno));
            unlink(tmp);
            rc = -1;
        } else if (log_line && j->done_fd >= 0) {
            /* one write under the lock: lines do not interleave (O_APPEND alone would not
             * promise it on NFS). A failed or short one only costs readers a claim read */
            size_t len = strlen(log_line);
            if (write(j->done_fd, log_line, len) != (ssize_t)len)
                log_warn("cannot append to %s/done: %s (the claim says it)", j->dir,
                         strerror(errno));
        }
    }
    flock(j->lock_fd, LOCK_UN);
    return rc;
}

/* The check for a takeover: re-evaluated under the lock from what the file says now. */
static int still_takeable(Join *j, ClaimState s, const char *holder) {
    if (s == C_RELEASED) return 1;
    if (s == C_UNREADABLE) return 1; /* join_peek found it older than the lease */
    if (s == C_HELD) return strcmp(holder, j->name) != 0 && holder_gone(j, holder);
    return 0; /* gone meanwhile (someone finished it) or rewritten: look again later */
}

/* done: our RUN_END is durable, so say so even if the run was taken over meanwhile (its
 * new holder then abandons it) */
static int not_done(Join *j, ClaimState s, const char *holder) {
    (void)j, (void)holder;
    return s != C_DONE;
}

static int ours(Join *j, ClaimState s, const char *holder) {
    return s == C_HELD && !strcmp(holder, j->name);
}

ClaimResult join_claim(Join *j, const char *id, char prev[JOIN_NAME_MAX], char err[ABL_ERR_MAX]) {
    char path[ABL_PATH_MAX + 64], tmp[ABL_PATH_MAX + JOIN_NAME_MAX + 64];
    prev[0] = '\0';
    if (claim_path_of(j, id, path, sizeof path, err) != 0) return CLAIM_ERROR;
    /* a look first: with many processes walking the same queue, most runs they reach are
     * taken already, and a look costs one open instead of a create, link and unlink (the
     * claiming bench: 4.8x the runs/s with 16 processes) */
    int mine;
    ClaimResult r = join_peek(j, id, &mine, prev);
    if (r == CLAIM_BUSY || r == CLAIM_DONE) return r;
    struct stat st;
    if (lstat(path, &st) == 0) goto take_over; /* released, or its holder is gone */
    /* first claim: link a complete file into place; fails if anyone got there first */
    if (write_tmp(j, id, "held", NULL, tmp, sizeof tmp) != 0) {
        snprintf(err, ABL_ERR_MAX, "cannot write %s: %s", tmp, strerror(errno));
        unlink(tmp);
        return CLAIM_ERROR;
    }
    int linked = link(tmp, path) == 0, e = errno;
    unlink(tmp);
    if (linked) return CLAIM_MINE;
    if (e != EEXIST) {
        snprintf(err, ABL_ERR_MAX, "cannot create %s: %s", path, strerror(e));
        return CLAIM_ERROR;
    }
    r = join_peek(j, id, &mine, prev);
    if (r != CLAIM_MINE) return r;
take_over:;
    int rc = replace(j, id, "held", NULL, still_takeable, NULL, prev, err);
    return rc < 0 ? CLAIM_ERROR : rc == 0 ? CLAIM_TAKEN : CLAIM_BUSY;
}

ClaimResult join_retake(Join *j, const char *id, char prev[JOIN_NAME_MAX], char err[ABL_ERR_MAX]) {
    char path[ABL_PATH_MAX + 64], tmp[ABL_PATH_MAX + JOIN_NAME_MAX + 64];
    prev[0] = '\0';
    if (claim_path_of(j, id, path, sizeof path, err) != 0) return CLAIM_ERROR;
    if (lock_claims(j, err) != 0) return CLAIM_ERROR;
    ClaimState s = read_claim(path, prev);
    JoinResult res;
    ClaimResult r = CLAIM_TAKEN;
    if (s == C_NONE) /* folded into join/done (the sweep was complete): claimed anew */
        r = CLAIM_MINE;
    else if (s == C_HELD || s == C_UNREADABLE)
        r = CLAIM_BUSY;
    else if (s == C_DONE && !(join_result(j, id, &res) && res.status == RUN_FAILED))
        r = CLAIM_DONE;
    if (r == CLAIM_TAKEN || r == CLAIM_MINE) {
        /* under the lock nobody else writes this claim meanwhile: a rename serves both */
        if (write_tmp(j, id, "held", NULL, tmp, sizeof tmp) != 0 || rename(tmp, path) != 0) {
            snprintf(err, ABL_ERR_MAX, "cannot write %s: %s", path, strerror(errno));
            unlink(tmp);
            r = CLAIM_ERROR;
        }
    }
    flock(j->lock_fd, LOCK_UN);
    return r;
}

int join_release(Join *j, const char *id, char err[ABL_ERR_MAX]) {
    char prev[JOIN_NAME_MAX];
    return replace(j, id, "released", NULL, ours, NULL, prev, err);
}

/* The result line of a done claim: %a prints every double exactly (and strtod reads it
 * back), so each process decides from the very loss the journal holds. */
int join_done(Join *j, const char *id, const JoinResult *res, char err[ABL_ERR_MAX]) {
    char prev[JOIN_NAME_MAX], more[160], line[192];
    int st = res->status >= 0 && res->status < RUN_STATUS_COUNT ? (int)res->status : RUN_DONE;
    snprintf(more, sizeof more, "result %s %a %d %a %a\n", run_status_names[st],
             res->final_val_loss, res->unstable ? 1 : 0, res->train_seconds, res->final_test_loss);
    snprintf(line, sizeof line, "%s %s", id, more + strlen("result "));
    return replace(j, id, "done", more, not_done, line, prev, err);
}

/* "STATUS LOSS UNSTABLE SECONDS [TEST_LOSS]" (a claim's result line without its word) into
 * res; a line without the test loss (written before it was) reads NaN there */
static int parse_result(const char *text, JoinResult *res) {
    char status[32], loss[64], secs[64], test[64] = "nan";
    int unstable;
    if (sscanf(text, "%31s %63s %d %63s %63s", status, loss, &unstable, secs, test) < 4) return 0;
    int k = 0;
    while (k < RUN_STATUS_COUNT && strcmp(run_status_names[k], status) != 0)
        k++;
    if (k == RUN_STATUS_COUNT) return 0;
    *res = (JoinResult){(RunStatus)k, strtod(loss, NULL), unstable != 0, strtod(secs, NULL),
                        strtod(test, NULL)};
    return 1;
}

/* Calls fn for each complete line of the ledger fd from *off on (a line without its newline
 * waits for next time; 64 KiB without one is skipped): the count fn accepted. */
static int read_lines(int fd, long long *off, int (*fn)(void *ctx, char *line), void *ctx) {
    int count = 0;
    char chunk[65536];
    for (;;) {
        ssize_t n = pread(fd, chunk, sizeof chunk - 1, (off_t)*off);
        if (n <= 0) break;
        chunk[n] = '\0';
        char *line = chunk, *nl;
        while ((nl = strchr(line, '\n'))) {
            *nl = '\0';
            count += fn(ctx, line);
            line = nl + 1;
        }
        long long used = line - chunk;
        int at_end = n < (ssize_t)sizeof chunk - 1;
        if (used == 0 && !at_end) used = n;
        *off += used;
        if (at_end) break;
    }
    return count;
}

typedef struct {
    JoinDoneFn fn;
    void *ctx;
} DoneReader;

/* "ID STATUS ...": a line that does not read so (a torn write) is skipped; its run is found
 * by its claim */
static int done_line(void *ctx, char *line) {
    DoneReader *d = ctx;
    JoinResult res;
    if (strlen(line) <= 17 || line[16] != ' ' || !parse_result(line + 17, &res)) return 0;
    line[16] = '\0';
    d->fn(d->ctx, line, &res);
    return 1;
}

int join_done_read(Join *j, JoinDoneFn fn, void *ctx) {
    if (j->done_fd < 0) return -1;
    DoneReader d = {fn, ctx};
    return read_lines(j->done_fd, &j->done_off, done_line, &d);
}

/* join/rungs, opened (made, when create) once: 0, or -1 (errno) */
static int open_rungs(Join *j, int create) {
    if (j->rungs_fd >= 0) return 0;
    char path[ABL_PATH_MAX + 16];
    path_in(j, path, sizeof path, "rungs", NULL);
    j->rungs_fd =
        open(path, O_RDWR | O_APPEND | O_NOFOLLOW | O_CLOEXEC | (create ? O_CREAT : 0), 0666);
    return j->rungs_fd >= 0 ? 0 : -1;
}

int join_rung(Join *j, const char *id, int rung, double loss, char err[ABL_ERR_MAX]) {
    char line[96];
    int len = snprintf(line, sizeof line, "%s %d %a\n", id, rung, loss);
    if (open_rungs(j, 1) != 0) {
        snprintf(err, ABL_ERR_MAX, "cannot open %s/rungs: %s", j->dir, strerror(errno));
        return -1;
    }
    if (lock_claims(j, err) != 0) return -1;
    /* one write under the lock, as join/done's lines */
    int rc = write(j->rungs_fd, line, (size_t)len) == len ? 0 : -1;
    if (rc != 0)
        snprintf(err, ABL_ERR_MAX, "cannot append to %s/rungs: %s", j->dir, strerror(errno));
    flock(j->lock_fd, LOCK_UN);
    return rc;
}

typedef struct {
    JoinRungFn fn;
    void *ctx;
} RungReader;

static int rung_line(void *ctx, char *line) {
    RungReader *d = ctx;
    char loss[64], *end;
    int rung;
    if (strlen(line) <= 17 || line[16] != ' ' || sscanf(line + 17, "%d %63s", &rung, loss) != 2 ||
        rung < 0)
        return 0;
    double v = strtod(loss, &end);
    if (end == loss || *end) return 0; /* a torn line glued to the next: not one */
    line[16] = '\0';
    d->fn(d->ctx, line, rung, v);
    return 1;
}

int join_rungs_read(Join *j, JoinRungFn fn, void *ctx) {
    if (open_rungs(j, 0) != 0) return 0; /* none yet */
    RungReader d = {fn, ctx};
    return read_lines(j->rungs_fd, &j->rungs_off, rung_line, &d);
}

/* join_compact's reading of join/done: the ids it has a line for */
typedef struct {
    char (*ids)[RUN_ID_CHARS];
    int n;
    size_t cap;
} IdList;

static void collect_id(void *ctx, const char *id, const JoinResult *res) {
    (void)res;
    IdList *l = ctx;
    if (GROW(l->ids, l->cap, (size_t)l->n + 1) == 0) snprintf(l->ids[l->n++], 17, "%s", id);
}

static int compacted_path(const Join *j, char *buf, size_t n) {
    return snprintf(buf, n, "%s/compacted", j->dir) < (int)n ? 0 : -1;
}

int join_compact(Join *j, const char (*ids)[RUN_ID_CHARS], int n, char err[ABL_ERR_MAX]) {
    char path[ABL_PATH_MAX + 64], mark[ABL_PATH_MAX + 32], holder[JOIN_NAME_MAX];
    if (j->done_fd < 0 || compacted_path(j, mark, sizeof mark) != 0) return 0;
    if (access(mark, F_OK) == 0) return 0; /* another process did it */
    if (lock_claims(j, err) != 0) return -1;
    int rc = 0;
    IdList seen = {0};
    IdIndex ix = {0};
    long long off = j->done_off;
    j->done_off = 0; /* the whole file, under the lock: nobody appends meanwhile */
    join_done_read(j, collect_id, &seen);
    j->done_off = off > j->done_off ? off : j->done_off;
    if (access(mark, F_OK) == 0 ||
        id_index_build(&ix, seen.n ? seen.ids[0] : "", sizeof seen.ids[0], seen.n) != 0)
        goto out;
    /* a run without its line (its process was killed between its claim and the line) gets
     * it now from its claim; a run whose claim does not say done stops the compaction */
    for (int i = 0; i < n; i++) {
        if (!ids[i][0] || (seen.n && id_index_find(&ix, ids[i]) >= 0)) continue;
        JoinResult res;
        claim_path(j, ids[i], path, sizeof path);
        if (read_claim(path, holder) != C_DONE || !join_result(j, ids[i], &res)) goto out;
        char line[192];
        int len = snprintf(line, sizeof line, "%s %s %a %d %a %a\n", ids[i],
                           run_status_names[res.status], res.final_val_loss, res.unstable ? 1 : 0,
                           res.train_seconds, res.final_test_loss);
        if (write(j->done_fd, line, (size_t)len) != len) {
            snprintf(err, ABL_ERR_MAX, "cannot append to %s/done: %s", j->dir, strerror(errno));
            rc = -1;
            goto out;
        }
    }
    /* join/done now says what the claims said, durably, before any claim goes */
    if (fsync(j->done_fd) != 0) {
        snprintf(err, ABL_ERR_MAX, "cannot sync %s/done: %s", j->dir, strerror(errno));
        rc = -1;
        goto out;
    }
    int removed = 0;
    for (int i = 0; i < n; i++) {
        if (!ids[i][0]) continue;
        claim_path(j, ids[i], path, sizeof path);
        removed += unlink(path) == 0;
    }
    char tmp[ABL_PATH_MAX + JOIN_NAME_MAX + 48];
    snprintf(tmp, sizeof tmp, "%s.%s", mark, j->name);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);
    char text[64];
    int len = snprintf(text, sizeof text, "%d claims\n", removed);
    int ok = fd >= 0 && write(fd, text, (size_t)len) == len;
    if (fd >= 0) close(fd);
    if (!ok || rename(tmp, mark) != 0) {
        unlink(tmp);
        snprintf(err, ABL_ERR_MAX, "cannot write %s: %s", mark, strerror(errno));
        rc = -1;
        goto out;
    }
    rc = removed;
out:
    flock(j->lock_fd, LOCK_UN);
    id_index_free(&ix);
    free(seen.ids);
    return rc;
}

long join_claim_reads(void) {
    return g_claim_reads;
}

int join_result(Join *j, const char *id, JoinResult *res) {
    char path[ABL_PATH_MAX + 64], t[CLAIM_TEXT_MAX + 1];
    *res = (JoinResult){RUN_DONE, NAN, 0, 0, NAN};
    claim_path(j, id, path, sizeof path);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, t, CLAIM_TEXT_MAX);
    close(fd);
    if (n <= 0) return 0;
    t[n] = '\0';
    char *line = strchr(t, '\n');
    if (strncmp(t, "done ", 5) != 0 || !line || strncmp(line + 1, "result ", 7) != 0) return 0;
    return parse_result(line + 8, res);
}

int join_holds(Join *j, const char *id) {
    char path[ABL_PATH_MAX + 64], holder[JOIN_NAME_MAX];
    claim_path(j, id, path, sizeof path);
    ClaimState s = read_claim(path, holder);
    return s == C_UNREADABLE || (s == C_HELD && !strcmp(holder, j->name));
}

/* ---------------------------------------------------------------- listing */

static int plan_journal_path(const char *out_path, char *buf, size_t n) {
    char base[ABL_PATH_MAX];
    if (journal_dir_for(out_path, base, sizeof base) != 0) return -1;
    return snprintf(buf, n, "%s/join/plan_journal", base) < (int)n ? 0 : -1;
}

int join_plan_journaled(const char *out_path) {
    char path[ABL_PATH_MAX + 32];
    return plan_journal_path(out_path, path, sizeof path) == 0 && access(path, F_OK) == 0;
}

/* tmp + link, as the plan file: the first process to get there names its journal */
int join_mark_plan_journaled(const char *out_path, const char *journal_path,
                             char err[ABL_ERR_MAX]) {
    char path[ABL_PATH_MAX + 32], tmp[ABL_PATH_MAX + 64];
    if (plan_journal_path(out_path, path, sizeof path) != 0)
        return snprintf(err, ABL_ERR_MAX, "%s: path too long", out_path), -1;
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    size_t len = strlen(journal_path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);
    int ok = fd >= 0 && write(fd, journal_path, len) == (ssize_t)len && write(fd, "\n", 1) == 1 &&
             fsync(fd) == 0;
    if (fd >= 0) close(fd);
    if (ok && link(tmp, path) != 0 && errno != EEXIST) ok = 0;
    int e = errno;
    unlink(tmp);
    if (!ok) return snprintf(err, ABL_ERR_MAX, "cannot write %s: %s", path, strerror(e)), -1;
    return 0;
}

int join_forget(Join *j, const char *out_path, char err[ABL_ERR_MAX]) {
    char dir[ABL_PATH_MAX + JOIN_NAME_MAX + 16], path[sizeof dir + 16];
    snprintf(dir, sizeof dir, "%s/procs/%s", j->dir, j->name);
    int busy, fd = join_view_lock(out_path, -1, &busy), rc = 0;
    static const char *const files[] = {"journal", "alive"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        if (unlink(path) != 0 && errno != ENOENT) rc = -1;
    }
    if (j->alive[0]) unlink(j->alive);
    if (rc != 0 || rmdir(dir) != 0) {
        snprintf(err, ABL_ERR_MAX, "cannot remove %s: %s", dir, strerror(errno));
        rc = -1;
    }
    if (fd >= 0) close(fd);
    return rc;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)ftw;
    return (flag == FTW_DP ? rmdir(path) : unlink(path)) == 0 || errno == ENOENT ? 0 : -1;
}

int join_remove(const char *out_path, char err[ABL_ERR_MAX]) {
    char **paths, base[ABL_PATH_MAX], dir[ABL_PATH_MAX + 8];
    int n;
    if (!join_exists(out_path)) return 0;
    if (join_list_journals(out_path, &paths, &n, err) != 0) return -1;
    int *locks = calloc((size_t)n + 1, sizeof *locks), rc = locks ? 0 : -1;
    if (!locks) snprintf(err, ABL_ERR_MAX, "out of memory");
    for (int k = 0; k < n && rc == 0; k++) /* held until the tree is gone */
        if ((locks[k] = journal_lock_existing(paths[k], err)) == -1) rc = -1;
    if (rc == 0) {
        journal_dir_for(out_path, base, sizeof base);
        snprintf(dir, sizeof dir, "%s/join", base);
        if (nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0) {
            snprintf(err, ABL_ERR_MAX, "cannot remove %s: %s", dir, strerror(errno));
            rc = -1;
        }
    }
    for (int k = 0; locks && k < n; k++)
        if (locks[k] >= 0) close(locks[k]);
    free(locks);
    join_free_list(paths, n);
    return rc;
}
