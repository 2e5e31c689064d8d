/* flydeps.builds._fastcache: the warm-hit path of flydeps.cached_factory, in C.
 *
 * Contract (the Python side is flydeps/builds/factory.py, which owns every slow path):
 *
 *   FastCache(maxsize: int | None, typed: bool, slow, gen_cell: list, kwd_mark: object,
 *             pending: dict | None = None)
 *       The object users call in place of the decorated factory (builds/factory.py attaches
 *       __wrapped__, cache_info, ... to its __dict__ with functools.update_wrapper).
 *       maxsize None: unbounded; 0: every call goes to slow(); n > 0: LRU, n entries.
 *
 *   __call__(*args, **kwargs)
 *       maxsize == 0                -> slow(args, kwargs or None, None)
 *       key = lru_cache's key, identical to factory._plain_key/_typed_key:
 *             untyped: args[0] when it is the only argument and an exact int or str, else
 *             args; with kwargs (args, kwd_mark, *kwargs.items()).
 *             typed: (args, tuple(map(type, args))); with kwargs
 *             (args, types, kwd_mark, *kwargs.items(), *map(type, kwargs.values())).
 *             Unhashable arguments: the dict's TypeError propagates.
 *       no entry                    -> slow(args, kwargs or None, None)
 *       entry.fast, validated before, watch version and audit generation unchanged since,
 *       and every closure cell still holds its expected object
 *                                   -> hit (no Python code runs): hits += 1, LRU touch, value
 *       else v, g = watch version, audit generation, then p = len(pending) (all read BEFORE
 *            the call); entry.check():
 *         true  -> remember (v, g) for this entry unless p > 0, hits += 1, LRU touch, value
 *         false -> slow(args, kwargs or None, entry)   (the stale entry, for revalidation)
 *       slow(args, kwargs, stale) must do the counting, building and storing itself.
 *
 *   An entry is a tuple (check, value, fingerprint, cells, expected, fast[, env, nsdicts])
 *   (factory._Entry): check() -> bool is the guard's full identity check; cells/expected are
 *   equal-length tuples of closure cells and the objects they must hold; fast is true only
 *   when the guard's other checks are covered by the two counters: its namespaces are
 *   watched by flydeps.watch._watchext (whose counter this module reads through the capsule
 *   "flydeps.watch._watchext._C_API"; CPython >= 3.12) or, on CPython 3.10/3.11, nsdicts is the
 *   tuple of its namespace dicts and the namespace version is their largest PEP 509 tag
 *   (read through the capsule "flydeps.watch._dictver._C_API"), it has no mutable-value checks,
 *   and function attribute
 *   changes are audited (gen_cell is flydeps.watch.audit._GEN, a one-element list whose int is
 *   replaced on every __code__/__defaults__/__kwdefaults__ assignment; compared by
 *   identity against a held reference, so a seen object cannot be recycled). Without either
 *   capsule (an extension not built or too old) fast is ignored and every hit calls
 *   check(); with FLYDEPS_WATCH=off|ctypes, Guard.fast_parts() reports fast=False.
 *   pending is flydeps.watch.audit._PENDING: function attribute stores announced by the audit
 *   hook that may not have landed yet (the hook runs before CPython stores the value). While
 *   it is non-empty a passing check() may have read an old __code__ under the new
 *   generation, so g is not remembered (the next call checks again; check() itself drops
 *   records whose store is visible).
 *
 *   Methods for the slow path (all atomic under the GIL; none calls user code except key
 *   hashing/comparison and the deallocation of dropped values):
 *     get(key, default=None) -> entry       no touch, no counting
 *     touch(key) -> bool                    mark as most recently used
 *     store(key, entry)                     insert or replace as most recently used, then
 *                                           evict least recently used beyond maxsize
 *     replace(key, old, new) -> bool        swap the entry in place if it is still old
 *     discard(key, entry=None) -> bool      remove (only if it is still entry, when given)
 *     items() -> [(key, entry)]             least recently used first
 *     clear()                               drop every entry, reset hits and misses
 *     add_hit(), add_miss()                 counters, read through .hits / .misses (read-only:
 *                                           a Python `+= 1` could lose a concurrent C increment)
 *     len(cache), .maxsize, .typed
 *     _link_state(key) -> (fast, validated) | None   test hook
 *   Module constants WATCH_API: 1 when the watcher counter was found; TAGS_API: 1 when the
 *   PEP 509 tag reader was found (either makes fast entries possible).
 *   Descriptor: on an instance it returns a bound method (lru_cache semantics on methods).
 *
 * Design (model: CPython Modules/_functoolsmodule.c, bounded_lru_cache_wrapper):
 *   key -> Link in a dict; every Link of the dict is also in a circular doubly linked list
 *   (root.next = least recently used). A touch is O(1) pointer surgery (skipped when
 *   unbounded). The list owns one reference to each linked Link, so a Link is never freed
 *   while linked, and `linked` (not the pointers) says whether it is in the list. clear()
 *   empties the dict in place (never frees it under a running lookup) and unlinks every
 *   Link before releasing any reference.
 *   Reentrancy: check(), slow(), key __eq__/__hash__ and deallocations run Python code that
 *   may clear the cache, store, recurse or switch threads. The call path holds its own
 *   references to the Link and the entry across such calls and never uses a borrowed one
 *   after calling out; every mutation leaves dict and list consistent before any reference
 *   is released. Links are not GC objects; the cache's traverse visits their contents
 *   through the list.
 */
