/* darwin_memo._cjoin: the published merge rule's greedy pass, compiled.
 *
 * greedy_groups(tokens, threshold, sink=None) -> list[list[int]] | None
 *
 * ``tokens[i]`` is candidate i's token set: an iterable of hashable tokens, or (every
 * item then) a text whose tokens are what ``str.split()`` gives, split here (in UTF-8)
 * without the GIL. Candidates come in the greedy order (energy, highest first). Each
 * candidate not yet taken is an anchor: it gathers every candidate not yet taken and
 * not an earlier anchor whose Jaccard similarity with it reaches ``threshold``
 * (``o / (|a| + |b| - o) >= threshold`` in doubles, the pairwise scan's
 * expression). Returns the groups of two or more, each the anchor followed by its
 * partners ascending: what ``consolidate._gather`` computes in Python. With ``sink``
 * the groups go to it in batches as they are found and None is returned.
 *
 * The join is the one ``consolidate._jaccard_partners`` describes. Tokens are put
 * in one global order, rarest first, and each set sorted by it. Two sets of sizes
 * ``a`` and ``b`` reach the threshold only with ``need(a, b)`` shared tokens or
 * more, and then their k-th shared token sits at a position ``<= |x| - need + k - 1``
 * of each set x. So every set indexes its first ``|x| - need(|x|) + 2`` tokens (the
 * prefix and one more) by token, set size and position; an anchor walks the lists
 * of its own, counting how often it meets each set within those bounds, and a set
 * met twice (once, where one shared token could do) is compared exactly, unless the
 * sets' token signatures already bound the overlap below what they need. Taken
 * candidates and earlier anchors leave the lists as they are walked. The order of
 * tokens with equal counts does not matter: it changes which sets are compared, not
 * which pairs pass.
 *
 * It uses only the limited API of Python 3.10 (the stable ABI: one build, an
 * ``abi3`` wheel, serves every later Python).
 */
#define Py_LIMITED_API 0x030A0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

/* Needed overlaps are cached for sizes below this (a table of int16). */
#define CACHED_SIZES 512

#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH_FOR(address, write) __builtin_prefetch((address), (write))
#define POPCOUNT64(x) __builtin_popcountll(x)
#else
#define PREFETCH_FOR(address, write) ((void)0)
static inline int
POPCOUNT64(uint64_t x)
{
    x = x - ((x >> 1) & 0x5555555555555555ull);
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
    return (int)((x * 0x0101010101010101ull) >> 56);
}
#endif

/* The most token sets one join takes (a list entry holds a set in 24 bits). */
#define MAX_SETS ((Py_ssize_t)1 << 24)

/* A set taken into a group or done as an anchor. */
#define GONE 0xffff
/* Anchors stamp the sets they meet with an epoch; after this many the stamps restart. */
#define EPOCHS 0x3fff
/* Every this many anchors (a power of two) the join checks for signals and, with a
 * sink, hands over the groups found meanwhile. */
#define EMIT_EVERY 4096
/* How many entries ahead the walks ask for memory. */
#define PREFETCH 8

/* The least overlap o with o / (sa + sb - o) >= t; min(sa, sb) + 1 when none
 * (consolidate._NeededOverlaps, step for step). */
static int
need_overlap(double t, int sa, int sb)
{
    int total = sa + sb;
    int least = sa < sb ? sa : sb;
    int need = (int)ceil(t * total / (1.0 + t)) - 1;
    if (need < 1)
        need = 1;
    while (need > 1 && (double)(need - 1) / (double)(total - need + 1) >= t)
        need--;
    while (need <= least && (double)need / (double)(total - need) < t)
        need++;
    return need > least ? least + 1 : need;
}

/* How many of its first tokens a set of ``size`` indexes and probes: its prefix
 * (where the first shared token of any partner lies) and one token more. */
static int
indexed_len(double t, int size)
{
    int need = (int)ceil(t * size - 1e-9 * size); /* rounded towards a longer prefix */
    if (need < 1)
        need = 1;
    int len = size - need + 2;
    if (len > size)
        len = size;
    return len < 0 ? 0 : len;
}

/* malloc, with large arrays on huge pages where the system offers them on request: the
 * join reads them at random, and a miss in the TLB costs as much as one in the cache. */
static void *
big_malloc(size_t size)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const size_t huge = (size_t)2 << 20;
    if (size >= 2 * huge) {
        void *p = NULL;
        size_t rounded = (size + huge - 1) / huge * huge;
        if (posix_memalign(&p, huge, rounded) == 0) {
            madvise(p, rounded, MADV_HUGEPAGE);
            return p;
        }
        return NULL;
    }
