"""Hot loops and hooks: code that runs every step although it is not the training loop itself.

* A **hot loop** runs the model on every iteration (a module call, a ``generate``-style call, or a
  function that does either, across modules): decoding loops, evaluation loops, rollouts. What runs in
  it runs once per iteration, so ``steps.Steps`` gives it a per-step ``Frequency`` whose ``hot`` field
  names the kind of loop; the message says "every decoding step" and the fix fits the loop.
* A **hook** is a function the framework calls every step: a per-step method of a class that derives
  from a known callback or module base (Lightning, Hugging Face), a function registered with a
  per-step registration call (``register_forward_hook``, ``add_callback("on_batch_end", fn)``), or a
  method called through a list of callbacks (``for cb in self.callbacks: cb.on_step_end(self)``).

Everything here is names (data) and the small functions that read them; the walker (model.py) and the
project view (project.Program) call these.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from xlalint.semantics import tables as T
from xlalint.semantics.syntax import assigned_names, measured_lengths, name_words

# --------------------------------------------------------------------------------------------------
# Hot loops
# --------------------------------------------------------------------------------------------------
DECODE = "decode"
EVAL = "eval"
ROLLOUT = "rollout"
MODEL_LOOP = "loop"  # runs the model every iteration, of no recognised kind
INFERENCE = "inference"  # a module's `forward` under `@torch.no_grad()`: it never trains (post-processing, a teacher)

# How a frequency reads in a message: (every iteration, every N iterations).
WHEN = {
    DECODE: ("every decoding step", "every {n} decoding steps"),
    EVAL: ("every evaluation batch", "every {n} evaluation batches"),
    ROLLOUT: ("every rollout step", "every {n} rollout steps"),
    MODEL_LOOP: ("every iteration of a loop that runs the model", "every {n} iterations of a loop that runs the model"),
    INFERENCE: ("every call of a `@torch.no_grad()` `forward` (each step when training calls it, else each "
                "evaluation batch)",
                "every {n} calls of a `@torch.no_grad()` `forward`"),
}

# The per-batch methods of frameworks that run on evaluation batches only (Lightning's validation/test/predict
# steps and their batch hooks, Hugging Face's prediction_step, speechbrain's evaluate_batch): a finding in
# them runs every evaluation batch, not every training step.
EVAL_STEP_METHODS = frozenset({
    "validation_step", "test_step", "predict_step", "validation_step_end", "test_step_end",
    "on_validation_batch_start", "on_validation_batch_end", "on_test_batch_start", "on_test_batch_end",
    "on_predict_batch_start", "on_predict_batch_end", "prediction_step", "on_prediction_step", "evaluate_batch",
})


def root_hot(name: str, no_grad: bool, class_key: Optional[str] = None) -> Optional[str]:
    """How often a function that runs per batch by itself (a root: a ``forward``, a framework's step method
    or hook) runs, as a hot-loop kind: None for every training step. The ``forward`` of a post-processor
    (``PostProcessPanoptic``, ``BBoxPostprocessor``: it turns a model's outputs into predictions, for an
    evaluation or a demo) runs every evaluation batch."""
    if name in EVAL_STEP_METHODS:
        return EVAL
    if name != "forward":
        return None
    if no_grad:
        return INFERENCE
    return EVAL if "postprocess" in (class_key or "").rpartition(".")[2].replace("_", "").lower() else None


# The fix of a finding that reads, tests or formats a device value in a hot loop (rules whose own fix
# is about the training step: accumulate, step closure). Other rules keep their own fix.
READ_RULES = frozenset({"XLA001", "XLA002", "XLA006"})
FIXES = {
    DECODE: ("keep what the loop produces on the device: write tokens and scores into fixed-size buffers "
             "(`out[:, t] = next_token`) read once after the loop; a stop test stays on the device (`done |= "
             "next_token == eos_id`), read on the host only every K tokens (`if t % K == 0 and done.all():`)"),
    EVAL: "accumulate on the device (`total += loss.detach()`, `correct += (pred == y).sum()`) and read once after the loop",
    ROLLOUT: ("keep the rollout's values on the device (append tensors, `torch.stack` them) and read them once "
              "per rollout; step the environment with device-side actions where it allows"),
    MODEL_LOOP: "keep the value on the device (accumulate or stack it) and read it once after the loop",
    INFERENCE: ("keep the values on the device and return them; read them once per batch, after the step's sync, "
                "where the results are used"),
}

# Words of the enclosing function's name, of the loop's bounds (`range(max_new_tokens)`) or of a
# `while` test that say what the loop does (a decode word wins over an evaluation word: `generate()`
# runs under `torch.no_grad()`).
ROLLOUT_WORDS = frozenset({"rollout", "rollouts", "episode", "episodes", "trajectory", "trajectories", "env", "envs"})
DECODE_WORDS = frozenset({"generate", "generation", "generations", "sample", "sampling", "decode", "decoding",
                          "greedy", "beam", "beams", "token", "tokens", "autoregressive", "autoregressively",
                          "completion", "completions", "tok", "toks", "gen", "refine", "refinement",
                          "word", "words", "chars", "caption", "captions", "translate", "translation",
                          "denoise", "denoising", "timesteps", "diffusion"})
EVAL_WORDS = frozenset({"eval", "evaluate", "evaluation", "val", "valid", "validate", "validation", "test",
                        "estimate", "predict", "prediction", "predictions", "inference", "infer", "score", "scoring"})
# Context managers and decorators under which a loop is evaluation, not training.
NO_GRAD_CALLS = frozenset({"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad",
                           "torch.autograd.grad_mode.no_grad", "torch.autograd.grad_mode.inference_mode"})
# `env.step(action)`: a rollout (the receiver's last word).
ENV_RECEIVER_WORDS = frozenset({"env", "envs", "environment", "environments", "sim", "simulator"})

# Methods of a module that run it (`model.generate(idx)`); ``forward``/``__call__`` too.
MODEL_RUN_METHODS = frozenset({"generate", "forward", "__call__", "greedy_search", "beam_search", "sample"})
# Methods of a module (or of an object named like a model) that do not run it; any other method call on
# it runs a submodule (`decoder.embedding(x)`, `self.model.encoder(src)`).
MODULE_UTILITY_METHODS = frozenset({
    "train", "eval", "to", "cuda", "cpu", "half", "float", "double", "bfloat16", "parameters",
    "named_parameters", "buffers", "named_buffers", "children", "named_children", "modules",
    "named_modules", "state_dict", "load_state_dict", "zero_grad", "apply", "requires_grad_", "type",
    "share_memory", "extra_repr", "add_module", "to_empty", "compile", "recompile", "lint", "print_readable",
    "tie_weights", "update", "step", "copy_", "detach", "item", "size", "dim", "numel", "tolist",
    "keys", "values", "items", "get", "pop", "append", "extend", "insert", "format", "join", "split",
    "manual_seed", "seed", "initial_seed",  # a torch.Generator named `generator`
    "define", "freeze", "unfreeze", "fuse_model", "push_to_hub", "merge_and_unload", "add_adapter",
})
MODULE_UTILITY_PREFIXES = ("register_", "init_", "get_", "set_", "reset_", "save_", "load_", "num_",
                           "enable_", "disable_", "resize_", "prepare_", "_")
# Functions that are a whole decode (their own loops run the tokens): a hot loop calling one (a loop over
# prompts) does not make everything in it run "every decoding step"; its own loops decide.
WHOLE_DECODE_FUNCTIONS = frozenset({"generate", "greedy_search", "beam_search", "sample", "contrastive_search",
                                    "assisted_decoding", "generate_batch", "translate", "translate_batch"})
# Module calls that do not make a loop hot: a loss or a metric, not the model.
NOT_MODEL_WORDS = frozenset({"loss", "criterion", "metric", "metrics", "accuracy", "acc", "norm", "lossfn",
                             "wrap", "sharding", "checkpoint"})  # auto_wrap_policy(module=...): a predicate


_DECODE_SUFFIXES = ("generate", "decode", "decoding")


def loop_kind(words) -> Optional[str]:
    """The kind a loop's words say (ROLLOUT, DECODE, EVAL), or None."""
    ws = set(words)
    if ws & ROLLOUT_WORDS:
        return ROLLOUT
    if ws & DECODE_WORDS or any(w.endswith(_DECODE_SUFFIXES) for w in ws):
        return DECODE  # `eagenerate`, `naivegenerate`, `specdecode`: a decode word at the end of one word
    if ws & EVAL_WORDS:
        return EVAL
    return None