#include "cext.h"
#include "capi.h"

#if PY_VERSION_HEX < 0x030A0000
#error "flydeps.builds._fastcache needs CPython >= 3.10"
#endif

/* The capsule APIs (capi.h) found at import: the watcher counter of _watchext (3.12+), else
   the PEP 509 tag reader of _dictver (3.10/3.11); NULL when absent. */
static const FlydepsWatchAPI *watch_api = NULL;
static const FlydepsDictVerAPI *dictver_api = NULL;

/* Entry tuple layout. */
#define E_CHECK 0
#define E_VALUE 1
#define E_CELLS 3
#define E_EXPECTED 4
#define E_FAST 5
#define E_MIN_SIZE 6
#define E_NSDICTS 7 /* optional: the tuple of namespace dicts whose tags version the entry */

/* ------------------------------------------------------------------------------ Link */

typedef struct Link {
    PyObject_HEAD
    struct Link *prev;
    struct Link *next;
    PyObject *key;
    PyObject *entry;  /* the entry tuple */
    PyObject *g_seen; /* audit generation object when last validated; NULL: never validated */
    unsigned long long v_seen;
    int fast;
    int linked;
} Link;

/* A Link's references: released by link_dealloc, visited by the cache's traverse. */
static const Py_ssize_t link_fields[] = {
    CEXT_FIELD(Link, key), CEXT_FIELD(Link, entry), CEXT_FIELD(Link, g_seen), CEXT_FIELDS_END,
};

static void
link_dealloc(Link *link)
{
    cext_clear_fields((PyObject *)link, link_fields);
    Py_TYPE(link)->tp_free((PyObject *)link);
}

static PyTypeObject LinkType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "flydeps.builds._fastcache._Link",
    .tp_basicsize = sizeof(Link),
    .tp_dealloc = (destructor)link_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "one cache entry (internal)",
};

/* ------------------------------------------------------------------------- FastCache */

typedef struct {
    PyObject_HEAD
    PyObject *cache; /* dict: key -> Link; NULL only after tp_clear */
    Link root;       /* list sentinel; root.next is the least recently used */
    Py_ssize_t nlinked;
    Py_ssize_t maxsize; /* -1: unbounded */
    Py_ssize_t hits;
    Py_ssize_t misses;
    int typed;
    PyObject *slow;
    PyObject *gen_cell;
    PyObject *kwd_mark;
    PyObject *pending; /* dict or NULL */
    PyObject *dict;
    PyObject *weakreflist;
} FastCache;

static PyTypeObject FastCacheType;

/* Append at the most recently used end; the list takes a reference. */
static void
list_append(FastCache *self, Link *link)
{
    Link *last = self->root.prev;
    link->prev = last;
    link->next = &self->root;
    last->next = link;
    self->root.prev = link;
    link->linked = 1;
    self->nlinked++;
    Py_INCREF(link);
}

/* Take a Link out of the list; the caller receives the list's reference. */
static void
list_unlink(FastCache *self, Link *link)
{
    link->prev->next = link->next;
    link->next->prev = link->prev;
    link->prev = link->next = NULL;
    link->linked = 0;
    self->nlinked--;
}

