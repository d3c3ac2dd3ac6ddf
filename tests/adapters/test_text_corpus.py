"""Offline text passages: wiki markup cleaning, sources, seeded sampling, clear errors."""
from __future__ import annotations

import bz2

import numpy as np
import pytest

from icl_cmr.adapters import text_corpus
from cmr.errors import DataSourceError, ParameterError
from tests.conftest import REQUIRE_ALL


class WordTokenizer:
    """Whitespace 'tokenizer': a stable id per word (enough to test windows and sampling)."""

    def __init__(self):
        self.vocab = {}

    def encode(self, text, add_special_tokens=False):
        assert add_special_tokens is False  # special tokens must never enter passages
        return [self.vocab.setdefault(word, len(self.vocab)) for word in text.split()]


@pytest.fixture(scope="module")
def wikipedia_documents():
    try:
        return text_corpus.read_documents("wikipedia")
    except DataSourceError as exc:
        if REQUIRE_ALL:
            pytest.fail(f"the Wikipedia sample in the gensim wheel is required: {exc}")
        pytest.skip(str(exc))


def test_clean_wiki_markup_hand_case():
    markup = (
        "{{Infobox person|name=X {{nested|a}}}}\n'''Ada Lovelace''' was an [[England|English]] "
        "[[mathematician]]<ref>Some ref</ref> and writer.<!-- hidden --> She wrote notes.\n\n"
        "== Early life ==\n[[File:Ada.jpg|thumb|A [[portrait]] of Ada]]\n"
        "{| class=wikitable\n|-\n| cell || cell\n|}\n"
        "* She worked with [http://example.org Charles Babbage] on the Analytical Engine.\n"
        "[[Category:Mathematicians]]"
    )
    assert text_corpus.clean_wiki_markup(markup) == (
        "Ada Lovelace was an English mathematician and writer. She wrote notes.\n\n"
        "She worked with Charles Babbage on the Analytical Engine."
    )


def test_wikipedia_sample_gives_clean_articles(wikipedia_documents):
    docs = wikipedia_documents
    assert len(docs) > 100
    assert docs[0].startswith("Anarchism is a political philosophy")
    joined = "\n".join(docs)
    for debris in ("{{", "}}", "[[", "]]", "<ref", "'''", "&nbsp;"):
        assert debris not in joined, debris


def test_passages_are_seeded_windows_of_documents(wikipedia_documents, monkeypatch):
    monkeypatch.setattr(text_corpus, "read_documents", lambda source: wikipedia_documents)
    tokenizer = WordTokenizer()
    first = text_corpus.load_passages("wikipedia", tokenizer, n_passages=50, n_tokens=256, rng=3)
    assert first.shape == (50, 256) and first.dtype == np.int64
    np.testing.assert_array_equal(first, text_corpus.load_passages("wikipedia", tokenizer, n_passages=50, n_tokens=256, rng=3))
    assert not np.array_equal(first, text_corpus.load_passages("wikipedia", tokenizer, n_passages=50, n_tokens=256, rng=4))
    # every passage is a contiguous window of one document, starting at a multiple of n_tokens
    docs = text_corpus.tokenize_documents(wikipedia_documents, tokenizer)
    for row in first[:5]:
        assert any(
            np.array_equal(ids[s:s + 256], row) for ids in docs for s in range(0, len(ids) - 255, 256)
        )


def test_too_few_passages_says_how_many(tmp_path):
    (tmp_path / "a.txt").write_text("one two three " * 100)  # 300 words
    (tmp_path / "b.txt").write_text("four five " * 60)  # 120 words
    tokenizer = WordTokenizer()
    passages = text_corpus.load_passages(tmp_path, tokenizer, n_passages=3, n_tokens=100, rng=0)
    assert passages.shape == (3, 100)
    with pytest.raises(DataSourceError, match=r"gives 4 passages of 100 tokens, at most 4 per document \(2 documents, "
                                              r"the longest 300"):
        text_corpus.load_passages(tmp_path, tokenizer, n_passages=5, n_tokens=100)
    with pytest.raises(DataSourceError, match="gives 1 passages"):
        text_corpus.load_passages(tmp_path / "a.txt", tokenizer, n_passages=2, n_tokens=200)


