"""The demo data source: small GLUE-shaped tasks generated from the project's own word lists and templates.

Every example is real English built from a *proposition* (subject, verb, object, optional adjectives,
adverb, place and time, tense, negation) and a *wording* (active or passive voice, which synonym of
each word, where the adverb and the time go, contracted or full negation). Tasks are defined by what
they change between the two texts of a pair:

=========  ============================================================================================
task       how text_b relates to text_a, and the label
=========  ============================================================================================
cola       one sentence: grammatical (1) or broken by a swapped word, agreement or verb-form error (0)
sst2       one review sentence: sentiment word (adjective or verb) whose polarity negation flips;
           concessive clauses of the opposite polarity make single words unreliable
mrpc       equivalent (1) = the same proposition reworded (synonyms, voice, modifier order);
           not_equivalent (0) = subject, object, verb or polarity changed (often reworded as well)
stsb       score 5 - k (+-0.3) for k of five parts (subject, verb, object, adjective, place) changed
qqp        duplicate (1) = the same intent/verb/noun asked with another template or synonyms
mnli       entailment (simplified premise, hypernyms), neutral (adds a modifier the premise lacks),
           contradiction (polarity flipped)
qnli       a wh-question and a sentence that answers it (entailment, 0) or not (1)
rte        hypothesis simplified from the premise (entailment, 0) or with a changed argument or
           flipped polarity (not_entailment, 1)
=========  ============================================================================================

Determinism: one NumPy stream per (seed, task, split). Train and validation never share a text pair:
each pair is assigned to one split by a hash of its texts, and the other split's pairs are rejected.
Labels are balanced exactly (regression scores: the number of changed parts is balanced).
"""

from __future__ import annotations

import hashlib
import zlib
from dataclasses import dataclass, replace
from typing import Callable, Sequence, TypeVar

import numpy as np
import pandas as pd

from bertology.tasks import SPLITS, get_task

T = TypeVar("T")

# --------------------------------------------------------------------------------------------------
# Word lists. A concept lists synonymous surfaces; the first is the canonical one.
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Concept:
    """A word meaning with its synonymous surfaces; `kind` groups nouns (person, vehicle, ...)."""

    forms: tuple[str, ...]
    kind: str = ""


@dataclass(frozen=True)
class Verb:
    """A transitive verb: per synonym (base, 3rd singular, past, past participle); object kinds it takes."""

    forms: tuple[tuple[str, str, str, str], ...]
    objects: tuple[str, ...]


def _concepts(kind: str, *groups: str) -> tuple[Concept, ...]:
    """'car/automobile' -> Concept(('car', 'automobile'), kind)."""
    return tuple(Concept(tuple(g.split("/")), kind) for g in groups)


def _regular(base: str) -> tuple[str, str, str, str]:
    third = base + ("es" if base.endswith(("s", "sh", "ch", "x")) else "s")
    if base.endswith("y") and base[-2] not in "aeiou":
        third, past = base[:-1] + "ies", base[:-1] + "ied"
    else:
        past = base + ("d" if base.endswith("e") else "ed")
    return base, third, past, past


def _verb(spec: str, objects: str) -> Verb:
    """'buy:bought:bought/purchase' -> irregular forms given after ':', regular otherwise."""
    forms = []
    for surface in spec.split("/"):
        parts = surface.split(":")
        base = parts[0]
        if len(parts) == 3:
            forms.append((base, _regular(base)[1], parts[1], parts[2]))
        else:
            forms.append(_regular(base))
    return Verb(tuple(forms), tuple(objects.split()))


PERSONS = _concepts("person", "teacher", "doctor/physician", "student/pupil", "farmer", "pilot",
                    "lawyer/attorney", "nurse", "chef/cook", "writer/author", "neighbor", "manager/boss",
                    "child/kid", "singer", "driver", "baker", "sailor", "engineer", "artist")
NAMES = (*_concepts("f", "Anna", "Maria", "Sarah", "Emma", "Lucy"),
         *_concepts("m", "Tom", "James", "David", "Peter", "Daniel"))
THINGS = (*_concepts("vehicle", "car/automobile", "bicycle/bike", "truck", "boat", "van", "tractor"),
          *_concepts("building", "house/home", "shop/store", "barn", "cottage", "bridge", "garage"),
          *_concepts("artifact", "table", "lamp", "chair", "camera", "clock", "piano", "painting/picture",
                     "present/gift", "bag", "window", "radio", "mirror", "umbrella"),
          *_concepts("text", "letter", "book", "report", "note", "poem", "contract/agreement", "recipe",
                     "diary/journal"),
          *_concepts("bakery", "cake", "pie", "pizza", "cookie/biscuit", "muffin"),
          *_concepts("food", "soup", "salad", "meal", "stew"))