static inline void
list_touch(FastCache *self, Link *link)
{
    if (self->maxsize < 0 || !link->linked || link->next == &self->root) {
        return;
    }
    link->prev->next = link->next;
    link->next->prev = link->prev;
    Link *last = self->root.prev;
    link->prev = last;
    link->next = &self->root;
    last->next = link;
    self->root.prev = link;
}

/* Empty dict and list (keep_dict: clear the dict in place, else release it); every
 * reference is released only once both are consistent. The dict object itself survives a
 * clear(), so a dict operation running user code (a key's __eq__) never sees it freed. */
static void
detach_all(FastCache *self, int keep_dict)
{
    /* Pass 1: mark every Link unlinked, keeping `next` to walk them afterwards. */
    Link *first = self->root.next;
    for (Link *l = first; l != &self->root; l = l->next) {
        l->linked = 0;
    }
    self->root.prev->next = NULL; /* the detached chain ends with NULL */
    if (first == &self->root) {
        first = NULL;
    }
    self->root.next = self->root.prev = &self->root;
    self->nlinked = 0;
    if (keep_dict) {
        if (self->cache != NULL) {
            PyDict_Clear(self->cache);
        }
    }
    else {
        Py_CLEAR(self->cache);
    }
    /* Pass 2: drop the list's references (may run arbitrary code; the cache is empty and
       consistent, and nothing relinks an unlinked Link or rewrites its pointers). */
    for (Link *l = first; l != NULL;) {
        Link *next = l->next;
        l->prev = l->next = NULL;
        Py_DECREF(l);
        l = next;
    }
}

static int
cache_alive(FastCache *self)
{
    if (self->cache == NULL) {
        PyErr_SetString(PyExc_ReferenceError, "FastCache was cleared by the garbage collector");
        return 0;
    }
    return 1;
}

static inline unsigned long long
current_version(void)
{
    return watch_api ? watch_api->version() : 0;
}

/* The namespace version of a fast entry: the watcher counter (3.12+), else the largest tag of
   its namespace dicts (3.10/3.11; validate_entry checked they are a tuple of dicts). */
static inline unsigned long long
entry_version(PyObject *entry)
{
    if (watch_api != NULL) {
        return watch_api->version();
    }
    if (dictver_api != NULL && PyTuple_GET_SIZE(entry) > E_NSDICTS) {
        PyObject *dicts = PyTuple_GET_ITEM(entry, E_NSDICTS);
        if (PyTuple_Check(dicts)) {
            long long tag = dictver_api->tags_max(dicts);
            if (tag < 0) { /* not a tuple of dicts: such an entry is never fast (validate_entry) */
                PyErr_Clear();
                return 0;
            }
            return (unsigned long long)tag;
        }
    }
    return 0;
}

/* Borrowed current audit generation object, or NULL (no exception) if gen_cell is empty. */
static inline PyObject *
current_gen(FastCache *self)
{
    return PyList_GET_SIZE(self->gen_cell) > 0 ? PyList_GET_ITEM(self->gen_cell, 0) : NULL;
}

/* The key (see the contract); kwds is NULL or non-empty. Runs no Python code. */
static PyObject *
make_key(FastCache *self, PyObject *args, PyObject *kwds)
{
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (!self->typed && kwds == NULL) {
        if (n == 1) {
            PyObject *a = PyTuple_GET_ITEM(args, 0);
            if (PyLong_CheckExact(a) || PyUnicode_CheckExact(a)) {
                return Py_NewRef(a);
            }
        }
        return Py_NewRef(args);
    }
    Py_ssize_t nkw = kwds ? PyDict_GET_SIZE(kwds) : 0;
    Py_ssize_t head = self->typed ? 2 : 1;
    PyObject *key = PyTuple_New(head + (nkw ? 1 + nkw * (self->typed ? 2 : 1) : 0));
    if (key == NULL) {
        return NULL;
    }
    PyTuple_SET_ITEM(key, 0, Py_NewRef(args));
    if (self->typed) {
        PyObject *types = PyTuple_New(n);
        if (types == NULL) {
            Py_DECREF(key);
            return NULL;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyTuple_SET_ITEM(types, i, Py_NewRef((PyObject *)Py_TYPE(PyTuple_GET_ITEM(args, i))));
        }
        PyTuple_SET_ITEM(key, 1, types);
    }
    if (nkw) {
        PyTuple_SET_ITEM(key, head, Py_NewRef(self->kwd_mark));
        PyObject *k, *v;
        Py_ssize_t pos = 0, i = head + 1;
        while (PyDict_Next(kwds, &pos, &k, &v)) {
            PyObject *item = PyTuple_Pack(2, k, v);
            if (item == NULL) {
                Py_DECREF(key); /* unset slots are NULL: tuple dealloc skips them */
                return NULL;
            }
            PyTuple_SET_ITEM(key, i, item);
            if (self->typed) {
                PyTuple_SET_ITEM(key, i + nkw, Py_NewRef((PyObject *)Py_TYPE(v)));
            }
            i++;
        }
    }
    return key;
}

