/* kernscope's Kineto event scanner: a run of Chrome-trace events (JSON objects separated by commas, no
 * brackets) -> flat columns, in one pass, in C. The hot loop of kernscope.load.kineto where a compiler
 * was available at install (kernscope.load.fastscan drives it; without it, or when this scanner declines a
 * piece, today's readers parse the piece and give the same table).
 *
 * It validates the whole text as strict JSON (RFC 8259: grammar, escapes, UTF-8) and extracts, per event:
 *   string slots  ph, cat, name, pid, tid, id and the requested string args -> uint32 codes into one
 *                 dictionary of distinct strings per call, plus one (0: null or absent);
 *   int slots     ts, dur (exact int64 ns from decimal µs text) and the requested integer args -> int64
 *                 values and a validity byte.
 * It declines (returns KS_DECLINE, nothing half-done matters: the caller parses the piece otherwise) whatever
 * the table readers treat in a special way, so that its columns always equal theirs:
 *   - a time with more than 3 decimals, an exponent, or beyond int64 ns; a time that is not a number or null;
 *   - an integer arg that is not a plain JSON integer within int64, a decimal string or a "0x" hex string
 *     (the readers accept 5.0 and "+7" too);
 *   - a string slot holding anything but a string, a plain integer or null;
 *   - an extracted string with escapes that decodes to over 4096 bytes, or with a lone surrogate;
 *   - a key with an escape, a tracked key twice in one object, nesting over 1000 levels;
 *   - anything that is not valid JSON or not a run of objects.
 * Events a projection drops are checked as JSON but not read. An event laid out like an earlier event of the
 * call is checked, and read, hole by hole against its layout instead of token by token (see Layout below).
 * No Python API (a plain shared library loaded with ctypes), no global state; the dictionary's hash table
 * and the layouts are allocated per call.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#include <unistd.h>
#endif
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

enum { KS_DECLINE = -1, KS_ROWS = -2, KS_NOMEM = -3 };
enum { KS_NO_LAYOUTS = 1 }; /* options */
#define MAX_STR 4096
#define MAX_DEPTH 1000
#define MAX_ARGS 64
/* an arg read as its JSON text (aslot: the string slot + RAW_SLOT) */
#define RAW_SLOT ((int64_t)1 << 40)

/* Layouts. Kineto writes every event of a kind with one format string, so an event's text is, byte for byte,
 * the text of an earlier one of its kind except for its numbers and string values. The scanner remembers the
 * last N_LAYOUTS events of the call that parse_event read in full as layouts: the event's text and its holes,
 * the places of its values. An event that equals a layout outside the holes, with a valid JSON token of the
 * hole's kind in each hole, is valid JSON with the same keys in the same places (the text around the holes was
 * checked when it was parsed), so it is not tokenized:
 *   - a dropped event's layout has holes for its numbers and value strings (checked), its name (looked up: it
 *     must be one the projection drops) and the ts that a dropped "X" event reports (read);
 *   - a kept event's layout has holes for the values parse_event read into slots (read by the same functions,
 *     in the same order: the same dictionary) and the other numbers and strings (checked); its ph and cat are
 *     text to match (they decided it is kept), so an event kept by its name makes none.
 * Anything else (a different byte, a hole that does not hold its kind, a name not dropped) goes the whole way
 * (parse_event). */
#define MAX_HOLES 48
#define N_LAYOUTS 8
/* hole kinds: any number, any string, the name of a dropped "X" event (looked up), its ts (read); and in a kept
 * event's layout, a value read into a string, int or time slot (by the functions parse_event reads it with) */
enum { H_NUM = 0, H_STR, H_NAME, H_TS, H_SSLOT, H_ISLOT, H_TSLOT };
typedef struct {
    int64_t a, e; /* the hole's token: b[a:e) */
    int kind, slot;
} Hole;
/* how the layouts of kept events of one category fare: a category whose events match them less than half the
 * time (after MAX_TRIES tries) stops trying them (cpu_op events with shapes: a layout per op and shape) */
#define N_CATS 32
#define MAX_TRIES 32
typedef struct {
    uint32_t cat;
    int32_t tries, hits;
} CatStat;
typedef struct {
    const uint8_t *text; /* the event's text in the input ('{' to '}'), with its holes at offsets */
    int64_t len;
    int nholes, x_drop, kept;
    CatStat *cs; /* a kept event's category's record (NULL: none) */
    uint32_t ph_code, cat_code; /* a kept event's ph and cat (text of the layout): their row codes */
    int32_t ha[MAX_HOLES], he[MAX_HOLES];
    uint8_t kind[MAX_HOLES], slot[MAX_HOLES];
} Layout;

/* the fixed slots (the Python side, kernscope.load.fastscan, names them in the same order) */
enum { S_PH = 0, S_CAT, S_NAME, S_PID, S_TID, S_ID, S_FIXED };
enum { I_TS = 0, I_DUR, I_FIXED };

/* byte classes inside a string: 0 plain, 1 quote, 2 backslash, 3 control (invalid), 4 non-ASCII */
static const uint8_t CLS[256] = {
    [0 ... 31] = 3, ['"'] = 1, ['\\'] = 2, [128 ... 255] = 4,
};

typedef struct {
    const uint8_t *b;
    int64_t n;
    int64_t p;
    /* outputs */
    int64_t nrows, cap_rows;
    uint32_t **codes;
    int64_t nscodes;
    int64_t **ints;
    uint8_t **valid;
    int64_t nints;
    /* dictionary */
    int64_t *doff;
    uint8_t *dbytes;
    int64_t ndict, cap_dict, nbytes, cap_bytes;
    int32_t *htab;
    uint64_t *hashes;
    int64_t hcap, hashes_cap;
    /* per string slot, the last value seen (its raw text) and its code: most rows repeat the previous one */
    const uint8_t *last_at[64];
    int64_t last_len[64];
    int32_t last_code[64];
    /* requested args */
    int64_t nargs;
    const uint8_t *akeys;
    const int64_t *aoff;
    const int64_t *aslot; /* >= 0: string slot; < 0: int slot -(k+1); >= RAW_SLOT: string slot k + RAW_SLOT, the
                           * value's JSON text as written (any value: an array of shapes), see parse_args */
    /* events dropped unparsed (a projection): phases dropped whatever their name; categories of "X" events dropped
     * when their name is one of the drop names (all as runs of strings: bytes, offsets[k..k+1]) */
    const uint8_t *dph, *dcat, *dname;
    const int64_t *dph_off, *dcat_off, *dname_off;
    int64_t ndph, ndcat, ndname;
    uint8_t *cls;   /* per dictionary code: CLS_* bits, computed once (0: not yet) */
    int64_t cls_cap;
    int64_t *ordinals; /* each emitted row's ordinal among the events */
    int64_t nevents, ndropped, drop_min_ts; /* drop_min_ts: earliest ts (ns) of the "X" events dropped */
    int has_drop_ts;
    /* the layouts of dropped events (see try_layout): the holes of the event being parsed, and the layouts learned */
    Hole rec[MAX_HOLES];
    int nrec, rec_over;
    Layout lay[N_LAYOUTS];
    int nlay, order[N_LAYOUTS]; /* order: the layouts, the last matched or learned first */
    int no_layouts;
    CatStat cats[N_CATS];
    int ncats;
    int64_t nlayout, nkept_layout; /* events dropped, and rows read, through a layout */
    uint8_t scratch[MAX_STR + 8];
} S;

enum { CLS_DONE = 1, CLS_DROP_PH = 2, CLS_DROP_CAT = 4, CLS_X = 8, CLS_DROP_NAME = 16 };

static inline void ws(S *s) {
    const uint8_t *b = s->b;
    int64_t p = s->p, n = s->n;
    while (p < n && (b[p] == ' ' || b[p] == '\n' || b[p] == '\r' || b[p] == '\t')) p++;
    s->p = p;
}

