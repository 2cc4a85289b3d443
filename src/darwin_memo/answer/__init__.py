"""Answering a query from memory, with provenance.

* ``protocol``: ``QueryProtocol`` (retrieve, then answer: the top entry, or a model's
  answer grounded in the retrieved entries) and ``ProtocolAnswer``;
* ``model_protocol``: the model-backed answer and its citations;
* ``clients``: the LLM clients (Ollama, OpenAI-compatible, Anthropic) over ``http``,
  a standard-library HTTP wire with limits;
* ``fencing``: untrusted stored text made safe for prompts, terminals and JSON.
"""
