"""The MCP server (``darwin-memo-mcp``): a store's ledger as tools for agents.

``server``: the command line and the server on the MCP Python SDK (the published path
``darwin_memo.mcp_server``); ``tools``: the tools themselves, testable without the SDK.
Inside this package ``import mcp`` still names the MCP SDK (imports are absolute).
"""
