#include "par.h"

#include <pthread.h>

/* A fixed pool: workers sleep on a condition variable between jobs (no spinning, so they
 * leave the cores to OpenBLAS's threads during the GEMMs). One job at a time. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    int threads;  /* chunks of a job: the caller + threads - 1 workers */
    int started;  /* workers running */
    unsigned gen; /* job number */
    int pending;  /* workers still busy with the current job */
    void (*fn)(void *, size_t, size_t, int);
    void *ctx;
    size_t n, piece;
    int busy; /* a job is running */
} P = {.mu = PTHREAD_MUTEX_INITIALIZER,
       .go = PTHREAD_COND_INITIALIZER,
       .done = PTHREAD_COND_INITIALIZER,
       .threads = 1};

static void run_chunk(int c) {
    size_t b = (size_t)c * P.piece, e = b + P.piece;
    if (e > P.n) e = P.n;
    if (b < e) P.fn(P.ctx, b, e, c);
}

static void *worker(void *arg) {
    int id = (int)(size_t)arg;
    unsigned seen = 0;
    pthread_mutex_lock(&P.mu);
    for (;;) {
        while (P.gen == seen)
            pthread_cond_wait(&P.go, &P.mu);
        seen = P.gen;
        int active = id < P.threads;
        pthread_mutex_unlock(&P.mu);
        if (active) run_chunk(id);
        pthread_mutex_lock(&P.mu);
        if (active && --P.pending == 0) pthread_cond_signal(&P.done);
    }
    return NULL;
}

void par_set_threads(int k) {
    if (k < 1) k = 1;
    if (k > PAR_MAX_THREADS) k = PAR_MAX_THREADS;
    pthread_mutex_lock(&P.mu);
    while (P.started < k - 1) { /* workers 1 .. k-1; the caller is chunk 0 */
        pthread_t t;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        int ok = pthread_create(&t, &at, worker, (void *)(size_t)(P.started + 1)) == 0;
        pthread_attr_destroy(&at);
        if (!ok) break; /* fewer threads: still correct */
        P.started++;
    }
    P.threads = k <= P.started + 1 ? k : P.started + 1;
    pthread_mutex_unlock(&P.mu);
}

static size_t min_work = PAR_MIN_WORK;

void par_set_min_work(long work) {
    min_work = work > 0 ? (size_t)work : PAR_MIN_WORK;
}

size_t par_grain(size_t unit_work, size_t multiple) {
    if (multiple < 1) multiple = 1;
    size_t g = unit_work ? (min_work + unit_work - 1) / unit_work : min_work;
    g = (g + multiple - 1) / multiple * multiple;
    return g ? g : multiple;
}

int par_threads(void) {
    return P.threads;
}

void par_for(size_t n, size_t grain, void (*fn)(void *ctx, size_t begin, size_t end, int chunk),
             void *ctx) {
    if (grain < 1) grain = 1;
    size_t k = (size_t)P.threads;
    /* one job at a time: a par_for from inside a piece, or from another thread while a job
     * runs, runs inline (the same bits: pieces never change results) */
    if (k <= 1 || n < 2 * grain || __atomic_exchange_n(&P.busy, 1, __ATOMIC_ACQUIRE)) {
        if (n) fn(ctx, 0, n, 0);
        return;
    }
    size_t units = (n + grain - 1) / grain;
    if (k > units) k = units;
    size_t piece = (units + k - 1) / k * grain;
    pthread_mutex_lock(&P.mu);
    P.fn = fn;
    P.ctx = ctx;
    P.n = n;
    P.piece = piece;
    P.pending = P.threads - 1;
    P.gen++;
    pthread_cond_broadcast(&P.go);
    pthread_mutex_unlock(&P.mu);
    run_chunk(0);
    pthread_mutex_lock(&P.mu);
    while (P.pending > 0)
        pthread_cond_wait(&P.done, &P.mu);
    pthread_mutex_unlock(&P.mu);
    __atomic_store_n(&P.busy, 0, __ATOMIC_RELEASE);
}
