"""Training pairs as HDF5: piece ids already shuffled on disk, read back as contiguous slices.

Layout (``LAYOUT_VERSION`` 1, docs/design.md §4)::

    /src/ids       int32  [total source pieces]   ids of all source sentences back to back
    /src/offsets   int64  [n_pairs + 1]           sentence i is ids[offsets[i]:offsets[i + 1]]
    /tgt/ids, /tgt/offsets                        the same for the target side
    attrs: layout_version, n_pairs, languages, spm_sha256, vocab_size, seed, source, created,
           max_pieces (0 = no limit), chunk_pairs, bucket_pairs, compression

Training walks the file front to back in slices, so the pairs must already be in random order.
:func:`write_pairs` shuffles with memory bounded by ``bucket_pairs`` whatever the corpus size:

1. count the lines; split the ``n`` output positions into ``B = ceil(n / bucket_pairs)``
   consecutive buckets of fixed size;
2. stream the pairs in chunks, encode each chunk with
   :class:`psp.model.piece_encoder.PieceEncoder`, deal its pairs at random to the buckets (a
   multivariate hypergeometric draw against each bucket's remaining room) and append them to one
   temporary file per bucket;
3. load one bucket at a time, permute it, and write it to its slot in the datasets.

A uniformly random split into fixed-size buckets followed by a uniform permutation inside each
bucket is a uniform permutation of the whole corpus, and no step holds more than one bucket.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

import h5py
import numpy as np
from tqdm import tqdm

from psp.data.corpora import iter_pair_lines
from psp.io import InputError, atomic_path, iter_raw_lines, scratch_dir
from psp.model.piece_encoder import PieceEncoder

__all__ = ["LAYOUT_VERSION", "PairBatch", "PairReader", "write_pairs"]

log = logging.getLogger(__name__)

LAYOUT_VERSION = 1
SIDES = ("src", "tgt")
_IDS_CHUNK = 1 << 18  # HDF5 chunk of the ids datasets: 1 MiB of int32
_OFFSETS_CHUNK = 1 << 16  # HDF5 chunk of the offsets datasets: 512 KiB of int64
_READ_CACHE_BYTES = 16 << 20


Ragged = tuple[np.ndarray, np.ndarray]  # (ids, offsets) of a batch of sentences


class PairBatch(NamedTuple):
    """A slice of pairs in ``nn.EmbeddingBag`` layout; both offsets arrays start at 0."""

    src_ids: np.ndarray
    src_offsets: np.ndarray
    tgt_ids: np.ndarray
    tgt_offsets: np.ndarray

    @property
    def n_pairs(self) -> int:
        return len(self.src_offsets) - 1


def _take(ids: np.ndarray, offsets: np.ndarray, index: np.ndarray) -> Ragged:
    """Sentences ``index`` of a ragged ``(ids, offsets)`` array, in that order (one fancy index)."""
    lengths = np.diff(offsets)[index]
    new_offsets = np.zeros(len(index) + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_offsets[1:])
    gather = np.repeat(offsets[:-1][index] - new_offsets[:-1], lengths)
    gather += np.arange(new_offsets[-1])
    return ids[gather], new_offsets


def _bucket_sizes(n_pairs: int, bucket_pairs: int) -> np.ndarray:
    n_buckets = max(1, math.ceil(n_pairs / bucket_pairs))
    sizes = np.full(n_buckets, n_pairs // n_buckets, dtype=np.int64)
    sizes[: n_pairs % n_buckets] += 1
    return sizes


def _append_block(path: Path, src: Ragged, tgt: Ragged):
    """Append pairs to a bucket file: header ``[m, n_src_ids, n_tgt_ids]``, lengths, then ids."""
    (src_ids, src_off), (tgt_ids, tgt_off) = src, tgt
    header = np.array([len(src_off) - 1, len(src_ids), len(tgt_ids)], dtype=np.int64)
    with open(path, "ab") as handle:
        for array in (
            header,
            np.diff(src_off).astype(np.int32),
            np.diff(tgt_off).astype(np.int32),
            src_ids,
            tgt_ids,
        ):
            handle.write(array.tobytes())


def _read_bucket(path: Path) -> tuple[Ragged, Ragged]:
    """Load every block of a bucket file back into one ragged array per side."""
    parts: dict[str, list[np.ndarray]] = {"sl": [], "tl": [], "si": [], "ti": []}
    with open(path, "rb") as handle:
        while True:
            header = np.fromfile(handle, dtype=np.int64, count=3)
            if len(header) == 0:
                break
            m, n_src, n_tgt = (int(x) for x in header)
            for key, count in (("sl", m), ("tl", m), ("si", n_src), ("ti", n_tgt)):
                parts[key].append(np.fromfile(handle, dtype=np.int32, count=count))

    def ragged(lengths_key: str, ids_key: str) -> Ragged:
        lengths = np.concatenate(parts[lengths_key])
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return np.concatenate(parts[ids_key]), offsets

    return ragged("sl", "si"), ragged("tl", "ti")


def _iter_encoded_chunks(
    pairs_tsv_gz: Path, encoder: PieceEncoder, chunk_pairs: int, num_threads: int
) -> Iterator[tuple[Ragged, Ragged]]:
    """Yield ``((src_ids, src_offsets), (tgt_ids, tgt_offsets))`` for consecutive chunks of pairs."""
    src: list[str] = []
    tgt: list[str] = []
    for _, s, t in iter_pair_lines(pairs_tsv_gz):
        src.append(s)
        tgt.append(t)
        if len(src) == chunk_pairs:
            yield encoder.encode(src, num_threads), encoder.encode(tgt, num_threads)
            src, tgt = [], []
    if src:
        yield encoder.encode(src, num_threads), encoder.encode(tgt, num_threads)


def _scatter(
    chunks: Iterator[tuple[Ragged, Ragged]],
    *,
    sizes: np.ndarray,
    buckets: list[Path],
    rng: np.random.Generator,
    source: Path,
) -> tuple[int, int]:
    """Pass 1: deal each chunk's pairs at random into buckets of fixed ``sizes``.

    Each chunk sends ``counts[b]`` pairs to bucket ``b``, drawn multivariate-hypergeometrically
    against the room left in every bucket, so the buckets end exactly full and the split of the
    corpus into buckets is uniformly random. Returns the total number of ids per side.
    """
    room = sizes.copy()
    totals = [0, 0]
    with tqdm(total=int(sizes.sum()), desc="encode", unit="pair", disable=None) as bar:
        for sides in chunks:
            m = len(sides[0][1]) - 1
            if m > room.sum():
                raise InputError(f"{source}: file grew while being read")
            counts = rng.multivariate_hypergeometric(room, m)
            room -= counts
            order = rng.permutation(m)  # its first counts[0] pairs go to bucket 0, and so on
            src, tgt = (_take(ids, offsets, order) for ids, offsets in sides)
            bounds = np.concatenate([[0], np.cumsum(counts)])
            for b in np.flatnonzero(counts):
                lo, hi = bounds[b], bounds[b + 1]
                _append_block(
                    buckets[b],
                    (src[0][src[1][lo] : src[1][hi]], src[1][lo : hi + 1]),
                    (tgt[0][tgt[1][lo] : tgt[1][hi]], tgt[1][lo : hi + 1]),
                )
            totals[0] += len(src[0])
            totals[1] += len(tgt[0])
            bar.update(m)
    if room.any():
        raise InputError(f"{source}: file shrank while being read")
    return totals[0], totals[1]


def _create_datasets(
    h5: h5py.File, *, n_pairs: int, totals: tuple[int, int], compression: str | None
) -> list[tuple[h5py.Dataset, h5py.Dataset]]:
    """Each side's chunked ``ids`` and ``offsets`` datasets, sized for the whole file."""
    datasets = []
    for side, total in zip(SIDES, totals, strict=True):
        group = h5.create_group(side)
        ids = group.create_dataset(
            "ids",
            shape=(total,),
            dtype=np.int32,
            chunks=(min(total, _IDS_CHUNK),),
            compression=compression,
        )
        offsets = group.create_dataset(
            "offsets",
            shape=(n_pairs + 1,),
            dtype=np.int64,
            chunks=(min(n_pairs + 1, _OFFSETS_CHUNK),),
            compression=compression,
        )
        offsets[0] = 0
        datasets.append((ids, offsets))
    return datasets