/* a hole of the event being parsed (a layout is made of a dropped event's holes) */
static inline void hole(S *s, int64_t a, int64_t e, int kind, int slot) {
    if (s->rec_over) return;
    if (s->nrec < MAX_HOLES) {
        s->rec[s->nrec].a = a;
        s->rec[s->nrec].e = e;
        s->rec[s->nrec].kind = kind;
        s->rec[s->nrec].slot = slot;
        s->nrec++;
    } else {
        s->rec_over = 1;
    }
}

/* length of a valid UTF-8 sequence at b[p] (first byte >= 0x80), 0 if invalid */
static inline int utf8_len(const uint8_t *b, int64_t p, int64_t n) {
    uint8_t c = b[p];
    if (c >= 0xC2 && c <= 0xDF) {
        if (p + 1 < n && (b[p + 1] & 0xC0) == 0x80) return 2;
        return 0;
    }
    if (c >= 0xE0 && c <= 0xEF) {
        if (p + 2 >= n) return 0;
        uint8_t c1 = b[p + 1], c2 = b[p + 2];
        if ((c1 & 0xC0) != 0x80 || (c2 & 0xC0) != 0x80) return 0;
        if (c == 0xE0 && c1 < 0xA0) return 0; /* overlong */
        if (c == 0xED && c1 >= 0xA0) return 0; /* surrogate */
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (p + 3 >= n) return 0;
        uint8_t c1 = b[p + 1], c2 = b[p + 2], c3 = b[p + 3];
        if ((c1 & 0xC0) != 0x80 || (c2 & 0xC0) != 0x80 || (c3 & 0xC0) != 0x80) return 0;
        if (c == 0xF0 && c1 < 0x90) return 0;
        if (c == 0xF4 && c1 >= 0x90) return 0;
        return 4;
    }
    return 0;
}

static inline int hexval(uint8_t c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static inline int hex4(const uint8_t *b, int64_t p, int64_t n) {
    if (p + 4 > n) return -1;
    int v = 0;
    for (int k = 0; k < 4; k++) {
        int h = hexval(b[p + k]);
        if (h < 0) return -1;
        v = v * 16 + h;
    }
    return v;
}

/* Walk the string whose opening quote is at s->p. On success s->p is just after the closing quote,
 * start and end bound the raw contents and *esc says whether it holds escapes. 0 on success. */
static inline int scan_string(S *s, int64_t *start, int64_t *end, int *esc) {
    const uint8_t *b = s->b;
    int64_t p = s->p + 1, n = s->n;
    int e = 0;
    *start = p;
    for (;;) {
#if defined(__SSE2__)
        /* 16 bytes at a time to the next quote, backslash, control or non-ASCII byte (signed < 0x20) */
        const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);
        while (p + 16 <= n) {
            __m128i x = _mm_loadu_si128((const __m128i *)(b + p));
            int m = _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, bslash)),
                                                   _mm_cmplt_epi8(x, space)));
            if (m) {
                p += __builtin_ctz((unsigned)m);
                break;
            }
            p += 16;
        }
#endif
        while (p < n && CLS[b[p]] == 0) p++;
        if (p >= n) return -1;
        uint8_t c = b[p];
        if (c == '"') break;
        if (c == '\\') {
            if (p + 1 >= n) return -1;
            uint8_t d = b[p + 1];
            e = 1;
            if (d == 'u') {
                if (hex4(b, p + 2, n) < 0) return -1;
                p += 6;
            } else if (d == '"' || d == '\\' || d == '/' || d == 'b' || d == 'f' || d == 'n' || d == 'r' || d == 't') {
                p += 2;
            } else {
                return -1;
            }
            continue;
        }
        if (c < 0x20) return -1;
        int k = utf8_len(b, p, n);
        if (!k) return -1;
        p += k;
    }
    *end = p;
    *esc = e;
    s->p = p + 1;
    return 0;
}

/* Decode the escaped string b[start:end) into s->scratch; its length, or -1 (too long, lone surrogate) */
static int64_t unescape(S *s, int64_t start, int64_t end) {
    const uint8_t *b = s->b;
    uint8_t *o = s->scratch;
    int64_t q = 0;
    for (int64_t p = start; p < end;) {
        uint8_t c = b[p];
        if (c != '\\') {
            if (q >= MAX_STR) return -1;
            o[q++] = c;
            p++;
            continue;
        }
        uint8_t d = b[p + 1];
        uint32_t cp;
        if (d == 'u') {
            cp = (uint32_t)hex4(b, p + 2, end);
            p += 6;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (p + 6 > end || b[p] != '\\' || b[p + 1] != 'u') return -1;
                int lo = hex4(b, p + 2, end);
                if (lo < 0xDC00 || lo > 0xDFFF) return -1;
                cp = 0x10000 + ((cp - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
                p += 6;
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                return -1;
            }
        } else {
            p += 2;
            switch (d) {
                case 'b': cp = 8; break;
                case 'f': cp = 12; break;
                case 'n': cp = 10; break;
                case 'r': cp = 13; break;
                case 't': cp = 9; break;
                default: cp = d; /* " \ / */
            }
        }
        if (q + 4 > MAX_STR) return -1;
        if (cp < 0x80) {
            o[q++] = (uint8_t)cp;
        } else if (cp < 0x800) {
            o[q++] = (uint8_t)(0xC0 | (cp >> 6));
            o[q++] = (uint8_t)(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            o[q++] = (uint8_t)(0xE0 | (cp >> 12));
            o[q++] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
            o[q++] = (uint8_t)(0x80 | (cp & 0x3F));
        } else {
            o[q++] = (uint8_t)(0xF0 | (cp >> 18));
            o[q++] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
            o[q++] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
            o[q++] = (uint8_t)(0x80 | (cp & 0x3F));
        }
    }
    return q;
}

static inline uint64_t hash_bytes(const uint8_t *x, int64_t len) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)len;
    int64_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, x + i, 8);
        h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 29;
    }
    if (i < len) {
        uint64_t w = 0;
        memcpy(&w, x + i, (size_t)(len - i));
        h = (h ^ w) * 0x94D049BB133111EBull;
        h ^= h >> 31;
    }
    return h * 0xD6E8FEB86659FD93ull;
}

static int grow_table(S *s) {
    int64_t cap = s->hcap ? s->hcap * 2 : 1024;
    int32_t *t = (int32_t *)malloc((size_t)cap * sizeof(int32_t));
    if (!t) return -1;
    memset(t, 0xFF, (size_t)cap * sizeof(int32_t));
    for (int64_t k = 0; k < s->ndict; k++) {
        uint64_t i = s->hashes[k] & (uint64_t)(cap - 1);
        while (t[i] >= 0) i = (i + 1) & (uint64_t)(cap - 1);
        t[i] = (int32_t)k;
    }
    free(s->htab);
    s->htab = t;
    s->hcap = cap;
    return 0;
}

/* the code of a string (added to the dictionary when new); < 0 when an output is full */
static int32_t intern(S *s, const uint8_t *x, int64_t len) {
    if (2 * (s->ndict + 1) > s->hcap && grow_table(s)) return KS_NOMEM;
    uint64_t h = hash_bytes(x, len);
    uint64_t mask = (uint64_t)(s->hcap - 1), i = h & mask;
    for (;;) {
        int32_t k = s->htab[i];
        if (k < 0) break;
        if (s->hashes[k] == h && s->doff[k + 1] - s->doff[k] == len && memcmp(s->dbytes + s->doff[k], x, (size_t)len) == 0)
            return k;
        i = (i + 1) & mask;
    }
    if (s->ndict >= s->cap_dict || s->nbytes + len > s->cap_bytes) return KS_ROWS;
    if (s->ndict >= s->hashes_cap) {
        int64_t cap = s->hashes_cap ? s->hashes_cap * 2 : 1024;
        uint64_t *hs = (uint64_t *)realloc(s->hashes, (size_t)cap * sizeof(uint64_t));
        if (!hs) return KS_NOMEM;
        s->hashes = hs;
        s->hashes_cap = cap;
    }
    int32_t k = (int32_t)s->ndict++;
    memcpy(s->dbytes + s->nbytes, x, (size_t)len);
    s->nbytes += len;
    s->doff[k + 1] = s->nbytes;
    s->hashes[k] = h;
    s->htab[i] = k;
    return k;
}