static PyObject *
call_slow(FastCache *self, PyObject *args, PyObject *kwds, PyObject *stale)
{
    PyObject *stack[3] = {args, (kwds != NULL && PyDict_GET_SIZE(kwds)) ? kwds : Py_None, stale};
    PyObject *slow = Py_NewRef(self->slow);
    PyObject *res = PyObject_Vectorcall(slow, stack, 3, NULL);
    Py_DECREF(slow);
    return res;
}

/* 1 when every cell of the entry holds its expected object. */
static inline int
cells_hold(PyObject *entry)
{
    PyObject *cells = PyTuple_GET_ITEM(entry, E_CELLS);
    PyObject *expected = PyTuple_GET_ITEM(entry, E_EXPECTED);
    Py_ssize_t n = PyTuple_GET_SIZE(cells);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyCell_GET(PyTuple_GET_ITEM(cells, i)) != PyTuple_GET_ITEM(expected, i)) {
            return 0;
        }
    }
    return 1;
}

static PyObject *
fc_call(FastCache *self, PyObject *args, PyObject *kwds)
{
    if (!cache_alive(self)) {
        return NULL;
    }
    if (kwds != NULL && PyDict_GET_SIZE(kwds) == 0) {
        kwds = NULL;
    }
    if (self->maxsize == 0) {
        return call_slow(self, args, kwds, Py_None);
    }
    PyObject *key = make_key(self, args, kwds);
    if (key == NULL) {
        return NULL;
    }
    Link *link = (Link *)PyDict_GetItemWithError(self->cache, key); /* borrowed */
    Py_DECREF(key);
    if (link == NULL) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        return call_slow(self, args, kwds, Py_None);
    }
    Py_INCREF(link);
    PyObject *entry = link->entry;
    if (link->fast && link->g_seen != NULL && entry_version(entry) == link->v_seen &&
        current_gen(self) == link->g_seen && cells_hold(entry)) {
        /* Warm hit: no Python code ran since the lookup. */
        self->hits++;
        list_touch(self, link);
        PyObject *value = Py_NewRef(PyTuple_GET_ITEM(entry, E_VALUE));
        Py_DECREF(link);
        return value;
    }
    /* Full check (Python code: the cache may change under us). */
    Py_INCREF(entry);
    unsigned long long v = entry_version(entry);
    PyObject *g = current_gen(self);
    Py_XINCREF(g);
    /* Read after g: a store announced before g was bumped is still listed here. */
    int settled = self->pending == NULL || PyDict_GET_SIZE(self->pending) == 0;
    PyObject *res = PyObject_CallNoArgs(PyTuple_GET_ITEM(entry, E_CHECK));
    int ok = -1;
    if (res != NULL) {
        ok = res == Py_True ? 1 : (res == Py_False ? 0 : PyObject_IsTrue(res));
        Py_DECREF(res);
    }
    PyObject *value = NULL;
    if (ok > 0) {
        if (link->entry == entry && link->fast && g != NULL && settled) {
            link->v_seen = v;
            Py_XSETREF(link->g_seen, g); /* steals g */
            g = NULL;
        }
        self->hits++;
        list_touch(self, link);
        value = Py_NewRef(PyTuple_GET_ITEM(entry, E_VALUE));
    }
    Py_XDECREF(g);
    Py_DECREF(link);
    if (ok == 0) {
        value = call_slow(self, args, kwds, entry);
    }
    Py_DECREF(entry);
    return value;
}

/* 1 when the entry carries a tuple of exact dicts at E_NSDICTS (a tuple: never changes). */
static int
entry_has_nsdicts(PyObject *entry)
{
    if (PyTuple_GET_SIZE(entry) <= E_NSDICTS || !PyTuple_Check(PyTuple_GET_ITEM(entry, E_NSDICTS))) {
        return 0;
    }
    PyObject *dicts = PyTuple_GET_ITEM(entry, E_NSDICTS);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(dicts); i++) {
        if (!PyDict_CheckExact(PyTuple_GET_ITEM(dicts, i))) {
            return 0;
        }
    }
    return 1;
}

