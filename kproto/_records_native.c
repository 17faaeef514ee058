/* samsa.kproto._records_native: the native twin of samsa.kproto.records.scan_records.
 *
 * Same arguments, same answers, same error messages as the Python function (tests/kproto compare them on
 * fuzzed input): it walks `count` v2 records in data[pos:end] without building anything and returns
 * (min timestamp delta, max timestamp delta, index of the first max, offset deltas are 0..count-1,
 * some key is null), or raises CorruptBatchError.  The walk runs without the GIL, so a large batch
 * validated on a worker thread does not hold up the event loop.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdio.h>

static PyObject *corrupt_batch_error = NULL;

enum {
    OK = 0,
    ERR_EOF,            /* Incorrect declared batch size, premature EOF reached */
    ERR_VARINT_END,     /* record ends inside a varint */
    ERR_VARINT_LONG,    /* varint longer than N bytes */
    ERR_RECORD_SIZE,    /* Invalid record size: expected L bytes ..., only R remaining */
    ERR_HEADERS_NEG,    /* Found invalid number of record headers H */
    ERR_HEADERS_BIG,    /* Found invalid number of record headers. H is larger ... */
    ERR_HEADER_KEY,     /* Invalid negative header key size K */
    ERR_READ_SIZE,      /* Invalid record size: expected to read L ..., but instead read R */
    ERR_TRAILING,       /* Incorrect declared batch size, records still remaining in file */
};

typedef struct {
    int code;
    int64_t a, b;
} walk_error;

/* A zigzag varint of at most max_bytes (5 or 10) at *pos, bounded by end; bits past 32/64 dropped. */
static inline int read_varint(const unsigned char *data, int64_t *pos, int64_t end, int max_bytes, int64_t *out,
                              walk_error *err) {
    uint64_t raw = 0;
    int shift = 0;
    int64_t p = *pos;
    int64_t limit = p + max_bytes;
    for (;;) {
        if (p >= end) {
            err->code = ERR_VARINT_END;
            return -1;
        }
        if (p >= limit) {
            err->code = ERR_VARINT_LONG;
            err->a = max_bytes;
            return -1;
        }
        unsigned char byte = data[p++];
        raw |= (uint64_t)(byte & 0x7F) << shift;
        if (byte < 0x80)
            break;
        shift += 7;
    }
    *pos = p;
    if (max_bytes == 5) {
        uint32_t r = (uint32_t)raw;
        *out = (int32_t)((r >> 1) ^ (0u - (r & 1u)));
    } else {
        *out = (int64_t)((raw >> 1) ^ (0ull - (raw & 1ull)));
    }
    return 0;
}

#define ZZ(b) ((int64_t)(((b) >> 1) ^ -((int)(b) & 1)))

/* Field reads inside a record: inline for one byte (bounded by the buffer, like Python's IndexError),
 * else read_varint bounded by `bound`. */
#define FIELD(var, bound, maxb)                                                                  \
    do {                                                                                         \
        if (pos >= n) { err->code = ERR_EOF; return -1; }                                        \
        unsigned char b_ = data[pos];                                                            \
        if (b_ < 0x80) { var = ZZ(b_); pos += 1; }                                               \
        else if (read_varint(data, &pos, (bound), (maxb), &var, err) < 0) return -1;             \
    } while (0)

static int walk(const unsigned char *data, int64_t n, int64_t pos, int64_t end, int64_t count,
                int64_t *min_delta, int64_t *max_delta, int64_t *max_index, int *contiguous, int *null_key,
                walk_error *err) {
    for (int64_t index = 0; index < count; index++) {
        int64_t length, delta, offset_delta, key_length, value_length, header_count;
        FIELD(length, end, 5);
        int64_t record_end = pos + length;
        if (length <= 0 || record_end > end) {
            err->code = ERR_RECORD_SIZE;
            err->a = length;
            err->b = end - pos;
            return -1;
        }
        if (pos + 1 >= n) { err->code = ERR_EOF; return -1; }
        {
            unsigned char b = data[pos + 1];
            if (b < 0x80) { delta = ZZ(b); pos += 2; }
            else {
                pos += 1;
                if (read_varint(data, &pos, record_end, 10, &delta, err) < 0) return -1;
            }
        }
        FIELD(offset_delta, record_end, 5);
        if (offset_delta != index)
            *contiguous = 0;
        FIELD(key_length, record_end, 5);
        if (key_length >= 0)
            pos += key_length;
        else
            *null_key = 1;
        FIELD(value_length, record_end, 5);
        if (value_length > 0)
            pos += value_length;
        if (pos >= n) { err->code = ERR_EOF; return -1; }
        if (data[pos] == 0) {
            pos += 1;
        } else {
            FIELD(header_count, record_end, 5);
            if (header_count < 0) { err->code = ERR_HEADERS_NEG; err->a = header_count; return -1; }
            if (header_count > record_end - pos) { err->code = ERR_HEADERS_BIG; err->a = header_count; return -1; }
            for (int64_t h = 0; h < header_count; h++) {
                int64_t key_size, value_size;
                if (read_varint(data, &pos, record_end, 5, &key_size, err) < 0) return -1;
                if (key_size < 0) { err->code = ERR_HEADER_KEY; err->a = key_size; return -1; }
                pos += key_size;
                if (read_varint(data, &pos, record_end, 5, &value_size, err) < 0) return -1;
                if (value_size > 0)
                    pos += value_size;
            }
        }
        if (pos != record_end) {
            err->code = ERR_READ_SIZE;
            err->a = length;
            err->b = length + pos - record_end;
            return -1;
        }
        if (delta < *min_delta)
            *min_delta = delta;
        if (delta > *max_delta) {
            *max_delta = delta;
            *max_index = index;
        }
    }
    if (pos != end) {
        err->code = ERR_TRAILING;
        return -1;
    }
    return 0;
}