# A period's text ends with this when its guard counts epochs (`epoch % args.val_frequency == 0`), not steps
EPOCHS = " epochs"


def period_parts(period: str) -> tuple:
    """The count of a period as a message shows it (``4``, `` `eval_every` ``) and what it counts
    ("steps", or "epochs" for a guard on an epoch counter)."""
    unit = "steps"
    if period.endswith(EPOCHS):
        period, unit = period[: -len(EPOCHS)], "epochs"
    return (period if period.isdigit() else f"`{period}`"), unit


def when_text(hot: Optional[str], period: Optional[str]) -> Optional[str]:
    """"every decoding step" / "every 10 decoding steps", or None when ``hot`` is not a hot loop."""
    forms = WHEN.get(hot) if hot else None
    if forms is None:
        return None
    if period:
        n, unit = period_parts(period)
        return forms[1].format(n=n) if unit == "steps" else f"{forms[0]} of every {n}th epoch"
    return forms[0]


def fix_for(code: str, hot: Optional[str], fix: str) -> str:
    """The fix of a finding of rule ``code`` in a loop of kind ``hot`` (else the rule's own ``fix``)."""
    if hot and code in READ_RULES and hot in FIXES:
        return FIXES[hot]
    return fix


# --------------------------------------------------------------------------------------------------
# Hooks
# --------------------------------------------------------------------------------------------------
_LIGHTNING_BATCH_HOOKS = frozenset({
    "on_train_batch_start", "on_train_batch_end", "on_validation_batch_start", "on_validation_batch_end",
    "on_test_batch_start", "on_test_batch_end", "on_predict_batch_start", "on_predict_batch_end",
    "on_before_backward", "on_after_backward", "on_before_optimizer_step", "on_before_zero_grad",
})
_HF_CALLBACK_HOOKS = frozenset({
    "on_step_begin", "on_step_end", "on_substep_end", "on_log", "on_pre_optimizer_step",
    "on_optimizer_step", "on_prediction_step",
})
_LIGHTNING_CALLBACKS = ("lightning.pytorch.Callback", "lightning.pytorch.callbacks.Callback",
                        "lightning.pytorch.callbacks.callback.Callback", "lightning.Callback",
                        "pytorch_lightning.Callback", "pytorch_lightning.callbacks.Callback",
                        "pytorch_lightning.callbacks.base.Callback", "pytorch_lightning.callbacks.callback.Callback")
