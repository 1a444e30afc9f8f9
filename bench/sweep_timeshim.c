/* sweep_timeshim: an LD_PRELOAD library (MPI profiling interface) that timestamps the
 * sweep protocol of an unmodified `ablate run`, for bench/sweep_dispatch.sh.
 *
 *   mpicc -O2 -shared -fPIC -I src -o libsweep_timeshim.so bench/sweep_timeshim.c
 *   SWEEP_SHIM_DIR=DIR mpirun -x SWEEP_SHIM_DIR -x LD_PRELOAD=.../libsweep_timeshim.so \
 *       -n 3 ablate run SPEC -o OUT.h5
 *
 * It wraps MPI_Init, MPI_Send, MPI_Isend, MPI_Recv and MPI_Finalize (each calls the PMPI_
 * entry) and,
 * at MPI_Finalize, writes DIR/rank<R>.tsv with one line per event, all times in seconds of
 * CLOCK_MONOTONIC (one clock for every process of the machine):
 *   init      R t                 MPI_Init returned
 *   assign    R t run             worker: ASSIGN received (the run starts)
 *   end       R t run             worker: END about to be sent (the run is over)
 *   send_assign R t run dest      rank 0: ASSIGN about to be sent
 *   recv_end  R t run src         rank 0: END received
 *   finalize  R t                 MPI_Finalize entered
 *   cpu       R utime stime maxrss_kib   the process (all threads), at MPI_Finalize
 *   cpu_main  R utime stime 0            its main thread alone
 * Tags and the leading u32 run index of RunAssignment / WorkerEnd are those of
 * src/orchestrator/process/protocol.h. Nothing else is touched:
 * the cost is a clock_gettime per ASSIGN/END message. */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "orchestrator/process/protocol.h" /* the tags: compiled with -I src */

#define SHIM_TAG_ASSIGN TAG_ASSIGN
#define SHIM_TAG_END    TAG_END
#define SHIM_MAX        250000 /* rank 0 records 2 a run: 10^5 runs (~8 MB touched) */

typedef struct {
    char what[12];
    double t;
    long a, b;
} Rec;

static Rec *recs;
static int nrec, my_rank = -1;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void rec(const char *what, double t, long a, long b) {
    if (!recs) recs = calloc(SHIM_MAX, sizeof *recs);
    if (!recs || nrec >= SHIM_MAX) return;
    Rec *r = &recs[nrec++];
    snprintf(r->what, sizeof r->what, "%s", what);
    r->t = t;
    r->a = a;
    r->b = b;
}

static long run_of(const void *buf, int count) {
    uint32_t run = 0;
    if (buf && count >= 4) memcpy(&run, buf, 4);
    return (long)run;
}

int MPI_Init(int *argc, char ***argv) {
    int rc = PMPI_Init(argc, argv);
    PMPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
    rec("init", now_s(), 0, 0);
    return rc;
}

int MPI_Send(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm) {
    if (tag == SHIM_TAG_END && my_rank > 0) rec("end", now_s(), run_of(buf, count), 0);
    if (tag == SHIM_TAG_ASSIGN && my_rank == 0)
        rec("send_assign", now_s(), run_of(buf, count), dest);
    return PMPI_Send(buf, count, dt, dest, tag, comm);
}

/* rank 0 hands out assignments with MPI_Isend (sweep.c): the same record */
int MPI_Isend(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm,
              MPI_Request *req) {
    if (tag == SHIM_TAG_ASSIGN && my_rank == 0)
        rec("send_assign", now_s(), run_of(buf, count), dest);
    return PMPI_Isend(buf, count, dt, dest, tag, comm, req);
}

int MPI_Recv(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
             MPI_Status *status) {
    MPI_Status st;
    int rc =
        PMPI_Recv(buf, count, dt, source, tag, comm, status == MPI_STATUS_IGNORE ? &st : status);
    const MPI_Status *s = status == MPI_STATUS_IGNORE ? &st : status;
    if (rc == MPI_SUCCESS && s->MPI_TAG == SHIM_TAG_ASSIGN && my_rank > 0)
        rec("assign", now_s(), run_of(buf, count), 0);
    if (rc == MPI_SUCCESS && s->MPI_TAG == SHIM_TAG_END && my_rank == 0)
        rec("recv_end", now_s(), run_of(buf, count), s->MPI_SOURCE);
    return rc;
}

int MPI_Finalize(void) {
    rec("finalize", now_s(), 0, 0);
    const char *dir = getenv("SWEEP_SHIM_DIR");
    if (dir && my_rank >= 0) {
        char path[4096];
        snprintf(path, sizeof path, "%s/rank%d.tsv", dir, my_rank);
        FILE *f = fopen(path, "w");
        if (f) {
            for (int i = 0; i < nrec; i++)
                fprintf(f, "%s\t%d\t%.6f\t%ld\t%ld\n", recs[i].what, my_rank, recs[i].t, recs[i].a,
                        recs[i].b);
            struct rusage ru;
            getrusage(RUSAGE_SELF, &ru);
            fprintf(f, "cpu\t%d\t%.6f\t%.6f\t%ld\n", my_rank,
                    (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec,
                    (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec, ru.ru_maxrss);
            /* the main thread alone (the one that serves the workers; the group sync and the
             * live view have threads of their own): /proc/self/task/PID/stat, in ticks */
            char tpath[64], line[1024];
            snprintf(tpath, sizeof tpath, "/proc/self/task/%d/stat", (int)getpid());
            FILE *t = fopen(tpath, "r");
            if (t && fgets(line, sizeof line, t)) {
                const char *p = strrchr(line, ')'); /* fields after the command name */
                unsigned long ut = 0, st = 0;
                if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut,
                                &st) == 2) {
                    double tick = (double)sysconf(_SC_CLK_TCK);
                    fprintf(f, "cpu_main\t%d\t%.6f\t%.6f\t0\n", my_rank, (double)ut / tick,
                            (double)st / tick);
                }
            }
            if (t) fclose(t);
            fclose(f);
        }
    }
    free(recs);
    recs = NULL;
    return PMPI_Finalize();
}