#endif
    return malloc(size);
}

static void *
big_calloc(size_t count, size_t size)
{
    void *p = big_malloc(count * size);
    if (p != NULL)
        memset(p, 0, count * size);
    return p;
}

static int
compare_int32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* A set's tokens hashed into 192 bits: a token of one set whose bit the other's
 * signature lacks is not in the other set. */
typedef struct {
    uint64_t bits[3];
    int32_t size;
    int32_t spare; /* the tokens sharing a bit with another of the set's own */
} Signature;

static inline int
token_bit(int32_t rank)
{
    return (int)(((uint64_t)(uint32_t)rank * 0x9E3779B97F4A7C15ull) >> 56) % 192;
}

typedef struct {
    double t;
    Py_ssize_t n;
    int64_t *offsets; /* n + 1: where each set's tokens start in toks */
    int32_t *toks;    /* each set's token ids, then (after ranking) ranks ascending */
    int32_t *sizes;
    int32_t *plens; /* indexed_len of each set */
    int64_t vocab;
    /* Text mode: the token sets given as whitespace-separated text, read as UTF-8 (the
     * texts, and the bytes of those that hold lone surrogates, kept alive here) */
    PyObject *texts_owner;
    PyObject *bytes_owner;
    const char **text_data;
    Py_ssize_t *text_len;
    int16_t *needs; /* CACHED_SIZES^2, 0 = not computed yet */
    /* The index: each token's blocks (one per set size, ascending), each block its
     * entries (set, position) by position; ``block_len`` is a block's live length. */
    int64_t *token_blocks; /* vocab + 1: the token's blocks are [token_blocks[w], [w + 1]) */
    int32_t *block_size;
    int64_t *block_start;
    int64_t *block_len;
    uint32_t *entries; /* set << 8 | position (clamped at 255: only ever understated) */
    Signature *signatures; /* per set: its tokens hashed into bits, and its size */
    uint16_t *state; /* per set: GONE, or the anchor's epoch << 2 | meetings (1 or 2) */
    uint16_t epoch;
    int32_t *twice; /* the sets the anchor met twice: to compare */
    int32_t *found;   /* the anchor's partners */
    int32_t *group_at;
    int32_t *group_members;
    Py_ssize_t groups;
    Py_ssize_t members;
} Join;

static void
join_free(Join *j)
{
    Py_CLEAR(j->texts_owner);
    Py_CLEAR(j->bytes_owner);
    free(j->text_data);
    free(j->text_len);
    free(j->offsets);
    free(j->toks);
    free(j->sizes);
    free(j->plens);
    free(j->needs);
    free(j->token_blocks);
    free(j->block_size);
    free(j->block_start);
    free(j->block_len);
    free(j->entries);
    free(j->state);
    free(j->signatures);
    free(j->twice);
    free(j->found);
    free(j->group_at);
    free(j->group_members);
}

static inline int
need_of(Join *j, int sa, int sb)
{
    if (sa < CACHED_SIZES && sb < CACHED_SIZES) {
        int16_t *slot = &j->needs[sa * CACHED_SIZES + sb];
        if (*slot == 0)
            *slot = (int16_t)need_overlap(j->t, sa, sb);
        return *slot;
    }
    return need_overlap(j->t, sa, sb);
}

/* Text mode, with the GIL: note where each text's UTF-8 bytes are. ``seq`` is a tuple,
 * kept (with the texts it holds) until the join ends. 0, or -1 with an exception set. */
