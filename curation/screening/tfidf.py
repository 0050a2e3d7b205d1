"""TF-IDF rows of a screening queue's candidates, in time and memory linear in their text.

The features are scikit-learn's ``TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True,
stop_words="english", min_df=..., max_df=...)``: its token pattern and English stop words,
unigrams and the bigrams of consecutive non-stop tokens, ``1 + ln(count)`` term weights, the
smoothed idf ``ln((1 + n) / (1 + df)) + 1``, L2-normalised rows and columns in term order; the
rows are float32. What differs is the counting: scikit-learn keeps every distinct n-gram of the
candidate set as a Python string in a dict until it prunes the ones in fewer than ``min_df``
documents (most bigrams; for 40,000 abstracts a 400 MB peak, and 950,000 terms left after the
pruning); here a word is an integer id and a bigram a pair of ids (one int64 code) counted with
NumPy, chunk by chunk, and only the terms kept become strings. At most :data:`MAX_TERMS` terms
are kept, those in the most candidates; a 1,000-candidate queue has about 15,000, so the cap
only bites on large queues.
"""

from __future__ import annotations

import re
from array import array
from collections import defaultdict
from collections.abc import Sequence
from itertools import filterfalse

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

#: TF-IDF columns kept at most (the terms in the most candidates).
MAX_TERMS = 2**17
#: scikit-learn's default token pattern: words of two or more word characters.
_TOKEN = re.compile(r"(?u)\b\w\w+\b")
#: Candidates counted at once (bounds the temporary arrays).
_CHUNK = 1024


def tfidf_rows(texts: Sequence[str], *, max_terms: int = MAX_TERMS
               ) -> tuple[sp.csr_matrix, tuple[str, ...]]:
    """L2-normalised float32 TF-IDF rows of ``texts`` over their own vocabulary.

    Args:
        texts: One text per row.
        max_terms: Columns kept at most: the terms in the most texts (ties: words before
            bigrams, then by the text where the (first) word first appears).

    Returns:
        The rows (``(len(texts), terms)``) and the terms (column names, sorted). Terms are
        those in >= 2 texts (all terms when fewer than 3 texts) and, from 20 texts on, in at
        most 95% of them; no term at all gives a matrix with no column.
    """
    n = len(texts)
    ids, starts, words = _word_ids(texts)
    vocab = len(words)
    df_codes, df = _document_frequencies(ids, starts, vocab)
    low = 2 if n >= 3 else 1
    high = 0.95 * n if n >= 20 else n
    kept = np.flatnonzero((df >= low) & (df <= high))
    if len(kept) > max_terms:  # the most frequent (stable: ties keep the code order)
        kept = np.sort(kept[np.argsort(-df[kept], kind="stable")[:max_terms]])
    if not len(kept):
        return sp.csr_matrix((n, 0), dtype=np.float32), ()
    codes = df_codes[kept]  # (terms,) ascending
    names = [_term(int(c), words, vocab) for c in codes]
    alphabetical = sorted(range(len(names)), key=names.__getitem__)
    column = np.empty(len(names), dtype=np.int32)
    column[alphabetical] = np.arange(len(names), dtype=np.int32)
    idf = np.log((1.0 + n) / (1.0 + df[kept])) + 1.0  # by code
    rows = _weighted_rows(ids, starts, vocab, codes, column, idf, int(df[kept].sum()))
    return rows, tuple(names[i] for i in alphabetical)


