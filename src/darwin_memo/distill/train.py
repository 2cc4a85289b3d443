"""Distillation's training: LoRA on a causal LM over a store's surviving entries.

Needs the ``[distill]`` extra (torch, transformers, peft). Nothing imports this module
unless distillation is asked for, and it imports those libraries only inside its
functions, so ``import darwin_memo`` never loads them; a missing extra is one
``DistillError`` naming the install line.

With no base model given, ``build_base`` makes one from a configuration: a byte-level
BPE tokenizer trained on the store's own text with ``tokenizers`` and a small GPT-2
shaped network with seeded random weights. Nothing is downloaded, and memorising a
store of a few dozen answers takes minutes on two CPU cores. The base is frozen; only
the LoRA matrices learn, so everything the adapter knows came from the entries it was
shown, which is what makes the ``distill`` benchmark a test of the training *set*.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import random
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .selection import (
    CARD_JSON,
    CARD_MD,
    IGNORE_INDEX,
    DistillError,
    Example,
    TrainSettings,
    card_markdown,
    examples_of,
    format_prompt,
    label_ids,
    model_card,
    select_entries,
)

__all__ = [
    "ADAPTER_DIR",
    "BASE_DIR",
    "EOS_TOKEN",
    "Libs",
    "Memory",
    "base_texts",
    "build_base",
    "distill_store",
    "load_memory",
    "require_libs",
    "train_adapter",
]

#: Where ``distill_store`` puts a base it built, inside the output folder.
BASE_DIR = "base"
ADAPTER_DIR = "adapter"
#: The end-of-text token of a built base (also its padding token).
EOS_TOKEN = "<|endoftext|>"
INSTALL_HINT = "pip install 'darwin-memo[distill]'"

Progress = Callable[[str], None]


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Libs:
    """The extra's modules, imported on demand (typed loosely: they are optional)."""

    torch: Any
    transformers: Any
    peft: Any


def require_libs() -> Libs:
    """torch, transformers and peft, or a ``DistillError`` naming the install line."""
    missing = []
    modules = {}
    for name in ("torch", "transformers", "peft"):
        try:
            modules[name] = importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        raise DistillError(
            f"distillation needs the [distill] extra ({', '.join(missing)} not installed): "
            f"{INSTALL_HINT}"
        )
    transformers = modules["transformers"]
    transformers.logging.set_verbosity_error()  # no "weights not initialized" chatter
    transformers.logging.disable_progress_bar()  # progress is ours, one line an epoch
    return Libs(modules["torch"], transformers, modules["peft"])


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence the libraries' deprecation notices to each other (peft reads a
    transformers property that warns): they say nothing about this run."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        yield


def _device(libs: Libs, wanted: str) -> str:
    cuda = bool(libs.torch.cuda.is_available())
    if wanted == "cuda" and not cuda:
        raise DistillError("--device cuda was asked for, but torch sees no CUDA device")
    if wanted == "auto":
        return "cuda" if cuda else "cpu"
    return wanted


def _seed_everything(libs: Libs, seed: int) -> None:
    random.seed(seed)
    libs.torch.manual_seed(seed)


# --------------------------------------------------------------------------- #
# A base model from a configuration (no download)
# --------------------------------------------------------------------------- #


def build_base(
    texts: Sequence[str],
    out_dir: str | Path,
    *,
    seed: int = 0,
    layers: int = 2,
    width: int = 128,
    heads: int = 4,
    vocab_size: int = 512,
    max_positions: int = 256,
    init_range: float = 0.1,
) -> dict[str, Any]:
    """Write a small GPT-2 shaped causal LM and its tokenizer to ``out_dir``.

    The tokenizer is a byte-level BPE trained on ``texts`` (so any text encodes; the
    store's words become few tokens); the weights are random, seeded by ``seed``.
    Returns the description recorded in model cards.

    ``init_range`` is the weights' standard deviation: GPT-2's own 0.02 leaves a
    frozen random base with logits too flat (tied embeddings of norm ~0.2) for a
    LoRA adapter to sharpen, so its loss stalls near 4 nats; 0.1 lets it fall
    below 0.5 within a few dozen epochs.
    """
    libs = require_libs()
    tokenizers = importlib.import_module("tokenizers")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    bpe = tokenizers.Tokenizer(tokenizers.models.BPE())
    bpe.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS_TOKEN],
        initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(list(texts), trainer=trainer)
    tokenizer = libs.transformers.PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token=EOS_TOKEN, pad_token=EOS_TOKEN, bos_token=EOS_TOKEN
    )
    eos = tokenizer.convert_tokens_to_ids(EOS_TOKEN)
    config = libs.transformers.GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=max_positions,
        n_embd=width,
        n_layer=layers,
        n_head=heads,
        bos_token_id=eos,
        eos_token_id=eos,
        pad_token_id=eos,
        initializer_range=init_range,
    )
    _seed_everything(libs, seed)
    model = libs.transformers.GPT2LMHeadModel(config)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return {
        "architecture": "gpt2",
        "layers": layers,
        "width": width,
        "heads": heads,
        "vocab": len(tokenizer),
        "init_range": init_range,
        "seed": seed,
        "tokenizer": f"byte-level BPE trained on {len(texts)} texts",
    }