def _gather(
    buckets: list[Path],
    *,
    datasets: list[tuple[h5py.Dataset, h5py.Dataset]],
    rng: np.random.Generator,
) -> None:
    """Pass 2: permute each bucket in memory and write it in place into ``datasets``."""
    pair_pos, id_pos = 0, [0, 0]
    for path in tqdm(buckets, desc="shuffle", unit="bucket", disable=None):
        sides = _read_bucket(path)
        path.unlink()
        perm = rng.permutation(len(sides[0][1]) - 1)
        for k, ((ids, offsets), (bucket_ids, bucket_offsets)) in enumerate(
            zip(datasets, sides, strict=True)
        ):
            bucket_ids, bucket_offsets = _take(bucket_ids, bucket_offsets, perm)
            ids[id_pos[k] : id_pos[k] + len(bucket_ids)] = bucket_ids
            offsets[pair_pos + 1 : pair_pos + len(perm) + 1] = bucket_offsets[1:] + id_pos[k]
            id_pos[k] += len(bucket_ids)
        pair_pos += len(perm)


def write_pairs(
    pairs_tsv_gz: str | os.PathLike,
    spm_model: str | os.PathLike,
    out_h5: str | os.PathLike,
    *,
    seed: int = 0,
    chunk_pairs: int = 16384,
    max_pieces: int | None = None,
    languages: tuple[str, str] = ("es", "en"),
    num_threads: int = 1,
    bucket_pairs: int = 250_000,
    compression: str | None = None,
) -> dict:
    """Encode a ``src<TAB>tgt`` file and write it, shuffled, as a training HDF5 file.

    Args:
        pairs_tsv_gz: clean pairs (plain or gzipped); a line without exactly one tab is an
            :class:`~psp.io.InputError` naming ``file:line``.
        spm_model: the SentencePiece model the trained model will use (its sha256 is recorded).
        out_h5: output path, written atomically.
        seed: shuffling seed; the same input, seed, ``chunk_pairs`` and ``bucket_pairs`` give
            the same file.
        chunk_pairs: pairs read, encoded and dealt to buckets at a time. Their Python strings
            are the main cost of pass 1: larger chunks raise peak memory for no speed gain.
        max_pieces: truncate every sentence to this many pieces (``None``: keep all).
        languages: the codes of the two sides, stored as an attribute.
        num_threads: SentencePiece threads.
        bucket_pairs: pairs held in memory while shuffling; pass 2 needs about 25 bytes
            per piece id, e.g. ~0.4 GB for the default on news-length pairs (2 x 30 pieces).
        compression: ``None`` or ``"lzf"`` for the datasets.

    Returns:
        Stats: ``n_pairs``, ``src_pieces``, ``tgt_pieces``, ``buckets``, ``seconds``.
    """
    pairs_tsv_gz, out_h5 = Path(pairs_tsv_gz), Path(out_h5)
    if chunk_pairs < 1 or bucket_pairs < 1:
        raise ValueError("chunk_pairs and bucket_pairs must be >= 1")
    started = time.perf_counter()
    encoder = PieceEncoder(spm_model, max_pieces=max_pieces)
    n_pairs = _count_pairs(pairs_tsv_gz)
    sizes = _bucket_sizes(n_pairs, bucket_pairs)
    attrs = _root_attrs(
        encoder,
        n_pairs=n_pairs,
        languages=languages,
        seed=seed,
        source=pairs_tsv_gz,
        chunk_pairs=chunk_pairs,
        bucket_pairs=bucket_pairs,
        compression=compression,
    )
    chunks = _iter_encoded_chunks(pairs_tsv_gz, encoder, chunk_pairs, num_threads)
    totals = _shuffle_into(out_h5, chunks, sizes=sizes, attrs=attrs)
    stats = {"n_pairs": n_pairs, "src_pieces": totals[0], "tgt_pieces": totals[1]}
    stats |= {"buckets": len(sizes), "seconds": round(time.perf_counter() - started, 3)}
    log.info("wrote %s: %s", out_h5, stats)
    return stats


