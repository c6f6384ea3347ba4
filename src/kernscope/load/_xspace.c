/* kernscope's XSpace line scanner: the hot loop of kernscope.load.xplane in C.
 *
 * Given the byte spans of XLine messages (found by the Python side), walk each line and every event
 * and stat in it, writing flat columns: per line its id, timestamp_ns and name span; per event its line,
 * metadata id, offset_ps, duration_ps and flags; and the stats that become columns straight into those
 * columns (value, kind, string length). Called through ctypes, once per run of lines that fits the
 * outputs. No allocation, no Python API (a plain shared library built by setuptools; optional: the numpy
 * reader in xscan.py gives the same columns where no compiler was available).
 *
 * Schema (tsl/profiler/protobuf/xplane.proto): XLine id 1, name 2, timestamp_ns 3, events 4,
 * duration_ps 9, display_id 10, display_name 11; XEvent metadata_id 1, offset_ps 2, duration_ps 3,
 * stats 4, num_occurrences 5; XStat metadata_id 1, double 2, uint64 3, int64 4, str 5, bytes 6, ref 7.
 */
#include <stdint.h>
#include <string.h>

/* bumped whenever a signature or an output changes: kernscope.load.native refuses another version */
int64_t ks_abi_version(void) { return 7; }

enum { K_NONE = 0, K_DOUBLE = 1, K_U64 = 2, K_I64 = 3, K_STR = 4, K_BYTES = 5, K_REF = 6 };

/* a varint at *p (< end); 0 on success */
static inline int rd_varint(const uint8_t *b, int64_t *p, int64_t end, uint64_t *out) {
    if (*p < end && b[*p] < 0x80) { /* most varints are one byte */
        *out = b[*p];
        *p += 1;
        return 0;
    }
    uint64_t v = 0;
    int shift = 0;
    int64_t i = *p;
    while (i < end && shift < 70) {
        uint8_t c = b[i++];
        v |= (uint64_t)(c & 0x7F) << shift;
        if (c < 0x80) {
            *p = i;
            *out = v;
            return 0;
        }
        shift += 7;
    }
    return -1;
}

/* skip one field's value of wire type `wire` at *p; for wire 2 also return the payload span */
static inline int skip_value(const uint8_t *b, int64_t *p, int64_t end, int wire, uint64_t *val, int64_t *off, int64_t *len) {
    switch (wire) {
    case 0:
        return rd_varint(b, p, end, val);
    case 1:
        if (*p + 8 > end) return -1;
        memcpy(val, b + *p, 8);
        *p += 8;
        return 0;
    case 5: {
        uint32_t v32;
        if (*p + 4 > end) return -1;
        memcpy(&v32, b + *p, 4);
        *val = v32;
        *p += 4;
        return 0;
    }
    case 2: {
        uint64_t n;
        if (rd_varint(b, p, end, &n)) return -1;
        if (n > (uint64_t)(end - *p)) return -1;
        *off = *p;
        *len = (int64_t)n;
        *p += (int64_t)n;
        return 0;
    }
    default:
        return -1;
    }
}

/* Stats become columns: a stat whose `lut` entry (per plane `lut_width` entries: stat metadata id -> wanted
 * field, -1 for a stat not read) names field f writes event ev's cell of column f: col_kind[f][ev] its
 * kind, col_val[f][ev] its value (a string's or bytes' offset in the buffer), col_len[f][ev] a string's
 * length (where col_len[f] is given). A later stat of an event overwrites an earlier one of the same field.
 * Stats not read are counted. `line_plane`: each line's plane. The outputs hold `cap_ev` events: when a
 * line would overflow them, the call returns 1 with the counts of the lines done before it (the caller
 * grows the outputs and goes on from that line; the cells that line wrote are written again).
 * out_counts: [lines done, events, stats kept, error offset (-1: none), stats not read] */
