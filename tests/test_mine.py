"""Mining: blockwise kNN vs brute force, shard reduce, margins, retrieval, atomicity, bad input."""

from __future__ import annotations

import functools
import gzip
import json
import math
import zlib
from dataclasses import dataclass, field

import numpy as np
import pytest

from psp.io import InputError
from psp.mine import (
    IndexConfig,
    MineConfig,
    check_model_languages,
    embed_shard,
    fill_index,
    knn_both_directions,
    knn_means,
    knn_shard_pair,
    margin_score,
    merge_knn,
    mine_files,
    mine_texts,
    reduce_parts,
    score_pairs,
    train_index,
    write_sharded_text,
)
from psp.mine.index import load_lists
from psp.mine.shards import open_embeddings


@dataclass
class _Config:
    dim: int
    languages: list[str] = field(default_factory=lambda: ["es", "en"])


class TrigramEmbedder:
    """A real, tiny embedder: hashed bag of character trigrams (language-agnostic surface match)."""

    def __init__(self, dim: int = 128, languages=("es", "en")):
        self.config = _Config(dim, list(languages))
        self.calls = 0

    def embed(self, sentences, batch_size: int = 32) -> np.ndarray:
        self.calls += 1
        out = np.zeros((len(sentences), self.config.dim), dtype=np.float32)
        for row, sentence in enumerate(sentences):
            text = f"  {sentence.lower()}  "
            for a in range(len(text) - 2):
                out[row, zlib.crc32(text[a : a + 3].encode()) % self.config.dim] += 1.0
        return out


