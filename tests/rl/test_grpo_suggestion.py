"""Single-turn proactive-suggestion GRPO: environment rows, recipes, backend gating, reward wiring, a real step."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

from proactive_rl.data.mcqa import environment_rows, proactivebench_environments, rows_to_dataset
from proactive_rl.synthetic.environments import SequenceEnvironment, make_environments

ROOT = Path(__file__).resolve().parents[2]
RECIPES = sorted([ROOT / "recipes/tiny/grpo_suggestion.yaml", *(ROOT / "recipes/proactivebench").glob("grpo_*.yaml")])


def frames(n):
    return [np.full((8, 8, 3), 10 * i, np.uint8) for i in range(n)]


def sketch_env(**kw):
    """A hand-made 3-image sequence: one forward move per turn, the object recognisable on the last image."""
    args = dict(
        id="e0",
        dataset="synthetic_sketch",
        kind="sketch",
        images=frames(3),
        prompt="What is drawn?",
        options=["I do not know.", "Add more details."],
        categories=["cat", "dog", "cow", "hen"],
        answer="dog",
        moves={"Add more details.": 1},
        first_image=0,
        reference_image=2,
        steps_needed=2,
        max_steps=3,
    )
    return SequenceEnvironment(**{**args, **kw})


# --- rows ------------------------------------------------------------------------------------------------


def test_rows_walk_every_state_to_the_informative_image():
    rows = environment_rows(sketch_env())
    assert [r["step"] for r in rows] == [0, 1, 2]
    assert [int(r["image"][0, 0, 0]) for r in rows] == [0, 10, 20]
    assert [r["valid_actions"] for r in rows] == [["Add more details."], ["Add more details."], []]
    assert all(r["answer"] == "dog" for r in rows)
    assert rows[0]["options"] == ["I do not know.", "Add more details.", "cat", "dog", "cow", "hen"]
    assert rows[0]["prompt"] == [
        {
            "role": "user",
            "content": "What is drawn? Choose from the following options. Options:\nA. I do not know.\n"
            "B. Add more details.\nC. cat\nD. dog\nE. cow\nF. hen\n"
            "Please only return one of the options without any other words.",
        }
    ]


def test_rows_blank_the_answer_where_the_environment_rejects_a_category():
    # ROD-style: a category only counts after one move (the first image is fully occluded).
    env = sketch_env(category_from_move=1, circular=True, moves={"Add more details.": 1})
    rows = environment_rows(env)
    assert [r["answer"] for r in rows] == ["", "dog", "dog"]


def test_rows_hint_and_max_states():
    rows = environment_rows(sketch_env(hint="Hint: draw more."), max_states=2, hint=True)
    assert len(rows) == 2
    assert rows[0]["prompt"][0]["content"].startswith("What is drawn? Hint: draw more. Choose from")


def test_rows_need_an_answer():
    env = sketch_env()
    env.answer = ""
    with pytest.raises(ValueError, match="environment 'e0': needs an `answer`"):
        environment_rows(env)


def test_synthetic_rows_cover_each_environment_path():
    for env in make_environments("zoom_out", 3, seed=5):
        rows = environment_rows(env)
        assert len(rows) == env.steps_needed + 1  # first image .. reference image
        assert rows[-1]["valid_actions"] == [] or rows[-1]["answer"] == env.answer


def test_rows_to_dataset_has_images_and_reward_columns():
    ds = rows_to_dataset(environment_rows(sketch_env()))
    assert ds.column_names == ["prompt", "image", "options", "answer", "valid_actions", "env_id", "dataset", "step"]
    assert ds[0]["image"].size == (8, 8) and ds[2]["valid_actions"] == []
    with pytest.raises(ValueError, match="no training rows"):
        rows_to_dataset([])


def test_proactivebench_jsonl_becomes_rows_with_lazy_image_paths(tmp_path):
    from PIL import Image

    for i in range(3):
        Image.fromarray(np.full((4, 4, 3), 50 * i, np.uint8)).save(tmp_path / f"qd_{i:04d}.png")
    record = {
        "id": "qd1",
        "image_template": "qd_{:04d}.png",
        "first_image": 0,
        "num_images": 3,
        "prompt": "What is drawn?",
        "options": ["Add more details to the drawing.", "I do not know."],
        "categories": ["cat", "dog", "cow", "hen"],
        "answer": 1,
    }
    path = tmp_path / "train.jsonl"
    path.write_text(json.dumps(record) + "\n")
    rows = environment_rows(proactivebench_environments(path, "QD")[0])
    assert [Path(r["image"]).name for r in rows] == ["qd_0000.png", "qd_0001.png", "qd_0002.png"]
    assert [r["valid_actions"] for r in rows] == [["Add more details to the drawing."]] * 2 + [[]]
    assert {r["answer"] for r in rows} == {"dog"}
    ds = rows_to_dataset(rows)
    assert np.asarray(ds[1]["image"])[0, 0, 0] == 50  # decoded from the path
    with pytest.raises(Exception, match="dataset"):
        proactivebench_environments(path)  # no dataset given and none in the record


# --- reward wiring ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("r_p", [0.5, 0.75, 1.0])
def test_reward_on_rows_matches_the_paper_rule(r_p):
    from proactive_rl.grpo.suggestion.config import SuggestionScriptArguments
    from proactive_rl.grpo.suggestion.main import build_rewards

    args = SuggestionScriptArguments(environments=[{"source": "synthetic", "kind": "sketch", "num_envs": 1}], r_p=r_p)
    (reward,) = build_rewards(args, num_generations=4)
    assert reward.__name__ == "proactive_suggestion"
    rows = environment_rows(sketch_env())
    columns = {k: [rows[0][k]] * 4 for k in ("options", "answer", "valid_actions")}
    # A = abstain, B = valid suggestion, D = the correct category, C = a wrong one (hand-scored, paper §5)
    assert reward(completions=["A", "B", "D", "C"], prompts=["p"] * 4, **columns) == [0.0, r_p, 1.0, 0.0]
    last = {k: [rows[2][k]] * 2 for k in ("options", "answer", "valid_actions")}
    assert reward(completions=["B. Add more details.", "D. dog"], **last) == [0.0, 1.0]  # no move left


def test_rows_without_valid_actions_fail_at_start_up(monkeypatch, tmp_path):
    """No valid_actions column would silently pay no r_p: the trainer refuses to start (docs/spec.md §7)."""
    import proactive_rl.data.mcqa as mcqa
    import proactive_rl.grpo.suggestion.main as suggestion

    to_dataset = mcqa.rows_to_dataset
    monkeypatch.setattr(suggestion, "rows_to_dataset", lambda rows: to_dataset(rows).remove_columns("valid_actions"))
    with pytest.raises(ValueError, match=r"needs the dataset column\(s\) \['valid_actions'\]"):
        suggestion.build_trainer(*_tiny_args(max_steps=1, out=tmp_path))


def test_reward_returning_wrong_length_fails_naming_it_inside_grpo(monkeypatch):
    from proactive_rl.grpo.reward_guard import GuardedReward, RewardError
    from proactive_rl.grpo.suggestion import main as suggestion

    def broken(completions, **kw):
        return [1.0]

    monkeypatch.setattr(suggestion, "build_rewards", lambda a, g: [GuardedReward(broken)])
    trainer = suggestion.build_trainer(*_tiny_args(max_steps=1))
    with pytest.raises(RewardError, match=r"reward 'broken' returned 1 values for 4 completions"):
        trainer.train()


def torch_cuda():
    import torch

    return torch.cuda.is_available()


# --- configuration ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.name)
def test_recipes_parse(recipe):
    """(The lint of every shipped recipe: tests/rl/test_recipes.py.)"""
    from proactive_rl.grpo.suggestion.main import make_parser

    lines = recipe.read_text().splitlines()
    assert "-m proactive_rl.cli train --config " in lines[0] or lines[0].startswith("# proactive-rl train --config ")
    # The GPU recipes ask for bf16, which TrainingArguments refuses on a CPU-only machine: override just that.
    cpu = [] if "tiny" in recipe.parts or torch_cuda() else ["--bf16", "false", "--use_cpu", "true"]
    script_args, training_args, model_args = make_parser().parse_args_and_config(["--config", str(recipe), *cpu])
    assert script_args.trainer == "grpo_suggestion"
    assert (model_args.lora_r, model_args.lora_alpha, model_args.lora_dropout) == (16, 16, 0.1)
    assert sorted(model_args.lora_target_modules) == ["k_proj", "q_proj"]
    if "proactivebench" in recipe.parts:  # ProactiveBench Table 5
        assert training_args.learning_rate == 2e-5 and training_args.num_generations == 8
        assert training_args.lr_scheduler_type == "cosine" and training_args.warmup_steps == 0
        gpus = int(re.search(r"--num_processes (\d+)", lines[0]).group(1))  # 4 for Qwen2.5-VL, 16 for LLaVA-NeXT
        assert training_args.per_device_train_batch_size * gpus * training_args.gradient_accumulation_steps == 512
        assert script_args.r_p == {"050": 0.5, "075": 0.75, "100": 1.0}[recipe.stem[-3:]]


def test_bad_configuration_fails_at_start_up_naming_the_field():
    from proactive_rl.grpo.suggestion.config import SuggestionScriptArguments

    with pytest.raises(ValueError, match="environments: required"):
        SuggestionScriptArguments()
    with pytest.raises(ValueError, match=r"environments\[0\]\.kind: expected one of occlusion"):
        SuggestionScriptArguments(environments=[{"source": "synthetic", "kind": "blur", "num_envs": 2}])
    with pytest.raises(ValueError, match=r"environments\[0\]: unknown keys \['count'\]; expected some of"):
        SuggestionScriptArguments(environments=[{"source": "synthetic", "kind": "sketch", "count": 2}])
    # one environment spec for training and evaluation: the evaluators' spelling {kind, n} trains too
    (src,) = SuggestionScriptArguments(environments=[{"kind": "sketch", "n": 2}]).environments
    assert (src.source, src.kind, src.num_envs) == ("synthetic", "sketch", 2)
    with pytest.raises(ValueError, match=r"environments\[0\]\.num_envs: a synthetic source needs num_envs >= 1"):
        SuggestionScriptArguments(environments=[{"kind": "sketch"}])
    with pytest.raises(ValueError, match=r"environments\[0\]: 'num_envs' given twice"):
        SuggestionScriptArguments(environments=[{"kind": "sketch", "n": 2, "num_envs": 2}])
    with pytest.raises(ValueError, match="generation_backend: expected one of"):
        SuggestionScriptArguments(environments=["x.jsonl"], generation_backend="sglang")
    with pytest.raises(ValueError, match="reward_on_error"):
        SuggestionScriptArguments(environments=["x.jsonl"], reward_on_error="ignore")


def test_vllm_gate_is_honest(monkeypatch):
    from trl import GRPOConfig

    from proactive_rl.grpo.suggestion import backend as suggestion

    args = GRPOConfig(output_dir="/tmp/x", use_cpu=True, report_to=[])
    monkeypatch.setattr(suggestion, "vllm_status", lambda: (False, "no CUDA GPU is visible"))
    assert suggestion.resolve_generation_backend("auto", args) == "transformers" and args.use_vllm is False
    with pytest.raises(RuntimeError, match="generation_backend=vllm .* but no CUDA GPU is visible"):
        suggestion.resolve_generation_backend("vllm", args)
    args.use_vllm = True  # a recipe asking for vLLM on a machine without it fails instead of pretending
    with pytest.raises(RuntimeError, match="no CUDA GPU"):
        suggestion.resolve_generation_backend("auto", args)
    monkeypatch.setattr(suggestion, "vllm_status", lambda: (True, "ok"))
    args.use_vllm = False
    assert suggestion.resolve_generation_backend("auto", args) == "vllm" and args.use_vllm is True
    assert suggestion.resolve_generation_backend("transformers", args) == "transformers" and args.use_vllm is False


def test_real_vllm_status_matches_this_machine():
    import importlib.util

    import torch

    from proactive_rl.grpo.suggestion.backend import vllm_status

    expected = importlib.util.find_spec("vllm") is not None and torch.cuda.is_available()
    assert vllm_status()[0] is expected


# --- a real GRPO step on the tiny model --------------------------------------------------------------------


def _tiny_args(**overrides):
    from proactive_rl.grpo.suggestion.main import make_parser

    argv = [
        "--config",
        str(ROOT / "recipes/tiny/grpo_suggestion.yaml"),
        "--output_dir",
        str(overrides.pop("out", "/tmp/t")),
    ]
    # No warm start here: these tests check the GRPO wiring (the warm start has its own tests).
    defaults = {"per_device_train_batch_size": 4, "num_generations": 4, "logging_steps": 1, "warm_start_steps": 0}
    for k, v in {**defaults, **overrides}.items():
        argv += [f"--{k}", str(v)]
    script_args, training_args, model_args = make_parser().parse_args_and_config(argv)
    script_args.environments = script_args.environments[:1]
    script_args.environments[0].num_envs = 2
    for src in script_args.eval_environments:
        src.num_envs = 2
    return script_args, training_args, model_args


@pytest.mark.slow
def test_tiny_grpo_with_lora_trains_and_evaluates(tmp_path):
    import torch

    from proactive_rl.grpo.suggestion.main import main

    script_args, training_args, model_args = _tiny_args(max_steps=2, out=tmp_path, use_peft="true")
    trainer = main(script_args, training_args, model_args)
    assert trainer.generation_backend == "transformers"  # no vLLM on this machine, and it says so
    lora_b = [p for n, p in trainer.model.named_parameters() if "lora_B" in n]
    assert lora_b and any(torch.count_nonzero(p) > 0 for p in lora_b)  # B starts at 0: the step moved it
    adapted = {re.search(r"(\w+)\.lora_A\.", n).group(1) for n, _ in trainer.model.named_parameters() if "lora_A" in n}
    assert adapted == {"q_proj", "k_proj"}
    logs = [h for h in trainer.state.log_history if "rewards/proactive_suggestion/mean" in h]
    assert logs and all(0.0 <= h["rewards/proactive_suggestion/mean"] <= 1.0 for h in logs)
    report = json.loads((tmp_path / "suggestion_eval.json").read_text())
    assert report["after"]["n"] == 2 * len(script_args.eval_environments) and 0 <= report["after"]["acc"] <= 100
    assert (tmp_path / "adapter_config.json").exists()


@pytest.mark.slow
def test_skip_mode_logs_an_error_rate_and_trains_on(tmp_path, monkeypatch):
    from proactive_rl.grpo.reward_guard import GuardedReward
    from proactive_rl.grpo.suggestion import main as suggestion

    def flaky(completions, **kw):
        raise ConnectionError("judge down")

    monkeypatch.setattr(
        suggestion, "build_rewards", lambda a, g: [GuardedReward(flaky, "skip", g, max_error_rate=1.0)]
    )
    script_args, training_args, model_args = _tiny_args(max_steps=1, out=tmp_path)
    trainer = suggestion.build_trainer(script_args, training_args, model_args)
    trainer.train()
    logged = [h for h in trainer.state.log_history if "rewards/flaky/error_rate" in h]
    assert logged and logged[0]["rewards/flaky/error_rate"] == 1.0


# --- tiny CPU setting: difficulty knobs and warm start -------------------------------------------------------

KNOBS = {"negatives": "easy", "colours": ["red", "green", "blue", "yellow"], "layout": "fixed"}


def test_synthetic_source_passes_its_knobs_and_checks_them_at_start_up():
    from proactive_rl.data.mcqa import EnvironmentSpec
    from proactive_rl.grpo.suggestion.config import SuggestionScriptArguments

    src = EnvironmentSpec.from_dict({"source": "synthetic", "kind": "corruption", "num_envs": 2, **KNOBS}, "e[0]")
    for env in src.build():
        assert [c.split(" ")[0] for c in env.categories] == KNOBS["colours"]
    with pytest.raises(ValueError, match=r"environments\[0\]: negatives: expected one of"):
        SuggestionScriptArguments(
            environments=[{"source": "synthetic", "kind": "corruption", "num_envs": 2, "negatives": "x"}]
        )
    with pytest.raises(ValueError, match=r"environments\[0\]: .*only apply to source: synthetic"):
        SuggestionScriptArguments(environments=[{"source": "x.jsonl", "layout": "fixed"}])


def test_warm_start_rows_use_the_reference_image_and_the_suggestion_rate():
    from proactive_rl.grpo.suggestion.warm_start import warm_start_rows
    from proactive_rl.models import build_tiny

    _, processor = build_tiny("qwen2_5_vl", "xs")
    envs = make_environments("corruption", 6, seed=1, corruptions=["contrast"], **KNOBS)
    rows = warm_start_rows(envs, processor, suggest_rate=0.0)
    # Fixed layout: 5 action options (A-E), then red, green, blue, yellow (F-I).
    colours = KNOBS["colours"]
    assert [r["target"] for r in rows] == [5 + colours.index(e.answer.split(" ")[0]) for e in envs]
    assert all(r["n_options"] == 9 for r in rows)
    rows = warm_start_rows(envs, processor, suggest_rate=0.999)
    assert [r["target"] for r in rows] == [2] * 6  # "Increase the contrast of the image." is C
    with pytest.raises(ValueError, match="suggest_rate"):
        warm_start_rows(envs, processor, suggest_rate=1.0)


def test_warm_start_rows_from_all_states_target_the_category_on_every_image():
    from proactive_rl.grpo.suggestion.warm_start import warm_start_rows
    from proactive_rl.models import build_tiny

    _, processor = build_tiny("qwen2_5_vl", "xs")
    envs = make_environments("corruption", 3, seed=2, corruptions=["merge"], **KNOBS)
    rows = warm_start_rows(envs, processor, suggest_rate=0.0, states="all")
    # merge: 4 states per environment (severity 3, 2, 1, clean), each row targeting the answer's letter (F-I).
    targets = [5 + KNOBS["colours"].index(e.answer.split(" ")[0]) for e in envs for _ in range(4)]
    assert [r["target"] for r in rows] == targets
    # The rows hold the environment's own images, most merged first (pixel values differ between the states).
    import torch

    assert not torch.equal(rows[0]["inputs"]["pixel_values"], rows[3]["inputs"]["pixel_values"])
    with pytest.raises(ValueError, match="states: expected one of reference, all"):
        warm_start_rows(envs, processor, suggest_rate=0.0, states="some")


@pytest.mark.slow
def test_warm_start_trains_in_place_and_lowers_the_loss():
    import torch

    from proactive_rl.grpo.suggestion.warm_start import warm_start
    from proactive_rl.models import build_tiny

    model, processor = build_tiny("qwen2_5_vl", "xs")
    envs = make_environments("corruption", 4, seed=2, corruptions=["contrast"], object_radius=0.6, **KNOBS)
    before = [p.detach().clone() for p in model.parameters()]
    losses = warm_start(model, processor, envs, steps=8, batch_size=4, suggest_rate=0.0)
    assert len(losses) == 8 and all(np.isfinite(losses))
    assert np.mean(losses[-2:]) < losses[0]  # 4 rows memorised: the loss falls
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_bad_warm_start_states_fail_naming_the_field():
    from proactive_rl.grpo.suggestion.config import SuggestionScriptArguments

    env = {"source": "synthetic", "kind": "corruption", "num_envs": 1}
    with pytest.raises(ValueError, match="warm_start_states: expected one of reference, all, got 'some'"):
        SuggestionScriptArguments(environments=[env], warm_start_states="some")


@pytest.mark.parametrize(("coef", "replayed"), [(None, 20.0), (2.0, 2.0), (0.0, None)])
def test_warm_start_replays_at_its_own_weight(monkeypatch, tmp_path, coef, replayed):
    """``warm_start_replay_coef`` (default: ``replay_coef``) is the replay weight of the warm start; at 0 the warm
    start computes no replay term. GRPO keeps ``replay_coef``."""
    from proactive_rl.data import parse_mixture
    from proactive_rl.grpo.suggestion import main as suggestion

    seen = {}

    def fake_warm_start(model, processor, envs, **kwargs):
        seen.update(kwargs)

    monkeypatch.setattr(suggestion, "warm_start", fake_warm_start)
    replay = [
        {"source": "synthetic", "task": "accident", "num_episodes": 1, "seed": 5, "knobs": {"duration": [10, 10]}}
    ]
    overrides = {"warm_start_steps": 1, "replay_coef": 20.0, "out": tmp_path}
    if coef is not None:
        overrides["warm_start_replay_coef"] = coef
    script_args, training_args, model_args = _tiny_args(**overrides)
    script_args.replay_mixture = parse_mixture(replay)
    trainer = suggestion.build_trainer(script_args, training_args, model_args)
    assert trainer.replay_coef == 20.0
    if replayed is None:
        assert seen["replay"] is None
    else:
        assert seen["replay"] is trainer.replay and seen["replay_coef"] == replayed


def test_warm_start_replay_weight_is_checked_at_start_up():
    from proactive_rl.grpo.suggestion.config import SuggestionScriptArguments

    env = {"source": "synthetic", "kind": "corruption", "num_envs": 1}
    replay = [{"source": "synthetic", "task": "accident", "num_episodes": 1}]
    with pytest.raises(ValueError, match="warm_start_replay_coef: expected a number >= 0, got -1.0"):
        SuggestionScriptArguments(environments=[env], replay_mixture=replay, warm_start_replay_coef=-1.0)
    args = SuggestionScriptArguments(environments=[env], replay_mixture=replay, replay_coef=20.0)
    assert args.warm_start_replay_coef == 20.0


def test_letters_only_samples_as_transformers_own_token_suppression():
    """`letters_only` (a -inf bias per banned id) gives the scores and samples of ``generate``'s ``suppress_tokens``."""
    import torch

    from proactive_rl.data.mcqa import letter_token_ids, letters_only, suppressed_tokens
    from proactive_rl.models import build_tiny

    model, processor = build_tiny("qwen2_5_vl", "xs")
    tokenizer = processor.tokenizer
    banned = suppressed_tokens(model, tokenizer, 4)
    inputs = tokenizer(["Which letter? A, B, C or D."], return_tensors="pt")
    runs = []
    for masking in ({"suppress_tokens": banned}, letters_only(banned)):
        torch.manual_seed(0)
        runs.append(
            model.generate(
                **inputs, do_sample=True, max_new_tokens=4, output_scores=True, return_dict_in_generate=True, **masking
            )
        )
    reference, ours = runs
    assert torch.equal(reference.sequences, ours.sequences)
    assert all(torch.equal(a, b) for a, b in zip(reference.scores, ours.scores, strict=True))
    assert set(ours.sequences[0, inputs["input_ids"].shape[1] :].tolist()) <= set(letter_token_ids(tokenizer, 4))