ADJECTIVES: dict[str, tuple[Concept, ...]] = {
    "person": _concepts("", "young", "tall", "friendly", "tired", "busy", "old", "clever/smart", "famous"),
    "thing": _concepts("", "old", "new", "big/large", "small/little", "red", "blue",
                       "expensive/costly", "cheap/inexpensive", "beautiful/lovely", "strange/odd", "green"),
    "text": _concepts("", "long/lengthy", "short/brief", "old", "new", "strange/odd", "secret", "important"),
    "food": _concepts("", "fresh", "warm", "delicious/tasty", "sweet", "huge/enormous", "small/little"),
}
ADJ_GROUP = {"vehicle": "thing", "building": "thing", "artifact": "thing", "text": "text",
             "bakery": "food", "food": "food", "person": "person", "f": "person", "m": "person"}
ADVERBS = _concepts("", "quickly/rapidly", "carefully/cautiously", "slowly", "quietly/silently",
                    "happily/gladly", "eagerly", "finally/eventually", "suddenly/abruptly", "proudly",
                    "nervously")
VERBS = (
    _verb("buy:bought:bought/purchase", "vehicle building artifact text bakery food"),
    _verb("sell:sold:sold", "vehicle building artifact bakery"),
    _verb("repair/fix", "vehicle building artifact"),
    _verb("paint", "vehicle building artifact"),
    _verb("clean", "vehicle building artifact"),
    _verb("build:built:built/construct", "building vehicle artifact"),
    _verb("read:read:read", "text"),
    _verb("write:wrote:written", "text"),
    _verb("bake", "bakery"),
    _verb("cook/prepare", "food"),
    _verb("eat:ate:eaten", "food bakery"),
    _verb("find:found:found/discover", "artifact text vehicle"),
    _verb("lose:lost:lost/misplace", "artifact text"),
    _verb("carry", "artifact text bakery food"),
    _verb("deliver", "artifact text bakery food"),
    _verb("describe", "vehicle building artifact text person"),
    _verb("examine/inspect", "vehicle building artifact text"),
    _verb("help/assist", "person"),
    _verb("visit", "person building"),
    _verb("meet:met:met", "person"),
    _verb("thank", "person"),
    _verb("call/phone", "person"),
)
# Verbs whose object cannot be left out ("He ate." is fine English, "He thanked." is not).
STRICTLY_TRANSITIVE = {"thank", "describe", "examine", "repair", "find", "lose", "deliver", "build"}
PLACES = ("in the garden", "at the market", "near the station", "in the city", "at the office",
          "in the village", "at home", "on the street", "behind the school", "in the kitchen")
TIMES = {"past": ("yesterday", "last week", "on Monday", "this morning", "last summer", "after lunch",
                  "two days ago", "last night"),
         "present": ("every day", "on weekends", "every morning", "in the evening", "each summer", "after lunch")}
HYPERNYMS = {"person": ("a", "person"), "f": ("a", "woman"), "m": ("a", "man"), "vehicle": ("a", "vehicle"),
             "building": ("a", "building"), "artifact": ("an", "object"), "text": ("a", "document"),
             "bakery": ("some", "food"), "food": ("some", "food")}
CLAUSES = {"past": ("before the guests arrived", "while the others were sleeping", "after the rain had stopped",
                    "when nobody was watching", "because the old one was broken", "as everyone had hoped",
                    "although it was very late", "so that the family could stay longer"),
           "present": ("before the guests arrive", "while the others are sleeping", "when nobody is watching",
                       "because the old one is broken", "although it is very late", "as everyone hopes")}
PERSON_DETS = ("the", "the", "a", "my", "our", "their")
THING_DETS = ("the", "the", "a", "his", "her", "their", "this", "my")
# Kovaleva et al.'s negation words (footnote 6) are among these surfaces: not, never, nothing, neither,
# nor, didn't, don't, isn't, wasn't, ...

# Pronoun lemma -> (subject case, object case, person): person is 1sg, 3sg or pl (for agreement).
PRONOUNS = {"he": ("he", "him", "3sg"), "she": ("she", "her", "3sg"), "they": ("they", "them", "pl"),
            "it": ("it", "it", "3sg"), "i": ("I", "me", "1sg"), "we": ("we", "us", "pl")}

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


class Rng:
    """Small helpers over a NumPy Generator."""

    def __init__(self, gen: np.random.Generator) -> None:
        self.gen = gen

    def pick(self, seq: Sequence[T]) -> T:
        return seq[int(self.gen.integers(len(seq)))]

    def chance(self, p: float) -> bool:
        return bool(self.gen.random() < p)

    def other(self, seq: Sequence[T], current: T) -> T:
        """A random element different from `current`."""
        choices = [x for x in seq if x != current]
        return self.pick(choices)

    def uniform(self, lo: float, hi: float) -> float:
        return float(self.gen.uniform(lo, hi))

    def wording(self, passive: float = 0.25) -> Wording:
        return Wording(self.chance(passive), tuple(int(x) for x in self.gen.integers(0, 6, size=6)),  # type: ignore[arg-type]
                       self.chance(0.3), self.chance(0.3), self.chance(0.5))