_LIGHTNING_MODULES = T.LIGHTNING_MODULES
_HF_CALLBACKS = ("transformers.TrainerCallback", "transformers.trainer_callback.TrainerCallback")
_HF_TRAINERS = ("transformers.Trainer", "transformers.trainer.Trainer", "transformers.Seq2SeqTrainer",
                "transformers.trainer_seq2seq.Seq2SeqTrainer")

# trl's trainers subclass transformers' Trainer: a project trainer built on one inherits its per-step methods
_TRL_TRAINERS = tuple(f"trl.{n}" for n in (
    "SFTTrainer", "DPOTrainer", "GRPOTrainer", "PPOTrainer", "RewardTrainer", "KTOTrainer", "ORPOTrainer",
    "CPOTrainer", "RLOOTrainer", "OnlineDPOTrainer", "GKDTrainer", "BCOTrainer", "XPOTrainer", "NashMDTrainer"))
_HF_TRAINER_STEP_METHODS = frozenset({"compute_loss", "training_step", "prediction_step", "_prepare_inputs"})
# composer's Callback: the events of every training batch (not fit/epoch events; the eval_* events run per
# evaluation batch, which "every step" would misstate)
_COMPOSER_CALLBACKS = ("composer.Callback", "composer.core.Callback", "composer.core.callback.Callback")
_COMPOSER_BATCH_EVENTS = frozenset({
    "batch_start", "after_dataloader", "before_train_batch", "before_forward", "after_forward", "before_loss",
    "after_loss", "before_backward", "after_backward", "after_train_batch", "batch_end"})
# fastai's Callback: the events of every batch
_FASTAI_CALLBACKS = ("fastai.callback.core.Callback", "fastai.callback.all.Callback", "fastai.learner.Callback")
_FASTAI_BATCH_EVENTS = frozenset({"before_batch", "after_pred", "after_loss", "before_backward", "after_backward",
                                  "before_step", "after_step", "after_batch"})
# speechbrain's Brain: fit_batch() runs compute_forward/compute_objectives every step (evaluate_batch, per
# evaluation batch, is left out: "every step" would misstate it)
_SPEECHBRAIN_BRAINS = ("speechbrain.Brain", "speechbrain.core.Brain")
_SPEECHBRAIN_BATCH_METHODS = frozenset({"fit_batch", "compute_forward", "compute_objectives",
                                        "on_fit_batch_start", "on_fit_batch_end"})

