/* kernscope's XSpace readers: the hot loops of kernscope.load.xplane in C.
 *
 * ks_fields lists every field of many protobuf messages (the metadata, the HLO programs: what
 * protowire.fields_of does with numpy). ks_scan_events walks the XLine messages (their byte spans found by
 * the Python side), every event and stat in them, writing flat columns: per line its id, timestamp_ns and
 * name span; per event its line, metadata id, name row, start and duration in ns and flags; and the stats
 * that become columns straight into typed columns. Called through ctypes. No allocation, no Python API (a
 * plain shared library built by setuptools; optional: the numpy readers in protowire.py and xscan.py give
 * the same columns where no compiler was available).
 *
 * Schema (tsl/profiler/protobuf/xplane.proto): XLine id 1, name 2, timestamp_ns 3, events 4,
 * duration_ps 9, display_id 10, display_name 11; XEvent metadata_id 1, offset_ps 2, duration_ps 3,
 * stats 4, num_occurrences 5; XStat metadata_id 1, double 2, uint64 3, int64 4, str 5, bytes 6, ref 7.
 */
#include <stdint.h>
#include <string.h>
#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#include <unistd.h>
#endif

/* bumped whenever a signature or an output changes: kernscope.load.native refuses another version */
int64_t ks_abi_version(void) { return 27; }

enum { K_NONE = 0, K_DOUBLE = 1, K_U64 = 2, K_I64 = 3, K_STR = 4, K_BYTES = 5, K_REF = 6 };

