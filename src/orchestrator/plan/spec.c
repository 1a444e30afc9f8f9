#include "spec.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "spec_tune.h"
#include "util/grow.h"
#include "yaml_doc.h"

#define SPEC_MAX_BYTES (16L << 20)
#define SPEC_MAX_SEEDS 100000
#define SPEC_NAME_MAX  128

static const char SET_FILE[] = "--set";

int spec_fail(char err[ABL_ERR_MAX], SpecMark m, const char *fmt, ...) {
    int line = m.line > 0 ? m.line : 1, col = m.line > 0 && m.col > 0 ? m.col : 1;
    int n = snprintf(err, ABL_ERR_MAX, "%s:%d:%d: ", m.file ? m.file : "?", line, col);
    if (n >= 0 && n < ABL_ERR_MAX) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + n, (size_t)(ABL_ERR_MAX - n), fmt, ap);
        va_end(ap);
    }
    for (char *p = err; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    return -1;
}

static const char *const budget_knobs[SPEC_BUDGETS] = {
    "train.steps", "train.tokens", "train.seconds", "train.flops", "train.tokens_per_param"};

int spec_budget_index(const Knob *k) {
    for (int b = 0; b < SPEC_BUDGETS; b++)
        if (!strcmp(k->name, budget_knobs[b])) return b;
    return -1;
}

int spec_is_budget(const Knob *k) {
    return spec_budget_index(k) >= 0;
}

void spec_resolve_budgets(RunConfig *c, const int set[SPEC_BUDGETS]) {
    int any = 0;
    for (int b = 0; b < SPEC_BUDGETS; b++)
        any |= set[b];
    if (!any) return;
    if (!set[0]) c->train.steps = 0;
    if (!set[1]) c->train.tokens = 0;
    if (!set[2]) c->train.seconds = 0;
    if (!set[3]) c->train.flops = 0;
    if (!set[4]) c->train.tokens_per_param = 0;
}

/* ---- ${VAR} expansion ---- */

/* Expanded text is built in the shared Buf (src/util/buf.h). */

static int expand_into(Buf *b, const char *s, size_t len, int depth, char err[ABL_ERR_MAX]) {
    if (depth > 16) {
        snprintf(err, ABL_ERR_MAX, "${...} defaults nested too deeply");
        return -1;
    }
    size_t i = 0;
    while (i < len) {
        if (s[i] == '$' && i + 2 < len && s[i + 1] == '$' && s[i + 2] == '{') {
            buf_add(b, "${", 2); /* "$${" is a literal "${" */
            i += 3;
            continue;
        }
        if (!(s[i] == '$' && i + 1 < len && s[i + 1] == '{')) {
            buf_add(b, s + i, 1);
            i++;
            continue;
        }
        size_t j = i + 2, name_start = j;
        if (j < len && (isalpha((unsigned char)s[j]) || s[j] == '_'))
            while (j < len && (isalnum((unsigned char)s[j]) || s[j] == '_'))
                j++;
        char name[SPEC_NAME_MAX];
        size_t name_len = j - name_start;
        if (name_len == 0 || name_len >= sizeof name || j >= len ||
            (s[j] != '}' && !(s[j] == ':' && j + 1 < len && s[j + 1] == '-'))) {
            snprintf(err, ABL_ERR_MAX,
                     "malformed variable reference '%.40s' (use ${NAME} or ${NAME:-default})",
                     s + i);
            return -1;
        }
        memcpy(name, s + name_start, name_len);
        name[name_len] = '\0';
        const char *value = getenv(name);
        if (s[j] == '}') {
            if (!value) {
                snprintf(err, ABL_ERR_MAX,
                         "environment variable %s is not set (write ${%s:-default} for a default)",
                         name, name);
                return -1;
            }
            buf_add(b, value, strlen(value));
            i = j + 1;
            continue;
        }
        /* ${NAME:-default}: find the matching brace, allowing nested ${...} */
        size_t d = j + 2, k = d;
        int open = 1;
        while (k < len) {
            if (s[k] == '$' && k + 1 < len && s[k + 1] == '{') {
                open++;
                k += 2;
                continue;
            }
            if (s[k] == '}' && --open == 0) break;
            k++;
        }
        if (k >= len) {
            snprintf(err, ABL_ERR_MAX, "unterminated '${%s:-' (missing '}')", name);
            return -1;
        }
        if (value && *value)
            buf_add(b, value, strlen(value));
        else if (expand_into(b, s + d, k - d, depth + 1, err) != 0)
            return -1;
        i = k + 1;
    }
    return 0;
}

char *spec_expand(const char *text, char err[ABL_ERR_MAX]) {
    Buf b = {0};
    buf_add(&b, "", 0);
    if (expand_into(&b, text, strlen(text), 0, err) != 0) {
        free(b.p);
        return NULL;
    }
    if (b.oom) {
        free(b.p);
        snprintf(err, ABL_ERR_MAX, "out of memory");
        return NULL;
    }
    return b.p;
}

/* ---- loading ---- */

typedef struct {
    Spec *s;
    char *err;
    char *explicit_; /* knob_count flags: set by a key of the file (not a preset) */
} Load;

static SpecMark mark_of(const Spec *s, const YNode *n) {
    SpecMark m = {s->path, n->line, n->col};
    return m;
}

static int kidx(const Knob *k) {
    return (int)(k - knob_table);
}

/* ---- the keys of the spec's own mappings ----
 * Each SpecKey list is both what the parser accepts at its place and what the messages
 * there name ("expected a mapping with ...", "did you mean"), so no message can omit or
 * invent a key. Knob keys come from the knob table itself. */

/* A key, and the placeholder its value has where a message shows the mapping's form
 * ("{min: N, max: M}"; NULL where none does). Lists end with a NULL name. */
typedef struct {
    const char *name, *value;
} SpecKey;

static const SpecKey top_keys[] = {{"data", NULL},      {"base", NULL},      {"grid", NULL},
                                   {"variants", NULL},  {"seeds", NULL},     {"description", NULL},
                                   {"replicate", NULL}, {"contrasts", NULL}, {"ladder", NULL},
                                   {"tune", NULL},      {NULL, NULL}};
static const SpecKey ladder_keys[] = {{"rungs", NULL}, {"tokens_per_param", NULL}, {NULL, NULL}};
static const SpecKey rep_keys_list[] = {{"seeds", NULL}, {"resolve", NULL}, {"looks", NULL},
                                        {"alpha", NULL}, {"budget", NULL},  {"baseline", NULL},
                                        {NULL, NULL}};
