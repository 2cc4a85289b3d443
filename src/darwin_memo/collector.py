"""The cyclic garbage collector, paused around bulk work.

Building a store file's payload, a consolidation's join or a batch of merge writes
allocates hundreds of thousands of small containers that reference counting frees.
Each allocation burst triggers collections, and every full collection walks every
object alive, the whole store included: at 100,000 entries that was three quarters
of building the payload for ``save``. ``paused()`` turns the collector off for the
duration (and back on only if it was on), so nothing is lost: cycles made meanwhile
are collected by the next collection after it.
"""

from __future__ import annotations

import contextlib
import gc

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["paused"]


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """Pause the cyclic collector inside the block; restore its state after."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
