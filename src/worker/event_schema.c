#include "event_schema.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const char *const event_kind_names[EV_KIND_COUNT] = {"start", "step",   "eval",
                                                     "act",   "sample", "end"};
const char *const run_status_names[RUN_STATUS_COUNT] = {"done", "diverged", "failed", "interrupted",
                                                        "not_needed"};
const char *const sample_kind_names[SAMPLE_KIND_COUNT] = {"greedy", "temperature"};
const char *const instability_names[INSTAB_COUNT] = {"none", "nonfinite", "above_uniform",
                                                     "loss_spike"};
const char *const repetition_names[REP_COUNT] = {"none", "token_run", "ngram_loop"};
const char *const act_split_names[ACT_SPLIT_COUNT] = {"train", "val"};

#define EF_LENOFF_FT_LONG(S, name)   0
#define EF_LENOFF_FT_INT(S, name)    0
#define EF_LENOFF_FT_DOUBLE(S, name) 0
#define EF_LENOFF_FT_BOOL(S, name)   0
#define EF_LENOFF_FT_ENUM(S, name)   0
#define EF_LENOFF_FT_STR(S, name)    0
#define EF_LENOFF_FT_TEXT(S, name)   offsetof(S, name##_len)
#define EF_LENOFF_FT_HEADS(S, name)  0
#define EF_ROW(S, name, type, n, names, units, desc)                                               \
    {#name, type, offsetof(S, name), n, EF_LENOFF_##type(S, name), names, units, desc},

static const FieldDesc start_fields[] = {EVENT_START_FIELDS(EF_ROW, StartEvent)};
static const FieldDesc step_fields[] = {EVENT_STEP_FIELDS(EF_ROW, StepEvent)};
static const FieldDesc eval_fields[] = {EVENT_EVAL_FIELDS(EF_ROW, EvalEvent)};
static const FieldDesc act_fields[] = {EVENT_ACT_FIELDS(EF_ROW, ActEvent)};
static const FieldDesc sample_fields[] = {EVENT_SAMPLE_FIELDS(EF_ROW, SampleEvent)};
static const FieldDesc end_fields[] = {EVENT_END_FIELDS(EF_ROW, EndEvent)};

#define KIND(name, f, v)                                                                           \
    { name, f, (int)(sizeof f / sizeof f[0]), EVENT_##v##_V1, EVENT_##v##_V2 }
const EventSchema event_schema[EV_KIND_COUNT] = {
    KIND("start", start_fields, START),    KIND("step", step_fields, STEP),
    KIND("eval", eval_fields, EVAL),       KIND("act", act_fields, ACT),
    KIND("sample", sample_fields, SAMPLE), KIND("end", end_fields, END),
};

void event_fields_default(void *body, EventKind kind, int from) {
    const EventSchema *s = &event_schema[kind];
    for (int k = from; k < s->n_fields; k++) {
        const FieldDesc *f = &s->fields[k];
        char *p = (char *)body + f->offset;
        long l = -1;
        int i = f->type == FT_INT ? -1 : 0;
        double d = NAN;
        switch (f->type) {
        case FT_LONG:
            memcpy(p, &l, sizeof l);
            break;
        case FT_INT:
        case FT_BOOL:
        case FT_ENUM:
            memcpy(p, &i, sizeof i);
            break;
        case FT_DOUBLE:
            memcpy(p, &d, sizeof d);
            break;
        case FT_TEXT:
            memset((char *)body + f->len_offset, 0, sizeof(int));
            p[0] = 0;
            break;
        case FT_STR:
            p[0] = 0;
            break;
        case FT_HEADS:
            break;
        }
    }
}

void event_end_unknown(EndEvent *e, RunStatus status, const char *message) {
    memset(e, 0, sizeof *e);
    event_fields_default(e, EV_END, 0);
    e->status = status;
    e->steps = e->tokens = 0;
    e->train_seconds = e->tokens_per_s = 0.0; /* summed into a replicate: budget */
    e->instability = INSTAB_NONE;
    e->unstable_step = 0;
    snprintf(e->message, sizeof e->message, "%s", message ? message : "");
}
