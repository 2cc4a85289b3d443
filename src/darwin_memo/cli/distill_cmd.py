"""``darwin-memo distill STORE --out DIR``: survivors into a parametric memory.

Fine-tunes a LoRA adapter on a causal language model over the store's living, trusted
entries (the loss on answer tokens only, conditioned on the question) and writes the
adapter with its model card into ``DIR``. Needs the ``[distill]`` extra; without it,
and on bad input (an empty store, one of probationary imports only, a folder that is
not a causal LM), the command prints one ``error:`` line and exits 1.
``training/train_memory_model.py`` is the same command as a script.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from .common import non_negative_int, positive_float

__all__ = ["add_arguments", "main", "register", "run_distill"]


def _positive_int(text: str) -> int:
    value = non_negative_int(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text!r}")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's arguments (shared with ``training/train_memory_model.py``)."""
    from ..distill.selection import TrainSettings

    d = TrainSettings()
    p.add_argument("store", help="store to distil (.json, SQLite or postgresql:// URL); read only")
    p.add_argument("--out", required=True, metavar="DIR", help="folder for the adapter and card")
    p.add_argument(
        "--model",
        metavar="DIR",
        help="base causal LM, a local Hugging Face-format folder (default: build a small "
        "one from a configuration into DIR/base, tokenizer trained on the store; no download)",
    )
    p.add_argument("--epochs", type=_positive_int, default=d.epochs, help=f"({d.epochs})")
    p.add_argument("--lr", type=positive_float, default=d.lr, help=f"learning rate ({d.lr})")
    p.add_argument("--rank", type=_positive_int, default=d.rank, help=f"LoRA rank ({d.rank})")
    p.add_argument("--alpha", type=_positive_int, default=None, help="LoRA alpha (twice the rank)")
    p.add_argument(
        "--batch-size", type=_positive_int, default=d.batch_size, help=f"({d.batch_size})"
    )
    p.add_argument(
        "--max-length",
        type=_positive_int,
        default=d.max_length,
        help=f"tokens per example, question included ({d.max_length})",
    )
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto", help="(auto)")
    p.add_argument("--seed", type=non_negative_int, default=d.seed, help=f"({d.seed})")


def run_distill(args: argparse.Namespace) -> int:
    from ..answer.fencing import for_terminal
    from ..distill.selection import TrainSettings
    from ..distill.train import distill_store

    settings = TrainSettings(
        epochs=args.epochs,
        lr=args.lr,
        rank=args.rank,
        alpha=args.alpha if args.alpha is not None else 2 * args.rank,
        batch_size=args.batch_size,
        max_length=args.max_length,
        seed=args.seed,
        device=args.device,
    )
    card = distill_store(args.store, args.out, settings, model_dir=args.model)
    print(
        f"distilled {card['entries_used']} entries into {for_terminal(args.out)}/adapter "
        f"(final loss {card['final_loss']}, {card['wall_time_s']} s on {card['device']}); "
        f"card: {for_terminal(args.out)}/CARD.md"
    )
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "distill",
        help="fine-tune a LoRA adapter on the store's survivors (needs the [distill] extra)",
        description=(
            "Fine-tune a causal language model with LoRA on the living, trusted entries of "
            "a store: the question is the prompt, the loss falls on the answer only. Writes "
            "DIR/adapter, DIR/card.json and DIR/CARD.md. Progress goes to stderr."
        ),
    )
    add_arguments(p)
    p.set_defaults(func=run_distill)


def main(argv: Sequence[str] | None = None) -> int:
    """The command on its own (``training/train_memory_model.py``), with the CLI's errors."""
    from . import main as cli_main

    return cli_main(["distill", *(list(argv) if argv is not None else [])])
