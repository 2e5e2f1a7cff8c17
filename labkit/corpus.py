"""The toy corpus: a seeded English-like grammar about a small harbour village.

The toy models in :mod:`labkit.models` are trained on text produced by
:func:`generate_corpus`.  A fixed-seed sample of it ships as
``labkit/data/corpus.txt`` (written by ``python -m labkit train-models``), so the
corpus, the weights and every measurement built on them are reproducible
without any download.

Because the corpus comes from a small closed grammar, "does this read like the
corpus?" has a cheap, objective proxy: the share of words in a text that are
corpus words (:func:`word_share_in_corpus`).  Good samples from the target
model score close to 1.0; a broken decoding loop quickly produces non-words.

Text format: lowercase letters, spaces, ',' and '.', sentences separated by a
single space, one mini story per line (stories separated by '\\n').
"""

from __future__ import annotations

import functools
import random
import re
from dataclasses import dataclass

from labkit import paths

DATA_DIR = paths.DATA
CORPUS_PATH = DATA_DIR / "corpus.txt"

# --------------------------------------------------------------------------
# The world.  Lists, not sets, so that seeded choices are reproducible.
# --------------------------------------------------------------------------

# People: (noun, pronoun or None).  None means the story picks he/she.
_PEOPLE = [
    ("fisher", None), ("baker", None), ("farmer", None), ("miller", None),
    ("sailor", None), ("weaver", None), ("hunter", None), ("smith", None),
    ("shepherd", None), ("potter", None), ("teacher", None), ("child", None),
    ("girl", "she"), ("boy", "he"), ("woman", "she"), ("man", "he"),
    ("king", "he"), ("queen", "she"),
]
_ANIMALS = ["cat", "dog", "fox", "goat", "owl", "crow", "horse", "mouse", "duck", "pig"]
_PERSON_ADJ = [
    "old", "young", "tall", "small", "tired", "happy", "quiet", "brave",
    "kind", "clever", "lazy", "shy", "proud", "poor", "busy", "sad",
]
_ANIMAL_ADJ = ["little", "grey", "black", "white", "brown", "hungry", "sleepy", "wild", "fat"]

_PLACES = [
    "harbor", "market", "mill", "forest", "river", "hill", "village", "bridge",
    "garden", "shore", "tower", "well", "farm", "field", "inn", "cave", "lake",
    "road", "barn", "gate", "square", "beach", "church", "school",
]
_PLACE_PREP = ["near", "by", "behind", "beside", "past"]
# Where someone can live (used with "in"/"near"): keeps openings sensible.
_HOMES = ["village", "town", "valley", "forest", "mill", "farm", "tower", "inn",
          "harbor", "hills"]
_AT_PLACE = ["in the garden", "at the market", "on the hill", "by the river",
             "near the rocks", "at the inn", "in the barn", "on the beach",
             "in the field", "under the bridge", "at the well", "in the forest"]

_OBJECTS = [
    "boat", "net", "basket", "lamp", "key", "rope", "bell", "coin", "apple",
    "loaf", "cup", "box", "letter", "hat", "stone", "shell", "fish", "egg",
    "cake", "flower", "ring", "map", "book", "knife", "pot", "jar", "blanket",
    "candle", "kettle", "ladder", "wheel", "sack", "cart", "bottle", "feather",
]
_OBJECT_ADJ = [
    "grey", "red", "blue", "green", "white", "black", "brown", "golden",
    "small", "big", "heavy", "little", "broken", "shiny", "wet", "warm",
    "empty", "round", "new", "strange",
]

_MOTION = ["walks", "runs", "goes", "hurries", "wanders", "rides", "climbs", "comes back"]
_SEE = ["sees", "finds", "notices", "spots"]
_HANDLE = ["takes", "carries", "holds", "drops", "buys", "sells", "mends",
           "paints", "hides", "opens", "loses", "cleans", "picks up", "wants"]
_FEELING = ["happy", "tired", "cold", "hungry", "afraid", "glad", "angry",
            "sleepy", "calm", "worried", "surprised"]
_REACTION = ["smiles", "laughs", "nods", "waves", "sighs", "sings", "shouts",
             "waits", "listens", "looks away"]
_ANIMAL_ACTION = ["sleeps", "barks", "hides", "runs away", "eats", "watches",
                  "plays", "follows", "sits", "jumps"]

_TIME_OPENING = ["one day", "in the morning", "at dawn", "at noon",
                 "in the evening", "on a cold day", "on a warm day", "long ago",
                 "early one morning", "after the rain"]
_LINK = ["then", "soon", "later", "after a while", "at last", "now"]