def _word_ids(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Every text's non-stop tokens as word ids (all texts in one array), where each text
    starts in it, and the words (id -> word)."""
    vocab: defaultdict[str, int] = defaultdict()
    vocab.default_factory = vocab.__len__  # a new word gets the next id
    ids = array("i")
    starts = array("q", [0])
    for text in texts:
        tokens = filterfalse(ENGLISH_STOP_WORDS.__contains__, _TOKEN.findall(text.lower()))
        ids.extend(map(vocab.__getitem__, tokens))
        starts.append(len(ids))
    token_ids = np.frombuffer(ids, dtype=np.int32) if len(ids) else np.zeros(0, np.int32)
    return token_ids, np.frombuffer(starts, dtype=np.int64), list(vocab)


def _chunk_pairs(ids: np.ndarray, starts: np.ndarray, vocab: int, first: int, last: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Texts ``first`` to ``last - 1``: each (text, term) once, as (text - first, term code,
    count), ordered by text then code. A word's code is its id, a bigram's ``vocab + a *
    vocab + b``."""
    part = ids[starts[first]:starts[last]].astype(np.int64)  # (tokens,)
    text = np.repeat(np.arange(last - first), np.diff(starts[first:last + 1]))
    pair = text[:-1] == text[1:]  # consecutive tokens of one text
    codes = np.concatenate([part, vocab + part[:-1][pair] * vocab + part[1:][pair]])
    texts = np.concatenate([text, text[:-1][pair]])
    span = vocab + vocab * vocab
    keys, counts = np.unique(texts * span + codes, return_counts=True)
    return keys // span, keys % span, counts


def _chunks(n: int, vocab: int) -> list[tuple[int, int]]:
    span = vocab + vocab * vocab
    size = int(max(1, min(_CHUNK, (2**62) // max(span, 1))))  # text * span + code fits int64
    return [(i, min(i + size, n)) for i in range(0, n, size)]


def _document_frequencies(ids: np.ndarray, starts: np.ndarray, vocab: int
                          ) -> tuple[np.ndarray, np.ndarray]:
    """Every term's code (ascending) and the number of texts it is in, merged chunk by chunk
    (memory: the distinct terms, not every (text, term) pair)."""
    codes, df = np.zeros(0, np.int64), np.zeros(0, np.int64)
    for a, b in _chunks(len(starts) - 1, vocab):
        chunk, chunk_df = np.unique(_chunk_pairs(ids, starts, vocab, a, b)[1],
                                    return_counts=True)
        both = np.concatenate([codes, chunk])
        order = np.argsort(both, kind="stable")  # two sorted runs: a merge
        both = both[order]
        new = np.ones(len(both), dtype=bool)
        np.not_equal(both[1:], both[:-1], out=new[1:])
        first = np.flatnonzero(new)
        df = np.add.reduceat(np.concatenate([df, chunk_df])[order], first) if len(first) \
            else df
        codes = both[first]
    return codes, df


def _weighted_rows(ids: np.ndarray, starts: np.ndarray, vocab: int, codes: np.ndarray,
                   column: np.ndarray, idf: np.ndarray, nnz: int) -> sp.csr_matrix:
    """The rows over the kept term ``codes`` (ascending; ``column`` and ``idf`` by code;
    ``nnz`` entries in all)."""
    n = len(starts) - 1
    indptr = np.zeros(n + 1, dtype=np.int64)
    indices = np.empty(nnz, dtype=np.int32)
    data = np.empty(nnz, dtype=np.float32)
    for a, b in _chunks(n, vocab):
        text, code, count = _chunk_pairs(ids, starts, vocab, a, b)
        at = np.minimum(np.searchsorted(codes, code), len(codes) - 1)
        hit = codes[at] == code
        text, at = text[hit], at[hit]
        weight = (1.0 + np.log(count[hit])) * idf[at]  # float64 until normalised
        norm = np.sqrt(np.bincount(text, weights=weight * weight, minlength=b - a))
        indptr[a + 1:b + 1] = indptr[a] + np.cumsum(np.bincount(text, minlength=b - a))
        indices[indptr[a]:indptr[b]] = column[at]
        data[indptr[a]:indptr[b]] = weight / norm[text]
    rows = sp.csr_matrix((data, indices, indptr), shape=(n, len(codes)))
    rows.sort_indices()
    return rows


def _term(code: int, words: list[str], vocab: int) -> str:
    if code < vocab:
        return words[code]
    a, b = divmod(code - vocab, vocab)
    return f"{words[a]} {words[b]}"
