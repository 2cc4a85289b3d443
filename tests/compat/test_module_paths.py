"""The published module paths keep working after the move into layer folders.

Each old path (``darwin_memo.types``, ``.survival``, ``.llm``, ...) re-exports its new
home's public names: the very same objects, so ``isinstance`` checks, monkeypatched
classes and pickles agree whichever path a user imported.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

#: Published path -> the home(s) of its names.
MOVED = {
    "types": ["records.entry"],
    "survival": ["sim.survival"],
    "consolidate": ["economy.merge", "retrieval.simjoin"],
    "semantic": ["retrieval.embedding"],
    "temporal": ["retrieval.temporal"],
    "encode": ["sim.encode"],
    "reflection": ["sim.reflection"],
    "protocol": ["answer.protocol"],
    "llm": ["answer.clients"],
    "environments": ["sim.environments"],
    "testsuite_env": ["sim.testsuite_env"],
    "evm": ["integrations.evm"],
    "ui": ["dashboard.server"],
    "mcp_server": ["mcp.server"],
    "diagnose": ["sim.diagnose"],
    "retrieval": ["retrieval.lexical", "retrieval.protocols"],
    "distill": ["distill.selection"],
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_re_exports_the_same_objects(old: str) -> None:
    module = importlib.import_module(f"darwin_memo.{old}")
    homes = [importlib.import_module(f"darwin_memo.{new}") for new in MOVED[old]]
    names = list(module.__all__)
    assert names, old
    assert len(set(names)) == len(names)
    for name in names:
        found = [home for home in homes if name in getattr(home, "__all__", ())]
        assert found, f"darwin_memo.{old}.{name} has no home"
        assert getattr(module, name) is getattr(found[0], name), name
    # Every public name of the single home is still there under the old path.
    if len(homes) == 1:
        assert set(homes[0].__all__) <= set(names)


def test_the_old_names_of_split_modules_come_from_their_new_homes() -> None:
    from darwin_memo import survival
    from darwin_memo.economy import config, lifecycle

    assert survival.SurvivalConfig is config.SurvivalConfig
    assert survival.assign_credit is lifecycle.assign_credit
    assert survival.death_cause is lifecycle.death_cause


def test_internal_paths_that_moved_are_gone() -> None:
    for old in ("events", "jsonfile", "storefiles", "httpwire", "untrusted", "interfaces"):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(f"darwin_memo.{old}")


def test_python_m_mcp_server_still_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "darwin_memo.mcp_server", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "--memory" in done.stdout