/* A JSON number at s->p: its extent, and whether it is a plain integer. 0 on success. */
static inline int scan_number(S *s, int64_t *end, int *plain_int, int *frac_digits, int *has_exp) {
    const uint8_t *b = s->b;
    int64_t p = s->p, n = s->n;
    if (p < n && b[p] == '-') p++;
    if (p >= n) return -1;
    if (b[p] == '0') {
        p++;
    } else if (b[p] >= '1' && b[p] <= '9') {
        while (p < n && b[p] >= '0' && b[p] <= '9') p++;
    } else {
        return -1;
    }
    int fd = 0, ex = 0;
    if (p < n && b[p] == '.') {
        p++;
        int64_t f0 = p;
        while (p < n && b[p] >= '0' && b[p] <= '9') p++;
        if (p == f0) return -1;
        fd = (int)((p - f0) > 1000 ? 1000 : (p - f0));
    }
    if (p < n && (b[p] == 'e' || b[p] == 'E')) {
        p++;
        if (p < n && (b[p] == '+' || b[p] == '-')) p++;
        int64_t e0 = p;
        while (p < n && b[p] >= '0' && b[p] <= '9') p++;
        if (p == e0) return -1;
        ex = 1;
    }
    *end = p;
    *plain_int = (fd == 0 && !ex);
    *frac_digits = fd;
    *has_exp = ex;
    return 0;
}

/* a plain JSON integer b[a:e) as int64; 0 on success */
static inline int parse_i64(const uint8_t *b, int64_t a, int64_t e, int64_t *out) {
    int neg = b[a] == '-';
    if (neg) a++;
    if (e - a > 19) return -1;
    uint64_t v = 0;
    for (int64_t p = a; p < e; p++) v = v * 10 + (uint64_t)(b[p] - '0');
    if (neg) {
        if (v > (uint64_t)INT64_MAX + 1) return -1;
        *out = (int64_t)(0 - v);
    } else {
        if (v > (uint64_t)INT64_MAX) return -1;
        *out = (int64_t)v;
    }
    return 0;
}

static int skip_value(S *s, int depth);

static int skip_container(S *s, int depth, uint8_t close) {
    if (depth > MAX_DEPTH) return -1;
    s->p++;
    ws(s);
    if (s->p < s->n && s->b[s->p] == close) {
        s->p++;
        return 0;
    }
    for (;;) {
        if (close == '}') {
            int64_t a, e;
            int esc;
            if (s->p >= s->n || s->b[s->p] != '"' || scan_string(s, &a, &e, &esc)) return -1;
            ws(s);
            if (s->p >= s->n || s->b[s->p] != ':') return -1;
            s->p++;
            ws(s);
        }
        if (skip_value(s, depth + 1)) return -1;
        ws(s);
        if (s->p >= s->n) return -1;
        uint8_t c = s->b[s->p];
        if (c == ',') {
            s->p++;
            ws(s);
            continue;
        }
        if (c == close) {
            s->p++;
            return 0;
        }
        return -1;
    }
}

static int skip_value(S *s, int depth) {
    if (s->p >= s->n) return -1;
    uint8_t c = s->b[s->p];
    int64_t at = s->p;
    if (c == '"') {
        int64_t a, e;
        int esc;
        if (scan_string(s, &a, &e, &esc)) return -1;
        hole(s, at, s->p, H_STR, 0);
        return 0;
    }
    if (c == '{') return skip_container(s, depth, '}');
    if (c == '[') return skip_container(s, depth, ']');
    if (c == 't' && s->p + 4 <= s->n && memcmp(s->b + s->p, "true", 4) == 0) { s->p += 4; return 0; }
    if (c == 'f' && s->p + 5 <= s->n && memcmp(s->b + s->p, "false", 5) == 0) { s->p += 5; return 0; }
    if (c == 'n' && s->p + 4 <= s->n && memcmp(s->b + s->p, "null", 4) == 0) { s->p += 4; return 0; }
    if (c == '-' || (c >= '0' && c <= '9')) {
        int64_t e;
        int pi, fd, ex;
        if (scan_number(s, &e, &pi, &fd, &ex)) return -1;
        s->p = e;
        hole(s, at, e, H_NUM, 0);
        return 0;
    }
    return -1;
}

static inline int is_null(S *s) {
    if (s->p + 4 <= s->n && memcmp(s->b + s->p, "null", 4) == 0) {
        s->p += 4;
        return 1;
    }
    return 0;
}

static int in_list(const uint8_t *x, int64_t len, const uint8_t *blob, const int64_t *off, int64_t n) {
    for (int64_t k = 0; k < n; k++)
        if (off[k + 1] - off[k] == len && memcmp(blob + off[k], x, (size_t)len) == 0) return 1;
    return 0;
}

/* the CLS_* bits of dictionary entry ``code`` (its string as ph, cat or name) */
static uint8_t classify(S *s, int32_t code) {
    if (code < 0 || code >= s->cls_cap) return CLS_DONE;
    uint8_t c = s->cls[code];
    if (c) return c;
    const uint8_t *x = s->dbytes + s->doff[code];
    int64_t len = s->doff[code + 1] - s->doff[code];
    c = CLS_DONE;
    if (in_list(x, len, s->dph, s->dph_off, s->ndph)) c |= CLS_DROP_PH;
    if (in_list(x, len, s->dcat, s->dcat_off, s->ndcat)) c |= CLS_DROP_CAT;
    if (len == 1 && x[0] == 'X') c |= CLS_X;
    if (in_list(x, len, s->dname, s->dname_off, s->ndname)) c |= CLS_DROP_NAME;
    s->cls[code] = c;
    return c;
}

/* the code of the text b[a:e) in string slot ``slot``: the previous row's of that slot when it is the same text
 * (most rows repeat it: ph, cat, pid, tid), else from the dictionary */
static inline int32_t intern_as_last(S *s, int slot, int64_t a, int64_t e) {
    if (slot < 64 && s->last_at[slot] && s->last_len[slot] == e - a && memcmp(s->last_at[slot], s->b + a, (size_t)(e - a)) == 0)
        return s->last_code[slot];
    int32_t code = intern(s, s->b + a, e - a);
    if (slot < 64 && code >= 0) {
        s->last_at[slot] = s->b + a;
        s->last_len[slot] = e - a;
        s->last_code[slot] = code;
    }
    return code;
}

/* a string slot's value: a string, a plain integer (its text) or null. 0 on success. */
static int string_slot(S *s, int slot, int64_t row) {
    uint8_t c = s->b[s->p];
    int32_t code;
    if (c == '"') {
        int64_t a, e;
        int esc;
        if (scan_string(s, &a, &e, &esc)) return KS_DECLINE;
        if (esc) {
            int64_t len = unescape(s, a, e);
            if (len < 0) return KS_DECLINE;
            code = intern(s, s->scratch, len);
        } else {
            code = intern_as_last(s, slot, a, e);
        }
    } else if (c == 'n') {
        if (!is_null(s)) return KS_DECLINE;
        code = -1;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        int64_t a = s->p, e, v;
        int pi, fd, ex;
        if (scan_number(s, &e, &pi, &fd, &ex) || !pi || parse_i64(s->b, a, e, &v)) return KS_DECLINE;
        s->p = e;
        code = intern_as_last(s, slot, a, e); /* its text, as a string's: "449" and 449 are one string */
    } else {
        return KS_DECLINE;
    }
    if (code < -1) return (int)code;
    s->codes[slot][row] = (uint32_t)(code + 1);
    return 0;
}

/* an integer arg written as a string (ROCm writes "bytes": "8", "stream": "0x0"): decimal digits with an
 * optional minus (at most 18), or "0x" and 1-15 hex digits; "" is null. 0 on success, -1 for any other text
 * (the readers accept more forms, "5.0" or "+7": they decide those). */
