/* The plain queue (scheduler.h): one process trains every unfinished run once, most
 * expensive first; a requeued or cancelled run goes back to the front. */
#include <stdio.h>
#include <stdlib.h>

#include "util/log.h"
#include "scheduler.h"

typedef struct {
    Scheduler base;
    int *queue; /* journal indices; queue[next..n_queue) are still to be taken */
    int n_queue, next;
    unsigned char *out; /* taken and not yet back or ended */
} Queue;

static int q_start(Scheduler *s, const SchedRun *runs, int n) {
    Queue *q = (Queue *)s;
    if (sched_keep_runs(s, runs, n) != 0 || !(q->queue = malloc(sizeof(int) * (size_t)(n + 1))) ||
        !(q->out = calloc((size_t)n + 1, 1)))
        return -1;
    q->n_queue = sched_order(runs, n, q->queue);
    q->next = 0;
    return 0;
}

static int q_take(Scheduler *s, double now) {
    Queue *q = (Queue *)s;
    (void)now;
    if (q->next >= q->n_queue) return -1;
    int run = q->queue[q->next++];
    q->out[run] = 1;
    return run;
}

static int q_more(Scheduler *s) {
    Queue *q = (Queue *)s;
    return q->next < q->n_queue;
}

/* Back to the front: the slot before next was taken, so it is free again. */
static void q_requeue(Scheduler *s, int run) {
    Queue *q = (Queue *)s;
    if (run < 0 || run >= s->n || !q->out[run]) return;
    q->out[run] = 0;
    q->queue[--q->next] = run;
}

static void q_ended(Scheduler *s, int run, const EndEvent *end) {
    Queue *q = (Queue *)s;
    (void)end;
    if (run >= 0 && run < s->n) q->out[run] = 0;
}

static void q_tick(Scheduler *s, double now) {
    (void)s, (void)now;
}

static int q_abandoned(Scheduler *s, int run) {
    (void)s, (void)run;
    return 0; /* nobody else trains our runs */
}

static int q_complete_on_start(Scheduler *s, int n_live, const char *out_path) {
    (void)s, (void)n_live, (void)out_path;
    return 0; /* a plain sweep rebuilds its view and ends as usual */
}

static void q_announce(Scheduler *s, int n_live, int n_done, int n_resumed, const char *where,
                       const char *out_path) {
    Queue *q = (Queue *)s;
    /* after a requeue or a resume, say that the runs in progress continue, not restart */
    char resumed[64] = "";
    if (n_resumed)
        snprintf(resumed, sizeof resumed, " (%d resumed from their checkpoints)", n_resumed);
    log_info("%d runs planned (%d already finished), %d to run%s on %s -> %s", n_live, n_done,
             q->n_queue, resumed, where, out_path);
}

static void q_close(Scheduler *s) {
    Queue *q = (Queue *)s;
    free(q->queue);
    free(q->out);
    sched_free_runs(s);
    free(q);
}

static const SchedOps queue_ops = {
    .start = q_start,
    .take = q_take,
    .more = q_more,
    .requeue = q_requeue,
    .cancel = q_requeue, /* given up: whoever trains it next is this process, later */
    .ended = q_ended,
    .tick = q_tick,
    .abandoned = q_abandoned,
    .announce = q_announce,
    .complete_on_start = q_complete_on_start,
    .close = q_close,
    .continue_flag = "--resume",
    .shared = 0,
};

Scheduler *sched_queue_open(const SchedHost *host, char err[ABL_ERR_MAX]) {
    Queue *q = calloc(1, sizeof *q);
    if (!q) return snprintf(err, ABL_ERR_MAX, "out of memory"), NULL;
    q->base.ops = &queue_ops;
    if (host) q->base.host = *host;
    return &q->base;
}
