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
int64_t ks_search_right(const int64_t *hay, int64_t n, const int64_t *q, int64_t m, int64_t *out) {
    int64_t pos = 0; /* the previous answer: hay[0 .. pos) <= its query < hay[pos ..] */
    for (int64_t j = 0; j < m; j++) {
        int64_t x = q[j], lo, hi; /* the answer lies in [lo, hi] */
        if (pos < n && hay[pos] <= x) { /* after pos: a few steps, then gallop forwards */
            int64_t stop = n - pos < 8 ? n : pos + 8;
            int64_t i = pos + 1;
            while (i < stop && hay[i] <= x) i++;
            if (i < stop || i == n) { out[j] = pos = i; continue; }
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
            out[j] = pos; /* hay[pos - 1] <= x < hay[pos] */
            continue;
        }
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            if (hay[mid] <= x) lo = mid + 1;
            else hi = mid;
        }
        out[j] = pos = lo;
    }
    return 0;
}