static int int_text(const uint8_t *x, int64_t len, int64_t *out, int *is_null_out) {
    *is_null_out = 0;
    if (len == 0) {
        *is_null_out = 1;
        return 0;
    }
    if (len > 2 && x[0] == '0' && x[1] == 'x') {
        if (len - 2 > 15) return -1;
        int64_t v = 0;
        for (int64_t k = 2; k < len; k++) {
            int h = hexval(x[k]);
            if (h < 0) return -1;
            v = v * 16 + h;
        }
        *out = v;
        return 0;
    }
    int neg = x[0] == '-';
    int64_t a = neg, v = 0;
    if (len - a < 1 || len - a > 18) return -1;
    for (int64_t k = a; k < len; k++) {
        if (x[k] < '0' || x[k] > '9') return -1;
        v = v * 10 + (x[k] - '0');
    }
    *out = neg ? -v : v;
    return 0;
}

/* an integer slot's value: a plain JSON integer within int64, an integer string (int_text), or null */
static int int_slot(S *s, int slot, int64_t row) {
    uint8_t c = s->b[s->p];
    if (c == 'n') return is_null(s) ? 0 : KS_DECLINE;
    int64_t v;
    if (c == '"') {
        int64_t a, e;
        int esc, isnull;
        if (scan_string(s, &a, &e, &esc) || esc || int_text(s->b + a, e - a, &v, &isnull)) return KS_DECLINE;
        if (isnull) return 0;
    } else {
        int64_t a = s->p, e;
        int pi, fd, ex;
        if (scan_number(s, &e, &pi, &fd, &ex) || !pi || parse_i64(s->b, a, e, &v)) return KS_DECLINE;
        s->p = e;
    }
    s->ints[slot][row] = v;
    s->valid[slot][row] = 1;
    return 0;
}

#define MAX_US 9223372036854775LL /* (2^63 - 1) // 1000 */

/* a time in µs (at most 3 decimals, no exponent) as exact ns, or null (missing) */
static int time_slot(S *s, int slot, int64_t row) {
    uint8_t c = s->b[s->p];
    if (c == 'n') return is_null(s) ? 0 : KS_DECLINE;
    const uint8_t *b = s->b;
    int64_t a = s->p, e;
    int pi, fd, ex;
    if (scan_number(s, &e, &pi, &fd, &ex) || ex || fd > 3) return KS_DECLINE;
    s->p = e;
    int neg = b[a] == '-';
    int64_t p = a + neg, ip = 0;
    int64_t digits = 0;
    while (p < e && b[p] != '.') {
        if (++digits > 16) return KS_DECLINE;
        ip = ip * 10 + (b[p] - '0');
        p++;
    }
    if (ip >= MAX_US) return KS_DECLINE; /* near the int64 ns limit: the readers decide */
    int64_t fr = 0;
    int k = 0;
    if (p < e) {
        p++;
        for (; p < e; p++, k++) fr = fr * 10 + (b[p] - '0');
    }
    for (; k < 3; k++) fr *= 10;
    int64_t ns = ip * 1000 + fr; /* < (MAX_US - 1) * 1000 + 1000 <= INT64_MAX */
    s->ints[slot][row] = neg ? -ns : ns;
    s->valid[slot][row] = 1;
    return 0;
}

static int parse_args(S *s, int64_t row, int depth) {
    uint64_t seen = 0;
    s->p++;
    ws(s);
    if (s->p < s->n && s->b[s->p] == '}') {
        s->p++;
        return 0;
    }
    for (;;) {
        int64_t a, e;
        int esc;
        if (s->p >= s->n || s->b[s->p] != '"' || scan_string(s, &a, &e, &esc)) return KS_DECLINE;
        if (esc) return KS_DECLINE;
        int64_t len = e - a, hit = -1;
        for (int64_t k = 0; k < s->nargs; k++) {
            if (s->aoff[k + 1] - s->aoff[k] == len && memcmp(s->akeys + s->aoff[k], s->b + a, (size_t)len) == 0) {
                hit = k;
                break;
            }
        }
        ws(s);
        if (s->p >= s->n || s->b[s->p] != ':') return KS_DECLINE;
        s->p++;
        ws(s);
        if (s->p >= s->n) return KS_DECLINE;
        if (hit >= 0) {
            if (seen & (1ull << hit)) return KS_DECLINE;
            seen |= 1ull << hit;
            int64_t slot = s->aslot[hit], at = s->p;
            if (slot >= RAW_SLOT) { /* the value's text, escapes as written (msgspec.Raw's): a string, an array, null */
                if (skip_value(s, depth + 1)) return KS_DECLINE;
                int32_t code = intern(s, s->b + at, s->p - at);
                if (code < 0) return (int)code;
                s->codes[slot - RAW_SLOT][row] = (uint32_t)(code + 1);
                s->rec_over = 1; /* no layout of this event: such a value is no hole a layout could read */
            } else {
                int rc = slot >= 0 ? string_slot(s, (int)slot, row) : int_slot(s, (int)(-slot - 1), row);
                if (rc) return rc;
                hole(s, at, s->p, slot >= 0 ? H_SSLOT : H_ISLOT, (int)(slot >= 0 ? slot : -slot - 1));
            }
        } else if (skip_value(s, depth + 1)) {
            return KS_DECLINE;
        }
        ws(s);
        if (s->p >= s->n) return KS_DECLINE;
        uint8_t c = s->b[s->p];
        if (c == ',') {
            s->p++;
            ws(s);
            continue;
        }
        if (c == '}') {
            s->p++;
            return 0;
        }
        return KS_DECLINE;
    }
}

/* top-level keys: 0..5 string slots (ph cat name pid tid id), 6 ts, 7 dur, 8 args, -1 other */
static inline int top_key(const uint8_t *k, int64_t len) {
    switch (len) {
        case 2:
            if (k[0] == 'p' && k[1] == 'h') return 0;
            if (k[0] == 'i' && k[1] == 'd') return 5;
            if (k[0] == 't' && k[1] == 's') return 6;
            return -1;
        case 3:
            if (memcmp(k, "cat", 3) == 0) return 1;
            if (memcmp(k, "pid", 3) == 0) return 3;
            if (memcmp(k, "tid", 3) == 0) return 4;
            if (memcmp(k, "dur", 3) == 0) return 7;
            return -1;
        case 4:
            if (memcmp(k, "name", 4) == 0) return 2;
            if (memcmp(k, "args", 4) == 0) return 8;
            return -1;
        default:
            return -1;
    }
}

/* the record of kept layouts of category ``cat`` (a row code), NULL when there is no room (then they are tried) */
static CatStat *cat_stat(S *s, uint32_t cat) {
    for (int k = 0; k < s->ncats; k++)
        if (s->cats[k].cat == cat) return &s->cats[k];
    if (s->ncats == N_CATS) return NULL;
    CatStat *c = &s->cats[s->ncats++];
    c->cat = cat;
    c->tries = c->hits = 0;
    return c;
}

static inline int cat_fares(const CatStat *c) {
    return !c || c->tries < MAX_TRIES || 2 * c->hits >= c->tries;
}

/* row's slots emptied (0: null or absent) */
static inline void clear_row(S *s, int64_t row) {
    for (int64_t k = 0; k < s->nscodes; k++) s->codes[k][row] = 0;
    for (int64_t k = 0; k < s->nints; k++) {
        s->ints[k][row] = 0;
        s->valid[k][row] = 0;
    }
}

/* Keep the event just parsed (b[start:s->p), its holes in s->rec, kept or dropped) as the first layout, in place
 * of the least recently used one (see Layout). Not a kept event of a category whose layouts do not fare, nor a
 * dropped "X" event whose name or ts was read before it was known to be dropped. */
