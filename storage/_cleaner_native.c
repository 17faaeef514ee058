/* samsa.storage._cleaner_native: the log cleaner's per-record loops over whole segment buffers, without the GIL.
 *
 * The native twin of the per-record parts of samsa.storage.cleaner (the Python code stays the reference and the
 * fallback; tests/storage/test_cleaner_native.py compares both on random logs):
 *
 *   OffsetTable        Kafka's SkimpyOffsetMap: MD5(key) -> latest offset, 24 bytes a slot, at most `slots`
 *                      slots (log.cleaner.dedupe.buffer.size / threads / 24) of which at most `capacity` are
 *                      filled.  The table starts small and doubles up to `slots`, so its memory follows the
 *                      keys mapped, never past the configured budget.
 *   scan_txn_batches   the transaction scan's walk: skips every batch that is not transactional.
 *   map_batches        the offset-map build over the plain batches of a buffer.
 *   filter_batches     the recopy filter over the plain batches of a buffer: which records survive, each
 *                      rebuilt batch (header, records count, CRC32C) appended to one output buffer.
 *   map_section,       the same two over one batch's records section that the Python walk decompressed (a
 *   filter_section     compressed batch) or vetted (a committed transactional one); Python compresses.
 *
 * Each walk takes a buffer of whole or partial batches (a chunk of a segment) and a position, handles batch after
 * batch, and stops at the first one it leaves to the Python code: a batch not complete in the buffer
 * (NEED_MORE: the caller reads more), or a batch the Python code must decide (SPECIAL): control, transactional
 * or compressed batches, the last batch of a producer, anything malformed (bad magic, size, CRC or record
 * framing: the Python code raises the error).  So every error message and every rare rule stays in one place,
 * and the native walk only ever does what the Python code would do for the common batch.
 *
 * The transaction scan reads batch headers only (one small read per batch when batches are large); the map and
 * recopy walks check the CRC of each batch they read, so a corrupt batch still stops a pass before its map
 * is used (verify_crc: for tests and callers that checked already).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define HEADER_BYTES 61
#define LOG_OVERHEAD 12
#define COMPRESSION_MASK 0x07
#define TIMESTAMP_TYPE_BIT 0x08
#define TRANSACTIONAL_BIT 0x10
#define CONTROL_BIT 0x20
#define DELETE_HORIZON_BIT 0x40

enum { NEED_MORE = 0, SPECIAL = 1, FULL = 2, WHOLE = 3 };

/* ------------------------------------------------------------------------------------------------------------
 * CRC32C (Castagnoli): SSE4.2 where the CPU has it, else slicing-by-8
 * ---------------------------------------------------------------------------------------------------------- */

static uint32_t crc_table[8][256];
static int crc_hw = 0;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    crc_hw = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t crc_sw(uint32_t c, const unsigned char *p, size_t n) {
    while (n >= 8) {
        uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        c = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^ crc_table[5][(lo >> 16) & 0xFF] ^
            crc_table[4][lo >> 24] ^ crc_table[3][p[4]] ^ crc_table[2][p[5]] ^ crc_table[1][p[6]] ^
            crc_table[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c;
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("sse4.2"))) static uint32_t crc_sse42(uint32_t c, const unsigned char *p, size_t n) {
    uint64_t c64 = c;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c64 = __builtin_ia32_crc32di(c64, v);
        p += 8;
        n -= 8;
    }
    c = (uint32_t)c64;
    while (n--)
        c = __builtin_ia32_crc32qi(c, *p++);
    return c;
}
#endif

static uint32_t crc32c(const unsigned char *p, size_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (crc_hw)
        return crc_sse42(0xFFFFFFFFu, p, n) ^ 0xFFFFFFFFu;
#endif
    return crc_sw(0xFFFFFFFFu, p, n) ^ 0xFFFFFFFFu;
}

/* ------------------------------------------------------------------------------------------------------------
 * MD5 (RFC 1321), the key digest of Kafka's SkimpyOffsetMap
 * ---------------------------------------------------------------------------------------------------------- */

static const uint32_t md5_k[64] = {
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391};
static const unsigned char md5_r[64] = {7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
                                        5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20,
                                        4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
                                        6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21};

static void md5_block(uint32_t h[4], const unsigned char *blk) {
    uint32_t w[16];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)blk[4 * i] | (uint32_t)blk[4 * i + 1] << 8 | (uint32_t)blk[4 * i + 2] << 16 |
               (uint32_t)blk[4 * i + 3] << 24;
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3];
    for (int i = 0; i < 64; i++) {
        uint32_t f;
        int g;
        if (i < 16) {
            f = (b & c) | (~b & d);
            g = i;
        } else if (i < 32) {
            f = (d & b) | (~d & c);
            g = (5 * i + 1) & 15;
        } else if (i < 48) {
            f = b ^ c ^ d;
            g = (3 * i + 5) & 15;
        } else {
            f = c ^ (b | ~d);
            g = (7 * i) & 15;
        }
        uint32_t t = d;
        d = c;
        c = b;
        uint32_t x = a + f + md5_k[i] + w[g];
        b = b + ((x << md5_r[i]) | (x >> (32 - md5_r[i])));
        a = t;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
}