def _surface(c: Concept, index: int) -> str:
    return c.forms[index % len(c.forms)]


def _article(det: str, next_word: str) -> str:
    if det in ("a", "an"):
        return "an" if next_word[0].lower() in "aeiou" else "a"
    return det


def np_text(np_: NP, case: str, syn_noun: int = 0, syn_adj: int = 0) -> str:
    """Render a noun phrase in subject ('subj') or object ('obj') case."""
    if np_.pronoun:
        return PRONOUNS[np_.pronoun][0 if case == "subj" else 1]
    assert np_.noun is not None
    noun = _surface(np_.noun, syn_noun)
    if np_.noun.kind in ("f", "m"):
        return noun
    words = [_surface(np_.adj, syn_adj)] if np_.adj else []
    words.append(noun)
    return " ".join([_article(np_.det, words[0])] + words)


def _be(person: str, tense: str) -> str:
    if tense == "past":
        return "were" if person == "pl" else "was"
    return {"1sg": "am", "3sg": "is", "pl": "are"}[person]


def _finish(words: list[str]) -> str:
    text = " ".join(w for w in words if w)
    return text[0].upper() + text[1:] + "."


def realise(p: Prop, w: Wording) -> str:
    """One English sentence for proposition `p` worded as `w`."""
    verb = p.verb.forms[w.syn[1] % len(p.verb.forms)]
    adverb = _surface(p.adverb, w.syn[5]) if p.adverb else ""
    if w.passive:
        head = np_text(p.obj, "subj", w.syn[2], w.syn[4])
        be = _be(p.obj.person, p.tense)
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
    return _finish(words)


# --------------------------------------------------------------------------------------------------
# Random propositions and their transformations
# --------------------------------------------------------------------------------------------------


def random_subject(r: Rng, adj_p: float = 0.3) -> NP:
    roll = r.gen.random()
    if roll < 0.25:
        return NP(pronoun=r.pick(("he", "she", "they", "i", "we")))
    if roll < 0.45:
        return NP(noun=r.pick(NAMES))
    adj = r.pick(ADJECTIVES["person"]) if r.chance(adj_p) else None
    return NP(noun=r.pick(PERSONS), det=r.pick(PERSON_DETS), adj=adj)


def random_object(r: Rng, verb: Verb, adj_p: float = 0.5, pronoun_p: float = 0.1) -> NP:
    kind = r.pick(verb.objects)
    if kind == "person":
        if r.chance(0.2):
            return NP(pronoun=r.pick(("he", "she", "they")))
        subj_like = random_subject(r, adj_p)
        return subj_like if not subj_like.pronoun else NP(noun=r.pick(PERSONS), det=r.pick(PERSON_DETS))
    if r.chance(pronoun_p):
        return NP(pronoun="it")
    noun = r.pick([t for t in THINGS if t.kind == kind])
    adj = r.pick(ADJECTIVES[ADJ_GROUP[kind]]) if r.chance(adj_p) else None
    return NP(noun=noun, det=r.pick(THING_DETS), adj=adj)


def random_prop(r: Rng, *, modifiers: float = 0.4, negated: float = 0.0, pronoun_obj: float = 0.1) -> Prop:
    verb = r.pick(VERBS)
    subj = random_subject(r, adj_p=modifiers * 0.6)
    obj = random_object(r, verb, adj_p=modifiers + 0.1, pronoun_p=pronoun_obj)
    while obj.noun is not None and obj.noun == subj.noun or obj.pronoun and obj.pronoun == subj.pronoun:
        obj = random_object(r, verb, adj_p=modifiers + 0.1, pronoun_p=pronoun_obj)
    tense = "past" if r.chance(0.75) else "present"
    return Prop(
        subj=subj,
        verb=verb,
        obj=obj,
        adverb=r.pick(ADVERBS) if r.chance(modifiers) else None,
        place=r.pick(PLACES) if r.chance(modifiers) else None,
        time=r.pick(TIMES[tense]) if r.chance(modifiers * 0.7) else None,
        tense=tense,
        clause=r.pick(CLAUSES[tense]) if r.chance(modifiers * 0.4) else None,
        negated=r.chance(negated),
        never=r.chance(0.3),
    )


