"""The Japanese rules: a sentence that is exactly one of a few shapes (私はベジタリアンです,
緑茶が好きです, 猫の名前はモチです, 大阪に住んでいます, 金曜日にリリースすることに決めました,
Postgresでいきましょう), with nothing in it that turns a statement into something else.

Japanese leaves the subject out: a sentence with none is the speaker's own (大阪に住んでいます
is "I live in Osaka"), one about anybody else names them (ボブはベジタリアンです) and matches
no rule. A decision said to the channel (ことに決めました, でいきましょう) is the channel's."""

from __future__ import annotations

import re

from memory_core.tiers.stated.rule import Render, Rule, first_fact

_KANJI = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff々〆ヶ"
_KATAKANA = "ァ-ヺー・"
_HIRAGANA = "ぁ-ゖ"

# Anything of these anywhere in the sentence, and it states nothing the rules may keep.
_REFUSE = re.compile(
    # a question, a quote
    r"[?「」『』\"“”`]|(?<!ぶ)どう|何|なに|どこ|誰|だれ|いつ|なぜ|なんで(?!す)|どれ|どの|どんな"
    r"|どちら|どっち|[かの][ねな]?[。.!〜~]*$|っけ"
    # negation, giving up
    r"|ない|なかっ|ません|ずに|じゃな|ではな|無い|いいえ|違|やめ|辞め|以外"
    # a condition, a wish, a guess, a plan
    r"|もし|たら|なら|れば|としたら|かも|だろう|でしょう|と思|と考え|はず|よう[だでな]|みたい"
    r"|らしい|たい|つもり|予定|べき|欲し|ほしい|かな|かしら|気がする|仮に|例えば|たとえば"
    # hearsay: what someone else says
    r"|と言っ|と言わ|って言|っていう|と聞|によると|そう[だでな]|だって|とのこと|と話|曰く"
    # a joke's markers
    r"|笑|草|(?<![A-Za-z])w+[。.!]*$|はいはい|どうせ|まさか|冗談|嘘|うそ|皮肉"
    r"|[\U0001F600-\U0001F64F\U0001F910-\U0001F92F\U0001F970-\U0001F97F]"
)
# Openers and closers that add nothing (ちなみに、…; …ですよね).
_LEAD = re.compile(
    r"^(?:(?:実は|ちなみに|ところで|そういえば|一応)[、,\s]*|(?:えっと|あ|はい|うん)[、,\s]+)+"
)
_TAIL = re.compile(r"[。.!〜~\s]+$|(?<=[すただきる])(?:よね|よ|ね)$")
_POINTING = frozenset(
    """
    私 わたし あたし 僕 ぼく 俺 おれ 自分 あなた 貴方 君 きみ お前 おまえ 彼 彼女 彼ら あいつ
    こいつ そいつ それ これ あれ この その あの ここ そこ あそこ こちら そちら こっち そっち
    みんな 皆 全部
    """.split()
)
_CLAUSE = ("けど", "けれど", "から", "ので", "のに", "でも", "ても", "って", "ながら", "ため")
_ME = r"(?P<me>(?:私|わたし|あたし|僕|ぼく|俺|おれ|自分)は)?"
_MINE = r"(?:(?:私|わたし|あたし|僕|ぼく|俺|おれ|自分|うち)の)?"
_WE = r"(?:(?:私たち|わたしたち|僕たち|僕ら|俺たち|我々|うち|みんな|チーム)(?:は|で)[、,]?)"
_COPULA = r"(?P<cop>です|だ|なんです|なんだ)?"
_NOUN = rf"[{_KANJI}{_KATAKANA}A-Za-z0-9 .&+#-]"  # no hiragana: a name, not a clause
_THING = r"[^\sはが、,。!]"  # no は or が: they start another part of the sentence
_DIETS = (
    r"ベジタリアン|ヴィーガン|ビーガン|ペスカタリアン|菜食主義者|下戸|左利き|花粉症|猫舌"
    r"|乳糖不耐症"
)
_JOBS = (
    r"エンジニア|プログラマー?|デザイナー|教師|教員|看護師|医師|医者|学生|大学生|高校生|中学生"
    r"|大学院生|院生|弁護士|会計士|税理士|研究者|公務員|会社員|主婦|主夫|薬剤師|獣医|翻訳者"
    r"|翻訳家|通訳|編集者|記者|作家|料理人|シェフ|美容師|保育士|建築家|フリーランス|経営者"
    r"|漫画家|イラストレーター|写真家|ミュージシャン|消防士|警察官|農家|大工|司書|教授|講師"
    r"|インターン|アナリスト|コンサルタント"
)
_KIN = (
    r"猫|ねこ|ネコ|子猫|愛猫|犬|いぬ|イヌ|子犬|愛犬|うさぎ|ウサギ|ハムスター|インコ|小鳥|金魚"
    r"|亀|カメ|ペット|息子|娘|夫|妻|旦那|嫁|兄|姉|弟|妹"
)
_NAME = (
    rf"(?P<n>[{_KATAKANA}]{{1,10}}?|[{_HIRAGANA}]{{1,8}}?|[{_KANJI}]{{1,4}}?(?:ちゃん|くん|君)?"
    rf"|[A-Za-z][A-Za-z'-]{{0,15}}?)"
)
_NOT_NAMES = frozenset({"まだ", "なし", "秘密", "ひみつ", "内緒", "ないしょ", "未定", "不明"})