def unit(rng, n, d):
    x = rng.standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def brute(x, y, k):
    sim = x @ y.T
    ids = np.argsort(-sim, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(sim, ids, 1), ids


def save(path, arr):
    np.save(path, arr)
    return path


def search_pair(src, tgt, plans, out_npz, *, shards=(0, 0), k=2, **options):
    """``knn_shard_pair`` for one pair of shards of two planned sides."""
    return knn_shard_pair(
        src_npy=src,
        tgt_npy=tgt,
        src_plan=plans[0],
        tgt_plan=plans[1],
        src_shard=shards[0],
        tgt_shard=shards[1],
        k=k,
        out_npz=out_npz,
        **options,
    )


def sharded(tmp_path, name, x, n_shards):
    """``x`` cut into ``n_shards`` .npy shards, with the shard plan of a matching text."""
    plan = write_sharded_text(
        (f"{name} {i}" for i in range(len(x))),
        len(x),
        n_shards=n_shards,
        out_text=tmp_path / f"{name}.txt.gz",
        out_plan=tmp_path / f"{name}.plan.json",
    )
    paths = [
        save(tmp_path / f"{name}{s}.npy", x[entry.start : entry.stop])
        for s, entry in enumerate(plan.shards)
    ]
    return plan, paths


@pytest.mark.parametrize("block_size", [7, 64])
def test_blockwise_knn_matches_brute_force(block_size):
    rng = np.random.default_rng(0)
    x, y = unit(rng, 53, 16), unit(rng, 41, 16)
    (fD, fI), (bD, bI) = knn_both_directions(x, y, k=5, block_size=block_size)
    eD, eI = brute(x, y, 5)
    np.testing.assert_allclose(fD, eD, atol=1e-5)
    np.testing.assert_array_equal(fI, eI)
    eD, eI = brute(y, x, 5)
    np.testing.assert_allclose(bD, eD, atol=1e-5)
    np.testing.assert_array_equal(bI, eI)


def test_knn_pads_when_fewer_rows_than_k():
    rng = np.random.default_rng(1)
    (fD, fI), (bD, bI) = knn_both_directions(unit(rng, 5, 8), unit(rng, 2, 8), k=4, block_size=3)
    assert (fI[:, 2:] == -1).all() and np.isneginf(fD[:, 2:]).all()
    assert (bI >= 0).all()
    means = knn_means((fD, fI), 4)
    np.testing.assert_allclose(means, fD[:, :2].mean(axis=1), atol=1e-6)


def test_shard_pairs_merge_equals_unsharded(tmp_path):
    rng = np.random.default_rng(2)
    x, y = unit(rng, 37, 12), unit(rng, 29, 12)
    xp, xs = sharded(tmp_path, "x", x, 3)
    yp, ys = sharded(tmp_path, "y", y, 2)
    parts = [
        search_pair(
            xs[s], ys[t], (xp, yp), tmp_path / f"p{s}{t}.npz", shards=(s, t), k=4, block_size=5
        )
        for s in range(3)
        for t in range(2)
    ]
    (fD, fI), (bD, bI) = reduce_parts(parts, 4, xp, yp)
    (eD, eI), (gD, gI) = knn_both_directions(x, y, 4, block_size=1000)
    np.testing.assert_allclose(fD, eD, atol=1e-5)
    np.testing.assert_array_equal(fI, eI)
    np.testing.assert_allclose(bD, gD, atol=1e-5)
    np.testing.assert_array_equal(bI, gI)
    with pytest.raises(InputError, match=r"shard pairs \[\(2, 1\)\] are missing"):
        reduce_parts(parts[:-1], 4, xp, yp)
    with pytest.raises(InputError, match="a second kNN part"):
        reduce_parts([*parts, parts[0]], 4, xp, yp)
    with pytest.raises(InputError, match="x0.npy: 12 rows, its shard plan says 13"):
        search_pair(xs[0], ys[0], (xp, yp), tmp_path / "bad.npz", shards=(2, 0), k=4)


def test_empty_shards_reduce_like_the_others(tmp_path):
    """Fewer rows than shards (a fixed workflow shard count on a tiny corpus): empty shards."""
    rng = np.random.default_rng(12)
    x, y = unit(rng, 2, 8), unit(rng, 3, 8)
    xp, xs = sharded(tmp_path, "x", x, 4)
    yp, ys = sharded(tmp_path, "y", y, 1)
    assert [entry.rows for entry in xp.shards] == [0, 1, 0, 1]
    parts = [
        search_pair(xs[s], ys[0], (xp, yp), tmp_path / f"p{s}.npz", shards=(s, 0)) for s in range(4)
    ]
    fwd, bwd = reduce_parts(parts, 2, xp, yp)
    (eD, eI), (gD, gI) = knn_both_directions(x, y, 2)
    np.testing.assert_array_equal(fwd[1], eI)
    np.testing.assert_array_equal(bwd[1], gI)


def test_merge_knn_keeps_real_neighbours_over_padding():
    a = (np.array([[0.9, -np.inf]], np.float32), np.array([[3, -1]]))
    b = (np.array([[0.5, 0.1]], np.float32), np.array([[7, 8]]))
    D, ids = merge_knn([a, b], 3)
    np.testing.assert_allclose(D, [[0.9, 0.5, 0.1]])
    np.testing.assert_array_equal(ids, [[3, 7, 8]])
    D, ids = merge_knn([a, a], 4)  # only two real neighbours (the same twice): padding stays -inf
    np.testing.assert_array_equal(ids[0, 2:], [-1, -1])
    assert np.isneginf(D[0, 2:]).all()


def test_margins_by_hand():
    # Source 0's neighbours: t0 0.9, t1 0.5 -> mean 0.7; target 0's: s0 0.9, s1 0.3 -> mean 0.6.
    fwd = (np.array([[0.9, 0.5], [0.4, 0.3]], np.float32), np.array([[0, 1], [1, 0]]))
    bwd = (np.array([[0.9, 0.3], [0.5, 0.4]], np.float32), np.array([[0, 1], [0, 1]]))
    m_src, m_tgt = knn_means(fwd, 2), knn_means(bwd, 2)
    np.testing.assert_allclose(m_src, [0.7, 0.35])
    np.testing.assert_allclose(m_tgt, [0.6, 0.45])
    cos = np.float32(0.9)
    assert margin_score(cos, m_src[0], m_tgt[0], "ratio") == pytest.approx(0.9 / 0.65, rel=1e-6)
    assert margin_score(cos, m_src[0], m_tgt[0], "distance") == pytest.approx(0.9 - 0.65, abs=1e-6)
    assert margin_score(cos, m_src[0], m_tgt[0], "absolute") == pytest.approx(0.9)
    scores, src, tgt = score_pairs(fwd, bwd, k=2, margin_kind="ratio", retrieval="fwd")
    # source 1: t1 0.4/((0.35+0.45)/2)=1.0 beats t0 0.3/((0.35+0.6)/2)=0.6316
    assert list(zip(src, tgt)) == [(0, 0), (1, 1)]
    np.testing.assert_allclose(scores, [0.9 / 0.65, 1.0], rtol=1e-6)


def _retrieval_case():
    """Source 0 and 1 both prefer target 0; target 1 prefers source 1; target 0 prefers source 0."""
    fwd = (np.array([[0.9, 0.1], [0.8, 0.7]], np.float32), np.array([[0, 1], [0, 1]]))
    bwd = (np.array([[0.9, 0.8], [0.7, 0.1]], np.float32), np.array([[0, 1], [1, 0]]))
    return fwd, bwd


@pytest.mark.parametrize(
    "retrieval, expected",
    [
        ("fwd", {(0, 0), (1, 0)}),
        ("bwd", {(0, 0), (1, 1)}),
        ("intersect", {(0, 0)}),
        ("max", {(0, 0), (1, 1)}),  # (1, 0) is dropped: target 0 is taken by the better (0, 0)
    ],
)
def test_retrieval_modes(retrieval, expected):
    fwd, bwd = _retrieval_case()
    scores, src, tgt = score_pairs(fwd, bwd, k=2, margin_kind="absolute", retrieval=retrieval)
    assert set(zip(src.tolist(), tgt.tolist())) == expected
    assert (np.diff(scores) <= 0).all()


def _ivf_grid(tmp_path, x, y, cfg, shards=(2, 2)):
    """Train, assign and search the IVF grid as the workflow's jobs do; the reduced kNN."""
    xp, xs = sharded(tmp_path, "x", x.astype(np.float32), shards[0])
    yp, ys = sharded(tmp_path, "y", y.astype(np.float32), shards[1])
    trained = tmp_path / "quantizer.npz"
    train_index(xs, ys, cfg, trained)
    lists = {}
    for name, paths in (("x", xs), ("y", ys)):
        for s, npy in enumerate(paths):
            lists[name, s] = tmp_path / f"{name}{s}.lists.npz"
            fill_index(trained, npy, lists[name, s], nprobe=cfg.nprobe)
    parts = []
    for s, t in np.ndindex(*shards):
        parts.append(tmp_path / f"p{s}{t}.npz")
        search_pair(
            xs[s],
            ys[t],
            (xp, yp),
            parts[-1],
            shards=(s, t),
            k=4,
            src_lists=load_lists(lists["x", s]),
            tgt_lists=load_lists(lists["y", t]),
        )
    return reduce_parts(parts, 4, xp, yp)


def test_ivf_matches_exact_when_probing_every_list(tmp_path):
    """One quantizer trained across both sides, each shard's rows assigned once: with
    nprobe = nlist the list-major grid gives exactly the exhaustive result, scores included."""
    rng = np.random.default_rng(4)
    x, y = unit(rng, 800, 16), unit(rng, 900, 16)
    y[:300] = x[:300] + 0.01 * unit(rng, 300, 16)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    cfg = IndexConfig(ivf_min_size=500, nlist=8, nprobe=8)
    fwd, bwd = _ivf_grid(tmp_path, x, y, cfg, shards=(2, 3))
    (exact_fd, exact_fi), (exact_bd, exact_bi) = knn_both_directions(x, y, 4)
    np.testing.assert_allclose(fwd[0], exact_fd, atol=1e-6)
    np.testing.assert_allclose(bwd[0], exact_bd, atol=1e-6)
    np.testing.assert_array_equal(fwd[1][:, 0], exact_fi[:, 0])
    np.testing.assert_array_equal(bwd[1][:, 0], exact_bi[:, 0])
    assert load_lists(tmp_path / "y2.lists.npz").lists.shape == (300, 8)


@pytest.mark.parametrize(("compare", "nprobe"), [("own_list", 2), ("common_list", 1)])
def test_ivf_recall_against_exact_with_few_lists_probed(tmp_path, compare, nprobe):
    """The approximate path (nprobe < nlist) on clustered data, either way of choosing the
    pairs: recall@4 against exact search in both directions, and every score it returns is the
    exact inner product of its pair."""
    rng = np.random.default_rng(11)
    centres = unit(rng, 40, 32)
    x = centres[rng.integers(0, 40, 3000)] + 0.8 * unit(rng, 3000, 32)
    y = x[rng.permutation(3000)] + 0.1 * unit(rng, 3000, 32)
    x, y = (a / np.linalg.norm(a, axis=1, keepdims=True) for a in (x, y))
    x, y = x.astype(np.float32), y.astype(np.float32)
    cfg = IndexConfig(ivf_min_size=1000, nlist=32, nprobe=nprobe, compare=compare)
    fwd, bwd = _ivf_grid(tmp_path, x, y, cfg)
    for (dist, ids), (queries, base) in zip((fwd, bwd), ((x, y), (y, x)), strict=True):
        _, exact = brute(queries, base, 4)
        recall = np.mean([len(set(a) & set(e)) / 4 for a, e in zip(ids, exact, strict=True)])
        assert 0.9 < recall < 0.999, recall  # approximate, and good
        found = ids >= 0
        rescored = np.einsum("nd,nkd->nk", queries, base[np.where(found, ids, 0)])
        np.testing.assert_allclose(dist[found], rescored[found], atol=1e-5)


def test_large_lists_are_split_and_the_knn_work_falls(tmp_path):
    """More tight clusters than lists, so k-means lists merge clusters, some many: split, no
    list holds much more than ``list_split`` × the mean, the kNN work (Σ over the lists of the
    probing rows of one side times those of the other) falls, and recall against exact search
    does not."""
    from psp.mine.ivf import compared_pairs, ivf_knn_both_directions

    rng = np.random.default_rng(5)
    centres = unit(rng, 100, 32)
    x = np.repeat(centres, 60, axis=0) + 0.1 * unit(rng, 6000, 32)
    x = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    xp, xs = sharded(tmp_path, "x", x, 1)
    _, exact = brute(x, x, 4)
    results = {}
    for split in (None, 1.5):
        cfg = IndexConfig(
            ivf_min_size=1,
            nlist=40,
            nprobe=3,
            compare="own_list",
            train_per_list=150,
            list_split=split,
        )
        train_index(xs, xs, cfg, tmp_path / "q.npz")
        lists = fill_index(tmp_path / "q.npz", xs[0], tmp_path / "l.npz", nprobe=3).lists
        nlist = int(lists.max()) + 1
        stored = np.bincount(lists[:, 0], minlength=nlist)
        work = compared_pairs(lists, lists, nlist)
        (_, ids), _ = ivf_knn_both_directions(x, x, src_lists=lists, tgt_lists=lists, k=4)
        recall = np.mean([len(set(a) & set(e)) / 4 for a, e in zip(ids, exact, strict=True)])
        results[split] = nlist, stored.max() / len(x) * nlist, work, recall
    (n0, top0, work0, recall0), (n1, top1, work1, recall1) = results[None], results[1.5]
    assert top0 >= 2 and top1 < 1.8 and n1 > n0 == 40, results
    assert work1 < 0.8 * work0 and recall1 > recall0 - 0.01, results


def test_ivf_rows_with_too_few_candidates_are_padded():
    """A query whose probed lists hold fewer than k rows gets (-inf, -1) in the free places."""
    from psp.mine.ivf import ivf_knn_both_directions

    x = np.eye(4, 8, dtype=np.float32)
    lists = np.array([[0], [0], [1], [2]])
    (fd, fi), _ = ivf_knn_both_directions(x, x, src_lists=lists, tgt_lists=lists, k=3, threads=2)
    assert fi[0].tolist() == [0, 1, -1] and fd[0, 2] == -np.inf
    assert fi[3].tolist() == [3, -1, -1]


def test_ivf_product_serves_both_of_its_sides():
    """A list's product scores its probing rows against its stored rows, and the scores count
    for the stored rows too: a source row found by a target query that probes the source row's
    list is the source row's candidate, though the source row probes no list the target row is
    stored in. A candidate found both ways is counted once."""
    from psp.mine.ivf import ivf_knn_both_directions

    x, y = np.array([[1.0, 0.0]], np.float32), np.array([[0.6, 0.8]], np.float32)
    (fd, fi), (bd, bi) = ivf_knn_both_directions(
        x, y, src_lists=np.array([[0]]), tgt_lists=np.array([[1, 0]]), k=2
    )
    assert fi.tolist() == [[0, -1]] and bi.tolist() == [[0, -1]]
    assert fd[0, 0] == pytest.approx(0.6) and bd[0, 0] == pytest.approx(0.6)
    (_, fi), (_, bi) = ivf_knn_both_directions(
        x, y, src_lists=np.array([[0, 1]]), tgt_lists=np.array([[1, 0]]), k=2
    )
    assert fi.tolist() == [[0, -1]] and bi.tolist() == [[0, -1]]


def test_ivf_compares_the_rows_that_probe_a_common_list():
    """Two rows are compared when they probe a common list, whichever of their probes it is,
    and one product scores the pair for both directions; a pair probing two common lists is
    one candidate, not two."""
    from psp.mine.ivf import ivf_knn_both_directions

    x, y = np.array([[1.0, 0.0]], np.float32), np.array([[0.6, 0.8]], np.float32)
    search = functools.partial(ivf_knn_both_directions, x, y, k=2, common_lists=True)
    (_, fi), (_, bi) = search(src_lists=np.array([[0, 2]]), tgt_lists=np.array([[1, 3]]))
    assert fi.tolist() == [[-1, -1]] and bi.tolist() == [[-1, -1]]
    (fd, fi), (bd, bi) = search(src_lists=np.array([[0, 2]]), tgt_lists=np.array([[1, 2]]))
    assert fi.tolist() == [[0, -1]] and bi.tolist() == [[0, -1]]
    assert fd[0, 0] == pytest.approx(0.6) and bd[0, 0] == pytest.approx(0.6)
    (_, fi), (_, bi) = search(src_lists=np.array([[0, 1]]), tgt_lists=np.array([[1, 0]]))
    assert fi.tolist() == [[0, -1]] and bi.tolist() == [[0, -1]]


def test_recall_probe_tells_flat_from_clustered_embeddings(tmp_path):
    """``compare: auto`` decides per pair from the training sample: on vectors with no structure
    (flat neighbourhoods) the probe finds ``own_list`` missing far more neighbours than
    ``common_list``, so it takes ``common_list`` and keeps the k-means lists unsplit; on tight
    clusters ``own_list`` loses nothing and is taken, its lists split. The choice travels with
    the quantizer into every shard's list file, and the search that follows uses it."""
    from psp.mine.index import load_quantizer, probe_recall

    rng = np.random.default_rng(12)
    flat = unit(rng, 4000, 64).astype(np.float32)
    centres = unit(rng, 40, 64)
    clustered = centres[rng.integers(0, 40, 4000)] + 0.15 * unit(rng, 4000, 64)
    clustered = (clustered / np.linalg.norm(clustered, axis=1, keepdims=True)).astype(np.float32)
    found = {}
    for name, x in (("flat", flat), ("clustered", clustered)):
        _, (a, b) = sharded(tmp_path, name, x, 2)
        cfg = IndexConfig(ivf_min_size=1, nlist=32, nprobe=4, train_per_list=125)
        centroids, compare = train_index([a], [b], cfg, tmp_path / f"{name}.q.npz")
        probe = probe_recall(x, 2000, centroids, 4)
        lists = fill_index(tmp_path / f"{name}.q.npz", a, tmp_path / f"{name}.l.npz", nprobe=4)
        assert load_quantizer(tmp_path / f"{name}.q.npz")[1] == compare == lists.compare
        assert load_lists(tmp_path / f"{name}.l.npz").compare == compare
        found[name] = compare, len(centroids), probe
    (flat_compare, flat_nlist, flat_probe), (clus_compare, clus_nlist, clus_probe) = found.values()
    assert (flat_compare, flat_nlist) == ("common_list", 32), found
    assert flat_probe.hub_factor < 1.5, found  # no list probed by far more rows than another
    assert clus_compare == "own_list" and clus_nlist >= 32, found
    assert min(clus_probe.recall["own_list"]) > 0.95, found
    explicit = IndexConfig(ivf_min_size=1, nlist=32, nprobe=4, compare="own_list")
    assert train_index([a], [b], explicit, tmp_path / "own.q.npz")[1] == "own_list"


def test_auto_compare_keeps_own_list_where_common_list_would_pay_for_hub_lists(caplog):
    """Where a few lists are probed by very many rows, ``common_list``'s products (probing rows ×
    probing rows) cost several times those of equal lists: ``auto`` keeps ``own_list`` then, and
    says what recall it gives up."""
    from psp.mine.index import Probe, choose_compare

    flat = {"own_list": (0.78, 0.74), "common_list": (0.96, 0.95)}
    assert choose_compare(Probe(flat, hub_factor=1.7)) == "common_list"
    with caplog.at_level("WARNING", logger="psp.mine.index"):
        assert choose_compare(Probe(flat, hub_factor=6.8)) == "own_list"
    assert "0.21 fewer" in caplog.text and "6.8 x the pairs of equal lists" in caplog.text
    near = {"own_list": (0.95, 0.95), "common_list": (0.98, 0.99)}
    assert choose_compare(Probe(near, hub_factor=1.0)) == "own_list"


def test_list_files_of_different_quantizers_are_refused(tmp_path):
    """Two shards' list files must come from one quantizer: mixed ``compare`` is stale files."""
    rng = np.random.default_rng(13)
    x = unit(rng, 600, 16).astype(np.float32)
    plan, (a, b) = sharded(tmp_path, "x", x, 2)
    for compare in ("own_list", "common_list"):
        cfg = IndexConfig(ivf_min_size=1, nlist=8, nprobe=2, compare=compare)
        train_index([a], [b], cfg, tmp_path / f"{compare}.npz")
    fill_index(tmp_path / "own_list.npz", a, tmp_path / "a.lists.npz", nprobe=2)
    fill_index(tmp_path / "common_list.npz", b, tmp_path / "b.lists.npz", nprobe=2)
    with pytest.raises(InputError, match="different quantizers"):
        search_pair(
            a,
            b,
            (plan, plan),
            tmp_path / "p.npz",
            shards=(0, 1),
            k=2,
            src_lists=load_lists(tmp_path / "a.lists.npz"),
            tgt_lists=load_lists(tmp_path / "b.lists.npz"),
        )
    assert not (tmp_path / "p.npz").exists()


@pytest.mark.parametrize("common", [False, True])
def test_ivf_products_in_chunks_give_the_same_neighbours(monkeypatch, common):
    """A list probed by more rows than one product holds is multiplied in chunks of source
    rows, each target row's top-k merged over the chunks: the same result as one product."""
    from psp.mine import ivf

    rng = np.random.default_rng(8)
    x, y = unit(rng, 500, 16).astype(np.float32), unit(rng, 400, 16).astype(np.float32)
    lx, ly = rng.integers(0, 6, (500, 2)), rng.integers(0, 6, (400, 2))
    whole = ivf.ivf_knn_both_directions(
        x, y, src_lists=lx, tgt_lists=ly, k=5, common_lists=common, threads=2
    )
    monkeypatch.setattr(ivf, "PRODUCT_SIZE", 700)  # chunks of 7 or so source rows
    chunked = ivf.ivf_knn_both_directions(
        x, y, src_lists=lx, tgt_lists=ly, k=5, common_lists=common, threads=2
    )
    for (d0, i0), (d1, i1) in zip(whole, chunked, strict=True):
        np.testing.assert_array_equal(i0, i1)
        np.testing.assert_allclose(d0, d1, atol=1e-6)


def test_exactly_searched_pair_has_empty_index_files(tmp_path):
    from psp.mine.index import uses_ivf, write_no_index

    write_no_index(tmp_path / "none.lists.npz")
    assert load_lists(tmp_path / "none.lists.npz") is None
    cfg = IndexConfig(ivf_min_size=1000)
    assert uses_ivf(1000, 1000, cfg) and not uses_ivf(999, 1000, cfg) and uses_ivf(100, 10**4, cfg)
    assert not uses_ivf(10, 10**4, cfg) and not uses_ivf(10**9, 10**9, None)
    assert IndexConfig(nprobe=16).nlist_for(1_000_000) == 4000
    with pytest.raises(ValueError, match="train_iters: expected a whole number >= 1"):
        IndexConfig(train_iters=0)


def test_dimension_mismatch_names_both_files(tmp_path):
    rng = np.random.default_rng(6)
    plan, (a,) = sharded(tmp_path, "a", unit(rng, 4, 8), 1)
    b = save(tmp_path / "b.npy", unit(rng, 4, 6))
    with pytest.raises(InputError, match=r"a0\.npy has dim 8.*b\.npy has dim 6"):
        search_pair(a, b, (plan, plan), tmp_path / "p.npz")
    with pytest.raises(InputError, match=r"a0\.npy has dim 8.*b\.npy has dim 6"):
        train_index([a], [b], IndexConfig(), tmp_path / "quantizer.npz")
    assert not (tmp_path / "p.npz").exists()


def test_truncated_or_foreign_shard_is_an_input_error(tmp_path):
    rng = np.random.default_rng(8)
    plan, (good,) = sharded(tmp_path, "good", unit(rng, 10, 8), 1)
    (tmp_path / "cut.npy").write_bytes(good.read_bytes()[:-16])
    with pytest.raises(InputError, match=r"cut\.npy: truncated"):
        search_pair(good, tmp_path / "cut.npy", (plan, plan), tmp_path / "p.npz")
    np.save(tmp_path / "ints.npy", np.zeros((3, 8), dtype=np.int64))
    with pytest.raises(InputError, match=r"ints\.npy: expected a 2-D"):
        search_pair(good, tmp_path / "ints.npy", (plan, plan), tmp_path / "p.npz")


def test_float16_shards_search_like_float32(tmp_path):
    rng = np.random.default_rng(9)
    x, y = unit(rng, 30, 16), unit(rng, 20, 16)
    xp, (x16,) = sharded(tmp_path, "x", x.astype(np.float16), 1)
    yp, (y16,) = sharded(tmp_path, "y", y.astype(np.float16), 1)
    search_pair(x16, y16, (xp, yp), tmp_path / "p.npz", k=3, block_size=7)
    (fD, _), (bD, _) = reduce_parts([tmp_path / "p.npz"], 3, xp, yp)
    np.testing.assert_allclose(fD, brute(x, y, 3)[0], atol=2e-3)
    np.testing.assert_allclose(bD, brute(y, x, 3)[0], atol=2e-3)


def test_ivf_holds_float16_shards_as_float16_and_scores_their_values_exactly(tmp_path, monkeypatch):
    """A float16 shard stays float16 in memory, so a block of ``block_bytes`` holds twice the
    rows of a float32 one; its rows are converted exactly for the products, so the result is
    that of the float32 search over the same values, scores and ids bit for bit."""
    from psp.mine import ivf

    rng = np.random.default_rng(12)
    x, y = (unit(rng, n, 16).astype(np.float16) for n in (90, 70))
    x16, y16 = save(tmp_path / "x.npy", x), save(tmp_path / "y.npy", y)
    src_lists, tgt_lists = (rng.integers(0, 6, (len(a), 3)) for a in (x, y))
    blocks = []
    read_rows = ivf.read_rows

    def recording_read_rows(*args, **kwargs):
        rows = read_rows(*args, **kwargs)
        blocks.append((len(rows), rows.dtype.name))
        return rows

    monkeypatch.setattr(ivf, "read_rows", recording_read_rows)
    lists = {"src_lists": src_lists, "tgt_lists": tgt_lists, "k": 4}
    block = 40 * 16 * 4  # 40 rows of float32
    half = ivf.ivf_knn_both_directions(
        open_embeddings(x16), open_embeddings(y16), block_bytes=block, **lists
    )
    assert {rows for rows, _ in blocks} == {80, 10, 70} and {d for _, d in blocks} == {"float16"}
    x32, y32 = x.astype(np.float32), y.astype(np.float32)
    blocks.clear()
    ivf.ivf_knn_both_directions(x32, y32, block_bytes=block, **lists)
    assert {rows for rows, _ in blocks} == {40, 10, 30} and {d for _, d in blocks} == {"float32"}
    single = ivf.ivf_knn_both_directions(x32, y32, block_bytes=2 * block, **lists)  # same blocks
    for got, want in zip(half, single, strict=True):
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


class FailingEmbedder(TrigramEmbedder):
    def embed(self, sentences, batch_size=32):
        if self.calls == 1:
            raise RuntimeError("injected failure")
        return super().embed(sentences, batch_size)


def test_embed_shard_writes_normalised_rows_and_nothing_on_failure(tmp_path):
    text = tmp_path / "s.txt.gz"
    plan = write_sharded_text(
        (f"sentence number {i}" for i in range(10)),
        10,
        n_shards=3,
        out_text=text,
        out_plan=tmp_path / "s.plan.json",
    )
    out = embed_shard(
        TrigramEmbedder(), text, plan, shard=1, out_npy=tmp_path / "e1.npy", batch_size=2
    )
    emb = np.load(out)
    assert emb.shape == (3, 128) and emb.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, rtol=1e-5)
    expected = TrigramEmbedder().embed(
        ["sentence number 3", "sentence number 4", "sentence number 5"]
    )
    np.testing.assert_allclose(
        emb, expected / np.linalg.norm(expected, axis=1, keepdims=True), rtol=1e-5
    )
    half = embed_shard(
        TrigramEmbedder(), text, plan, shard=2, out_npy=tmp_path / "h.npy", float16=True
    )
    assert np.load(half).dtype == np.float16 and np.load(half).shape == (4, 128)
    with pytest.raises(RuntimeError, match="injected"):
        embed_shard(
            FailingEmbedder(), text, plan, shard=2, out_npy=tmp_path / "bad.npy", batch_size=3
        )
    names = ["e1.npy", "h.npy", "s.plan.json", "s.txt.gz"]
    assert sorted(p.name for p in tmp_path.iterdir()) == names


