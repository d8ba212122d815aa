/* The index map's batch update in C: the same walk as `ledger.vindex._map._Update`,
 * over tiles held in Python dicts (`ledger.vindex._tiles`), with OpenSSL's SHA-256.
 *
 * update_tiles(keys, new, tiles, known, load, changes, written) -> root hash
 *
 *   keys     list of 32-byte key hashes, strictly ascending (the keys being set)
 *   new      list, one per key, of the entry indices (ints) its list is extended by:
 *            its value becomes the chain hash extended from the one in its leaf (from
 *            LIST_START for a key not in the map yet)
 *   tiles    dict tile path -> tile (dict 2-byte name -> 67-byte record): the tiles read
 *            (a node's record is looked for in `changes` first); a tile found in `known`
 *            is added to it, the tiles themselves are never modified here
 *   known    dict tile path -> tile: tiles the caller holds
 *   load     callable(tile path) -> tile, for a tile neither holds (it adds it to `tiles`)
 *   changes  dict tile path -> dict name -> record: records written before this update
 *            (read first), never modified here
 *   written  dict tile path -> dict name -> record: every node this update writes goes
 *            there (the caller lays it over `changes` once the update succeeded)
 *
 * Tiles are of 8 levels: a tile's path is the first depth/8 bytes of the keys below it,
 * a node's name in its tile is (depth below the tile's top, the key's bits below the
 * top, packed MSB-first). A node is the 65 bytes its hash is the
 * SHA-256 of: 0x00 key value (a leaf) or 0x01 left right (an inner node).
 *
 * Each position is visited once, so a node is read at most once. Python's walk is the
 * reference; tests compare the two, and both with the naive map, on random batches.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <openssl/sha.h>
#include <stdint.h>
#include <string.h>

#define KEY 32
#define NODE 65
#define RECORD 67
#define KEY_BITS 256
#define MAX_KEYS (1 << 24)
#define LEVELS 8

static const uint8_t LIST_DOMAIN[] = "ktl/vindex/v1 list";  /* hashed with its NUL */
static uint8_t list_start[KEY];
static const uint8_t empty_hash[KEY];

/* SHA-256 through OpenSSL's low-level calls: its one-shot SHA256() fetches the
 * algorithm (taking locks) on every call. */
static void sha256(const uint8_t *data, size_t len, uint8_t out[KEY]) {
    SHA256_CTX ctx;
    SHA256_Init(&ctx);
    SHA256_Update(&ctx, data, len);
    SHA256_Final(out, &ctx);
}

typedef struct {
    uint8_t key[KEY];
    uint8_t value[KEY];
} Kept;

typedef struct {
    const uint8_t **keys;    /* into the key objects, alive in the caller's list */
    PyObject *new_items;     /* the `new` list */
    uint8_t (*old)[KEY];     /* a changed key's value met in its old leaf */
    uint8_t *has_old;
    Kept *kept;              /* leaves pushed down beside the changes */
    Py_ssize_t n_kept, cap_kept;
    PyObject *tiles, *known, *load, *changes, *written;
    PyObject *names[LEVELS][256]; /* the 2-byte names, made once per call */
} Run;

/* An item of a subtree's sorted list: >= 0 a changed key, < 0 kept leaf -(h + 1). */
typedef int32_t Item;

static const uint8_t *item_key(const Run *r, Item h) {
    return h >= 0 ? r->keys[h] : r->kept[-(h + 1)].key;
}

static int key_bit(const uint8_t *key, int depth) {
    return (key[depth >> 3] >> (7 - (depth & 7))) & 1;
}

/* The path of the tile holding depth `depth` on `key`'s path. */
static PyObject *tile_path(const uint8_t *key, int depth) {
    return PyBytes_FromStringAndSize((const char *)key, depth / LEVELS);
}

/* The node's name in its tile (borrowed, cached for the call). */
static PyObject *node_name(Run *r, const uint8_t *key, int depth) {
    int rel = depth % LEVELS;
    unsigned bits = rel ? key[depth / LEVELS] & (0xFF00u >> rel) & 0xFFu : 0;
    PyObject **slot = &r->names[rel][bits];
    if (*slot == NULL) {
        uint8_t name[2] = {(uint8_t)rel, (uint8_t)bits};
        *slot = PyBytes_FromStringAndSize((const char *)name, 2);
    }
    return *slot;
}

/* The tile holding depth `depth` on `key`'s path (borrowed from `tiles`, or a new
 * reference from `load` kept in *owned), with its path in *path (new reference). */