static const SpecKey seed_keys[] = {{"min", "N"}, {"max", "M"}, {NULL, NULL}};
static const SpecKey budget_keys[] = {{"core_hours", "H"}, {NULL, NULL}};
/* base: accepts this, the sections of the knob table and its undotted knobs. */
static const char PRESET_KEY[] = "preset";

static int key_known(const char *word, const SpecKey *keys) {
    for (int i = 0; keys[i].name; i++)
        if (!strcmp(word, keys[i].name)) return 1;
    return 0;
}

/* The closest key within distance 2, or NULL. */
static const char *closest(const char *word, const SpecKey *keys) {
    const char *best = NULL;
    int best_d = 3;
    for (int i = 0; keys[i].name; i++) {
        int d = knob_edit_distance(word, keys[i].name);
        if (d < best_d) best_d = d, best = keys[i].name;
    }
    return best;
}

/* "a, b and c" (conj " and "), "a, b or c" (" or "), "a, b, c" (", "): the keys as a
 * message names them. */
static const char *key_list(char *out, size_t n, const SpecKey *keys, const char *conj) {
    size_t len = 0;
    out[0] = '\0';
    for (int j = 0; keys[j].name && len < n; j++)
        len += (size_t)snprintf(out + len, n - len, "%s%s",
                                j == 0 ? "" : (keys[j + 1].name ? ", " : conj), keys[j].name);
    return out;
}

/* "{min: N, max: M}": the form of a mapping, from its keys and their placeholders. */
static const char *key_form(char *out, size_t n, const SpecKey *keys) {
    size_t len = (size_t)snprintf(out, n, "{");
    for (int j = 0; keys[j].name && len < n; j++)
        len += (size_t)snprintf(out + len, n - len, "%s%s: %s", j ? ", " : "", keys[j].name,
                                keys[j].value);
    if (len < n) snprintf(out + len, n - len, "}");
    return out;
}

/* The closest key a base mapping accepts (preset, a section of the knob table such as
 * "model", an undotted knob such as "save_weights") within distance 2, in out; NULL if none. */
static const char *closest_base_key(const char *word, char *out, size_t n) {
    int best_d = knob_edit_distance(word, PRESET_KEY);
    if (best_d < 3) snprintf(out, n, "%s", PRESET_KEY);
    for (int i = 0; i < knob_count; i++) {
        char key[SPEC_NAME_MAX];
        snprintf(key, sizeof key, "%.*s", (int)strcspn(knob_table[i].name, "."),
                 knob_table[i].name);
        int d = knob_edit_distance(word, key);
        if (d < best_d && d < 3) best_d = d, snprintf(out, n, "%s", key);
    }
    return best_d < 3 ? out : NULL;
}

/* "unknown key 'x' (did you mean 'y'?)" at m; with base, the keys of a base mapping are
 * checked before knobs. */
static int unknown_key(Load *L, SpecMark m, const char *shown, int base) {
    char buf[SPEC_NAME_MAX + 8];
    const char *guess = base ? closest_base_key(shown, buf, sizeof buf) : NULL;
    if (!guess) guess = knob_suggest(shown);
    if (guess) return spec_fail(L->err, m, "unknown key '%s' (did you mean '%s'?)", shown, guess);
    return spec_fail(L->err, m, "unknown key '%s'", shown);
}

/* The expanded text of a scalar value for `what`; NULL on error. */
static char *value_text(Load *L, const YNode *v, const char *what) {
    if (v->type != YNODE_SCALAR) {
        spec_fail(L->err, mark_of(L->s, v), "expected a single value for %s, got %s", what,
                  ydoc_kind(v));
        return NULL;
    }
    if (ydoc_is_null(v)) {
        spec_fail(L->err, mark_of(L->s, v), "missing value for %s", what);
        return NULL;
    }
    char msg[ABL_ERR_MAX];
    char *t = spec_expand(v->text, msg);
    if (!t) spec_fail(L->err, mark_of(L->s, v), "%s", msg);
    return t;
}

/* Does any knob live under "prefix."? */
static int is_section(const char *prefix) {
    size_t n = strlen(prefix);
    for (int i = 0; i < knob_count; i++)
        if (!strncmp(knob_table[i].name, prefix, n) && knob_table[i].name[n] == '.') return 1;
    return 0;
}

/* Applies a mapping of base keys: nested sections ("model: {...}") or dotted knob names. */
static int apply_base_map(Load *L, const YNode *map, const char *prefix, const char *what) {
    Spec *s = L->s;
    if (ydoc_is_null(map)) return 0;
    if (map->type != YNODE_MAP)
        return spec_fail(L->err, mark_of(s, map), "expected a mapping for %s, got %s", what,
                         ydoc_kind(map));
    for (int i = 0; i < map->n; i++) {
        const YNode *key = map->keys[i], *val = map->items[i];
        char full[SPEC_NAME_MAX];
        if (snprintf(full, sizeof full, "%s%s", prefix, key->text) >= (int)sizeof full)
            return spec_fail(L->err, mark_of(s, key), "key too long");
        if (!*prefix && !strcmp(key->text, PRESET_KEY)) continue; /* applied first */
        const Knob *k = knob_find(full);
        if (!k && is_section(full)) {
            char sub[SPEC_NAME_MAX + 1], what[SPEC_NAME_MAX + 8];
            snprintf(sub, sizeof sub, "%s.", full);
            snprintf(what, sizeof what, "%s%s", *prefix ? "" : "base.", full);
            if (apply_base_map(L, val, sub, what) != 0) return -1;
            continue;
        }
        if (!k) return unknown_key(L, mark_of(s, key), full, !*prefix);
        int idx = kidx(k);
        if (L->explicit_[idx])
            return spec_fail(L->err, mark_of(s, key), "%s is set twice (first at line %d)", k->name,
                             s->base_src[idx].line);
        char *text = value_text(L, val, k->name);
        if (!text) return -1;
        char msg[ABL_ERR_MAX];
        int rc = knob_set(&s->base, k, text, msg);
        free(text);
        if (rc != 0) return spec_fail(L->err, mark_of(s, val), "%s", msg);
        s->base_src[idx] = mark_of(s, val);
        L->explicit_[idx] = 1;
    }
    return 0;
}

static int apply_preset(Load *L, const YNode *base) {
    Spec *s = L->s;
    const YNode *key = NULL, *val = ydoc_get(base, PRESET_KEY, &key);
    if (!val) return 0;
    char *text = value_text(L, val, "base.preset");
    if (!text) return -1;
    RunConfig before = s->base;
    int rc = model_config_preset(&s->base.model, text);
    if (rc != 0) {
        spec_fail(L->err, mark_of(s, val), "unknown preset '%s' (expected one of: micro, book)",
                  text);
        free(text);
        return -1;
    }
    snprintf(s->preset, sizeof s->preset, "%s", text);
    free(text);
    s->preset_mark = mark_of(s, val);
    for (int i = 0; i < knob_count; i++)
        if (!knob_equal(&before, &s->base, &knob_table[i])) s->base_src[i] = s->preset_mark;
    return 0;
}

