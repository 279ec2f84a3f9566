"""Ranking message chunks by relevance to a query: Okapi BM25 over a plain tokenizer.

ReadSessionContext's ``relevant`` strategy (SPEC RS-2) ranks the other session's messages
against the model's query without an auxiliary model. BM25 is small enough to own (about
thirty lines here) rather than add a dependency (docs/decisions.md D55):

    score(chunk) = Σ over query terms t in the chunk of
                   idf(t) · tf·(k1 + 1) / (tf + k1·(1 - b + b·len/avglen))
    idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))        (never negative)

so a rare term of the query weighs far more than a common one, and a chunk that repeats a
term gains less and less. Tokens are lower-cased runs of letters and digits; CJK characters
count one each (they are written without spaces). Messages are cut into chunks of at most
:data:`CHUNK_CHARS` characters at whitespace, so a long message does not drown its one
relevant paragraph.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["CHUNK_CHARS", "Chunk", "chunk_text", "rank", "tokenize"]

CHUNK_CHARS = 1500
"""The longest chunk a message is cut into (characters)."""
K1 = 1.5
B = 0.75

_TOKEN = re.compile(
    r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]|[^\W_\u3040-\u30ff\u3400-\u4dbf"
    r"\u4e00-\u9fff\uac00-\ud7af]+"
)


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens; each CJK character is a token of its own."""
    return _TOKEN.findall(text.lower())


def chunk_text(text: str, size: int = CHUNK_CHARS) -> list[str]:
    """``text`` in pieces of at most ``size`` characters, cut at whitespace where possible."""
    if len(text) <= size:
        return [text]
    pieces = []
    rest = text
    while len(rest) > size:
        cut = rest.rfind(" ", size // 2, size)
        cut = size if cut < 0 else cut
        pieces.append(rest[:cut])
        rest = rest[cut:].lstrip()
    if rest:
        pieces.append(rest)
    return pieces


@dataclass(frozen=True, slots=True)
class Chunk:
    """A piece of a message: where it comes from and its text."""

    seq: int
    role: str
    part: int
    text: str


def rank(query: str, chunks: Sequence[Chunk]) -> list[tuple[float, Chunk]]:
    """The chunks that share a term with ``query``, best first (ties: the later first)."""
    terms = set(tokenize(query))
    if not terms or not chunks:
        return []
    counts: list[Counter[str]] = []
    lengths: list[int] = []
    for chunk in chunks:
        tokens = tokenize(chunk.text)
        lengths.append(len(tokens))
        counts.append(Counter(t for t in tokens if t in terms))
    average = (sum(lengths) / len(lengths)) or 1.0
    idf = _idf(terms, counts)
    scored = []
    for index, tf in enumerate(counts):
        if not tf:
            continue
        norm = K1 * (1 - B + B * lengths[index] / average)
        score = sum(idf[t] * n * (K1 + 1) / (n + norm) for t, n in tf.items())
        scored.append((score, index))
    scored.sort(key=lambda pair: (-pair[0], -pair[1]))
    return [(score, chunks[index]) for score, index in scored]


def _idf(terms: Iterable[str], counts: Sequence[Counter[str]]) -> dict[str, float]:
    total = len(counts)
    frequency = Counter(t for tf in counts for t in tf)
    return {t: math.log(1 + (total - frequency[t] + 0.5) / (frequency[t] + 0.5)) for t in terms}