/* 0 when entry has the layout the call path relies on, else -1 with TypeError. *fast is set. */
static int
validate_entry(PyObject *entry, int *fast)
{
    if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) < E_MIN_SIZE) {
        PyErr_SetString(PyExc_TypeError,
                        "FastCache entry must be a tuple (check, value, fingerprint, cells, expected, fast)");
        return -1;
    }
    PyObject *cells = PyTuple_GET_ITEM(entry, E_CELLS);
    PyObject *expected = PyTuple_GET_ITEM(entry, E_EXPECTED);
    if (!PyCallable_Check(PyTuple_GET_ITEM(entry, E_CHECK))) {
        PyErr_SetString(PyExc_TypeError, "FastCache entry: check must be callable");
        return -1;
    }
    if (!PyTuple_Check(cells) || !PyTuple_Check(expected) || PyTuple_GET_SIZE(cells) != PyTuple_GET_SIZE(expected)) {
        PyErr_SetString(PyExc_TypeError, "FastCache entry: cells and expected must be tuples of equal length");
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(cells); i++) {
        if (!PyCell_Check(PyTuple_GET_ITEM(cells, i))) {
            PyErr_SetString(PyExc_TypeError, "FastCache entry: cells must hold cell objects");
            return -1;
        }
    }
    PyObject *f = PyTuple_GET_ITEM(entry, E_FAST);
    *fast = (f == Py_True) && (watch_api != NULL || (dictver_api != NULL && entry_has_nsdicts(entry)));
    return 0;
}

/* Swap a Link's entry; the new entry starts unvalidated. */
static void
link_set_entry(Link *link, PyObject *entry, int fast)
{
    PyObject *old_entry = link->entry;
    PyObject *old_g = link->g_seen;
    link->entry = Py_NewRef(entry);
    link->g_seen = NULL;
    link->v_seen = 0;
    link->fast = fast;
    Py_XDECREF(old_g);
    Py_DECREF(old_entry);
}

/* Remove link->key from the dict if it still maps to link: 0, or -1 with an exception. */
static int
dict_del_if(FastCache *self, Link *link)
{
    PyObject *cur = PyDict_GetItemWithError(self->cache, link->key);
    if (cur == (PyObject *)link) {
        return PyDict_DelItem(self->cache, link->key);
    }
    return (cur == NULL && PyErr_Occurred()) ? -1 : 0;
}

/* Evict least recently used Links while the dict is larger than maxsize. */
static int
evict(FastCache *self)
{
    while (self->maxsize >= 0 && self->cache != NULL && PyDict_GET_SIZE(self->cache) > self->maxsize &&
           self->root.next != &self->root) {
        Link *old = self->root.next;
        list_unlink(self, old); /* we now own the list's reference */
        int rc = dict_del_if(self, old);
        Py_DECREF(old);
        if (rc < 0) {
            return -1;
        }
    }
    return 0;
}

static PyObject *
fc_store(FastCache *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!cext_nargs_ok(nargs, 2, 2, "store(key, entry)")) {
        return NULL;
    }
    PyObject *key = args[0], *entry = args[1];
    int fast;
    if (!cache_alive(self) || validate_entry(entry, &fast) < 0) {
        return NULL;
    }
    Link *link = (Link *)PyDict_GetItemWithError(self->cache, key);
    if (link != NULL) {
        Py_INCREF(link);
        link_set_entry(link, entry, fast);
        list_touch(self, link);
        Py_DECREF(link);
        Py_RETURN_NONE;
    }
    if (PyErr_Occurred()) {
        return NULL;
    }
    link = PyObject_New(Link, &LinkType);
    if (link == NULL) {
        return NULL;
    }
    link->prev = link->next = NULL;
    link->linked = 0;
    link->key = Py_NewRef(key);
    link->entry = Py_NewRef(entry);
    link->g_seen = NULL;
    link->v_seen = 0;
    link->fast = fast;
    if (PyDict_SetItem(self->cache, key, (PyObject *)link) < 0) {
        Py_DECREF(link);
        return NULL;
    }
    list_append(self, link);
    Py_DECREF(link); /* dict and list hold it */
    if (evict(self) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* New reference to the Link stored under key, NULL with no exception when absent. */
static Link *
find(FastCache *self, PyObject *key)
{
    if (!cache_alive(self)) {
        return NULL;
    }
    Link *link = (Link *)PyDict_GetItemWithError(self->cache, key);
    Py_XINCREF(link);
    return link;
}

static PyObject *
fc_get(FastCache *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!cext_nargs_ok(nargs, 1, 2, "get(key, default=None)")) {
        return NULL;
    }
    Link *link = find(self, args[0]);
    if (link == NULL) {
        return PyErr_Occurred() ? NULL : Py_NewRef(nargs == 2 ? args[1] : Py_None);
    }
    PyObject *entry = Py_NewRef(link->entry);
    Py_DECREF(link);
    return entry;
}