/* A dotted knob key of grid/variants/exclude (an optional "base." prefix is accepted). */
static const Knob *dotted_knob(Load *L, const YNode *key) {
    const Knob *k = knob_find(key->text);
    if (!k) unknown_key(L, mark_of(L->s, key), key->text, 0);
    return k;
}

/* Types one value for k (against a scratch config) and stores it in a. */
static int make_assign(Load *L, const Knob *k, const YNode *val, SpecAssign *a) {
    char *text = value_text(L, val, k->name);
    if (!text) return -1;
    RunConfig scratch;
    run_config_default(&scratch);
    char msg[ABL_ERR_MAX];
    if (knob_set(&scratch, k, text, msg) != 0) {
        free(text);
        return spec_fail(L->err, mark_of(L->s, val), "%s", msg);
    }
    a->knob = k;
    a->text = text;
    a->mark = mark_of(L->s, val);
    return 0;
}

static void free_assigns(SpecAssign *a, int n) {
    for (int i = 0; i < n && a; i++)
        free(a[i].text);
    free(a);
}

static const SpecAxis *axis_with(const Spec *s, const Knob *k, int *key) {
    for (int i = 0; i < s->n_axes; i++)
        for (int j = 0; j < s->axes[i].n_keys; j++)
            if (s->axes[i].cells[j].knob == k) {
                if (key) *key = j;
                return &s->axes[i];
            }
    return NULL;
}

/* One axis from a mapping of key -> list (one key for a plain axis; a zip group). */
static int add_axis(Load *L, const YNode *group, int first, int count, int zip,
                    const YNode *group_node) {
    Spec *s = L->s;
    const YNode *list0 = group->items[first];
    for (int j = 0; j < count; j++) {
        const YNode *key = group->keys[first + j], *list = group->items[first + j];
        const Knob *k = dotted_knob(L, key);
        if (!k) return -1;
        int at = 0;
        const SpecAxis *other = axis_with(s, k, &at);
        if (other)
            return spec_fail(L->err, mark_of(s, key), "%s is already a grid axis (line %d)",
                             k->name, other->key_marks[at].line);
        for (int i = 0; i < j; i++)
            if (knob_find(group->keys[first + i]->text) == k)
                return spec_fail(L->err, mark_of(s, key), "%s appears twice in this zip group",
                                 k->name);
        if (list->type != YNODE_SEQ)
            return spec_fail(L->err, mark_of(s, list),
                             "expected a list of values for grid key %s, got %s", k->name,
                             ydoc_kind(list));
        if (list->n == 0)
            return spec_fail(L->err, mark_of(s, list), "empty list of values for grid key %s",
                             k->name);
        if (j > 0 && list->n != list0->n)
            return spec_fail(L->err, mark_of(s, list),
                             "zip lists must have the same length: %s has %d values, %s has %d",
                             k->name, list->n, group->keys[first]->text, list0->n);
    }
    if (GROW(s->axes, s->axes_cap, (size_t)s->n_axes + 1) != 0)
        return spec_fail(L->err, mark_of(s, group_node), "out of memory");
    SpecAxis *ax = &s->axes[s->n_axes];
    memset(ax, 0, sizeof *ax);
    ax->n_keys = count;
    ax->n_points = list0->n;
    ax->zip = zip;
    ax->key_marks = calloc((size_t)count, sizeof *ax->key_marks);
    ax->cells = calloc((size_t)count * (size_t)ax->n_points, sizeof *ax->cells);
    s->n_axes++; /* owned by the spec from here on (spec_free cleans up partial axes) */
    if (!ax->key_marks || !ax->cells)
        return spec_fail(L->err, mark_of(s, group_node), "out of memory");
    for (int j = 0; j < count; j++) {
        const YNode *key = group->keys[first + j], *list = group->items[first + j];
        const Knob *k = knob_find(key->text);
        ax->key_marks[j] = mark_of(s, key);
        for (int p = 0; p < ax->n_points; p++)
            if (make_assign(L, k, list->items[p], &ax->cells[p * count + j]) != 0) return -1;
    }
    return 0;
}

static int parse_excludes(Load *L, const YNode *list) {
    Spec *s = L->s;
    if (ydoc_is_null(list)) return 0;
    if (list->type != YNODE_SEQ)
        return spec_fail(L->err, mark_of(s, list),
                         "expected a list of partial assignments for grid.exclude, got %s",
                         ydoc_kind(list));
    s->excludes = calloc((size_t)list->n + 1, sizeof *s->excludes);
    if (!s->excludes) return spec_fail(L->err, mark_of(s, list), "out of memory");
    for (int i = 0; i < list->n; i++) {
        const YNode *m = list->items[i];
        if (m->type != YNODE_MAP || m->n == 0)
            return spec_fail(L->err, mark_of(s, m),
                             "expected a mapping of knob: value for a grid.exclude entry");
        SpecExclude *e = &s->excludes[s->n_excludes++];
        e->mark = mark_of(s, m);
        run_config_default(&e->match);
        e->assign = calloc((size_t)m->n, sizeof *e->assign);
        if (!e->assign) return spec_fail(L->err, e->mark, "out of memory");
        for (int j = 0; j < m->n; j++) {
            const Knob *k = dotted_knob(L, m->keys[j]);
            if (!k) return -1;
            for (int q = 0; q < e->n_assign; q++)
                if (e->assign[q].knob == k)
                    return spec_fail(L->err, mark_of(s, m->keys[j]),
                                     "%s appears twice in this exclude entry", k->name);
            if (make_assign(L, k, m->items[j], &e->assign[e->n_assign]) != 0) return -1;
            char msg[ABL_ERR_MAX];
            knob_set(&e->match, k, e->assign[e->n_assign].text, msg);
            e->n_assign++;
        }
    }
    return 0;
}

