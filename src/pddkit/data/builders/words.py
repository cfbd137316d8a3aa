"""Words for the builders: whitespace words, or `jieba` words for Chinese (language zh).

A snippet of N words is the text from its first word to its last, verbatim (newlines and
inner spaces kept), so it is a substring of the source document. For Chinese the words
are jieba's tokens as `jieba.lcut` gives them, whitespace tokens included and counted
(one per space or newline), and a snippet is N consecutive tokens joined with nothing
between them: `"".join(jieba.lcut(text)[i:i + N])`, as the DC-PDD code cuts its texts to
N words (Zhang et al. 2024, com_det_sco.py). Nothing is inserted or removed: the source's
own spaces and newlines stay in the snippet.
"""

from __future__ import annotations

import logging
import re

from pddkit.errors import PddkitError, install_hint

_WORD = re.compile(r"\S+")


def is_chinese(language: str) -> bool:
    """zh, zh-CN, zh_Hant, ...: languages written without spaces between words."""
    return language.lower().replace("_", "-").split("-")[0] == "zh"


def _jieba():
    try:
        import jieba
    except ImportError:
        raise PddkitError("Chinese words (language zh) need jieba: " + install_hint("zh")) from None
    jieba.setLogLevel(logging.WARNING)
    return jieba


def word_spans(text: str, language: str = "en") -> list[tuple[int, int]]:
    """(start, end) character offsets of each word of `text` (for Chinese every jieba
    token, whitespace included: they tile the text)."""
    if is_chinese(language):
        return [(start, end) for _word, start, end in _jieba().tokenize(text)]
    return [m.span() for m in _WORD.finditer(text)]


def words(text: str, language: str = "en") -> list[str]:
    """The words of `text` (whitespace words, or jieba's tokens for Chinese)."""
    return [text[a:b] for a, b in word_spans(text, language)]


def snippet(text: str, spans: list[tuple[int, int]], start: int, n: int) -> str:
    """Words `start` .. `start + n - 1` of `text`, verbatim from the first to the last."""
    return text[spans[start][0]:spans[start + n - 1][1]]