static PyObject *
fc_touch(FastCache *self, PyObject *key)
{
    Link *link = find(self, key);
    if (link == NULL) {
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_False);
    }
    list_touch(self, link);
    Py_DECREF(link);
    Py_RETURN_TRUE;
}

static PyObject *
fc_replace(FastCache *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!cext_nargs_ok(nargs, 3, 3, "replace(key, old, new)")) {
        return NULL;
    }
    int fast;
    if (validate_entry(args[2], &fast) < 0) {
        return NULL;
    }
    Link *link = find(self, args[0]);
    if (link == NULL) {
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_False);
    }
    int same = link->entry == args[1];
    if (same) {
        link_set_entry(link, args[2], fast);
    }
    Py_DECREF(link);
    return Py_NewRef(same ? Py_True : Py_False);
}

static PyObject *
fc_discard(FastCache *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!cext_nargs_ok(nargs, 1, 2, "discard(key, entry=None)")) {
        return NULL;
    }
    Link *link = find(self, args[0]);
    if (link == NULL) {
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_False);
    }
    if (nargs == 2 && args[1] != Py_None && link->entry != args[1]) {
        Py_DECREF(link);
        Py_RETURN_FALSE;
    }
    if (link->linked) {
        list_unlink(self, link);
        Py_DECREF(link); /* the list's reference; ours keeps it alive */
    }
    int rc = dict_del_if(self, link);
    Py_DECREF(link);
    if (rc < 0) {
        return NULL;
    }
    Py_RETURN_TRUE;
}

/* Test hook: (fast, validated) of the entry under key, or None. */
static PyObject *
fc_link_state(FastCache *self, PyObject *key)
{
    Link *link = find(self, key);
    if (link == NULL) {
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    }
    PyObject *res = Py_BuildValue("(OO)", link->fast ? Py_True : Py_False, link->g_seen ? Py_True : Py_False);
    Py_DECREF(link);
    return res;
}

static PyObject *
fc_items(FastCache *self, PyObject *unused)
{
    (void)unused;
    if (!cache_alive(self)) {
        return NULL;
    }
    /* Allocation may run a garbage collection and so finalizers that change the list:
       allocate first, then take references to the Links without allocating, then build. */
    PyObject *out;
    Py_ssize_t n;
    for (;;) {
        n = self->nlinked;
        out = PyList_New(n);
        if (out == NULL) {
            return NULL;
        }
        if (n == self->nlinked) {
            break;
        }
        Py_DECREF(out);
    }
    Py_ssize_t i = 0;
    for (Link *l = self->root.next; l != &self->root && i < n; l = l->next) {
        PyList_SET_ITEM(out, i++, Py_NewRef((PyObject *)l));
    }
    for (i = 0; i < n; i++) {
        Link *l = (Link *)PyList_GET_ITEM(out, i);
        PyObject *pair = PyTuple_Pack(2, l->key, l->entry);
        if (pair == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, pair);
        Py_DECREF(l);
    }
    return out;
}

static PyObject *
fc_clear(FastCache *self, PyObject *unused)
{
    (void)unused;
    self->hits = self->misses = 0;
    detach_all(self, 1);
    Py_RETURN_NONE;
}

static PyObject *
fc_add_hit(FastCache *self, PyObject *unused)
{
    (void)unused;
    self->hits++;
    Py_RETURN_NONE;
}

static PyObject *
fc_add_miss(FastCache *self, PyObject *unused)
{
    (void)unused;
    self->misses++;
    Py_RETURN_NONE;
}

static PyObject *
fc_reduce(FastCache *self, PyObject *unused)
{
    (void)unused;
    return PyObject_GetAttrString((PyObject *)self, "__qualname__");
}

