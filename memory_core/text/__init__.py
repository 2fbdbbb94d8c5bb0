"""Text rules the whole core shares: token counts, language, CJK characters, sentences."""
