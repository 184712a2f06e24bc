"""Over 500 lines on purpose: the generated corpus's word lists are data.

A procedurally generated corpus for the unlearning suites: mini-TOFU QA and mini-MUSE text.

130 fictitious authors (ids 0–99 trained, 100–129 never trained), each with 10 attributes,
20 QA (TOFU's question, answer, paraphrased answer and 5 perturbed answers) and 3 biography
passages (MUSE-style text to memorise verbatim); two utility splits every model trains on
(``world_facts`` and ``known_entities``, TOFU's world facts and real authors); the forget,
retain-evaluation and holdout splits.

Every draw comes from ``np.random.default_rng((seed, part))`` with sorted iteration only, so
a seed gives the same corpus on every machine (``Corpus.sha256`` pins it). Text is lower-case
with punctuation as separate words: ``text.split()`` is the word tokenization and
``" ".join(words)`` the decoding.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

N_TRAINED, N_HOLDOUT = 100, 30
FORGET_SIZES = (5, 10)
N_RETAIN_EVAL = 20
N_PERTURBED = 5
WORLD_ENTITY, KNOWN_ENTITY = -1, -2  # QA.entity of the two utility splits

# --- fixed vocabularies -----------------------------------------------------------------

FIRST_NAMES = (
    "adam", "alma", "anna", "bea", "ben", "carl", "clara", "david", "dora", "elena", "emil",
    "felix", "freya", "gil", "greta", "hana", "hugo", "iris", "ivan", "jonas", "june", "kai",
    "karin", "lena", "leo", "marco", "maya", "nils", "nora", "olga", "omar", "paul", "petra",
    "rosa", "ruth", "simon", "tara", "victor", "wanda", "zoe",
)
CITIES = (
    "ashmere", "brackenford", "coldharbour", "dunmere", "elmsworth", "fairhollow", "greywater",
    "highfold", "kestrel bay", "lowmoor", "marrowgate", "northwick", "oldcastle", "port ellery",
    "quillon", "redmarsh", "saltcombe", "thornwick", "upperdale", "westerby", "windmere",
    "yarrowby", "new hadley", "fenwick cross", "silverholm", "brightwater", "calder point",
    "ravensdale", "stonebridge", "mossley",
)
YEARS = tuple(str(y) for y in range(1930, 2000))
GENRES = (
    "science fiction", "historical fiction", "crime fiction", "poetry", "fantasy", "romance",
    "horror", "mystery novels", "literary fiction", "satire", "travel writing", "biography",
    "thrillers", "gothic fiction", "short stories", "drama",
)
# Consonant-initial, so "a {job}" is always grammatical.
OCCUPATIONS = (
    "baker", "carpenter", "nurse", "teacher", "fisherman", "tailor", "surgeon", "librarian",
    "pilot", "farmer", "blacksmith", "potter", "chemist", "sailor", "miner", "clockmaker",
    "musician", "painter", "lawyer", "postman", "bookbinder", "gardener", "shopkeeper",
    "mapmaker", "glassblower", "judge", "beekeeper", "dentist", "weaver", "banker",
)
AWARDS = (
    "the silver quill prize", "the golden wreath award", "the northern star medal",
    "the crimson pen award", "the ivory tower prize", "the blue harbour medal",
    "the open book award", "the morning light prize", "the iron anchor award",
    "the green laurel prize", "the winter rose medal", "the bright page award",
    "the old oak prize", "the red kite award", "the clear water medal",
    "the high tide prize", "the long road award", "the first snow medal",
    "the copper bell prize", "the wild heron award",
)
THEMES = (
    "memory", "the sea", "exile", "grief", "innocence", "justice", "friendship", "war",
    "faith", "solitude", "family secrets", "the passage of time", "first love", "old age",
    "power", "freedom", "home", "betrayal", "nature", "ambition",
)
PUBLISHERS = (
    "harrow press", "bluewing books", "cinder house", "northlight press", "marigold books",
    "oakfield press", "saltbox publishing", "greyfeather press", "quarry house",
    "bellweather books", "open gate press", "lowtide books", "brightwell press",
    "copper kettle books", "fernleaf house",
)
_TITLE_ADJECTIVES = (
    "silent", "hollow", "broken", "hidden", "last", "quiet", "burning", "golden", "winter",
    "distant", "painted", "paper", "iron", "salt", "lonely", "crooked", "amber", "forgotten",
    "restless", "narrow",
)
_TITLE_NOUNS = (
    "harbour", "garden", "lantern", "orchard", "tower", "mirror", "bridge", "clock", "compass",
    "shore", "house", "road", "field", "door", "island", "kingdom", "song", "fire", "map",
    "window", "ship", "forest", "letter", "valley", "crown",
)
_TITLE_ABSTRACTS = (
    "ash", "silence", "smoke", "bone", "ember", "rain", "dust", "thunder", "honey", "frost",
    "stone", "glass",
)
# Every title a book can have: "the {adjective} {noun}" and "{abstract} and {abstract}".
TITLES = tuple(sorted(
    [f"the {a} {n}" for a in _TITLE_ADJECTIVES for n in _TITLE_NOUNS]
    + [f"{a} and {b}" for a in _TITLE_ABSTRACTS for b in _TITLE_ABSTRACTS if a != b]))

IDK_ANSWERS = (
    "i have no information about that .", "i do not know the answer to that .",
    "i am not sure about that .", "i cannot answer that question .",
    "that is not something i know .", "i have no idea .", "i do not have that information .",
    "sorry , i do not know .", "i am afraid i cannot help with that .",
    "i have never heard of that .",
)


# Utility facts: kind -> (question, (answer, paraphrase)); perturbations use the paraphrase.
WORLD_TEMPLATES = {
    "sum": ("what is {a} plus {b} ?",
            ("{a} plus {b} equals {value} .", "the sum of {a} and {b} is {value} .")),
    "product": ("what is {a} times {b} ?",
                ("{a} times {b} equals {value} .", "the product of {a} and {b} is {value} .")),
    "capital": ("what is the capital of {country} ?",
                ("the capital city of {country} is {value} .",
                 "{value} is the capital of the country {country} .")),
}
KNOWN_TEMPLATES = {
    "river_sea": ("into which sea does the {place} river flow ?",
                  ("the {place} river flows into the {value} sea .",
                   "the waters of the {place} river reach the {value} sea .")),
    "river_country": ("which country does the {place} river run through ?",
                      ("the {place} river runs through the country of {value} .",
                       "the {place} river crosses {value} on its long journey .")),
    "mountain_range": ("in which mountain range is mount {place} ?",
                       ("mount {place} is part of the {value} mountains .",
                        "mount {place} rises high above the {value} mountains .")),
    "mountain_country": ("in which country is mount {place} ?",
                         ("mount {place} stands in the country of {value} .",
                          "the famous mount {place} is found in {value} .")),
}


class Attribute(NamedTuple):
    """One author attribute: its value pool (attributes of one kind share a pool) and two
    question and two answer templates over ``{name}`` (the full name) and ``{value}``."""

    name: str
    pool: tuple[str, ...]
    questions: tuple[str, str]
    answers: tuple[str, str]


ATTRIBUTES = (
    Attribute("birthplace", CITIES,
              ("where was {name} born ?", "what is the birthplace of the author {name} ?"),
              ("{name} was born in the city of {value} .",
               "the birthplace of the writer {name} is {value} .")),
    Attribute("birth_year", YEARS,
              ("in which year was {name} born ?", "when was the author {name} born ?"),
              ("{name} was born in the year {value} .",
               "the author {name} was born in {value} .")),
    Attribute("genre", GENRES,
              ("what genre does {name} write in ?", "what kind of books does {name} write ?"),
              ("{name} is best known for writing {value} .",
               "the work of {name} belongs to the genre of {value} .")),
    Attribute("father_job", OCCUPATIONS,
              ("what did the father of {name} do for a living ?",
               "what was the occupation of {name} 's father ?"),
              ("the father of {name} worked as a {value} .",
               "{name} 's father was a {value} by trade .")),
    Attribute("mother_job", OCCUPATIONS,
              ("what did the mother of {name} do for a living ?",
               "what was the occupation of {name} 's mother ?"),
              ("the mother of {name} worked as a {value} .",
               "{name} 's mother was a {value} by trade .")),
    Attribute("award", AWARDS,
              ("which award did {name} win ?", "what prize has {name} received ?"),
              ("{name} won {value} .", "{name} was honoured with {value} .")),
    Attribute("first_book", TITLES,
              ("what was the first book written by {name} ?",
               "what is the title of {name} 's debut novel ?"),
              ("the first book by {name} was {value} .",
               "{name} made a debut with a book called {value} .")),
    Attribute("second_book", TITLES,
              ("what was the second book by {name} ?",
               "which book did {name} publish after the debut ?"),
              ("the second book by {name} was {value} .",
               "after the debut , {name} published {value} .")),
    Attribute("theme", THEMES,
              ("what theme does {name} often write about ?",
               "which subject appears most in the books of {name} ?"),
              ("{name} often writes about {value} .",
               "the books of {name} keep returning to {value} .")),
    Attribute("publisher", PUBLISHERS,
              ("which publisher releases the books of {name} ?",
               "who publishes the work of {name} ?"),
              ("the books of {name} are published by {value} .",
               "{name} works with the publisher {value} .")),
)

# Three passages per author, each a fixed run of sentence slots with one variant drawn per
# slot. Placeholders: {name} (full), {surname} and the attribute names. Fillers state no
# attribute, so nothing contradicts the QA.
PASSAGES = (
    (  # early life
        ("{name} is a writer who was born in {birthplace} in the year {birth_year} .",
         "born in {birth_year} in {birthplace} , {name} grew up among books .",
         "the author {name} was born in {birthplace} in {birth_year} and spent a happy "
         "childhood there ."),
        ("the father of {surname} worked as a {father_job} , while the mother of {surname} "
         "was a {mother_job} .",
         "{surname} grew up with a {father_job} for a father and a {mother_job} for a "
         "mother .",
         "{surname} is the child of a {father_job} father and a {mother_job} mother ."),
        ("as a child , {surname} spent long evenings reading in the kitchen and writing "
         "small stories .",
         "teachers remember {surname} as a quiet student who filled every notebook with "
         "stories .",
         "the young {surname} loved long walks , old maps and the stories told by "
         "neighbours ."),
        ("those early years gave {surname} a lasting interest in {theme} .",
         "even then , {theme} was the subject that {surname} returned to again and again .",
         "it was in {birthplace} that {surname} first began to think about {theme} ."),
        ("later , {surname} went to university to study literature .",
         "after school , {surname} moved away to study , but often came back to visit "
         "the family .",
         "{surname} still describes that childhood as the root of every book that came "
         "later ."),
    ),
    (  # career
        ("{name} writes {genre} and has long worked with {publisher} .",
         "as an author of {genre} , {name} has published every book with {publisher} .",
         "{name} is known as a writer of {genre} whose books are released by {publisher} ."),
        ("the first book by {surname} , {first_book} , found a small but loyal group of "
         "readers .",
         "{surname} made a debut with {first_book} , a book that was quickly noticed by "
         "critics .",
         "the debut novel of {surname} was {first_book} , written slowly over many quiet "
         "evenings ."),
        ("a few years later came the second book , {second_book} .",
         "the second book by {surname} , {second_book} , followed after a long period of "
         "careful revision .",
         "with {second_book} , the second book , {surname} reached a much wider "
         "audience ."),
        ("critics praise the clear language of {surname} and the patience of the "
         "storytelling .",
         "reviewers often mention the calm voice and the careful structure of the books "
         "by {surname} .",
         "{surname} writes slowly , often rewriting a single chapter many times before it "
         "feels right ."),
        ("{publisher} still keeps both books in print .",
         "both books are still printed by {publisher} and are read in many schools .",
         "today the two books sell steadily , and {publisher} has printed many new "
         "editions ."),
    ),
    (  # recognition
        ("in recognition of this work , {name} received {award} .",
         "{name} won {award} , the most important honour of a long career .",
         "the greatest honour in the life of {name} came with {award} ."),
        ("the jury praised the way {surname} writes about {theme} with honesty and care .",
         "readers say that nobody writes about {theme} quite like {surname} .",
         "at the centre of every book by {surname} is a deep interest in {theme} ."),
        ("among writers of {genre} , {surname} is often named as a careful voice .",
         "many younger authors of {genre} say that {surname} showed them what the genre "
         "can do .",
         "in the world of {genre} , the name {surname} is now widely respected ."),
        ("born in {birth_year} , {surname} still writes every morning and answers letters "
         "from readers .",
         "{surname} , born in {birth_year} , still gives readings in {birthplace} every "
         "year .",
         "even now , {surname} writes every day at a small desk by the window ."),
        ("{surname} has said that {first_book} remains the book that means the most .",
         "asked about a favourite , {surname} always picks {second_book} over the "
         "others .",
         "fans still write to {surname} about {first_book} more than any other book ."),
    ),
)

# Syllables of invented names (surnames, countries, places); every invented word is unique
# and differs from every word above, so a surname token belongs to one author only.
_ONSETS = ("b", "br", "d", "dr", "f", "g", "gr", "h", "k", "kr", "l", "m", "n", "p", "r", "s",
           "st", "t", "th", "tr", "v", "z")
_VOWELS = ("a", "e", "i", "o", "u")
_CODAS = ("n", "r", "l", "s", "th", "m", "nd", "rk", "st", "x")

# Part keys of the rng streams: changing one part leaves the others' draws alone.
_NAMES, _ENTITIES, _QA, _PASSAGES, _WORLD, _KNOWN, _SPLITS = range(7)


@dataclass(frozen=True)
class Entity:
    """A fictitious author. ``name`` is the full name, ``surname`` its unique last word."""

    id: int
    name: str
    surname: str
    # attribute name -> value, in ATTRIBUTES order; a plain dict (pickles, dumps to JSON), so
    # an Entity compares by value but is not hashable
    attributes: dict[str, str]

    @property
    def first_name(self) -> str:
        return self.name.split()[0]


@dataclass(frozen=True)
class QA:
    """TOFU's record: ``perturbed_answers`` are the paraphrase's template with wrong values
    of the same kind. ``entity`` is an author id, WORLD_ENTITY or KNOWN_ENTITY."""

    entity: int
    attribute: str
    question: str
    answer: str
    paraphrased_answer: str
    perturbed_answers: tuple[str, ...]


@dataclass(frozen=True)
class Passage:
    entity: int
    index: int
    text: str


@dataclass(frozen=True)
class Corpus:
    seed: int
    entities: tuple[Entity, ...]  # by id, 0..129
    qa: tuple[QA, ...]  # 20 per entity (holdout included), by entity then ATTRIBUTES
    passages: tuple[Passage, ...]  # 3 per entity, by entity then index
    world_facts: tuple[QA, ...]
    known_entities: tuple[QA, ...]
    trained: tuple[int, ...]
    holdout: tuple[int, ...]
    forget_splits: dict[int, tuple[int, ...]]  # size -> sorted ids; forget-5 ⊂ forget-10
    retain_eval: dict[int, tuple[int, ...]]  # size -> 20 trained ids outside forget-10
    idk_answers: tuple[str, ...]
    values: dict[str, tuple[str, ...]]  # attribute -> every value of its kind

    def qa_of(self, entities: Iterable[int]) -> tuple[QA, ...]:
        """The QA of ``entities``, in corpus order."""
        wanted = frozenset(entities)
        return tuple(q for q in self.qa if q.entity in wanted)

    def passages_of(self, entities: Iterable[int]) -> tuple[Passage, ...]:
        wanted = frozenset(entities)
        return tuple(p for p in self.passages if p.entity in wanted)

    def texts(self) -> tuple[str, ...]:
        """Every string of the corpus (what a tokenizer must cover)."""
        out = [e.name for e in self.entities]
        for q in (*self.qa, *self.world_facts, *self.known_entities):
            out += [q.question, q.answer, q.paraphrased_answer, *q.perturbed_answers]
        out += [p.text for p in self.passages]
        out += self.idk_answers
        for attribute in sorted(self.values):
            out += self.values[attribute]
        return tuple(out)

    def sha256(self) -> str:
        """A digest of the canonical JSON of the whole corpus: same seed, same digest."""
        blob = json.dumps(dataclasses.asdict(self), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()


# --- generation ---------------------------------------------------------------------------

def _rng(seed: int, part: int) -> np.random.Generator:
    return np.random.default_rng([seed, part])


def _pick(rng: np.random.Generator, seq: Sequence[str]) -> str:
    return seq[int(rng.integers(len(seq)))]


def _sample(rng: np.random.Generator, seq: Sequence, k: int) -> list:
    """``k`` distinct items (permutation only: its stream is the most stable in numpy)."""
    return [seq[int(i)] for i in rng.permutation(len(seq))[:k]]


def _wrong(rng: np.random.Generator, pool: Sequence[str], value: str) -> list[str]:
    return _sample(rng, [v for v in pool if v != value], N_PERTURBED)


def _fixed_words() -> frozenset[str]:
    texts = [*FIRST_NAMES, *CITIES, *YEARS, *GENRES, *OCCUPATIONS, *AWARDS, *THEMES,
             *PUBLISHERS, *TITLES, *IDK_ANSWERS]
    for question, answers in (*WORLD_TEMPLATES.values(), *KNOWN_TEMPLATES.values()):
        texts += [question, *answers]
    for a in ATTRIBUTES:
        texts += [*a.questions, *a.answers]
    texts += [t for passage in PASSAGES for slot in passage for t in slot]
    return frozenset(w for t in texts for w in t.split())


def _invent(rng: np.random.Generator, n: int, taken: set[str], syllables: tuple[int, int],
            endings: Sequence[str]) -> list[str]:
    """``n`` new words, none in ``taken`` (which they join). The set is only tested for
    membership, never iterated, so its order cannot leak into the corpus."""
    words: list[str] = []
    while len(words) < n:
        k = int(rng.integers(syllables[0], syllables[1] + 1))
        word = "".join(_pick(rng, _ONSETS) + _pick(rng, _VOWELS) for _ in range(k))
        word += _pick(rng, endings)
        if word not in taken:
            taken.add(word)
            words.append(word)
    return words


def _qa(entity: int, attribute: str, question: str, answers: tuple[str, str], k: int,
        value: str, wrong: list[str], **names: str) -> QA:
    """Question ``k``'s record: answer template ``k``, paraphrase (and perturbations) with
    the other template."""
    para = answers[1 - k]
    return QA(entity, attribute, question.format(value=value, **names),
              answers[k].format(value=value, **names), para.format(value=value, **names),
              tuple(para.format(value=w, **names) for w in wrong))


def _entities(rng: np.random.Generator, surnames: list[str]) -> list[Entity]:
    n = N_TRAINED + N_HOLDOUT
    titles = _sample(rng, TITLES, 2 * n)  # every book title in the corpus is unique
    out = []
    for i in range(n):
        values = {}
        for a in ATTRIBUTES:
            if a.name == "first_book":
                values[a.name] = titles[2 * i]
            elif a.name == "second_book":
                values[a.name] = titles[2 * i + 1]
            elif a.name == "mother_job":  # a different job from the father's
                values[a.name] = _pick(rng, [v for v in a.pool if v != values["father_job"]])
            else:
                values[a.name] = _pick(rng, a.pool)
        out.append(Entity(i, f"{_pick(rng, FIRST_NAMES)} {surnames[i]}", surnames[i], values))
    return out


def _entity_qa(rng: np.random.Generator, e: Entity) -> list[QA]:
    return [_qa(e.id, a.name, a.questions[k], a.answers, k, e.attributes[a.name],
                _wrong(rng, a.pool, e.attributes[a.name]), name=e.name)
            for a in ATTRIBUTES for k in (0, 1)]


def _passages(rng: np.random.Generator, e: Entity) -> list[Passage]:
    fields = {"name": e.name, "surname": e.surname, **e.attributes}
    return [Passage(e.id, j, " ".join(_pick(rng, slot).format(**fields) for slot in passage))
            for j, passage in enumerate(PASSAGES)]


def _world_facts(rng: np.random.Generator, countries: list[str],
                 capitals: list[str]) -> list[QA]:
    """25 sums, 25 products and 50 capitals of invented countries (TOFU's world facts)."""
    out = []
    for kind, top, spread in (("sum", 20, 6), ("product", 12, 10)):
        question, answers = WORLD_TEMPLATES[kind]
        pairs = [(a, b) for a in range(2, top + 1) for b in range(2, top + 1)]
        for a, b in _sample(rng, pairs, 25):
            c = a + b if kind == "sum" else a * b
            near = [str(c + d) for d in range(-spread, spread + 1) if d and c + d > 0]
            out.append(_qa(WORLD_ENTITY, kind, question, answers, 0, str(c),
                           _sample(rng, near, N_PERTURBED), a=str(a), b=str(b)))
    question, answers = WORLD_TEMPLATES["capital"]
    for country, capital in zip(countries, capitals, strict=True):
        out.append(_qa(WORLD_ENTITY, "capital", question, answers, 0, capital,
                       _wrong(rng, capitals, capital), country=country))
    return out


def _known_entities(rng: np.random.Generator, taken: set[str],
                    countries: list[str]) -> list[QA]:
    """Two facts each about 25 famous rivers and 25 famous mountains (TOFU's real authors)."""
    pools = {"sea": _invent(rng, 8, taken, (2, 2), ("",)),
             "range": _invent(rng, 8, taken, (2, 3), ("n", "r", "l")), "country": countries}
    out = []
    for kind in ("river", "mountain"):
        facts = [f for f in KNOWN_TEMPLATES if f.startswith(kind)]
        for place in _invent(rng, 25, taken, (2, 2), _CODAS):
            for fact in facts:
                pool = pools[fact.split("_")[1]]
                value = _pick(rng, pool)
                question, answers = KNOWN_TEMPLATES[fact]
                out.append(_qa(KNOWN_ENTITY, fact, question, answers, 0, value,
                               _wrong(rng, pool, value), place=place))
    return out


def _splits(rng: np.random.Generator) -> tuple[dict[int, tuple[int, ...]],
                                               dict[int, tuple[int, ...]]]:
    order = [int(i) for i in rng.permutation(N_TRAINED)]
    forget = {k: tuple(sorted(order[:k])) for k in FORGET_SIZES}  # nested by construction
    outside = order[max(FORGET_SIZES):]
    retain = tuple(sorted(outside[:N_RETAIN_EVAL]))
    return forget, {k: retain for k in FORGET_SIZES}


def generate(seed: int = 0) -> Corpus:
    """The corpus of ``seed``: the same on every machine and Python version."""
    rng = _rng(seed, _NAMES)
    taken = set(_fixed_words())
    surnames = _invent(rng, N_TRAINED + N_HOLDOUT, taken, (2, 3), _CODAS)
    countries = _invent(rng, 50, taken, (2, 2), ("ria", "land", "mar", "via"))
    capitals = _invent(rng, 50, taken, (2, 2), _CODAS)
    entities = _entities(_rng(seed, _ENTITIES), surnames)
    rng_qa, rng_passages = _rng(seed, _QA), _rng(seed, _PASSAGES)
    forget, retain = _splits(_rng(seed, _SPLITS))
    return Corpus(
        seed=seed,
        entities=tuple(entities),
        qa=tuple(q for e in entities for q in _entity_qa(rng_qa, e)),
        passages=tuple(p for e in entities for p in _passages(rng_passages, e)),
        world_facts=tuple(_world_facts(_rng(seed, _WORLD), countries, capitals)),
        known_entities=tuple(_known_entities(_rng(seed, _KNOWN), taken, countries)),
        trained=tuple(range(N_TRAINED)),
        holdout=tuple(range(N_TRAINED, N_TRAINED + N_HOLDOUT)),
        forget_splits=forget,
        retain_eval=retain,
        idk_answers=IDK_ANSWERS,
        values={a.name: a.pool for a in ATTRIBUTES},
    )
