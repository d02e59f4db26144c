"""Tables described column by column: a header and how to get its value from an item."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

Columns = dict[str, Callable[[Any], object]]  # header -> the column's value of an item


def column_rows(items: Iterable, columns: Columns) -> tuple[list[str], list[list]]:
    """(the headers, a row for each item)."""
    return list(columns), [[value(x) for value in columns.values()] for x in items]