def test_mediawiki_dump_and_bad_sources(tmp_path):
    page = ("<page><title>T</title><ns>0</ns><revision><text>'''Topic''' is a [[word|thing]] that people "
            "write about at length in many long sentences.{{cite}} " + "More prose here. " * 20 + "</text></revision></page>")
    redirect = "<page><title>R</title><ns>0</ns><revision><text>#REDIRECT [[T]]</text></revision></page>"
    dump = tmp_path / "dump.xml.bz2"
    dump.write_bytes(bz2.compress(f"<mediawiki>{page}{redirect}</mediawiki>".encode()))
    docs = text_corpus.read_documents(dump)
    assert len(docs) == 1 and docs[0].startswith("Topic is a thing that people write")
    (tmp_path / "broken.xml").write_text("<mediawiki><page>")
    with pytest.raises(DataSourceError, match="not a readable MediaWiki"):
        text_corpus.read_documents(tmp_path / "broken.xml")
    with pytest.raises(DataSourceError, match="unknown text source"):
        text_corpus.read_documents(tmp_path / "missing.txt")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataSourceError, match="no \\*.txt files"):
        text_corpus.read_documents(tmp_path / "empty")
    with pytest.raises(ParameterError, match="tokenizer"):
        text_corpus.load_passages(dump, None)


def test_passages_are_a_shuffled_capped_sample_of_articles(tmp_path):
    # 6 documents of 1,000 distinct words: 10 windows of 100 tokens each, 60 windows in all
    for d in range(6):
        (tmp_path / f"d{d}.txt").write_text(" ".join(f"d{d}w{i}" for i in range(1000)))
    tokenizer = WordTokenizer()
    docs = text_corpus.tokenize_documents(text_corpus.read_documents(tmp_path), tokenizer)
    passages, articles = text_corpus.load_passages(tmp_path, tokenizer, n_passages=18, n_tokens=100, rng=1,
                                                   max_per_document=3, return_articles=True)
    assert passages.shape == (18, 100) and articles.dtype == np.int64
    # each passage is a window of the document its article names; at most 3 windows per document
    for row, article in zip(passages, articles):
        ids = docs[article]
        assert any(np.array_equal(ids[s:s + 100], row) for s in range(0, 901, 100))
    assert np.bincount(articles, minlength=6).tolist() == [3] * 6
    # in the order drawn, not sorted: a run cut after k passages keeps a random subset, not the first articles
    keys = [(int(a), int(row[0])) for a, row in zip(articles, passages)]
    assert keys != sorted(keys)
    np.testing.assert_array_equal(passages, text_corpus.load_passages(tmp_path, tokenizer, n_passages=18, n_tokens=100, rng=1,
                                                                      max_per_document=3))
    # without a cap the sample may take more windows of one document; with it too few windows is an error
    assert text_corpus.load_passages(tmp_path, tokenizer, n_passages=40, n_tokens=100, max_per_document=None).shape == (40, 100)
    with pytest.raises(DataSourceError, match="gives 18 passages of 100 tokens, at most 3 per document"):
        text_corpus.load_passages(tmp_path, tokenizer, n_passages=19, n_tokens=100, max_per_document=3)
    with pytest.raises(ParameterError, match="max_per_document"):
        text_corpus.load_passages(tmp_path, tokenizer, n_passages=2, n_tokens=100, max_per_document=0)


def test_the_first_passages_of_a_draw_cover_articles_at_random(tmp_path):
    # over seeds, the first passage's article is spread over the documents (a sorted draw would favour the first ones)
    for d in range(4):
        (tmp_path / f"d{d}.txt").write_text(" ".join(f"d{d}w{i}" for i in range(400)))
    tokenizer = WordTokenizer()
    firsts = [int(text_corpus.load_passages(tmp_path, tokenizer, n_passages=8, n_tokens=100, rng=seed, max_per_document=2,
                                            return_articles=True)[1][0]) for seed in range(200)]
    counts = np.bincount(firsts, minlength=4)
    assert counts.min() > 30  # each of the 4 documents about 50 times in 200