static int
join_read_texts(Join *j, PyObject *seq)
{
    Py_ssize_t n = PyTuple_Size(seq);
    j->n = n;
    j->text_data = malloc(sizeof(char *) * (n + 1));
    j->text_len = malloc(sizeof(Py_ssize_t) * (n + 1));
    j->offsets = big_malloc(sizeof(int64_t) * (n + 1));
    j->sizes = big_malloc(sizeof(int32_t) * (n + 1));
    if (j->text_data == NULL || j->text_len == NULL || j->offsets == NULL ||
        j->sizes == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_INCREF(seq);
    j->texts_owner = seq;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *text = PyTuple_GetItem(seq, i);
        if (text == NULL)
            return -1;
        if (!PyUnicode_Check(text)) {
            PyErr_Format(PyExc_TypeError,
                         "tokens[%zd] is not text (the first is: every item must be)", i);
            return -1;
        }
        Py_ssize_t len;
        const char *data = PyUnicode_AsUTF8AndSize(text, &len);
        if (data == NULL) {
            /* A lone surrogate has no UTF-8: its text is read in the bytes that
             * "surrogatepass" gives, where each character still has bytes of its own. */
            if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
                return -1;
            PyErr_Clear();
            PyObject *bytes = PyUnicode_AsEncodedString(text, "utf-8", "surrogatepass");
            if (bytes == NULL)
                return -1;
            if (j->bytes_owner == NULL && (j->bytes_owner = PyList_New(0)) == NULL) {
                Py_DECREF(bytes);
                return -1;
            }
            int kept = PyList_Append(j->bytes_owner, bytes);
            Py_DECREF(bytes);
            char *raw;
            if (kept < 0 || PyBytes_AsStringAndSize(bytes, &raw, &len) < 0)
                return -1;
            data = raw;
        }
        j->text_data[i] = data;
        j->text_len[i] = len;
    }
    return 0;
}

/* How many bytes the character at ``p`` takes when ``str.split()`` splits on it (it
 * is whitespace: ``str.isspace``), else 0. ``p`` starts a character or sits inside
 * one: a byte inside a character (0x80 to 0xbf) starts none of these. */
static inline int
space_at(const unsigned char *p, Py_ssize_t left)
{
    unsigned char c = p[0];
    if (c < 0x80)
        return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20);
    if (c == 0xc2 && left >= 2)
        return p[1] == 0x85 || p[1] == 0xa0 ? 2 : 0; /* U+0085, U+00A0 */
    if (left < 3 || c < 0xe1 || c > 0xe3)
        return 0;
    if (c == 0xe1)
        return p[1] == 0x9a && p[2] == 0x80 ? 3 : 0; /* U+1680 */
    if (c == 0xe3)
        return p[1] == 0x80 && p[2] == 0x80 ? 3 : 0; /* U+3000 */
    if (p[1] == 0x80) /* U+2000 to U+200A, U+2028, U+2029, U+202F */
        return (p[2] <= 0x8a || p[2] == 0xa8 || p[2] == 0xa9 || p[2] == 0xaf) ? 3 : 0;
    return p[1] == 0x81 && p[2] == 0x9f ? 3 : 0; /* U+205F */
}

/* A run of bytes (a token) in one of the texts. */
typedef struct {
    const char *data;
    int32_t len;
    uint64_t hash;
} Run;

static int
runs_equal(const Run *a, const Run *b)
{
    return a->len == b->len && a->hash == b->hash &&
           memcmp(a->data, b->data, (size_t)a->len) == 0;
}

/* Text mode, without the GIL: split each text on whitespace as ``str.split()`` does and
 * name each distinct token by a small int. 0, or -1 when memory ran out. */
static int
join_split_texts(Join *j)
{
    Py_ssize_t n = j->n;
    int64_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const unsigned char *data = (const unsigned char *)j->text_data[i];
        Py_ssize_t len = j->text_len[i], k = 0;
        int inside = 0;
        j->offsets[i] = total;
        while (k < len) {
            int space = space_at(data + k, len - k);
            total += !space && !inside;
            inside = !space;
            k += space ? space : 1;
        }
    }
    j->offsets[n] = total;
    j->toks = big_malloc(sizeof(int32_t) * (total + 1));
    size_t capacity = 1024, table = 2048; /* names; slots (a power of two) */
    Run *names = malloc(sizeof(Run) * capacity);
    int32_t *slots = malloc(sizeof(int32_t) * table);
    if (j->toks == NULL || names == NULL || slots == NULL) {
        free(names);
        free(slots);
        return -1;
    }
    memset(slots, 0xff, sizeof(int32_t) * table);
    int64_t count = 0, at = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const unsigned char *data = (const unsigned char *)j->text_data[i];
        Py_ssize_t len = j->text_len[i], k = 0;
        while (k < len) {
            int space;
            while (k < len && (space = space_at(data + k, len - k)) > 0)
                k += space;
            if (k == len)
                break;
            Py_ssize_t start = k;
            uint64_t hash = 1469598103934665603ull;
            while (k < len && space_at(data + k, len - k) == 0) {
                hash = (hash ^ data[k]) * 1099511628211ull;
                k++;
            }
            if (k - start >= INT32_MAX)
                goto fail;
            Run run = {(const char *)data + start, (int32_t)(k - start), hash};
            size_t slot = (size_t)(run.hash ^ (run.hash >> 29)) & (table - 1);
            while (slots[slot] >= 0 && !runs_equal(&names[slots[slot]], &run))
                slot = (slot + 1) & (table - 1);
            if (slots[slot] < 0) {
                if ((size_t)count == capacity) {
                    capacity *= 2;
                    Run *grown = realloc(names, sizeof(Run) * capacity);
                    if (grown == NULL)
                        goto fail;
                    names = grown;
                }
                names[count] = run;
                slots[slot] = (int32_t)count++;
                if ((size_t)count * 2 > table) { /* rehash into twice the slots */
                    int32_t *wider = malloc(sizeof(int32_t) * table * 2);
                    if (wider == NULL)
                        goto fail;
                    table *= 2;
                    memset(wider, 0xff, sizeof(int32_t) * table);
                    for (int64_t id = 0; id < count; id++) {
                        uint64_t h = names[id].hash;
                        size_t s2 = (size_t)(h ^ (h >> 29)) & (table - 1);
                        while (wider[s2] >= 0)
                            s2 = (s2 + 1) & (table - 1);
                        wider[s2] = (int32_t)id;
                    }
                    free(slots);
                    slots = wider;
                    j->toks[at++] = (int32_t)(count - 1);
                    continue;
                }
            }
            j->toks[at++] = slots[slot];
        }
    }
    j->vocab = count;
    free(names);
    free(slots);
    return count >= INT32_MAX ? -1 : 0;
