"""Words for the builders: whitespace words, or `jieba` words for Chinese (language zh).

A snippet of N words is the text from its first word to its last, verbatim (newlines and
inner spaces kept), so it is a substring of the source document. For Chinese that is the
jieba tokens re-joined without spaces, as the DC-PDD code builds PatentMIA snippets
(Zhang et al. 2024); whitespace tokens are not counted as words.
"""

from __future__ import annotations

import logging
import re

from pddkit.errors import PddkitError

_WORD = re.compile(r"\S+")


def is_chinese(language: str) -> bool:
    """zh, zh-CN, zh_Hant, ...: languages written without spaces between words."""
    return language.lower().replace("_", "-").split("-")[0] == "zh"


def _jieba():
    try:
        import jieba
    except ImportError:
        raise PddkitError("Chinese words (language zh) need jieba: "
                          "`pip install pddkit[zh]`") from None
    jieba.setLogLevel(logging.WARNING)
    return jieba


def word_spans(text: str, language: str = "en") -> list[tuple[int, int]]:
    """(start, end) character offsets of each word of `text`."""
    if is_chinese(language):
        return [(start, end) for word, start, end in _jieba().tokenize(text)
                if not word.isspace()]
    return [m.span() for m in _WORD.finditer(text)]


def words(text: str, language: str = "en") -> list[str]:
    """The words of `text` (whitespace words, or jieba words for Chinese)."""
    return [text[a:b] for a, b in word_spans(text, language)]


def snippet(text: str, spans: list[tuple[int, int]], start: int, n: int) -> str:
    """Words `start` .. `start + n - 1` of `text`, verbatim from the first to the last."""
    return text[spans[start][0]:spans[start + n - 1][1]]
