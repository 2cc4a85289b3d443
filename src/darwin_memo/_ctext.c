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

static PyObject *
ascii_tokens(PyObject *self, PyObject *args)
{
    PyObject *text, *stopwords;
    if (!PyArg_ParseTuple(args, "UO:ascii_tokens", &text, &stopwords))
        return NULL;
    if (!PyAnySet_Check(stopwords)) {
        PyErr_SetString(PyExc_TypeError, "ascii_tokens takes the stopwords as a set");
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(text)) {
        PyErr_SetString(PyExc_ValueError, "ascii_tokens takes an ASCII text");
        return NULL;
    }
    const char *buf = (const char *)PyUnicode_DATA(text);
    Py_ssize_t len = PyUnicode_GET_LENGTH(text);
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    Py_ssize_t i = 0;
    while (i < len) {
        while (i < len && !in_token[(unsigned char)buf[i]])
            i++;
        Py_ssize_t start = i;
        while (i < len && in_token[(unsigned char)buf[i]])
            i++;
        Py_ssize_t n = i - start;
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
        if (n > 3 && buf[start + n - 1] == 's' && buf[start + n - 2] != 's') {
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

static PyMethodDef methods[] = {
    {"ascii_tokens", ascii_tokens, METH_VARARGS,
     "ascii_tokens(lowered, stopwords) -> list[str]\n\n"
     "The tokens of a lowercased ASCII text: its runs of [a-z0-9.*] not in stopwords,\n"
     "a final 's' dropped from those longer than 3 that do not end in 'ss'."},
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