static void learn(S *s, int64_t start, int x_drop, int kept, int64_t row, CatStat *cs) {
    if (s->rec_over || s->p - start > INT32_MAX) return;
    if (!kept) cs = NULL;
    else if (!cs) cs = cat_stat(s, s->codes[S_CAT][row]); /* (parse_event looked it up when the cat decided) */
    if (kept && !cat_fares(cs)) return;
    Hole keep[MAX_HOLES];
    int n = 0, names = 0, times = 0;
    for (int k = 0; k < s->nrec; k++) {
        Hole h = s->rec[k];
        if (!kept) { /* a dropped event: what parse_event read before it knew is text to match, but the name (read
                      * as parse_event reads it: its dictionary gets the same strings in the same order) */
            if (h.kind == H_SSLOT && h.slot == S_NAME && s->b[h.a] == '"') h.kind = x_drop ? H_NAME : H_SSLOT;
            else if (h.kind == H_SSLOT || h.kind == H_ISLOT || h.kind == H_TSLOT) continue;
        } else if (h.kind == H_SSLOT && (h.slot == S_PH || h.slot == S_CAT)) {
            continue; /* a kept event's ph and cat are text to match: they decided it is kept */
        }
        names += h.kind == H_NAME;
        times += h.kind == H_TS;
        keep[n++] = h;
    }
    if (x_drop && (names != 1 || times != 1)) return;
    int t = s->nlay < N_LAYOUTS ? s->nlay : s->order[N_LAYOUTS - 1];
    Layout *L = &s->lay[t];
    for (int k = 0; k < n; k++) {
        L->ha[k] = (int32_t)(keep[k].a - start);
        L->he[k] = (int32_t)(keep[k].e - start);
        L->kind[k] = (uint8_t)keep[k].kind;
        L->slot[k] = (uint8_t)keep[k].slot;
    }
    L->text = s->b + start;
    L->len = s->p - start;
    L->nholes = n;
    L->x_drop = x_drop;
    L->kept = kept;
    L->cs = cs;
    L->ph_code = kept ? s->codes[S_PH][row] : 0;
    L->cat_code = kept ? s->codes[S_CAT][row] : 0;
    int k = s->nlay < N_LAYOUTS ? s->nlay++ : N_LAYOUTS - 1;
    for (; k > 0; k--) s->order[k] = s->order[k - 1];
    s->order[0] = t;
}

/* x[0:len) == y[0:len), 16 bytes at a time (overlapping loads; neither is read out of its bounds) */
static inline int same_bytes(const uint8_t *x, const uint8_t *y, int64_t len) {
    uint64_t u, v;
    uint32_t i, j;
    if (len >= 16) {
#if defined(__SSE2__)
        int64_t k = 0;
        for (; k + 16 <= len; k += 16)
            if (_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(x + k)),
                                                 _mm_loadu_si128((const __m128i *)(y + k)))) != 0xFFFF)
                return 0;
        return k == len || _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(x + len - 16)),
                                                            _mm_loadu_si128((const __m128i *)(y + len - 16)))) == 0xFFFF;
#else
        return memcmp(x, y, (size_t)len) == 0;
#endif
    }
    if (len >= 8) {
        memcpy(&u, x, 8), memcpy(&v, y, 8);
        if (u != v) return 0;
        memcpy(&u, x + len - 8, 8), memcpy(&v, y + len - 8, 8);
        return u == v;
    }
    if (len >= 4) {
        memcpy(&i, x, 4), memcpy(&j, y, 4);
        if (i != j) return 0;
        memcpy(&i, x + len - 4, 4), memcpy(&j, y + len - 4, 4);
        return i == j;
    }
    for (int64_t k = 0; k < len; k++)
        if (x[k] != y[k]) return 0;
    return 1;
}

/* The event at s->p through a layout (see Layout): 1 when a dropped event's layout matches, 2 when a kept one's
 * does (row is then read; s->p is after the event), 0 when none does (s->p unchanged; parse_event decides: it
 * clears row, which a layout that did not match may have written). */
static int try_layout(S *s, int64_t row) {
    const uint8_t *b = s->b;
    int64_t p0 = s->p, n = s->n;
    for (int o = 0; o < s->nlay; o++) {
        const Layout *L = &s->lay[s->order[o]];
        int64_t p = p0, off = 0, ts = 0;
        int ok = 1;
        CatStat *cs = L->cs;
        if (L->kept) {
            if (!cat_fares(cs)) continue; /* (until learn replaces it: the category learns no more layouts) */
            int64_t m = L->nholes ? L->ha[0] : L->len; /* the text to the first hole: ph and cat are in it */
            if (m > n - p || !same_bytes(b + p, L->text, m)) continue;
            p += m, off = m; /* (the loop goes on from the first hole) */
            if (cs) cs->tries++;
            clear_row(s, row);
            s->codes[S_PH][row] = L->ph_code;
            s->codes[S_CAT][row] = L->cat_code;
        }
        for (int h = 0;; h++) {
            int64_t stop = h < L->nholes ? L->ha[h] : L->len, m = stop - off;
            if (m > n - p || !same_bytes(b + p, L->text + off, m)) {
                ok = 0;
                break;
            }
            p += m;
            if (h == L->nholes) break;
            if (p >= n) {
                ok = 0;
                break;
            }
            s->p = p;
            int64_t a, e = p;
            int esc, pi, fd, ex;
            uint8_t c = b[p];
            switch (L->kind[h]) {
                case H_NUM:
                    ok = scan_number(s, &e, &pi, &fd, &ex) == 0;
                    s->p = e;
                    break;
                case H_STR:
                    ok = c == '"' && scan_string(s, &a, &e, &esc) == 0;
                    break;
                case H_NAME: {
                    ok = c == '"' && scan_string(s, &a, &e, &esc) == 0 && !esc;
                    if (ok) {
                        int32_t code = intern(s, b + a, e - a);
                        ok = code >= 0 && (classify(s, code) & CLS_DROP_NAME);
                    }
                    break;
                }
                case H_TS: /* a time (a number; null is parse_event's to decline) */
                    ok = (c == '-' || (c >= '0' && c <= '9')) && time_slot(s, I_TS, row) == 0;
                    ts = s->ints[I_TS][row];
                    break;
                case H_SSLOT:
                    ok = string_slot(s, L->slot[h], row) == 0;
                    break;
                case H_ISLOT:
                    ok = int_slot(s, L->slot[h], row) == 0;
                    break;
                default: /* H_TSLOT */
                    ok = time_slot(s, L->slot[h], row) == 0;
                    break;
            }
            if (!ok) break;
            p = s->p;
            off = L->he[h];
        }
        if (!ok) continue;
        if (cs) cs->hits++;
        if (L->x_drop && (!s->has_drop_ts || ts < s->drop_min_ts)) {
            s->drop_min_ts = ts;
            s->has_drop_ts = 1;
        }
        int t = s->order[o];
        for (; o > 0; o--) s->order[o] = s->order[o - 1];
        s->order[0] = t;
        s->p = p;
        return L->kept ? 2 : 1;
    }
    s->p = p0;
    return 0;
}

/* One event into row ``row``. ``*dropped`` is set when the projection drops it: once its ph, cat and name are known
 * (Kineto writes them first), the rest is only checked as JSON (no strings interned, no args read), except the ts of
 * a dropped "X" event (the earliest is reported); a dropped "X" event without a ts declines the text (the readers keep
 * such an event). */