def change_part(r: Rng, p: Prop, part: str) -> Prop:
    """Replace one part's meaning: subject, verb, object, adjective, adverb, place or time."""
    if part == "subject":
        while True:
            new = random_subject(r, adj_p=0.0)
            new = replace(new, adj=p.subj.adj if new.noun and new.noun.kind == "person" else None)
            if (new.noun, new.pronoun) != (p.subj.noun, p.subj.pronoun):
                return replace(p, subj=new)
    if part == "verb":
        kind = "person" if p.obj.kind in ("f", "m") else p.obj.kind
        verbs = [v for v in VERBS if v is not p.verb and kind in v.objects and v.forms[0][0] != "describe"]
        return replace(p, verb=r.pick(verbs))
    if part == "object":
        if p.obj.pronoun or p.obj.kind in ("f", "m"):
            others = [t for t in PERSONS if t != p.obj.noun] if p.obj.kind in ("person", "f", "m") else None
            if others is None:
                return change_part(r, p, "verb")
            return replace(p, obj=NP(noun=r.pick(others), det=r.pick(PERSON_DETS)))
        assert p.obj.noun is not None
        same_kind = [t for t in (PERSONS if p.obj.kind == "person" else THINGS)
                     if t.kind == p.obj.kind and t != p.obj.noun]
        return replace(p, obj=replace(p.obj, noun=r.pick(same_kind)))
    if part == "adjective":
        group = ADJECTIVES[ADJ_GROUP.get(p.obj.kind, "thing")]
        if p.obj.pronoun or p.obj.kind in ("f", "m"):
            return change_part(r, p, "adverb")
        return replace(p, obj=replace(p.obj, adj=r.other(group, p.obj.adj)))
    if part == "adverb":
        return replace(p, adverb=r.other(ADVERBS, p.adverb))
    if part == "place":
        return replace(p, place=r.other(PLACES, p.place))
    if part == "time":
        return replace(p, time=r.other(TIMES[p.tense], p.time))
    if part == "polarity":
        return replace(p, negated=not p.negated)
    raise ValueError(f"unknown part {part!r}")


def simplify(r: Rng, p: Prop, hypernym_p: float = 0.25, protect: str | None = None) -> Prop:
    """An entailed, simpler proposition: drop modifiers (at least one when any), maybe a hypernym
    (never for the role `protect`, 'subj' or 'obj': a changed argument must stay visibly changed)."""
    slots = [s for s in ("subj_adj", "obj_adj", "adverb", "place", "time", "clause")
             if (s == "subj_adj" and p.subj.adj) or (s == "obj_adj" and p.obj.adj) or getattr(p, s, None)]
    drop = {s for s in slots if r.chance(0.6)}
    if slots and not drop:
        drop = {r.pick(slots)}
    q = replace(p,
                subj=replace(p.subj, adj=None) if "subj_adj" in drop else p.subj,
                obj=replace(p.obj, adj=None) if "obj_adj" in drop else p.obj,
                adverb=None if "adverb" in drop else p.adverb,
                place=None if "place" in drop else p.place,
                time=None if "time" in drop else p.time,
                clause=None if "clause" in drop else p.clause)
    if not q.negated and r.chance(hypernym_p):  # "the nurse" -> "a person" (upward, so only if positive)
        role = r.pick([x for x in ("subj", "obj") if x != protect])
        np_ = getattr(q, role)
        if np_.noun is not None:
            det, word = HYPERNYMS[np_.noun.kind]
            kind = "person" if np_.noun.kind in ("f", "m") else np_.noun.kind
            q = replace(q, **{role: NP(noun=Concept((word,), kind), det=det)})
    return q


def enrich(r: Rng, p: Prop, premise: Prop) -> Prop:
    """A proposition that says more than `premise` (neutral w.r.t. it): `p` (the premise or a simplification
    of it) with a modifier that the premise lacks."""
    options = []
    if premise.adverb is None:
        options.append(lambda: replace(p, adverb=r.pick(ADVERBS)))
    if premise.place is None:
        options.append(lambda: replace(p, place=r.pick(PLACES)))
    if premise.clause is None:
        options.append(lambda: replace(p, clause=r.pick(CLAUSES[p.tense])))
    if premise.time is None:
        options.append(lambda: replace(p, time=r.pick(TIMES[p.tense])))
    if p.obj.noun is not None and premise.obj.adj is None and p.obj.kind not in ("f", "m"):
        group = ADJECTIVES[ADJ_GROUP[p.obj.kind]]
        options.append(lambda: replace(p, obj=replace(p.obj, adj=r.pick(group))))
    if not options:
        raise _Retry
    return r.pick(options)()


def reword(r: Rng, p: Prop, w: Wording) -> Wording:
    """Another wording of the same proposition (voice, synonyms, modifier order, contraction)."""
    for _ in range(20):
        new = replace(r.wording(), passive=(not w.passive) if r.chance(0.4) else w.passive)
        if realise(p, new) != realise(p, w):
            return new
    return new


class _Retry(Exception):
    """This draw cannot give the wanted example; draw again."""


# --------------------------------------------------------------------------------------------------
# Tasks: each maker draws one (text_a, text_b, label) for a wanted label
# --------------------------------------------------------------------------------------------------

