"""The demo's word lists: concepts with synonymous surfaces, transitive verbs with their forms, modifiers,
places, times, hypernyms, pronouns, determiners, and the review vocabulary of the sentiment task.

A concept lists synonymous surfaces; the first is the canonical one. Nouns carry a `kind` (person,
f/m names, vehicle, building, artifact, text, bakery, food) that decides which verbs take them as
object, which adjectives modify them and which hypernym replaces them.
"""

from __future__ import annotations

from dataclasses import dataclass

# --------------------------------------------------------------------------------------------------
# Concepts and verbs
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
    """(base, 3rd singular, past, past participle) of a regular verb."""
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


# --------------------------------------------------------------------------------------------------
# Nouns, modifiers, verbs, adverbials
# --------------------------------------------------------------------------------------------------

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
# Review vocabulary (sst2): works, their aspects, sentiment words, openers and neutral facts
# --------------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------------
# Morphology
# --------------------------------------------------------------------------------------------------


def plural(noun: str) -> str:
    """The plural of a noun, a few irregulars included.

    >>> plural("box"), plural("diary"), plural("day"), plural("child")
    ('boxes', 'diaries', 'days', 'children')
    """
    irregular = {"child": "children", "kid": "kids", "person": "people", "bus": "buses", "knife": "knives"}
    if noun in irregular:
        return irregular[noun]
    if noun.endswith(("s", "sh", "ch", "x")):
        return noun + "es"
    if noun.endswith("y") and noun[-2] not in "aeiou":
        return noun[:-1] + "ies"
    return noun + "s"
