/* A small YAML node tree built from libyaml's event parser, keeping the source position of
 * every node so spec errors can say FILE:LINE:COL. One document per text; mapping keys
 * must be scalars and may not repeat; aliases are expanded into copies of the anchored
 * node. Nothing is typed here: every scalar stays text (spec.c types them through knobs). */
#ifndef ABLATE_ORCHESTRATOR_YAML_DOC_H
#define ABLATE_ORCHESTRATOR_YAML_DOC_H

#include <stddef.h>

#include "model/config.h" /* ABL_ERR_MAX */

typedef enum { YNODE_SCALAR, YNODE_SEQ, YNODE_MAP } YNodeType;

typedef struct YNode {
    YNodeType type;
    int line, col;        /* 1-based start of the node (for quoted scalars: the quote) */
    char *text;           /* YNODE_SCALAR: the value, NUL-terminated */
    int plain;            /* YNODE_SCALAR: written without quotes (so ~, null, "" mean null) */
    int n;                /* YNODE_SEQ: items; YNODE_MAP: key/value pairs */
    struct YNode **keys;  /* YNODE_MAP: n scalar keys, in file order */
    struct YNode **items; /* YNODE_SEQ: n items; YNODE_MAP: the n values */
    size_t cap_keys, cap_items; /* allocated entries of keys and items (util/grow.h) */
} YNode;

/* Parses text (len bytes) into *root. file only names the source in errors, which are one
 * line "FILE:LINE:COL: message" (YAML syntax errors carry libyaml's problem and mark).
 * A leading UTF-8 byte order mark is skipped. An empty document is an error. Returns 0 or -1. */
int ydoc_parse(const char *text, size_t len, const char *file, YNode **root, char err[ABL_ERR_MAX]);
void ydoc_free(YNode *n);

/* The value for key in a mapping, or NULL (and *key_node, if asked, the key node). */
const YNode *ydoc_get(const YNode *map, const char *key, const YNode **key_node);
/* Is this a null scalar (plain "", "~", "null", "Null", "NULL")? */
int ydoc_is_null(const YNode *n);
/* "a string", "a list" or "a mapping", for messages. */
const char *ydoc_kind(const YNode *n);

#endif