Example = tuple[str, str | None, int | float]

WORKS = ("film", "movie", "novel", "play", "show", "documentary", "album", "series", "comedy", "musical")
ASPECTS = ("plot", "acting", "dialogue", "soundtrack", "ending", "script", "cast", "pacing", "humor",
           "direction", "story", "photography")
SENTIMENT_ADJ = {
    1: ("wonderful", "brilliant", "charming", "delightful", "moving", "clever", "gripping", "beautiful",
        "funny", "superb", "excellent", "touching", "fresh", "smart", "powerful", "lovely"),
    0: ("boring", "dull", "tedious", "awful", "clumsy", "bland", "painful", "terrible", "lifeless",
        "predictable", "messy", "shallow", "weak", "silly", "forgettable", "tiresome"),
}
SENTIMENT_VERB = {  # (base, past)
    1: (("love", "loved"), ("enjoy", "enjoyed"), ("admire", "admired"), ("like", "liked"),
        ("adore", "adored"), ("recommend", "recommended")),
    0: (("hate", "hated"), ("dislike", "disliked"), ("despise", "despised"), ("loathe", "loathed"),
        ("resent", "resented"), ("regret", "regretted")),
}
NT = "n't"
INTENSIFIERS = ("very", "really", "quite", "truly", "remarkably", "rather", "deeply", "utterly")
REVIEWERS = ("I", "we", "she", "he", "they", "my sister", "the critic", "my friend", "the audience")
WORK_FACTS = ("{the} {work} follows a family in a small town", "{the} {work} runs for almost two hours",
              "{the} {work} tells the story of an old sailor", "a young director made {the} {work} in Paris",
              "{the} {work} describes a long journey across the country", "my parents watched {the} {work} twice")
OPENERS = ("Honestly,", "From the first scene,", "In the end,", "For me,", "Frankly,", "Overall,")


def _sst2(r: Rng, label: int) -> Example:
    negated = r.chance(0.3)
    polarity = label if not negated else 1 - label
    work, aspect = r.pick(WORKS), r.pick(ASPECTS)
    the = r.pick(("the", "this", "that"))
    intens = r.pick(INTENSIFIERS) + " " if r.chance(0.4) else ""
    adj = r.pick(SENTIMENT_ADJ[polarity])
    form = r.gen.integers(4)
    if form == 0:  # copula
        subject = f"{the} {work}" if r.chance(0.6) else f"the {aspect} of {the} {work}"
        if r.chance(0.15):
            subject = "it"
        be = r.pick(("is", "was"))
        if negated:
            neg = r.pick((f"{be} not", f"{be}n't", f"{be} never"))
            clause = f"{subject} {neg} {intens}{adj}" + (" at all" if r.chance(0.3) else "")
        else:
            clause = f"{subject} {be} {intens}{adj}"
    elif form == 1:  # sentiment verb
        base, past = r.pick(SENTIMENT_VERB[polarity])
        who = r.pick(REVIEWERS)
        adv = r.pick(("really", "truly", "deeply", "honestly")) + " " if r.chance(0.3) else ""
        target = r.pick((f"the {aspect} of {the} {work}", f"{the} {work}", f"its {aspect}", "it"))
        if negated:
            neg = r.pick(("did not", "didn't", "never", "could not", "couldn't"))
            verb = past if neg == "never" else base
            clause = f"{who} {neg} {verb} {target}"
        else:
            clause = f"{who} {adv}{past} {target}"
    elif form == 2:  # nothing / neither-nor
        be = r.pick(("is", "was"))
        if negated:
            if r.chance(0.5):
                clause = f"nothing about {the} {work} {be} {adj}"
            else:
                other = r.other(ASPECTS, aspect)
                clause = f"neither the {aspect} nor the {other} {be} {intens}{adj}"
        else:
            other = r.other(ASPECTS, aspect)
            adj2 = r.other(SENTIMENT_ADJ[polarity], adj)
            clause = f"the {aspect} {be} {adj} and the {other} {be} {intens}{adj2}"
    else:  # a noun phrase with the sentiment adjective: "this is a truly clever film"
        phrase = f"{intens}{adj} {work}"
        noun_phrase = f"{_article('a', phrase)} {phrase}"
        subject = r.pick((f"{the} {work}", "this", "it"))
        if negated:
            clause = f"{subject} {r.pick(('is not', 'was not', 'is' + NT, 'was' + NT))} {noun_phrase}"
        else:
            detail = f"{r.pick(('memorable', 'long', 'simple', 'familiar', 'old-fashioned'))} {aspect}"
            clause = f"{subject} is {noun_phrase} with {_article('a', detail)} {detail}"
    roll = r.gen.random()
    if roll < 0.15:  # a concessive clause of the opposite polarity: the main clause decides
        opp = r.pick(SENTIMENT_ADJ[1 - label])
        clause = f"although the {r.pick(ASPECTS)} is {opp}, {clause}"
    elif roll < 0.45:  # neutral facts about the work
        clause = f"{r.pick(WORK_FACTS).format(the=the, work=work)}, and {clause}"
    elif roll < 0.7:
        clause = f"{r.pick(OPENERS)} {clause}"
    if r.chance(0.3):
        clause += r.pick((", even after a second viewing", " from start to finish", ", as my friends said",
                          " in almost every scene", ", whatever the posters say", " for most of its running time"))
    return _finish([clause]), None, label


