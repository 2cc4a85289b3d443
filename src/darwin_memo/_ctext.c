/*
 * darwin_memo._ctext: the tokens of an ASCII text and HashingEmbedder's vectors,
 * compiled (optional; darwin_memo.retrieval computes the same in Python).
 *
 * ascii_tokens(lowered: str, stopwords: frozenset[str] | set[str]) -> list[str]
 *
 * ``lowered`` is lowercased ASCII. Its tokens are its maximal runs of [a-z0-9.*];
 * runs in ``stopwords`` are dropped, and a run longer than 3 that ends in "s" but
 * not in "ss" loses that "s": what tokenize()'s ASCII comprehension makes.
 *
 * row_tokens(data: str | bytes, stopwords: frozenset[str] | set[str]) -> str | None
 *
 * ``data`` is an entry's row as SQLite stores it (bytes: in the row code, schema 15,
 * read once set_text_code has loaded it); a lesson's list row
 * (``["question", "answer", ...]``, schema 11) that is ASCII and whose two texts hold
 * no JSON escape gives the set of ascii_tokens(lower(question + " " + answer)), sorted
 * and joined by single spaces: what the ``toks`` column held before schema 12. Any
 * other row gives None (the caller reads it in Python).
 *
 * post_entries(questions, answers, first, stopwords, tokenize, array, postings, df)
 *
 * An empty LexicalRetriever's lists in one pass (what _list_pending's Python loop
 * makes): entry i, ordinal first + i, goes under each distinct token of
 * questions[i] + " " + answers[i]. Where both are ASCII the tokens are found here
 * (tokenize's ASCII path, the stopwords cached); otherwise tokenize(text) makes them.
 * Each distinct token becomes one str and one array("l") of its ordinals in
 * ``postings``, its count in ``df``: not one str and one set per entry holding it.
 *
 * unit_vector(text: bytes, lo: int, hi: int, dims: int) -> list[float] | None
 *
 * ``text`` is UTF-8. Every run of n consecutive characters (lo <= n <= hi) is hashed
 * with CRC-32 (zlib's polynomial, as zlib.crc32 computes it) over its UTF-8 bytes; the
 * hash adds one to bucket ``h % dims`` when its top bit is clear and takes one away
 * when it is set: the sums HashingEmbedder's Python loop makes of +-1.0 (whole numbers,
 * so exactly). The vector is then divided by its norm, as Python divides it: the sum
 * of the squares is a whole number too, exact in a double up to 2**53 whatever order
 * Python's sum() adds in, and IEEE square root and division round as Python's do.
 * Past 2**53 (a text of some hundred million characters) it returns None and the
 * caller computes in Python.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

static uint32_t crc_table[256];

static void
crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (0xEDB88320u ^ (c >> 1)) : (c >> 1);
        crc_table[i] = c;
    }
}

static inline uint32_t
crc32_of(const unsigned char *p, Py_ssize_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (Py_ssize_t i = 0; i < n; i++)
        c = crc_table[(c ^ p[i]) & 0xFFu] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

static PyObject *
unit_vector(PyObject *self, PyObject *args)
{
    Py_buffer text;
    int lo, hi;
    Py_ssize_t dims;
    if (!PyArg_ParseTuple(args, "y*iin:unit_vector", &text, &lo, &hi, &dims))
        return NULL;
    PyObject *out = NULL;
    Py_ssize_t *starts = NULL;
    long long *counts = NULL;
    if (lo < 1 || hi < lo) {
        PyErr_Format(PyExc_ValueError, "need 1 <= lo <= hi, got lo=%d hi=%d", lo, hi);
        goto done;
    }
    if (dims < 1) {
        PyErr_Format(PyExc_ValueError, "dims must be positive, got %zd", dims);
        goto done;
    }
    const unsigned char *buf = (const unsigned char *)text.buf;
    Py_ssize_t len = text.len;
    /* Where each character starts (a UTF-8 continuation byte starts none), and the end. */
    starts = PyMem_Malloc((size_t)(len + 1) * sizeof(Py_ssize_t));
    counts = PyMem_Calloc((size_t)dims, sizeof(long long));
    if (starts == NULL || counts == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t chars = 0;
    for (Py_ssize_t i = 0; i < len; i++)
        if ((buf[i] & 0xC0) != 0x80)
            starts[chars++] = i;
    starts[chars] = len;
    for (Py_ssize_t n = lo; n <= hi; n++) {
        for (Py_ssize_t i = 0; i + n <= chars; i++) {
            Py_ssize_t from = starts[i];
            uint32_t h = crc32_of(buf + from, starts[i + n] - from);
            counts[(Py_ssize_t)(h % (uint64_t)dims)] += (h & 0x80000000u) ? -1 : 1;
        }
    }
    unsigned long long squares = 0;
    for (Py_ssize_t d = 0; d < dims; d++) {
        unsigned long long c = (unsigned long long)(counts[d] < 0 ? -counts[d] : counts[d]);
        if (c > 94906265ull || squares > (1ull << 53) - c * c) { /* over 2**53 */
            out = Py_NewRef(Py_None);
            goto done;
        }
        squares += c * c;
    }
    double norm = sqrt((double)squares);
    out = PyList_New(dims);
    if (out == NULL)
        goto done;
    for (Py_ssize_t d = 0; d < dims; d++) {
        double v = (double)counts[d];
        PyObject *item = PyFloat_FromDouble(norm > 0 ? v / norm : v);
        if (item == NULL) {
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, d, item);
    }
done:
    PyMem_Free(starts);
    PyMem_Free(counts);
    PyBuffer_Release(&text);
    return out;
}