static int parse_event(S *s, int64_t row, int *dropped) {
    clear_row(s, row);
    unsigned seen = 0;
    int drop = 0, x_drop = 0, decided = s->ndph == 0 && s->ndcat == 0, by_name = 0;
    CatStat *cs = NULL; /* a kept event's category's record, once its cat is read */
    int64_t start = s->p;
    *dropped = 0;
    s->nrec = s->rec_over = 0;
    s->p++;
    ws(s);
    if (s->p < s->n && s->b[s->p] == '}') {
        s->p++;
        return 0;
    }
    for (;;) {
        int64_t a, e;
        int esc;
        if (s->p >= s->n || s->b[s->p] != '"' || scan_string(s, &a, &e, &esc)) return KS_DECLINE;
        if (esc) return KS_DECLINE;
        int key = top_key(s->b + a, e - a);
        ws(s);
        if (s->p >= s->n || s->b[s->p] != ':') return KS_DECLINE;
        s->p++;
        ws(s);
        if (s->p >= s->n) return KS_DECLINE;
        int rc = 0;
        if (key >= 0) {
            if (seen & (1u << key)) return KS_DECLINE;
            seen |= 1u << key;
        }
        int64_t at = s->p;
        if (drop) {
            if (key == 6 && x_drop) {
                rc = time_slot(s, I_TS, row);
                if (!rc && s->valid[I_TS][row]) hole(s, at, s->p, H_TS, I_TS);
            } else if (skip_value(s, 1)) {
                rc = KS_DECLINE;
            }
        } else if (key >= 0 && key <= 5) {
            rc = string_slot(s, key, row);
            if (!rc) hole(s, at, s->p, H_SSLOT, key);
        } else if (key == 6 || key == 7) {
            rc = time_slot(s, key - 6, row);
            if (!rc) hole(s, at, s->p, H_TSLOT, key - 6);
        } else if (key == 8) {
            uint8_t c = s->b[s->p];
            if (c == '{') rc = parse_args(s, row, 1);
            else if (c == 'n') rc = is_null(s) ? 0 : KS_DECLINE;
            else rc = KS_DECLINE;
        } else if (skip_value(s, 1)) {
            rc = KS_DECLINE;
        }
        if (rc) return rc;
        if (!decided && !drop && key >= 0 && key <= 2 && (seen & 1u)) {
            /* ph known (and cat, name as they come): decide whether the projection drops this event */
            uint8_t ph = classify(s, (int32_t)s->codes[S_PH][row] - 1);
            if (ph & CLS_DROP_PH) {
                drop = 1;
            } else if (!(ph & CLS_X) || s->ndcat == 0) {
                decided = 1;
            } else if (seen & 2u) {
                if (!(classify(s, (int32_t)s->codes[S_CAT][row] - 1) & CLS_DROP_CAT)) {
                    decided = 1;
                } else if (seen & 4u) {
                    if (classify(s, (int32_t)s->codes[S_NAME][row] - 1) & CLS_DROP_NAME) drop = x_drop = 1;
                    else decided = by_name = 1;
                }
            }
        }
        if (key == S_CAT && decided && !drop && !s->rec_over && !cat_fares(cs = cat_stat(s, s->codes[S_CAT][row])))
            s->rec_over = 1; /* kept, of a category whose layouts do not fare: none to learn */
        ws(s);
        if (s->p >= s->n) return KS_DECLINE;
        uint8_t c = s->b[s->p];
        if (c == ',') {
            s->p++;
            ws(s);
            continue;
        }
        if (c == '}') {
            s->p++;
            if (x_drop) {
                if (!s->valid[I_TS][row]) return KS_DECLINE;
                if (!s->has_drop_ts || s->ints[I_TS][row] < s->drop_min_ts) s->drop_min_ts = s->ints[I_TS][row];
                s->has_drop_ts = 1;
            }
            *dropped = drop;
            /* a kept event's layout when its ph and cat alone decided it is kept (a layout matches their text) */
            if (!s->no_layouts && (drop || (decided && !by_name))) learn(s, start, x_drop, !drop, row, cs);
            return 0;
        }
        return KS_DECLINE;
    }
}

/* Scan the run of events b[0:n). Outputs: codes[nscodes][cap_rows] (uint32, dictionary index + 1, 0 null), ints/valid[nints][cap_rows],
 * the dictionary (doff[cap_dict + 1] offsets, dbytes[cap_bytes]). Requested args: nargs keys, their bytes
 * akeys[aoff[k]:aoff[k+1]], and each one's slot (aslot[k] >= 0: string slot; -(j+1): int slot j).
 * Events dropped unparsed (see parse_event): phases dph (ndph strings: bytes dph, offsets dph_off), and "X" events of a
 * category in dcat whose name is in dname; the rows hold only the others, ordinals[row] their ordinal among all events.
 * counts[0] = dictionary entries, counts[1] = dictionary bytes, counts[2] = byte where it declined, counts[3] = events
 * dropped, counts[4] = 1 and counts[5] = the earliest ts (ns) when a dropped event was an "X" one, counts[6] = events
 * dropped through a layout (see Layout), counts[7] = rows read through a layout. options: KS_NO_LAYOUTS drops every event through parse_event (a test's
 * reference).
 * Returns the number of rows, or KS_DECLINE, KS_ROWS (an output is too small), KS_NOMEM. */
int64_t ks_kineto_scan(const uint8_t *b, int64_t n, int64_t cap_rows, uint32_t **codes, int64_t nscodes, int64_t **ints,
                       uint8_t **valid, int64_t nints, int64_t *doff, uint8_t *dbytes, int64_t cap_dict, int64_t cap_bytes,
                       const uint8_t *akeys, const int64_t *aoff, const int64_t *aslot, int64_t nargs,
                       const uint8_t *dph, const int64_t *dph_off, int64_t ndph, const uint8_t *dcat, const int64_t *dcat_off,
                       int64_t ndcat, const uint8_t *dname, const int64_t *dname_off, int64_t ndname, int64_t *ordinals,
                       int64_t *counts, int64_t options) {
    if (nargs > MAX_ARGS || nscodes < S_FIXED || nints < I_FIXED) return KS_DECLINE;
    S *s = (S *)calloc(1, sizeof(S));
    if (!s) return KS_NOMEM;
    s->dph = dph;
    s->dph_off = dph_off;
    s->ndph = ndph;
    s->dcat = dcat;
    s->dcat_off = dcat_off;
    s->ndcat = ndcat;
    s->dname = dname;
    s->dname_off = dname_off;
    s->ndname = ndname;
    s->ordinals = ordinals;
    s->no_layouts = (options & KS_NO_LAYOUTS) != 0;
    if (ndph || ndcat) {
        s->cls = (uint8_t *)calloc((size_t)cap_dict + 1, 1);
        if (!s->cls) {
            free(s);
            return KS_NOMEM;
        }
        s->cls_cap = cap_dict;
    }
    s->b = b;
    s->n = n;
    s->cap_rows = cap_rows;
    s->codes = codes;
    s->nscodes = nscodes;
    s->ints = ints;
    s->valid = valid;
    s->nints = nints;
    s->doff = doff;
    s->dbytes = dbytes;
    s->cap_dict = cap_dict;
    s->cap_bytes = cap_bytes;
    s->akeys = akeys;
    s->aoff = aoff;
    s->aslot = aslot;
    s->nargs = nargs;
    doff[0] = 0;
    int64_t rc = 0, row = 0;
    ws(s);
    while (s->p < s->n) {
        if (s->b[s->p] != '{') {
            rc = KS_DECLINE;
            break;
        }
        if (row >= s->cap_rows) {
            rc = KS_ROWS;
            break;
        }
        int dropped = 1, r = 0;
        int hit = s->nlay ? try_layout(s, row) : 0;
        if (hit == 1) s->nlayout++;
        else if (hit == 2) dropped = 0, s->nkept_layout++;
        else r = parse_event(s, row, &dropped);
        if (r) {
            rc = r;
            break;
        }
        if (dropped) {
            s->ndropped++;
        } else {
            if (s->ordinals) s->ordinals[row] = s->nevents;
            row++;
        }
        s->nevents++;
        ws(s);
        if (s->p >= s->n) break;
        if (s->b[s->p] != ',') {
            rc = KS_DECLINE;
            break;
        }
        s->p++;
        ws(s);
        if (s->p >= s->n) { /* a trailing comma */
            rc = KS_DECLINE;
            break;
        }
    }
    counts[0] = s->ndict;
    counts[1] = s->nbytes;
    counts[2] = s->p;
    counts[3] = s->ndropped;
    counts[4] = s->has_drop_ts;
    counts[5] = s->drop_min_ts;
    counts[6] = s->nlayout;
    counts[7] = s->nkept_layout;
    free(s->cls);
    free(s->htab);
    free(s->hashes);
    free(s);
    return rc ? rc : row;
}