def test_knn_failure_leaves_no_part(tmp_path, monkeypatch):
    import psp.mine.knn as knn

    rng = np.random.default_rng(7)
    plan, (a,) = sharded(tmp_path, "a", unit(rng, 6, 4), 1)
    before = sorted(p.name for p in tmp_path.iterdir())

    def boom(handle, **arrays):
        handle.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(knn.np, "savez", boom)
    with pytest.raises(OSError, match="disk full"):
        search_pair(a, a, (plan, plan), tmp_path / "p.npz")
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_empty_corpus_is_an_error_naming_the_file(tmp_path):
    empty, full = tmp_path / "empty.txt", tmp_path / "full.txt"
    empty.write_text("")
    full.write_text("hola\n")
    with pytest.raises(InputError, match="empty.txt: empty corpus"):
        mine_files(
            TrigramEmbedder(),
            full,
            empty,
            cfg=MineConfig(),
            out_path=tmp_path / "o.tsv.gz",
            work_dir=tmp_path / "w",
        )


def test_model_languages_checked():
    model = TrigramEmbedder(languages=["de", "en"])
    check_model_languages(model, "de", "en", "models/de-en")
    with pytest.raises(InputError, match=r"models/de-en.*\['es'\].*es-en"):
        check_model_languages(model, "es", "en", "models/de-en")


