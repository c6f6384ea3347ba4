/* kernscope's interval sweeps (a part of the library of _xspace.c and _kineto.c, loaded with ctypes).
 *
 * ks_innermost: for each query time t of a group (a thread), the innermost interval of that group enclosing it,
 * as kernscope.link.ops.fallback_ops defines it: among the intervals with start <= t <= end, the latest start;
 * of those starting together, the one that ends first; then the later row. In one pass over both sorted inputs:
 *   intervals sorted by (group, start, -end, row), i.e. each group's better candidates later;
 *   queries sorted by (group, t).
 * A stack holds the intervals started so far that may still answer a query: later ones on top, their ends
 * strictly decreasing upwards. An interval that starts is pushed after popping those ending no later than it
 * (whenever one of them encloses t, so does the new one, and it is later). A query pops those ending before t
 * (no later query, its t no smaller, can use them); the top then encloses t and is the latest that does.
 * O(intervals + queries); no allocation (the caller gives the stack, one slot per interval); no global state.
 *
 * ks_nest: the host call tree (kernscope.link.tree): events sorted by (group, start, -end, row), each event's parent
 * the innermost earlier event of its group still open when it starts. A stack of open events: one that ended at or
 * before the start, or that the new event outlasts by more than `bleed` (Kineto rounds each event's times on its
 * own, so a child may end a little after its parent), is popped for good; the top then is the parent. O(events).
 *
 * ks_chain_depths, ks_chain_nodes: the critical path's chains (kernscope.analyze.critical_path: _depths, _ancestors):
 * each start's predecessors followed up to the root, a link at a time. O(nodes on the chains).
 */
#include <stdint.h>

/* out[q] = the position (in the sorted intervals) of query q's innermost enclosing interval, or -1. Returns 0. */
int64_t ks_innermost(const int64_t *group, const int64_t *start, const int64_t *end, int64_t n, const int64_t *qgroup,
                     const int64_t *qt, int64_t nq, int64_t *out, int64_t *stack) {
    int64_t i = 0, top = 0;
    for (int64_t q = 0; q < nq; q++) {
        int64_t g = qgroup[q], t = qt[q];
        if (q == 0 || g != qgroup[q - 1]) {
            top = 0;
            while (i < n && group[i] < g) i++;
        }
        while (i < n && group[i] == g && start[i] <= t) {
            while (top && end[stack[top - 1]] <= end[i]) top--;
            stack[top++] = i++;
        }
        while (top && end[stack[top - 1]] < t) top--;
        out[q] = top ? stack[top - 1] : -1;
    }
    return 0;
}

/* e > te + bleed, without overflowing int64 */
static int outlasts(int64_t e, int64_t te, int64_t bleed) {
    if (bleed >= 0) return te > INT64_MAX - bleed ? 0 : e > te + bleed;
    return te < INT64_MIN - bleed ? 1 : e > te + bleed;
}

/* parent[i] = the position (in the sorted events) of event i's parent, or -1; depth[i] its depth (roots 0). Returns 0. */
int64_t ks_nest(const int64_t *group, const int64_t *start, const int64_t *end, int64_t n, int64_t bleed,
                int64_t *parent, int32_t *depth, int64_t *stack) {
    int64_t top = 0;
    for (int64_t i = 0; i < n; i++) {
        if (i == 0 || group[i] != group[i - 1]) top = 0;
        while (top) {
            int64_t te = end[stack[top - 1]];
            if (te <= start[i] || outlasts(end[i], te, bleed)) top--;
            else break;
        }
        if (top) {
            parent[i] = stack[top - 1];
            depth[i] = depth[stack[top - 1]] + 1;
        } else {
            parent[i] = -1;
            depth[i] = 0;
        }
        stack[top++] = i;
    }
    return 0;
}

/* ks_search_right: out[j] = the number of hay values <= q[j] (hay sorted non-decreasing): numpy's
 * searchsorted(hay, q, side="right"). Each search starts from the previous query's answer and gallops (steps of
 * 1, 2, 4 ... away from it, then a binary search between the last two probes), so queries in order, or nearly, cost
 * O(1) each and read the hay once from end to end; queries in no order cost O(log n) each, as a binary search.
 * Returns 0. */
