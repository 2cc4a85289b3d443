// openclaw-memory-darwin: OpenClaw's memory slot, backed by darwin-memo's ledger.
//
// register(api) wires four things to the host, all of them thin:
//   tools    memory_recall / memory_store / memory_forget      (src/tools.js)
//   hook     agent_end settles the ending session's tickets     (src/settlement.js)
//   service  periodic sweep + `ledger tick`                     (src/service.js)
//   prompt   the memory section of the system prompt            (src/prompt.js)
// Ledger operations go to one `darwin-memo ledger FILE serve` process per gateway,
// or one `darwin-memo ledger ...` process each where serve is missing (src/cli.js,
// src/serve.js);
// open tickets and owed settlements persist in tickets.json (src/tickets.js).
//
// The default export is a plain plugin object, so the entry needs neither the
// OpenClaw SDK nor a build step.

import { readFileSync } from "node:fs";

import { Ledger } from "./src/cli.js";
import { PLUGIN_ID, resolveConfig, resolveStateDir } from "./src/config.js";
import { buildPromptSection } from "./src/prompt.js";
import { Upkeep } from "./src/service.js";
import { Settler } from "./src/settlement.js";
import { TicketBook } from "./src/tickets.js";
import { TOOL_NAMES, createTools } from "./src/tools.js";

const manifest = JSON.parse(readFileSync(new URL("./openclaw.plugin.json", import.meta.url), "utf8"));

function prefixedLogger(logger) {
  const say = (level) => (msg) => {
    const fn = logger?.[level] ?? (level === "debug" ? null : logger?.info);
    if (typeof fn === "function") fn.call(logger, `[${PLUGIN_ID}] ${msg}`);
  };
  return { debug: say("debug"), info: say("info"), warn: say("warn"), error: say("error") };
}

/**
 * Build the plugin's parts without touching the host (tests use this directly).
 * `options`: { stateDir, env, now, sweepIntervalMs, serve (false: one-shot calls only) }.
 */
export function createRuntime(api, options = {}) {
  const logger = prefixedLogger(api?.logger);
  const stateDir = options.stateDir ?? resolveStateDir(api, options.env ?? process.env);
  const { config, warnings } = resolveConfig(api?.pluginConfig, {
    stateDir,
    resolvePath: typeof api?.resolvePath === "function" ? (p) => api.resolvePath(p) : undefined,
  });
  for (const w of warnings) logger.warn(w);
  const ledger = new Ledger({
    command: config.command,
    memoryPath: config.memoryPath,
    resourceScale: config.resourceScale,
    retriever: config.retriever,
    timeoutMs: config.commandTimeoutMs,
    env: options.env,
    logger,
    serve: options.serve ?? true,
  });
  const book = new TicketBook(config.ticketsPath, { logger });
  const now = options.now ?? (() => Date.now());
  const settler = new Settler({ book, ledger, config, logger, now });
  const upkeep = new Upkeep({
    settler,
    ledger,
    book,
    config,
    logger,
    now,
    sweepIntervalMs: options.sweepIntervalMs,
  });
  return { config, logger, ledger, book, settler, upkeep };
}

export function register(api, options = {}) {
  // Metadata-only loads (CLI help, setup) must not start anything.
  if (api?.registrationMode === "cli-metadata" || api?.registrationMode === "setup-only") return null;

  const rt = createRuntime(api, options);
  const { logger, ledger, settler, upkeep } = rt;

  api.registerTool((ctx) => createTools(ctx, { ledger, settler, logger }), { names: TOOL_NAMES });

  if (typeof api.on === "function") {
    api.on("agent_end", async (event, ctx) => {
      try {
        await settler.onAgentEnd(event, ctx);
      } catch (err) {
        logger.warn(`agent_end settlement failed (the outbox keeps what it could record): ${err.message}`);
      }
    });
  } else {
    logger.warn("this host has no api.on: runs will not settle their tickets");
  }

  if (typeof api.registerService === "function") {
    api.registerService({
      id: `${PLUGIN_ID}-upkeep`,
      start: () => upkeep.start(),
      stop: async () => {
        await upkeep.stop();
        ledger.close();
      },
    });
  }

  if (typeof api.registerMemoryCapability === "function") {
    api.registerMemoryCapability({ promptBuilder: buildPromptSection });
  } else if (typeof api.registerMemoryPromptSection === "function") {
    api.registerMemoryPromptSection(buildPromptSection);
  }

  logger.info(`memory store ${rt.config.memoryPath} via ${rt.config.command}`);
  return rt;
}

export default {
  id: PLUGIN_ID,
  name: manifest.name,
  description: manifest.description,
  kind: "memory",
  configSchema: manifest.configSchema,
  register: (api) => {
    register(api);
  },
};
