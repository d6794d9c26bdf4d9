"""The split registry: which items of each data set are dev and which are test.

Every item a benchmark evaluates or a tuning run fits on has an id ``"<dataset>:<key>:<native
id>"``; :func:`split_of` maps each id to exactly one split, so dev and test are disjoint by
construction. The key is what the split is decided on:

| dataset | key | rule |
|---|---|---|
| squad | article title | the "tune" half of the SQuAD v1.1 dev articles by sha256 of the title is dev (as the verifier's calibration has always been fitted) |
| hotpotqa | question id | sha256 of the id even: dev, odd: test (the 512 questions of both shared files) |
| wikiqa, selqa | the file the item came from | the official dev file is dev, the official test file is test |
| msmarco | query id | sha256 of the id even: dev |
| covidqa | article (document id) | sha256 of the id even: dev |
| locomo | conversation index | conversations 0-4 dev, 5-9 test |
| selqa_chat | the SelQA file of the conversation | as selqa |
| memorybank | user name | the first 7 of MemoryBank's 15 users by sha256 of the name are dev, the other 8 test |
| realtalk | chat (file name) | the first 5 of REALTALK's 10 chats by sha256 of the name are dev, the other 5 test |
| realmem | persona (file name) | the first 5 of RealMem's 10 personas by sha256 of the name are dev, the other 5 test |
| longmemeval | question id (each question has its own history) | sha256 of the id even: dev |
| beam | conversation ("100K/<n>") | the first 10 of BEAM's 20 100K conversations by sha256 of the name are dev, the other 10 test |
| prefeval | topic (file stem) | the first 10 of PrefEval's 20 topics by sha256 of the name are dev, the other 10 test |
| memorycode | dialogue number | the first half of MemoryCode's dialogues 151-360 (10 sessions or more) by sha256 of the number are dev, the rest test |

Every tuned value (thresholds, weights, document weights, calibrations) is committed with the ids
it was fitted on under ``benchmarks/fitted/*.json``; ``tests/unit/test_splits.py`` fails when any
of them is a test item.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "BEAM_CHATS",
    "DATASETS",
    "FITTED",
    "MEMORYBANK_USERS",
    "MEMORYCODE_DIALOGUES",
    "PREFEVAL_TOPICS",
    "REALMEM_PERSONAS",
    "REALTALK_CHATS",
    "Fitted",
    "check_fitted",
    "detector_cli",
    "item_id",
    "load_fitted",
    "parity",
    "split_of",
    "squad_halves",
]

FITTED = Path(__file__).resolve().parents[1] / "fitted"
DATASETS = (
    "squad",
    "hotpotqa",
    "wikiqa",
    "selqa",
    "msmarco",
    "covidqa",
    "locomo",
    "selqa_chat",
    "memorybank",
    "realtalk",
    "realmem",
    "longmemeval",
    "beam",
    "prefeval",
    "memorycode",
)
#: MemoryBank's English users (eval_data/en/memory_bank_en.json, names stripped): the split's key.
MEMORYBANK_USERS = ("Emily", "Frank", "Lucy", "Sunny", "Jason", "Linda", "John Zhang", "Ivy", "Henry", "Gary", "Jack", "Roland", "Susan", "Luna", "Leo")
#: REALTALK's chats (data/<name>.json in danny911kr/REALTALK): the split's key. Chats share
#: participants (three groups of friends), so a person can be on both sides; no chat is.
REALTALK_CHATS = (
    "Chat_1_Emi_Elise",
    "Chat_2_Kevin_Elise",
    "Chat_3_Kevin_Paola",
    "Chat_4_Emi_Paola",
    "Chat_5_Nicolas_Nebraas",
    "Chat_6_Vanessa_Nicolas",
    "Chat_7_Nebraas_Vanessa",
    "Chat_8_Akib_Muhhamed",
    "Chat_9_Fahim_Akib",
    "Chat_10_Fahim_Muhhamed",
)
#: RealMem's personas (dataset/<name>_dialogues_256k.json in zhiyuan5986/RealMemBench): the split's key.
REALMEM_PERSONAS = (
    "Adeleke_Okonjo",
    "Ethan_Hunt",
    "Kenta_Tanaka",
    "Kim_Ji_young",
    "Liam_O_Connor",
    "Lin_Wanyu",
    "Oliver_Smith",
    "Pak_Budi",
    "Sarah_Miller",
    "Sophie_Dubois",
)
#: BEAM's 100K conversations (100K/<n>/ in mohammadtavakoli78/BEAM): the split's key.
BEAM_CHATS = tuple(f"100K/{n}" for n in range(1, 21))
#: PrefEval's topics (the file stems of amazon-science/PrefEval's benchmark_dataset): the split's key.
PREFEVAL_TOPICS = (
    "education_learning_styles",
    "education_resources",
    "entertain_games",
    "entertain_music_book",
    "entertain_shows",
    "entertain_sports",
    "lifestyle_beauty",
    "lifestyle_dietary",
    "lifestyle_fit",
    "lifestyle_health",
    "pet_ownership",
    "professional_work_location_style",
    "shop_fashion",
    "shop_home",
    "shop_motors",
    "shop_technology",
    "travel_activities",
    "travel_hotel",
    "travel_restaurant",
    "travel_transportation",
)
#: MemoryCode's dialogues of 10 sessions or more (dataset/dialogue_<n>.json, n 151-360): the split's key.
MEMORYCODE_DIALOGUES = tuple(str(n) for n in range(151, 361))
#: The data sets split by halves of a fixed list of names (sha256 order), and the names.
_BY_NAME = {
    "memorybank": ("user", MEMORYBANK_USERS),
    "realtalk": ("chat", REALTALK_CHATS),
    "realmem": ("persona", REALMEM_PERSONAS),
    "beam": ("conversation", BEAM_CHATS),
    "prefeval": ("topic", PREFEVAL_TOPICS),
    "memorycode": ("dialogue", MEMORYCODE_DIALOGUES),
}


def item_id(dataset: str, key: str, native: str) -> str:
    """The registry id of one item (``key`` decides its split; see the module docstring)."""
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}; known: {', '.join(DATASETS)}")
    return f"{dataset}:{key}:{native}"


def parity(text: str) -> str:
    """ "dev" when the sha256 of ``text`` is even, else "test"."""
    return "dev" if int(hashlib.sha256(text.encode()).hexdigest(), 16) % 2 == 0 else "test"


def squad_halves(titles: Iterable[str]) -> dict[str, str]:
    """SQuAD dev articles (or a memory set's users, chats or personas) by sha256 of the name: the
    first half "dev" (for SQuAD, the calibrations' "tune" half), the rest "test"; fixed and
    independent of file order."""
    ordered = sorted(titles, key=lambda t: hashlib.sha256(t.encode()).hexdigest())
    return {t: ("dev" if i < len(ordered) // 2 else "test") for i, t in enumerate(ordered)}


def split_of(item: str, squad_split: Mapping[str, str] | None = None) -> str:
    """ "dev" or "test" for a registry id. SQuAD ids need ``squad_split`` (title -> split, from
    :func:`squad_halves` over the 48 dev articles); every other rule reads the id alone."""
    dataset, key, _ = item.split(":", 2)
    if dataset in ("hotpotqa", "msmarco", "covidqa", "longmemeval"):
        return parity(key)
    if dataset in ("wikiqa", "selqa", "selqa_chat"):
        if key not in ("dev", "test"):
            raise ValueError(f"{item!r}: a {dataset} id names its file, dev or test")
        return key
    if dataset == "locomo":
        return "dev" if int(key) < 5 else "test"
    if dataset in _BY_NAME:
        what, names = _BY_NAME[dataset]
        if key not in names:
            raise ValueError(f"{item!r}: {dataset} has no {what} {key!r}")
        return squad_halves(names)[key]
    if dataset == "squad":
        if squad_split is None:
            raise ValueError("SQuAD ids need the article split (squad_halves over the dev articles)")
        return squad_split[key]
    raise ValueError(f"{item!r}: unknown dataset {dataset!r}")


@dataclass(frozen=True)
class Fitted:
    """A tuned value and the items it was fitted on (registry ids), with the command that fitted it."""

    knob: str
    items: tuple[str, ...]
    command: str
    value: object = None


def load_fitted(folder: Path = FITTED) -> list[Fitted]:
    """Every committed fitted record."""
    out = []
    for path in sorted(folder.glob("*.json")):
        raw = json.loads(path.read_text())
        out.append(Fitted(raw["knob"], tuple(raw["items"]), raw["command"], raw.get("value")))
    return out


def write_fitted(name: str, knob: str, items: Sequence[str], command: str, value: object = None, folder: Path = FITTED) -> Path:
    """Record what a tuning run fitted and on which items (sorted, so reruns diff cleanly)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps({"knob": knob, "command": command, "value": value, "items": sorted(set(items))}, indent=1) + "\n")
    return path


def detector_cli(argv: list[str] | None, doc: str, measure: Callable[[Path], tuple[dict[str, Any], list[str]]], record: tuple[str, str, str]) -> None:
    """A detector's command line: measure on dev questions (``--data``), print, and record the items it
    saw under ``record`` (name, knob, command)."""
    name, knob, command = record
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    stats, items = measure(ap.parse_args(argv).data)
    print(stats)
    write_fitted(name, knob, items, command, stats)


def check_fitted(records: Iterable[Fitted], split: Callable[[str], str]) -> list[str]:
    """Every (knob, item) where a fitted value saw an item the registry calls test."""
    return [f"{r.knob}: {item}" for r in records for item in r.items if split(item) != "dev"]