def _cola(r: Rng, label: int) -> Example:
    p = random_prop(r, modifiers=0.4, negated=0.2)
    w = r.wording()
    good = realise(p, w)
    if label == 1:
        return good, None, 1
    kind = r.pick(("swap", "swap", "agreement", "form", "missing_object", "double_det"))
    words = good[:-1].split(" ")
    if words[0].lower() in ("the", "a", "an", "my", "our", "their", "this", "his", "her", "last"):
        words[0] = words[0].lower()  # it may move; _finish-style capitalisation comes back at the end
    if kind == "swap":  # a determiner or preposition moved behind its noun: "car the"
        spots = [i for i in range(len(words) - 1)
                 if words[i].lower() in {"the", "a", "an", "my", "our", "their", "this", "his", "in", "at", "near", "by"}]
        if not spots:
            raise _Retry
        i = r.pick(spots)
        words[i], words[i + 1] = words[i + 1], words[i]
        bad = " ".join(words)
    elif kind == "agreement":
        if w.passive:
            be = _be(p.obj.person, p.tense)
            wrong = {"was": "were", "were": "was", "is": "are", "are": "is", "am": "is"}[be]
            bad = realise(p, w)[:-1].replace(f" {be} ", f" {wrong} ", 1).replace(f" {be}n't ", f" {wrong}n't ", 1)
        else:
            p = replace(p, tense="present", negated=False, time=r.pick(TIMES["present"]) if p.time else None,
                        clause=None)
            third = p.subj.person == "3sg"
            forms = p.verb.forms[w.syn[1] % len(p.verb.forms)]
            right, wrong = (forms[1], forms[0]) if third else (forms[0], forms[1])
            good_present = realise(p, replace(w, adverb_first=False))[:-1]
            bad = good_present.replace(f" {right} ", f" {wrong} ", 1)
    elif kind == "form":  # "did not bought", "has wrote"
        forms = p.verb.forms[w.syn[1] % len(p.verb.forms)]
        if forms[2] == forms[0]:
            raise _Retry
        p = replace(p, negated=True, never=False, tense="past")
        w = replace(w, passive=False)
        bad = realise(p, w)[:-1].replace(f" {forms[0]} ", f" {forms[2]} ", 1)
    elif kind == "missing_object":  # only verbs that cannot drop their object: "She thanked."
        if p.verb.forms[0][0] not in STRICTLY_TRANSITIVE:
            raise _Retry
        w = replace(w, passive=False)
        obj = np_text(p.obj, "obj", w.syn[2], w.syn[4])
        bad = realise(p, w)[:-1].replace(f" {obj}", "", 1)
    else:  # double determiner: "the a car"
        spots = [i for i, x in enumerate(words) if x.lower() in {"the", "a", "an"}]
        if not spots:
            raise _Retry
        i = r.pick(spots)
        words.insert(i, r.pick(("the", "a")) if words[i].lower() not in ("a", "an") else "the")
        bad = " ".join(words)
    bad = (bad[0].upper() + bad[1:]).rstrip() + "."
    if bad == good or bad.lower() == good.lower():
        raise _Retry
    return bad, None, 0


def _mrpc(r: Rng, label: int) -> Example:
    p = random_prop(r, modifiers=0.5, negated=0.15)
    w = r.wording()
    a = realise(p, w)
    if label == 1:
        return a, realise(p, reword(r, p, w)), 1
    q = change_part(r, p, r.pick(("subject", "object", "object", "verb", "verb", "polarity")))
    w2 = reword(r, q, w) if r.chance(0.5) else w
    return a, realise(q, w2), 0


def _rte(r: Rng, label: int) -> Example:
    p = random_prop(r, modifiers=0.7, negated=0.2)
    a = realise(p, r.wording())
    if r.chance(0.3):  # a second sentence about the same people and things
        a = a + " " + _follow_up(r, p)
    if label == 0:
        q = simplify(r, p)
    else:  # change the premise, then simplify: a hypernym cannot undo the change
        part = r.pick(("subject", "object", "verb", "polarity", "polarity"))
        q = simplify(r, change_part(r, p, part), protect={"subject": "subj", "object": "obj"}.get(part))
    return a, realise(q, r.wording(passive=0.3)), label