/* A head start: ks_kineto_scan over a mapped file's first pieces, on a thread that runs while the process imports
 * what it needs (kernscope.load.headstart). The pieces are cut as the Python side cuts a mapped file
 * (kernscope.load.document.Splitter): from ``start``, each ends at the first boundary between events (a '}', blanks,
 * a ',', blanks, a '{'; blanks as Python's bytes regex \s) at or after ``chunk`` bytes; the last piece (after the
 * last such cut) is not scanned. Each piece's outputs are one block (KsPiece.arena, freed by ks_free_arena),
 * sized as kernscope.load.fastscan.scan sizes them: for the events of the bytes per event seen so far (96 at first),
 * a quarter more. progress[0] != 0 asks the scan to stop before its next piece; progress[1] is the number of pieces
 * whose KsPiece is complete (stored with release order: read it with ks_load_acquire). Returns that number. */
typedef struct {
    int64_t off, len;   /* the piece: b[off:off + len) */
    int64_t rc;         /* ks_kineto_scan's return, or KS_NOMEM when no arena could be allocated */
    int64_t cap, cap_dict, cap_bytes;
    int64_t size;       /* the arena's bytes */
    uint8_t *arena;     /* ints (nints * cap int64), ordinals (cap int64), doff (cap_dict + 1 int64), counts (8
                         * int64), codes (nscodes * cap uint32), valid (nints * cap uint8), dbytes (cap_bytes) */
} KsPiece;

/* a piece's outputs: mapped pages of their own where the system has mmap (given back whole when freed: from the C
 * heap, which a one-shot command never trims below 1 GB (kernscope.oneshot.tune_allocators), the pages each piece
 * wrote stayed resident after it was taken, ~50 MB more at a 200 MB trace's peak), else the C heap */
static void *arena_alloc(int64_t size) {
#if defined(MAP_ANONYMOUS)
    void *p = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
#else
    return malloc((size_t)size);
#endif
}

void ks_free_arena(void *p, int64_t size) {
#if defined(MAP_ANONYMOUS)
    if (p) munmap(p, (size_t)size);
#else
    (void)size;
    free(p);
#endif
}

