"""Random draws for the demo generators: `Rng` (helpers over one NumPy stream), random propositions,
and the transformations that relate the two texts of a pair (change a part, simplify, enrich, reword,
rephrase closely, and `alter`: one of the named, visible changes of meaning in `CHANGES`).

`Retry` is raised by a generator whose draw cannot give the wanted example; `Example` is what a
generator returns: (text_a, text_b or None, label).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence, TypeVar

import numpy as np

from bertology.demo.grammar import NP, Prop, Wording, realise
from bertology.demo.lexicon import (ADJ_GROUP, ADJECTIVES, ADVERBS, CLAUSES, HYPERNYMS, NAMES, PERSON_DETS,
                                    PERSONS, PLACES, THING_DETS, THINGS, TIMES, VERBS, Concept, Verb)

T = TypeVar("T")

Example = tuple[str, str | None, int | float]


class Retry(Exception):
    """This draw cannot give the wanted example; draw again."""


class Rng:
    """Small helpers over a NumPy Generator."""

    def __init__(self, gen: np.random.Generator) -> None:
        self.gen = gen

    def pick(self, seq: Sequence[T]) -> T:
        """A uniformly random element."""
        return seq[int(self.gen.integers(len(seq)))]

    def chance(self, p: float) -> bool:
        """True with probability p."""
        return bool(self.gen.random() < p)

    def other(self, seq: Sequence[T], current: T) -> T:
        """A random element different from `current`."""
        choices = [x for x in seq if x != current]
        return self.pick(choices)

    def uniform(self, lo: float, hi: float) -> float:
        return float(self.gen.uniform(lo, hi))

    def wording(self, passive: float = 0.25) -> Wording:
        """A random wording: passive with probability `passive`, random synonyms and modifier order."""
        return Wording(self.chance(passive), tuple(int(x) for x in self.gen.integers(0, 6, size=6)),  # type: ignore[arg-type]
                       self.chance(0.3), self.chance(0.3), self.chance(0.5))


# --------------------------------------------------------------------------------------------------
# Random propositions and their transformations
# --------------------------------------------------------------------------------------------------


def random_subject(r: Rng, adj_p: float = 0.3) -> NP:
    """A pronoun, a name, or a person noun (with an adjective with probability adj_p)."""
    roll = r.gen.random()
    if roll < 0.25:
        return NP(pronoun=r.pick(("he", "she", "they", "i", "we")))
    if roll < 0.45:
        return NP(noun=r.pick(NAMES))
    adj = r.pick(ADJECTIVES["person"]) if r.chance(adj_p) else None
    return NP(noun=r.pick(PERSONS), det=r.pick(PERSON_DETS), adj=adj)


def random_object(r: Rng, verb: Verb, adj_p: float = 0.5, pronoun_p: float = 0.1) -> NP:
    """An object of a kind that `verb` takes: a person, or a thing ('it' with probability pronoun_p)."""
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
    """A random proposition; `modifiers` scales the chance of each adjective, adverb, place, time and clause."""
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
        raise Retry
    return r.pick(options)()


def reword(r: Rng, p: Prop, w: Wording) -> Wording:
    """Another wording of the same proposition (voice, synonyms, modifier order, contraction)."""
    for _ in range(20):
        new = replace(r.wording(), passive=(not w.passive) if r.chance(0.4) else w.passive)
        if realise(p, new) != realise(p, w):
            return new
    return new


def rephrase(r: Rng, p: Prop, w: Wording, *, synonym_p: float = 0.15, passive_p: float = 0.3) -> Wording:
    """Another wording of `p` that stays close to `w`: the voice flips with probability `passive_p`, each
    slot keeps its synonym unless redrawn (probability `synonym_p`), adverb and time position and the
    contraction are redrawn. Differs from `realise(p, w)` whenever some wording of `p` does."""
    for _ in range(20):
        syn = tuple(int(r.gen.integers(0, 6)) if r.chance(synonym_p) else s for s in w.syn)
        new = Wording(w.passive != r.chance(passive_p), syn, r.chance(0.3), r.chance(0.3),  # type: ignore[arg-type]
                      r.chance(0.5))
        if realise(p, new) != realise(p, w):
            return new
    return replace(new, passive=not w.passive)  # the other voice always reads differently


# --------------------------------------------------------------------------------------------------
# Meaning changes of the pair tasks: one clearly visible difference between the two texts
# --------------------------------------------------------------------------------------------------

CHANGES = ("negation", "verb", "subject", "object", "swap")
SUBJECT_PRONOUNS = ("he", "she", "they", "i", "we")
OBJECT_PRONOUNS = ("he", "she", "they")
SYMMETRIC_VERBS = {"meet"}  # "A met B" says the same as "B met A"


def _other_np(r: Rng, np_: NP, pronouns: tuple[str, ...], avoid: NP) -> NP | None:
    """Another referent of the same type (pronoun, name, person or thing of the same kind), its
    determiner and adjective kept; None when there is none (the pronoun 'it')."""
    if np_.pronoun:
        choices = [x for x in pronouns if x != np_.pronoun and x != avoid.pronoun]
        return NP(pronoun=r.pick(choices)) if np_.pronoun in pronouns else None
    assert np_.noun is not None
    pool = NAMES if np_.noun.kind in ("f", "m") else PERSONS if np_.noun.kind == "person" else \
        [t for t in THINGS if t.kind == np_.noun.kind]
    return replace(np_, noun=r.pick([c for c in pool if c != np_.noun and c != avoid.noun]))


def changes_for(p: Prop) -> list[str]:
    """The changes of CHANGES that `alter` can make to `p`."""
    out = ["negation", "verb", "subject"]
    if p.obj.pronoun is None or p.obj.pronoun in OBJECT_PRONOUNS:  # not 'it': any thing could be 'it'
        out.append("object")
    if p.obj.kind in ("person", "f", "m") and p.verb.forms[0][0] not in SYMMETRIC_VERBS:
        out.append("swap")
    return out


def alter(r: Rng, p: Prop, how: str) -> Prop:
    """`p` with one clearly visible change of meaning: the negation flipped, another verb, another
    subject or object of the same type, or subject and object swapped."""
    if how == "negation":
        return replace(p, negated=not p.negated)
    if how == "verb":
        return change_part(r, p, "verb")
    if how == "subject":
        new = _other_np(r, p.subj, SUBJECT_PRONOUNS, avoid=p.obj)
        assert new is not None
        return replace(p, subj=new)
    if how == "object":
        new = _other_np(r, p.obj, OBJECT_PRONOUNS, avoid=p.subj)
        if new is None:
            raise ValueError(f"cannot change the object of {p}")
        return replace(p, obj=new)
    if how == "swap":
        return replace(p, subj=p.obj, obj=p.subj)
    raise ValueError(f"unknown change {how!r}; use one of {', '.join(CHANGES)}")