def match(sentence: str, speaker: str) -> tuple[str, str, bool] | None:
    """(kind, fact text, about the speaker) when ``sentence`` is exactly one rule's shape."""
    core = _LEAD.sub("", _TAIL.sub("", _TAIL.sub("", sentence)))
    if not core or core[-1] not in _LAST_CHARACTERS:
        return None  # (most sentences: no rule ends so)
    return first_fact(_RULES, core, sentence, speaker, _REFUSE)


def _plain(slot: str) -> bool:
    """A slot that says what it is by itself: no pronoun, no second clause."""
    slot = slot.strip()
    if not slot or any(word in slot for word in _CLAUSE):
        return False
    return not any(slot == p or slot.startswith(p) for p in _POINTING)


def _said(m: re.Match[str]) -> bool:
    """A bare noun is no statement: it needs 私は or a copula (ベジタリアンです)."""
    return bool(m["me"] or m["cop"])


def _state(m: re.Match[str], name: str) -> str | None:
    return f"{name}は{m['x']}です" if _said(m) and _plain(m["x"]) else None


def _allergy(m: re.Match[str], name: str) -> str | None:
    return f"{name}は{m['x']}アレルギーです" if _said(m) and _plain(m["x"]) else None


def _lives(m: re.Match[str], name: str) -> str | None:
    return f"{name}は{m['x']}に住んでいます" if _plain(m["x"]) else None


def _from(m: re.Match[str], name: str) -> str | None:
    return f"{name}は{m['x']}{m['k']}です" if _plain(m["x"]) else None


def _named(m: re.Match[str], name: str) -> str | None:
    if m["n"] in _NOT_NAMES:
        return None
    return f"{name}の{m['r']}の名前は{m['n']}です"


def _keeps(m: re.Match[str], name: str) -> str | None:
    if m["n"] in _NOT_NAMES:
        return None
    return f"{name}は{m['n']}という{m['r']}を飼っています"


def _likes(m: re.Match[str], name: str) -> str | None:
    return f"{name}は{m['x']}が{m['v']}です" if _plain(m["x"]) else None


def _side(m: re.Match[str], name: str) -> str | None:
    if m["x"] == "立" or not (_said(m) and _plain(m["x"])):
        return None  # 立派です: "splendid", not a side anybody takes
    return f"{name}は{m['x']}派です"


def _favourite(m: re.Match[str], name: str) -> str | None:
    if not (_plain(m["c"]) and _plain(m["x"])):
        return None
    return f"{name}の好きな{m['c']}は{m['x']}です"


def _decided_to(m: re.Match[str], name: str) -> str | None:
    return f"{m['x']}ことに決定" if _plain(m["x"]) else None


def _decided_on(m: re.Match[str], name: str) -> str | None:
    return f"{m['x']}に決定" if _plain(m["x"]) else None


def _rule(pattern: str, kind: str, render: Render) -> Rule:
    return Rule(re.compile(pattern), kind, render)


# The characters a rule's sentence ends with (です, 好き, 派, 決定, …, a diet or a job).
_LAST_CHARACTERS = frozenset("すだるたきい手派定りう前住身ー") | {
    word.rstrip("?")[-1] for word in f"{_JOBS}|{_DIETS}".split("|")
}
_PLACE = rf"(?P<x>{_NOUN}{{1,15}})"
_RULES: tuple[Rule, ...] = (
    _rule(rf"{_ME}(?P<x>{_DIETS}){_COPULA}", "profile", _state),
    _rule(
        rf"{_ME}(?P<x>{_NOUN}{{1,10}})アレルギー(?P<cop>です|だ|があります|がある|持ちです)?",
        "profile",
        _allergy,
    ),
    _rule(
        rf"{_ME}(?P<x>{_NOUN}{{0,8}}?(?:{_JOBS}))"
        r"(?P<cop>です|だ|をしています|をしてます|として働いています)?",
        "profile",
        _state,
    ),
    _rule(rf"{_ME}{_PLACE}に住んで(?:います|いる|ます|る)", "profile", _lives),
    _rule(rf"{_ME}{_PLACE}(?P<k>在住|出身)(?:です|だ)?", "profile", _from),
    _rule(
        rf"{_MINE}(?P<r>{_KIN})の名前は{_NAME}(?:です|だ|といいます|と言います|っていいます)?",
        "profile",
        _named,
    ),
    _rule(rf"{_MINE}(?P<r>{_KIN})は{_NAME}という名前(?:です|だ)?", "profile", _named),
    _rule(rf"{_ME}{_NAME}という(?P<r>{_KIN})を飼って(?:います|いる|ます|る)", "profile", _keeps),
    _rule(
        rf"{_ME}(?P<x>{_THING}{{1,15}})が(?P<v>大好き|好き|大嫌い|嫌い|苦手){_COPULA}",
        "preference",
        _likes,
    ),
    _rule(rf"{_ME}(?P<x>{_THING}{{1,8}})派{_COPULA}", "preference", _side),
    _rule(
        rf"{_MINE}(?:一番)?好きな(?P<c>{_THING}{{1,8}})は(?P<x>{_THING}{{1,15}}?)(?:です|だ)?",
        "preference",
        _favourite,
    ),
    _rule(
        rf"{_WE}?(?P<x>[^\s?]{{2,40}}?)こと(?:に|が)"
        r"(?:決めました|決めた|決まりました|決まった|決定しました)",
        "decision",
        _decided_to,
    ),
    _rule(
        rf"{_WE}?(?P<x>{_THING}{{1,20}})"
        r"(?:に決まりました|に決定しました|に決定です|に決定|で決まり|で決定|でいきましょう|で行きましょう"
        r"|でいこう|で行こう)",
        "decision",
        _decided_on,
    ),
    _rule(rf"{_WE}(?P<x>{_THING}{{1,20}})に決めました", "decision", _decided_on),
)