static PyObject *tile_at(Run *r, const uint8_t *key, int depth, PyObject **path,
                         PyObject **owned) {
    *owned = NULL;
    *path = tile_path(key, depth);
    if (*path == NULL)
        return NULL;
    PyObject *tile = PyDict_GetItemWithError(r->tiles, *path);
    if (tile == NULL && !PyErr_Occurred()) {
        tile = PyDict_GetItemWithError(r->known, *path);
        if (tile != NULL && PyDict_SetItem(r->tiles, *path, tile) < 0)
            goto fail;
    }
    if (tile == NULL) {
        if (PyErr_Occurred())
            goto fail;
        tile = *owned = PyObject_CallOneArg(r->load, *path);
        if (tile == NULL)
            goto fail;
    }
    if (!PyDict_Check(tile)) {
        PyErr_SetString(PyExc_TypeError, "a tile must be a dict of records");
        goto fail;
    }
    return tile;
fail:
    Py_CLEAR(*path);
    Py_CLEAR(*owned);
    return NULL;
}

/* Read the node at (depth, key's path) into out; 1 found, 0 absent, -1 error. */
static int read_node(Run *r, const uint8_t *key, int depth, uint8_t out[NODE]) {
    PyObject *path, *owned;
    PyObject *tile = tile_at(r, key, depth, &path, &owned);
    if (tile == NULL)
        return -1;
    int found = 0;
    PyObject *name = node_name(r, key, depth), *record = NULL;
    PyObject *changed = name == NULL ? NULL : PyDict_GetItemWithError(r->changes, path);
    if (changed != NULL)
        record = PyDict_GetItemWithError(changed, name);
    if (record == NULL && name != NULL && !PyErr_Occurred())
        record = PyDict_GetItemWithError(tile, name);
    if (record == NULL) {
        found = PyErr_Occurred() ? -1 : 0;
    } else if (!PyBytes_Check(record) || PyBytes_GET_SIZE(record) != RECORD) {
        PyErr_SetString(PyExc_ValueError, "a tile record must be 67 bytes");
        found = -1;
    } else {
        memcpy(out, PyBytes_AS_STRING(record) + 2, NODE);
        found = 1;
    }
    Py_DECREF(path);
    Py_XDECREF(owned);
    return found;
}

/* Record the node at (depth, key's path) in `written` (a leaf pushed down can land in
 * a tile no changed key's path has read: the caller reads those, all in one call). */
static int write_node(Run *r, const uint8_t *key, int depth, const uint8_t node[NODE]) {
    PyObject *path = tile_path(key, depth);
    if (path == NULL)
        return -1;
    int rc = -1;
    PyObject *name = node_name(r, key, depth), *record = NULL;
    PyObject *changed = PyDict_GetItemWithError(r->written, path);
    if (name == NULL || (changed == NULL && PyErr_Occurred()))
        goto done;
    if (changed == NULL) {
        changed = PyDict_New();
        if (changed == NULL)
            goto done;
        int set = PyDict_SetItem(r->written, path, changed);
        Py_DECREF(changed);  /* `written` holds it */
        if (set < 0)
            goto done;
    }
    record = PyBytes_FromStringAndSize(NULL, RECORD);
    if (record == NULL)
        goto done;
    uint8_t *rec = (uint8_t *)PyBytes_AS_STRING(record);
    memcpy(rec, PyBytes_AS_STRING(name), 2);
    memcpy(rec + 2, node, NODE);
    rc = PyDict_SetItem(changed, name, record);
done:
    Py_XDECREF(record);
    Py_DECREF(path);
    return rc;
}

/* A changed key's new value: its list's chain hash extended by the indices added. */
static int new_value(Run *r, Item h, uint8_t out[KEY]) {
    PyObject *item = PyList_GET_ITEM(r->new_items, h);
    uint8_t buf[KEY + 8];
    memcpy(buf, r->has_old[h] ? r->old[h] : list_start, KEY);
    Py_ssize_t n = PyList_GET_SIZE(item);
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned long long index = PyLong_AsUnsignedLongLong(PyList_GET_ITEM(item, i));
        if (index == (unsigned long long)-1 && PyErr_Occurred())
            return -1;
        for (int b = 0; b < 8; b++)
            buf[KEY + b] = (uint8_t)(index >> (56 - 8 * b));
        sha256(buf, sizeof buf, buf);
    }
    memcpy(out, buf, KEY);
    return 0;
}