static int parse_grid(Load *L, const YNode *grid) {
    Spec *s = L->s;
    if (ydoc_is_null(grid)) return 0;
    if (grid->type != YNODE_MAP)
        return spec_fail(L->err, mark_of(s, grid),
                         "expected a mapping of knob: [values] for grid, got %s", ydoc_kind(grid));
    const YNode *exclude = NULL;
    for (int i = 0; i < grid->n; i++) {
        const YNode *key = grid->keys[i], *val = grid->items[i];
        if (!strcmp(key->text, "exclude")) {
            exclude = val;
        } else if (!strcmp(key->text, "zip")) {
            if (ydoc_is_null(val)) continue;
            if (val->type != YNODE_SEQ)
                return spec_fail(L->err, mark_of(s, val),
                                 "expected a list of zip groups for grid.zip, got %s",
                                 ydoc_kind(val));
            for (int g = 0; g < val->n; g++) {
                const YNode *group = val->items[g];
                if (group->type != YNODE_MAP || group->n == 0)
                    return spec_fail(L->err, mark_of(s, group),
                                     "expected a mapping of knob: [values] for a zip group");
                if (add_axis(L, group, 0, group->n, 1, group) != 0) return -1;
            }
        } else if (add_axis(L, grid, i, 1, 0, key) != 0) {
            return -1;
        }
    }
    return exclude ? parse_excludes(L, exclude) : 0;
}

/* ladder: a zip axis of model sizes (rungs) planned like any other axis, and optionally the
 * budget rule train.tokens_per_param set on the base (docs/spec.md, "ladder"). */
static int parse_ladder(Load *L, const YNode *key, const YNode *v) {
    Spec *s = L->s;
    char words[96];
    if (v->type != YNODE_MAP)
        return spec_fail(L->err, mark_of(s, v), "ladder: expected a mapping with %s; got %s",
                         key_list(words, sizeof words, ladder_keys, " and "), ydoc_kind(v));
    for (int i = 0; i < v->n; i++) {
        if (key_known(v->keys[i]->text, ladder_keys)) continue;
        const char *guess = closest(v->keys[i]->text, ladder_keys);
        if (guess)
            return spec_fail(L->err, mark_of(s, v->keys[i]),
                             "unknown key 'ladder.%s' (did you mean 'ladder.%s'?)",
                             v->keys[i]->text, guess);
        return spec_fail(L->err, mark_of(s, v->keys[i]), "unknown key 'ladder.%s' (expected %s)",
                         v->keys[i]->text, key_list(words, sizeof words, ladder_keys, " or "));
    }
    const YNode *rk = NULL, *rungs = ydoc_get(v, "rungs", &rk);
    if (!rungs)
        return spec_fail(L->err, mark_of(s, key),
                         "ladder.rungs is required: a mapping of knob: [one value per rung], "
                         "e.g. {model.d_model: [32, 64, 128], model.n_layer: [1, 2, 3]}");
    if (rungs->type != YNODE_MAP || rungs->n == 0)
        return spec_fail(L->err, mark_of(s, rungs),
                         "ladder.rungs: expected a mapping of knob: [one value per rung], got %s",
                         ydoc_kind(rungs));
    for (int i = 0; i < rungs->n; i++)
        if (rungs->items[i]->type == YNODE_SEQ && rungs->items[i]->n == 1)
            return spec_fail(L->err, mark_of(s, rungs->items[i]),
                             "ladder.rungs: %s has one value; a ladder needs at least two rungs "
                             "to fit a trend",
                             rungs->keys[i]->text);
    if (add_axis(L, rungs, 0, rungs->n, 1, rk) != 0) return -1;
    s->ladder = 1;
    s->ladder_axis = s->n_axes - 1;
    s->ladder_mark = mark_of(s, key);
    const YNode *tk = NULL, *tpp = ydoc_get(v, "tokens_per_param", &tk);
    if (!tpp) return 0;
    const Knob *k = knob_find("train.tokens_per_param");
    for (int i = 0; i < knob_count; i++)
        if (L->explicit_[i] && spec_is_budget(&knob_table[i]))
            return spec_fail(L->err, mark_of(s, tk),
                             "ladder.tokens_per_param sets the budget, but %s is set too (line "
                             "%d): remove one of them",
                             knob_table[i].name, s->base_src[i].line);
    char *text = value_text(L, tpp, "ladder.tokens_per_param");
    if (!text) return -1;
    char msg[ABL_ERR_MAX];
    int rc = knob_set(&s->base, k, text, msg);
    double x = s->base.train.tokens_per_param;
    free(text);
    if (rc != 0) return spec_fail(L->err, mark_of(s, tpp), "ladder.tokens_per_param: %s", msg);
    if (!(x > 0))
        return spec_fail(L->err, mark_of(s, tpp),
                         "ladder.tokens_per_param: expected a number above 0, got %g", x);
    s->base_src[kidx(k)] = mark_of(s, tpp);
    L->explicit_[kidx(k)] = 1;
    return 0;
}

static int valid_variant_name(const char *n) {
    if (!*n) return 0;
    for (; *n; n++)
        if (!isalnum((unsigned char)*n) && !strchr("_.+-", *n)) return 0;
    return 1;
}

static int parse_variants(Load *L, const YNode *vars) {
    Spec *s = L->s;
    if (ydoc_is_null(vars)) return 0;
    if (vars->type != YNODE_MAP)
        return spec_fail(L->err, mark_of(s, vars),
                         "expected a mapping of name: {knob: value} for variants, got %s",
                         ydoc_kind(vars));
    s->variants = calloc((size_t)vars->n + 1, sizeof *s->variants);
    if (!s->variants) return spec_fail(L->err, mark_of(s, vars), "out of memory");
    /* baseline first, then file order */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < vars->n; i++) {
            const YNode *key = vars->keys[i], *body = vars->items[i];
            int is_base = !strcmp(key->text, "baseline");
            if (is_base != (pass == 0)) continue;
            if (!valid_variant_name(key->text))
                return spec_fail(L->err, mark_of(s, key),
                                 "variant name '%s' may only use letters, digits and _ . + -",
                                 key->text);
            if (!ydoc_is_null(body) && body->type != YNODE_MAP)
                return spec_fail(L->err, mark_of(s, body),
                                 "expected a mapping of knob: value for variant '%s', got %s",
                                 key->text, ydoc_kind(body));
            int n = ydoc_is_null(body) ? 0 : body->n;
            if (is_base && n > 0)
                return spec_fail(L->err, mark_of(s, body->keys[0]),
                                 "variant 'baseline' is the base itself and must be empty; "
                                 "change base instead or rename the variant");
            SpecVariant *v = &s->variants[s->n_variants++];
            v->mark = mark_of(s, key);
            if (!(v->name = strdup(key->text)) ||
                (n && !(v->assign = calloc((size_t)n, sizeof *v->assign))))
                return spec_fail(L->err, v->mark, "out of memory");
            for (int j = 0; j < n; j++) {
                const YNode *k_node = body->keys[j];
                const Knob *k = dotted_knob(L, k_node);
                if (!k) return -1;
                for (int q = 0; q < v->n_assign; q++)
                    if (v->assign[q].knob == k)
                        return spec_fail(L->err, mark_of(s, k_node),
                                         "%s is set twice in variant '%s'", k->name, v->name);
                int at = 0;
                const SpecAxis *ax = axis_with(s, k, &at);
                if (ax)
                    return spec_fail(L->err, mark_of(s, k_node),
                                     "variant '%s' sets %s, which is a grid axis (line %d); the "
                                     "grid value would always override it",
                                     v->name, k->name, ax->key_marks[at].line);
                if (make_assign(L, k, body->items[j], &v->assign[v->n_assign]) != 0) return -1;
                v->n_assign++;
            }
        }
    return 0;
}

