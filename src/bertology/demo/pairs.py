"""The sentence-pair demo tasks: each generator draws one (text_a, text_b, label) for a wanted label,
and the label is decided by how text_b was built from text_a's proposition.

- mrpc: a close rewording, or a close rewording with one visible change of meaning (`sampling.alter`:
  negation flipped, another verb, subject or object, subject and object swapped);
- rte: a simplification (modifiers dropped, hypernyms), or a simplification with one such change;
- mnli: a simplification, an enrichment (a modifier the premise lacks) or a flipped polarity;
- qnli: a wh-question and a sentence stating the asked-for fact, or one that does not;
- qqp: two questions with the same intent, verb and noun, or with one of them changed;
- stsb: a graded score from the number of changed parts.

`MAKERS` maps task names to the generators; `draw_mrpc` and `draw_rte` also return the propositions
behind a pair and the change between them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, NamedTuple

import numpy as np

from bertology.demo.grammar import Prop, article, be_form, finish, np_text, realise
from bertology.demo.lexicon import (ADJ_GROUP, ADJECTIVES, ADVERBS, PLACES, PRONOUNS, THINGS, TIMES, VERBS, Concept,
                                    Verb, plural)
from bertology.demo.sampling import (Example, Retry, Rng, alter, change_part, changes_for, enrich, random_prop,
                                     rephrase, reword, simplify)


class Pair(NamedTuple):
    """A drawn mrpc or rte pair: the propositions behind its texts and the change of meaning between
    them (one of `sampling.CHANGES`; None when text_b only rewords or simplifies text_a)."""

    premise: Prop
    hypothesis: Prop
    change: str | None
    text_a: str
    text_b: str


def draw_mrpc(r: Rng, label: int) -> Pair:
    """A sentence and a rewording of it (equivalent, 1), or a rewording with one visible change of
    meaning made by `alter` (not_equivalent, 0). Rewordings stay close (`rephrase`): voice, adverb and
    time position, contraction, now and then a synonym."""
    p = random_prop(r, modifiers=0.3, negated=0.15)
    w = r.wording()
    change = None if label == 1 else r.pick(changes_for(p))
    q = p if change is None else alter(r, p, change)
    return Pair(p, q, change, realise(p, w), realise(q, rephrase(r, q, w)))


def draw_rte(r: Rng, label: int) -> Pair:
    """A premise (now and then followed by a second sentence) and a hypothesis that restates it
    (entailment, 0), or that restates it with one visible change of meaning made by `alter`
    (not_entailment, 1). Restating drops modifiers and may use hypernyms (`simplify`), except under
    negation, where dropping a modifier would not be entailed ("did not buy the red car" does not
    entail "did not buy the car"): a negated premise is only reworded."""
    p = random_prop(r, modifiers=0.3, negated=0.15)
    w = r.wording()
    a = realise(p, w)
    if r.chance(0.2):  # a second sentence about the same people and things
        a = a + " " + _follow_up(r, p)
    change = None if label == 0 else r.pick(changes_for(p))
    q = p if change is None else alter(r, p, change)
    if not p.negated:  # change first, then simplify: a hypernym cannot undo the change
        q = simplify(r, q, hypernym_p=0.0 if change == "swap" else 0.15,
                     protect={"subject": "subj", "object": "obj"}.get(change or ""))
    return Pair(p, q, change, a, realise(q, rephrase(r, q, w)))


def _mrpc(r: Rng, label: int) -> Example:
    pair = draw_mrpc(r, label)
    return pair.text_a, pair.text_b, label


def _rte(r: Rng, label: int) -> Example:
    pair = draw_rte(r, label)
    return pair.text_a, pair.text_b, label


def _follow_up(r: Rng, p: Prop) -> str:
    """A second sentence about the subject and object of `p`, with pronouns."""
    subj = p.subj
    if subj.pronoun:
        pron = subj.pronoun
    elif subj.noun is not None and subj.noun.kind in ("f", "m"):
        pron = "she" if subj.noun.kind == "f" else "he"
    else:
        pron = r.pick(("she", "he"))
    obj = "it" if p.obj.kind not in ("person", "f", "m") else r.pick(("him", "her", "them"))
    person = PRONOUNS[pron][2]
    was, talks = be_form(person, "past"), "talks" if person == "3sg" else "talk"
    text = r.pick((f"{pron} {was} {r.pick(('very', 'quite', 'rather'))} {r.pick(('pleased', 'tired', 'proud'))} afterwards",
                   f"{pron} did not expect {r.pick(('this', 'that', 'anything'))}",
                   f"nobody else saw {obj}", f"{pron} {r.pick(('often', 'never', 'rarely'))} {talks} about {obj}"))
    return finish([text])


def _mnli(r: Rng, label: int) -> Example:
    """A premise and an entailed (0), neutral (1) or contradicting (2) hypothesis."""
    p = random_prop(r, modifiers=0.5, negated=0.2)
    a = realise(p, r.wording())
    if label == 0:
        q = simplify(r, p)
    elif label == 1:
        if p.negated:
            raise Retry  # adding detail to a negated premise is not reliably neutral
        q = simplify(r, p, hypernym_p=0.0) if r.chance(0.5) else p
        q = enrich(r, q, premise=p)
    else:
        q = change_part(r, simplify(r, p, hypernym_p=0.0), "polarity")
    return a, realise(q, r.wording(passive=0.3)), label


def _question(r: Rng, p: Prop, wh: str) -> str:
    """A who/what/where/when question about `p`."""
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
    """A question and a sentence that answers it (entailment, 0) or not (1)."""
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


def _ask(r: Rng, verb: Verb, noun: Concept, adj: Concept | None, template: str) -> str:
    """A question from `template` with random synonyms of the verb, noun and adjective."""
    v = r.pick(verb.forms)[0]
    n = r.pick(noun.forms)
    a_word = r.pick(adj.forms) if adj else ""
    phrase = f"{a_word} {n}".strip()
    text = template.format(v=v, a=article("a", phrase), n=phrase, ns=f"{a_word} {plural(n)}".strip())
    return text.replace("  ", " ")


def _qqp(r: Rng, label: int) -> Example:
    """Two questions: the same intent, verb and noun (duplicate, 1) or one of them changed (0)."""
    intent = r.pick(list(QQP_INTENTS))
    verb = r.pick([v for v in VERBS if "person" not in v.objects])
    noun = r.pick([t for t in THINGS if t.kind in verb.objects])
    adj = r.pick(ADJECTIVES[ADJ_GROUP[noun.kind]]) if r.chance(0.5) else None
    template = r.pick(QQP_INTENTS[intent])
    a = _ask(r, verb, noun, adj, template)
    if label == 0:
        change = r.pick(("intent", "verb", "noun", "noun"))
        if change == "intent":
            intent = r.other(list(QQP_INTENTS), intent)
        elif change == "verb":
            verbs = [v for v in VERBS if v is not verb and noun.kind in v.objects]
            verb = r.pick(verbs)
        else:
            noun = r.other([t for t in THINGS if t.kind in verb.objects], noun)
    b = _ask(r, verb, noun, adj, r.pick(QQP_INTENTS[intent]))
    if label == 1 and b == a:
        b = _ask(r, verb, noun, adj, r.other(QQP_INTENTS[intent], template))
    return a, b, label


STSB_PARTS = ("subject", "verb", "object", "adjective", "place")


def _stsb(r: Rng, changed: int) -> Example:
    """Two sentences with `changed` of five parts changed; score 5 - changed (+-0.3)."""
    p = random_prop(r, modifiers=0.4, pronoun_obj=0.0)
    if p.obj.pronoun or p.obj.kind in ("person", "f", "m"):
        raise Retry
    group = ADJECTIVES[ADJ_GROUP[p.obj.kind]]
    p = replace(p, obj=replace(p.obj, adj=p.obj.adj or r.pick(group)), place=p.place or r.pick(PLACES))
    w = r.wording()
    q = p
    for part in r.gen.permutation(len(STSB_PARTS))[:changed]:
        q = change_part(r, q, STSB_PARTS[part])
    score = float(np.clip(5 - changed + r.uniform(-0.3, 0.3), 0.0, 5.0))
    return realise(p, w), realise(q, reword(r, q, w)), round(score, 2)


MAKERS: dict[str, Callable[[Rng, int], Example]] = {
    "mrpc": _mrpc, "stsb": _stsb, "qqp": _qqp, "mnli": _mnli, "qnli": _qnli, "rte": _rte,
}