def test_mine_config_from_dict():
    cfg = MineConfig.from_dict({"k": 3, "retrieval": "intersect", "index": {"nprobe": 4}})
    assert cfg.k == 3 and cfg.index == IndexConfig(nprobe=4)
    assert cfg.effective_threshold == 1.06
    with pytest.raises(ValueError, match="unknown key.*'kk'"):
        MineConfig.from_dict({"kk": 3})
    with pytest.raises(ValueError, match="retrieval"):
        MineConfig(retrieval="both")


SRC = [
    "el gato duerme en la casa",
    "mañana lloverá en madrid",
    "la economía creció un tres por ciento",
    "el presidente visitó barcelona",
    "los niños juegan al fútbol",
]
TGT = [
    "president visited barcelona",
    "children play football",
    "the cat sleeps in the house",
    "the economy grew three percent",
    "tomorrow it will rain in madrid",
    "stock markets fell sharply",
]


def test_mine_texts_sharded_equals_unsharded(tmp_path):
    model = TrigramEmbedder(dim=512)
    cfg = MineConfig(threshold=-math.inf, block_size=2)
    one = mine_texts(model, SRC, TGT, cfg=cfg)
    three = mine_texts(
        model,
        SRC,
        TGT,
        cfg=MineConfig(threshold=-math.inf, n_shards=3, block_size=2),
        work_dir=tmp_path,
    )
    assert [(i, j) for _, i, j in one] == [(i, j) for _, i, j in three]
    np.testing.assert_allclose([s for s, _, _ in one], [s for s, _, _ in three], rtol=1e-5)
    assert list(tmp_path.iterdir()) == []  # temporary shards removed
    assert {(1, 4), (3, 0)} <= {(i, j) for _, i, j in one}  # "madrid", "barcelona" share trigrams
    # more shards than sentences: empty shards are embedded and reduced like the others
    tiny = mine_texts(model, SRC[:2], TGT[:3], cfg=MineConfig(threshold=-math.inf, n_shards=4))
    assert tiny == mine_texts(model, SRC[:2], TGT[:3], cfg=MineConfig(threshold=-math.inf))