fail:
    free(names);
    free(slots);
    return -1;
}

/* Read the token sets, naming each token by a small int (first seen, first named).
 * 0 on success, -1 with an exception set. */
static int
join_read(Join *j, PyObject *tokens)
{
    /* A tuple of its own: nothing can change it while the join reads it. */
    PyObject *seq = PySequence_Tuple(tokens);
    if (seq == NULL) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_SetString(PyExc_TypeError, "tokens must be a sequence of token sets");
        }
        return -1;
    }
    PyObject *names = PyDict_New();
    int ok = -1;
    if (names == NULL)
        goto done;
    Py_ssize_t n = PyTuple_Size(seq);
    if (n >= MAX_SETS) {
        PyErr_SetString(PyExc_OverflowError, "too many token sets (2**24 at most)");
        goto done;
    }
    if (n > 0 && PyUnicode_Check(PyTuple_GetItem(seq, 0))) {
        ok = join_read_texts(j, seq); /* split later, without the GIL */
        goto done;
    }
    j->n = n;
    j->offsets = big_malloc(sizeof(int64_t) * (n + 1));
    j->sizes = big_malloc(sizeof(int32_t) * (n + 1));
    if (j->offsets == NULL || j->sizes == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t size = PyObject_Length(PyTuple_GetItem(seq, i));
        if (size < 0)
            goto done;
        j->offsets[i] = total;
        total += size;
    }
    j->offsets[n] = total;
    j->toks = big_malloc(sizeof(int32_t) * (total + 1));
    if (j->toks == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GetItem(seq, i);
        if (PyUnicode_Check(item)) {
            PyErr_Format(PyExc_TypeError,
                         "tokens[%zd] is text but the first is not: give token sets or texts", i);
            goto done;
        }
        PyObject *it = PyObject_GetIter(item);
        if (it == NULL)
            goto done;
        int64_t at = j->offsets[i], end = j->offsets[i + 1];
        PyObject *token;
        while ((token = PyIter_Next(it)) != NULL) {
            if (at == end) {
                Py_DECREF(token);
                Py_DECREF(it);
                PyErr_Format(PyExc_ValueError, "tokens[%zd] changed size while read", i);
                goto done;
            }
            PyObject *name = PyDict_GetItemWithError(names, token);
            long id;
            if (name != NULL) {
                id = PyLong_AsLong(name);
            }
            else if (PyErr_Occurred()) {
                Py_DECREF(token);
                Py_DECREF(it);
                goto done;
            }
            else {
                id = (long)PyDict_Size(names);
                PyObject *value = PyLong_FromLong(id);
                if (value == NULL || PyDict_SetItem(names, token, value) < 0) {
                    Py_XDECREF(value);
                    Py_DECREF(token);
                    Py_DECREF(it);
                    goto done;
                }
                Py_DECREF(value);
            }
            Py_DECREF(token);
            j->toks[at++] = (int32_t)id;
        }
        Py_DECREF(it);
        if (PyErr_Occurred())
            goto done;
        if (at != end) {
            PyErr_Format(PyExc_ValueError, "tokens[%zd] changed size while read", i);
            goto done;
        }
    }
    j->vocab = PyDict_Size(names);
    if (j->vocab >= INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "too many distinct tokens");
        goto done;
    }
    ok = 0;
