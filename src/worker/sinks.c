#include "sinks.h"

#include <string.h>
#include <time.h>

#include "json.h"
#include "knobs.h"

const char *const event_kind_names[EV_KIND_COUNT] = {"start", "step",   "eval",
                                                     "act",   "sample", "end"};
const char *const run_status_names[RUN_STATUS_COUNT] = {"done", "diverged", "failed",
                                                        "interrupted"};
const char *const sample_kind_names[SAMPLE_KIND_COUNT] = {"greedy", "temperature"};

static void num(FILE *f, const char *key, double v) {
    fprintf(f, ",\"%s\":", key);
    json_print_number(f, v);
}

void json_print_event(FILE *f, const Event *ev) {
    fprintf(f, "{\"event\":\"%s\"", event_kind_names[ev->kind]);
    switch (ev->kind) {
    case EV_START: {
        const StartEvent *s = &ev->u.start;
        num(f, "params", (double)s->params);
        num(f, "flops_per_token", s->flops_per_token);
        num(f, "kv_bytes_per_token", s->kv_bytes_per_token);
        fputs(",\"blas_core\":", f);
        json_print_string(f, s->blas_core);
        if (s->config) {
            static char buf[16384];
            knob_config_json(s->config, buf, sizeof buf);
            fprintf(f, ",\"config\":%s", buf);
        }
        break;
    }
    case EV_STEP: {
        const StepEvent *s = &ev->u.step;
        num(f, "step", (double)s->step);
        num(f, "tokens", (double)s->tokens);
        num(f, "loss", s->loss);
        num(f, "lr", s->lr);
        num(f, "grad_norm", s->grad_norm);
        num(f, "time", s->time);
        break;
    }
    case EV_EVAL:
        num(f, "step", (double)ev->u.eval.step);
        num(f, "val_loss", ev->u.eval.val_loss);
        num(f, "val_acc", ev->u.eval.val_acc);
        break;
    case EV_ACT: {
        const ActEvent *a = &ev->u.act;
        num(f, "step", (double)a->step);
        num(f, "layer", a->layer);
        num(f, "zero_frac", a->zero_frac);
        num(f, "max", a->max);
        num(f, "min", a->min);
        num(f, "mean", a->mean);
        num(f, "rms", a->rms);
        num(f, "resid_rms", a->resid_rms);
        num(f, "grad_norm", a->grad_norm);
        fputs(",\"attn_entropy\":[", f);
        for (int h = 0; h < a->n_head; h++) {
            if (h) fputc(',', f);
            json_print_number(f, a->attn_entropy[h]);
        }
        fputc(']', f);
        break;
    }
    case EV_SAMPLE: {
        const SampleEvent *s = &ev->u.sample;
        fprintf(f, ",\"kind\":\"%s\"", sample_kind_names[s->kind]);
        num(f, "temperature", s->temperature);
        num(f, "tokens", s->n_tokens);
        fputs(",\"text\":", f);
        json_print_string(f, s->text);
        fputs(",\"ids\":[", f);
        for (int i = 0; i < s->n_ids; i++)
            fprintf(f, "%s%ld", i ? "," : "", (long)s->ids[i]);
        fputc(']', f);
        num(f, "tokens_per_s", s->tokens_per_s);
        num(f, "distinct_ratio", s->distinct_ratio);
        num(f, "longest_run", s->longest_run);
        num(f, "top_token_frac", s->top_token_frac);
        fprintf(f, ",\"degenerate\":%s", s->degenerate ? "true" : "false");
        break;
    }
    case EV_END: {
        const EndEvent *e = &ev->u.end;
        fprintf(f, ",\"status\":\"%s\"", run_status_names[e->status]);
        num(f, "steps", (double)e->steps);
        num(f, "tokens", (double)e->tokens);
        num(f, "train_seconds", e->train_seconds);
        num(f, "tokens_per_s", e->tokens_per_s);
        num(f, "final_val_loss", e->final_val_loss);
        num(f, "final_val_acc", e->final_val_acc);
        if (e->message[0]) {
            fputs(",\"message\":", f);
            json_print_string(f, e->message);
        }
        break;
    }
    default:
        break;
    }
    fputc('}', f);
}

static void json_emit(EventSink *self, const Event *ev) {
    JsonSink *s = (JsonSink *)self;
    json_print_event(s->out, ev);
    fputc('\n', s->out);
    fflush(s->out);
}

void json_sink_init(JsonSink *s, FILE *out) {
    s->base.emit = json_emit;
    s->out = out;
}

static double wall(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void progress_emit(EventSink *self, const Event *ev) {
    ProgressSink *s = (ProgressSink *)self;
    FILE *f = s->out;
    switch (ev->kind) {
    case EV_START:
        fprintf(f, "ablate: %ld parameters, %.3g FLOPs/token, %.0f KV-cache bytes/token, BLAS %s\n",
                ev->u.start.params, ev->u.start.flops_per_token, ev->u.start.kv_bytes_per_token,
                ev->u.start.blas_core);
        break;
    case EV_STEP: {
        const StepEvent *st = &ev->u.step;
        double t = wall();
        if (t - s->last_print < 1.0 && st->step != s->total_steps) break;
        s->last_print = t;
        if (s->total_steps > 0)
            fprintf(f, "step %ld/%ld", st->step, s->total_steps);
        else
            fprintf(f, "step %ld", st->step);
        fprintf(f, "  loss %.4f  lr %.3g  grad %.3g  %.0f tok/s  %.1fs\n", st->loss, st->lr,
                st->grad_norm, st->time > 0 ? st->tokens / st->time : 0.0, st->time);
        break;
    }
    case EV_EVAL:
        fprintf(f, "eval step %ld  val_loss %.4f  val_acc %.4f\n", ev->u.eval.step,
                ev->u.eval.val_loss, ev->u.eval.val_acc);
        break;
    case EV_SAMPLE: {
        const SampleEvent *sm = &ev->u.sample;
        fprintf(f, "--- %s sample (%.0f tok/s%s) ---\n%s\n---\n", sample_kind_names[sm->kind],
                sm->tokens_per_s, sm->degenerate ? ", DEGENERATE" : "", sm->text);
        break;
    }
    case EV_END: {
        const EndEvent *e = &ev->u.end;
        fprintf(f, "%s: %ld steps, %ld tokens in %.1fs (%.0f tok/s), final val_loss %.4f\n",
                run_status_names[e->status], e->steps, e->tokens, e->train_seconds, e->tokens_per_s,
                e->final_val_loss);
        if (e->message[0]) fprintf(f, "%s\n", e->message);
        break;
    }
    default:
        break;
    }
}

void progress_sink_init(ProgressSink *s, FILE *out, long total_steps) {
    memset(s, 0, sizeof *s);
    s->base.emit = progress_emit;
    s->out = out;
    s->total_steps = total_steps;
}
