"""Adapters that put darwin-memo inside other agent frameworks.

Each submodule needs its framework only where noted, and none is imported by
``darwin_memo`` itself:

* ``darwin_memo.integrations.openai_agents``: ``DarwinMemoSession``, a session
  store for the OpenAI Agents SDK with an opt-in lesson store (extra ``[agents]``
  to run agents; the class itself needs only the standard library).
"""
