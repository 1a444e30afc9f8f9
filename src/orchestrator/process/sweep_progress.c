#include "util/log.h"
#include "sweep_progress.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/json.h"

void progress_init(Progress *p, int total, int finished_before, double cost_to_run) {
    memset(p, 0, sizeof *p);
    p->total = total;
    p->finished = finished_before;
    p->start = clock_seconds();
    p->cost_left = cost_to_run;
    p->best = INFINITY;
    p->tty = isatty(STDERR_FILENO);
}

static void format_eta(const Progress *p, char *buf, size_t n) {
    double elapsed = clock_seconds() - p->start;
    if (p->cost_done <= 0 || elapsed <= 0) {
        snprintf(buf, n, "ETA --");
        return;
    }
    double eta = p->cost_left / (p->cost_done / elapsed);
    const char *le = p->eta_upper ? "<= " : ""; /* runs a settled contrast drops shorten it */
    if (eta >= 3600)
        snprintf(buf, n, "ETA %s%dh%02dm", le, (int)(eta / 3600), (int)fmod(eta / 60, 60));
    else
        snprintf(buf, n, "ETA %s%dm%02ds", le, (int)(eta / 60), (int)fmod(eta, 60));
}

/* Names (a grid value is any string of the spec) and contrasts are shown as text_escape
 * shows them, as plan and inspect do: a value cannot move the cursor or retitle the terminal
 * (last is escaped by its maker). */
static void print_status(Progress *p, const char *last) {
    char eta[40], name[4 * sizeof p->best_name], best[sizeof name + 64] = "";
    char contrasts[2 * sizeof p->contrasts];
    format_eta(p, eta, sizeof eta);
    if (isfinite(p->best))
        snprintf(best, sizeof best, "  best %.4f (%s)", p->best,
                 text_escape(p->best_name, name, sizeof name));
    text_escape(p->contrasts, contrasts, sizeof contrasts);
    if (p->tty)
        log_status("[%d/%d done, %d running, %d failed, %d diverged]%s  %s%s%s", p->finished,
                   p->total, p->running, p->failed, p->diverged, best, eta,
                   contrasts[0] ? "  " : "", contrasts);
    else
        log_line("[%d/%d] %s  (%d running, %d failed, %d diverged)%s  %s%s%s", p->finished,
                 p->total, last ? last : "", p->running, p->failed, p->diverged, best, eta,
                 contrasts[0] ? "  " : "", contrasts);
}

void progress_run_started(Progress *p) {
    p->running++;
    if (p->tty) print_status(p, NULL);
}

void progress_run_stopped(Progress *p) {
    if (p->running > 0) p->running--;
}

void progress_run_finished(Progress *p, const char *name, const EndEvent *end, double cost) {
    if (p->running > 0) p->running--;
    p->finished++;
    p->cost_done += cost;
    p->cost_left -= cost;
    if (p->cost_left < 0) p->cost_left = 0;
    if (end->status == RUN_FAILED) p->failed++;
    if (end->status == RUN_DIVERGED) p->diverged++;
    if (end->status == RUN_DONE && end->final_val_loss < p->best) {
        p->best = end->final_val_loss;
        snprintf(p->best_name, sizeof p->best_name, "%s", name);
    }
    char shown[1024], msg[4 * sizeof end->message], last[sizeof shown + sizeof msg + 128];
    char flag[96] = ""; /* done but flagged (docs/metrics.md, "Instability"): said here too */
    text_escape(name, shown, sizeof shown);
    text_escape(end->message, msg, sizeof msg);
    if (end->instability > INSTAB_NONE && end->instability < INSTAB_COUNT)
        snprintf(flag, sizeof flag, ", unstable (%s) from step %ld",
                 instability_names[end->instability], end->unstable_step);
    if (end->status == RUN_DONE && end->message[0]) /* a tuning run stopped at a rung */
        snprintf(last, sizeof last, "%s done: val_loss %.4f, %s", shown, end->final_val_loss, msg);
    else if (end->status == RUN_DONE)
        snprintf(last, sizeof last, "%s done: val_loss %.4f, %.0f tok/s%s", shown,
                 end->final_val_loss, end->tokens_per_s, flag);
    else
        snprintf(last, sizeof last, "%s %s: %s", shown,
                 end->status == RUN_FAILED ? "FAILED" : "diverged", msg);
    if (p->tty && end->status == RUN_FAILED) log_line("%s", last);
    print_status(p, last);
}

void progress_run_elsewhere(Progress *p, double cost) {
    p->finished++;
    p->cost_left -= cost;
    if (p->cost_left < 0) p->cost_left = 0;
}

void progress_finish(Progress *p) {
    if (p->tty) fputc('\n', stderr);
}
