#include "yaml_doc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "util/grow.h"

#define YDOC_MAX_DEPTH 64
#define YDOC_MAX_NODES 1000000 /* bounds alias expansion ("billion laughs") */

typedef struct {
    char *name;
    YNode *node;
} Anchor;

typedef struct {
    yaml_parser_t parser;
    const char *file;
    char *err;
    long n_nodes;
    Anchor *anchors;
    int n_anchors;
    size_t cap_anchors;
} Ctx;

static int fail_at(Ctx *c, int line, int col, const char *fmt, ...) {
    int n = snprintf(c->err, ABL_ERR_MAX, "%s:%d:%d: ", c->file, line, col);
    if (n < 0 || n >= ABL_ERR_MAX) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err + n, (size_t)(ABL_ERR_MAX - n), fmt, ap);
    va_end(ap);
    for (char *p = c->err; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    return -1;
}

static int syntax_error(Ctx *c) {
    const yaml_parser_t *p = &c->parser;
    if (p->error == YAML_MEMORY_ERROR) return fail_at(c, 1, 1, "out of memory parsing YAML");
    int line = (int)p->problem_mark.line + 1, col = (int)p->problem_mark.column + 1;
    if (p->error == YAML_READER_ERROR) /* marks are not maintained by the reader */
        return fail_at(c, 1, 1, "YAML syntax error: %s (at byte %zu)",
                       p->problem ? p->problem : "unreadable input", p->problem_offset);
    if (p->context)
        return fail_at(c, line, col, "YAML syntax error: %s %s", p->problem ? p->problem : "error",
                       p->context);
    return fail_at(c, line, col, "YAML syntax error: %s", p->problem ? p->problem : "error");
}

static int next_event(Ctx *c, yaml_event_t *ev) {
    if (!yaml_parser_parse(&c->parser, ev)) return syntax_error(c);
    return 0;
}

static YNode *new_node(Ctx *c, YNodeType type, const yaml_mark_t *m) {
    if (++c->n_nodes > YDOC_MAX_NODES) {
        fail_at(c, (int)m->line + 1, (int)m->column + 1, "document too large (over %d nodes)",
                YDOC_MAX_NODES);
        return NULL;
    }
    YNode *n = calloc(1, sizeof *n);
    if (!n) {
        fail_at(c, (int)m->line + 1, (int)m->column + 1, "out of memory");
        return NULL;
    }
    n->type = type;
    n->line = (int)m->line + 1;
    n->col = (int)m->column + 1;
    return n;
}

void ydoc_free(YNode *n) {
    if (!n) return;
    for (int i = 0; i < n->n; i++) {
        if (n->keys) ydoc_free(n->keys[i]);
        if (n->items) ydoc_free(n->items[i]);
    }
    free(n->keys);
    free(n->items);
    free(n->text);
    free(n);
}

static int push(YNode *n, YNode *key, YNode *item) {
    size_t need = (size_t)n->n + 1;
    if (GROW(n->items, n->cap_items, need) != 0) return -1;
    if (n->type == YNODE_MAP && GROW(n->keys, n->cap_keys, need) != 0) return -1;
    if (n->type == YNODE_MAP) n->keys[n->n] = key;
    n->items[n->n++] = item;
    return 0;
}

static YNode *copy_node(Ctx *c, const YNode *src) {
    yaml_mark_t m = {0, (size_t)(src->line - 1), (size_t)(src->col - 1)};
    YNode *n = new_node(c, src->type, &m);
    if (!n) return NULL;
    n->plain = src->plain;
    if (src->text && !(n->text = strdup(src->text))) goto oom;
    for (int i = 0; i < src->n; i++) {
        YNode *k = NULL, *v = copy_node(c, src->items[i]);
        if (!v) goto fail;
        if (src->type == YNODE_MAP && !(k = copy_node(c, src->keys[i]))) {
            ydoc_free(v);
            goto fail;
        }
        if (push(n, k, v) != 0) {
            ydoc_free(k);
            ydoc_free(v);
            goto oom;
        }
    }
    return n;
oom:
    fail_at(c, src->line, src->col, "out of memory");
fail:
    ydoc_free(n);
    return NULL;
}

static int add_anchor(Ctx *c, const char *name, YNode *node) {
    if (GROW(c->anchors, c->cap_anchors, (size_t)c->n_anchors + 1) != 0) return -1;
    char *dup = strdup(name);
    if (!dup) return -1;
    c->anchors[c->n_anchors].name = dup;
    c->anchors[c->n_anchors++].node = node;
    return 0;
}