static inline int is_py_space(uint8_t c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* the first boundary between events at or after ``from``: its '}' (and its '{' in *brace), or -1 */
static int64_t boundary(const uint8_t *b, int64_t n, int64_t from, int64_t *brace) {
    for (int64_t p = from; p < n; p++) {
        const uint8_t *hit = (const uint8_t *)memchr(b + p, '}', (size_t)(n - p));
        if (!hit) return -1;
        p = hit - b;
        int64_t q = p + 1;
        while (q < n && is_py_space(b[q])) q++;
        if (q >= n || b[q] != ',') continue;
        q++;
        while (q < n && is_py_space(b[q])) q++;
        if (q < n && b[q] == '{') {
            *brace = q;
            return p;
        }
    }
    return -1;
}

/* the scanner's fixed arguments of a head start's pieces: the slots read and the events dropped */
typedef struct {
    int64_t nscodes, nints;
    const uint8_t *akeys;
    const int64_t *aoff, *aslot;
    int64_t nargs;
    const uint8_t *dph;
    const int64_t *dph_off;
    int64_t ndph;
    const uint8_t *dcat;
    const int64_t *dcat_off;
    int64_t ndcat;
} HeadSlots;

/* ks_kineto_scan of the piece text[0:len) (the document's bytes from ``off``) into an arena of its own, sized for the
 * events of the bytes per event seen so far (*per_event, updated) */
static void scan_piece(const uint8_t *text, int64_t off, int64_t len, KsPiece *k, const HeadSlots *h, double *per_event) {
    uint32_t *codes[MAX_ARGS + S_FIXED];
    int64_t *ints[MAX_ARGS + I_FIXED];
    uint8_t *valid[MAX_ARGS + I_FIXED];
    int64_t nscodes = h->nscodes, nints = h->nints;
    int64_t cap = (int64_t)((double)len / *per_event * 1.25) + 64;
    int64_t cap_dict = 2 * cap + 1024 < len + 1 ? 2 * cap + 1024 : len + 1;
    int64_t cap_bytes = len / 8 + 4096;
    int64_t size = (nints * cap + cap + cap_dict + 2 + 8) * 8 + nscodes * cap * 4 + nints * cap + cap_bytes;
    k->off = off, k->len = len, k->cap = cap, k->cap_dict = cap_dict, k->cap_bytes = cap_bytes, k->size = size;
    k->arena = (uint8_t *)arena_alloc(size);
    if (!k->arena) {
        k->rc = KS_NOMEM;
        return;
    }
    int64_t *i64 = (int64_t *)k->arena;
    for (int64_t j = 0; j < nints; j++) ints[j] = i64 + j * cap;
    int64_t *ordinals = i64 + nints * cap, *doff = ordinals + cap, *counts = doff + cap_dict + 2;
    uint32_t *u32 = (uint32_t *)(counts + 8);
    for (int64_t j = 0; j < nscodes; j++) codes[j] = u32 + j * cap;
    uint8_t *u8 = (uint8_t *)(u32 + nscodes * cap);
    for (int64_t j = 0; j < nints; j++) valid[j] = u8 + j * cap;
    memset(counts, 0, 8 * sizeof(int64_t));
    k->rc = ks_kineto_scan(text, len, cap, codes, nscodes, ints, valid, nints, doff, u8 + nints * cap, cap_dict + 1,
                           cap_bytes, h->akeys, h->aoff, h->aslot, h->nargs, h->dph, h->dph_off, h->ndph, h->dcat,
                           h->dcat_off, h->ndcat, (const uint8_t *)"", h->dph_off, 0, ordinals, counts, 0);
    if (k->rc >= 0 && k->rc + counts[3] > 0) {
        double seen = (double)len / (double)(k->rc + counts[3]);
        *per_event = seen < 96.0 ? seen : 96.0;
    }
}

int64_t ks_kineto_head(const uint8_t *b, int64_t n, int64_t start, int64_t chunk, KsPiece *pieces, int64_t max_pieces,
                       int64_t nscodes, int64_t nints, const uint8_t *akeys, const int64_t *aoff, const int64_t *aslot,
                       int64_t nargs, const uint8_t *dph, const int64_t *dph_off, int64_t ndph, const uint8_t *dcat,
                       const int64_t *dcat_off, int64_t ndcat, int64_t *progress) {
    if (nscodes > MAX_ARGS + S_FIXED || nints > MAX_ARGS + I_FIXED) return 0;
    HeadSlots h = {nscodes, nints, akeys, aoff, aslot, nargs, dph, dph_off, ndph, dcat, dcat_off, ndcat};
    double per_event = 96.0; /* kernscope.load.fastscan.BYTES_PER_EVENT, then as seen */
    int64_t pos = start, done = 0;
    while (done < max_pieces && pos < n && !__atomic_load_n(&progress[0], __ATOMIC_ACQUIRE)) {
        int64_t cut = pos + chunk, brace = -1;
        if (cut >= n) break;
        int64_t close = boundary(b, n, cut, &brace);
        if (close < 0) break;
        scan_piece(b + pos, pos, close + 1 - pos, &pieces[done], &h, &per_event);
#if defined(MADV_DONTNEED)
        { /* the piece's text out of this mapping (a private one, never written: the page cache keeps it) */
            int64_t page = (int64_t)sysconf(_SC_PAGESIZE), lo = (pos + page - 1) / page * page, hi = (close + 1) / page * page;
            if (page > 0 && hi > lo) madvise((void *)(b + lo), (size_t)(hi - lo), MADV_DONTNEED);
        }
#endif
        pos = brace;
        done++;
        __atomic_store_n(&progress[1], done, __ATOMIC_RELEASE);
    }
    return done;
}

/* zlib-ng's stream (zng_stream, its native API; the layout of zlib's z_stream on LP64 systems) and the three functions
 * of it a gzip head start calls, passed in as pointers (taken from the zlib_ng module kernscope imports anyway: no
 * zlib header or library at build time) */
typedef struct {
    const uint8_t *next_in;
    uint32_t avail_in;
    size_t total_in;
    uint8_t *next_out;
    uint32_t avail_out;
    size_t total_out;
    const char *msg;
    void *state;
    void *zalloc, *zfree, *opaque;
    int data_type;
    uint32_t adler;
    unsigned long reserved;
} KsZStream;
typedef int32_t (*ks_zinit2_fn)(KsZStream *, int32_t);
typedef int32_t (*ks_zinflate_fn)(KsZStream *, int32_t);
typedef int32_t (*ks_zend_fn)(KsZStream *);

/* a gzip head start's state, in progress[2] */
#define GZ_RUNNING 0
#define GZ_DONE 1      /* every piece is there: the last (KsPiece.rc == GZ_FINAL) holds its text, not outputs */
#define GZ_FAILED (-1) /* stopped where the Python parse would do something else (decline a piece, report an error) */
#define GZ_STOPPED (-2)
#define GZ_FINAL (-100)
/* decompressed bytes asked of one inflate call */
#define GZ_STEP ((int64_t)1 << 20)

/* A head start for a gzipped trace: its first gzip member inflated (zlib-ng, through the pointers given) and cut into
 * the pieces kernscope.load.document.Splitter cuts a stream into (from ``start``, the first event's offset in the
 * inflated text, each at the first boundary at or after ``chunk`` bytes), each scanned as ks_kineto_head scans one.
 * Unlike ks_kineto_head it reads the whole stream: the parse takes every piece from it, the last one (after the last
 * cut: the array's end and what follows) as text in an arena (KsPiece.rc == GZ_FINAL, its bytes at ``arena``). It
 * stops with GZ_FAILED where the Python parse would not take its pieces as they are: a piece the scanner declines or
 * outgrows, an event over ``max_event`` bytes, a damaged or truncated stream, a second gzip member, more pieces than
 * ``max_pieces``; the parse then reads the file itself (and says what is wrong). It stays at most ``ahead`` pieces
 * ahead of the parse (progress[3]: pieces taken so far, written by the parse), so that the outputs of a long
 * stream wait no more than that many at a time. progress: [0] != 0 asks it to stop; [1] pieces complete (release
 * order); [2] the state (GZ_*); [3] pieces taken; [4] compressed bytes read. Returns the pieces complete. */
int64_t ks_kineto_head_gz(const uint8_t *gz, int64_t gz_n, void *zinit2, void *zinflate, void *zend, int64_t start,
                          int64_t chunk, int64_t max_event, int64_t ahead, KsPiece *pieces, int64_t max_pieces,
                          int64_t nscodes, int64_t nints, const uint8_t *akeys, const int64_t *aoff,
                          const int64_t *aslot, int64_t nargs, const uint8_t *dph, const int64_t *dph_off, int64_t ndph,
                          const uint8_t *dcat, const int64_t *dcat_off, int64_t ndcat, int64_t *progress) {
    int64_t done = 0, state = GZ_FAILED;
    if (nscodes > MAX_ARGS + S_FIXED || nints > MAX_ARGS + I_FIXED || chunk <= 0 || start < 0 || max_pieces < 1) {
        __atomic_store_n(&progress[2], state, __ATOMIC_RELEASE);
        return 0;
    }
    HeadSlots h = {nscodes, nints, akeys, aoff, aslot, nargs, dph, dph_off, ndph, dcat, dcat_off, ndcat};
    ks_zinflate_fn inflate_ = (ks_zinflate_fn)zinflate;
    KsZStream z;
    memset(&z, 0, sizeof z);
    int64_t cap = chunk + max_event + 2 * GZ_STEP;
    uint8_t *buf = (uint8_t *)malloc((size_t)cap);
    if (!buf || ((ks_zinit2_fn)zinit2)(&z, 31) != 0) {
        free(buf);
        __atomic_store_n(&progress[2], state, __ATOMIC_RELEASE);
        return 0;
    }
    int64_t in = 0;             /* compressed bytes given to inflate */
    int64_t base = 0, have = 0; /* buf holds the inflated text's bytes [base, base + have) */
    int64_t pos = start;        /* the next piece's first byte */
    int64_t from = pos + chunk; /* no boundary of this piece begins before this (each byte looked at about once) */
    int eof = 0;
    double per_event = 96.0;
    for (;;) {
        if (__atomic_load_n(&progress[0], __ATOMIC_ACQUIRE)) {
            state = GZ_STOPPED;
            break;
        }
        int64_t end = base + have, brace = -1, close = -1;
        if (pos < base || (eof && pos > end)) break; /* (a stream that ends before its first event: the parse says) */
        if (from < end) { /* the first boundary at or after ``chunk`` bytes of the piece, as the Python splitter cuts */
            close = boundary(buf, have, from - base, &brace);
            if (close >= 0) {
                close += base, brace += base;
            } else { /* none yet: the text may end inside one, which begins at its last '}' */
                int64_t last = end - 1;
                while (last >= from && buf[last - base] != '}') last--;
                from = last >= from ? last : end;
            }
        }
        if (close >= 0 || eof) {
            if (close >= 0 && close - pos > chunk + max_event) break; /* an event too large: the parse says */
            if (done >= max_pieces) break;
            while (done - __atomic_load_n(&progress[3], __ATOMIC_ACQUIRE) >= ahead
                   && !__atomic_load_n(&progress[0], __ATOMIC_ACQUIRE)) {
                struct timespec pause = {0, 500000};
                nanosleep(&pause, NULL);
            }
            KsPiece *k = &pieces[done];
            if (close < 0) { /* the last piece: its text, as it is */
                int64_t len = end - pos;
                memset(k, 0, sizeof *k);
                k->off = pos, k->len = len, k->rc = GZ_FINAL, k->size = len > 0 ? len : 1;
                k->arena = (uint8_t *)arena_alloc(k->size);
                if (!k->arena) break;
                if (len > 0) memcpy(k->arena, buf + (pos - base), (size_t)len);
                done++;
                __atomic_store_n(&progress[1], done, __ATOMIC_RELEASE);
                state = GZ_DONE;
                break;
            }
            scan_piece(buf + (pos - base), pos, close + 1 - pos, k, &h, &per_event);
            if (k->rc < 0) { /* declined or outgrown: the parse reads the file itself */
                ks_free_arena(k->arena, k->size);
                k->arena = NULL;
                break;
            }
            done++;
            __atomic_store_n(&progress[1], done, __ATOMIC_RELEASE);
            pos = brace, from = pos + chunk;
            continue;
        }
        if (end - pos > chunk + max_event) break; /* no boundary in chunk + max_event bytes: an event too large */
        /* more text, after the text before ``pos`` is dropped (none is, before the first event is inflated) */
        int64_t drop = pos - base < have ? pos - base : have;
        if (drop > 0) {
            memmove(buf, buf + drop, (size_t)(have - drop));
            have -= drop, base += drop;
        }
        int64_t room = cap - have < GZ_STEP ? cap - have : GZ_STEP;
        if (z.avail_in == 0 && in < gz_n) {
            int64_t give = gz_n - in < ((int64_t)1 << 30) ? gz_n - in : ((int64_t)1 << 30);
            z.next_in = gz + in, z.avail_in = (uint32_t)give;
            in += give;
        }
        z.next_out = buf + have, z.avail_out = (uint32_t)room;
        int32_t rc = inflate_(&z, 0);
        int64_t got = room - (int64_t)z.avail_out;
        have += got;
        __atomic_store_n(&progress[4], in - (int64_t)z.avail_in, __ATOMIC_RELEASE);
        if (rc == 1) { /* Z_STREAM_END: the member's end; a second member is the Python reader's to read */
            const uint8_t *after = z.avail_in ? z.next_in : gz + in;
            int64_t rest = (int64_t)z.avail_in + (gz_n - in);
            if (rest >= 2 && after[0] == 0x1f && after[1] == 0x8b) break;
            eof = 1;
        } else if (rc != 0 || (got == 0 && z.avail_in == 0 && in >= gz_n)) {
            break; /* damaged, or truncated (no more input, no end): the parse says which */
        }
    }
    ((ks_zend_fn)zend)(&z);
    free(buf);
    __atomic_store_n(&progress[2], state, __ATOMIC_RELEASE);
    return done;
}

int64_t ks_load_acquire(const int64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
void ks_store_release(int64_t *p, int64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