static void md5(const unsigned char *p, size_t n, unsigned char out[16]) {
    uint32_t h[4] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476};
    size_t full = n & ~(size_t)63;
    for (size_t i = 0; i < full; i += 64)
        md5_block(h, p + i);
    unsigned char tail[128];
    size_t rest = n - full;
    memcpy(tail, p + full, rest);
    tail[rest] = 0x80;
    size_t tail_len = rest + 1 + 8 <= 64 ? 64 : 128;
    memset(tail + rest + 1, 0, tail_len - rest - 1);
    uint64_t bits = (uint64_t)n * 8;
    for (int i = 0; i < 8; i++)
        tail[tail_len - 8 + i] = (unsigned char)(bits >> (8 * i));
    md5_block(h, tail);
    if (tail_len == 128)
        md5_block(h, tail + 64);
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < 4; k++)
            out[4 * i + k] = (unsigned char)(h[i] >> (8 * k));
}

/* ------------------------------------------------------------------------------------------------------------
 * OffsetTable: open addressing, linear probing; a slot is 16 digest bytes + 8 bytes holding offset ^ INT64_MIN,
 * so a zeroed slot is empty and a fresh table needs no initialisation (calloc's pages stay untouched).
 * Not thread-safe: one cleaning uses its table from one thread at a time.
 * ---------------------------------------------------------------------------------------------------------- */

#define SLOT_BYTES 24
#define INITIAL_SLOTS 4096
#define EMPTY_MARK ((uint64_t)1 << 63)

typedef struct {
    PyObject_HEAD unsigned char *mem;
    int64_t size;     /* slots allocated now */
    int64_t max_size; /* slots allowed: the memory budget */
    int64_t capacity; /* entries allowed (load factor) */
    int64_t count;
} OffsetTable;

static inline uint64_t slot_word(const unsigned char *slot) {
    uint64_t v;
    memcpy(&v, slot + 16, 8);
    return v;
}

/* The slot holding `digest`, or the empty slot where it would go; NULL if the table is full without it. */
static unsigned char *table_find(unsigned char *mem, int64_t size, const unsigned char digest[16]) {
    uint64_t h;
    memcpy(&h, digest, 8);
    int64_t i = (int64_t)(h % (uint64_t)size);
    for (int64_t probes = 0; probes < size; probes++) {
        unsigned char *slot = mem + i * SLOT_BYTES;
        if (slot_word(slot) == 0 || memcmp(slot, digest, 16) == 0)
            return slot;
        if (++i == size)
            i = 0;
    }
    return NULL;
}

static int table_grow(OffsetTable *t) {
    int64_t new_size = t->size * 2 > t->max_size ? t->max_size : t->size * 2;
    unsigned char *mem = calloc((size_t)new_size, SLOT_BYTES);
    if (mem == NULL)
        return -1;
    for (int64_t i = 0; i < t->size; i++) {
        unsigned char *old = t->mem + i * SLOT_BYTES;
        if (slot_word(old) != 0)
            memcpy(table_find(mem, new_size, old), old, SLOT_BYTES);
    }
    free(t->mem);
    t->mem = mem;
    t->size = new_size;
    return 0;
}

/* 1: mapped, 0: a new key and the table is full (nothing changed), -1: out of memory. */
static int table_put(OffsetTable *t, const unsigned char digest[16], int64_t offset) {
    unsigned char *slot = table_find(t->mem, t->size, digest);
    if (slot == NULL || slot_word(slot) == 0) {
        if (t->count >= t->capacity)
            return 0;
        if (slot == NULL || (t->size < t->max_size && (t->count + 1) * 4 > t->size * 3)) {
            if (table_grow(t) < 0)
                return -1;
            slot = table_find(t->mem, t->size, digest);
            if (slot == NULL)
                return 0;
        }
        memcpy(slot, digest, 16);
        t->count++;
    }
    uint64_t word = (uint64_t)offset ^ EMPTY_MARK;
    memcpy(slot + 16, &word, 8);
    return 1;
}

static int64_t table_get(const OffsetTable *t, const unsigned char digest[16]) {
    unsigned char *slot = table_find(t->mem, t->size, digest);
    if (slot == NULL || slot_word(slot) == 0)
        return -1;
    return (int64_t)(slot_word(slot) ^ EMPTY_MARK);
}

static int table_reset(OffsetTable *t) {
    free(t->mem);
    t->size = t->max_size < INITIAL_SLOTS ? t->max_size : INITIAL_SLOTS;
    t->count = 0;
    t->mem = calloc((size_t)t->size, SLOT_BYTES);
    return t->mem == NULL ? -1 : 0;
}