static Py_ssize_t bisect_key(const Run *r, const Item *items, Py_ssize_t lo, Py_ssize_t hi,
                             const uint8_t *key) {
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (memcmp(item_key(r, items[mid]), key, KEY) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static Py_ssize_t first_right(const Run *r, const Item *items, Py_ssize_t lo, Py_ssize_t hi,
                              int depth) {
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (key_bit(item_key(r, items[mid]), depth))
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

static int place(Run *r, int depth, Item *items, Py_ssize_t lo, Py_ssize_t hi,
                 const uint8_t *existing, uint8_t out[KEY]);

/* An existing leaf of a key not being set sits where changes go: push it down. */
static int push_down(Run *r, int depth, Item *items, Py_ssize_t lo, Py_ssize_t at,
                     Py_ssize_t hi, const uint8_t *leaf, uint8_t out[KEY]) {
    if (r->n_kept == r->cap_kept) {
        Py_ssize_t cap = r->cap_kept ? 2 * r->cap_kept : 16;
        Kept *grown = PyMem_Realloc(r->kept, (size_t)cap * sizeof(Kept));
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        r->kept = grown;
        r->cap_kept = cap;
    }
    Kept *k = &r->kept[r->n_kept];
    memcpy(k->key, leaf + 1, KEY);
    memcpy(k->value, leaf + 1 + KEY, KEY);
    Item handle = -(Item)(r->n_kept + 1);
    r->n_kept++;
    Py_ssize_t n = hi - lo + 1;
    Item *sub = PyMem_Malloc((size_t)n * sizeof(Item));
    if (sub == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(sub, items + lo, (size_t)(at - lo) * sizeof(Item));
    sub[at - lo] = handle;
    memcpy(sub + (at - lo) + 1, items + at, (size_t)(hi - at) * sizeof(Item));
    int rc = place(r, depth, sub, 0, n, NULL, out);
    PyMem_Free(sub);
    return rc;
}

/* Write the subtree at depth `depth` on the path of items[lo:hi] (not empty), now
 * `existing` (NULL: empty), with those keys set; its new hash in out. */
static int place(Run *r, int depth, Item *items, Py_ssize_t lo, Py_ssize_t hi,
                 const uint8_t *existing, uint8_t out[KEY]) {
    uint8_t node[NODE];
    if (existing != NULL && existing[0] == 0) {
        const uint8_t *here = existing + 1;
        Py_ssize_t at = bisect_key(r, items, lo, hi, here);
        if (at == hi || memcmp(item_key(r, items[at]), here, KEY) != 0)
            return push_down(r, depth, items, lo, at, hi, existing, out);
        Item h = items[at];
        if (h >= 0) {
            memcpy(r->old[h], existing + 1 + KEY, KEY);
            r->has_old[h] = 1;
        }
        existing = NULL;
    }
    const uint8_t *key = item_key(r, items[lo]);
    if (existing == NULL && hi - lo == 1) {
        Item h = items[lo];
        node[0] = 0;
        memcpy(node + 1, key, KEY);
        if (h < 0)
            memcpy(node + 1 + KEY, r->kept[-(h + 1)].value, KEY);
        else if (new_value(r, h, node + 1 + KEY) < 0)
            return -1;
    } else {
        if (depth >= KEY_BITS) {
            PyErr_SetString(PyExc_ValueError, "two distinct keys cannot share all 256 bits");
            return -1;
        }
        Py_ssize_t cut = first_right(r, items, lo, hi, depth);
        uint8_t child[NODE];
        node[0] = 1;
        if (existing == NULL) {
            memset(node + 1, 0, 2 * KEY);
        } else {
            memcpy(node + 1, existing + 1, 2 * KEY);
        }
        /* a child whose hash is EMPTY holds nothing: nothing to read */
        for (int side = 0; side < 2; side++) {
            Py_ssize_t a = side ? cut : lo, b = side ? hi : cut;
            if (a == b)
                continue;
            uint8_t *slot = node + 1 + side * KEY;
            int found = 0;
            if (memcmp(slot, empty_hash, KEY) != 0) {
                found = read_node(r, item_key(r, items[a]), depth + 1, child);
                if (found < 0)
                    return -1;
            }
            if (place(r, depth + 1, items, a, b, found ? child : NULL, slot) < 0)
                return -1;
        }
    }
    if (write_node(r, key, depth, node) < 0)
        return -1;
    sha256(node, NODE, out);
    return 0;
}

static int check_args(PyObject *keys, PyObject *new_items) {
    if (!PyList_Check(keys) || !PyList_Check(new_items)) {
        PyErr_SetString(PyExc_TypeError, "keys and new must be lists");
        return -1;
    }
    Py_ssize_t n = PyList_GET_SIZE(keys);
    if (PyList_GET_SIZE(new_items) != n || n > MAX_KEYS) {
        PyErr_SetString(PyExc_ValueError, "one new value or list per key, at most 2^24 keys");
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = PyList_GET_ITEM(keys, i), *v = PyList_GET_ITEM(new_items, i);
        if (!PyBytes_Check(k) || PyBytes_GET_SIZE(k) != KEY) {
            PyErr_SetString(PyExc_ValueError, "key hashes must be 32 bytes");
            return -1;
        }
        if (i && memcmp(PyBytes_AS_STRING(PyList_GET_ITEM(keys, i - 1)),
                        PyBytes_AS_STRING(k), KEY) >= 0) {
            PyErr_SetString(PyExc_ValueError, "key hashes must be strictly ascending");
            return -1;
        }
        if (!PyList_Check(v)) {
            PyErr_SetString(PyExc_TypeError, "each key's new indices must be a list");
            return -1;
        }
    }
    return 0;
}

static void run_free(Run *r) {
    PyMem_Free(r->keys);
    PyMem_Free(r->old);
    PyMem_Free(r->has_old);
    PyMem_Free(r->kept);
    for (int a = 0; a < LEVELS; a++)
        for (int b = 0; b < 256; b++)
            Py_CLEAR(r->names[a][b]);
}

static PyObject *update_tiles(PyObject *self, PyObject *args) {
    PyObject *keys, *new_items, *tiles, *known, *load, *changes, *written;
    if (!PyArg_ParseTuple(args, "O!O!O!O!OO!O!", &PyList_Type, &keys, &PyList_Type, &new_items,
                          &PyDict_Type, &tiles, &PyDict_Type, &known, &load, &PyDict_Type,
                          &changes, &PyDict_Type, &written))
        return NULL;
    if (check_args(keys, new_items) < 0)
        return NULL;
    Run *r = PyMem_Calloc(1, sizeof(Run));
    if (r == NULL)
        return PyErr_NoMemory();
    Py_ssize_t n = PyList_GET_SIZE(keys);
    r->new_items = new_items;
    r->tiles = tiles;
    r->known = known;
    r->load = load;
    r->changes = changes;
    r->written = written;
    PyObject *result = NULL;
    Item *items = NULL;
    size_t count = n ? (size_t)n : 1;
    r->keys = PyMem_Malloc(count * sizeof(*r->keys));
    r->old = PyMem_Malloc(count * sizeof(*r->old));
    r->has_old = PyMem_Calloc(count, 1);
    items = PyMem_Malloc(count * sizeof(Item));
    if (r->keys == NULL || r->old == NULL || r->has_old == NULL || items == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        r->keys[i] = (const uint8_t *)PyBytes_AS_STRING(PyList_GET_ITEM(keys, i));
        items[i] = (Item)i;
    }
    uint8_t top[NODE], root[KEY];
    if (n == 0) {
        PyErr_SetString(PyExc_ValueError, "nothing to update");
        goto done;
    }
    int found = read_node(r, r->keys[0], 0, top);
    if (found < 0 || place(r, 0, items, 0, n, found ? top : NULL, root) < 0)
        goto done;
    result = PyBytes_FromStringAndSize((const char *)root, KEY);
done:
    PyMem_Free(items);
    run_free(r);
    PyMem_Free(r);
    return result;
}

/* split_records(data) -> dict name -> record, or None if a record is malformed
 * (the caller names the fault): `ledger.vindex._tiles.parse_tile`'s loop, which a cold
 * read of the dense top tiles (up to 511 records each) spends most of its time in. */
static PyObject *split_records(PyObject *self, PyObject *args) {
    const uint8_t *data;
    Py_ssize_t len;
    if (!PyArg_ParseTuple(args, "y#", &data, &len))
        return NULL;
    if (len % RECORD)
        Py_RETURN_NONE;
    PyObject *tile = PyDict_New();
    if (tile == NULL)
        return NULL;
    for (Py_ssize_t at = 0; at < len; at += RECORD) {
        unsigned rel = data[at], bits = data[at + 1], kind = data[at + 2];
        if (rel >= LEVELS || kind > 1 || (rel == 0 && bits) || (bits & (0xFFu >> rel))) {
            Py_DECREF(tile);
            Py_RETURN_NONE;
        }
        PyObject *name = PyBytes_FromStringAndSize((const char *)data + at, 2);
        PyObject *record = PyBytes_FromStringAndSize((const char *)data + at, RECORD);
        int rc = name == NULL || record == NULL ? -1 : PyDict_SetItem(tile, name, record);
        Py_XDECREF(name);
        Py_XDECREF(record);
        if (rc < 0) {
            Py_DECREF(tile);
            return NULL;
        }
    }
    return tile;
}

static PyMethodDef methods[] = {
    {"split_records", split_records, METH_VARARGS,
     "split_records(data) -> {name: record} of a tile's bytes, or None if malformed."},
    {"update_tiles", update_tiles, METH_VARARGS,
     "update_tiles(keys, new, tiles, known, load, changes, written) -> root: extend the "
     "lists of sorted keys in a tiled map; the records it writes go to `written`."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_ctrie",
                                    "The index map's batch update in C.", -1, methods};

PyMODINIT_FUNC PyInit__ctrie(void) {
    sha256(LIST_DOMAIN, sizeof LIST_DOMAIN, list_start);  /* with its NUL */
    return PyModule_Create(&module);
}
