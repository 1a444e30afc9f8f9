#include "sinks.h"

#include <errno.h>
#include <string.h>

#include "util/clock.h"
#include "util/file_io.h"
#include "event_schema.h"
#include "util/json.h"
#include "knobs.h"

void event_json(Buf *b, const Event *ev) {
    const EventSchema *s = &event_schema[ev->kind];
    buf_printf(b, "{\"event\":\"%s\"", s->name);
    field_json_members(b, event_cbody(ev), s->fields, s->n_fields, 0, FIELD_JSON_NUMBER);
    if (ev->kind == EV_START && ev->u.start.config) {
        buf_adds(b, ",\"config\":");
        knob_config_json_buf(ev->u.start.config, b);
    }
    buf_addc(b, '}');
}

void json_print_event(FILE *f, const Event *ev) {
    Buf b = {0};
    event_json(&b, ev);
    if (b.len) fwrite(b.p, 1, b.len, f);
    buf_free(&b);
}

static void json_emit(EventSink *self, const Event *ev) {
    JsonSink *s = (JsonSink *)self;
    if (s->write_errno) return;
    Buf b = {0};
    event_json(&b, ev);
    buf_addc(&b, '\n');
    if (b.oom)
        s->write_errno = ENOMEM;
    else if (file_write_record(s->out, b.p, b.len) != 0)
        s->write_errno = errno;
    buf_free(&b);
}

void json_sink_init(JsonSink *s, FILE *out) {
    s->base.emit = json_emit;
    s->out = out;
    s->write_errno = 0;
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
        double t = clock_seconds();
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
        /* the model's text is the corpus's characters: shown as lines, with every other
         * control character escaped as plan and inspect show them (an ESC in the corpus
         * would otherwise recolour or retitle the terminal) */
        const SampleEvent *sm = &ev->u.sample;
        Buf text = {0};
        text_escape_buf(&text, sm->text, (size_t)sm->text_len, 1);
        fprintf(f, "--- %s sample (%.0f tok/s%s) ---\n%.*s\n---\n", sample_kind_names[sm->kind],
                sm->tokens_per_s, sm->degenerate ? ", DEGENERATE" : "",
                text.oom ? 0 : (int)text.len, text.p ? text.p : "");
        buf_free(&text);
        break;
    }
    case EV_END: {
        const EndEvent *e = &ev->u.end;
        fprintf(f, "%s: %ld steps, %ld tokens in %.1fs (%.0f tok/s), final val_loss %.4f\n",
                run_status_names[e->status], e->steps, e->tokens, e->train_seconds, e->tokens_per_s,
                e->final_val_loss);
        if (e->message[0]) {
            char msg[4 * sizeof e->message]; /* may quote a spec's string */
            fprintf(f, "%s\n", text_escape(e->message, msg, sizeof msg));
        }
        if (e->instability > INSTAB_NONE && e->instability < INSTAB_COUNT)
            fprintf(f, "unstable (%s): training loss %.4g at step %ld (docs/metrics.md)\n",
                    instability_names[e->instability], e->unstable_loss, e->unstable_step);
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
