"""What a load may skip (a :class:`Projection`) and the cache key of a load's options, without numpy or
polars: the CLI computes the key of a stored output before deciding whether to import anything.
How a projection is applied: :mod:`.project` (cut events out of the JSON text) and :mod:`.lines`."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

#: an XSpace (JAX) profile's columns of the HLO cost model (``perf``, ``analyze --roofline``): the instructions' FLOPs,
#: bytes, type, class and parameters, read from the profile's HLO (its metadata), not from its events
COST_STATS = ("hlo_flops", "hlo_bytes", "hlo_dtype", "hlo_op_class", "hlo_params")


@dataclass(frozen=True)
class Projection:
    """Which events to skip unparsed: ``ph: X`` events of a category in ``drop_cats`` whose name does not
    match the regular expression ``keep`` (``re.search``), and events of a phase in ``drop_phases``; and
    which ``args`` columns to read (``args``: event-table column names from :mod:`.argspec`; None = all).
    Unread args columns are null in the event table."""

    keep: str = ""
    drop_cats: tuple[str, ...] = ("cpu_op", "python_function")
    #: event phases dropped whatever their name (e.g. flow arrows "s", "f", "t")
    drop_phases: tuple[str, ...] = ()
    #: the args columns read (the others stay null); None: all of :data:`.argspec.ARG_FIELDS`
    args: tuple[str, ...] | None = None
    #: of an XSpace (JAX) profile's own columns (:data:`.xplane.XLA_COLUMNS`: HLO costs, kernel launch details,
    #: memory stats ...), those read (the others stay null); None: all
    stats: tuple[str, ...] | None = None
    #: the formats it applies to (``kineto``, ``xplane``; a load of another reads everything); None: all
    formats: tuple[str, ...] | None = None

    @property
    def drops_events(self) -> bool:
        return bool(self.drop_cats or self.drop_phases)

    def key(self) -> dict[str, Any]:
        """Part of the parse-cache key: a projected table is cached apart from the whole one."""
        key: dict[str, Any] = {"keep": self.keep, "drop_cats": list(self.drop_cats),
                               "drop_phases": list(self.drop_phases)}
        if self.args is not None:
            key["args"] = sorted(self.args)
        if self.stats is not None:
            key["stats"] = sorted(self.stats)
        if self.formats is not None:
            key["formats"] = sorted(self.formats)
        return key

    def without_stats(self) -> Projection:
        """This projection as a format that reads no XSpace stats applies it (a Kineto trace's: ``stats`` None). Its
        load stores its entry under this one's key, so that loads differing only in the stats they would read
        (``analyze``'s and ``perf``'s of a PyTorch trace) find the same entry."""
        return self if self.stats is None else replace(self, stats=None)

    def without_costs(self) -> Projection:
        """This projection without the HLO cost model's columns (:data:`COST_STATS`), where it reads them: the load whose
        cache entry, with the costs read from the profile's HLO (:func:`kernscope.load.xplane.with_costs`), stands for
        this one's (``perf`` after ``analyze`` of a JAX profile). Itself where it reads none of them (or all stats)."""
        if self.stats is None or not set(self.stats) & set(COST_STATS):
            return self
        return replace(self, stats=tuple(s for s in self.stats if s not in COST_STATS))

    def compiled(self) -> NameTest:
        """The ``keep`` test on names (one per document: it remembers the names it has judged)."""
        return NameTest(self.keep)


class NameTest:
    """``re.search(keep, name)`` on names given as UTF-8 bytes, remembered per name: every chunk of a
    trace repeats the same few hundred names, and ``keep`` (step-marker presets) costs µs per search."""

    def __init__(self, pattern: str) -> None:
        self.rx = re.compile(pattern)
        self.memo: dict[bytes, bool] = {}

    def __call__(self, name: bytes) -> bool:
        hit = self.memo.get(name)
        if hit is None:
            hit = self.memo[name] = self.rx.search(name.decode("utf-8", "replace")) is not None
        return hit


def load_key(salvage: bool, step_marker: str | None, projection: Projection | None) -> dict[str, Any]:
    """The part of the parse-cache key that a load's options make (see ``pipeline.LoadOptions``)."""
    key: dict[str, Any] = {"salvage": salvage, "step_marker": step_marker}
    if projection is not None and not salvage:
        key["projection"] = projection.key()
    return key


def load_keys(salvage: bool, step_marker: str | None, projection: Projection | None) -> list[dict[str, Any]]:
    """The parse-cache keys whose entries may serve a load with these options, in the order a load tries them: its
    own; for a projection with ``stats``, the same one without them (the entry of a format that reads no stats, as a
    Kineto trace's: :meth:`Projection.without_stats`); the whole load's; for one reading HLO costs, the same one without
    them (:func:`costs_key`). A caller checks that an entry of the second or third stands for its load
    (``pipeline.load``: of an XSpace profile, the stats it leaves null), and adds the costs to one of the fourth."""
    keys = [load_key(salvage, step_marker, projection)]
    if projection is not None:
        keys += [load_key(salvage, step_marker, projection.without_stats()), load_key(salvage, step_marker, None)]
    costs = costs_key(salvage, step_marker, projection)
    if costs is not None:
        keys.append(costs)
    return [k for i, k in enumerate(keys) if k not in keys[:i]]


def costs_key(salvage: bool, step_marker: str | None, projection: Projection | None) -> dict[str, Any] | None:
    """The key of the load that reads what ``projection`` reads but the HLO costs (:meth:`Projection.without_costs`),
    whose entry serves this load once the costs are added to it; None where ``projection`` reads no costs."""
    if projection is None or salvage or projection.without_costs() is projection:
        return None
    return load_key(salvage, step_marker, projection.without_costs())