/* The number of hay values <= x, searched from *pos (the previous answer), which it becomes (see ks_search_right). */
static inline int64_t gallop_right(const int64_t *hay, int64_t n, int64_t x, int64_t *pos_io) {
    int64_t pos = *pos_io, lo, hi; /* the answer lies in [lo, hi] */
    if (pos < n && hay[pos] <= x) { /* after pos: a few steps, then gallop forwards */
        int64_t stop = n - pos < 8 ? n : pos + 8;
        int64_t i = pos + 1;
        while (i < stop && hay[i] <= x) i++;
        if (i < stop || i == n) return *pos_io = i;
        pos = i - 1; /* hay[pos] <= x */
        int64_t bound = 1;
        lo = pos + 1;
        hi = n;
        while (bound <= n - pos - 1) {
            int64_t at = pos + bound;
            if (hay[at] <= x) { lo = at + 1; bound <<= 1; }
            else { hi = at; break; }
        }
    } else if (pos > 0 && hay[pos - 1] > x) { /* before pos: gallop backwards */
        int64_t bound = 1;
        lo = 0;
        hi = pos - 1;
        while (bound <= pos - 1) {
            int64_t at = pos - 1 - bound;
            if (hay[at] > x) { hi = at; bound <<= 1; }
            else { lo = at + 1; break; }
        }
    } else {
        return pos; /* hay[pos - 1] <= x < hay[pos] */
    }
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (hay[mid] <= x) lo = mid + 1;
        else hi = mid;
    }
    return *pos_io = lo;
}

int64_t ks_search_right(const int64_t *hay, int64_t n, const int64_t *q, int64_t m, int64_t *out) {
    int64_t pos = 0; /* the previous answer: hay[0 .. pos) <= its query < hay[pos ..] */
    for (int64_t j = 0; j < m; j++) out[j] = gallop_right(hay, n, q[j], &pos);
    return 0;
}

/* ks_window_of: for each query q[j] (q_ok[j]: it has one), the value[w] of the window w that starts last at or before
 * it (start sorted non-decreasing, searched as ks_search_right does), where that window has an end (end_ok) after
 * q[j] and a value (value_ok): out[j] = value[w], ok[j] = 1; else out[j] = 0, ok[j] = 0. One pass, no array of the
 * windows found. Returns the rows with a window. */
int64_t ks_window_of(const int64_t *start, const int64_t *end, const uint8_t *end_ok, const int64_t *value,
                     const uint8_t *value_ok, int64_t n, const int64_t *q, const uint8_t *q_ok, int64_t m,
                     int64_t *out, uint8_t *ok) {
    int64_t pos = 0, found = 0;
    for (int64_t j = 0; j < m; j++) {
        int64_t w = -1;
        if (q_ok[j]) w = gallop_right(start, n, q[j], &pos) - 1;
        if (w >= 0 && end_ok[w] && q[j] < end[w] && value_ok[w]) { out[j] = value[w]; ok[j] = 1; found++; }
        else { out[j] = 0; ok[j] = 0; }
    }
    return found;
}

/* Floor division by a positive span (a segment's group; starts are shifted to be >= 0, this keeps numpy's // for
 * any). */
static int64_t group_of(int64_t x, int64_t span) {
    int64_t q = x / span;
    return (x % span != 0 && x < 0) ? q - 1 : q;
}

/* ks_union_lengths: the length of the union of each group's intervals, for up to 8 subsets of the rows in one pass
 * (kernscope.intervals.union_many). Row r's start s[r] is shifted so that its group g lies in [g * span,
 * (g + 1) * span); its end is shifted alike: s[r] + end[r] - start[r] (end and start unshifted). order (NULL: the
 * identity) lists the rows by s; masks[j] (NULL: every row) says which rows subset j holds. An interval whose end
 * is before its start is empty. A segment is a maximal run of intervals each starting at or before the running end
 * of those before it; out[j * n_groups + g] (zeroed by the caller) gets the summed lengths of subset j's segments
 * in group g, and first[g] (NULL: not asked; filled with -1 by the caller) the group's first row by s. Returns 0, or
 * -1 where k is out of range. */
