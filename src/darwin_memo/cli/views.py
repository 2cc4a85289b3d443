"""Read-only views of a store: ``top``, ``why``, ``audit``, ``doctor``."""

from __future__ import annotations

import argparse

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    return None
