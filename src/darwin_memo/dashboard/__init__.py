"""The dashboard (``darwin-memo ui``): a read-mostly web page over one store.

``server``: the HTTP server and its JSON API (the published path ``darwin_memo.ui``);
``data``: what the pages show, read through the ledger and the backends; ``static/``:
the page itself (HTML, CSS, JavaScript).
"""
