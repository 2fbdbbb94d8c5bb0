"""Facts learned without a model: the few plainly stated in a message, found by a small set
of rules, in English and Japanese, whenever the extractive summariser stands in for the model
(offline, a daily token budget reached, a model that keeps failing or answers garbage).

"I'm vegetarian", "my cat is called Mochi", "we decided to ship on Friday", 私はベジタリアン
です, 大阪に住んでいます, 金曜日にリリースすることに決めました: a whole sentence of one shape
said by its speaker, about themself (a profile fact or a preference) or about what the channel
decided. Anything else is left in the raw text: a question, a negation, a condition or a wish,
hearsay and quotes, a joke's markers, a sentence with more in it than the rule's shape. The
rules never guess: a fact they miss is still in the log and the summaries; one they invent
would be believed.

Each fact goes the way a model's fact goes (a ``FactDraft`` marked as the rules', routed to
the speaker's person scope or the channel, merged, forgotten like any other): see
``memory_core.tiers.summarize``.
"""

from __future__ import annotations

from memory_core.tiers.stated.rules import StatedFact, facts_in, stated_facts

__all__ = ["StatedFact", "facts_in", "stated_facts"]