def test_mine_files_outputs_and_resume(tmp_path):
    src, tgt = tmp_path / "src.txt", tmp_path / "tgt.txt.gz"
    src.write_text("\n".join(SRC) + "\n")
    with gzip.open(tgt, "wt") as f:
        f.write("\n".join(TGT) + "\n")
    model = TrigramEmbedder(dim=512)
    cfg = MineConfig(margin="ratio", threshold=1.0, n_shards=2, block_size=2)
    out = tmp_path / "out" / "es-en.tsv.gz"
    stats = mine_files(model, src, tgt, cfg=cfg, out_path=out, work_dir=tmp_path / "work")
    rows = [line.split("\t") for line in gzip.open(out, "rt").read().splitlines()]
    scores = [float(r[0]) for r in rows]
    assert scores == sorted(scores, reverse=True) and min(scores) >= 1.0
    assert len(rows) == stats["kept"] > 0
    assert all(r[1] in SRC and r[2] in TGT for r in rows)
    saved = json.loads((tmp_path / "out" / "es-en.stats.json").read_text())
    assert saved["n_src"] == 5 and saved["n_tgt"] == 6 and saved["threshold"] == 1.0
    assert saved["threshold_source"] == {"from": "config"}
    assert set(saved["timings_s"]) == {"embed", "knn", "score_and_write"}
    assert (tmp_path / "out" / "es-en.histogram.png").read_bytes()[:4] == b"\x89PNG"
    calls = model.calls
    # resumes: nothing re-embedded
    mine_files(model, src, tgt, cfg=cfg, out_path=out, work_dir=tmp_path / "work")
    assert model.calls == calls
    with pytest.raises(InputError, match="manifest.json"):
        mine_files(model, src, tgt, cfg=MineConfig(k=2), out_path=out, work_dir=tmp_path / "work")