/* Builds the node that starts with ev (which the caller still owns and deletes). */
static YNode *build(Ctx *c, yaml_event_t *ev, int depth) {
    if (depth > YDOC_MAX_DEPTH) {
        fail_at(c, (int)ev->start_mark.line + 1, (int)ev->start_mark.column + 1,
                "nesting deeper than %d levels", YDOC_MAX_DEPTH);
        return NULL;
    }
    YNode *n = NULL;
    const yaml_char_t *anchor = NULL;
    switch (ev->type) {
    case YAML_SCALAR_EVENT: {
        if (!(n = new_node(c, YNODE_SCALAR, &ev->start_mark))) return NULL;
        size_t len = ev->data.scalar.length;
        if (memchr(ev->data.scalar.value, '\0', len)) {
            fail_at(c, n->line, n->col, "NUL character in a string");
            ydoc_free(n);
            return NULL;
        }
        if (!(n->text = malloc(len + 1))) {
            fail_at(c, n->line, n->col, "out of memory");
            ydoc_free(n);
            return NULL;
        }
        memcpy(n->text, ev->data.scalar.value, len);
        n->text[len] = '\0';
        n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
        anchor = ev->data.scalar.anchor;
        break;
    }
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT: {
        int is_map = ev->type == YAML_MAPPING_START_EVENT;
        if (!(n = new_node(c, is_map ? YNODE_MAP : YNODE_SEQ, &ev->start_mark))) return NULL;
        anchor = is_map ? ev->data.mapping_start.anchor : ev->data.sequence_start.anchor;
        yaml_event_type_t end = is_map ? YAML_MAPPING_END_EVENT : YAML_SEQUENCE_END_EVENT;
        for (;;) {
            yaml_event_t e;
            if (next_event(c, &e) != 0) goto fail;
            if (e.type == end) {
                yaml_event_delete(&e);
                break;
            }
            YNode *key = NULL, *val = NULL;
            if (is_map) {
                key = build(c, &e, depth + 1);
                yaml_event_delete(&e);
                if (!key) goto fail;
                if (key->type != YNODE_SCALAR) {
                    fail_at(c, key->line, key->col, "mapping keys must be plain strings");
                    ydoc_free(key);
                    goto fail;
                }
                for (int i = 0; i < n->n; i++)
                    if (strcmp(n->keys[i]->text, key->text) == 0) {
                        fail_at(c, key->line, key->col, "duplicate key '%s' (first at line %d)",
                                key->text, n->keys[i]->line);
                        ydoc_free(key);
                        goto fail;
                    }
                if (next_event(c, &e) != 0) {
                    ydoc_free(key);
                    goto fail;
                }
            }
            val = build(c, &e, depth + 1);
            yaml_event_delete(&e);
            if (!val || push(n, key, val) != 0) {
                if (val) fail_at(c, val->line, val->col, "out of memory");
                ydoc_free(key);
                ydoc_free(val);
                goto fail;
            }
        }
        break;
    }
    case YAML_ALIAS_EVENT: {
        const char *name = (const char *)ev->data.alias.anchor;
        for (int i = c->n_anchors - 1; i >= 0; i--)
            if (strcmp(c->anchors[i].name, name) == 0) {
                n = copy_node(c, c->anchors[i].node);
                if (!n) return NULL;
                n->line = (int)ev->start_mark.line + 1;
                n->col = (int)ev->start_mark.column + 1;
                return n;
            }
        fail_at(c, (int)ev->start_mark.line + 1, (int)ev->start_mark.column + 1,
                "unknown alias '*%s'", name);
        return NULL;
    }
    default:
        fail_at(c, (int)ev->start_mark.line + 1, (int)ev->start_mark.column + 1,
                "unexpected YAML event");
        return NULL;
    }
    if (anchor && add_anchor(c, (const char *)anchor, n) != 0) {
        fail_at(c, n->line, n->col, "out of memory");
        goto fail;
    }
    return n;
fail:
    ydoc_free(n);
    return NULL;
}

int ydoc_parse(const char *text, size_t len, const char *file, YNode **root,
               char err[ABL_ERR_MAX]) {
    Ctx c;
    memset(&c, 0, sizeof c);
    c.file = file;
    c.err = err;
    *root = NULL;
    if (!yaml_parser_initialize(&c.parser)) {
        snprintf(err, ABL_ERR_MAX, "%s:1:1: cannot initialize the YAML parser", file);
        return -1;
    }
    /* A UTF-8 byte order mark (editors on Windows write one) is not part of the document;
     * libyaml only half-supports it (a column shift, or a syntax error after a comment). */
    if (len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) text += 3, len -= 3;
    yaml_parser_set_input_string(&c.parser, (const unsigned char *)text, len);
    yaml_parser_set_encoding(&c.parser, YAML_UTF8_ENCODING);
    YNode *doc = NULL;
    int rc = -1, done = 0;
    while (!done) {
        yaml_event_t ev;
        if (next_event(&c, &ev) != 0) goto out;
        switch (ev.type) {
        case YAML_STREAM_START_EVENT:
        case YAML_DOCUMENT_END_EVENT:
            break;
        case YAML_DOCUMENT_START_EVENT:
            if (doc) {
                fail_at(&c, (int)ev.start_mark.line + 1, (int)ev.start_mark.column + 1,
                        "only one YAML document is allowed");
                yaml_event_delete(&ev);
                goto out;
            }
            break;
        case YAML_STREAM_END_EVENT:
            done = 1;
            break;
        default:
            doc = build(&c, &ev, 0);
            if (!doc) {
                yaml_event_delete(&ev);
                goto out;
            }
            break;
        }
        yaml_event_delete(&ev);
    }
    if (!doc) {
        fail_at(&c, 1, 1, "empty document");
        goto out;
    }
    *root = doc;
    doc = NULL;
    rc = 0;
out:
    ydoc_free(doc);
    for (int i = 0; i < c.n_anchors; i++)
        free(c.anchors[i].name);
    free(c.anchors);
    yaml_parser_delete(&c.parser);
    return rc;
}

const YNode *ydoc_get(const YNode *map, const char *key, const YNode **key_node) {
    if (!map || map->type != YNODE_MAP) return NULL;
    for (int i = 0; i < map->n; i++)
        if (strcmp(map->keys[i]->text, key) == 0) {
            if (key_node) *key_node = map->keys[i];
            return map->items[i];
        }
    return NULL;
}

int ydoc_is_null(const YNode *n) {
    if (!n || n->type != YNODE_SCALAR || !n->plain) return 0;
    const char *t = n->text;
    return !*t || !strcmp(t, "~") || !strcmp(t, "null") || !strcmp(t, "Null") || !strcmp(t, "NULL");
}

const char *ydoc_kind(const YNode *n) {
    return n->type == YNODE_SCALAR ? "a single value"
                                   : (n->type == YNODE_SEQ ? "a list" : "a mapping");
}