static int OffsetTable_init(OffsetTable *self, PyObject *args, PyObject *kwds) {
    long long slots, capacity;
    static char *kwlist[] = {"slots", "capacity", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "LL", kwlist, &slots, &capacity))
        return -1;
    if (slots < 1 || capacity < 1 || capacity > slots) {
        PyErr_SetString(PyExc_ValueError, "OffsetTable: need 1 <= capacity <= slots");
        return -1;
    }
    self->max_size = slots;
    self->capacity = capacity;
    if (table_reset(self) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void OffsetTable_dealloc(OffsetTable *self) {
    free(self->mem);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *OffsetTable_put(OffsetTable *self, PyObject *args) {
    Py_buffer key;
    long long offset;
    if (!PyArg_ParseTuple(args, "y*L", &key, &offset))
        return NULL;
    unsigned char digest[16];
    md5(key.buf, (size_t)key.len, digest);
    PyBuffer_Release(&key);
    if (offset == INT64_MIN) {
        PyErr_SetString(PyExc_ValueError, "OffsetTable: offset out of range");
        return NULL;
    }
    int rc = table_put(self, digest, offset);
    if (rc < 0)
        return PyErr_NoMemory();
    return PyBool_FromLong(rc);
}

static PyObject *OffsetTable_get(OffsetTable *self, PyObject *args) {
    Py_buffer key;
    if (!PyArg_ParseTuple(args, "y*", &key))
        return NULL;
    unsigned char digest[16];
    md5(key.buf, (size_t)key.len, digest);
    PyBuffer_Release(&key);
    return PyLong_FromLongLong(table_get(self, digest));
}

static PyObject *OffsetTable_clear(OffsetTable *self, PyObject *Py_UNUSED(ignored)) {
    if (table_reset(self) < 0)
        return PyErr_NoMemory();
    Py_RETURN_NONE;
}

static Py_ssize_t OffsetTable_len(OffsetTable *self) { return (Py_ssize_t)self->count; }

static PyObject *OffsetTable_allocated(OffsetTable *self, void *Py_UNUSED(closure)) {
    return PyLong_FromLongLong(self->size * SLOT_BYTES);
}

static PyMethodDef OffsetTable_methods[] = {
    {"put", (PyCFunction)OffsetTable_put, METH_VARARGS, "put(key, offset) -> False if key is new and the table full"},
    {"get", (PyCFunction)OffsetTable_get, METH_VARARGS, "get(key) -> latest offset mapped, -1 if none"},
    {"clear", (PyCFunction)OffsetTable_clear, METH_NOARGS, "forget every key and give the memory back"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef OffsetTable_getset[] = {
    {"allocated_bytes", (getter)OffsetTable_allocated, NULL, "bytes of slots allocated now", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods OffsetTable_as_sequence = {.sq_length = (lenfunc)OffsetTable_len};

static PyTypeObject OffsetTableType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "samsa.storage._cleaner_native.OffsetTable",
    .tp_basicsize = sizeof(OffsetTable),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "MD5(key) -> latest offset, bounded (Kafka's SkimpyOffsetMap)",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)OffsetTable_init,
    .tp_dealloc = (destructor)OffsetTable_dealloc,
    .tp_methods = OffsetTable_methods,
    .tp_getset = OffsetTable_getset,
    .tp_as_sequence = &OffsetTable_as_sequence,
};

/* ------------------------------------------------------------------------------------------------------------
 * batches and records
 * ---------------------------------------------------------------------------------------------------------- */

static inline int64_t be64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return (int64_t)v;
}
static inline int32_t be32(const unsigned char *p) {
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3]);
}
static inline int16_t be16(const unsigned char *p) { return (int16_t)((uint16_t)p[0] << 8 | (uint16_t)p[1]); }
static inline void put64(unsigned char *p, int64_t v) {
    for (int i = 7; i >= 0; i--, v = (int64_t)((uint64_t)v >> 8))
        p[i] = (unsigned char)(v & 0xFF);
}
static inline void put32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

typedef struct {
    int64_t base_offset, size, last_offset, base_ts, max_ts, producer_id;
    int32_t last_offset_delta, records_count;
    int16_t attributes;
} batch_t;

/* WHOLE: a valid batch at data[pos] (kproto.batch.parse_header's checks and the CRC), NEED_MORE if not whole
 * in the buffer, SPECIAL if invalid (the Python walk raises the error). */
static int read_batch(const unsigned char *data, int64_t len, int64_t pos, batch_t *b, int verify_crc) {
    if (len - pos < HEADER_BYTES)
        return NEED_MORE;
    const unsigned char *p = data + pos;
    int32_t batch_length = be32(p + 8);
    if (p[16] != 2 || batch_length < HEADER_BYTES - LOG_OVERHEAD)
        return SPECIAL;
    b->size = (int64_t)batch_length + LOG_OVERHEAD;
    b->base_offset = be64(p);
    b->attributes = be16(p + 21);
    b->last_offset_delta = be32(p + 23);
    b->base_ts = be64(p + 27);
    b->max_ts = be64(p + 35);
    b->producer_id = be64(p + 43);
    b->records_count = be32(p + 57);
    if (b->last_offset_delta < 0 || b->records_count < 0)
        return SPECIAL;
    if (__builtin_add_overflow(b->base_offset, (int64_t)b->last_offset_delta, &b->last_offset) ||
        b->last_offset == INT64_MAX)
        return SPECIAL;
    if (len - pos < b->size)
        return NEED_MORE;
    if (verify_crc && crc32c(p + 21, (size_t)(b->size - 21)) != (uint32_t)be32(p + 17))
        return SPECIAL;
    return WHOLE;
}

typedef struct {
    int64_t offset, ts, tail_start, end, key_len; /* key_len < 0: no key */
    const unsigned char *key;
    int has_value;
} rec_t;

/* kproto.record_scan.read_varint: at most max_bytes bytes, bits past 32/64 dropped. */
static inline int varint(const unsigned char *s, int64_t *pos, int64_t end, int max_bytes, int64_t *out) {
    uint64_t raw = 0;
    int shift = 0;
    int64_t p = *pos, limit = p + max_bytes;
    for (;;) {
        if (p >= end || p >= limit)
            return -1;
        unsigned char byte = s[p++];
        if (shift < 64)
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

/* cleaner_records.iter_raw_records over one uncompressed records section; -1 where it would raise (or where an
 * offset or timestamp leaves int64, which the Python code would carry on with: the batch goes to it). */
static int walk_records(const unsigned char *s, int64_t end, const batch_t *b, rec_t *out) {
    int64_t pos = 0;
    for (int32_t i = 0; i < b->records_count; i++) {
        int64_t length, f[3], value_length;
        if (varint(s, &pos, end, 5, &length) < 0)
            return -1;
        int64_t record_end = pos + length;
        if (length < 1 || record_end > end)
            return -1;
        pos += 1; /* attributes */
        int64_t tail_start = pos;
        for (int k = 0; k < 3; k++) {
            if (k == 1)
                tail_start = pos;
            if (varint(s, &pos, record_end, k == 0 ? 10 : 5, &f[k]) < 0)
                return -1;
        }
        rec_t *r = &out[i];
        r->key = NULL;
        r->key_len = -1;
        if (f[2] >= 0) {
            if (pos + f[2] > record_end)
                return -1;
            r->key = s + pos;
            r->key_len = f[2];
            pos += f[2];
        }
        if (varint(s, &pos, record_end, 5, &value_length) < 0)
            return -1;
        if (pos > record_end || pos + (value_length > 0 ? value_length : 0) > record_end)
            return -1;
        if (__builtin_add_overflow(b->base_offset, f[1], &r->offset) ||
            __builtin_add_overflow(b->base_ts, f[0], &r->ts))
            return -1;
        r->has_value = value_length >= 0;
        r->tail_start = tail_start;
        r->end = record_end;
        pos = record_end;
    }
    return pos == end ? 0 : -1;
}

/* A growable byte buffer (malloc'ed: filled without the GIL). */
typedef struct {
    unsigned char *p;
    size_t len, cap;
} buf_t;

static int buf_reserve(buf_t *b, size_t more) {
    if (b->len + more <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 1 << 16;
    while (cap < b->len + more)
        cap *= 2;
    unsigned char *p = realloc(b->p, cap);
    if (p == NULL)
        return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

static inline void buf_varint(buf_t *b, int64_t value) {
    uint64_t raw = ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
    while (raw >= 0x80) {
        b->p[b->len++] = (unsigned char)((raw & 0x7F) | 0x80);
        raw >>= 7;
    }
    b->p[b->len++] = (unsigned char)raw;
}

static inline int varint_size(int64_t value) {
    uint64_t raw = ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
    int n = 1;
    while (raw >= 0x80) {
        raw >>= 7;
        n++;
    }
    return n;
}

/* Scratch space for one batch's records, at most one per two bytes of the batch (a record takes two at least). */
typedef struct {
    rec_t *recs;
    size_t cap;
} scratch_t;

static rec_t *scratch_for(scratch_t *sc, const batch_t *b) {
    size_t want = (size_t)b->records_count;
    if (want > (size_t)(b->size - HEADER_BYTES) / 2)
        return NULL; /* cannot all fit: the Python walk raises */
    if (want == 0)
        want = 1;
    if (want > sc->cap) {
        rec_t *p = realloc(sc->recs, want * sizeof(rec_t));
        if (p == NULL)
            return NULL;
        sc->recs = p;
        sc->cap = want;
    }
    return sc->recs;
}

static int parse_args_buffer(Py_buffer *view, long long pos) {
    if (pos < 0 || pos > view->len) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "position outside the buffer");
        return -1;
    }
    return 0;
}

/* scan_txn_batches(data, pos, upto, end) -> (pos, status): skips the batches that are not transactional (or have
 * no producer id) and start below `upto`, reading headers only: a batch may run past the buffer (the position
 * returned may lie past it) as long as it ends by `end`, the segment's end relative to the buffer.  No CRC: the
 * map and recopy walks check the batches they read. */
static PyObject *scan_txn_batches(PyObject *self, PyObject *args) {
    Py_buffer view;
    long long pos, upto, end;
    if (!PyArg_ParseTuple(args, "y*LLL", &view, &pos, &upto, &end) || parse_args_buffer(&view, pos) < 0)
        return NULL;
    const unsigned char *data = view.buf;
    int64_t len = view.len, p = pos;
    int status = NEED_MORE;
    Py_BEGIN_ALLOW_THREADS
    while (len - p >= HEADER_BYTES) {
        const unsigned char *h = data + p;
        int32_t batch_length = be32(h + 8);
        int64_t base_offset = be64(h);
        if (h[16] != 2 || batch_length < HEADER_BYTES - LOG_OVERHEAD || be32(h + 23) < 0 || be32(h + 57) < 0 ||
            p + batch_length + LOG_OVERHEAD > end || base_offset >= upto ||
            (be64(h + 43) >= 0 && (be16(h + 21) & TRANSACTIONAL_BIT))) {
            status = SPECIAL;
            break;
        }
        p += (int64_t)batch_length + LOG_OVERHEAD;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return Py_BuildValue("(Li)", (long long)p, status);
}

/* map_batches(table, data, pos, start, latest_offset, verify_crc) -> (pos, status, latest_offset, bytes, messages):
 * Cleaner._build_offset_map over the plain batches (not control, transactional or compressed). FULL: the
 * table refused a key of the batch at `pos` (its bytes and messages up to that key are counted). */
static PyObject *map_batches(PyObject *self, PyObject *args) {
    OffsetTable *t;
    Py_buffer view;
    long long pos, start, latest;
    int verify_crc;
    if (!PyArg_ParseTuple(args, "O!y*LLLp", &OffsetTableType, &t, &view, &pos, &start, &latest, &verify_crc) ||
        parse_args_buffer(&view, pos) < 0)
        return NULL;
    const unsigned char *data = view.buf;
    int64_t len = view.len, p = pos, bytes = 0, messages = 0, lat = latest;
    int status, oom = 0;
    scratch_t sc = {NULL, 0};
    Py_BEGIN_ALLOW_THREADS
    for (;;) {
        batch_t b;
        status = read_batch(data, len, p, &b, verify_crc);
        if (status != WHOLE)
            break;
        status = SPECIAL;
        if (b.attributes & (CONTROL_BIT | TRANSACTIONAL_BIT | COMPRESSION_MASK))
            break;
        if (b.last_offset >= start) {
            rec_t *recs = scratch_for(&sc, &b);
            if (recs == NULL || walk_records(data + p + HEADER_BYTES, b.size - HEADER_BYTES, &b, recs) < 0)
                break;
            bytes += b.size;
            for (int32_t i = 0; i < b.records_count && status != FULL; i++) {
                rec_t *r = &recs[i];
                messages++;
                if (r->offset < start || r->key_len < 0)
                    continue;
                unsigned char digest[16];
                md5(r->key, (size_t)r->key_len, digest);
                int rc = r->offset == INT64_MIN ? 0 : table_put(t, digest, r->offset);
                if (rc < 0)
                    oom = 1;
                if (rc <= 0)
                    status = FULL;
                else if (r->offset > lat)
                    lat = r->offset;
            }
            if (status == FULL)
                break;
            if (b.last_offset > lat)
                lat = b.last_offset;
        } else {
            bytes += b.size;
        }
        p += b.size;
    }
    Py_END_ALLOW_THREADS
    free(sc.recs);
    PyBuffer_Release(&view);
    if (oom)
        return PyErr_NoMemory();
    return Py_BuildValue("(LiLLL)", (long long)p, status, (long long)lat, (long long)bytes, (long long)messages);
}

static int contains(const int64_t *sorted, Py_ssize_t n, int64_t v) {
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (sorted[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && sorted[lo] == v;
}

/* What the filter decides for one batch's records (Cleaner._filter_batch without its special cases). */
typedef struct {
    int64_t kept;    /* records kept, compacted to the front of recs */
    int unchanged;   /* every record kept and no delete horizon to stamp: the batch goes as it is */
    int64_t base_ts; /* the rebuilt batch's: the horizon, else the first kept record's timestamp */
    int64_t max_ts;
    int horizon_bit; /* the rebuilt batch carries a delete horizon */
    int64_t body;    /* the rebuilt records' bytes */
} decision_t;

/* -1: leave the batch to the Python code (malformed records, or figures past int64 where Python carries on). */
static int filter_decide(const OffsetTable *t, const unsigned char *section, int64_t section_len, const batch_t *b,
                         rec_t *recs, int64_t latest, int64_t now_ms, int64_t retention_ms, decision_t *d) {
    if (walk_records(section, section_len, b, recs) < 0)
        return -1;
    int has_horizon = (b->attributes & DELETE_HORIZON_BIT) != 0;
    int64_t horizon = b->base_ts;
    int64_t kept = 0;
    int tombstones = 0;
    for (int32_t i = 0; i < b->records_count; i++) {
        rec_t *r = &recs[i];
        int keep;
        if (r->offset > latest) {
            keep = 1;
        } else if (r->key_len < 0) {
            keep = 0; /* Kafka drops keyless records from a compacted log */
        } else {
            unsigned char digest[16];
            md5(r->key, (size_t)r->key_len, digest);
            keep = r->offset >= table_get(t, digest) && (r->has_value || !has_horizon || now_ms < horizon);
        }
        if (keep) {
            recs[kept++] = *r;
            tombstones |= !r->has_value;
        }
    }
    int needs_horizon = !has_horizon && tombstones;
    d->kept = kept;
    d->unchanged = kept == b->records_count && !needs_horizon;
    d->horizon_bit = needs_horizon || has_horizon;
    if (d->unchanged || kept == 0)
        return 0;
    if (needs_horizon) {
        if (__builtin_add_overflow(now_ms, retention_ms, &d->base_ts))
            return -1;
    } else {
        d->base_ts = has_horizon ? horizon : recs[0].ts;
    }
    /* the size first: every record's length can change with its timestamp delta */
    int64_t body = 0, max_ts = -1, delta;
    for (int64_t i = 0; i < kept; i++) {
        if (__builtin_sub_overflow(recs[i].ts, d->base_ts, &delta))
            return -1; /* Python's varint of a delta past int64 differs: its walk takes the batch */
        int64_t rec_len = 1 + varint_size(delta) + (recs[i].end - recs[i].tail_start);
        body += varint_size(rec_len) + rec_len;
        if (recs[i].ts > max_ts)
            max_ts = recs[i].ts;
    }
    d->max_ts = (b->attributes & TIMESTAMP_TYPE_BIT) ? b->max_ts : max_ts;
    d->body = body;
    return body > INT32_MAX - HEADER_BYTES ? -1 : 0;
}

/* The kept records (each with attributes 0 and its timestamp delta rebased on base_ts), d->body bytes. */
static void write_records(unsigned char *p, const unsigned char *section, const rec_t *recs, const decision_t *d) {
    buf_t out = {p, 0, (size_t)d->body};
    for (int64_t i = 0; i < d->kept; i++) {
        int64_t delta = (int64_t)((uint64_t)recs[i].ts - (uint64_t)d->base_ts);
        int64_t tail = recs[i].end - recs[i].tail_start;
        buf_varint(&out, 1 + varint_size(delta) + tail);
        out.p[out.len++] = 0; /* attributes */
        buf_varint(&out, delta);
        memcpy(out.p + out.len, section + recs[i].tail_start, (size_t)tail);
        out.len += (size_t)tail;
    }
}

/* Cleaner._filter_batch for one plain uncompressed batch: appends what is written (the batch as it is, rebuilt,
 * or nothing) to `out`.  Returns records kept, or -1 to leave the batch to the Python code. */
static int64_t filter_one(const OffsetTable *t, const unsigned char *batch, const batch_t *b, rec_t *recs,
                          int64_t latest, int64_t now_ms, int64_t retention_ms, buf_t *out, int *oom) {
    const unsigned char *section = batch + HEADER_BYTES;
    decision_t d;
    if (filter_decide(t, section, b->size - HEADER_BYTES, b, recs, latest, now_ms, retention_ms, &d) < 0)
        return -1;
    if (d.unchanged) {
        if (buf_reserve(out, (size_t)b->size) < 0) {
            *oom = 1;
            return -1;
        }
        memcpy(out->p + out->len, batch, (size_t)b->size);
        out->len += (size_t)b->size;
        return d.kept;
    }
    if (d.kept == 0)
        return 0;
    int64_t total = HEADER_BYTES + d.body;
    if (buf_reserve(out, (size_t)total) < 0) {
        *oom = 1;
        return -1;
    }
    unsigned char *h = out->p + out->len;
    memcpy(h, batch, HEADER_BYTES); /* base offset, leader epoch, last offset delta, producer, sequence */
    put32(h + 8, (uint32_t)(total - LOG_OVERHEAD));
    h[16] = 2;
    int attributes = b->attributes & (COMPRESSION_MASK | TIMESTAMP_TYPE_BIT | TRANSACTIONAL_BIT | CONTROL_BIT);
    if (d.horizon_bit)
        attributes |= DELETE_HORIZON_BIT;
    h[21] = (unsigned char)(attributes >> 8);
    h[22] = (unsigned char)attributes;
    put64(h + 27, d.base_ts);
    put64(h + 35, d.max_ts);
    put32(h + 57, (uint32_t)d.kept);
    write_records(h + HEADER_BYTES, section, recs, &d);
    put32(h + 17, crc32c(h + 21, (size_t)(total - 21)));
    out->len += (size_t)total;
    return d.kept;
}

/* The header fields a records section's walk needs, from a batch header given apart (a compressed batch's). */
static int header_fields(const Py_buffer *header, batch_t *b, int64_t section_len) {
    if (header->len < HEADER_BYTES)
        return -1;
    const unsigned char *p = header->buf;
    b->base_offset = be64(p);
    b->attributes = be16(p + 21);
    b->base_ts = be64(p + 27);
    b->max_ts = be64(p + 35);
    b->records_count = be32(p + 57);
    b->size = section_len + HEADER_BYTES; /* bounds the scratch space by the section's bytes */
    return b->records_count < 0 ? -1 : 0;
}

/* map_section(table, header, section, start, latest_offset) -> (status, latest_offset, messages): the map walk
 * over one compressed batch's decompressed records (the caller decompressed it and checked the batch is
 * neither control nor transactional, and ends at or past `start`).  SPECIAL: leave it to the Python walk. */
static PyObject *map_section(PyObject *self, PyObject *args) {
    OffsetTable *t;
    Py_buffer header, view;
    long long start, latest;
    if (!PyArg_ParseTuple(args, "O!y*y*LL", &OffsetTableType, &t, &header, &view, &start, &latest))
        return NULL;
    batch_t b;
    int status = SPECIAL, oom = 0;
    int64_t lat = latest, messages = 0;
    scratch_t sc = {NULL, 0};
    if (header_fields(&header, &b, view.len) == 0) {
        Py_BEGIN_ALLOW_THREADS
        rec_t *recs = scratch_for(&sc, &b);
        if (recs != NULL && walk_records(view.buf, view.len, &b, recs) == 0) {
            status = NEED_MORE; /* done, as far as this batch goes */
            for (int32_t i = 0; i < b.records_count; i++) {
                rec_t *r = &recs[i];
                messages++;
                if (r->offset < start || r->key_len < 0)
                    continue;
                unsigned char digest[16];
                md5(r->key, (size_t)r->key_len, digest);
                int rc = table_put(t, digest, r->offset);
                if (rc < 0)
                    oom = 1;
                if (rc <= 0) {
                    status = FULL;
                    break;
                }
                if (r->offset > lat)
                    lat = r->offset;
            }
        }
        Py_END_ALLOW_THREADS
    }
    free(sc.recs);
    PyBuffer_Release(&header);
    PyBuffer_Release(&view);
    if (oom)
        return PyErr_NoMemory();
    return Py_BuildValue("(iLL)", status, (long long)lat, (long long)messages);
}

/* filter_section(table, header, section, latest_offset, now_ms, retention_ms)
 *   -> None (leave the batch to the Python code) or (kept, body, base_ts, max_ts, horizon)
 * The recopy filter over one compressed batch's decompressed records (the caller checked it is a plain batch:
 * not control, transactional, a producer's last nor ending the round).  body None: the batch goes as it is;
 * kept 0: it goes; else body holds the kept records, for the caller to compress under a rebuilt header. */
static PyObject *filter_section(PyObject *self, PyObject *args) {
    OffsetTable *t;
    Py_buffer header, view;
    long long latest, now_ms, retention_ms;
    if (!PyArg_ParseTuple(args, "O!y*y*LLL", &OffsetTableType, &t, &header, &view, &latest, &now_ms, &retention_ms))
        return NULL;
    batch_t b;
    decision_t d;
    int rc = -1;
    scratch_t sc = {NULL, 0};
    unsigned char *body = NULL;
    if (header_fields(&header, &b, view.len) == 0) {
        Py_BEGIN_ALLOW_THREADS
        rec_t *recs = scratch_for(&sc, &b);
        if (recs != NULL)
            rc = filter_decide(t, view.buf, view.len, &b, recs, latest, now_ms, retention_ms, &d);
        if (rc == 0 && !d.unchanged && d.kept > 0) {
            body = malloc((size_t)d.body + 1);
            if (body == NULL)
                rc = -2;
            else
                write_records(body, view.buf, recs, &d);
        }
        Py_END_ALLOW_THREADS
    }
    free(sc.recs);
    PyBuffer_Release(&header);
    PyBuffer_Release(&view);
    if (rc == -2)
        return PyErr_NoMemory();
    if (rc < 0)
        Py_RETURN_NONE;
    PyObject *result;
    if (d.unchanged || d.kept == 0)
        result = Py_BuildValue("(LOLLO)", (long long)d.kept, Py_None, 0LL, 0LL, Py_False);
    else
        result = Py_BuildValue("(Ly#LLO)", (long long)d.kept, (const char *)body, (Py_ssize_t)d.body,
                               (long long)d.base_ts, (long long)d.max_ts, d.horizon_bit ? Py_True : Py_False);
    free(body);
    return result;
}

/* filter_batches(table, data, pos, latest_offset, special_last_offsets, upper_bound, now_ms, retention_ms, verify_crc)
 *   -> (pos, status, out, index, bytes_read, messages_read, messages_written)
 * The recopy over the plain batches: not control, transactional or compressed, not ending at `upper_bound`,
 * and whose last offset is not in `special_last_offsets` (sorted int64s: the producers' last batches).  `out`
 * holds the batches written, back to back; `index` one (last offset, max timestamp, size) int64 triple per
 * batch written, for the cleaned segment's indexes. */
static PyObject *filter_batches(PyObject *self, PyObject *args) {
    OffsetTable *t;
    Py_buffer view, special;
    long long pos, latest, upper_bound, now_ms, retention_ms;
    int verify_crc;
    if (!PyArg_ParseTuple(args, "O!y*LLy*LLLp", &OffsetTableType, &t, &view, &pos, &latest, &special, &upper_bound,
                          &now_ms, &retention_ms, &verify_crc))
        return NULL;
    if (parse_args_buffer(&view, pos) < 0) {
        PyBuffer_Release(&special);
        return NULL;
    }
    const unsigned char *data = view.buf;
    const int64_t *specials = special.buf;
    Py_ssize_t n_special = special.len / (Py_ssize_t)sizeof(int64_t);
    int64_t len = view.len, p = pos, bytes_read = 0, messages_read = 0, messages_written = 0;
    int status, oom = 0;
    scratch_t sc = {NULL, 0};
    buf_t out = {NULL, 0, 0}, index = {NULL, 0, 0};
    Py_BEGIN_ALLOW_THREADS
    oom = buf_reserve(&out, (size_t)(len - p) + 4096) < 0; /* the output rarely outgrows the input */
    for (; !oom;) {
        batch_t b;
        status = read_batch(data, len, p, &b, verify_crc);
        if (status != WHOLE)
            break;
        status = SPECIAL;
        if ((b.attributes & (CONTROL_BIT | TRANSACTIONAL_BIT | COMPRESSION_MASK)) ||
            b.last_offset + 1 == upper_bound || contains(specials, n_special, b.last_offset))
            break;
        rec_t *recs = scratch_for(&sc, &b);
        if (recs == NULL)
            break;
        size_t before = out.len;
        int64_t kept = filter_one(t, data + p, &b, recs, latest, now_ms, retention_ms, &out, &oom);
        if (kept < 0)
            break;
        if (out.len > before) {
            if (buf_reserve(&index, 24) < 0) {
                oom = 1;
                break;
            }
            int64_t entry[3] = {b.last_offset, be64(out.p + before + 35), (int64_t)(out.len - before)};
            memcpy(index.p + index.len, entry, 24);
            index.len += 24;
        }
        bytes_read += b.size;
        messages_read += b.records_count;
        messages_written += kept;
        p += b.size;
    }
    Py_END_ALLOW_THREADS
    free(sc.recs);
    PyBuffer_Release(&view);
    PyBuffer_Release(&special);
    PyObject *result = NULL;
    if (oom) {
        PyErr_NoMemory();
    } else {
        result = Py_BuildValue("(Liy#y#LLL)", (long long)p, status, out.p ? (const char *)out.p : "",
                               (Py_ssize_t)out.len, index.p ? (const char *)index.p : "", (Py_ssize_t)index.len,
                               (long long)bytes_read, (long long)messages_read, (long long)messages_written);
    }
    free(out.p);
    free(index.p);
    return result;
}

static PyObject *py_crc32c(PyObject *self, PyObject *args) {
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*", &view))
        return NULL;
    uint32_t c = crc32c(view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(c);
}

static PyObject *py_md5(PyObject *self, PyObject *args) {
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*", &view))
        return NULL;
    unsigned char digest[16];
    md5(view.buf, (size_t)view.len, digest);
    PyBuffer_Release(&view);
    return PyBytes_FromStringAndSize((const char *)digest, 16);
}

static PyMethodDef methods[] = {
    {"scan_txn_batches", scan_txn_batches, METH_VARARGS, "scan_txn_batches(data, pos, upto, end) -> (pos, status)"},
    {"map_batches", map_batches, METH_VARARGS,
     "map_batches(table, data, pos, start, latest_offset, verify_crc) -> (pos, status, latest_offset, bytes, messages)"},
    {"filter_batches", filter_batches, METH_VARARGS,
     "filter_batches(table, data, pos, latest_offset, special_last_offsets, upper_bound, now_ms, retention_ms, "
     "verify_crc) "
     "-> (pos, status, out, index, bytes_read, messages_read, messages_written)"},
    {"map_section", map_section, METH_VARARGS,
     "map_section(table, header, section, start, latest_offset) -> (status, latest_offset, messages)"},
    {"filter_section", filter_section, METH_VARARGS,
     "filter_section(table, header, section, latest_offset, now_ms, retention_ms) -> None | (kept, body, base_ts, "
     "max_ts, horizon)"},
    {"crc32c", py_crc32c, METH_VARARGS, "crc32c(data) -> CRC32C (tests)"},
    {"md5", py_md5, METH_VARARGS, "md5(data) -> digest (tests)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cleaner_native", NULL, -1, methods};

PyMODINIT_FUNC PyInit__cleaner_native(void) {
    crc_init();
    if (PyType_Ready(&OffsetTableType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&OffsetTableType);
    if (PyModule_AddObject(m, "OffsetTable", (PyObject *)&OffsetTableType) < 0 ||
        PyModule_AddIntConstant(m, "NEED_MORE", NEED_MORE) < 0 || PyModule_AddIntConstant(m, "SPECIAL", SPECIAL) < 0 ||
        PyModule_AddIntConstant(m, "FULL", FULL) < 0) {
        Py_DECREF(&OffsetTableType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