def _follow_up(r: Rng, p: Prop) -> str:
    subj = p.subj
    if subj.pronoun:
        pron = subj.pronoun
    elif subj.noun is not None and subj.noun.kind in ("f", "m"):
        pron = "she" if subj.noun.kind == "f" else "he"
    else:
        pron = r.pick(("she", "he"))
    obj = "it" if p.obj.kind not in ("person", "f", "m") else r.pick(("him", "her", "them"))
    text = r.pick((f"{pron} was {r.pick(('very', 'quite', 'rather'))} {r.pick(('pleased', 'tired', 'proud'))} afterwards",
                   f"{pron} did not expect {r.pick(('this', 'that', 'anything'))}",
                   f"nobody else saw {obj}", f"{pron} {r.pick(('often', 'never', 'rarely'))} talks about {obj}"))
    return _finish([text])


def _mnli(r: Rng, label: int) -> Example:
    p = random_prop(r, modifiers=0.5, negated=0.2)
    a = realise(p, r.wording())
    if label == 0:
        q = simplify(r, p)
    elif label == 1:
        if p.negated:
            raise _Retry  # adding detail to a negated premise is not reliably neutral
        q = simplify(r, p, hypernym_p=0.0) if r.chance(0.5) else p
        q = enrich(r, q, premise=p)
    else:
        q = change_part(r, simplify(r, p, hypernym_p=0.0), "polarity")
    return a, realise(q, r.wording(passive=0.3)), label


def _question(r: Rng, p: Prop, wh: str) -> str:
    verb = p.verb.forms[int(r.gen.integers(len(p.verb.forms)))]
    subj = np_text(p.subj, "subj", int(r.gen.integers(3)), int(r.gen.integers(3)))
    obj = np_text(p.obj, "obj", int(r.gen.integers(3)), int(r.gen.integers(3)))
    do = "did" if p.tense == "past" else ("does" if p.subj.person == "3sg" else "do")
    if wh == "who":
        return f"Who {verb[2] if p.tense == 'past' else verb[1]} {obj}?"
    if wh == "what":
        return f"What {do} {subj} {verb[0]}?"
    return f"{wh.capitalize()} {do} {subj} {verb[0]} {obj}?"


def _qnli(r: Rng, label: int) -> Example:
    p = random_prop(r, modifiers=0.5)
    p = replace(p, negated=False, place=p.place or r.pick(PLACES), time=p.time or r.pick(TIMES[p.tense]))
    wh = r.pick(("who", "what", "where", "when"))
    question = _question(r, p, wh)
    if label == 0:  # the sentence states the fact asked about
        s = p
    elif wh in ("where", "when"):  # the same event, but without the asked-for place or time
        s = replace(p, place=None) if wh == "where" else replace(p, time=None)
        if r.chance(0.5):
            s = change_part(r, s, "time" if wh == "where" else "place")
    else:  # another event about the same people or things
        s = change_part(r, p, "verb")
    if label == 0 and r.chance(0.3):
        s = replace(s, adverb=s.adverb or r.pick(ADVERBS))
    return question, realise(s, r.wording(passive=0.3)), label


QQP_INTENTS: dict[str, tuple[str, ...]] = {
    "how": ("How can I {v} {a} {n}?", "What is the best way to {v} {a} {n}?", "How do I {v} {a} {n}?",
            "How should I {v} {a} {n}?"),
    "why": ("Why do people {v} {ns}?", "What is the reason people {v} {ns}?", "Why would anyone {v} {ns}?"),
    "why_not": ("Why don't people {v} {ns}?", "Why do people never {v} {ns}?",
                "What is the reason people do not {v} {ns}?"),
    "where": ("Where can I {v} {a} {n}?", "Where is a good place to {v} {a} {n}?", "Where do people {v} {ns}?"),
    "cost": ("How much does it cost to {v} {a} {n}?", "What is the price to {v} {a} {n}?",
             "How expensive is it to {v} {a} {n}?"),
    "should": ("Should I {v} {a} {n}?", "Is it a good idea to {v} {a} {n}?", "Would it be wise to {v} {a} {n}?"),
}


def _plural(noun: str) -> str:
    irregular = {"child": "children", "kid": "kids", "person": "people", "bus": "buses", "knife": "knives"}
    if noun in irregular:
        return irregular[noun]
    if noun.endswith(("s", "sh", "ch", "x")):
        return noun + "es"
    if noun.endswith("y") and noun[-2] not in "aeiou":
        return noun[:-1] + "ies"
    return noun + "s"


def _ask(r: Rng, intent: str, verb: Verb, noun: Concept, adj: Concept | None, template: str) -> str:
    v = r.pick(verb.forms)[0]
    n = r.pick(noun.forms)
    a_word = r.pick(adj.forms) if adj else ""
    phrase = f"{a_word} {n}".strip()
    text = template.format(v=v, a=_article("a", phrase), n=phrase, ns=f"{a_word} {_plural(n)}".strip())
    return text.replace("  ", " ")