def _count_pairs(pairs_tsv_gz: Path) -> int:
    """The number of lines, read once before encoding so that the buckets can be sized."""
    n_pairs = sum(1 for _ in iter_raw_lines(pairs_tsv_gz))
    if n_pairs == 0:
        raise InputError(f"{pairs_tsv_gz}: no pairs")
    return n_pairs


def _root_attrs(
    encoder: PieceEncoder,
    *,
    n_pairs: int,
    languages: tuple[str, str],
    seed: int,
    source: Path,
    chunk_pairs: int,
    bucket_pairs: int,
    compression: str | None,
) -> dict:
    """The file's attributes in layout order: what :class:`PairReader` checks, then what made it.

    ``created`` is a placeholder here; :func:`_shuffle_into` stamps it when the file is complete.
    """
    return {
        "layout_version": LAYOUT_VERSION,
        "n_pairs": n_pairs,
        "languages": list(languages),
        "spm_sha256": encoder.sha256,
        "vocab_size": encoder.vocab_size,
        "seed": seed,
        "source": str(source),
        "created": None,
        "max_pieces": encoder.max_pieces or 0,
        "chunk_pairs": chunk_pairs,
        "bucket_pairs": bucket_pairs,
        "compression": compression or "none",
    }


def _shuffle_into(
    out_h5: Path, chunks: Iterator[tuple[Ragged, Ragged]], *, sizes: np.ndarray, attrs: dict
) -> tuple[int, int]:
    """Both passes of the shuffle (module docstring), written atomically to ``out_h5``.

    The passes follow the settings ``attrs`` records (its ``seed``, ``source`` and
    ``compression``), so the file says exactly how it was made. The bucket files live in a
    scratch folder beside ``out_h5``, on its disk, and go with it on failure. Returns the
    number of piece ids per side.
    """
    source = Path(attrs["source"])
    log.info("%s: %d pairs → %d shuffle buckets", source, attrs["n_pairs"], len(sizes))
    compression = None if attrs["compression"] == "none" else attrs["compression"]
    rng = np.random.default_rng(attrs["seed"])
    with (
        atomic_path(out_h5) as tmp_h5,
        scratch_dir(out_h5) as tmp_dir,
    ):
        buckets = [tmp_dir / f"bucket{b:06d}.bin" for b in range(len(sizes))]
        totals = _scatter(chunks, sizes=sizes, buckets=buckets, rng=rng, source=source)
        with h5py.File(tmp_h5, "w") as h5:
            datasets = _create_datasets(
                h5, n_pairs=attrs["n_pairs"], totals=totals, compression=compression
            )
            _gather(buckets, datasets=datasets, rng=rng)
            h5.attrs.update(attrs | {"created": datetime.now(UTC).isoformat(timespec="seconds")})
    return totals


