#define _POSIX_C_SOURCE 200809L
#include "par.h"

#include <pthread.h>
#include <time.h>

/* A fixed pool, one job at a time. Between jobs a worker spins for PAR_SPIN_NS before it
 * sleeps on a condition variable, and the caller spins as long for the last piece before
 * it sleeps: a book step runs ~170 jobs, and on a VM each wake-up through the condition
 * variable took ~30 us (the caller's piece done, the worker's not begun), 5-10 ms of a
 * 2-thread step of ~135 ms. par_idle sends spinning workers to sleep at once, for callers
 * that hand the cores to another pool (OpenBLAS's threads). */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    int threads;      /* chunks of a job: the caller + threads - 1 workers */
    int started;      /* workers running */
    unsigned gen;     /* job number: written under mu, read by spinning workers */
    unsigned rest;    /* par_idle's count: a change ends every spin */
    unsigned pending; /* workers still busy with the current job */
    int sleepers;     /* workers waiting on `go` */
    int waiting;      /* the caller waits on `done` */
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

static long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long)t.tv_sec * 1000000000L + t.tv_nsec;
}

static inline void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* Spin until *x != value (want_change) or *x == value (!want_change), for at most
 * PAR_SPIN_NS or until par_idle: 1 when the wait ended. */
static int spin(const unsigned *x, unsigned value, int want_change) {
    unsigned rest = __atomic_load_n(&P.rest, __ATOMIC_RELAXED);
    long end = now_ns() + PAR_SPIN_NS;
    for (;;) {
        for (int i = 0; i < 64; i++) {
            if ((__atomic_load_n(x, __ATOMIC_ACQUIRE) != value) == want_change) return 1;
            relax();
        }
        if (__atomic_load_n(&P.rest, __ATOMIC_RELAXED) != rest || now_ns() > end) return 0;
    }
}

static void *worker(void *arg) {
    int id = (int)(size_t)arg;
    unsigned seen = 0;
    for (;;) {
        /* a worker outside the current count sleeps at once: it has no piece */
        int spinning = id < __atomic_load_n(&P.threads, __ATOMIC_RELAXED);
        if (!spinning || !spin(&P.gen, seen, 1)) {
            pthread_mutex_lock(&P.mu);
            P.sleepers++;
            while (__atomic_load_n(&P.gen, __ATOMIC_ACQUIRE) == seen)
                pthread_cond_wait(&P.go, &P.mu);
            P.sleepers--;
            pthread_mutex_unlock(&P.mu);
        }
        seen = __atomic_load_n(&P.gen, __ATOMIC_ACQUIRE);
        if (id >= __atomic_load_n(&P.threads, __ATOMIC_RELAXED)) continue;
        run_chunk(id);
        if (__atomic_sub_fetch(&P.pending, 1, __ATOMIC_ACQ_REL) == 0) {
            pthread_mutex_lock(&P.mu);
            if (P.waiting) pthread_cond_signal(&P.done);
            pthread_mutex_unlock(&P.mu);
        }
    }
    return NULL;
}

void par_idle(void) {
    __atomic_add_fetch(&P.rest, 1, __ATOMIC_RELAXED);
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
    __atomic_store_n(&P.threads, k <= P.started + 1 ? k : P.started + 1, __ATOMIC_RELAXED);
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
    __atomic_store_n(&P.pending, (unsigned)P.threads - 1, __ATOMIC_RELAXED);
    __atomic_store_n(&P.gen, P.gen + 1, __ATOMIC_RELEASE); /* publishes the job */
    if (P.sleepers) pthread_cond_broadcast(&P.go);
    pthread_mutex_unlock(&P.mu);
    run_chunk(0);
    if (!spin(&P.pending, 0, 0)) {
        pthread_mutex_lock(&P.mu);
        P.waiting = 1;
        while (__atomic_load_n(&P.pending, __ATOMIC_ACQUIRE) > 0)
            pthread_cond_wait(&P.done, &P.mu);
        P.waiting = 0;
        pthread_mutex_unlock(&P.mu);
    }
    __atomic_store_n(&P.busy, 0, __ATOMIC_RELEASE);
}