# A base class (as the user's import resolves it) -> the methods of its subclasses that run every step
# (or every batch of an evaluation). Epoch-level hooks (`on_train_epoch_end`, `on_evaluate`) are not here.
PER_STEP_HOOK_METHODS = {
    **{b: _LIGHTNING_BATCH_HOOKS for b in _LIGHTNING_CALLBACKS},
    **{b: _LIGHTNING_BATCH_HOOKS | {"optimizer_step", "optimizer_zero_grad", "training_step_end",
                                     "validation_step_end", "on_after_batch_transfer"} for b in _LIGHTNING_MODULES},
    **{b: _HF_CALLBACK_HOOKS for b in _HF_CALLBACKS},
    **{b: _HF_TRAINER_STEP_METHODS for b in _HF_TRAINERS + _TRL_TRAINERS},
    **{b: _COMPOSER_BATCH_EVENTS for b in _COMPOSER_CALLBACKS},
    **{b: _FASTAI_BATCH_EVENTS for b in _FASTAI_CALLBACKS},
    **{b: _SPEECHBRAIN_BATCH_METHODS for b in _SPEECHBRAIN_BRAINS},
}

ALL_HOOK_METHODS = frozenset().union(*PER_STEP_HOOK_METHODS.values())

# Calls that register their function argument to run on every forward / backward / optimizer step.
PER_STEP_REGISTRATIONS = frozenset({
    "register_forward_hook", "register_forward_pre_hook", "register_full_backward_hook",
    "register_full_backward_pre_hook", "register_backward_hook", "register_step_pre_hook",
    "register_step_post_hook", "register_post_accumulate_grad_hook",
})
# Calls that register a function on a named event (`trainer.add_callback("on_batch_end", fn)`,
# `engine.add_event_handler(Events.ITERATION_COMPLETED, fn)`, `@trainer.on(Events.ITERATION_COMPLETED)`):
# the function runs every step when the event is one of PER_STEP_EVENTS.
EVENT_REGISTRATIONS = frozenset({"add_callback", "set_callback", "register_callback", "add_event_handler",
                                 "on", "add_hook", "register_event_hook"})
PER_STEP_EVENTS = frozenset({
    "on_batch_end", "on_batch_begin", "on_batch_start", "on_step_end", "on_step_begin", "on_step_start",
    "on_train_batch_end", "on_train_batch_start", "on_iteration_end", "on_iteration_start", "batch_end",
    "batch_start", "step_end", "step_begin", "iteration_end", "iteration_start", "after_step", "before_step",
    "after_iter", "before_iter", "after_train_iter", "before_train_iter",
    "ITERATION_COMPLETED", "ITERATION_STARTED", "on_validation_batch_end", "on_log",
} | _HF_CALLBACK_HOOKS | _LIGHTNING_BATCH_HOOKS)

# Methods called on an object of unknown class whose name says they are a per-step hook: the call runs
# every project method of that name in a callback-like class (`for cb in self.callbacks: cb.on_step_end(self)`).
DISPATCHED_HOOKS = PER_STEP_EVENTS - {"ITERATION_COMPLETED", "ITERATION_STARTED"}
# A project class is callback-like when its name or a project base's name ends like this, or it derives
# from a base of PER_STEP_HOOK_METHODS.
CALLBACK_CLASS_SUFFIXES = ("Callback", "Callbacks", "Hook", "Hooks")
DISPATCH_PREFIX = "@*"  # a callee key: "@*on_step_end" runs the project's callback methods of that name
CALLABLE_PREFIX = "@&"  # a callee key: "@&pkg.a:f|pkg.b:g" runs one of the callbacks passed (kinds.callables)


def hook_methods_of(bases) -> frozenset:
    """The per-step hook method names of a class whose (transitive) external bases are ``bases``."""
    out: frozenset = frozenset()
    for b in bases:
        out = out | PER_STEP_HOOK_METHODS.get(b, frozenset())
    return out


def is_per_step_event(event: Optional[str]) -> bool:
    """``"on_batch_end"`` or ``Events.ITERATION_COMPLETED`` (its last name): a per-step event."""
    if not event:
        return False
    return event.rpartition(".")[2] in PER_STEP_EVENTS


def callback_like_name(name: str) -> bool:
    return name.endswith(CALLBACK_CLASS_SUFFIXES)


def words_of(*names) -> list:
    out = []
    for n in names:
        if n:
            out.extend(name_words(n))
    return out



def tests_what_it_grows(loop) -> bool:
    """A ``while`` loop whose test reads the length of a tensor its body rebinds (``while prefix.shape[1] < T:``
    with ``prefix = torch.cat((prefix, t), dim=1)``): a loop over positions, whatever each round calls (a
    speculative round drafts several tokens with ``cache.generate(prefix, gamma)``)."""
    return type(loop) is cst.While and bool(set(measured_lengths(loop.test)) & assigned_names(loop.body))