int64_t ks_union_lengths(const int64_t *s, const int64_t *start, const int64_t *end, int64_t n, const int64_t *order,
                         int64_t span, const uint8_t *const *masks, int64_t k, int64_t n_groups, int64_t *out,
                         int64_t *first) {
    int64_t rs[8], re[8];
    int open[8];
    int64_t lo = 1, hi = 0; /* the current group's stretch [lo, hi) of the axis (none yet) */
    if (k < 0 || k > 8) return -1;
    for (int64_t j = 0; j < k; j++) open[j] = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t r = order ? order[i] : i;
        int64_t x = s[r], y = (int64_t)((uint64_t)x + (uint64_t)end[r] - (uint64_t)start[r]);
        if (y < x) y = x;
        if (first && (x < lo || x >= hi)) { /* the first row of a group: one division a group, not a row */
            int64_t g = group_of(x, span);
            lo = g * span;
            hi = lo + span;
            if (first[g] < 0) first[g] = r;
        }
        for (int64_t j = 0; j < k; j++) {
            if (masks[j] && !masks[j][r]) continue;
            if (!open[j] || x > re[j]) {
                if (open[j]) out[j * n_groups + group_of(rs[j], span)] += re[j] - rs[j];
                rs[j] = x;
                re[j] = y;
                open[j] = 1;
            } else if (y > re[j]) {
                re[j] = y;
            }
        }
    }
    for (int64_t j = 0; j < k; j++)
        if (open[j]) out[j * n_groups + group_of(rs[j], span)] += re[j] - rs[j];
    return 0;
}

/* ks_idle_gaps: the busy union of each group's GPU records and its gaps, classified by the record that ends each
 * gap (kernscope.analyze.idle.idle_breakdown). Row r's times are shifted by off = code[r] * span - t0 (group g on
 * [g * span, (g + 1) * span)): start[r] (shifted already), end[r] + off (at least the start), launch[r] + off where
 * has_launch[r]. order (NULL: the identity) lists the rows by shifted start. Per group (arrays zeroed by the caller):
 * busy (the segments' lengths), and for a gap between two of its segments, of length gap and ending at the first
 * row r of the later segment: late (r launched after the gap began) adds gap to host and 1 to late_n; else a
 * launched r with gap < quick_ns adds gap to kern; else gap goes to other. The sums are in doubles, in the order of
 * the segments (numpy's bincount of the same weights adds them so). first[g] gets the group's first row in order
 * and max_end[g] the largest unshifted end of its rows (first filled with -1 by the caller, max_end with INT64_MIN).
 * Returns 0. */
int64_t ks_idle_gaps(const int64_t *start, const int64_t *end, const int64_t *launch, const uint8_t *has_launch,
                     const int64_t *code, const int64_t *order, int64_t n, int64_t span, int64_t t0, double quick_ns,
                     double *busy, double *host, double *kern, double *other, int64_t *late_n, int64_t *first,
                     int64_t *max_end) {
    int64_t rs = 0, re = 0, g = 0;
    int open = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t r = order ? order[i] : i;
        int64_t off = (int64_t)((uint64_t)code[r] * (uint64_t)span - (uint64_t)t0);
        int64_t x = start[r], y = (int64_t)((uint64_t)end[r] + (uint64_t)off);
        if (y < x) y = x;
        if (first[code[r]] < 0) first[code[r]] = r;
        if (end[r] > max_end[code[r]]) max_end[code[r]] = end[r];
        if (open && x <= re) {
            if (y > re) re = y;
            continue;
        }
        if (open) {
            busy[g] += (double)(re - rs);
            int64_t ng = group_of(x, span);
            if (ng == g) { /* a gap of this group, ended by row r */
                int64_t gap = x - re;
                int launched = has_launch[r] != 0;
                int late = launched && (int64_t)((uint64_t)launch[r] + (uint64_t)off) > re;
                if (late) {
                    host[g] += (double)gap;
                    late_n[g] += 1;
                } else if (launched && (double)gap < quick_ns) {
                    kern[g] += (double)gap;
                } else {
                    other[g] += (double)gap;
                }
            }
        }
        rs = x;
        re = y;
        g = group_of(x, span);
        open = 1;
    }
    if (open) busy[g] += (double)(re - rs);
    return 0;
}

