"""Gold dependency trees (Universal Dependencies, CoNLL-U) of the demo grammar's sentences.

:func:`sentence_tree` builds, token by token, the tree of exactly the sentence :func:`bertology.demo.grammar.realise`
says for a proposition and a wording (the tests check the two texts agree): the main verb is the root;
``nsubj`` / ``obj`` / ``nsubj:pass`` / ``obl:agent`` for the participants, ``det`` (possessive determiners
``nmod:poss``) and ``amod`` inside noun phrases, ``aux`` / ``aux:pass`` and ``advmod`` ("not", "n't", "never",
adverbs), ``obl`` / ``obl:tmod`` with ``case`` for places and times, ``advcl`` with ``mark`` for closing
clauses, ``punct`` for the comma and the full stop. Contractions are split as in UD English ("did" + "n't",
SpaceAfter=No). The fixed phrases of the lexicon (places, times, clauses) have their trees in
:data:`PHRASES`; a phrase without one is an error, so a new lexicon entry cannot go untreed.

:func:`gold_treebank` draws ``n`` propositions and wordings from the demo's own sampler (seeded) and returns
them as one CoNLL-U document: the gold syntax of the default run, with no download.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np

from bertology.demo.grammar import NP, Prop, Wording, article, be_form, realise, surface
from bertology.demo.lexicon import PRONOUNS
from bertology.demo.sampling import Rng, random_prop

POSSESSIVES = frozenset({"my", "our", "their", "his", "her", "your", "its"})

# phrase -> "form/UPOS/head/deprel ..." with head the 1-based position in the phrase, 0 for the phrase's root
# (which takes the deprel that attaches the phrase to the main verb)
_PHRASES = {
    "in the garden": "in/ADP/3/case the/DET/3/det garden/NOUN/0/obl",
    "at the market": "at/ADP/3/case the/DET/3/det market/NOUN/0/obl",
    "near the station": "near/ADP/3/case the/DET/3/det station/NOUN/0/obl",
    "in the city": "in/ADP/3/case the/DET/3/det city/NOUN/0/obl",
    "at the office": "at/ADP/3/case the/DET/3/det office/NOUN/0/obl",
    "in the village": "in/ADP/3/case the/DET/3/det village/NOUN/0/obl",
    "at home": "at/ADP/2/case home/NOUN/0/obl",
    "on the street": "on/ADP/3/case the/DET/3/det street/NOUN/0/obl",
    "behind the school": "behind/ADP/3/case the/DET/3/det school/NOUN/0/obl",
    "in the kitchen": "in/ADP/3/case the/DET/3/det kitchen/NOUN/0/obl",
    "yesterday": "yesterday/NOUN/0/obl:tmod",
    "last week": "last/ADJ/2/amod week/NOUN/0/obl:tmod",
    "on Monday": "on/ADP/2/case Monday/PROPN/0/obl",
    "this morning": "this/DET/2/det morning/NOUN/0/obl:tmod",
    "last summer": "last/ADJ/2/amod summer/NOUN/0/obl:tmod",
    "after lunch": "after/ADP/2/case lunch/NOUN/0/obl",
    "two days ago": "two/NUM/2/nummod days/NOUN/3/obl:npmod ago/ADV/0/advmod",
    "last night": "last/ADJ/2/amod night/NOUN/0/obl:tmod",
    "every day": "every/DET/2/det day/NOUN/0/obl:tmod",
    "on weekends": "on/ADP/2/case weekends/NOUN/0/obl",
    "every morning": "every/DET/2/det morning/NOUN/0/obl:tmod",
    "in the evening": "in/ADP/3/case the/DET/3/det evening/NOUN/0/obl",
    "each summer": "each/DET/2/det summer/NOUN/0/obl:tmod",
    "before the guests arrived": "before/SCONJ/4/mark the/DET/3/det guests/NOUN/4/nsubj arrived/VERB/0/advcl",
    "before the guests arrive": "before/SCONJ/4/mark the/DET/3/det guests/NOUN/4/nsubj arrive/VERB/0/advcl",
    "while the others were sleeping":
        "while/SCONJ/5/mark the/DET/3/det others/NOUN/5/nsubj were/AUX/5/aux sleeping/VERB/0/advcl",
    "while the others are sleeping":
        "while/SCONJ/5/mark the/DET/3/det others/NOUN/5/nsubj are/AUX/5/aux sleeping/VERB/0/advcl",
    "after the rain had stopped":
        "after/SCONJ/5/mark the/DET/3/det rain/NOUN/5/nsubj had/AUX/5/aux stopped/VERB/0/advcl",
    "when nobody was watching": "when/SCONJ/4/mark nobody/PRON/4/nsubj was/AUX/4/aux watching/VERB/0/advcl",
    "when nobody is watching": "when/SCONJ/4/mark nobody/PRON/4/nsubj is/AUX/4/aux watching/VERB/0/advcl",
    "because the old one was broken":
        "because/SCONJ/6/mark the/DET/4/det old/ADJ/4/amod one/NOUN/6/nsubj:pass was/AUX/6/aux:pass "
        "broken/VERB/0/advcl",
    "because the old one is broken":
        "because/SCONJ/6/mark the/DET/4/det old/ADJ/4/amod one/NOUN/6/nsubj:pass is/AUX/6/aux:pass "
        "broken/VERB/0/advcl",
    "as everyone had hoped": "as/SCONJ/4/mark everyone/PRON/4/nsubj had/AUX/4/aux hoped/VERB/0/advcl",
    "as everyone hopes": "as/SCONJ/3/mark everyone/PRON/3/nsubj hopes/VERB/0/advcl",
    "although it was very late": "although/SCONJ/5/mark it/PRON/5/nsubj was/AUX/5/cop very/ADV/5/advmod late/ADJ/0/advcl",
    "although it is very late": "although/SCONJ/5/mark it/PRON/5/nsubj is/AUX/5/cop very/ADV/5/advmod late/ADJ/0/advcl",
    "so that the family could stay longer":
        "so/SCONJ/6/mark that/SCONJ/1/fixed the/DET/4/det family/NOUN/6/nsubj could/AUX/6/aux stay/VERB/0/advcl "
        "longer/ADV/6/advmod",
}
PHRASES: dict[str, list[tuple[str, str, int, str]]] = {
    text: [(f, u, int(h), d) for f, u, h, d in (t.split("/") for t in spec.split())] for text, spec in _PHRASES.items()}


@dataclass
class Token:
    form: str
    upos: str
    deprel: str = "_"
    head: int = -2  # index of the head token in the sentence; -1 = root; -2 = not attached yet
    space_after: bool = True


@dataclass
class Tree:
    """Tokens in surface order; :meth:`add` appends one and returns its index."""

    tokens: list[Token] = field(default_factory=list)

    def add(self, form: str, upos: str, deprel: str = "_", head: int = -2) -> int:
        self.tokens.append(Token(form, upos, deprel, head))
        return len(self.tokens) - 1

    def attach(self, index: int, head: int, deprel: str) -> None:
        self.tokens[index].head, self.tokens[index].deprel = head, deprel

    def text(self) -> str:
        return "".join(t.form + (" " if t.space_after else "") for t in self.tokens).rstrip(" ")

    def conllu(self, sent_id: str) -> str:
        lines = [f"# sent_id = {sent_id}", f"# text = {self.text()}"]
        for i, t in enumerate(self.tokens):
            if t.head == -2:
                raise ValueError(f"token {i + 1} ({t.form!r}) of {self.text()!r} has no head")
            misc = "_" if t.space_after else "SpaceAfter=No"
            lines.append(f"{i + 1}\t{t.form}\t_\t{t.upos}\t_\t_\t{t.head + 1}\t{t.deprel}\t_\t{misc}")
        return "\n".join(lines) + "\n\n"


def _np(tree: Tree, np_: NP, case: str, syn_noun: int = 0, syn_adj: int = 0) -> int:
    """Append a noun phrase as :func:`bertology.demo.grammar.np_text` says it; returns its head token."""
    if np_.pronoun:
        return tree.add(PRONOUNS[np_.pronoun][0 if case == "subj" else 1], "PRON")
    assert np_.noun is not None
    noun = surface(np_.noun, syn_noun)
    if np_.noun.kind in ("f", "m"):
        return tree.add(noun, "PROPN")
    adj = surface(np_.adj, syn_adj) if np_.adj else None
    det = article(np_.det, adj or noun)
    d = tree.add(det, "PRON" if det in POSSESSIVES else "DET")
    a = tree.add(adj, "ADJ") if adj else None
    head = tree.add(noun, "NOUN")
    tree.attach(d, head, "nmod:poss" if det in POSSESSIVES else "det")
    if a is not None:
        tree.attach(a, head, "amod")
    return head


def _phrase(tree: Tree, text: str) -> tuple[int, str]:
    """Append a fixed phrase of the lexicon; returns (its root token, the deprel attaching it)."""
    if text not in PHRASES:
        raise KeyError(f"the demo phrase {text!r} has no gold tree: add it to bertology.demo.trees.PHRASES")
    first = len(tree.tokens)
    parts = PHRASES[text]
    for form, upos, _, _ in parts:
        tree.add(form, upos)
    root, rel = first, "dep"
    for k, (_, _, head, deprel) in enumerate(parts):
        if head == 0:
            root, rel = first + k, deprel
        else:
            tree.attach(first + k, first + head - 1, deprel)
    return root, rel


def _negation(tree: Tree, host: str, contracted_word: bool) -> list[tuple[int, str]]:
    """'did' + "n't" (one word of realise: split, SpaceAfter=No) -> [(host, 'aux'), (n't, 'advmod')]."""
    h = tree.add(host, "AUX")
    if contracted_word:
        tree.tokens[h].space_after = False
        n = tree.add("n't", "PART")
    else:
        n = tree.add("not", "PART")
    return [(h, "aux"), (n, "advmod")]


def sentence_tree(p: Prop, w: Wording) -> Tree:
    """The gold tree of ``realise(p, w)``."""
    tree = Tree()
    pending: list[tuple[int, str]] = []  # (token, deprel) attached to the main verb once it exists
    if p.time and w.time_first:
        t, rel = _phrase(tree, p.time)
        tree.tokens[-1].space_after = False
        pending += [(t, rel), (tree.add(",", "PUNCT"), "punct")]
    adverb = surface(p.adverb, w.syn[5]) if p.adverb else ""
    verb = p.verb.forms[w.syn[1] % len(p.verb.forms)]
    if w.passive:
        pending.append((_np(tree, p.obj, "subj", w.syn[2], w.syn[4]), "nsubj:pass"))
        be = be_form(p.obj.person, p.tense)
        if p.negated and not p.never:
            (b, _), (n, _) = _negation(tree, be, w.contracted)
            pending += [(b, "aux:pass"), (n, "advmod")]
        else:
            pending.append((tree.add(be, "AUX"), "aux:pass"))
            if p.negated:
                pending.append((tree.add("never", "ADV"), "advmod"))
        if adverb and w.adverb_first:
            pending.append((tree.add(adverb, "ADV"), "advmod"))
        root = tree.add(verb[3], "VERB")
        by = tree.add("by", "ADP")
        agent = _np(tree, p.subj, "obj", w.syn[0], w.syn[3])
        tree.attach(by, agent, "case")
        pending.append((agent, "obl:agent"))
        if adverb and not w.adverb_first:
            pending.append((tree.add(adverb, "ADV"), "advmod"))
    else:
        pending.append((_np(tree, p.subj, "subj", w.syn[0], w.syn[3]), "nsubj"))
        third = p.subj.person == "3sg"
        finite = verb[2] if p.tense == "past" else verb[1 if third else 0]
        if p.negated and not p.never:
            do = "did" if p.tense == "past" else ("does" if third else "do")
            pending += _negation(tree, do, w.contracted)
            root = tree.add(verb[0], "VERB")
        elif p.negated:
            pending.append((tree.add("never", "ADV"), "advmod"))
            root = tree.add(finite, "VERB")
        else:
            if w.adverb_first and adverb:
                pending.append((tree.add(adverb, "ADV"), "advmod"))
            root = tree.add(finite, "VERB")
        pending.append((_np(tree, p.obj, "obj", w.syn[2], w.syn[4]), "obj"))
        if adverb and not (w.adverb_first and not p.negated):
            pending.append((tree.add(adverb, "ADV"), "advmod"))
    for phrase in (p.place, p.time if not w.time_first else None, p.clause):
        if phrase:
            pending.append(_phrase(tree, phrase))
    tree.tokens[-1].space_after = False
    pending.append((tree.add(".", "PUNCT"), "punct"))
    for index, rel in pending:
        tree.attach(index, root, rel)
    tree.attach(root, -1, "root")
    first = tree.tokens[0]
    first.form = first.form[0].upper() + first.form[1:]
    return tree


def gold_treebank(n: int, seed: int) -> str:
    """n sentences of the demo grammar with their gold trees, one CoNLL-U document (deterministic in seed).

    Propositions come from the demo's sampler with modifiers (adverbs, places, times, clauses) and negation
    half the time; wordings vary voice, synonyms, modifier order and contraction."""
    r = Rng(np.random.default_rng(np.random.SeedSequence([int(seed), zlib.crc32(b"gold-trees")])))
    out = []
    for i in range(n):
        p = random_prop(r, modifiers=0.5, negated=0.3, pronoun_obj=0.1)
        w = r.wording()
        tree = sentence_tree(p, w)
        text = realise(p, w)
        if tree.text() != text:
            raise AssertionError(f"the gold tree says {tree.text()!r} but the grammar says {text!r}")
        out.append(tree.conllu(f"demo-{i + 1}"))
    return "".join(out)