def base_texts(examples: Sequence[Example]) -> list[str]:
    """What a built base's tokenizer learns its merges from: the training text itself."""
    return [ex.prompt + ex.target for ex in examples]


# --------------------------------------------------------------------------- #
# Loading
# --------------------------------------------------------------------------- #


def _load_base(libs: Libs, model_dir: str | Path, device: str) -> tuple[Any, Any]:
    path = Path(model_dir)
    if not path.is_dir():
        raise DistillError(f"{path}: no such model folder (a local Hugging Face-format directory)")
    if not (path / "config.json").is_file():
        raise DistillError(f"{path}: not a Hugging Face model folder (no config.json)")
    auto = libs.transformers
    try:
        tokenizer = auto.AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        model = auto.AutoModelForCausalLM.from_pretrained(str(path), local_files_only=True)
    except (ValueError, KeyError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DistillError(f"{path}: not a causal language model ({first})") from None
    if tokenizer.eos_token_id is None:
        raise DistillError(f"{path}: its tokenizer has no end-of-text token")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model.to(device), tokenizer


@dataclass
class Memory:
    """A base model with a distilled adapter, ready to be asked questions."""

    model: Any
    tokenizer: Any
    device: str

    def ask(self, question: str, max_new_tokens: int = 64) -> str:
        """The model's greedy continuation of the question's prompt (answer text only)."""
        torch = importlib.import_module("torch")
        enc = self.tokenizer(format_prompt(question), return_tensors="pt").to(self.device)
        with torch.no_grad():
            out = self.model.generate(
                **enc,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=self.tokenizer.pad_token_id,
                eos_token_id=self.tokenizer.eos_token_id,
            )
        new = out[0][enc["input_ids"].shape[1] :]
        return str(self.tokenizer.decode(new, skip_special_tokens=True))


def load_memory(
    model_dir: str | Path, adapter_dir: str | Path | None, device: str = "auto"
) -> Memory:
    """The base at ``model_dir`` with the adapter at ``adapter_dir`` (None: the bare base)."""
    libs = require_libs()
    where = _device(libs, device)
    model, tokenizer = _load_base(libs, model_dir, where)
    if adapter_dir is not None:
        with _quiet():
            model = libs.peft.PeftModel.from_pretrained(model, str(adapter_dir)).to(where)
    model.eval()
    return Memory(model, tokenizer, where)


# --------------------------------------------------------------------------- #
# Training
# --------------------------------------------------------------------------- #


def _encode(
    tokenizer: Any, examples: Sequence[Example], max_length: int
) -> list[tuple[list[int], list[int]]]:
    rows = []
    for ex in examples:
        prompt = tokenizer(ex.prompt, add_special_tokens=False)["input_ids"]
        answer = tokenizer(ex.target, add_special_tokens=False)["input_ids"]
        rows.append(label_ids(prompt, [*answer, tokenizer.eos_token_id], max_length))
    return rows


def _batch(
    libs: Libs, rows: Sequence[tuple[list[int], list[int]]], pad: int, device: str
) -> dict[str, Any]:
    width = max(len(ids) for ids, _ in rows)
    ids = [r[0] + [pad] * (width - len(r[0])) for r in rows]
    labels = [r[1] + [IGNORE_INDEX] * (width - len(r[1])) for r in rows]
    mask = [[1] * len(r[0]) + [0] * (width - len(r[0])) for r in rows]
    t = libs.torch
    return {
        "input_ids": t.tensor(ids, device=device),
        "labels": t.tensor(labels, device=device),
        "attention_mask": t.tensor(mask, device=device),
    }


def train_adapter(
    examples: Sequence[Example],
    model_dir: str | Path,
    out_dir: str | Path,
    settings: TrainSettings,
    *,
    store: str,
    base_built: dict[str, Any] | None = None,
    progress: Progress | None = _stderr,
) -> dict[str, Any]:
    """Fine-tune a LoRA adapter on ``examples``; write it and its card; return the card.

    The adapter goes to ``out_dir/adapter``, the card to ``out_dir/card.json`` and
    ``out_dir/CARD.md``. Each epoch visits every example once, in a seeded order, in
    batches of ``settings.batch_size``; the loss falls on answer tokens only.
    """
    if not examples:
        raise DistillError("nothing to distill: no examples")
    libs = require_libs()
    torch = libs.torch
    device = _device(libs, settings.device)
    start = time.perf_counter()
    _seed_everything(libs, settings.seed)
    model, tokenizer = _load_base(libs, model_dir, device)
    conv1d = libs.transformers.pytorch_utils.Conv1D  # GPT-2's transposed linear layers
    lora = libs.peft.LoraConfig(
        r=settings.rank,
        lora_alpha=settings.alpha,
        lora_dropout=settings.dropout,
        target_modules="all-linear",
        fan_in_fan_out=any(isinstance(m, conv1d) for m in model.modules()),
        task_type="CAUSAL_LM",
    )
    with _quiet():
        model = libs.peft.get_peft_model(model, lora)
    model.train()
    rows = _encode(tokenizer, examples, settings.max_length)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=settings.lr, weight_decay=0.0)
    order = list(range(len(rows)))
    shuffler = random.Random(settings.seed)
    loss_value = float("nan")
    for epoch in range(1, settings.epochs + 1):
        shuffler.shuffle(order)
        total, tokens = 0.0, 0
        for i in range(0, len(order), settings.batch_size):
            chunk = [rows[j] for j in order[i : i + settings.batch_size]]
            batch = _batch(libs, chunk, tokenizer.pad_token_id, device)
            loss = model(**batch).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            n = int((batch["labels"][:, 1:] != IGNORE_INDEX).sum())
            total += float(loss.detach()) * n
            tokens += n
        loss_value = total / max(1, tokens)
        if progress is not None:
            progress(f"epoch {epoch}/{settings.epochs}: loss {loss_value:.4f}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out / ADAPTER_DIR))
    card = model_card(
        store=store,
        examples=examples,
        settings=settings,
        base_model=str(model_dir),
        base_built=base_built,
        device=device,
        final_loss=loss_value,
        wall_time_s=time.perf_counter() - start,
        versions={
            "torch": str(torch.__version__),
            "transformers": str(libs.transformers.__version__),
            "peft": str(libs.peft.__version__),
        },
    )
    (out / CARD_JSON).write_text(json.dumps(card, indent=1, ensure_ascii=False) + "\n")
    (out / CARD_MD).write_text(card_markdown(card))
    return card


def distill_store(
    store_path: str,
    out_dir: str | Path,
    settings: TrainSettings,
    *,
    model_dir: str | Path | None = None,
    progress: Progress | None = _stderr,
) -> dict[str, Any]:
    """Distil a store's living, trusted entries into an adapter under ``out_dir``.

    Any store opens (JSON, SQLite, a ``postgresql://`` URL), read-only. Without
    ``model_dir`` a small base is built from a configuration into ``out_dir/base``.
    """
    from ..readonly import open_readonly

    with open_readonly(store_path) as ledger:
        examples = examples_of(select_entries(ledger.store.alive()))
    libs = require_libs()  # after the store's checks: bad input is reported first
    _device(libs, settings.device)
    if model_dir is not None and not Path(model_dir).is_dir():
        raise DistillError(
            f"{model_dir}: no such model folder (a local Hugging Face-format directory)"
        )
    if progress is not None:
        progress(f"{len(examples)} entries to distill from {store_path}")
    built = None
    if model_dir is None:
        model_dir = Path(out_dir) / BASE_DIR
        built = build_base(base_texts(examples), model_dir, seed=settings.seed)
        if progress is not None:
            progress(f"built a base model in {model_dir} ({built['layers']} layers, no download)")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a local folder only: never a hub lookup
    return train_adapter(
        examples,
        model_dir,
        out_dir,
        settings,
        store=store_path,
        base_built=built,
        progress=progress,
    )