/* ks_clip: each GPU record's end clipped to the start of the next record of its (device, stream)
 * (kernscope.analyze.timeline.clip_overruns). order (NULL: the identity) lists the rows sorted by (device, stream,
 * start), records that start together in row order, nulls as that function sorts them; dev_null, stream_null,
 * ts_null and end_null (each NULL where the column has no null) mark null cells, whose values (dev, stream, ts, end)
 * the caller filled with 0. A row is clipped where the next row in that order has its device and stream (null
 * equal to null) and a start, it has an end, and that end is after the next start; new_end gets the next start
 * there, its end elsewhere, and clipped 1 or 0. Returns the number clipped. */
int64_t ks_clip(const int64_t *dev, const int64_t *stream, const int64_t *ts, const int64_t *end, const uint8_t *dev_null,
                const uint8_t *stream_null, const uint8_t *ts_null, const uint8_t *end_null, const int64_t *order,
                int64_t n, int64_t *new_end, uint8_t *clipped) {
    int64_t count = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t a = order ? order[i] : i;
        int64_t e = end[a];
        int hit = 0;
        if (i + 1 < n && !(end_null && end_null[a])) {
            int64_t b = order ? order[i + 1] : i + 1;
            int same = dev[a] == dev[b] && stream[a] == stream[b]
                       && (!dev_null || dev_null[a] == dev_null[b])
                       && (!stream_null || stream_null[a] == stream_null[b]);
            if (same && !(ts_null && ts_null[b]) && e > ts[b]) {
                e = ts[b];
                hit = 1;
            }
        }
        new_end[a] = e;
        clipped[a] = (uint8_t)hit;
        count += hit;
    }
    return count;
}

/* A row's integer in a column of width 4 (int32) or 8 (int64) bytes; -1 where missing (NULL: none) marks the row. */
static inline int64_t code_at(const void *col, int64_t width, const uint8_t *missing, int64_t r) {
    if (missing && missing[r]) return -1;
    return width == 4 ? (int64_t)((const int32_t *)col)[r] : ((const int64_t *)col)[r];
}

/* ks_code_range: out[0], out[1] = the lowest and highest of the n > 0 rows' integers (code_at). Returns 0, or -1
 * where the width is neither 4 nor 8. */
int64_t ks_code_range(const void *col, int64_t width, const uint8_t *missing, int64_t n, int64_t *out) {
    if (width != 4 && width != 8) return -1;
    int64_t lo = code_at(col, width, missing, 0), hi = lo;
    for (int64_t r = 1; r < n; r++) {
        int64_t v = code_at(col, width, missing, r);
        if (v < lo) lo = v;
        if (v > hi) hi = v;
    }
    out[0] = lo;
    out[1] = hi;
    return 0;
}

/* ks_distinct_keys: the first pass of kernscope.load.xplane.distinct_rows. Each row of mask (NULL: every row) is keyed
 * by its k (at most 8) columns' integers (code_at), ((v0 - lo0) * size1 + (v1 - lo1)) * size2 + ..., below space
 * (under 2**31, the product of the sizes, each integer within [lo, lo + size)); number[r] gets the key, or -1 outside
 * mask. slot (space ints, zeroed by the caller) then numbers the keys used, in key order: slot[key] = 0, 1, 2 ... where
 * a row has it, -1 where none has. Returns how many keys are used, or -1 where k or a width is out of range. */
