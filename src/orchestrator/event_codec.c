#include "event_codec.h"

#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define CODEC_LE 1
#else
#define CODEC_LE 0
#endif

/* ---- writing: the caller guarantees room (worst case per kind is checked up front) ---- */

static inline uint8_t *put_u64v(uint8_t *p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static inline uint8_t *put_iv(uint8_t *p, int64_t v) {
    return put_u64v(p, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

static inline uint8_t *put_f64(uint8_t *p, double d) {
    uint64_t u;
    memcpy(&u, &d, 8);
#if CODEC_LE
    memcpy(p, &u, 8);
#else
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(u >> (8 * i));
#endif
    return p + 8;
}

static inline uint8_t *put_str(uint8_t *p, const char *s, size_t max) {
    size_t n = strnlen(s, max);
    p = put_u64v(p, n);
    memcpy(p, s, n);
    return p + n;
}

static inline size_t uv_len(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}
static inline size_t iv_len(int64_t v) {
    return uv_len(((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}
static inline size_t str_len(const char *s, size_t max) {
    size_t n = strnlen(s, max);
    return uv_len(n) + n;
}

static int clamp_heads(int n) {
    return n < 0 ? 0 : (n > ABL_MAX_HEADS ? ABL_MAX_HEADS : n);
}

/* Worst case bytes for a kind, so the hot path needs no per-field checks. */
static size_t worst_case(EventKind k) {
    switch (k) {
    case EV_START:
        return 1 + 10 + 16 + 1 + 31;
    case EV_STEP:
        return 1 + 10 + 10 + 32;
    case EV_EVAL:
        return 1 + 10 + 16;
    case EV_ACT:
        return 1 + 10 + 5 + 7 * 8 + 5 + ABL_MAX_HEADS * 8;
    case EV_SAMPLE:
        return 1 + 1 + 8 + 5 + 2 + (ABL_SAMPLE_MAX - 1) + 8 + 8 + 5 + 8 + 1 + 5 +
               5 * ABL_SAMPLE_IDS;
    case EV_END:
        return 1 + 1 + 10 + 10 + 32 + 2 + 255;
    default:
        return 0;
    }
}

static uint8_t *pack_unchecked(const Event *ev, uint8_t *p) {
    *p++ = (uint8_t)ev->kind;
    switch (ev->kind) {
    case EV_START: {
        const StartEvent *e = &ev->u.start;
        p = put_iv(p, e->params);
        p = put_f64(p, e->flops_per_token);
        p = put_f64(p, e->kv_bytes_per_token);
        p = put_str(p, e->blas_core, sizeof e->blas_core - 1);
        break;
    }
    case EV_STEP: {
        const StepEvent *e = &ev->u.step;
        p = put_iv(p, e->step);
        p = put_iv(p, e->tokens);
        p = put_f64(p, e->loss);
        p = put_f64(p, e->lr);
        p = put_f64(p, e->grad_norm);
        p = put_f64(p, e->time);
        break;
    }
    case EV_EVAL: {
        const EvalEvent *e = &ev->u.eval;
        p = put_iv(p, e->step);
        p = put_f64(p, e->val_loss);
        p = put_f64(p, e->val_acc);
        break;
    }
    case EV_ACT: {
        const ActEvent *e = &ev->u.act;
        p = put_iv(p, e->step);
        p = put_iv(p, e->layer);
        p = put_f64(p, e->zero_frac);
        p = put_f64(p, e->max);
        p = put_f64(p, e->min);
        p = put_f64(p, e->mean);
        p = put_f64(p, e->rms);
        p = put_f64(p, e->resid_rms);
        p = put_f64(p, e->grad_norm);
        int nh = clamp_heads(e->n_head);
        p = put_iv(p, nh);
        for (int h = 0; h < nh; h++)
            p = put_f64(p, e->attn_entropy[h]);
        break;
    }
    case EV_SAMPLE: {
        const SampleEvent *e = &ev->u.sample;
        *p++ = (uint8_t)e->kind;
        p = put_f64(p, e->temperature);
        p = put_iv(p, e->n_tokens);
        p = put_str(p, e->text, sizeof e->text - 1);
        p = put_f64(p, e->tokens_per_s);
        p = put_f64(p, e->distinct_ratio);
        p = put_iv(p, e->longest_run);
        p = put_f64(p, e->top_token_frac);
        *p++ = (uint8_t)(e->degenerate != 0);
        int ni = e->n_ids < 0 ? 0 : (e->n_ids > ABL_SAMPLE_IDS ? ABL_SAMPLE_IDS : e->n_ids);
        p = put_iv(p, ni);
        for (int i = 0; i < ni; i++)
            p = put_iv(p, e->ids[i]);
        break;
    }
    case EV_END: {
        const EndEvent *e = &ev->u.end;
        *p++ = (uint8_t)e->status;
        p = put_iv(p, e->steps);
        p = put_iv(p, e->tokens);
        p = put_f64(p, e->train_seconds);
        p = put_f64(p, e->tokens_per_s);
        p = put_f64(p, e->final_val_loss);
        p = put_f64(p, e->final_val_acc);
        p = put_str(p, e->message, sizeof e->message - 1);
        break;
    }
    default:
        break;
    }
    return p;
}

size_t event_packed_size(const Event *ev) {
    switch (ev->kind) {
    case EV_START: {
        const StartEvent *e = &ev->u.start;
        return 1 + iv_len(e->params) + 16 + str_len(e->blas_core, sizeof e->blas_core - 1);
    }
    case EV_STEP:
        return 1 + iv_len(ev->u.step.step) + iv_len(ev->u.step.tokens) + 32;
    case EV_EVAL:
        return 1 + iv_len(ev->u.eval.step) + 16;
    case EV_ACT: {
        int nh = clamp_heads(ev->u.act.n_head);
        return 1 + iv_len(ev->u.act.step) + iv_len(ev->u.act.layer) + 56 + iv_len(nh) +
               8 * (size_t)nh;
    }
    case EV_SAMPLE: {
        const SampleEvent *e = &ev->u.sample;
        int ni = e->n_ids < 0 ? 0 : (e->n_ids > ABL_SAMPLE_IDS ? ABL_SAMPLE_IDS : e->n_ids);
        size_t ids = iv_len(ni);
        for (int i = 0; i < ni; i++)
            ids += iv_len(e->ids[i]);
        return 1 + 1 + 8 + iv_len(e->n_tokens) + str_len(e->text, sizeof e->text - 1) + 16 +
               iv_len(e->longest_run) + 8 + 1 + ids;
    }
    case EV_END: {
        const EndEvent *e = &ev->u.end;
        return 1 + 1 + iv_len(e->steps) + iv_len(e->tokens) + 32 +
               str_len(e->message, sizeof e->message - 1);
    }
    default:
        return 0;
    }
}

size_t event_pack(const Event *ev, uint8_t *buf, size_t cap) {
    size_t worst = worst_case(ev->kind);
    if (worst == 0) return 0;
    if (cap >= worst) return (size_t)(pack_unchecked(ev, buf) - buf);
    size_t need = event_packed_size(ev);
    if (need > cap) return 0;
    uint8_t tmp[EVENT_PACK_MAX];
    size_t n = (size_t)(pack_unchecked(ev, tmp) - tmp);
    memcpy(buf, tmp, n);
    return n;
}

/* ---- reading: every field is bounds-checked ---- */

typedef struct {
    const uint8_t *p, *end;
    int bad;
} Rd;

static inline uint64_t get_u64v(Rd *r) {
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (r->p >= r->end) {
            r->bad = 1;
            return 0;
        }
        uint8_t b = *r->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return v;
    }
    r->bad = 1;
    return 0;
}

static inline int64_t get_iv(Rd *r) {
    uint64_t u = get_u64v(r);
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

static inline int get_int(Rd *r) {
    int64_t v = get_iv(r);
    if (v < -2147483647 - 1 || v > 2147483647) {
        r->bad = 1;
        return 0;
    }
    return (int)v;
}

static inline double get_f64(Rd *r) {
    if (r->end - r->p < 8) {
        r->bad = 1;
        r->p = r->end;
        return 0;
    }
    uint64_t u;
#if CODEC_LE
    memcpy(&u, r->p, 8);
#else
    u = 0;
    for (int i = 0; i < 8; i++)
        u |= (uint64_t)r->p[i] << (8 * i);
#endif
    r->p += 8;
    double d;
    memcpy(&d, &u, 8);
    return d;
}

static inline uint8_t get_u8(Rd *r) {
    if (r->p >= r->end) {
        r->bad = 1;
        return 0;
    }
    return *r->p++;
}

static void get_str(Rd *r, char *dst, size_t cap) {
    uint64_t n = get_u64v(r);
    if (r->bad || n >= cap || n > (uint64_t)(r->end - r->p)) {
        r->bad = 1;
        dst[0] = 0;
        return;
    }
    memcpy(dst, r->p, (size_t)n);
    dst[n] = 0;
    r->p += n;
}

int event_unpack(const uint8_t *buf, size_t n, Event *ev, size_t *used) {
    Rd r = {buf, buf + n, 0};
    uint8_t kind = get_u8(&r);
    if (r.bad || kind >= EV_KIND_COUNT) return -1;
    ev->kind = (EventKind)kind;
    switch (ev->kind) {
    case EV_START: {
        StartEvent *e = &ev->u.start;
        e->params = (long)get_iv(&r);
        e->flops_per_token = get_f64(&r);
        e->kv_bytes_per_token = get_f64(&r);
        get_str(&r, e->blas_core, sizeof e->blas_core);
        e->config = NULL;
        break;
    }
    case EV_STEP: {
        StepEvent *e = &ev->u.step;
        e->step = (long)get_iv(&r);
        e->tokens = (long)get_iv(&r);
        e->loss = get_f64(&r);
        e->lr = get_f64(&r);
        e->grad_norm = get_f64(&r);
        e->time = get_f64(&r);
        break;
    }
    case EV_EVAL: {
        EvalEvent *e = &ev->u.eval;
        e->step = (long)get_iv(&r);
        e->val_loss = get_f64(&r);
        e->val_acc = get_f64(&r);
        break;
    }
    case EV_ACT: {
        ActEvent *e = &ev->u.act;
        e->step = (long)get_iv(&r);
        e->layer = get_int(&r);
        e->zero_frac = get_f64(&r);
        e->max = get_f64(&r);
        e->min = get_f64(&r);
        e->mean = get_f64(&r);
        e->rms = get_f64(&r);
        e->resid_rms = get_f64(&r);
        e->grad_norm = get_f64(&r);
        e->n_head = get_int(&r);
        if (r.bad || e->n_head < 0 || e->n_head > ABL_MAX_HEADS) return -1;
        for (int h = 0; h < e->n_head; h++)
            e->attn_entropy[h] = get_f64(&r);
        break;
    }
    case EV_SAMPLE: {
        SampleEvent *e = &ev->u.sample;
        uint8_t k = get_u8(&r);
        if (k >= SAMPLE_KIND_COUNT) return -1;
        e->kind = (SampleKind)k;
        e->temperature = get_f64(&r);
        e->n_tokens = get_int(&r);
        get_str(&r, e->text, sizeof e->text);
        e->tokens_per_s = get_f64(&r);
        e->distinct_ratio = get_f64(&r);
        e->longest_run = get_int(&r);
        e->top_token_frac = get_f64(&r);
        e->degenerate = get_u8(&r);
        e->n_ids = get_int(&r);
        if (r.bad || e->n_ids < 0 || e->n_ids > ABL_SAMPLE_IDS) return -1;
        for (int i = 0; i < e->n_ids; i++)
            e->ids[i] = get_int(&r);
        break;
    }
    case EV_END: {
        EndEvent *e = &ev->u.end;
        uint8_t s = get_u8(&r);
        if (s >= RUN_STATUS_COUNT) return -1;
        e->status = (RunStatus)s;
        e->steps = (long)get_iv(&r);
        e->tokens = (long)get_iv(&r);
        e->train_seconds = get_f64(&r);
        e->tokens_per_s = get_f64(&r);
        e->final_val_loss = get_f64(&r);
        e->final_val_acc = get_f64(&r);
        get_str(&r, e->message, sizeof e->message);
        break;
    }
    default:
        return -1;
    }
    if (r.bad) return -1;
    if (used) *used = (size_t)(r.p - buf);
    return 0;
}
