"""The single-sentence demo tasks: sst2 (review sentences whose sentiment word may be negated, with
concessive clauses of the opposite polarity) and cola (grammatical sentences, or ones broken by a moved
determiner or preposition, an agreement or verb-form error, a missing object or a doubled determiner).

Each generator draws one (text_a, None, label) for a wanted label; `MAKERS` maps task names to them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from bertology.demo.grammar import article, be_form, finish, np_text, realise
from bertology.demo.lexicon import (ASPECTS, INTENSIFIERS, NT, OPENERS, REVIEWERS, SENTIMENT_ADJ, SENTIMENT_VERB,
                                    STRICTLY_TRANSITIVE, TIMES, WORK_FACTS, WORKS)
from bertology.demo.sampling import Example, Retry, Rng, random_prop


def _sst2(r: Rng, label: int) -> Example:
    """A review sentence of sentiment `label` (1 positive): the main clause decides, negation flips it."""
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
        noun_phrase = f"{article('a', phrase)} {phrase}"
        subject = r.pick((f"{the} {work}", "this", "it"))
        if negated:
            clause = f"{subject} {r.pick(('is not', 'was not', 'is' + NT, 'was' + NT))} {noun_phrase}"
        else:
            detail = f"{r.pick(('memorable', 'long', 'simple', 'familiar', 'old-fashioned'))} {aspect}"
            clause = f"{subject} is {noun_phrase} with {article('a', detail)} {detail}"
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
    return finish([clause]), None, label


def _cola(r: Rng, label: int) -> Example:
    """A grammatical sentence (label 1) or one broken in one named way (label 0)."""
    p = random_prop(r, modifiers=0.4, negated=0.2)
    w = r.wording()
    good = realise(p, w)
    if label == 1:
        return good, None, 1
    kind = r.pick(("swap", "swap", "agreement", "form", "missing_object", "double_det"))
    words = good[:-1].split(" ")
    if words[0].lower() in ("the", "a", "an", "my", "our", "their", "this", "his", "her", "last"):
        words[0] = words[0].lower()  # it may move; finish-style capitalisation comes back at the end
    if kind == "swap":  # a determiner or preposition moved behind its noun: "car the"
        spots = [i for i in range(len(words) - 1)
                 if words[i].lower() in {"the", "a", "an", "my", "our", "their", "this", "his", "in", "at", "near", "by"}]
        if not spots:
            raise Retry
        i = r.pick(spots)
        words[i], words[i + 1] = words[i + 1], words[i]
        bad = " ".join(words)
    elif kind == "agreement":
        if w.passive:
            be = be_form(p.obj.person, p.tense)
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
            raise Retry
        p = replace(p, negated=True, never=False, tense="past")
        w = replace(w, passive=False)
        bad = realise(p, w)[:-1].replace(f" {forms[0]} ", f" {forms[2]} ", 1)
    elif kind == "missing_object":  # only verbs that cannot drop their object: "She thanked."
        if p.verb.forms[0][0] not in STRICTLY_TRANSITIVE:
            raise Retry
        w = replace(w, passive=False)
        obj = np_text(p.obj, "obj", w.syn[2], w.syn[4])
        bad = realise(p, w)[:-1].replace(f" {obj}", "", 1)
    else:  # double determiner: "the a car"
        spots = [i for i, x in enumerate(words) if x.lower() in {"the", "a", "an"}]
        if not spots:
            raise Retry
        i = r.pick(spots)
        words.insert(i, r.pick(("the", "a")) if words[i].lower() not in ("a", "an") else "the")
        bad = " ".join(words)
    bad = (bad[0].upper() + bad[1:]).rstrip() + "."
    if bad == good or bad.lower() == good.lower():
        raise Retry
    return bad, None, 0


MAKERS: dict[str, Callable[[Rng, int], Example]] = {"cola": _cola, "sst2": _sst2}