static int parse_u64(const char *t, uint64_t *out) {
    if (!isdigit((unsigned char)*t)) return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(t, &end, 10);
    if (errno || *end) return -1;
    *out = (uint64_t)v;
    return 0;
}

static int parse_seeds(Load *L, const YNode *v) {
    Spec *s = L->s;
    s->seeds_mark = mark_of(s, v);
    if (v->type == YNODE_SCALAR) {
        char *t = value_text(L, v, "seeds");
        if (!t) return -1;
        uint64_t n = 0;
        int bad = parse_u64(t, &n) != 0 || n < 1 || n > SPEC_MAX_SEEDS;
        if (bad) {
            spec_fail(L->err, s->seeds_mark,
                      "seeds must be a count from 1 to %d or a list of seeds, got '%s'",
                      SPEC_MAX_SEEDS, t);
            free(t);
            return -1;
        }
        free(t);
        if (!(s->seeds = calloc(n, sizeof *s->seeds)))
            return spec_fail(L->err, s->seeds_mark, "out of memory");
        for (uint64_t i = 0; i < n; i++)
            s->seeds[i] = i;
        s->n_seeds = (int)n;
        return 0;
    }
    if (v->type != YNODE_SEQ || v->n == 0 || v->n > SPEC_MAX_SEEDS)
        return spec_fail(L->err, s->seeds_mark,
                         "seeds must be a count or a non-empty list of seeds, got %s",
                         v->type == YNODE_SEQ ? "an empty list" : ydoc_kind(v));
    if (!(s->seeds = calloc((size_t)v->n, sizeof *s->seeds)))
        return spec_fail(L->err, s->seeds_mark, "out of memory");
    for (int i = 0; i < v->n; i++) {
        char *t = value_text(L, v->items[i], "seeds");
        if (!t) return -1;
        uint64_t x;
        int rc = parse_u64(t, &x);
        if (rc != 0) {
            spec_fail(L->err, mark_of(s, v->items[i]),
                      "expected a non-negative integer seed, got '%s'", t);
            free(t);
            return -1;
        }
        free(t);
        for (int j = 0; j < s->n_seeds; j++)
            if (s->seeds[j] == x)
                return spec_fail(L->err, mark_of(s, v->items[i]), "duplicate seed %llu",
                                 (unsigned long long)x);
        s->seeds[s->n_seeds++] = x;
    }
    return 0;
}

/* ---- replicate: ---- */

/* One integer of replicate: in [lo, hi]; key names it in the message. */
static int rep_int(Load *L, const YNode *v, const char *key, int lo, int hi, int *out) {
    char *t = value_text(L, v, key);
    if (!t) return -1;
    uint64_t x = 0;
    int bad = parse_u64(t, &x) != 0 || x < (uint64_t)lo || x > (uint64_t)hi;
    if (bad)
        spec_fail(L->err, mark_of(L->s, v), "%s: expected an integer from %d to %d, got '%s'", key,
                  lo, hi, t);
    free(t);
    *out = (int)x;
    return bad ? -1 : 0;
}

/* One number of replicate: strictly inside (lo, hi) (hi 0: no upper bound). */
static int rep_num(Load *L, const YNode *v, const char *key, double lo, double hi, double *out) {
    char *t = value_text(L, v, key);
    if (!t) return -1;
    char *end;
    errno = 0;
    double x = strtod(t, &end);
    int bad = errno || end == t || *end || !(x > lo) || (hi > 0 && !(x < hi));
    if (bad) {
        if (hi > 0)
            spec_fail(L->err, mark_of(L->s, v),
                      "%s: expected a number between %g and %g (exclusive), got '%s'", key, lo, hi,
                      t);
        else
            spec_fail(L->err, mark_of(L->s, v), "%s: expected a number above %g, got '%s'", key, lo,
                      t);
    }
    free(t);
    *out = x;
    return bad ? -1 : 0;
}

/* Unknown keys of a replicate: mapping, with a suggestion. */
static int rep_keys(Load *L, const YNode *map, const char *prefix, const SpecKey *keys) {
    for (int i = 0; i < map->n; i++) {
        if (key_known(map->keys[i]->text, keys)) continue;
        const char *guess = closest(map->keys[i]->text, keys);
        if (guess)
            return spec_fail(L->err, mark_of(L->s, map->keys[i]),
                             "unknown key '%s%s' (did you mean '%s%s'?)", prefix,
                             map->keys[i]->text, prefix, guess);
        return spec_fail(L->err, mark_of(L->s, map->keys[i]), "unknown key '%s%s'", prefix,
                         map->keys[i]->text);
    }
    return 0;
}

/* Without replicate.looks: min, then about x1.5 each time (at least one seed more), then max:
 * few looks, most of them late, where the rule spends little of its alpha. */
static void rep_default_looks(SpecReplicate *r) {
    r->n_looks = 0;
    int n = r->min;
    while (n < r->max && r->n_looks < SPEC_MAX_LOOKS - 1) {
        r->looks[r->n_looks++] = n;
        int next = (n * 3 + 1) / 2;
        n = next > n ? next : n + 1;
    }
    r->looks[r->n_looks++] = r->max;
}

