#include "event_schema.h"

#include <math.h>
#include <string.h>

const char *const event_kind_names[EV_KIND_COUNT] = {"start", "step",   "eval",
                                                     "act",   "sample", "end"};
const char *const run_status_names[RUN_STATUS_COUNT] = {"done", "diverged", "failed",
                                                        "interrupted"};
const char *const sample_kind_names[SAMPLE_KIND_COUNT] = {"greedy", "temperature"};
const char *const instability_names[INSTAB_COUNT] = {"none", "nonfinite", "above_uniform"};
const char *const repetition_names[REP_COUNT] = {"none", "token_run", "ngram_loop"};

#define EF_LENOFF_EF_LONG(S, name)   0
#define EF_LENOFF_EF_INT(S, name)    0
#define EF_LENOFF_EF_DOUBLE(S, name) 0
#define EF_LENOFF_EF_BOOL(S, name)   0
#define EF_LENOFF_EF_ENUM(S, name)   0
#define EF_LENOFF_EF_STR(S, name)    0
#define EF_LENOFF_EF_TEXT(S, name)   offsetof(S, name##_len)
#define EF_LENOFF_EF_HEADS(S, name)  0
#define EF_ROW(S, name, type, n, names, units, desc)                                               \
    {#name, type, offsetof(S, name), n, EF_LENOFF_##type(S, name), names, units, desc},

static const EventField start_fields[] = {EVENT_START_FIELDS(EF_ROW, StartEvent)};
static const EventField step_fields[] = {EVENT_STEP_FIELDS(EF_ROW, StepEvent)};
static const EventField eval_fields[] = {EVENT_EVAL_FIELDS(EF_ROW, EvalEvent)};
static const EventField act_fields[] = {EVENT_ACT_FIELDS(EF_ROW, ActEvent)};
static const EventField sample_fields[] = {EVENT_SAMPLE_FIELDS(EF_ROW, SampleEvent)};
static const EventField end_fields[] = {EVENT_END_FIELDS(EF_ROW, EndEvent)};

#define KIND(name, f, v1)                                                                          \
    { name, f, (int)(sizeof f / sizeof f[0]), v1 }
const EventSchema event_schema[EV_KIND_COUNT] = {
    KIND("start", start_fields, EVENT_START_V1),    KIND("step", step_fields, EVENT_STEP_V1),
    KIND("eval", eval_fields, EVENT_EVAL_V1),       KIND("act", act_fields, EVENT_ACT_V1),
    KIND("sample", sample_fields, EVENT_SAMPLE_V1), KIND("end", end_fields, EVENT_END_V1),
};

double event_field_number(const void *body, const EventField *f) {
    const char *p = (const char *)body + f->offset;
    long l;
    int i;
    double d;
    switch (f->type) {
    case EF_LONG:
        memcpy(&l, p, sizeof l);
        return (double)l;
    case EF_INT:
    case EF_BOOL:
    case EF_ENUM:
        memcpy(&i, p, sizeof i);
        return i;
    case EF_DOUBLE:
        memcpy(&d, p, sizeof d);
        return d;
    default:
        return NAN;
    }
}

void event_fields_default(void *body, EventKind kind, int from) {
    const EventSchema *s = &event_schema[kind];
    for (int k = from; k < s->n_fields; k++) {
        const EventField *f = &s->fields[k];
        char *p = (char *)body + f->offset;
        long l = -1;
        int i = f->type == EF_INT ? -1 : 0;
        double d = NAN;
        switch (f->type) {
        case EF_LONG:
            memcpy(p, &l, sizeof l);
            break;
        case EF_INT:
        case EF_BOOL:
        case EF_ENUM:
            memcpy(p, &i, sizeof i);
            break;
        case EF_DOUBLE:
            memcpy(p, &d, sizeof d);
            break;
        case EF_TEXT:
            memset((char *)body + f->len_offset, 0, sizeof(int));
            p[0] = 0;
            break;
        case EF_STR:
            p[0] = 0;
            break;
        case EF_HEADS:
            break;
        }
    }
}

const char *event_field_text(const void *body, const EventField *f, size_t *len) {
    const char *p = (const char *)body + f->offset;
    if (f->type == EF_TEXT) {
        int n;
        memcpy(&n, (const char *)body + f->len_offset, sizeof n);
        /* 0 means "a C string": producers that never set name_len still work */
        if (n > 0) {
            *len = (size_t)n < f->n ? (size_t)n : f->n - 1;
            return p;
        }
    }
    { *len = strnlen(p, f->n - 1); }
    return p;
}