def _qqp(r: Rng, label: int) -> Example:
    intent = r.pick(list(QQP_INTENTS))
    verb = r.pick([v for v in VERBS if "person" not in v.objects])
    noun = r.pick([t for t in THINGS if t.kind in verb.objects])
    adj = r.pick(ADJECTIVES[ADJ_GROUP[noun.kind]]) if r.chance(0.5) else None
    template = r.pick(QQP_INTENTS[intent])
    a = _ask(r, intent, verb, noun, adj, template)
    if label == 0:
        change = r.pick(("intent", "verb", "noun", "noun"))
        if change == "intent":
            intent = r.other(list(QQP_INTENTS), intent)
        elif change == "verb":
            verbs = [v for v in VERBS if v is not verb and noun.kind in v.objects]
            verb = r.pick(verbs)
        else:
            noun = r.other([t for t in THINGS if t.kind in verb.objects], noun)
    b = _ask(r, intent, verb, noun, adj, r.pick(QQP_INTENTS[intent]))
    if label == 1 and b == a:
        b = _ask(r, intent, verb, noun, adj, r.other(QQP_INTENTS[intent], template))
    return a, b, label


STSB_PARTS = ("subject", "verb", "object", "adjective", "place")


def _stsb(r: Rng, changed: int) -> Example:
    p = random_prop(r, modifiers=0.4, pronoun_obj=0.0)
    if p.obj.pronoun or p.obj.kind in ("person", "f", "m"):
        raise _Retry
    group = ADJECTIVES[ADJ_GROUP[p.obj.kind]]
    p = replace(p, obj=replace(p.obj, adj=p.obj.adj or r.pick(group)), place=p.place or r.pick(PLACES))
    w = r.wording()
    q = p
    for part in r.gen.permutation(len(STSB_PARTS))[:changed]:
        q = change_part(r, q, STSB_PARTS[part])
    score = float(np.clip(5 - changed + r.uniform(-0.3, 0.3), 0.0, 5.0))
    return realise(p, w), realise(q, reword(r, q, w)), round(score, 2)


MAKERS: dict[str, Callable[[Rng, int], Example]] = {
    "cola": _cola, "sst2": _sst2, "mrpc": _mrpc, "stsb": _stsb, "qqp": _qqp, "mnli": _mnli, "qnli": _qnli,
    "rte": _rte,
}

VALIDATION_SHARE = 5  # one pair in 5 belongs to validation, by a hash of its texts


def split_of(text_a: str, text_b: str | None) -> str:
    """The split a text pair belongs to (a stable hash: a pair can never be in both splits)."""
    digest = hashlib.sha1(f"{text_a}\t{text_b}".encode()).digest()
    return "validation" if int.from_bytes(digest[:4], "big") % VALIDATION_SHARE == 0 else "train"


def _stream(seed: int, task: str, split: str) -> Rng:
    entropy = [int(seed), zlib.crc32(task.encode()), SPLITS.index(split)]
    return Rng(np.random.default_rng(np.random.SeedSequence(entropy)))


def generate(task: str, split: str, n: int, seed: int) -> pd.DataFrame:
    """n examples of a demo task: columns idx (0..n-1), text_a, text_b (None if single), label.

    label: int64 class id in the order of bertology.tasks.TASKS[task].label_names; float score 0..5 for
    stsb. Deterministic for (task, split, n, seed); train and validation never share a text pair.
    """
    spec = get_task(task)
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; use one of {', '.join(SPLITS)}")
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}; set data.demo.{split} to a positive size")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}; set data.seed to a non-negative integer")
    r = _stream(seed, task, split)
    classes = 6 if spec.is_regression else spec.num_labels  # stsb: 0..5 changed parts
    wanted = r.gen.permutation(np.resize(np.arange(classes), n))
    make = MAKERS[task]
    rows: list[tuple[int, str, str | None, int | float]] = []
    seen: set[tuple[str, str | None]] = set()
    attempts, budget = 0, 200 * n + 1000
    for target in wanted:
        while True:
            attempts += 1
            if attempts > budget:
                raise ValueError(f"the demo {task} generator cannot make {n} distinct {split} examples; "
                                 f"ask for fewer (data.demo.{split})")
            try:
                a, b, label = make(r, int(target))
            except _Retry:
                continue
            key = (a, b if spec.is_pair else None)
            if key in seen or split_of(*key) != split:
                continue
            seen.add(key)
            rows.append((len(rows), a, key[1], label))
            break
    df = pd.DataFrame(rows, columns=["idx", "text_a", "text_b", "label"])
    df["idx"] = df["idx"].astype("int64")
    df["label"] = df["label"].astype("float64" if spec.is_regression else "int64")
    return df