/* replicate.baseline: knob: value for the grid's axes (a zip group by any of its keys). */
static int rep_baseline(Load *L, const YNode *v) {
    Spec *s = L->s;
    SpecReplicate *r = &s->replicate;
    if (v->type != YNODE_MAP || v->n == 0)
        return spec_fail(L->err, mark_of(s, v),
                         "replicate.baseline: expected a mapping of grid knob: value naming one "
                         "grid point, got %s",
                         ydoc_kind(v));
    r->baseline_mark = mark_of(s, v);
    if (!(r->baseline_point = malloc(sizeof(int) * (size_t)s->n_axes)))
        return spec_fail(L->err, mark_of(s, v), "out of memory");
    for (int a = 0; a < s->n_axes; a++)
        r->baseline_point[a] = -1;
    for (int i = 0; i < v->n; i++) {
        const YNode *key = v->keys[i];
        const Knob *k = dotted_knob(L, key);
        if (!k) return -1;
        int at = 0;
        const SpecAxis *ax = axis_with(s, k, &at);
        if (!ax)
            return spec_fail(
                L->err, mark_of(s, key),
                "replicate.baseline: %s is not a grid axis (the baseline names a grid point)",
                k->name);
        int a = (int)(ax - s->axes);
        char *t = value_text(L, v->items[i], k->name);
        if (!t) return -1;
        RunConfig want, have;
        run_config_default(&want);
        char msg[ABL_ERR_MAX];
        int rc = knob_set(&want, k, t, msg);
        free(t);
        if (rc != 0)
            return spec_fail(L->err, mark_of(s, v->items[i]), "replicate.baseline: %s", msg);
        int found = -1;
        for (int p = 0; p < ax->n_points && found < 0; p++) {
            run_config_default(&have);
            knob_set(&have, k, ax->cells[p * ax->n_keys + at].text, msg);
            if (knob_equal(&want, &have, k)) found = p;
        }
        if (found < 0)
            return spec_fail(
                L->err, mark_of(s, v->items[i]),
                "replicate.baseline: %s is not one of the values of grid axis %s (line %d)",
                v->items[i]->text, k->name, ax->key_marks[at].line);
        if (r->baseline_point[a] >= 0 && r->baseline_point[a] != found)
            return spec_fail(L->err, mark_of(s, key),
                             "replicate.baseline: %s names another point of its zip group than the "
                             "keys before it",
                             k->name);
        r->baseline_point[a] = found;
    }
    /* a ladder's rung need not be named: each rung is compared with its own baseline
     * (plan/contrast.c); the first rung's stands for "the" baseline */
    if (s->ladder && r->baseline_point[s->ladder_axis] < 0) r->baseline_point[s->ladder_axis] = 0;
    for (int a = 0; a < s->n_axes; a++)
        if (r->baseline_point[a] < 0)
            return spec_fail(
                L->err, mark_of(s, v),
                "replicate.baseline: grid axis %s (line %d) has no value: name one for every axis",
                s->axes[a].cells[0].knob->name, s->axes[a].key_marks[0].line);
    return 0;
}

static int parse_replicate(Load *L, const YNode *key, const YNode *v) {
    Spec *s = L->s;
    SpecReplicate *r = &s->replicate;
    r->on = 1;
    r->mark = mark_of(s, key);
    r->alpha = 0.05;
    char words[160], form[64];
    if (v->type != YNODE_MAP)
        return spec_fail(L->err, mark_of(s, v), "replicate: expected a mapping with %s; got %s",
                         key_list(words, sizeof words, rep_keys_list, ", "), ydoc_kind(v));
    if (rep_keys(L, v, "replicate.", rep_keys_list) != 0) return -1;
    key_form(form, sizeof form, seed_keys);
    const YNode *k = NULL, *x;
    /* seeds: {min, max} */
    if (!(x = ydoc_get(v, "seeds", &k)))
        return spec_fail(L->err, r->mark, "replicate.seeds is required: %s seeds per configuration",
                         form);
    if (x->type != YNODE_MAP)
        return spec_fail(L->err, mark_of(s, x), "replicate.seeds: expected %s, got %s", form,
                         ydoc_kind(x));
    if (rep_keys(L, x, "replicate.seeds.", seed_keys) != 0) return -1;
    const YNode *mn = ydoc_get(x, "min", NULL), *mx = ydoc_get(x, "max", NULL);
    if (!mn || !mx)
        return spec_fail(L->err, mark_of(s, x), "replicate.seeds: both %s are required",
                         key_list(words, sizeof words, seed_keys, " and "));
    /* a t interval needs two differences */
    if (rep_int(L, mn, "replicate.seeds.min", 2, SPEC_MAX_SEEDS, &r->min) != 0 ||
        rep_int(L, mx, "replicate.seeds.max", 2, SPEC_MAX_SEEDS, &r->max) != 0)
        return -1;
    if (r->max < r->min)
        return spec_fail(L->err, mark_of(s, mx), "replicate.seeds.max: %d is below min %d", r->max,
                         r->min);
    s->seeds_mark = mark_of(s, x);
    /* resolve: delta */
    if (!(x = ydoc_get(v, "resolve", NULL)))
        return spec_fail(
            L->err, r->mark,
            "replicate.resolve is required: the equivalence margin in nats (e.g. 0.01)");
    if (rep_num(L, x, "replicate.resolve", 0, 0, &r->delta) != 0) return -1;
    r->delta_mark = mark_of(s, x);
    r->alpha_mark = r->looks_mark = r->mark;
    if ((x = ydoc_get(v, "alpha", NULL)) &&
        rep_num(L, x, "replicate.alpha", 0, 0.5, &r->alpha) != 0)
        return -1;
    if (x) r->alpha_mark = mark_of(s, x);
    if ((x = ydoc_get(v, "budget", NULL))) {
        if (x->type != YNODE_MAP || x->n == 0)
            return spec_fail(L->err, mark_of(s, x), "replicate.budget: expected %s, got %s",
                             key_form(form, sizeof form, budget_keys), ydoc_kind(x));
        if (rep_keys(L, x, "replicate.budget.", budget_keys) != 0 ||
            rep_num(L, ydoc_get(x, "core_hours", NULL), "replicate.budget.core_hours", 0, 0,
                    &r->core_hours) != 0)
            return -1;
    }
    /* looks: strictly increasing, from min to max */
    if ((x = ydoc_get(v, "looks", NULL))) {
        r->looks_mark = mark_of(s, x);
        if (x->type != YNODE_SEQ || x->n == 0 || x->n > SPEC_MAX_LOOKS)
            return spec_fail(L->err, mark_of(s, x),
                             "replicate.looks: expected a list of 1 to %d seed counts, got %s",
                             SPEC_MAX_LOOKS,
                             x->type == YNODE_SEQ ? "a list of another length" : ydoc_kind(x));
        for (int i = 0; i < x->n; i++) {
            int n;
            if (rep_int(L, x->items[i], "replicate.looks", 2, SPEC_MAX_SEEDS, &n) != 0) return -1;
            if (i > 0 && n <= r->looks[i - 1])
                return spec_fail(L->err, mark_of(s, x->items[i]),
                                 "replicate.looks: must increase strictly (%d after %d)", n,
                                 r->looks[i - 1]);
            r->looks[r->n_looks++] = n;
        }
        if (r->looks[0] != r->min)
            return spec_fail(L->err, mark_of(s, x->items[0]),
                             "replicate.looks: the first look must be at seeds.min (%d), got %d",
                             r->min, r->looks[0]);
        if (r->looks[r->n_looks - 1] != r->max)
            return spec_fail(L->err, mark_of(s, x->items[x->n - 1]),
                             "replicate.looks: the last look must be at seeds.max (%d), got %d",
                             r->max, r->looks[r->n_looks - 1]);
    } else {
        rep_default_looks(r);
    }
    /* the baseline: variant "baseline" (one-knob variants), grid point replicate.baseline */
    x = ydoc_get(v, "baseline", &k);
    if (s->n_variants > 0 && strcmp(s->variants[0].name, "baseline") != 0)
        return spec_fail(L->err, r->mark,
                         "replicate: the variants need a 'baseline: {}' entry (the base itself), "
                         "which every other variant is compared against");
    if (s->n_axes > (s->ladder ? 1 : 0) && !x)
        return spec_fail(L->err, r->mark,
                         "replicate.baseline is required with a grid: name the grid point every "
                         "other configuration is compared against (e.g. {%s: %s})",
                         s->axes[0].cells[0].knob->name, s->axes[0].cells[0].text);
    if (x && s->n_axes == 0)
        return spec_fail(L->err, mark_of(s, k),
                         "replicate.baseline names a grid point, but the spec has no grid (with "
                         "variants, 'baseline' is the baseline)");
    if (x && rep_baseline(L, x) != 0) return -1;
    if (!x && s->ladder) { /* a ladder alone: each rung's baseline variant, rung 1's first */
        if (!(r->baseline_point = calloc((size_t)s->n_axes, sizeof(int))))
            return spec_fail(L->err, r->mark, "out of memory");
    }
    if (s->n_axes == 0 && s->n_variants <= 1)
        return spec_fail(
            L->err, r->mark,
            "replicate: needs at least two configurations (variants or a grid) to compare");
    /* the plan holds seeds 0..max-1 of every configuration */
    if (!(s->seeds = calloc((size_t)r->max, sizeof *s->seeds)))
        return spec_fail(L->err, r->mark, "out of memory");
    for (int i = 0; i < r->max; i++)
        s->seeds[i] = (uint64_t)i;
    s->n_seeds = r->max;
    return 0;
}

