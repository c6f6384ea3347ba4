"""``kernscope cache``: where the parse cache is, how big, and clearing it."""

from __future__ import annotations

import click


def _notice(msg: str) -> None:
    click.echo(msg, err=True)


@click.group("cache")
def cache_group() -> None:
    """The parse cache: where it is, how big, and clearing it."""


@cache_group.command("info")
def cache_info() -> None:
    """Location, entries, size and size cap of the cache."""
    from .load import cache as c

    root = c.cache_root(_notice)
    if root is None:
        click.echo("cache: off (no writable cache directory)")
        return
    found = c.entries(root)
    total = sum(e[1] for e in found)
    click.echo(f"cache: {root}")
    click.echo(f"entries: {len(found)}  size: {total / 1e6:,.1f} MB  cap: {c.max_bytes() / 1e6:,.0f} MB "
               "(KERNSCOPE_CACHE_MAX_BYTES; least recently used entries are evicted first)")
    from .replay import MAX_BYTES, MAX_RECORDS, records

    n, size = records(str(root / "replay"))
    click.echo(f"outputs kept for replay: {n}  size: {size / 1e6:,.1f} MB  cap: {MAX_RECORDS} outputs, "
               f"{MAX_BYTES / 1e6:,.0f} MB (a repeated command line prints its kept output at once)")


@cache_group.command("clear")
def cache_clear() -> None:
    """Remove every cache entry and every output kept for replay."""
    from .load import cache as c

    freed = c.clear(c.cache_root(_notice))
    click.echo(f"cache cleared: {freed / 1e6:,.1f} MB freed")