/* a varint at *p (< end); 0 on success */
static inline int rd_varint(const uint8_t *b, int64_t *p, int64_t end, uint64_t *out) {
    if (*p < end && b[*p] < 0x80) { /* most varints are one byte */
        *out = b[*p];
        *p += 1;
        return 0;
    }
    int64_t i = *p;
    uint64_t v = 0;
    int shift = 0;
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

/* ---- every field of many messages (kernscope.load.protowire.fields_of) ---------------------------------- */

/* One field at *p (< end): field number, wire type, value (varint / fixed bits; 0 for wire 2), offset (the
 * payload's for wire 2, else the value's) and size (wire 2's payload, else 0). 0 on success, -1 when the field
 * does not fit (the same checks as protowire._step: a tag or varint over 10 bytes, field 0, a wire type other
 * than 0/1/2/5, a length over 2^40 or past the message). */
static inline int one_field(const uint8_t *b, int64_t *p, int64_t end, int64_t *field, int64_t *wire, uint64_t *value,
                            int64_t *off, int64_t *size) {
    uint64_t tag;
    int64_t q = *p;
    if (rd_varint(b, &q, end, &tag) || q - *p > 10) return -1;
    *field = (int64_t)(tag >> 3);
    *wire = (int64_t)(tag & 7);
    *value = 0;
    *size = 0;
    if (*field == 0) return -1;
    switch (*wire) {
    case 0: {
        int64_t v0 = q;
        if (rd_varint(b, &q, end, value) || q - v0 > 10) return -1;
        *off = v0;
        break;
    }
    case 1:
    case 5: {
        int w = *wire == 1 ? 8 : 4;
        if (q + w > end) return -1;
        uint64_t v = 0;
        memcpy(&v, b + q, (size_t)w);
        *value = v;
        *off = q;
        q += w;
        break;
    }
    case 2: {
        uint64_t n;
        int64_t l0 = q;
        if (rd_varint(b, &q, end, &n) || q - l0 > 10 || n > ((uint64_t)1 << 40) || n > (uint64_t)(end - q)) return -1;
        *off = q;
        *size = (int64_t)n;
        q += (int64_t)n;
        break;
    }
    default:
        return -1;
    }
    *p = q;
    return 0;
}

/* Count the fields of messages [start[i], end[i]): the total, or -1 on bad data (info[0]: the offset). */
int64_t ks_count_fields(const uint8_t *b, int64_t nbuf, const int64_t *start, const int64_t *end, int64_t nmsg, int64_t *info) {
    int64_t total = 0;
    for (int64_t i = 0; i < nmsg; i++) {
        int64_t p = start[i], e = end[i];
        while (p < e) {
            int64_t at = p, f, w, o, s;
            uint64_t v;
            if (e > nbuf || one_field(b, &p, e, &f, &w, &v, &o, &s)) { info[0] = at; return -1; }
            total++;
        }
    }
    return total;
}

/* The fields of messages [start[i], end[i]) message by message, each message's in file order, into outputs of
 * `cap` rows (ks_count_fields's total): rows written, or -1 on bad data (info[0]: the offset). */
int64_t ks_fields(const uint8_t *b, int64_t nbuf, const int64_t *start, const int64_t *end, int64_t nmsg, int64_t cap,
                  int64_t *o_msg, int64_t *o_field, int64_t *o_wire, uint64_t *o_value, int64_t *o_off, int64_t *o_size,
                  int64_t *info) {
    int64_t n = 0;
    for (int64_t i = 0; i < nmsg; i++) {
        int64_t p = start[i], e = end[i];
        while (p < e) {
            int64_t at = p;
            if (n >= cap || e > nbuf || one_field(b, &p, e, &o_field[n], &o_wire[n], &o_value[n], &o_off[n], &o_size[n])) {
                info[0] = at;
                return -1;
            }
            o_msg[n++] = i;
        }
    }
    return n;
}

/* The pages of [from, to) of a buffer `b` that is a read-only mapping of a file, given back (MADV_DONTNEED: read
 * again from the page cache where touched again); the whole pages inside the range only. Returns `to`. Never for
 * memory of another kind, whose pages this would zero. */
static int64_t drop_pages(const uint8_t *b, int64_t from, int64_t to) {
#if defined(__unix__) || defined(__APPLE__)
    static long page = 0;
    if (page <= 0) page = sysconf(_SC_PAGESIZE);
    if (page > 0) {
        uintptr_t lo = ((uintptr_t)(b + from) + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
        uintptr_t hi = (uintptr_t)(b + to) & ~((uintptr_t)page - 1);
        if (hi > lo) madvise((void *)lo, (size_t)(hi - lo), MADV_DONTNEED);
    }
#else
    (void)b; (void)from;
#endif
    return to;
}

/* The number of events (field 4, length-prefixed) of each line: 0, or -1 on bad data (counts[nlines]: the
 * offset). Reads the lines' own fields only (an event is skipped by its length): a small part of a scan.
 * `release`: as ks_line_index's. */
int64_t ks_count_events(const uint8_t *b, int64_t nbuf, const int64_t *line_off, const int64_t *line_len, int64_t nlines,
                        int64_t *counts, int64_t release) {
    for (int64_t li = 0; li < nlines; li++) {
        int64_t p = line_off[li], end = line_off[li] + line_len[li], n = 0, released = p;
        if (end > nbuf) { counts[nlines] = p; return -1; }
        while (p < end) {
            int64_t at = p, off = 0, len = 0;
            uint64_t tag, val = 0;
            if (rd_varint(b, &p, end, &tag) || (tag >> 3) == 0 || skip_value(b, &p, end, (int)(tag & 7), &val, &off, &len)) {
                counts[nlines] = at;
                return -1;
            }
            n += tag == ((4 << 3) | 2);
            if (release > 0 && p - released >= release) released = drop_pages(b, released, p);
        }
        if (release > 0) drop_pages(b, released, end);
        counts[li] = n;
    }
    return 0;
}

/* Where lines of more than `seg` bytes can be cut into runs of their fields of about `seg` bytes each, so that one
 * long line (a GPU stream's: 91% of the bytes of a real 1 GB profile) is scanned on several threads. For each such
 * line li: its cuts (each the first field boundary at least `seg` bytes past the previous cut, or past the line's
 * start) as (cut_line, cut_at), and its header as a walk of the whole line gives it: hdr[4 li ..] = the last id,
 * the last timestamp_ns, and the name span (the display name's where the name is empty), as ks_scan_events
 * reports them; other lines' hdr are not written. The events (field 4, length-prefixed) of each run, counted on the
 * way: head_events[li] those before the line's first cut (of the whole line where none), cut_events[k] those from
 * cut k to the next (the scan needs them to place each run's events; a second walk of the same bytes took a third of
 * this one's time). Returns the number of cuts, -1 on bad data (cut_at[0]: its offset), -2 when more than cap cuts
 * were found (cap >= the long lines' bytes / seg is always enough). `release`: as ks_line_index's. */
int64_t ks_cut_lines(const uint8_t *b, int64_t nbuf, const int64_t *line_off, const int64_t *line_len, int64_t nlines,
                     int64_t seg, int64_t cap, int64_t *cut_line, int64_t *cut_at, int64_t *hdr, int64_t *head_events,
                     int64_t *cut_events, int64_t release) {
    int64_t nc = 0;
    if (seg < 1) return -2;
    for (int64_t li = 0; li < nlines; li++) {
        if (line_len[li] <= seg) continue;
        int64_t p = line_off[li], end = line_off[li] + line_len[li], next = line_off[li] + seg, released = p;
        int64_t id = 0, ts = 0, name_off = -1, name_len = 0, disp_off = -1, disp_len = 0;
        int64_t *counted = &head_events[li];
        *counted = 0;
        if (end > nbuf) { cut_at[0] = p; return -1; }
        while (p < end) {
            if (p >= next) {
                if (nc >= cap) return -2;
                cut_line[nc] = li;
                cut_at[nc] = p;
                counted = &cut_events[nc];
                *counted = 0;
                nc++;
                next = p + seg;
            }
            int64_t at = p, off = 0, len = 0;
            uint64_t tag, val = 0;
            if (rd_varint(b, &p, end, &tag)) { cut_at[0] = at; return -1; }
            int field = (int)(tag >> 3), wire = (int)(tag & 7);
            if (field == 0 || skip_value(b, &p, end, wire, &val, &off, &len)) { cut_at[0] = at; return -1; }
            if (tag == ((4 << 3) | 2)) ++*counted;  /* (as ks_count_events counts) */
            else if (field == 1 && wire == 0) id = (int64_t)val;
            else if (field == 3 && wire == 0) ts = (int64_t)val;
            else if (field == 2 && wire == 2) { name_off = off; name_len = len; }
            else if (field == 11 && wire == 2) { disp_off = off; disp_len = len; }
            if (release > 0 && p - released >= release) released = drop_pages(b, released, p);
        }
        if (release > 0) drop_pages(b, released, end);
        hdr[4 * li] = id;
        hdr[4 * li + 1] = ts;
        if (name_len > 0 || disp_off < 0) { hdr[4 * li + 2] = name_off; hdr[4 * li + 3] = name_len; }
        else { hdr[4 * li + 2] = disp_off; hdr[4 * li + 3] = disp_len; }
    }
    return nc;
}

/* floor((a + 500) / 1000) for a picosecond count read as int64 (two's complement wrap like numpy's) */
static inline int64_t ps_to_ns(int64_t a) {
    int64_t x = (int64_t)((uint64_t)a + 500u);
    int64_t q = x / 1000;
    return (x % 1000 != 0 && x < 0) ? q - 1 : q;
}

/* Where each line's events cross its times cuts[li * ncuts + 0 .. ncuts) (ns, ascending: each line may have its
 * own), so that the events of a window [cuts[k-1], cuts[k]) are one run of bytes per line (kernscope.load.xplane's
 * windows). For line li, with row r = li * (ncuts + 1):
 * - at[r + k], k < ncuts: the offset of the first event (field 4) that starts (timestamp_ns + offset_ps, rounded as
 *   ks_scan_events rounds it) at or after the line's cut k, or the line's end where none does; at[r + ncuts]: the
 *   line's end;
 * - before[r + k]: the events (every field 4, aggregated ones too) before at[r + k]; before[r + ncuts]: all of the line's;
 * - hdr[4 li ..]: the line's id, timestamp_ns and name span as ks_scan_events reports them;
 * - order[li]: 1 when the line's timed events start in time order (each at or after the one before; an aggregated
 *   event, num_occurrences instead of an offset, has no time and is not compared), else 0, and then its at and
 *   before are not to be used (its windows are not runs);
 * - span[2 li ..]: the first and the last start of the line's timed events (INT64_MAX, INT64_MIN where it has none).
 * The header is read first (a line's timestamp may follow its events). Where ts_given is not NULL, the spans are
 * runs of events of lines whose timestamps it gives (no header is read; hdr is not written). 0, or -1 on bad data
 * (before[0]: the offset). */
int64_t ks_time_cuts(const uint8_t *b, int64_t nbuf, const int64_t *line_off, const int64_t *line_len, int64_t nlines,
                     const int64_t *cuts, int64_t ncuts, const int64_t *ts_given, int64_t *at, int64_t *before,
                     int64_t *hdr, uint8_t *order, int64_t *span) {
    for (int64_t li = 0; li < nlines; li++) {
        int64_t p = line_off[li], end = line_off[li] + line_len[li], r = li * (ncuts + 1);
        int64_t id = 0, ts = 0, name_off = -1, name_len = 0, disp_off = -1, disp_len = 0;
        if (end > nbuf) { before[0] = p; return -1; }
        if (ts_given) { ts = ts_given[li]; p = end; }
        while (p < end) { /* the header */
            int64_t at0 = p, off = 0, len = 0;
            uint64_t tag, val = 0;
            if (rd_varint(b, &p, end, &tag)) { before[0] = at0; return -1; }
            int field = (int)(tag >> 3), wire = (int)(tag & 7);
            if (field == 0 || skip_value(b, &p, end, wire, &val, &off, &len)) { before[0] = at0; return -1; }
            if (field == 1 && wire == 0) id = (int64_t)val;
            else if (field == 3 && wire == 0) ts = (int64_t)val;
            else if (field == 2 && wire == 2) { name_off = off; name_len = len; }
            else if (field == 11 && wire == 2) { disp_off = off; disp_len = len; }
        }
        if (!ts_given) {
            hdr[4 * li] = id;
            hdr[4 * li + 1] = ts;
            if (name_len > 0 || disp_off < 0) { hdr[4 * li + 2] = name_off; hdr[4 * li + 3] = name_len; }
            else { hdr[4 * li + 2] = disp_off; hdr[4 * li + 3] = disp_len; }
        }
        int64_t k = 0, n = 0, last = INT64_MIN, first = INT64_MAX;
        const int64_t *cut = cuts + li * ncuts;
        uint8_t sorted = 1;
        p = line_off[li];
        while (p < end) {
            int64_t at0 = p, off = 0, len = 0;
            uint64_t tag, val = 0;
            if (rd_varint(b, &p, end, &tag) || (tag >> 3) == 0 || skip_value(b, &p, end, (int)(tag & 7), &val, &off, &len)) {
                before[0] = at0; /* (only where the header walk above did not check it) */
                return -1;
            }
            if (tag != ((4 << 3) | 2)) continue;
            int64_t q = off, qend = off + len, offset = 0;
            int timed = 1;
            while (q < qend) {
                int64_t eat = q, eoff = 0, elen = 0;
                uint64_t etag, ev_val = 0;
                if (rd_varint(b, &q, qend, &etag)) { before[0] = eat; return -1; }
                int ef = (int)(etag >> 3), ew = (int)(etag & 7);
                if (ef == 0 || skip_value(b, &q, qend, ew, &ev_val, &eoff, &elen)) { before[0] = eat; return -1; }
                if (ew == 0 && ef == 2) offset = (int64_t)ev_val;
                else if (ew == 0 && ef == 5) timed = 0;
            }
            if (timed) {
                int64_t start = (int64_t)((uint64_t)ts + (uint64_t)ps_to_ns(offset));
                if (start < last) sorted = 0;
                if (first == INT64_MAX) first = start;
                last = start;
                while (k < ncuts && start >= cut[k]) { at[r + k] = at0; before[r + k] = n; k++; }
            }
            n++;
        }
        for (; k <= ncuts; k++) { at[r + k] = end; before[r + k] = n; }
        order[li] = sorted;
        span[2 * li] = first;
        span[2 * li + 1] = last;
    }
    return 0;
}


/* A sparse index of each line's events in time: every `stride`-th timed event of a line (its first included) as a
 * row (ix_line, ix_off: the offset of its field, ix_start: its start in ns as ks_time_cuts times it, ix_count: the
 * line's events before it, aggregated ones too; ix_reach: the latest end, in ns rounded as ks_scan_events rounds it,
 * of the line's timed events before it, INT64_MIN where none), with the header, time order and span of each line as
 * ks_time_cuts
 * gives them (hdr, order, span) and its events (total). The first event at or after a time then lies between two
 * rows of its line (kernscope.load.xscan.TimeIndex), and ks_time_cuts finds it walking those rows' bytes only.
 * One walk of each line's fields, its header's among its events (the time order is that of the events' offsets from
 * the line's timestamp). `release` > 0: `b` is a read-only mapping of the file, and the pages walked are given back
 * every `release` bytes (the walk's memory is then that much of the file, not all of it); 0: never.
 * Returns the rows, -1 on bad data (total[0]: the offset), -2 when more than cap rows were found. */
int64_t ks_line_index(const uint8_t *b, int64_t nbuf, const int64_t *line_off, const int64_t *line_len, int64_t nlines,
                      int64_t stride, int64_t cap, int64_t release, int64_t *ix_line, int64_t *ix_off,
                      int64_t *ix_start, int64_t *ix_count, int64_t *ix_reach, int64_t *hdr, uint8_t *order,
                      int64_t *span, int64_t *total) {
    int64_t nix = 0;
    if (stride < 1) return -2;
    for (int64_t li = 0; li < nlines; li++) {
        int64_t p = line_off[li], end = line_off[li] + line_len[li], released = line_off[li];
        int64_t id = 0, ts = 0, name_off = -1, name_len = 0, disp_off = -1, disp_len = 0;
        int64_t n = 0, timed_n = 0, last = INT64_MIN, first = INT64_MAX, first_row = nix, reach = INT64_MIN;
        uint8_t sorted = 1;
        if (end > nbuf) { total[0] = p; return -1; }
        while (p < end) {
            int64_t at0 = p, off = 0, len = 0;
            uint64_t tag, val = 0;
            if (rd_varint(b, &p, end, &tag)) { total[0] = at0; return -1; }
            int field = (int)(tag >> 3), wire = (int)(tag & 7);
            if (field == 0 || skip_value(b, &p, end, wire, &val, &off, &len)) { total[0] = at0; return -1; }
            if (field == 1 && wire == 0) id = (int64_t)val;
            else if (field == 3 && wire == 0) ts = (int64_t)val;
            else if (field == 2 && wire == 2) { name_off = off; name_len = len; }
            else if (field == 11 && wire == 2) { disp_off = off; disp_len = len; }
            if (tag != ((4 << 3) | 2)) continue;
            int64_t q = off, qend = off + len, offset = 0, dur = 0;
            int timed = 1;
            while (q < qend) {
                int64_t eat = q, eoff = 0, elen = 0;
                uint64_t etag, ev_val = 0;
                if (rd_varint(b, &q, qend, &etag)) { total[0] = eat; return -1; }
                int ef = (int)(etag >> 3), ew = (int)(etag & 7);
                if (ef == 0 || skip_value(b, &q, qend, ew, &ev_val, &eoff, &elen)) { total[0] = eat; return -1; }
                if (ew == 0 && ef == 2) offset = (int64_t)ev_val;
                else if (ew == 0 && ef == 3) dur = (int64_t)ev_val;
                else if (ew == 0 && ef == 5) timed = 0;
            }
            if (timed) {
                int64_t rel = ps_to_ns(offset); /* (the line's timestamp added once it is read) */
                /* its end, rounded as ks_scan_events rounds it */
                int64_t rel_end = ps_to_ns((int64_t)((uint64_t)offset + (uint64_t)dur));
                if (rel < last) sorted = 0;
                if (first == INT64_MAX) first = rel;
                last = rel;
                if (timed_n % stride == 0) {
                    if (nix >= cap) return -2;
                    ix_line[nix] = li; ix_off[nix] = at0; ix_start[nix] = rel; ix_count[nix] = n;
                    ix_reach[nix] = reach;
                    nix++;
                }
                if (rel_end > reach) reach = rel_end;
                timed_n++;
            }
            n++;
            if (release > 0 && p - released >= release) released = drop_pages(b, released, p);
        }
        if (release > 0) drop_pages(b, released, end);
        for (int64_t r = first_row; r < nix; r++) {
            ix_start[r] = (int64_t)((uint64_t)ts + (uint64_t)ix_start[r]);
            if (ix_reach[r] != INT64_MIN) ix_reach[r] = (int64_t)((uint64_t)ts + (uint64_t)ix_reach[r]);
        }
        if (first != INT64_MAX) {
            first = (int64_t)((uint64_t)ts + (uint64_t)first);
            last = (int64_t)((uint64_t)ts + (uint64_t)last);
        }
        hdr[4 * li] = id;
        hdr[4 * li + 1] = ts;
        if (name_len > 0 || disp_off < 0) { hdr[4 * li + 2] = name_off; hdr[4 * li + 3] = name_len; }
        else { hdr[4 * li + 2] = disp_off; hdr[4 * li + 3] = disp_len; }
        order[li] = sorted;
        span[2 * li] = first;
        span[2 * li + 1] = last;
        total[li] = n;
    }
    return nix;
}

/* ---- the events of XLine messages, with their stats as typed columns (kernscope.load.xscan) -------------- */

enum { F_INT = 0, F_FLOAT = 1, F_STR = 2 };
/* a lut entry of a known stat that this scan leaves out (its field has no column) */
enum { F_UNREAD = -2 };
enum { S_NONE = 0, S_VALUE = 1, S_TEXT = 2, S_NULL = 3 };

/* row of (plane, id) in a flat per-plane table of `width` ids (kernscope.load.xstats.Lookup: its last slot is
 * "none"), or -1 */
static inline int64_t flat_row(const int64_t *tab, int64_t width, int64_t size, int64_t plane, uint64_t id) {
    if (tab == NULL || id >= (uint64_t)width) return -1;
    int64_t key = plane * width + (int64_t)id;
    return key < size - 1 ? tab[key] : -1;
}

/* A stat laid out as XLA writes it (metadata_id, then one value field, nothing else): its metadata id, value
 * kind and value (a string's offset) in one pass of few branches; 0 for any other layout (the caller then
 * reads it field by field, which gives the same for this one). */
static inline int stat_fast(const uint8_t *b, int64_t r, int64_t rend, int64_t *smd, uint8_t *kind, uint64_t *sval,
                            int64_t *soff) {
    uint64_t md, x;
    if (r >= rend || b[r] != 0x08) return 0;
    r++;
    if (rd_varint(b, &r, rend, &md)) return 0;
    if (r == rend) { *smd = (int64_t)md; *kind = K_NONE; return 1; }
    uint8_t t = b[r++];
    switch (t) {
    case 0x11: /* double */
        if (r + 8 != rend) return 0;
        memcpy(sval, b + r, 8);
        *kind = K_DOUBLE;
        break;
    case 0x18: case 0x20: case 0x38: /* uint64, int64, ref */
        if (rd_varint(b, &r, rend, &x) || r != rend) return 0;
        *sval = x;
        *kind = t == 0x18 ? K_U64 : t == 0x20 ? K_I64 : K_REF;
        break;
    case 0x2a: case 0x32: /* str, bytes */
        if (rd_varint(b, &r, rend, &x) || x != (uint64_t)(rend - r)) return 0;
        *soff = r;
        *kind = t == 0x2a ? K_STR : K_BYTES;
        break;
    default:
        return 0;
    }
    *smd = (int64_t)md;
    return 1;
}

/* Walk lines line_off[i], line_len[i] (in planes line_plane[i]), every event and stat in them:
 * - per line: id, timestamp_ns, name span (the display name where the name is empty);
 * - per event: its line (absolute: line_base + i, or line_map[i] where line_map is given: the line a run of a cut
 *   line belongs to), metadata id, name row (md_tab: (plane, metadata id) -> event metadata row, -1 none, -2 an
 *   id past md_tab's width), start and duration in ns (timestamp_ns + offset_ps rounded, the end rounded the same
 *   way; where run_fixed[i] is set, run_ts[i] is the timestamp: a run of a cut line has its line's header, not its
 *   own), flags (bit 0: num_occurrences). Line and name are written as int64, the caller's types;
 * - stats typed into columns: `lut` maps (plane, stat metadata id) to a field (-1: not read, counted; -2: a known
 *   field this scan does not read, not counted and given no column); field f
 *   of kind fkind[f] writes event ev's cell of fval[f] (int64, double, or int32 for strings: the stat metadata
 *   row a ref names, through ref_tab) and fstate[f] (S_VALUE, S_NULL for a value that cannot be one, S_TEXT
 *   for text to be read by the caller: the stat is appended to the odd list: event (absolute: ev_base + ...),
 *   field, value kind, raw value or string offset). The last stat of a field wins.
 * Outputs hold cap_ev events and cap_odd odd stats: when a line would overflow them the call returns 1 with
 * the counts of the lines before it (the caller grows them and goes on from that line). -1: bad data.
 * counts: [lines done, events, stats kept, error offset (-1: none), stats not read, odd stats]
 * `release`: as ks_line_index's (a line that did not fit is read again from the page cache). */
int64_t ks_scan_events(const uint8_t *b, int64_t nbuf, const int64_t *line_off, const int64_t *line_len,
                       const int64_t *line_plane, int64_t nlines, int64_t line_base, int64_t ev_base,
                       const int8_t *lut, int64_t lut_width, int64_t lut_size,
                       const int64_t *ref_tab, int64_t ref_width, int64_t ref_size,
                       const int64_t *md_tab, int64_t md_width, int64_t md_size,
                       const int8_t *fkind, int64_t nfields, int64_t cap_ev, int64_t cap_odd,
                       const int64_t *line_map, const int64_t *run_ts, const uint8_t *run_fixed,
                       int64_t *ln_id, int64_t *ln_ts, int64_t *ln_name_off, int64_t *ln_name_len,
                       int64_t *ev_line, int64_t *ev_md, int64_t *ev_name, int64_t *ev_ts, int64_t *ev_dur, uint8_t *ev_flags,
                       void **fval, uint8_t **fstate,
                       int64_t *odd_ev, int8_t *odd_field, uint8_t *odd_kind, uint64_t *odd_val,
                       int64_t *counts, int64_t release) {
    int64_t ne = 0, ns = 0, skipped = 0, no = 0;
    counts[3] = -1;
    for (int64_t li = 0; li < nlines; li++) {
        int64_t ne0 = ne, ns0 = ns, sk0 = skipped, no0 = no;
        int64_t p = line_off[li], end = line_off[li] + line_len[li], plane = line_plane[li], released = p;
        int64_t out_line = line_map ? line_map[li] : line_base + li;
        int64_t id = 0, ts = 0, name_off = -1, name_len = 0, disp_off = -1, disp_len = 0;
        if (end > nbuf) { counts[3] = line_off[li]; return -1; }
        while (p < end) {
            int64_t at = p;
            uint64_t tag, val = 0;
            int64_t off = 0, len = 0;
            if (rd_varint(b, &p, end, &tag)) { counts[3] = at; return -1; }
            int field = (int)(tag >> 3), wire = (int)(tag & 7);
            if (field == 0 || skip_value(b, &p, end, wire, &val, &off, &len)) { counts[3] = at; return -1; }
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
                    if (rd_varint(b, &q, qend, &etag)) { counts[3] = eat; return -1; }
                    int ef = (int)(etag >> 3), ew = (int)(etag & 7);
                    if (ef == 0 || skip_value(b, &q, qend, ew, &ev_val, &eoff, &elen)) { counts[3] = eat; return -1; }
                    if (ew == 0 && ef == 1) md = (int64_t)ev_val;
                    else if (ew == 0 && ef == 2) offset = (int64_t)ev_val;
                    else if (ew == 0 && ef == 3) dur = (int64_t)ev_val;
                    else if (ew == 0 && ef == 5) flags |= 1;
                    else if (ew == 2 && ef == 4) { /* a stat */
                        int64_t r = eoff, rend = eoff + elen;
                        int64_t smd = 0, soff = 0;
                        uint64_t sval = 0;
                        uint8_t kind = K_NONE;
                        if (stat_fast(b, r, rend, &smd, &kind, &sval, &soff)) r = rend; /* the usual layout */
                        while (r < rend) {
                            int64_t sat = r;
                            uint64_t stag, v = 0;
                            int64_t o = 0, l = 0;
                            if (rd_varint(b, &r, rend, &stag)) { counts[3] = sat; return -1; }
                            int sf = (int)(stag >> 3), sw = (int)(stag & 7);
                            if (sf == 0 || skip_value(b, &r, rend, sw, &v, &o, &l)) { counts[3] = sat; return -1; }
                            if (sf == 1 && sw == 0) smd = (int64_t)v;
                            else if (sf == 2 && sw == 1) { kind = K_DOUBLE; sval = v; }
                            else if (sf == 3 && sw == 0) { kind = K_U64; sval = v; }
                            else if (sf == 4 && sw == 0) { kind = K_I64; sval = v; }
                            else if (sf == 5 && sw == 2) { kind = K_STR; soff = o; }
                            else if (sf == 6 && sw == 2) { kind = K_BYTES; soff = o; }
                            else if (sf == 7 && sw == 0) { kind = K_REF; sval = v; }
                        }
                        int64_t key = plane * lut_width + smd;
                        int8_t fi = (smd >= 0 && smd < lut_width && key < lut_size) ? lut[key] : -1;
                        if (fi < 0 || fi >= nfields) { skipped += (fi != F_UNREAD); continue; }
                        ns++;
                        uint8_t st = S_NULL;
                        int fk = fkind[fi];
                        if (kind == K_NONE) {
                            st = S_NONE; /* no value: as if the event had no such stat */
                        } else if (fk == F_STR) {
                            if (kind == K_REF && sval >= (uint64_t)ref_width) {
                                st = S_TEXT; /* an id past the flat table: the caller looks it up */
                            } else if (kind == K_REF) {
                                int64_t row = flat_row(ref_tab, ref_width, ref_size, plane, sval);
                                if (row >= 0) { ((int32_t *)fval[fi])[ev] = (int32_t)row; st = S_VALUE; }
                            } else if (kind != K_BYTES) st = S_TEXT; /* an inline string, or a number: its text */
                        } else if (kind == K_STR || kind == K_REF) {
                            st = S_TEXT; /* a number written as text */
                        } else if (fk == F_INT) {
                            if (kind == K_U64 || kind == K_I64) { ((int64_t *)fval[fi])[ev] = (int64_t)sval; st = S_VALUE; }
                            else if (kind == K_DOUBLE) {
                                double d;
                                memcpy(&d, &sval, 8);
                                if (d == d && d < 9223372036854775808.0 && d > -9223372036854775808.0) {
                                    ((int64_t *)fval[fi])[ev] = (int64_t)d; st = S_VALUE;
                                }
                            }
                        } else { /* F_FLOAT */
                            if (kind == K_DOUBLE) { memcpy(&((double *)fval[fi])[ev], &sval, 8); st = S_VALUE; }
                            else if (kind == K_U64 || kind == K_I64) { ((double *)fval[fi])[ev] = (double)(int64_t)sval; st = S_VALUE; }
                        }
                        if (st == S_TEXT) {
                            if (no >= cap_odd) goto full;
                            odd_ev[no] = ev_base + ev; odd_field[no] = fi; odd_kind[no] = kind;
                            odd_val[no] = (kind == K_STR) ? (uint64_t)soff : sval;
                            no++;
                        }
                        fstate[fi][ev] = st;
                    }
                }
                ev_line[ev] = out_line; ev_md[ev] = md; ev_flags[ev] = flags;
                ev_name[ev] = (uint64_t)md >= (uint64_t)md_width ? -2 /* past the flat table: the caller looks it up */
                                                                  : flat_row(md_tab, md_width, md_size, plane, (uint64_t)md);
                ev_ts[ev] = offset; ev_dur[ev] = dur; /* picoseconds until the line's timestamp is known */
            } else if (field == 1 && wire == 0) id = (int64_t)val;
            else if (field == 3 && wire == 0) ts = (int64_t)val;
            else if (field == 2 && wire == 2) { name_off = off; name_len = len; }
            else if (field == 11 && wire == 2) { disp_off = off; disp_len = len; }
            if (release > 0 && p - released >= release) released = drop_pages(b, released, p);
        }
        if (release > 0) drop_pages(b, released, end);
        uint64_t base = (run_fixed && run_fixed[li]) ? (uint64_t)run_ts[li] : (uint64_t)ts;
        for (int64_t e = ne0; e < ne; e++) { /* times: ns, rounded from ps, the end rounded the same way */
            uint64_t start = base + (uint64_t)ps_to_ns(ev_ts[e]);
            uint64_t stop = base + (uint64_t)ps_to_ns((int64_t)((uint64_t)ev_ts[e] + (uint64_t)ev_dur[e]));
            ev_ts[e] = (int64_t)start;
            ev_dur[e] = (int64_t)(stop - start);
        }
        ln_id[li] = id; ln_ts[li] = ts;
        if (name_len > 0 || disp_off < 0) { ln_name_off[li] = name_off; ln_name_len[li] = name_len; }
        else { ln_name_off[li] = disp_off; ln_name_len[li] = disp_len; }
        counts[0] = li + 1;
        continue;
    full: /* this line does not fit: report the lines before it */
        counts[0] = li;
        counts[1] = ne0;
        counts[2] = ns0;
        counts[4] = sk0;
        counts[5] = no0;
        return 1;
    }
    counts[1] = ne;
    counts[2] = ns;
    counts[4] = skipped;
    counts[5] = no;
    return 0;
}

/* A real (empty) extension module, so that importing it by mistake does not fail; the scanner itself is
 * called through ctypes (kernscope.load.native). */
#include <Python.h>

static struct PyModuleDef xspace_module = {PyModuleDef_HEAD_INIT, "_xspace",
                                           "kernscope's XSpace scanner (called through ctypes).", -1, NULL};

PyMODINIT_FUNC PyInit__xspace(void) { return PyModule_Create(&xspace_module); }