/* ---- contrasts: ---- */

static const char *const contrasts_names[] = {"vs_base", "main_effects", "interactions"};
#define N_CONTRASTS_NAMES ((int)(sizeof contrasts_names / sizeof *contrasts_names))

const char *spec_contrasts_name(SpecContrasts c) {
    return (int)c >= 0 && (int)c < N_CONTRASTS_NAMES ? contrasts_names[c] : "?";
}

/* contrasts: one of contrasts_names; a factorial family needs replicate: and a grid (and
 * interactions two factors: the axes, and the variants when there are any). After the
 * grid, the variants and replicate: are read. */
static int parse_contrasts(Load *L, const YNode *key, const YNode *v) {
    Spec *s = L->s;
    s->contrasts_mark = mark_of(s, key);
    char *t = value_text(L, v, "contrasts");
    if (!t) return -1;
    int found = -1;
    for (int i = 0; i < N_CONTRASTS_NAMES; i++)
        if (!strcmp(t, contrasts_names[i])) found = i;
    if (found < 0) {
        spec_fail(L->err, mark_of(s, v),
                  "contrasts: expected vs_base, main_effects or interactions, got '%s'", t);
        free(t);
        return -1;
    }
    free(t);
    s->contrasts = (SpecContrasts)found;
    if (s->contrasts == SPEC_CONTRASTS_VS_BASE) return 0;
    if (!s->replicate.on)
        return spec_fail(L->err, mark_of(s, v),
                         "contrasts: %s needs a replicate: section (the contrasts are what its "
                         "rule decides)",
                         contrasts_names[found]);
    if (s->n_axes == 0)
        return spec_fail(L->err, mark_of(s, v),
                         "contrasts: %s needs a grid (its factors are the grid's axes)",
                         contrasts_names[found]);
    if (s->contrasts == SPEC_CONTRASTS_INTERACTIONS && s->n_axes + (s->n_variants > 0) < 2)
        return spec_fail(L->err, mark_of(s, v),
                         "contrasts: interactions needs two factors (grid axes, or an axis and "
                         "the variants); this spec has one: use main_effects");
    return 0;
}

static int apply_sets(Load *L, const char *const *sets, int n_sets) {
    Spec *s = L->s;
    if (n_sets > 0 && !(s->sets = calloc((size_t)n_sets, sizeof *s->sets))) {
        SpecMark m = {SET_FILE, 1, 1};
        return spec_fail(L->err, m, "out of memory");
    }
    for (int i = 0; i < n_sets; i++) {
        const char *a = sets[i];
        SpecMark m = {SET_FILE, i + 1, 1};
        if (!(s->sets[i] = strdup(a))) return spec_fail(L->err, m, "out of memory");
        s->n_sets = i + 1;
        const char *eq = strchr(a, '=');
        if (!eq || eq == a) return spec_fail(L->err, m, "expected key=value, got '%s'", a);
        char key[SPEC_NAME_MAX];
        snprintf(key, sizeof key, "%.*s", (int)(eq - a), a);
        const Knob *k = knob_find(key);
        if (!k) return unknown_key(L, m, key, 0);
        int at = 0;
        const SpecAxis *ax = axis_with(s, k, &at);
        if (ax)
            return spec_fail(L->err, m, "--set %s has no effect: %s is a grid axis (%s:%d:%d)", a,
                             k->name, ax->key_marks[at].file, ax->key_marks[at].line,
                             ax->key_marks[at].col);
        char msg[ABL_ERR_MAX];
        m.col = (int)(eq - a) + 2;
        if (knob_assign(&s->base, a, msg) != 0) return spec_fail(L->err, m, "%s", msg);
        /* a budget on the command line replaces the spec's budget, whichever kind it was */
        if (spec_is_budget(k))
            for (int b = 0; b < knob_count; b++)
                if (spec_is_budget(&knob_table[b])) L->explicit_[b] = 0;
        s->base_src[kidx(k)] = m;
        L->explicit_[kidx(k)] = 1;
    }
    return 0;
}

/* "data, base, ... and replicate" (conj "and") or "... or replicate": the top-level keys as
 * the messages name them, from top_keys, so no message forgets one. */
static const char *top_list(char *out, size_t n, const char *conj) {
    return key_list(out, n, top_keys, conj);
}

