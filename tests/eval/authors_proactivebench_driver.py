"""Run the ProactiveBench authors' package (``pip install proactivebench``, Python >= 3.12) on a spec read from stdin.

Not a test module: ``test_authors_crosscheck.py`` runs it in a subprocess with an interpreter that has the
package, and compares what it prints with the project's loader and environments. Input (JSON)::

    {"data_dir": DIR, "datasets": [FOLDER, ...], "plays": [{"dataset": FOLDER, "record": {...}, "answers": [...]}]}

Output: ``{"kept": {FOLDER: [ids kept by load_proactivebench_dataset]}, "plays": [{"oeg", "turns"}, ...]}``:
``oeg`` is the environment's open-ended valid answers (``get_open_ended_gen_answers``), and a turn is ``{"image": relative path, "options": [...], "box": [l, t, r, b] or null, "action": ..., "category": ...,
"stop": bool, "correct": bool}``.

The loader module imports torch and qwen_vl_utils at the top, for image helpers the loader does not use; where
they are not installed, empty stand-ins are registered so that ``JSONLDataset`` (jsonlines + FILTER + skip
arguments) runs as published.
"""

import json
import os
import sys
import types


def _stand_ins() -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        torch, utils, data = (types.ModuleType(n) for n in ("torch", "torch.utils", "torch.utils.data"))
        data.Dataset, utils.data, torch.utils = object, data, utils
        sys.modules.update({"torch": torch, "torch.utils": utils, "torch.utils.data": data})
    try:
        import qwen_vl_utils  # noqa: F401
    except ImportError:
        module = types.ModuleType("qwen_vl_utils")
        module.process_vision_info = None
        sys.modules["qwen_vl_utils"] = module


class _Box:
    """Stands in for a PIL image: ``crop(box)`` returns the box, so a transform tells which view it shows."""

    def crop(self, box):
        return list(box)


def play(spec: dict, data_dir: str) -> dict:
    from proactivebench.environment import get_environment

    env = get_environment(spec["dataset"])(entry=spec["record"], data_dir=data_dir)
    oeg = env.get_open_ended_gen_answers()
    turns, answers = [], iter(spec["answers"])
    while not env.stop:
        state = env.get_state()
        box = state["transform"](_Box())
        env.evaluate_generated_answer(next(answers))
        turns.append(
            {
                "image": os.path.relpath(state["image_path"], data_dir),
                "options": state["options"],
                "box": box if isinstance(box, list) else None,
                "action": env.action_evaluation_history[-1],
                "category": env.category_evaluation_history[-1],
                "stop": env.stop,
                "correct": env.correct_prediction,
            }
        )
    return {"oeg": oeg, "turns": turns}


def main() -> None:
    spec = json.load(sys.stdin)
    _stand_ins()
    from proactivebench.data_utils import load_proactivebench_dataset

    data_dir = spec["data_dir"]
    kept = {name: [r["id"] for r in load_proactivebench_dataset(data_dir, name)] for name in spec["datasets"]}
    json.dump({"kept": kept, "plays": [play(p, data_dir) for p in spec["plays"]]}, sys.stdout)


if __name__ == "__main__":
    main()
