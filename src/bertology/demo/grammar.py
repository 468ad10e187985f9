"""The demo's grammar: propositions (who did what to what, how, where, when), their wordings, and
`realise`, which turns a proposition and a wording into one English sentence.

A `Prop` is the meaning (subject and object noun phrases, verb, optional adverb, place, time and
closing clause, tense, negation); a `Wording` is how it is said (active or passive voice, which synonym
of each word, where the adverb and the time go, contracted or full negation). Pure and deterministic:
the random choices live in `sampling`.
"""

from __future__ import annotations

from dataclasses import dataclass

from bertology.demo.lexicon import PRONOUNS, Concept, Verb

# --------------------------------------------------------------------------------------------------
# Propositions and their wordings
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NP:
    """A noun phrase: a noun (with determiner and optional adjective) or a pronoun lemma."""

    noun: Concept | None = None
    det: str = "the"
    adj: Concept | None = None
    pronoun: str | None = None

    @property
    def kind(self) -> str:
        if self.pronoun:
            return "person" if self.pronoun != "it" else "artifact"
        assert self.noun is not None
        return self.noun.kind

    @property
    def person(self) -> str:
        return PRONOUNS[self.pronoun][2] if self.pronoun else "3sg"


@dataclass(frozen=True)
class Prop:
    """Who did what to what, how, where and when; `negated` with 'not' or (never=True) 'never'."""

    subj: NP
    verb: Verb
    obj: NP
    adverb: Concept | None = None
    place: str | None = None
    time: str | None = None
    tense: str = "past"
    negated: bool = False
    never: bool = False
    clause: str | None = None  # a closing adverbial clause: "before the guests arrived"


@dataclass(frozen=True)
class Wording:
    """How a proposition is said: `syn` picks each slot's synonym (subj, verb, obj, subj adj, obj adj, adverb)."""

    passive: bool = False
    syn: tuple[int, int, int, int, int, int] = (0, 0, 0, 0, 0, 0)
    adverb_first: bool = False
    time_first: bool = False
    contracted: bool = False


# --------------------------------------------------------------------------------------------------
# Realisation
# --------------------------------------------------------------------------------------------------


def surface(c: Concept, index: int) -> str:
    """The `index`-th synonym of a concept (cyclic)."""
    return c.forms[index % len(c.forms)]


def article(det: str, next_word: str) -> str:
    """'a' or 'an' before `next_word` for an indefinite `det`; other determiners unchanged."""
    if det in ("a", "an"):
        return "an" if next_word[0].lower() in "aeiou" else "a"
    return det


def np_text(np_: NP, case: str, syn_noun: int = 0, syn_adj: int = 0) -> str:
    """Render a noun phrase in subject ('subj') or object ('obj') case."""
    if np_.pronoun:
        return PRONOUNS[np_.pronoun][0 if case == "subj" else 1]
    assert np_.noun is not None
    noun = surface(np_.noun, syn_noun)
    if np_.noun.kind in ("f", "m"):
        return noun
    words = [surface(np_.adj, syn_adj)] if np_.adj else []
    words.append(noun)
    return " ".join([article(np_.det, words[0])] + words)


def be_form(person: str, tense: str) -> str:
    """The form of 'be' for a person ('1sg', '3sg', 'pl') and tense ('past', 'present')."""
    if tense == "past":
        return "were" if person == "pl" else "was"
    return {"1sg": "am", "3sg": "is", "pl": "are"}[person]


def finish(words: list[str]) -> str:
    """Join the non-empty words, capitalise the first letter, end with a full stop."""
    text = " ".join(w for w in words if w)
    return text[0].upper() + text[1:] + "."


def realise(p: Prop, w: Wording) -> str:
    """One English sentence for proposition `p` worded as `w`."""
    verb = p.verb.forms[w.syn[1] % len(p.verb.forms)]
    adverb = surface(p.adverb, w.syn[5]) if p.adverb else ""
    if w.passive:
        head = np_text(p.obj, "subj", w.syn[2], w.syn[4])
        be = be_form(p.obj.person, p.tense)
        if p.negated:
            neg = "never" if p.never else ("n't" if w.contracted else "not")
            aux = [be + "n't"] if neg == "n't" else [be, neg]
        else:
            aux = [be]
        pre = adverb if w.adverb_first else ""
        post = "" if w.adverb_first else adverb
        middle = [*aux, pre, verb[3], "by", np_text(p.subj, "obj", w.syn[0], w.syn[3]), post]
    else:
        head = np_text(p.subj, "subj", w.syn[0], w.syn[3])
        third = p.subj.person == "3sg"
        finite = verb[2] if p.tense == "past" else verb[1 if third else 0]
        if p.negated and not p.never:
            do = "did" if p.tense == "past" else ("does" if third else "do")
            group = [do + "n't" if w.contracted else f"{do} not", verb[0]]
        elif p.negated:
            group = ["never", finite]
        else:
            group = [adverb, finite] if (w.adverb_first and adverb) else [finite]
        obj = np_text(p.obj, "obj", w.syn[2], w.syn[4])
        post = "" if (w.adverb_first and not p.negated) else adverb
        middle = [*group, obj, post]
    words = [head, *middle, p.place or ""]
    if p.time:
        words = [p.time + ",", *words] if w.time_first else [*words, p.time]
    if p.clause:
        words.append(p.clause)
    return finish(words)