static int load_tree(Load *L, const YNode *root, const char *const *sets, int n_sets) {
    Spec *s = L->s;
    char words[160];
    if (root->type != YNODE_MAP)
        return spec_fail(L->err, mark_of(s, root), "a spec is a mapping with keys %s; got %s",
                         top_list(words, sizeof words, " and "), ydoc_kind(root));
    for (int i = 0; i < root->n; i++) {
        const char *k = root->keys[i]->text;
        if (!key_known(k, top_keys)) {
            const char *guess = closest(k, top_keys);
            if (guess)
                return spec_fail(L->err, mark_of(s, root->keys[i]),
                                 "unknown key '%s' (did you mean '%s'?)", k, guess);
            return spec_fail(L->err, mark_of(s, root->keys[i]), "unknown key '%s' (expected %s)", k,
                             top_list(words, sizeof words, " or "));
        }
    }
    const YNode *key = NULL, *v;
    if ((v = ydoc_get(root, "description", NULL))) {
        if (v->type != YNODE_SCALAR)
            return spec_fail(L->err, mark_of(s, v), "expected text for description, got %s",
                             ydoc_kind(v));
        if (!(s->description = strdup(v->text)))
            return spec_fail(L->err, mark_of(s, v), "out of memory");
    }
    const YNode *base = ydoc_get(root, "base", &key);
    if (base) {
        s->base_mark = mark_of(s, key);
        if (!ydoc_is_null(base) && base->type != YNODE_MAP)
            return spec_fail(L->err, mark_of(s, base), "expected a mapping for base, got %s",
                             ydoc_kind(base));
        if (base->type == YNODE_MAP && apply_preset(L, base) != 0) return -1;
    }
    if ((v = ydoc_get(root, "data", &key))) {
        s->data_mark = mark_of(s, key);
        if (apply_base_map(L, v, "data.", "data") != 0) return -1;
    }
    if (base) {
        if (apply_base_map(L, base, "", "base") != 0) return -1;
    }
    if ((v = ydoc_get(root, "grid", NULL)) && parse_grid(L, v) != 0) return -1;
    if ((v = ydoc_get(root, "ladder", &key)) && parse_ladder(L, key, v) != 0) return -1;
    if ((v = ydoc_get(root, "variants", NULL)) && parse_variants(L, v) != 0) return -1;
    const YNode *rep_key = NULL, *rep = ydoc_get(root, "replicate", &rep_key);
    if (rep && (v = ydoc_get(root, "seeds", &key)))
        return spec_fail(L->err, mark_of(s, key),
                         "seeds: and replicate: exclude each other (replicate.seeds sets how "
                         "many seeds each configuration gets)");
    if (rep) {
        if (parse_replicate(L, rep_key, rep) != 0) return -1;
    } else if ((v = ydoc_get(root, "seeds", NULL))) {
        if (parse_seeds(L, v) != 0) return -1;
    } else {
        if (!(s->seeds = calloc(1, sizeof *s->seeds))) {
            SpecMark m = {s->path, 1, 1};
            return spec_fail(L->err, m, "out of memory");
        }
        s->n_seeds = 1;
    }
    const YNode *tune_key = NULL, *tune = ydoc_get(root, "tune", &tune_key);
    if (tune && spec_tune_parse(s, tune_key, tune, L->err) != 0) return -1;
    if ((v = ydoc_get(root, "contrasts", &key)) && parse_contrasts(L, key, v) != 0) return -1;
    if (apply_sets(L, sets, n_sets) != 0) return -1;
    int budgets[SPEC_BUDGETS] = {0};
    for (int i = 0; i < knob_count; i++)
        if (L->explicit_[i] && spec_is_budget(&knob_table[i]))
            budgets[spec_budget_index(&knob_table[i])] = 1;
    spec_resolve_budgets(&s->base, budgets);
    return 0;
}

int spec_load_string(Spec *s, const char *name, const char *text, const char *const *sets,
                     int n_sets, char err[ABL_ERR_MAX]) {
    memset(s, 0, sizeof *s);
    err[0] = '\0';
    s->path = strdup(name);
    s->text_len = strlen(text);
    s->text = malloc(s->text_len + 1);
    s->base_src = calloc((size_t)knob_count, sizeof *s->base_src);
    Load L = {s, err, calloc((size_t)knob_count, 1)};
    if (!s->path || !s->text || !s->base_src || !L.explicit_) {
        free(L.explicit_);
        spec_free(s);
        snprintf(err, ABL_ERR_MAX, "%s:1:1: out of memory", name);
        return -1;
    }
    memcpy(s->text, text, s->text_len + 1);
    run_config_default(&s->base);
    for (int i = 0; i < knob_count; i++)
        s->base_src[i].file = s->path;
    YNode *root = NULL;
    int rc = ydoc_parse(s->text, s->text_len, s->path, &root, err);
    if (rc == 0) rc = load_tree(&L, root, sets, n_sets);
    ydoc_free(root);
    free(L.explicit_);
    if (rc != 0) spec_free(s);
    return rc;
}

int spec_load(Spec *s, const char *path, const char *const *sets, int n_sets,
              char err[ABL_ERR_MAX]) {
    memset(s, 0, sizeof *s);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, ABL_ERR_MAX, "%s: cannot open spec: %s", path, strerror(errno));
        return -1;
    }
    char *text = malloc((size_t)SPEC_MAX_BYTES + 1);
    size_t n = text ? fread(text, 1, (size_t)SPEC_MAX_BYTES + 1, f) : 0;
    int bad = !text || ferror(f);
    fclose(f);
    if (bad || n > (size_t)SPEC_MAX_BYTES) {
        snprintf(err, ABL_ERR_MAX, "%s: cannot read spec: %s", path,
                 bad ? "read error" : "larger than 16 MiB");
        free(text);
        return -1;
    }
    text[n] = '\0';
    if (strlen(text) != n) {
        snprintf(err, ABL_ERR_MAX, "%s:1:1: NUL byte in the spec file", path);
        free(text);
        return -1;
    }
    int rc = spec_load_string(s, path, text, sets, n_sets, err);
    free(text);
    return rc;
}

void spec_free(Spec *s) {
    if (!s) return;
    for (int i = 0; i < s->n_axes; i++) {
        free_assigns(s->axes[i].cells,
                     s->axes[i].cells ? s->axes[i].n_keys * s->axes[i].n_points : 0);
        free(s->axes[i].key_marks);
    }
    free(s->axes);
    for (int i = 0; i < s->n_variants; i++) {
        free(s->variants[i].name);
        free_assigns(s->variants[i].assign, s->variants[i].n_assign);
    }
    free(s->variants);
    for (int i = 0; i < s->n_excludes; i++)
        free_assigns(s->excludes[i].assign, s->excludes[i].n_assign);
    free(s->excludes);
    for (int i = 0; i < s->n_sets; i++)
        free(s->sets[i]);
    free(s->sets);
    free(s->seeds);
    free(s->replicate.baseline_point);
    spec_tune_free(&s->tune);
    free(s->base_src);
    free(s->description);
    free(s->text);
    free(s->path);
    memset(s, 0, sizeof *s);
}