int64_t ks_distinct_keys(const void *const *cols, const int64_t *width, const uint8_t *const *missing,
                         const int64_t *lo, const int64_t *size, int64_t k, const uint8_t *mask, int64_t n,
                         int64_t space, int32_t *slot, int32_t *number) {
    if (k < 1 || k > 8) return -1;
    for (int64_t j = 0; j < k; j++)
        if (width[j] != 4 && width[j] != 8) return -1;
    for (int64_t r = 0; r < n; r++) {
        if (mask && !mask[r]) {
            number[r] = -1;
            continue;
        }
        int64_t key = 0;
        for (int64_t j = 0; j < k; j++) key = key * size[j] + (code_at(cols[j], width[j], missing[j], r) - lo[j]);
        number[r] = (int32_t)key;
        slot[key] = 1;
    }
    int64_t found = 0;
    for (int64_t s = 0; s < space; s++) slot[s] = slot[s] ? (int32_t)found++ : -1;
    return found;
}

/* ks_distinct_number: the second pass: each keyed row's number[r] (a key, or -1) becomes slot[key], its number, and
 * first[number] the last row with it (first: one per key used). Returns 0. */
int64_t ks_distinct_number(const int32_t *slot, int64_t n, int32_t *number, int64_t *first) {
    for (int64_t r = 0; r < n; r++) {
        if (number[r] < 0) continue;
        int32_t num = slot[number[r]];
        number[r] = num;
        first[num] = r;
    }
    return 0;
}

/* ks_mark_used: seen[v] = 1 for the value v of each of the n rows not missing (missing NULL: none); the values are
 * int32 rows of a table of `size` rows. Returns 0, or -1 where a value is outside 0 .. size-1 (seen then partly
 * written: the caller marks them otherwise). */
int64_t ks_mark_used(const int32_t *value, const uint8_t *missing, int64_t n, int64_t size, uint8_t *seen) {
    for (int64_t i = 0; i < n; i++) {
        if (missing && missing[i]) continue;
        int32_t v = value[i];
        if (v < 0 || (int64_t)v >= size) return -1;
        seen[v] = 1;
    }
    return 0;
}

/* The position of the first of the nk sorted keys equal to v, or -1: a table of first positions (tab[v - tab_lo], -1
 * none, for v in tab_lo .. tab_lo + ntab - 1) where given, else a binary search. */
static inline int64_t first_equal(const int64_t *keys, int64_t nk, const int64_t *tab, int64_t tab_lo, int64_t ntab,
                                  int64_t v) {
    if (tab) {
        uint64_t at = (uint64_t)v - (uint64_t)tab_lo;
        return at < (uint64_t)ntab ? tab[at] : -1;
    }
    int64_t lo = 0, hi = nk;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (keys[mid] < v) lo = mid + 1;
        else hi = mid;
    }
    return (lo < nk && keys[lo] == v) ? lo : -1;
}

/* ks_node_windows: the critical path's cut of each node's link to its predecessor (kernscope.analyze.critical_path,
 * whose numpy form this is, in two passes and no array per condition).
 * Pass 1, each node i: its step, the window (w_start sorted, w_end = the step's end T, w_step its number; a value's
 * _ok says it is not null) that starts last at or before time[i], where time[i] is valid and within [start, T]; or
 * end_of[i] where end_of_ok[i] (a step's end point): written to step[i], step_ok[i].
 * Pass 2, each node i with predecessor pred[i] (has[i]): the link is cut (pred[i] = -1) where there is none, the
 * predecessor has no step or another step than the node's, or it ended (time) before the start of the node's step
 * (the start of the first window of that number: keys sorted with key_start beside, looked up through tab where
 * given). pt[i] = time[pred] (time[0] where none), pt_ok[i]: the predecessor's time is valid and the link not cut.
 * Returns 0. */
