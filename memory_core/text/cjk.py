"""Which characters belong to scripts written without spaces (Japanese, Chinese): the one
rule the core uses to decide where words and sentences cannot be found by spaces.

Kana (hiragana and katakana), the CJK ideographs with extension A and the compatibility
ideographs, and half-width katakana. Latin letters, digits and CJK punctuation are not in it.
"""

from __future__ import annotations

import re

# The body of a character class, for patterns that combine it with other characters.
CJK_CHARACTERS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f"
CJK_CHARACTER = re.compile(f"[{CJK_CHARACTERS}]")
CJK_RUN = re.compile(f"[{CJK_CHARACTERS}]+")
