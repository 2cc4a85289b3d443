// The three agent tools. A failure never throws into the agent run: it comes back
// as an ordinary tool result that says memory is unavailable, with the reason.

import { CliError } from "./cli.js";
import { FALLBACK_SESSION, sessionKeyOf } from "./settlement.js";
import { untrustedBlock } from "./untrusted.js";

export const TOOL_NAMES = ["memory_recall", "memory_store", "memory_forget"];

// darwin-memo's own limits on a question (argument) and an answer (stdin).
const MAX_QUESTION_CHARS = 64 * 1024;
const MAX_ANSWER_CHARS = 1024 * 1024;
const MAX_SOURCE_CHARS = 200;
const ENTRY_ID = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;

class InputError extends Error {}

function result(text, details) {
  return { content: [{ type: "text", text }], details };
}

function failure(tool, err) {
  const code = err instanceof CliError ? err.code : err instanceof InputError ? "bad_input" : "error";
  const text =
    err instanceof InputError
      ? `${tool}: ${err.message}`
      : `${tool} failed: ${err.message}. Memory is unavailable for this call; carry on without it.`;
  return result(text, { error: true, code });
}

function text(params, name, { required = true, max }) {
  const value = params?.[name];
  if (value === undefined || value === null) {
    if (required) throw new InputError(`"${name}" is required`);
    return null;
  }
  if (typeof value !== "string") throw new InputError(`"${name}" must be a string`);
  const clean = value.replace(/\u0000/g, "").trim();
  if (required && clean === "") throw new InputError(`"${name}" must not be empty`);
  if (clean.length > max) {
    throw new InputError(`"${name}" is ${clean.length} characters long; the limit is ${max}`);
  }
  return clean;
}

/**
 * Build the tools for one agent run. `ctx` is the host's tool context (it names
 * the session); `deps` = { ledger, settler, logger }.
 */
export function createTools(ctx, { ledger, settler, logger }) {
  const session = sessionKeyOf(ctx);

  const recall = {
    name: "memory_recall",
    label: "Recall from memory",
    description:
      "Ask long-term memory before a risky or recurring decision. Returns the lesson that " +
      "earlier runs settled on, as untrusted text to weigh, or says memory has nothing " +
      "relevant. Each answer is credited or charged by how this run ends.",
    parameters: {
      type: "object",
      additionalProperties: false,
      properties: {
        query: { type: "string", description: "The decision or question, in plain words." },
      },
      required: ["query"],
    },
    async execute(_toolCallId, params) {
      try {
        const query = text(params, "query", { max: MAX_QUESTION_CHARS });
        const res = await ledger.decide(query);
        if (res.silent || typeof res.answer !== "string" || res.answer.trim() === "") {
          return result("Memory has nothing relevant to this question.", { silent: true });
        }
        if (!res.ticket_id) {
          // An answer with no provenance opens no ticket: nothing to settle.
          return result(untrustedBlock(res.answer), { silent: false, ticketId: null });
        }
        try {
          await settler.recordTicket(session ?? FALLBACK_SESSION, res.ticket_id, query);
        } catch (err) {
          // Without a book entry the ticket could never be settled: release it now.
          logger.warn(`could not record ticket ${res.ticket_id} (${err.message}); abandoning it`);
          await ledger.abandon(res.ticket_id).catch((e) =>
            logger.warn(`abandoning ticket ${res.ticket_id} failed too: ${e.message}`),
          );
          return result(untrustedBlock(res.answer), { silent: false, ticketId: null });
        }
        if (session === null) {
          logger.warn(
            `memory_recall ran without a session key; ticket ${res.ticket_id} is filed under ` +
              `"${FALLBACK_SESSION}" and settles with the next agent_end that has no key either`,
          );
        }
        return result(untrustedBlock(res.answer), { silent: false, ticketId: res.ticket_id });
      } catch (err) {
        return failure("memory_recall", err);
      }
    },
  };

  const store = {
    name: "memory_store",
    label: "Store a lesson",
    description:
      "Write a lesson to long-term memory as a question and its answer (for example what " +
      "went wrong and how to avoid it). It must then earn its keep: it gains energy when " +
      "recalled into runs that succeed, loses it in runs that fail, and dies when it runs out.",
    parameters: {
      type: "object",
      additionalProperties: false,
      properties: {
        question: { type: "string", description: "The situation or question the lesson answers." },
        answer: { type: "string", description: "The lesson itself." },
        source: { type: "string", description: "Where the lesson came from (default: openclaw)." },
      },
      required: ["question", "answer"],
    },
    async execute(_toolCallId, params) {
      try {
        const question = text(params, "question", { max: MAX_QUESTION_CHARS });
        const answer = text(params, "answer", { max: MAX_ANSWER_CHARS });
        const source = text(params, "source", { required: false, max: MAX_SOURCE_CHARS }) || "openclaw";
        if (question === "-") throw new InputError('"question" must be more than "-"');
        const res = await ledger.add(question, answer, source);
        return result(
          `Stored lesson ${res.entry_id}. It starts with spawn energy and lives on only if ` +
            "recalling it keeps helping runs succeed.",
          { entryId: res.entry_id },
        );
      } catch (err) {
        return failure("memory_store", err);
      }
    },
  };

  const forget = {
    name: "memory_forget",
    label: "Forget a lesson",
    description:
      "Bury a lesson you know is wrong, by the entry id memory_store returned. A lesson that " +
      "an unsettled recall still depends on cannot be forgotten until that run ends.",
    parameters: {
      type: "object",
      additionalProperties: false,
      properties: {
        entryId: { type: "string", description: "The entry id, e.g. 3a2a0418bb4c." },
      },
      required: ["entryId"],
    },
    async execute(_toolCallId, params) {
      try {
        const entryId = text(params, "entryId", { max: 128 });
        if (!ENTRY_ID.test(entryId)) throw new InputError(`"${entryId}" is not an entry id`);
        const res = await ledger.forget(entryId);
        if (res.forgotten) return result(`Forgot entry ${entryId}.`, { forgotten: true });
        const why = res.reason ? `: ${res.reason}` : ": no living entry has that id";
        return result(`Entry ${entryId} was not forgotten${why}.`, {
          forgotten: false,
          reason: res.reason ?? "not found",
        });
      } catch (err) {
        return failure("memory_forget", err);
      }
    },
  };

  return [recall, store, forget];
}
