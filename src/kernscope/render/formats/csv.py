"""CSV: the result's first table (its layout's first name), or with ``options.all_tables`` one file per sheet of
the workbook (:func:`kernscope.render.formats.xlsx.sheets`).
Numbers rounded to their precision; text cells safe from formula injection."""

from __future__ import annotations

from ...result import Result
from ..tables import csv_text
from ..views import OMIT, Options, Section, Walk


def default(s: Section) -> str:
    return csv_text(s.shown)


class Csv:
    """The ``csv`` format: bytes of one table, or ``{name.csv: bytes}`` for a directory."""

    def render(self, result: Result, options: Options) -> bytes | dict[str, bytes]:
        if options.all_tables:  # a directory: the workbook's sheets, one CSV each
            from .xlsx import sheets

            return {f"{name}.csv": csv_text(sh.df).encode() for name, sh in sheets(result, options).items()}
        for s, view in Walk("csv", result, options):
            if s.name not in s.tables and view is None:
                continue  # a fact: CSV holds tables
            text = view(s) if view is not None else default(s)
            if text is OMIT:
                continue
            return str(text).encode()
        return b""


#: this module's renderer (the format's name is the module's)
RENDERER = Csv
