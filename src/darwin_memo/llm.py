"""Compatibility path: this module moved to ``darwin_memo.answer.clients``.

``darwin_memo.llm`` is a published module path, so it stays importable; code inside
the package imports from the new home.
"""

from .answer.clients import (
    DEFAULT_ANTHROPIC_MODEL,
    DEFAULT_ANTHROPIC_URL,
    DEFAULT_OLLAMA_URL,
    DEFAULT_OPENAI_URL,
    DEFAULT_SYSTEM,
    THINK_RE,
    AnthropicClient,
    LLMClient,
    LLMError,
    OllamaClient,
    OllamaEmbedder,
    OllamaError,
    OpenAICompatClient,
    client_from_spec,
    ollama_available,
    ollama_model_digest,
    parse_json_array,
    strip_think,
)

__all__ = [
    "DEFAULT_ANTHROPIC_MODEL",
    "DEFAULT_ANTHROPIC_URL",
    "DEFAULT_OLLAMA_URL",
    "DEFAULT_OPENAI_URL",
    "DEFAULT_SYSTEM",
    "THINK_RE",
    "AnthropicClient",
    "LLMClient",
    "LLMError",
    "OllamaClient",
    "OllamaEmbedder",
    "OllamaError",
    "OpenAICompatClient",
    "client_from_spec",
    "ollama_available",
    "ollama_model_digest",
    "parse_json_array",
    "strip_think",
]