done:
    Py_XDECREF(names);
    Py_DECREF(seq);
    return ok;
}

/* Rank the tokens rarest first and sort every set by rank, dropping repeats. */
static int
join_rank(Join *j)
{
    int64_t vocab = j->vocab;
    int64_t *held = calloc((size_t)vocab + 1, sizeof(int64_t));
    int64_t *first = NULL;
    int32_t *rank = malloc(sizeof(int32_t) * (vocab + 1));
    int64_t largest = 0;
    j->signatures = big_malloc(sizeof(Signature) * ((size_t)j->n + 1));
    if (held == NULL || rank == NULL || j->signatures == NULL)
        goto fail;
    for (int64_t k = 0; k < j->offsets[j->n]; k++)
        held[j->toks[k]]++;
    for (int64_t w = 0; w < vocab; w++)
        if (held[w] > largest)
            largest = held[w];
    /* a counting sort by how many sets hold each token */
    first = calloc((size_t)largest + 2, sizeof(int64_t));
    if (first == NULL)
        goto fail;
    for (int64_t w = 0; w < vocab; w++)
        first[held[w] + 1]++;
    for (int64_t c = 1; c <= largest + 1; c++)
        first[c] += first[c - 1];
    for (int64_t w = 0; w < vocab; w++)
        rank[w] = (int32_t)first[held[w]]++;
    for (Py_ssize_t i = 0; i < j->n; i++) {
        int32_t *seq = j->toks + j->offsets[i];
        int64_t size = j->offsets[i + 1] - j->offsets[i];
        for (int64_t k = 0; k < size; k++)
            seq[k] = rank[seq[k]];
        qsort(seq, (size_t)size, sizeof(int32_t), compare_int32);
        int64_t kept = 0;
        for (int64_t k = 0; k < size; k++)
            if (kept == 0 || seq[k] != seq[kept - 1])
                seq[kept++] = seq[k];
        j->sizes[i] = (int32_t)kept;
        Signature *sig = &j->signatures[i];
        memset(sig, 0, sizeof(*sig));
        int distinct = 0;
        for (int64_t k = 0; k < kept; k++) {
            int bit = token_bit(seq[k]);
            uint64_t mask = (uint64_t)1 << (bit & 63);
            distinct += !(sig->bits[bit >> 6] & mask);
            sig->bits[bit >> 6] |= mask;
        }
        sig->size = (int32_t)kept;
        sig->spare = (int32_t)(kept - distinct);
    }
    free(held);
    free(first);
    free(rank);
    return 0;
fail:
    free(held);
    free(first);
    free(rank);
    return -1;
}

typedef struct {
    int32_t set;
    int32_t pos;
} Entry;

/* Stable counting sort of ``from`` into ``to`` by ``key(entry)`` in [0, keys). */
#define COUNTING_SORT(from, to, total, keys, key, count)                                    \
    do {                                                                                 \
        memset((count), 0, sizeof(int64_t) * ((size_t)(keys) + 1));                       \
        for (int64_t e_ = 0; e_ < (total); e_++) {                                         \
            Entry entry_ = (from)[e_];                                                   \
            (count)[(key) + 1]++;                                                        \
        }                                                                                \
        for (int64_t k_ = 1; k_ <= (keys); k_++)                                          \
            (count)[k_] += (count)[k_ - 1];                                              \
        for (int64_t e_ = 0; e_ < (total); e_++) {                                         \
            Entry entry_ = (from)[e_];                                                   \
            (to)[(count)[(key)]++] = entry_;                                             \
        }                                                                                \
    } while (0)

/* Index every set's extended prefix by (token, size, position): each token's entries
 * in blocks of one set size, by position within a block. */
