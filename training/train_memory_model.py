"""Distil a store's survivors into a parametric memory: LoRA on a causal LM.

    python training/train_memory_model.py STORE --out DIR [--model HF_DIR] [--epochs N]
        [--lr X] [--rank R] [--device auto|cpu|cuda] [--seed S]

The same command as ``darwin-memo distill`` (see docs/distill.md): the living entries
that may decide (probationary imports excluded) become question -> answer pairs, the
loss falls on the answer tokens only, and DIR receives ``adapter/`` (a peft adapter),
``card.json`` and ``CARD.md`` (store, entries with ids and balances, hyper-parameters).
Without ``--model`` a small GPT-2 shaped base is built from a configuration into
DIR/base, its tokenizer trained on the store's text: nothing is downloaded. Needs the
``[distill]`` extra (torch, transformers, peft); errors are one line, exit code 1.
"""

from __future__ import annotations

import sys

from darwin_memo.cli.distill_cmd import main

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
