"""ProactiveBench open-ended generation (OEG; ProactiveBench §3.1 and App. B, docs/spec.md §6): what the model is asked and
what the judge accepts, for one environment.

OEG is single-turn: the model sees the environment's first (ambiguous) image and its question without options
(the dataset's pre-prompt kept, no dataset hint), optionally followed by the generic `OEG_HINT` (the paper's
Table 9). The judge gets the valid answers, proactive suggestions first and then the correct category, built
as the authors' ``get_open_ended_gen_answers`` builds them (a comma-separated string; OEG accepts more
suggestions than the MCQA options):

- ROD: ``Move the blocks, Move the camera`` (no category);
- VSOD: ``Wait for the occlusion to disappear, Rewind the video, Move the camera`` and the category;
- MVP-N: ``Rotate the object, Move the camera`` (no category);
- ImageNet-C: the record's ``quality_answer`` (none when the first image is the last one) and the category;
- QuickDraw: ``Add more details to the drawing`` and the category;
- ChangeIt: the actions valid at the first frame, then ``Rewind the video`` (always), and the category;
- MS-COCO: ``Move the camera, Move farther from the object`` and the category (whatever the direction).

The first ``PREDICTION_THR[dataset]`` entries are the suggestions; `proactive_eval.benchmarks.proactivebench.metric.oeg_judgment` scores
the judge's 0/1 list against this string, and `proactive_eval.judges.oeg_prompt` shows it to the judge.
"""

from __future__ import annotations

from proactive_eval.benchmarks.proactivebench.coco import COCOEnvironment
from proactive_eval.benchmarks.proactivebench.environments import ProactiveBenchEnvironment
from proactive_eval.records import EpisodeError

#: The generic hint of the OEG setting (ProactiveBench §4.3, App. B).
OEG_HINT = "If you cannot answer this question, please tell me what I should do to help you."

#: Suggestions the authors accept whatever the record's options (``get_open_ended_gen_answers``).
_FIXED = {
    "ROD": ["Move the blocks", "Move the camera"],
    "VSOD": ["Wait for the occlusion to disappear", "Rewind the video", "Move the camera"],
    "MVP-N": ["Rotate the object", "Move the camera"],
    "QD": ["Add more details to the drawing"],
    "COCO": ["Move the camera", "Move farther from the object"],
}
_NO_CATEGORY = ("ROD", "MVP-N")


def oeg_question(prompt: str, hint: bool = False) -> str:
    """The OEG question: the environment's prompt, with `OEG_HINT` appended when `hint`.

    >>> oeg_question("What is drawn?", hint=True)
    'What is drawn? If you cannot answer this question, please tell me what I should do to help you.'
    """
    return f"{prompt} {OEG_HINT}" if hint else prompt


def oeg_valid_answers(env: ProactiveBenchEnvironment | COCOEnvironment) -> str:
    """The valid OEG answers of `env`'s first state, as the authors' comma-separated string (resets `env`).

    Raises:
        `EpisodeError`: an ImageNet-C record without ``quality_answer`` (naming the file, record and field).
    """
    observation = env.reset()
    dataset = env.dataset
    if dataset in _FIXED:
        suggestions = list(_FIXED[dataset])
    elif dataset == "IN-C":
        if "quality_answer" not in env.record.extra:
            raise EpisodeError(
                "OEG needs the one option that fixes the corruption (the authors' records carry it)",
                file=env.file,
                record=env.id,
                field="quality_answer",
            )
        suggestions = list(observation.valid_actions)
    elif dataset == "CIT":
        suggestions = list(observation.valid_actions) + ["Rewind the video."]  # the authors always add it
    else:  # pragma: no cover - ProactiveBenchEnvironment accepts only the datasets above
        raise ValueError(f"{dataset}: no OEG answers defined")
    categories = [] if dataset in _NO_CATEGORY else [env.answer]
    return ", ".join(a.replace(".", "") for a in suggestions + categories) + "."