static int
join_index(Join *j)
{
    Py_ssize_t n = j->n;
    int64_t vocab = j->vocab;
    int64_t *token_at = calloc((size_t)vocab + 1, sizeof(int64_t));
    int64_t *count = NULL;
    Entry *entries = NULL, *spare = NULL;
    j->plens = malloc(sizeof(int32_t) * (n + 1));
    j->token_blocks = malloc(sizeof(int64_t) * (vocab + 1));
    if (token_at == NULL || j->plens == NULL || j->token_blocks == NULL)
        goto fail;
    int64_t total = 0, longest = 0, largest = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int p = indexed_len(j->t, j->sizes[i]);
        j->plens[i] = p;
        total += p;
        if (p > longest)
            longest = p;
        if (j->sizes[i] > largest)
            largest = j->sizes[i];
    }
    entries = big_malloc(sizeof(Entry) * (total + 1));
    spare = big_malloc(sizeof(Entry) * (total + 1));
    count = malloc(sizeof(int64_t) * ((size_t)(vocab > largest ? vocab : largest) + 2));
    j->entries = big_malloc(sizeof(uint32_t) * (total + 1));
    if (entries == NULL || spare == NULL || count == NULL || j->entries == NULL)
        goto fail;
    int64_t at = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        for (int k = 0; k < j->plens[i]; k++) {
            spare[at].set = (int32_t)i;
            spare[at].pos = k;
            at++;
        }
    /* by position, then (stably) by set size, then by token */
    COUNTING_SORT(spare, entries, total, longest, entry_.pos, count);
    COUNTING_SORT(entries, spare, total, largest + 1, j->sizes[entry_.set], count);
    COUNTING_SORT(spare, entries, total, vocab, j->toks[j->offsets[entry_.set] + entry_.pos],
                  count);
    memcpy(token_at, count, sizeof(int64_t) * ((size_t)vocab + 1)); /* each token's end */
    free(spare);
    spare = NULL;
    int64_t blocks = 0;
    for (int64_t e = 0; e < total; e++) {
        int32_t set = entries[e].set;
        int32_t w = j->toks[j->offsets[set] + entries[e].pos];
        if (e == 0 || w != j->toks[j->offsets[entries[e - 1].set] + entries[e - 1].pos] ||
            j->sizes[set] != j->sizes[entries[e - 1].set])
            blocks++;
    }
    j->block_size = malloc(sizeof(int32_t) * (blocks + 1));
    j->block_start = malloc(sizeof(int64_t) * (blocks + 1));
    j->block_len = malloc(sizeof(int64_t) * (blocks + 1));
    if (j->block_size == NULL || j->block_start == NULL || j->block_len == NULL)
        goto fail;
    int64_t b = 0, begin = 0;
    for (int64_t w = 0; w < vocab; w++) {
        int64_t end = token_at[w];
        j->token_blocks[w] = b;
        for (int64_t e = begin; e < end; e++) {
            int32_t size = j->sizes[entries[e].set];
            if (e == begin || size != j->block_size[b - 1]) {
                j->block_size[b] = size;
                j->block_start[b] = e;
                j->block_len[b] = 0;
                b++;
            }
            j->block_len[b - 1]++;
            j->entries[e] = (uint32_t)entries[e].set << 8 |
                            (uint32_t)(entries[e].pos < 255 ? entries[e].pos : 255);
        }
        begin = end;
    }
    j->token_blocks[vocab] = b;
    free(token_at);
    free(count);
    free(entries);
    return 0;
fail:
    free(token_at);
    free(count);
    free(entries);
    free(spare);
    return -1;
}

/* How many tokens two ascending sets share, or fewer once ``need`` is out of reach. */
static inline int
overlap(const int32_t *a, int sa, const int32_t *b, int sb, int need)
{
    int p = 0, q = 0, o = 0;
    while (p < sa && q < sb) {
        int left_a = sa - p, left_b = sb - q;
        if (o + (left_a < left_b ? left_a : left_b) < need)
            return o;
        if (a[p] == b[q]) {
            o++;
            p++;
            q++;
        }
        else if (a[p] < b[q])
            p++;
        else
            q++;
    }
    return o;
}