static PyObject *
fc_copy(FastCache *self, PyObject *unused)
{
    (void)unused;
    return Py_NewRef(self);
}

static PyObject *
fc_deepcopy(FastCache *self, PyObject *memo)
{
    (void)memo;
    return Py_NewRef(self);
}

static Py_ssize_t
fc_len(FastCache *self)
{
    return self->cache ? PyDict_GET_SIZE(self->cache) : 0;
}

static PyObject *
fc_descr_get(PyObject *self, PyObject *obj, PyObject *type)
{
    (void)type;
    if (obj == Py_None || obj == NULL) {
        return Py_NewRef(self);
    }
    return PyMethod_New(self, obj);
}

static PyObject *
fc_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"maxsize", "typed", "slow", "gen_cell", "kwd_mark", "pending", NULL};
    PyObject *maxsize_obj, *slow, *gen_cell, *kwd_mark, *pending = Py_None;
    int typed;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OpOO!O|O:FastCache", kwlist, &maxsize_obj, &typed, &slow,
                                     &PyList_Type, &gen_cell, &kwd_mark, &pending)) {
        return NULL;
    }
    if (pending != Py_None && !PyDict_CheckExact(pending)) {
        PyErr_SetString(PyExc_TypeError, "FastCache: pending must be a dict (flydeps.watch.audit._PENDING) or None");
        return NULL;
    }
    Py_ssize_t maxsize = -1;
    if (maxsize_obj != Py_None) {
        maxsize = PyNumber_AsSsize_t(maxsize_obj, PyExc_OverflowError);
        if (maxsize == -1 && PyErr_Occurred()) {
            return NULL;
        }
        if (maxsize < 0) {
            maxsize = 0;
        }
    }
    if (!PyCallable_Check(slow)) {
        PyErr_SetString(PyExc_TypeError, "FastCache: slow must be callable");
        return NULL;
    }
    FastCache *self = (FastCache *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->cache = PyDict_New();
    if (self->cache == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    self->root.prev = self->root.next = &self->root;
    self->nlinked = 0;
    self->maxsize = maxsize;
    self->typed = typed;
    self->hits = self->misses = 0;
    self->slow = Py_NewRef(slow);
    self->gen_cell = Py_NewRef(gen_cell);
    self->kwd_mark = Py_NewRef(kwd_mark);
    self->pending = pending == Py_None ? NULL : Py_NewRef(pending);
    return (PyObject *)self;
}

/* The cache's own references besides the dict and the list (traverse and tp_clear). */
static const Py_ssize_t fc_fields[] = {
    CEXT_FIELD(FastCache, slow),    CEXT_FIELD(FastCache, gen_cell), CEXT_FIELD(FastCache, kwd_mark),
    CEXT_FIELD(FastCache, pending), CEXT_FIELD(FastCache, dict),     CEXT_FIELDS_END,
};

static int
fc_traverse(FastCache *self, visitproc visit, void *arg)
{
    for (Link *l = self->root.next; l != NULL && l != &self->root; l = l->next) {
        int rc = cext_visit_fields((PyObject *)l, link_fields, visit, arg);
        if (rc) {
            return rc;
        }
    }
    Py_VISIT(self->cache);
    return cext_visit_fields((PyObject *)self, fc_fields, visit, arg);
}

static int
fc_tp_clear(FastCache *self)
{
    if (self->root.next != NULL) { /* NULL before tp_new initialised the list */
        detach_all(self, 0);
    }
    else {
        Py_CLEAR(self->cache);
    }
    cext_clear_fields((PyObject *)self, fc_fields);
    return 0;
}

static void
fc_dealloc(FastCache *self)
{
    cext_gc_dealloc((PyObject *)self, (inquiry)fc_tp_clear, self->weakreflist);
}

static PyObject *
get_hits(FastCache *self, void *closure)
{
    (void)closure;
    return PyLong_FromSsize_t(self->hits);
}

static PyObject *
get_misses(FastCache *self, void *closure)
{
    (void)closure;
    return PyLong_FromSsize_t(self->misses);
}

static PyObject *
get_maxsize(FastCache *self, void *closure)
{
    (void)closure;
    if (self->maxsize < 0) {
        Py_RETURN_NONE;
    }
    return PyLong_FromSsize_t(self->maxsize);
}

static PyObject *
get_typed(FastCache *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->typed);
}