static PyObject *raise_walk_error(const walk_error *err) {
    switch (err->code) {
    case ERR_EOF:
        PyErr_SetString(corrupt_batch_error, "Incorrect declared batch size, premature EOF reached");
        break;
    case ERR_VARINT_END:
        PyErr_SetString(corrupt_batch_error, "record ends inside a varint");
        break;
    case ERR_VARINT_LONG:
        PyErr_Format(corrupt_batch_error, "varint longer than %lld bytes", (long long)err->a);
        break;
    case ERR_RECORD_SIZE:
        PyErr_Format(corrupt_batch_error,
                     "Invalid record size: expected %lld bytes in record payload, but the buffer has only %lld "
                     "remaining bytes", (long long)err->a, (long long)err->b);
        break;
    case ERR_HEADERS_NEG:
        PyErr_Format(corrupt_batch_error, "Found invalid number of record headers %lld", (long long)err->a);
        break;
    case ERR_HEADERS_BIG:
        PyErr_Format(corrupt_batch_error,
                     "Found invalid number of record headers. %lld is larger than the remaining size of the record",
                     (long long)err->a);
        break;
    case ERR_HEADER_KEY:
        PyErr_Format(corrupt_batch_error, "Invalid negative header key size %lld", (long long)err->a);
        break;
    case ERR_READ_SIZE:
        PyErr_Format(corrupt_batch_error,
                     "Invalid record size: expected to read %lld bytes in record payload, but instead read %lld",
                     (long long)err->a, (long long)err->b);
        break;
    case ERR_TRAILING:
        PyErr_SetString(corrupt_batch_error, "Incorrect declared batch size, records still remaining in file");
        break;
    default:
        PyErr_SetString(PyExc_SystemError, "unknown walk error");
    }
    return NULL;
}

static PyObject *scan_records(PyObject *self, PyObject *args) {
    Py_buffer view;
    long long pos, end, count;
    if (!PyArg_ParseTuple(args, "y*LLL", &view, &pos, &end, &count))
        return NULL;
    if (pos < 0 || end < pos || end > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "scan_records: need 0 <= pos <= end <= len(data)");
        return NULL;
    }
    int64_t min_delta = INT64_MAX, max_delta = INT64_MIN, max_index = -1;
    int contiguous = 1, null_key = 0, rc;
    walk_error err = {OK, 0, 0};
    Py_BEGIN_ALLOW_THREADS
    rc = walk((const unsigned char *)view.buf, (int64_t)view.len, pos, end, count, &min_delta, &max_delta,
              &max_index, &contiguous, &null_key, &err);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (rc < 0)
        return raise_walk_error(&err);
    return Py_BuildValue("(LLLOO)", (long long)min_delta, (long long)max_delta, (long long)max_index,
                         contiguous ? Py_True : Py_False, null_key ? Py_True : Py_False);
}

static PyMethodDef methods[] = {
    {"scan_records", scan_records, METH_VARARGS,
     "scan_records(data, pos, end, count) -> (min_delta, max_delta, max_index, contiguous, null_key)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_records_native", NULL, -1, methods};

PyMODINIT_FUNC PyInit__records_native(void) {
    PyObject *batch = PyImport_ImportModule("samsa.kproto.batch");
    if (batch == NULL)
        return NULL;
    corrupt_batch_error = PyObject_GetAttrString(batch, "CorruptBatchError");
    Py_DECREF(batch);
    if (corrupt_batch_error == NULL)
        return NULL;
    return PyModule_Create(&module);
}