/* The anchor's partners into j->found, ascending; returns how many. */
static Py_ssize_t
join_partners(Join *j, Py_ssize_t i)
{
    int sa = j->sizes[i];
    const int32_t *a = j->toks + j->offsets[i];
    uint16_t *state = j->state;
    /* A set met once can pair with the anchor only where one shared token may do. */
    int once_may_do = 1.0 / (double)sa >= j->t;
    if (++j->epoch == EPOCHS) { /* stamps from long ago could pass for this anchor's */
        for (Py_ssize_t k = 0; k < j->n; k++)
            if (state[k] != GONE)
                state[k] = 0;
        j->epoch = 1;
    }
    uint16_t met_once = (uint16_t)(j->epoch << 2 | 1), met_twice = met_once + 1;
    int32_t *twice = j->twice;
    Py_ssize_t candidates = 0;
    int32_t *once = j->found; /* only where one shared token may do */
    Py_ssize_t singles = 0;
    for (int pa = 0; pa < j->plens[i]; pa++) {
        int32_t w = a[pa];
        for (int64_t b = j->token_blocks[w]; b < j->token_blocks[w + 1]; b++) {
            int sb = j->block_size[b];
            int need = need_of(j, sa, sb);
            if (need > (sa < sb ? sa : sb))
                continue; /* sizes too far apart */
            if (pa > sa - need + 1)
                continue; /* neither the first nor the second shared token of a */
            int cut = sb - need + 1; /* b's positions beyond it cannot take part */
            int64_t start = j->block_start[b], len = j->block_len[b];
            uint32_t *list = j->entries + start;
            int64_t keep = 0, r = 0;
            for (; r < len; r++) {
                uint32_t entry = list[r];
                if ((int)(entry & 0xff) > cut)
                    break;
                if (r + PREFETCH < len)
                    PREFETCH_FOR(&state[list[r + PREFETCH] >> 8], 1);
                int32_t other = (int32_t)(entry >> 8);
                uint16_t s = state[other];
                if (s == GONE)
                    continue; /* taken or an earlier anchor: out of the list */
                list[keep++] = entry;
                if (s == met_once) {
                    state[other] = met_twice;
                    twice[candidates++] = other;
                }
                else if (s != met_twice) {
                    state[other] = met_once;
                    if (once_may_do)
                        once[singles++] = other;
                }
            }
            if (keep < r) { /* close the gap the dead left */
                memmove(list + keep, list + r, sizeof(uint32_t) * (len - r));
                j->block_len[b] = len - (r - keep);
            }
        }
    }
    if (once_may_do) { /* those met once that one shared token may pair, with the twice met */
        for (Py_ssize_t k = 0; k < singles; k++) {
            int32_t other = once[k];
            if (state[other] == met_once && need_of(j, sa, j->sizes[other]) == 1)
                twice[candidates++] = other;
        }
    }
    Py_ssize_t found = 0;
    const Signature *signatures = j->signatures;
    const Signature *mine = &signatures[i];
    for (Py_ssize_t k = 0; k < candidates; k++) {
        if (k + PREFETCH < candidates)
            PREFETCH_FOR(&signatures[twice[k + PREFETCH]], 0);
        int32_t other = twice[k];
        const Signature *theirs = &signatures[other];
        int sb = theirs->size;
        int need = need_of(j, sa, sb);
        /* at most the anchor's tokens whose bits the other holds */
        int most = POPCOUNT64(mine->bits[0] & theirs->bits[0]) +
                   POPCOUNT64(mine->bits[1] & theirs->bits[1]) +
                   POPCOUNT64(mine->bits[2] & theirs->bits[2]) + mine->spare;
        if (most < need)
            continue;
        int o = overlap(a, sa, j->toks + j->offsets[other], sb, need);
        if (o > 0 && (double)o / (double)(sa + sb - o) >= j->t)
            j->found[found++] = other;
    }
    if (found > 1)
        qsort(j->found, (size_t)found, sizeof(int32_t), compare_int32);
    return found;
}

/* Groups [from, to) as a list of lists of ints (the GIL held). */
static PyObject *
groups_list(Join *j, Py_ssize_t from, Py_ssize_t to)
{
    j->group_at[j->groups] = (int32_t)j->members; /* where the last group ends */
    PyObject *out = PyList_New(to - from);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t g = from; g < to; g++) {
        int32_t start = j->group_at[g], end = j->group_at[g + 1];
        PyObject *group = PyList_New(end - start);
        if (group == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        if (PyList_SetItem(out, g - from, group) < 0) { /* it takes the reference */
            Py_DECREF(out);
            return NULL;
        }
        for (int32_t k = start; k < end; k++) {
            PyObject *member = PyLong_FromLong(j->group_members[k]);
            if (member == NULL || PyList_SetItem(group, k - start, member) < 0) {
                Py_DECREF(out);
                return NULL;
            }
        }
    }
    return out;
}