static PyGetSetDef fc_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {"hits", (getter)get_hits, NULL, "warm hits counted so far", NULL},
    {"misses", (getter)get_misses, NULL, "misses (builds) counted so far", NULL},
    {"maxsize", (getter)get_maxsize, NULL, "maximum number of entries, None when unbounded", NULL},
    {"typed", (getter)get_typed, NULL, "whether argument types are part of the key", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef fc_methods[] = {
    {"get", (PyCFunction)(void (*)(void))fc_get, METH_FASTCALL, "get(key, default=None) -> entry (no touch, no count)"},
    {"touch", (PyCFunction)fc_touch, METH_O, "touch(key) -> bool: mark the entry most recently used"},
    {"store", (PyCFunction)(void (*)(void))fc_store, METH_FASTCALL,
     "store(key, entry): insert/replace as most recently used, evict beyond maxsize"},
    {"replace", (PyCFunction)(void (*)(void))fc_replace, METH_FASTCALL,
     "replace(key, old, new) -> bool: swap in place if the entry is still old"},
    {"discard", (PyCFunction)(void (*)(void))fc_discard, METH_FASTCALL,
     "discard(key, entry=None) -> bool: remove (only if still entry, when given)"},
    {"_link_state", (PyCFunction)fc_link_state, METH_O, "(fast, validated) of an entry (tests)"},
    {"items", (PyCFunction)fc_items, METH_NOARGS, "items() -> [(key, entry)], least recently used first"},
    {"clear", (PyCFunction)fc_clear, METH_NOARGS, "clear(): drop every entry, reset the counters"},
    {"add_hit", (PyCFunction)fc_add_hit, METH_NOARGS, "count one hit"},
    {"add_miss", (PyCFunction)fc_add_miss, METH_NOARGS, "count one miss"},
    {"__reduce__", (PyCFunction)fc_reduce, METH_NOARGS, NULL},
    {"__copy__", (PyCFunction)fc_copy, METH_NOARGS, NULL},
    {"__deepcopy__", (PyCFunction)fc_deepcopy, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

static PyMappingMethods fc_as_mapping = {
    .mp_length = (lenfunc)fc_len,
};

static PyTypeObject FastCacheType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "flydeps.builds._fastcache.FastCache",
    .tp_basicsize = sizeof(FastCache),
    .tp_dealloc = (destructor)fc_dealloc,
    .tp_as_mapping = &fc_as_mapping,
    .tp_call = (ternaryfunc)fc_call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "FastCache(maxsize, typed, slow, gen_cell, kwd_mark, pending=None): the C hit path of flydeps.cached_factory.",
    .tp_traverse = (traverseproc)fc_traverse,
    .tp_clear = (inquiry)fc_tp_clear,
    .tp_weaklistoffset = offsetof(FastCache, weakreflist),
    .tp_methods = fc_methods,
    .tp_getset = fc_getset,
    .tp_descr_get = fc_descr_get,
    .tp_dictoffset = offsetof(FastCache, dict),
    .tp_new = fc_new,
};

static int
prepare(void)
{
    return PyType_Ready(&LinkType) < 0 || PyType_Ready(&FastCacheType) < 0 ? -1 : 0;
}

static int
fill(PyObject *module)
{
    const FlydepsWatchAPI *api =
        cext_import_capsule(FLYDEPS_WATCH_MODULE, FLYDEPS_WATCH_CAPSULE, FLYDEPS_WATCH_API_ABI);
    if (api != NULL && api->version != NULL) {
        watch_api = api;
    }
    if (watch_api == NULL) { /* no watcher extension here: fast entries need the tag reader */
        const FlydepsDictVerAPI *tags =
            cext_import_capsule(FLYDEPS_DICTVER_MODULE, FLYDEPS_DICTVER_CAPSULE, FLYDEPS_DICTVER_API_ABI);
        if (tags != NULL && tags->tags_max != NULL) { /* else neither extension: entries are never fast */
            dictver_api = tags;
        }
    }
    if (cext_add_type(module, "FastCache", &FastCacheType) < 0 ||
        PyModule_AddIntConstant(module, "WATCH_API", watch_api != NULL) < 0 ||
        PyModule_AddIntConstant(module, "TAGS_API", dictver_api != NULL) < 0) {
        return -1;
    }
    return 0;
}

CEXT_MODULE(_fastcache, "_fastcache",
            "C hit path of flydeps.cached_factory (see flydeps/builds/factory.py for the contract).", NULL, prepare,
            fill)