static const unsigned char *token_chars =
    (const unsigned char *)"abcdefghijklmnopqrstuvwxyz0123456789.*";
static unsigned char in_token[256];

/* The next run of token characters at or after *i (which moves past it): where it
 * starts, and in *n its length (0: none is left). */
static inline Py_ssize_t
next_run(const char *buf, Py_ssize_t len, Py_ssize_t *i, Py_ssize_t *n)
{
    Py_ssize_t k = *i;
    while (k < len && !in_token[(unsigned char)buf[k]])
        k++;
    Py_ssize_t start = k;
    while (k < len && in_token[(unsigned char)buf[k]])
        k++;
    *i = k;
    *n = k - start;
    return start;
}

/* A token's length once stemmed: a final 's' dropped from a run longer than 3 that does
 * not end in "ss". */
static inline Py_ssize_t
stemmed(const char *p, Py_ssize_t n)
{
    return (n > 3 && p[n - 1] == 's' && p[n - 2] != 's') ? n - 1 : n;
}

/* The tokens of the lowercased ASCII ``buf`` (see ascii_tokens), as a new list. */
static PyObject *
tokens_of(const char *buf, Py_ssize_t len, PyObject *stopwords)
{
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    Py_ssize_t i = 0;
    while (i < len) {
        Py_ssize_t n, start = next_run(buf, len, &i, &n);
        if (n == 0)
            break;
        PyObject *token = PyUnicode_FromStringAndSize(buf + start, n);
        if (token == NULL)
            goto fail;
        int stop = PySet_Contains(stopwords, token);
        if (stop < 0) {
            Py_DECREF(token);
            goto fail;
        }
        if (stop) {
            Py_DECREF(token);
            continue;
        }
        if (stemmed(buf + start, n) < n) {
            Py_DECREF(token);
            token = PyUnicode_FromStringAndSize(buf + start, n - 1);
            if (token == NULL)
                goto fail;
        }
        int failed = PyList_Append(out, token);
        Py_DECREF(token);
        if (failed)
            goto fail;
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

/* The (str, set) arguments of ascii_tokens and row_tokens; 0 on success. */
static int
text_and_stopwords(PyObject *args, const char *format, PyObject **text, PyObject **stopwords)
{
    if (!PyArg_ParseTuple(args, format, text, stopwords))
        return -1;
    if (!PyAnySet_Check(*stopwords)) {
        PyErr_Format(PyExc_TypeError, "%s takes the stopwords as a set", format + 3);
        return -1;
    }
    return 0;
}

static PyObject *
ascii_tokens(PyObject *self, PyObject *args)
{
    PyObject *text, *stopwords;
    if (text_and_stopwords(args, "UO:ascii_tokens", &text, &stopwords) < 0)
        return NULL;
    if (!PyUnicode_IS_ASCII(text)) {
        PyErr_SetString(PyExc_ValueError, "ascii_tokens takes an ASCII text");
        return NULL;
    }
    return tokens_of((const char *)PyUnicode_DATA(text), PyUnicode_GET_LENGTH(text), stopwords);
}

static Py_ssize_t
skip_space(const char *buf, Py_ssize_t len, Py_ssize_t i)
{
    while (i < len && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\n' || buf[i] == '\r'))
        i++;
    return i;
}

/* The JSON string whose opening quote is at buf[i], when it holds no escape and no
 * control character: its characters are buf[*start : *start + *n]. Returns where the
 * string ends (after its closing quote), or -1. */
static Py_ssize_t
plain_string(const char *buf, Py_ssize_t len, Py_ssize_t i, Py_ssize_t *start, Py_ssize_t *n)
{
    if (i >= len || buf[i] != '"')
        return -1;
    Py_ssize_t s = ++i;
    while (i < len && buf[i] != '"') {
        if (buf[i] == '\\' || (unsigned char)buf[i] < 0x20)
            return -1;
        i++;
    }
    if (i >= len)
        return -1;
    *start = s;
    *n = i - s;
    return i + 1;
}

/* -- row_tokens' set of tokens, sorted and joined ------------------------------- */

/* A frozenset of stopwords as C strings (open addressing on FNV-1a), held with a
 * strong reference to the set while it is the one passed, so its address is not
 * reused; a mutable set is never cached (row_tokens then asks it token by token). */
static PyObject *stop_owner = NULL;
static const char **stop_words = NULL;
static Py_ssize_t *stop_lens = NULL;
static size_t stop_mask = 0;

static uint32_t
span_hash(const char *p, Py_ssize_t n)
{
    uint32_t h = 2166136261u;
    for (Py_ssize_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 16777619u;
    return h;
}

static int
is_stopword(const char *p, Py_ssize_t n)
{
    for (size_t slot = span_hash(p, n) & stop_mask;; slot = (slot + 1) & stop_mask) {
        if (stop_words[slot] == NULL)
            return 0;
        if (stop_lens[slot] == n && memcmp(stop_words[slot], p, (size_t)n) == 0)
            return 1;
    }
}

/* 0: ``set`` is the cached one now; 1: not cacheable (ask it); -1: an error. */
static int
load_stopwords(PyObject *set)
{
    if (set == stop_owner)
        return 0;
    if (!PyFrozenSet_CheckExact(set))
        return 1;
    size_t cap = 16;
    while (cap < (size_t)PySet_GET_SIZE(set) * 2 + 2)
        cap <<= 1;
    const char **words = PyMem_Calloc(cap, sizeof(char *));
    Py_ssize_t *lens = PyMem_Calloc(cap, sizeof(Py_ssize_t));
    PyObject *it = PyObject_GetIter(set);
    if (words == NULL || lens == NULL || it == NULL) {
        PyMem_Free(words);
        PyMem_Free(lens);
        Py_XDECREF(it);
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        return -1;
    }
    PyObject *item;
    while ((item = PyIter_Next(it)) != NULL) {
        /* only an ASCII str can equal a token (the frozenset keeps the item alive) */
        if (PyUnicode_Check(item) && PyUnicode_IS_ASCII(item)) {
            const char *w = (const char *)PyUnicode_DATA(item);
            Py_ssize_t n = PyUnicode_GET_LENGTH(item);
            size_t slot = span_hash(w, n) & (cap - 1);
            while (words[slot] != NULL)
                slot = (slot + 1) & (cap - 1);
            words[slot] = w;
            lens[slot] = n;
        }
        Py_DECREF(item);
    }
    Py_DECREF(it);
    if (PyErr_Occurred()) {
        PyMem_Free(words);
        PyMem_Free(lens);
        return -1;
    }
    PyMem_Free(stop_words);
    PyMem_Free(stop_lens);
    Py_XDECREF(stop_owner);
    stop_owner = Py_NewRef(set);
    stop_words = words;
    stop_lens = lens;
    stop_mask = cap - 1;
    return 0;
}

typedef struct {
    uint64_t key; /* the first 8 bytes, big-endian, zero-padded: compares as they do */
    const char *p;
    Py_ssize_t n;
} span;

static inline int
span_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    if (x->n <= 8 || y->n <= 8) /* a token holds no NUL: the shorter is the prefix */
        return (x->n > y->n) - (x->n < y->n);
    Py_ssize_t m = (x->n < y->n ? x->n : y->n) - 8;
    int c = memcmp(x->p + 8, y->p + 8, (size_t)m);
    if (c != 0)
        return c;
    return (x->n > y->n) - (x->n < y->n);
}

/* The tokens of the lowercased ASCII ``buf`` (as tokens_of, stopwords cached), as a
 * set sorted by code point and joined by single spaces. */
static PyObject *
joined_set(const char *buf, Py_ssize_t len)
{
    span *spans = PyMem_Malloc(sizeof(span) * (size_t)(len / 2 + 1));
    if (spans == NULL)
        return PyErr_NoMemory();
    Py_ssize_t count = 0, i = 0;
    while (i < len) {
        Py_ssize_t n, start = next_run(buf, len, &i, &n);
        if (n == 0)
            break;
        if (is_stopword(buf + start, n))
            continue;
        n = stemmed(buf + start, n);
        uint64_t key = 0;
        for (Py_ssize_t b = 0; b < 8; b++)
            key = (key << 8) | (b < n ? (unsigned char)buf[start + b] : 0u);
        spans[count].key = key;
        spans[count].p = buf + start;
        spans[count].n = n;
        count++;
    }
    if (count > 48) {
        qsort(spans, (size_t)count, sizeof(span), span_cmp);
    } else { /* a lesson's few tokens: insertion sort, without a call per comparison */
        for (Py_ssize_t k = 1; k < count; k++) {
            span key = spans[k];
            Py_ssize_t j = k;
            while (j > 0 && span_cmp(&spans[j - 1], &key) > 0) {
                spans[j] = spans[j - 1];
                j--;
            }
            spans[j] = key;
        }
    }
    Py_ssize_t kept = 0, total = 0;
    for (Py_ssize_t k = 0; k < count; k++) {
        if (kept > 0 && span_cmp(&spans[kept - 1], &spans[k]) == 0)
            continue;
        spans[kept++] = spans[k];
        total += spans[k].n + (kept > 1);
    }
    PyObject *out = PyUnicode_New(total, 127);
    if (out != NULL) {
        char *to = (char *)PyUnicode_DATA(out);
        for (Py_ssize_t k = 0; k < kept; k++) {
            if (k > 0)
                *to++ = ' ';
            memcpy(to, spans[k].p, (size_t)spans[k].n);
            to += spans[k].n;
        }
    }
    PyMem_Free(spans);
    return out;
}

/* joined_set for stopwords that are not cached: through Python objects. */
static PyObject *
joined_set_slow(const char *buf, Py_ssize_t len, PyObject *stopwords)
{
    PyObject *tokens = tokens_of(buf, len, stopwords);
    if (tokens == NULL)
        return NULL;
    PyObject *out = NULL, *unique = NULL, *sep = NULL;
    PyObject *set = PySet_New(tokens);
    Py_DECREF(tokens);
    if (set == NULL)
        return NULL;
    unique = PySequence_List(set);
    Py_DECREF(set);
    if (unique == NULL || PyList_Sort(unique) < 0)
        goto done;
    sep = PyUnicode_FromStringAndSize(" ", 1);
    if (sep != NULL)
        out = PyUnicode_Join(sep, unique);
done:
    Py_XDECREF(unique);
    Py_XDECREF(sep);
    return out;
}

/* After ``sep`` (spaces around it allowed) at or after buf[i], a plain JSON string
 * (plain_string): where it ends, or -1. */
static Py_ssize_t
list_item(const char *buf, Py_ssize_t len, Py_ssize_t i, char sep, Py_ssize_t *start,
          Py_ssize_t *n)
{
    i = skip_space(buf, len, i);
    if (i >= len || buf[i] != sep)
        return -1;
    return plain_string(buf, len, skip_space(buf, len, i + 1), start, n);
}

/* -- the code of lesson rows (textcode.py) -------------------------------------
 *
 * set_text_code(lengths: bytes) loads the canonical Huffman code (256 codeword
 * lengths, 1..12, Kraft sum exactly 1) that code_text(raw: bytes) -> bytes and
 * decode_text(blob: bytes) -> str use; row_tokens reads a coded row once it is set. */
#define TC_MAX 12
static uint16_t tc_code[256];
static uint8_t tc_len[256];
static uint16_t tc_table[1 << TC_MAX];
static int tc_ready = 0;

static PyObject *
set_text_code(PyObject *self, PyObject *arg)
{
    Py_buffer b;
    if (!PyArg_Parse(arg, "y*:set_text_code", &b))
        return NULL;
    const unsigned char *len = (const unsigned char *)b.buf;
    long kraft = 0;
    int ok = b.len == 256, lo = TC_MAX;
    for (Py_ssize_t i = 0; ok && i < 256; i++) {
        ok = len[i] >= 1 && len[i] <= TC_MAX;
        kraft += 1L << (TC_MAX - (ok ? len[i] : 0));
        if (ok && len[i] < lo)
            lo = len[i];
    }
    if (!ok || kraft != (1L << TC_MAX)) {
        PyBuffer_Release(&b);
        PyErr_SetString(PyExc_ValueError, "set_text_code takes 256 lengths of a complete code");
        return NULL;
    }
    uint32_t code = 0;
    int prev = lo;
    for (int n = lo; n <= TC_MAX; n++)
        for (int s = 0; s < 256; s++) {
            if (len[s] != n)
                continue;
            code <<= n - prev;
            prev = n;
            tc_code[s] = (uint16_t)code;
            tc_len[s] = (uint8_t)n;
            uint32_t first = code << (TC_MAX - n);
            for (uint32_t w = first; w < first + (1u << (TC_MAX - n)); w++)
                tc_table[w] = (uint16_t)(s | (n << 8));
            code++;
        }
    PyBuffer_Release(&b);
    tc_ready = 1;
    Py_RETURN_NONE;
}

static int
tc_check(void)
{
    if (!tc_ready)
        PyErr_SetString(PyExc_RuntimeError, "set_text_code has not been called");
    return tc_ready;
}

static PyObject *
code_text(PyObject *self, PyObject *arg)
{
    Py_buffer b;
    if (!tc_check() || !PyArg_Parse(arg, "y*:code_text", &b))
        return NULL;
    const unsigned char *p = (const unsigned char *)b.buf;
    PyObject *out = PyBytes_FromStringAndSize(NULL, 2 + (b.len * TC_MAX) / 8);
    if (out == NULL) {
        PyBuffer_Release(&b);
        return NULL;
    }
    unsigned char *to = (unsigned char *)PyBytes_AS_STRING(out);
    Py_ssize_t k = 0;
    to[k++] = 1;
    uint64_t acc = 0;
    int have = 0;
    for (Py_ssize_t i = 0; i < b.len; i++) {
        acc = (acc << tc_len[p[i]]) | tc_code[p[i]];
        have += tc_len[p[i]];
        while (have >= 8) {
            have -= 8;
            to[k++] = (unsigned char)(acc >> have);
        }
        acc &= (1u << have) - 1;
    }
    if (have > 0)
        to[k++] = (unsigned char)((acc << (8 - have)) | ((1u << (8 - have)) - 1));
    PyBuffer_Release(&b);
    if (_PyBytes_Resize(&out, k) < 0)
        return NULL;
    return out;
}

/* The bytes a coded row holds, in a buffer the caller frees (*n of them); NULL with
 * an exception set where the blob is not one. */
static unsigned char *
tc_decode(const unsigned char *blob, Py_ssize_t size, Py_ssize_t *n)
{
    if (size < 1 || blob[0] != 1) {
        PyErr_SetString(PyExc_ValueError, "not a coded row");
        return NULL;
    }
    const unsigned char *p = blob + 1;
    Py_ssize_t nbytes = size - 1, pos = 0, k = 0;
    unsigned char *out = PyMem_Malloc((size_t)(nbytes * 8 / 3 + 1));
    if (out == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    /* While 64 bits or more are left: read them at once (most significant first) and
     * take four codewords (48 bits at most) from them. */
    uint64_t bit = 0, total = (uint64_t)nbytes * 8;
    while (bit + 64 <= total) {
        const unsigned char *q = p + (bit >> 3);
        uint64_t w = ((uint64_t)q[0] << 56) | ((uint64_t)q[1] << 48) | ((uint64_t)q[2] << 40) |
                     ((uint64_t)q[3] << 32) | ((uint64_t)q[4] << 24) | ((uint64_t)q[5] << 16) |
                     ((uint64_t)q[6] << 8) | (uint64_t)q[7];
        w <<= bit & 7;
        for (int j = 0; j < 4; j++) {
            uint16_t e = tc_table[w >> (64 - TC_MAX)];
            out[k++] = (unsigned char)(e & 0xFF);
            w <<= e >> 8;
            bit += e >> 8;
        }
    }
    /* The rest, a byte at a time. */
    pos = (Py_ssize_t)(bit >> 3);
    uint64_t acc = 0; /* the bits not yet decoded are its low ``have`` bits */
    int have = 0;
    if (bit & 7) {
        acc = p[pos++] & ((1u << (8 - (bit & 7))) - 1);
        have = 8 - (int)(bit & 7);
    }
    for (;;) {
        if (have < TC_MAX) {
            while (have <= 56 && pos < nbytes) {
                acc = (acc << 8) | p[pos++];
                have += 8;
            }
            if (have < TC_MAX)
                break; /* the last few bits: below */
        }
        uint16_t e = tc_table[(acc >> (have - TC_MAX)) & ((1u << TC_MAX) - 1)];
        out[k++] = (unsigned char)(e & 0xFF);
        have -= e >> 8;
    }
    while (have > 0) {
        uint32_t low = (uint32_t)acc & ((1u << have) - 1);
        uint16_t e = tc_table[(low << (TC_MAX - have)) | ((1u << (TC_MAX - have)) - 1)];
        if ((e >> 8) > have) {
            if (have < 8 && low == (1u << have) - 1)
                break; /* the one bits that fill the last byte */
            PyMem_Free(out);
            PyErr_SetString(PyExc_ValueError, "a codeword runs past the end");
            return NULL;
        }
        out[k++] = (unsigned char)(e & 0xFF);
        have -= e >> 8;
    }
    *n = k;
    return out;
}

static PyObject *
decode_text(PyObject *self, PyObject *arg)
{
    Py_buffer b;
    if (!tc_check() || !PyArg_Parse(arg, "y*:decode_text", &b))
        return NULL;
    Py_ssize_t n;
    unsigned char *raw = tc_decode((const unsigned char *)b.buf, b.len, &n);
    PyBuffer_Release(&b);
    if (raw == NULL)
        return NULL;
    PyObject *out = PyUnicode_DecodeUTF8((const char *)raw, n, "strict");
    PyMem_Free(raw);
    return out;
}

/* row_tokens of an ASCII row's JSON text. */
static PyObject *
row_tokens_of(const char *buf, Py_ssize_t len, PyObject *stopwords)
{
    Py_ssize_t qs, qn, as, an;
    Py_ssize_t i = list_item(buf, len, 0, '[', &qs, &qn);
    if (i < 0 || (i = list_item(buf, len, i, ',', &as, &an)) < 0)
        Py_RETURN_NONE;
    i = skip_space(buf, len, i);
    if (i >= len || (buf[i] != ',' && buf[i] != ']'))
        Py_RETURN_NONE;
    /* question + " " + answer, lowercased (ASCII: what str.lower() makes of it) */
    char *text = PyMem_Malloc((size_t)(qn + an + 1));
    if (text == NULL)
        return PyErr_NoMemory();
    memcpy(text, buf + qs, (size_t)qn);
    text[qn] = ' ';
    memcpy(text + qn + 1, buf + as, (size_t)an);
    for (Py_ssize_t k = 0; k < qn + an + 1; k++)
        if (text[k] >= 'A' && text[k] <= 'Z')
            text[k] = (char)(text[k] - 'A' + 'a');
    PyObject *out;
    int cached = load_stopwords(stopwords);
    if (cached < 0)
        out = NULL;
    else if (cached == 0)
        out = joined_set(text, qn + an + 1);
    else
        out = joined_set_slow(text, qn + an + 1, stopwords);
    PyMem_Free(text);
    return out;
}

static PyObject *
row_tokens(PyObject *self, PyObject *args)
{
    PyObject *data, *stopwords;
    if (text_and_stopwords(args, "OO:row_tokens", &data, &stopwords) < 0)
        return NULL;
    if (PyUnicode_Check(data)) {
        if (!PyUnicode_IS_ASCII(data))
            Py_RETURN_NONE;
        return row_tokens_of((const char *)PyUnicode_DATA(data), PyUnicode_GET_LENGTH(data),
                             stopwords);
    }
    if (!PyBytes_Check(data)) {
        PyErr_SetString(PyExc_TypeError, "row_tokens takes a row's str or bytes");
        return NULL;
    }
    Py_ssize_t n;
    if (!tc_ready)
        Py_RETURN_NONE;
    unsigned char *raw =
        tc_decode((const unsigned char *)PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data), &n);
    if (raw == NULL) { /* the caller's Python path names the damage */
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    PyObject *out = NULL;
    Py_ssize_t i = 0;
    while (i < n && raw[i] < 0x80)
        i++;
    if (i < n) {
        Py_INCREF(Py_None);
        out = Py_None;
    } else {
        out = row_tokens_of((const char *)raw, n, stopwords);
    }
    PyMem_Free(raw);
    return out;
}

/* -- post_entries: an empty index's lists, in one pass -------------------------- */

/* A distinct token: its text (kept alive by ``token``), and the ordinals of the
 * entries that hold it, in order. */
typedef struct {
    const char *p; /* the str's characters as stored (PEP 393), ``kind`` bytes each */
    Py_ssize_t n;  /* in bytes */
    int kind;
    uint32_t h;
    PyObject *token;
    long *ords;
    Py_ssize_t len, cap;
} vocab_word;

typedef struct {
    vocab_word *words;
    Py_ssize_t count, room;
    Py_ssize_t *table; /* open addressing: index + 1 into words, 0 = empty */
    size_t mask;
} vocab;

static void
vocab_free(vocab *v)
{
    for (Py_ssize_t i = 0; i < v->count; i++) {
        Py_XDECREF(v->words[i].token);
        PyMem_Free(v->words[i].ords);
    }
    PyMem_Free(v->words);
    PyMem_Free(v->table);
}

static int
vocab_grow_table(vocab *v)
{
    size_t cap = (v->mask + 1) * 2;
    Py_ssize_t *table = PyMem_Calloc(cap, sizeof(Py_ssize_t));
    if (table == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < v->count; i++) {
        size_t slot = v->words[i].h & (cap - 1);
        while (table[slot])
            slot = (slot + 1) & (cap - 1);
        table[slot] = i + 1;
    }
    PyMem_Free(v->table);
    v->table = table;
    v->mask = cap - 1;
    return 0;
}

/* Add ``ordinal`` to the list of the token whose characters are p[:n] (``n`` bytes of
 * PEP 393 ``kind``: a str has one representation, so equal strs have equal bytes),
 * once per entry. ``token`` is its str if the caller has one (borrowed), else NULL
 * (made here from the ASCII bytes). */
static int
vocab_post(vocab *v, const char *p, Py_ssize_t n, int kind, PyObject *token, long ordinal)
{
    uint32_t h = span_hash(p, n) ^ (uint32_t)kind;
    size_t slot = h & v->mask;
    vocab_word *w = NULL;
    for (; v->table[slot]; slot = (slot + 1) & v->mask) {
        vocab_word *c = &v->words[v->table[slot] - 1];
        if (c->h == h && c->n == n && c->kind == kind && memcmp(c->p, p, (size_t)n) == 0) {
            w = c;
            break;
        }
    }
    if (w == NULL) {
        if (v->count == v->room) {
            Py_ssize_t room = v->room ? v->room * 2 : 1024;
            vocab_word *words = PyMem_Realloc(v->words, (size_t)room * sizeof(vocab_word));
            if (words == NULL) {
                PyErr_NoMemory();
                return -1;
            }
            v->words = words;
            v->room = room;
        }
        PyObject *made = token ? Py_NewRef(token) : PyUnicode_FromStringAndSize(p, n);
        if (made == NULL)
            return -1;
        w = &v->words[v->count];
        /* the characters of ``made``, which lives as long as the word */
        *w = (vocab_word){PyUnicode_DATA(made), n, kind, h, made, NULL, 0, 0};
        v->table[slot] = ++v->count;
        if ((size_t)v->count * 2 > v->mask && vocab_grow_table(v) < 0)
            return -1;
        w = &v->words[v->count - 1];
    }
    if (w->len && w->ords[w->len - 1] == ordinal)
        return 0; /* twice in one entry: a set holds it once */
    if (w->len == w->cap) {
        Py_ssize_t cap = w->cap ? w->cap * 2 : 2;
        long *ords = PyMem_Realloc(w->ords, (size_t)cap * sizeof(long));
        if (ords == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        w->ords = ords;
        w->cap = cap;
    }
    w->ords[w->len++] = ordinal;
    return 0;
}

/* The tokens of one entry: question + " " + answer, lowercased, through the cached
 * stopwords in C where both are ASCII, else through ``tokenize`` (Python's). */
static int
post_entry(vocab *v, PyObject *q, PyObject *a, long ordinal, PyObject *tokenize)
{
    if (PyUnicode_IS_ASCII(q) && PyUnicode_IS_ASCII(a)) {
        Py_ssize_t qn = PyUnicode_GET_LENGTH(q), an = PyUnicode_GET_LENGTH(a);
        Py_ssize_t len = qn + an + 1;
        char *buf = PyMem_Malloc((size_t)len);
        if (buf == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        memcpy(buf, PyUnicode_DATA(q), (size_t)qn);
        buf[qn] = ' ';
        memcpy(buf + qn + 1, PyUnicode_DATA(a), (size_t)an);
        for (Py_ssize_t k = 0; k < len; k++)
            if (buf[k] >= 'A' && buf[k] <= 'Z')
                buf[k] = (char)(buf[k] - 'A' + 'a');
        Py_ssize_t i = 0;
        int failed = 0;
        while (!failed && i < len) {
            Py_ssize_t n, start = next_run(buf, len, &i, &n);
            if (n == 0)
                break;
            if (!is_stopword(buf + start, n))
                failed = vocab_post(v, buf + start, stemmed(buf + start, n),
                                    PyUnicode_1BYTE_KIND, NULL, ordinal) < 0;
        }
        PyMem_Free(buf);
        return failed ? -1 : 0;
    }
    PyObject *text = PyUnicode_FromFormat("%U %U", q, a);
    if (text == NULL)
        return -1;
    PyObject *tokens = PyObject_CallOneArg(tokenize, text);
    Py_DECREF(text);
    if (tokens == NULL)
        return -1;
    if (!PyList_Check(tokens)) {
        Py_DECREF(tokens);
        PyErr_SetString(PyExc_TypeError, "tokenize must return a list of str");
        return -1;
    }
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(tokens); k++) {
        PyObject *t = PyList_GET_ITEM(tokens, k);
        if (!PyUnicode_Check(t)) {
            PyErr_SetString(PyExc_TypeError, "tokenize must return a list of str");
            Py_DECREF(tokens);
            return -1;
        }
        int kind = PyUnicode_KIND(t);
        if (vocab_post(v, PyUnicode_DATA(t), PyUnicode_GET_LENGTH(t) * kind, kind, t, ordinal) <
            0) {
            Py_DECREF(tokens);
            return -1;
        }
    }
    Py_DECREF(tokens);
    return 0;
}

static PyObject *
post_entries(PyObject *self, PyObject *args)
{
    PyObject *questions, *answers, *stopwords, *tokenize, *array_type, *postings, *df;
    PyObject *typecode = NULL;
    long first;
    if (!PyArg_ParseTuple(args, "O!O!lO!OOO!O!:post_entries", &PyList_Type, &questions,
                          &PyList_Type, &answers, &first, &PyFrozenSet_Type, &stopwords,
                          &tokenize, &array_type, &PyDict_Type, &postings, &PyDict_Type, &df))
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(questions);
    if (PyList_GET_SIZE(answers) != count) {
        PyErr_SetString(PyExc_ValueError, "post_entries takes as many answers as questions");
        return NULL;
    }
    int cached = load_stopwords(stopwords);
    if (cached != 0) {
        if (cached > 0)
            PyErr_SetString(PyExc_TypeError, "post_entries takes the stopwords as a frozenset");
        return NULL;
    }
    vocab v = {NULL, 0, 0, PyMem_Calloc(1024, sizeof(Py_ssize_t)), 1023};
    if (v.table == NULL)
        return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *q = PyList_GET_ITEM(questions, i), *a = PyList_GET_ITEM(answers, i);
        if (!PyUnicode_Check(q) || !PyUnicode_Check(a)) {
            PyErr_SetString(PyExc_TypeError, "an entry's question and answer must be str");
            goto fail;
        }
        if (post_entry(&v, q, a, first + (long)i, tokenize) < 0)
            goto fail;
    }
    typecode = PyUnicode_FromString("l");
    if (typecode == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < v.count; i++) {
        vocab_word *w = &v.words[i];
        PyObject *call[2] = {typecode, PyBytes_FromStringAndSize(
                                           (const char *)w->ords, w->len * (Py_ssize_t)sizeof(long))};
        if (call[1] == NULL)
            goto fail;
        PyObject *list = PyObject_Vectorcall(array_type, call, 2, NULL); /* array("l", raw) */
        Py_DECREF(call[1]);
        if (list == NULL)
            goto fail;
        PyObject *n = PyLong_FromSsize_t(w->len);
        int failed = n == NULL || PyDict_SetItem(postings, w->token, list) < 0 ||
                     PyDict_SetItem(df, w->token, n) < 0;
        Py_DECREF(list);
        Py_XDECREF(n);
        if (failed)
            goto fail;
    }
    Py_DECREF(typecode);
    vocab_free(&v);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(typecode);
    vocab_free(&v);
    return NULL;
}

static PyMethodDef methods[] = {
    {"ascii_tokens", ascii_tokens, METH_VARARGS,
     "ascii_tokens(lowered, stopwords) -> list[str]\n\n"
     "The tokens of a lowercased ASCII text: its runs of [a-z0-9.*] not in stopwords,\n"
     "a final 's' dropped from those longer than 3 that do not end in 'ss'."},
    {"row_tokens", row_tokens, METH_VARARGS,
     "row_tokens(data, stopwords) -> str | None\n\n"
     "The token set of a lesson's list row (its JSON: question, answer, ...) sorted and\n"
     "joined by spaces; None unless the row is ASCII and both texts hold no escape."},
    {"set_text_code", set_text_code, METH_O,
     "set_text_code(lengths) -> None\n\n"
     "Load the row code (textcode.LENGTHS: 256 codeword lengths of a complete code)."},
    {"code_text", code_text, METH_O,
     "code_text(raw) -> bytes\n\nUTF-8 bytes in the row code, first byte 1 (textcode.encode)."},
    {"decode_text", decode_text, METH_O,
     "decode_text(blob) -> str\n\nThe text a coded row holds (ValueError: not one)."},
    {"post_entries", post_entries, METH_VARARGS,
     "post_entries(questions, answers, first, stopwords, tokenize, array, postings, df)\n\n"
     "An empty index's lists in one pass: entry i (ordinal first + i) is listed under\n"
     "each distinct token of questions[i] + ' ' + answers[i] (tokenize's, computed in C\n"
     "where both are ASCII, else by calling tokenize); postings gets array('l') of\n"
     "ordinals by token, df their lengths."},
    {"unit_vector", unit_vector, METH_VARARGS,
     "unit_vector(text, lo, hi, dims) -> list[float] | None\n\n"
     "HashingEmbedder's vector of a UTF-8 text (its tokens joined by spaces): signed\n"
     "counts of the CRC-32 hashes of every run of lo..hi characters by bucket\n"
     "(hash % dims), divided by their norm; None where that norm is not exact."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_ctext",
    .m_doc = "Tokens and HashingEmbedder's vectors, compiled (see darwin_memo.retrieval).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__ctext(void)
{
    crc_init();
    for (const unsigned char *c = token_chars; *c; c++)
        in_token[*c] = 1;
    return PyModule_Create(&module);
}