int64_t ks_node_windows(const int64_t *time, const uint8_t *time_ok, const int64_t *end_of, const uint8_t *end_of_ok,
                        int64_t n, const int64_t *w_start, const uint8_t *w_start_ok, const int64_t *w_end,
                        const uint8_t *w_end_ok, const int64_t *w_step, int64_t nw, const int64_t *keys,
                        const int64_t *key_start, int64_t nk, const int64_t *tab, int64_t tab_lo, int64_t ntab,
                        int64_t *pred, const uint8_t *has, int64_t *step, uint8_t *step_ok, int64_t *pt, uint8_t *pt_ok) {
    int64_t pos = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t s = 0;
        uint8_t ok = 0;
        if (end_of_ok[i]) { s = end_of[i]; ok = 1; }
        else if (nw > 0) {
            int64_t j = gallop_right(w_start, nw, time[i], &pos) - 1;
            int64_t jj = j > 0 ? j : 0;
            if (j >= 0 && time_ok[i] && w_start_ok[jj] && w_end_ok[jj] && time[i] <= w_end[jj]) { s = w_step[jj]; ok = 1; }
        }
        step[i] = s;
        step_ok[i] = ok;
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t a = has[i] ? pred[i] : 0;
        int64_t t = time[a];
        uint8_t tok = has[i] && time_ok[a];
        int cut = !has[i] || !step_ok[a] || (step_ok[i] && step[a] != step[i]);
        if (!cut && tok && step_ok[i]) {
            int64_t k = first_equal(keys, nk, tab, tab_lo, ntab, step[i]);
            if (k >= 0 && t < key_start[k]) cut = 1;
        }
        if (cut) { pred[i] = -1; tok = 0; }
        pt[i] = t;
        pt_ok[i] = tok;
    }
    return 0;
}

/* ks_group_last_max: per group g = key[i] - lo (rows with key_ok[i]; 0 <= g < size, the caller's range): the largest
 * value of its rows (best[g]) and the last row holding it (arg[g]); seen[g] = 1 for groups with a row (the others'
 * best and arg are not written). Returns the groups seen, or -1 where a key is outside the range. */
int64_t ks_group_last_max(const int64_t *key, const uint8_t *key_ok, int64_t lo, int64_t size, const int64_t *value,
                          int64_t n, int64_t *best, int64_t *arg, uint8_t *seen) {
    int64_t groups = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!key_ok[i]) continue;
        uint64_t g = (uint64_t)key[i] - (uint64_t)lo;
        if (g >= (uint64_t)size) return -1;
        if (!seen[g]) { seen[g] = 1; best[g] = value[i]; arg[g] = i; groups++; }
        else if (value[i] >= best[g]) { best[g] = value[i]; arg[g] = i; }
    }
    return groups;
}

/* ks_chain_depths: per start i, the nodes on its chain (starts[i], pred[starts[i]], ... up to root, root excluded;
 * pred[root] == root; pred has npred entries): depth[i]. Returns 0; -1 where a chain is longer than max_links (a
 * cycle's is endless; depth is then not all written); -2 where a link leads outside pred (nothing is read there). */
int64_t ks_chain_depths(const int64_t *pred, int64_t npred, const int64_t *starts, int64_t n, int64_t root,
                        int64_t max_links, int64_t *depth) {
    for (int64_t i = 0; i < n; i++) {
        int64_t x = starts[i], d = 0;
        while (x != root) {
            if (x < 0 || x >= npred) return -2;
            if (d >= max_links) return -1;
            d++;
            x = pred[x];
        }
        depth[i] = d;
    }
    return 0;
}

/* ks_chain_nodes: each start's chain written in order, the chains one after the other (depth[i] nodes each, as
 * ks_chain_depths counted them) into node. Returns the nodes written; -2 where a link leads outside pred. */
int64_t ks_chain_nodes(const int64_t *pred, int64_t npred, const int64_t *starts, const int64_t *depth, int64_t n,
                       int64_t *node) {
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t x = starts[i];
        for (int64_t j = 0; j < depth[i]; j++) {
            if (x < 0 || x >= npred) return -2;
            node[k++] = x;
            x = pred[x];
        }
    }
    return k;
}