def test_bucc_on_real_data_with_trigram_model(shared_data, tmp_path):
    from psp.mine.bucc import BuccData, run_bucc

    data = BuccData(n_distractors=1500, max_gold=300)
    results = run_bucc(
        TrigramEmbedder(dim=1024), shared_data, tmp_path, cfg=MineConfig(), data=data
    )
    saved = json.loads((tmp_path / "bucc.json").read_text())
    assert saved["test"]["gold"] == results["test"]["gold"] == 300
    assert saved["dev"]["n_src"] >= 1700 and saved["dev"]["threshold"] == saved["test"]["threshold"]
    # surface trigrams find the es-en pairs sharing names and numbers, far above chance (~0)
    assert results["test"]["f1"] > 0.2
    assert (tmp_path / "pr_curve.png").read_bytes()[:4] == b"\x89PNG"


def test_merging_and_scoring_need_no_torch():
    """``score_mined`` jobs (one per mined pair) merge and score with numpy and Faiss: they do
    not pay torch's start-up, which only the exact kNN search needs."""
    from tests.test_cli import imported_modules

    code = "from psp.mine import MineConfig, load_plan, reduce_parts, write_mined"
    assert "torch" not in imported_modules(code)
    assert "torch" in imported_modules("from psp.mine import knn_shard_pair")
