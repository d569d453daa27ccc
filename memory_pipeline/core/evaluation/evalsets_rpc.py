"""The Japanese chat check: questions about RealPersonaChat speakers, answered by their own words.

Why it exists: the Japanese default search was selected on JSQuAD (Wikipedia paragraphs), and
a JSQuAD-fit answerability model refused real Japanese chat questions. This set is Japanese
*chat*: each question asks, in the third person with the speaker's id as their name
(``AKさんが飼っている動物は？``), for a fact that speaker states about themself in their
dialogues; the gold is every utterance of theirs found to state it.

One corpus is one speaker's history (every dialogue they took part in, the pipeline's
RealPersonaChat reader with ``owner`` = that speaker). The file
(``memory_pipeline_tests/fixtures/rpc_chat_check/questions.jsonl``; the ``README.md`` beside
it says how it was built, its limits and the CC BY-SA 4.0 attribution) holds only ids and the
question text: one object per line,
``{"id", "speaker", "kind", "question", "evidence": ["dialogue:<d>/utterance:<u>", ...]}``; the
evidence strings are the reader's ``source_ref``. The dialogue text stays in the shared data
folder; ``check_evidence`` verifies the ids against it.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from memory_pipeline.core.evaluation.evalsets_question import PRIMARY, EvalQuestion

# a question's kind: "slot" asks what nearly everyone has and talks about (job, home town,
# hobby, tastes, pets), "specific" presupposes a circumstance of this person (a spouse's home
# town, a honeymoon, a stay abroad): asked about someone else, a specific question is far
# more likely to be unanswerable (the foreign questions of the answerability protocol)
KINDS = ("slot", "specific")
QTYPE = "persona-{kind}"
HONORIFIC = "さん"
RPC_FILE = "dialogues.jsonl.gz"
_REF = re.compile(r"^dialogue:(\d+)/utterance:(\d+)$")
PACKAGED = (
    Path(__file__).resolve().parents[3]
    / "memory_pipeline_tests"
    / "fixtures"
    / "rpc_chat_check"
    / "questions.jsonl"
)


@dataclass(frozen=True)
class EvidenceProblem:
    """An evidence reference the corpus contradicts (missing, or not the speaker's words)."""

    question_id: str
    ref: str
    problem: str


def parse_ref(ref: str) -> tuple[int, int]:
    """``(dialogue_id, utterance_id)`` of a ``dialogue:<d>/utterance:<u>`` reference."""
    m = _REF.match(ref)
    if not m:
        raise ValueError(f"not a RealPersonaChat utterance reference: {ref!r}")
    return int(m.group(1)), int(m.group(2))


def load_rpc_chat_check(path: Path | str = PACKAGED) -> list[EvalQuestion]:
    """The questions of the file, each scoped to its speaker's history (``corpus_id`` =
    speaker id, ``qtype`` ``persona-slot`` or ``persona-specific``, gold: its evidence
    utterances as ``message_ref``, all primary).

    A malformed line raises ValueError naming the line: the file is a reviewed fixture, so a
    defect is an error to fix, not a row to skip."""
    out: list[EvalQuestion] = []
    seen: set[str] = set()
    for no, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            qid, speaker, kind, text, evidence = (
                obj["id"],
                obj["speaker"],
                obj["kind"],
                obj["question"],
                obj["evidence"],
            )
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}:{no}: {e}") from e
        if not (isinstance(qid, str) and isinstance(speaker, str) and isinstance(text, str)):
            raise ValueError(f"{path}:{no}: id, speaker and question must be strings")
        if kind not in KINDS:
            raise ValueError(f"{path}:{no}: kind must be one of {KINDS}, not {kind!r}")
        if qid in seen:
            raise ValueError(f"{path}:{no}: duplicate id {qid!r}")
        if not isinstance(evidence, list) or not evidence:
            raise ValueError(f"{path}:{no}: evidence must be a non-empty list")
        for ref in evidence:
            parse_ref(ref)
        if speaker + HONORIFIC not in text:
            raise ValueError(f"{path}:{no}: the question must name {speaker + HONORIFIC}")
        seen.add(qid)
        out.append(
            EvalQuestion(
                question_id=qid,
                corpus_id=speaker,
                question=text,
                qtype=QTYPE.format(kind=kind),
                gold={ref: PRIMARY for ref in evidence},
                gold_kind="message_ref",
            )
        )
    return out


def swap_speaker(text: str, src: str, dst: str) -> str:
    """``text`` asked about ``dst`` instead of ``src`` (the name with its honorific): the
    foreign question of the answerability protocol (a person who exists, a fact they never
    stated)."""
    return text.replace(src + HONORIFIC, dst + HONORIFIC)


def read_utterances(
    dialogues: Path | str, refs: Iterable[str]
) -> dict[str, tuple[str, str, tuple[str, ...]]]:
    """``{ref: (speaker, text, the dialogue's two speakers)}`` for the references found in the
    RealPersonaChat ``dialogues.jsonl.gz`` (one pass; a missing reference is absent)."""
    want: dict[int, set[int]] = {}
    for ref in refs:
        d, u = parse_ref(ref)
        want.setdefault(d, set()).add(u)
    out: dict[str, tuple[str, str, tuple[str, ...]]] = {}
    with gzip.open(dialogues, "rt", encoding="utf-8") as f:
        for line in f:
            obj = json.loads(line)
            did = obj.get("dialogue_id")
            if did not in want:
                continue
            pair = tuple(obj.get("interlocutors") or ())
            for u in obj.get("utterances") or ():
                if u.get("utterance_id") in want[did]:
                    ref = f"dialogue:{did}/utterance:{u['utterance_id']}"
                    out[ref] = (u.get("interlocutor_id"), u.get("text", ""), pair)
    return out


def check_evidence(
    questions: Iterable[EvalQuestion], utterances: Mapping[str, tuple[str, str, tuple[str, ...]]]
) -> list[EvidenceProblem]:
    """Evidence the corpus contradicts: a reference it lacks, or one spoken by someone other
    than the question's speaker (the fact must be in the person's own words)."""
    problems = []
    for q in questions:
        for ref in q.gold:
            found = utterances.get(ref)
            if found is None:
                problems.append(EvidenceProblem(q.question_id, ref, "no such utterance"))
            elif found[0] != q.corpus_id:
                problems.append(
                    EvidenceProblem(q.question_id, ref, f"spoken by {found[0]}, not {q.corpus_id}")
                )
    return problems