_WEATHER = [
    "the sky is grey", "the wind is cold", "the sun is warm", "the sea is calm",
    "rain falls on the roofs", "the wind blows from the sea",
    "the fog is thick", "the stars are bright", "the snow is deep",
    "the river is high", "the bells ring in the tower", "the gulls cry over the water",
]
_ENDING = [
    "{p} goes home and sleeps", "{p} sits by the fire", "{p} goes to bed early",
    "{p} eats bread and soup", "{p} sings a song and sleeps",
    "{p} is happy at last", "{p} walks home in the dark",
    "{p} tells the story to the {friend}", "{p} looks at the sea for a long time",
    "{p} dreams of the {place}",
]

_OBJ_PRONOUN = {"he": "him", "she": "her", "it": "it"}
_POSSESSIVE = {"he": "his", "she": "her", "it": "its"}


@dataclass
class _Character:
    noun: str
    adjective: str
    pronoun: str

    @property
    def name(self) -> str:
        return f"the {self.noun}"


def _a(word: str) -> str:
    """'a' or 'an' for the word (only a few vowel-initial words exist)."""
    return ("an " if word[0] in "aeiou" else "a ") + word


def _new_person(rng: random.Random, avoid: str | None = None) -> _Character:
    while True:
        noun, pron = rng.choice(_PEOPLE)
        if noun != avoid:
            break
    return _Character(noun, rng.choice(_PERSON_ADJ), pron or rng.choice(["he", "she"]))


def _object_phrase(rng: random.Random) -> str:
    # Half the objects get an adjective; this keeps bigram statistics varied.
    obj = rng.choice(_OBJECTS)
    if rng.random() < 0.5:
        return _a(f"{rng.choice(_OBJECT_ADJ)} {obj}")
    return _a(obj)