class PairReader:
    """Read a training HDF5 file in contiguous slices, never loading it whole.

    Example:
        >>> with PairReader("results/hdf5/es-en.h5") as reader:  # doctest: +SKIP
        ...     for start, batch in reader.iter_chunks(12800):
        ...         train_on(batch.src_ids, batch.src_offsets, batch.tgt_ids, batch.tgt_offsets)
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        try:
            self._file = h5py.File(self.path, "r", rdcc_nbytes=_READ_CACHE_BYTES)
        except OSError as err:
            raise InputError(f"{self.path}: not a readable HDF5 file ({err})") from err
        try:
            self.attrs = self._validate()
        except BaseException:
            self._file.close()
            raise
        self._n = int(self.attrs["n_pairs"])
        self._ids = {side: self._file[f"{side}/ids"] for side in SIDES}
        self._offsets = {side: self._file[f"{side}/offsets"] for side in SIDES}

    def _validate(self) -> dict:
        """Check the layout and return the attributes as plain Python values."""

        def fail(what: str):
            raise InputError(
                f"{self.path}: not a psp training file of layout version {LAYOUT_VERSION}: {what}; "
                "rebuild it with psp.data.pairs_store.write_pairs"
            )

        raw = self._file.attrs
        if "layout_version" not in raw:
            fail("no 'layout_version' attribute (older or foreign layout)")
        if int(raw["layout_version"]) != LAYOUT_VERSION:
            fail(f"layout_version is {raw['layout_version']}")
        for name in ("n_pairs", "languages", "spm_sha256", "vocab_size"):
            if name not in raw:
                fail(f"attribute '{name}' is missing")
        attrs = {key: _plain(value) for key, value in raw.items()}
        attrs["max_pieces"] = attrs.get("max_pieces") or None
        n_pairs = int(attrs["n_pairs"])
        for side in SIDES:
            for name, dtype in (("ids", np.int32), ("offsets", np.int64)):
                dataset = self._file.get(f"{side}/{name}")
                if not isinstance(dataset, h5py.Dataset):
                    fail(f"dataset '{side}/{name}' is missing")
                if dataset.ndim != 1 or dataset.dtype != dtype:
                    fail(
                        f"'{side}/{name}' is {dataset.dtype}{list(dataset.shape)}, not 1-d {np.dtype(dtype)}"
                    )
            offsets, ids = self._file[f"{side}/offsets"], self._file[f"{side}/ids"]
            if len(offsets) != n_pairs + 1:
                fail(f"'{side}/offsets' has {len(offsets)} entries for {n_pairs} pairs")
            if offsets[0] != 0 or offsets[-1] != len(ids):
                fail(
                    f"'{side}/offsets' does not span '{side}/ids' ({offsets[0]}..{offsets[-1]} vs {len(ids)})"
                )
        return attrs

    def __len__(self) -> int:
        return self._n

    def read(self, start: int, stop: int) -> PairBatch:
        """Pairs ``start..stop-1``; offsets rebased to 0 (length ``stop - start + 1``)."""
        if not 0 <= start <= stop <= self._n:
            raise IndexError(f"{self.path}: slice {start}:{stop} outside 0:{self._n}")
        arrays = []
        for side in SIDES:
            offsets = self._offsets[side][start : stop + 1]
            arrays.append(self._ids[side][offsets[0] : offsets[-1]])
            arrays.append(offsets - offsets[0])
        return PairBatch(*arrays)

    def iter_chunks(self, chunk_pairs: int, start: int = 0) -> Iterator[tuple[int, PairBatch]]:
        """Yield ``(first_pair_index, PairBatch)`` for consecutive slices from ``start`` to the end."""
        if chunk_pairs < 1:
            raise ValueError("chunk_pairs must be >= 1")
        for first in range(start, self._n, chunk_pairs):
            yield first, self.read(first, min(first + chunk_pairs, self._n))

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> PairReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _plain(value):
    """HDF5 attribute → plain Python (numpy scalars to int/float/str, string arrays to lists)."""
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, bytes):
        return value.decode("utf-8")
    return value