/* Hand the groups found since the last time to ``sink``; -1 with an exception set. */
static int
emit(Join *j, PyObject *sink, Py_ssize_t *emitted)
{
    if (j->groups == *emitted)
        return 0;
    PyObject *batch = groups_list(j, *emitted, j->groups);
    if (batch == NULL)
        return -1;
    PyObject *res = PyObject_CallFunctionObjArgs(sink, batch, NULL);
    Py_DECREF(batch);
    if (res == NULL)
        return -1;
    Py_DECREF(res);
    *emitted = j->groups;
    return 0;
}

static PyObject *
greedy_groups(PyObject *Py_UNUSED(module), PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"tokens", "threshold", "sink", NULL};
    PyObject *tokens;
    PyObject *sink = Py_None;
    double t;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Od|O:greedy_groups", keywords, &tokens, &t,
                                     &sink))
        return NULL;
    if (!(t > 0.0)) { /* NaN too */
        PyErr_SetString(PyExc_ValueError, "threshold must be above 0");
        return NULL;
    }
    if (sink != Py_None && !PyCallable_Check(sink)) {
        PyErr_SetString(PyExc_TypeError, "sink must be callable");
        return NULL;
    }
    Join j;
    memset(&j, 0, sizeof(j));
    j.t = t;
    PyObject *result = NULL;
    if (join_read(&j, tokens) < 0)
        goto done;
    Py_ssize_t n = j.n;
    Py_ssize_t emitted = 0;
    int stopped = 0, failed = 0;
    Py_BEGIN_ALLOW_THREADS
    failed = (j.texts_owner != NULL && join_split_texts(&j) < 0) || join_rank(&j) < 0 ||
             join_index(&j) < 0;
    if (!failed) {
        j.needs = calloc((size_t)CACHED_SIZES * CACHED_SIZES, sizeof(int16_t));
        j.state = big_calloc((size_t)n + 1, sizeof(uint16_t));
        j.twice = malloc(sizeof(int32_t) * (n + 1));
        j.found = malloc(sizeof(int32_t) * (n + 1));
        j.group_at = malloc(sizeof(int32_t) * (n + 2));
        j.group_members = malloc(sizeof(int32_t) * (n + 1));
        failed = j.needs == NULL || j.state == NULL || j.twice == NULL ||
                 j.found == NULL || j.group_at == NULL || j.group_members == NULL;
    }
    if (!failed) {
        for (Py_ssize_t i = 0; i < n; i++) {
            if ((i & (EMIT_EVERY - 1)) == EMIT_EVERY - 1) {
                Py_BLOCK_THREADS
                stopped = PyErr_CheckSignals() < 0 ||
                          (sink != Py_None && emit(&j, sink, &emitted) < 0);
                Py_UNBLOCK_THREADS
                if (stopped)
                    break;
            }
            if (j.state[i] == GONE)
                continue; /* taken by an earlier anchor */
            j.state[i] = GONE; /* and no later anchor may take this one */
            if (j.sizes[i] == 0)
                continue;
            Py_ssize_t found = join_partners(&j, i);
            if (found == 0)
                continue;
            j.group_at[j.groups++] = (int32_t)j.members;
            j.group_members[j.members++] = (int32_t)i;
            for (Py_ssize_t k = 0; k < found; k++) {
                j.state[j.found[k]] = GONE;
                j.group_members[j.members++] = j.found[k];
            }
        }
    }
    Py_END_ALLOW_THREADS
    if (failed) {
        PyErr_NoMemory();
        goto done;
    }
    if (stopped)
        goto done;
    if (sink == Py_None) {
        result = groups_list(&j, 0, j.groups);
    }
    else if (emit(&j, sink, &emitted) == 0) {
        result = Py_None;
        Py_INCREF(result);
    }
done:
    join_free(&j);
    return result;
}

static PyMethodDef methods[] = {
    {"greedy_groups", (PyCFunction)(void (*)(void))greedy_groups, METH_VARARGS | METH_KEYWORDS,
     "greedy_groups(tokens, threshold, sink=None) -> list[list[int]] | None\n\n"
     "The published merge rule's greedy groups: candidates in the greedy order, each\n"
     "a set of distinct tokens; each group is its anchor followed by its partners,\n"
     "ascending. With ``sink``, the groups go to ``sink(list_of_groups)`` in order, a\n"
     "batch now and then while the join runs (the GIL is released in between), and\n"
     "None is returned; an exception from ``sink`` stops the join and propagates."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_cjoin",
    .m_doc = "The published merge rule's greedy pass, compiled (see darwin_memo.consolidate).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__cjoin(void)
{
    return PyModule_Create(&module);
}