int64_t ks_scan_lines(const uint8_t *b, int64_t nbuf, const int64_t *line_off, const int64_t *line_len, int64_t nlines,
                      const int64_t *line_plane, const int8_t *lut, int64_t lut_width, int64_t lut_size, int64_t cap_ev,
                      int64_t *ln_id, int64_t *ln_ts, int64_t *ln_name_off, int64_t *ln_name_len,
                      int32_t *ev_line, int64_t *ev_md, int64_t *ev_offset, int64_t *ev_dur, uint8_t *ev_flags,
                      uint64_t **col_val, uint8_t **col_kind, int64_t nfields,
                      int64_t *out_counts) {
    int64_t ne = 0, ns = 0, skipped = 0;
    out_counts[3] = -1;
    for (int64_t li = 0; li < nlines; li++) {
        int64_t ne0 = ne, ns0 = ns, sk0 = skipped;
        int64_t p = line_off[li], end = line_off[li] + line_len[li];
        int64_t id = 0, ts = 0, name_off = -1, name_len = 0, disp_off = -1, disp_len = 0;
        if (end > nbuf) { out_counts[3] = line_off[li]; return -1; }
        while (p < end) {
            int64_t at = p;
            uint64_t tag, val = 0;
            int64_t off = 0, len = 0;
            if (rd_varint(b, &p, end, &tag)) { out_counts[3] = at; return -1; }
            int field = (int)(tag >> 3), wire = (int)(tag & 7);
            if (field == 0 || skip_value(b, &p, end, wire, &val, &off, &len)) { out_counts[3] = at; return -1; }
            if (field == 4 && wire == 2) { /* an event */
                int64_t q = off, qend = off + len;
                int64_t md = 0, offset = 0, dur = 0;
                uint8_t flags = 0;
                if (ne >= cap_ev) goto full;
                int64_t ev = ne++;
                while (q < qend) {
                    int64_t eat = q;
                    uint64_t etag, ev_val = 0;
                    int64_t eoff = 0, elen = 0;
                    if (rd_varint(b, &q, qend, &etag)) { out_counts[3] = eat; return -1; }
                    int ef = (int)(etag >> 3), ew = (int)(etag & 7);
                    if (ef == 0 || skip_value(b, &q, qend, ew, &ev_val, &eoff, &elen)) { out_counts[3] = eat; return -1; }
                    if (ew == 0 && ef == 1) md = (int64_t)ev_val;
                    else if (ew == 0 && ef == 2) offset = (int64_t)ev_val;
                    else if (ew == 0 && ef == 3) dur = (int64_t)ev_val;
                    else if (ew == 0 && ef == 5) flags |= 1;
                    else if (ew == 2 && ef == 4) { /* a stat */
                        int64_t r = eoff, rend = eoff + elen;
                        int64_t smd = 0, soff = 0;
                        uint64_t sval = 0;
                        uint8_t kind = K_NONE;
                        while (r < rend) {
                            int64_t sat = r;
                            uint64_t stag, v = 0;
                            int64_t o = 0, l = 0;
                            if (rd_varint(b, &r, rend, &stag)) { out_counts[3] = sat; return -1; }
                            int sf = (int)(stag >> 3), sw = (int)(stag & 7);
                            if (sf == 0 || skip_value(b, &r, rend, sw, &v, &o, &l)) { out_counts[3] = sat; return -1; }
                            if (sf == 1 && sw == 0) smd = (int64_t)v;
                            else if (sf == 2 && sw == 1) { kind = K_DOUBLE; sval = v; }
                            else if (sf == 3 && sw == 0) { kind = K_U64; sval = v; }
                            else if (sf == 4 && sw == 0) { kind = K_I64; sval = v; }
                            else if (sf == 5 && sw == 2) { kind = K_STR; soff = o; }
                            else if (sf == 6 && sw == 2) { kind = K_BYTES; soff = o; }
                            else if (sf == 7 && sw == 0) { kind = K_REF; sval = v; }
                        }
                        int64_t key = line_plane[li] * lut_width + smd;
                        int8_t field = (smd >= 0 && smd < lut_width && key < lut_size) ? lut[key] : -1;
                        if (field < 0 || field >= nfields) {
                            skipped++;
                        } else {
                            col_val[field][ev] = (kind == K_STR || kind == K_BYTES) ? (uint64_t)soff : sval;
                            col_kind[field][ev] = kind;
                            ns++;
                        }
                    }
                }
                ev_line[ev] = (int32_t)li; ev_md[ev] = md; ev_offset[ev] = offset; ev_dur[ev] = dur; ev_flags[ev] = flags;
            } else if (field == 1 && wire == 0) id = (int64_t)val;
            else if (field == 3 && wire == 0) ts = (int64_t)val;
            else if (field == 2 && wire == 2) { name_off = off; name_len = len; }
            else if (field == 11 && wire == 2) { disp_off = off; disp_len = len; }
        }
        {
            ln_id[li] = id; ln_ts[li] = ts;
            if (name_len > 0 || disp_off < 0) { ln_name_off[li] = name_off; ln_name_len[li] = name_len; }
            else { ln_name_off[li] = disp_off; ln_name_len[li] = disp_len; }
        }
        out_counts[0] = li + 1;
        continue;
    full: /* this line does not fit: report the lines before it */
        out_counts[0] = li;
        out_counts[1] = ne0;
        out_counts[2] = ns0;
        out_counts[4] = sk0;
        return 1;
    }
    out_counts[1] = ne;
    out_counts[2] = ns;
    out_counts[4] = skipped;
    return 0;
}

/* A real (empty) extension module, so that importing it by mistake does not fail; the scanner itself is
 * called through ctypes (kernscope.load.native). */
#include <Python.h>

static struct PyModuleDef xspace_module = {PyModuleDef_HEAD_INIT, "_xspace",
                                           "kernscope's XSpace scanner (called through ctypes).", -1, NULL};

PyMODINIT_FUNC PyInit__xspace(void) { return PyModule_Create(&xspace_module); }