def _place_phrase(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return rng.choice(_AT_PLACE)
    return f"{rng.choice(_PLACE_PREP)} the {rng.choice(_PLACES)}"


def _story(rng: random.Random) -> list[str]:
    """One mini story: an opening, 2-5 middle sentences, often an ending."""
    hero = _new_person(rng)
    friend = _new_person(rng, avoid=hero.noun)
    animal = rng.choice(_ANIMALS)
    p, obj_p, poss = hero.pronoun, _OBJ_PRONOUN[hero.pronoun], _POSSESSIVE[hero.pronoun]
    held = rng.choice(_OBJECTS)  # the object the story is about

    opening = rng.choice([
        f"{rng.choice(_TIME_OPENING)}, the {hero.adjective} {hero.noun} "
        f"{rng.choice(_MOTION)} to the {rng.choice(_PLACES)}",
        f"the {hero.adjective} {hero.noun} lives {rng.choice(['in', 'near'])} "
        f"the {rng.choice(_HOMES)}",
        f"{rng.choice(_TIME_OPENING)}, the {hero.adjective} {hero.noun} is {rng.choice(_FEELING)}",
        f"there is {_a(hero.adjective)} {hero.noun} in the {rng.choice(_HOMES)}",
    ])
    sentences = [opening]

    middle = [
        lambda: f"{p} {rng.choice(_SEE)} {_object_phrase(rng)} {_place_phrase(rng)}",
        lambda: f"{p} {rng.choice(_HANDLE)} the {held} and {rng.choice(_MOTION)} "
                f"to the {rng.choice(_PLACES)}",
        lambda: rng.choice(_WEATHER),
        lambda: f"{p} meets {_a(friend.adjective)} {friend.noun} {_place_phrase(rng)}",
        lambda: f"{p} gives the {held} to the {friend.noun}",
        lambda: f"the {friend.noun} {rng.choice(_REACTION)}",
        lambda: f"the {friend.noun} {rng.choice(_SEE)} {obj_p} and {rng.choice(_REACTION)}",
        lambda: f"{p} is {rng.choice(_FEELING)}, but {p} {rng.choice(_MOTION)} "
                f"to the {rng.choice(_PLACES)}",
        lambda: f"{rng.choice(_LINK)} {p} {rng.choice(_REACTION)}",
        lambda: f"{_a(rng.choice(_ANIMAL_ADJ))} {animal} {rng.choice(_ANIMAL_ACTION)} "
                f"{_place_phrase(rng)}",
        lambda: f"the {animal} {rng.choice(_ANIMAL_ACTION)}, and {p} {rng.choice(_REACTION)}",
        lambda: f"{p} puts the {held} in {poss} {rng.choice(['basket', 'sack', 'box', 'cart'])}",
        lambda: f"{rng.choice(_LINK)}, {p} {rng.choice(_HANDLE)} {_object_phrase(rng)}",
        lambda: f"{p} feels {rng.choice(_FEELING)} because the {held} is "
                f"{rng.choice(_OBJECT_ADJ)}",
    ]
    for _ in range(rng.randint(2, 5)):
        sentences.append(rng.choice(middle)())

    if rng.random() < 0.7:
        sentences.append(rng.choice(_ENDING).format(
            p=p, friend=friend.noun, place=rng.choice(_PLACES)))
    return sentences


def generate_corpus(num_sentences: int, seed: int) -> str:
    """Generate ``num_sentences`` sentences of the toy grammar, deterministically.

    Sentences are grouped into mini stories, one story per line; the last
    story is cut short if needed so that exactly ``num_sentences`` sentences
    are produced.  The same (num_sentences, seed) always gives the same text.
    """
    if num_sentences < 0:
        raise ValueError("num_sentences must be >= 0")
    rng = random.Random(seed)
    lines: list[str] = []
    remaining = num_sentences
    while remaining > 0:
        story = _story(rng)[:remaining]
        remaining -= len(story)
        lines.append(" ".join(s + "." for s in story))
    return "\n".join(lines) + ("\n" if lines else "")


# --------------------------------------------------------------------------
# The shipped corpus and measures built on it.
# --------------------------------------------------------------------------

# A "word" is a maximal run of characters that are neither whitespace nor
# punctuation.  Anything else (digits, stray symbols) stays inside the word
# and makes it a non-corpus word, which is what we want from the measure.
_WORD_RE = re.compile(r"[^\s.,;:!?]+")


def _words(text: str) -> list[str]:
    return _WORD_RE.findall(text)


@functools.lru_cache(maxsize=1)
def corpus_text() -> str:
    """The shipped corpus (``labkit/data/corpus.txt``), read once and cached."""
    return CORPUS_PATH.read_text(encoding="ascii")


@functools.lru_cache(maxsize=1)
def corpus_words() -> frozenset[str]:
    """The set of distinct words of the shipped corpus (cached)."""
    return frozenset(_words(corpus_text()))


def word_share_in_corpus(text: str) -> float:
    """Share of the words of ``text`` that are corpus words.

    Words are split on whitespace and punctuation ('.', ',', ';', ':', '!',
    '?').  Every word counts, including a final word that may have been cut
    off mid-way by a length limit: callers that measure fixed-length samples
    therefore lose about one word per sample, which is part of the measure
    (a 200-character sample has ~40 words, so at most ~2.5%).

    Returns ``float('nan')`` for text that contains no words at all (empty or
    only spaces/punctuation), since there is nothing to judge; callers that
    average shares should decide how to treat that case.
    """
    words = _words(text)
    if not words:
        return float("nan")
    vocab = corpus_words()
    return sum(w in vocab for w in words) / len(words)


@functools.lru_cache(maxsize=1)
def _sentences() -> tuple[str, ...]:
    """Every corpus sentence, each with its final period."""
    sentences = []
    for line in corpus_text().splitlines():
        for part in line.split(". "):
            part = part.strip()
            if part:
                sentences.append(part if part.endswith(".") else part + ".")
    return tuple(sentences)


def _prefix_cuts(sentence: str, min_len: int = 10, max_len: int = 30) -> list[str]:
    """Prefixes of ``sentence`` that end with a space, min_len..max_len chars."""
    return [sentence[:i] for i in range(min_len, min(max_len, len(sentence) - 1) + 1)
            if sentence[i - 1] == " "]


def sample_prompts(n: int, seed: int = 0) -> list[str]:
    """``n`` prompts: beginnings of different corpus sentences.

    Each prompt is 10-30 characters long, cut at a word boundary, and ends
    with a space, so the natural continuation is the next word.  Sentences are
    visited in a seeded random order and each gives at most one prompt; the
    cut point is also chosen with the seeded generator.  Distinct prompt
    strings are preferred; only if the corpus runs out of distinct ones are
    earlier prompts repeated (in order).  Deterministic given (n, seed).
    """
    if n < 0:
        raise ValueError("n must be >= 0")
    rng = random.Random(seed)
    order = list(range(len(_sentences())))
    rng.shuffle(order)

    prompts: list[str] = []
    seen: set[str] = set()
    for idx in order:
        if len(prompts) == n:
            break
        cuts = _prefix_cuts(_sentences()[idx])
        if not cuts:
            continue
        prompt = rng.choice(cuts)
        if prompt not in seen:
            seen.add(prompt)
            prompts.append(prompt)
    if not prompts and n:
        raise RuntimeError("corpus has no sentence long enough for a prompt")
    i = 0
    while len(prompts) < n:  # corpus exhausted: repeat, deterministically
        prompts.append(prompts[i])
        i += 1
    return prompts
