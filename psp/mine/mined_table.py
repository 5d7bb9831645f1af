"""The mined pairs as a table: its columns, and the two formats it is written in.

``score``, ``src`` and ``tgt`` always; with provenance, the 1-based line (row, for a Parquet
input) of each side in its input file, ``src_line`` and ``tgt_line``, and the document id of a
side whose input gave one, ``src_id`` and ``tgt_id``. TSV (``.tsv`` or ``.tsv.gz``) writes the
columns in that order, tab-separated, without a header, the score with 4 decimals (the
workflow's format); Parquet writes them typed (``score`` float32, lines int64, the rest
strings), in row groups of :data:`PARQUET_ROW_GROUP` pairs. Both are written atomically.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from psp.io import atomic_open, atomic_path

Format = Literal["tsv", "parquet"]
FORMATS: tuple[Format, ...] = ("tsv", "parquet")
TEXT_COLUMNS = ("score", "src", "tgt")
PARQUET_ROW_GROUP = 65536


@dataclass
class MinedTable:
    """Pairs in output order: scores, the two sides' texts, and any provenance columns."""

    scores: np.ndarray
    src: list[str]
    tgt: list[str]
    provenance: dict[str, list] = field(default_factory=dict)

    @property
    def columns(self) -> list[str]:
        return [*TEXT_COLUMNS, *self.provenance]

    def __len__(self) -> int:
        return len(self.scores)


def provenance_columns(with_ids: tuple[bool, bool]) -> list[str]:
    """The provenance columns, ids for the sides (source, target) whose input has them."""
    ids = [f"{side}_id" for side, has in zip(("src", "tgt"), with_ids, strict=True) if has]
    return ["src_line", "tgt_line", *ids]


def write_table(table: MinedTable, path: str | os.PathLike, fmt: Format) -> None:
    """Write ``table`` to ``path`` as ``fmt``."""
    if fmt == "parquet":
        _write_parquet(table, path)
    else:
        _write_tsv(table, path)


def _write_tsv(table: MinedTable, path) -> None:
    extra = list(table.provenance.values())
    with atomic_open(path, "wt") as out:
        for row, (score, src, tgt) in enumerate(
            zip(table.scores.tolist(), table.src, table.tgt, strict=True)
        ):
            cells = "".join(f"\t{'' if c[row] is None else c[row]}" for c in extra)
            out.write(f"{score:.4f}\t{src}\t{tgt}{cells}\n")


def _write_parquet(table: MinedTable, path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    types = {"score": pa.float32(), "src_line": pa.int64(), "tgt_line": pa.int64()}
    schema = pa.schema([(name, types.get(name, pa.string())) for name in table.columns])
    columns = {"score": table.scores, "src": table.src, "tgt": table.tgt, **table.provenance}
    with atomic_path(path) as tmp, pq.ParquetWriter(tmp, schema) as writer:
        for start in range(0, max(len(table), 1), PARQUET_ROW_GROUP):
            stop = start + PARQUET_ROW_GROUP
            writer.write_table(
                pa.table({name: columns[name][start:stop] for name in table.columns}, schema=schema)
            )
