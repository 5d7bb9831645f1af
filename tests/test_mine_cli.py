"""``psp mine`` end to end on small files with a freshly built P-SP model directory."""

from __future__ import annotations

import gzip
import json

import pytest

from psp.cli import main

SPANISH = [
    "el gato duerme en la casa",
    "mañana lloverá en madrid",
    "la economía creció un tres por ciento",
    "el presidente visitó barcelona",
    "los niños juegan al fútbol en el parque",
]
ENGLISH = [
    "the president visited barcelona",
    "children play football in the park",
    "the cat sleeps in the house",
    "the economy grew three percent",
    "tomorrow it will rain in madrid",
    "stock markets fell sharply",
]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    model_mod = pytest.importorskip("psp.model.torch_model")
    from psp.data.spm_training import train_spm

    root = tmp_path_factory.mktemp("model")
    spm = train_spm((SPANISH + ENGLISH) * 20, root / "tiny.model", vocab_size=60)
    model = model_mod.PSPModel.from_spm(spm, dim=32, languages=["es", "en"])
    model.save(root / "es-en")
    return root / "es-en"


@pytest.fixture()
def corpora(tmp_path):
    src, tgt = tmp_path / "es.txt", tmp_path / "en.txt.gz"
    src.write_text("\n".join(SPANISH) + "\n", encoding="utf-8")
    with gzip.open(tgt, "wt", encoding="utf-8") as f:
        f.write("\n".join(ENGLISH) + "\n")
    return src, tgt


def test_cli_mines_with_a_model_dir(model_dir, corpora, tmp_path):
    src, tgt = corpora
    out = tmp_path / "mined" / "es-en.tsv.gz"
    argv = ["mine", "--model", str(model_dir), "--src-file", str(src), "--tgt-file", str(tgt)]
    argv += ["--output", str(out), "--src-lang", "es", "--tgt-lang", "en", "--threshold=-1e9"]
    assert main(argv + ["--shards", "2", "--retrieval", "intersect", "--margin", "distance"]) == 0
    rows = [line.split("\t") for line in gzip.open(out, "rt", encoding="utf-8").read().splitlines()]
    stats = json.loads((out.parent / "es-en.stats.json").read_text())
    assert len(rows) == stats["kept"] >= 1 and stats["retrieval"] == "intersect"
    assert all(r[1] in SPANISH and r[2] in ENGLISH for r in rows)
    assert (out.parent / "es-en.histogram.png").exists()
    assert sorted(p.name for p in out.parent.iterdir()) == [
        "es-en.histogram.png",
        "es-en.stats.json",
        "es-en.tsv.gz",
    ]  # the default work dir is removed after success


def test_cli_list_major_search_with_every_list_probed_mines_what_exact_search_mines(
    model_dir, corpora, tmp_path
):
    """``--ivf-min-size 1`` sends even this pair through the quantizer and the list-major search;
    with every list probed the mined pairs and scores are the exact search's."""
    src, tgt = corpora
    argv = ["mine", "--model", str(model_dir), "--src-file", str(src), "--tgt-file", str(tgt)]
    argv += ["--threshold=-1e9", "--shards", "2"]
    outputs = {}
    for name, extra in (("exact", []), ("ivf", ["--ivf-min-size", "1", "--nprobe", "1"])):
        outputs[name] = tmp_path / name / "es-en.tsv.gz"
        assert main(argv + ["--output", str(outputs[name]), *extra]) == 0
    exact, ivf = (gzip.open(path, "rt", encoding="utf-8").read() for path in outputs.values())
    assert ivf == exact and exact.count("\n") >= 1


def test_cli_rejects_a_language_the_model_lacks(model_dir, corpora, tmp_path, capsys):
    src, tgt = corpora
    argv = ["mine", "--model", str(model_dir), "--src-file", str(src), "--tgt-file", str(tgt)]
    argv += ["--output", str(tmp_path / "o.tsv.gz"), "--src-lang", "de", "--tgt-lang", "en"]
    assert main(argv) == 2
    assert "['de']" in capsys.readouterr().err
    assert not (tmp_path / "o.tsv.gz").exists()


def test_cli_needs_both_languages(corpora, tmp_path, capsys):
    src, tgt = corpora
    argv = [
        "mine",
        "--model",
        str(tmp_path / "none"),
        "--src-file",
        str(src),
        "--tgt-file",
        str(tgt),
    ]
    assert main(argv + ["--output", str(tmp_path / "o.tsv.gz"), "--src-lang", "es"]) == 2
    assert "--src-lang and --tgt-lang" in capsys.readouterr().err
