// From a run's measured outcome to ledger settlements.
//
// memory_recall records each ticket against the session that asked. When that
// session's run ends, agent_end moves all of its open tickets into the outbox
// with the configured delta, then delivers them. A settlement leaves the outbox
// only when the ledger has answered it (settled, or refused because the ticket
// is unknown, expired or already settled) or when it can never succeed (bad
// input); a failure that may pass (timeout, missing executable, locked store)
// stays in the outbox and is retried with a growing pause by the background
// sweep, so nothing is lost on a crash or a restart. Tickets whose run never
// reports agent_end are abandoned after maxTicketAgeHours (zero delta).

const RETRY_BASE_MS = 60 * 1000;
const RETRY_MAX_MS = 6 * 60 * 60 * 1000;
export const MAX_ATTEMPTS = 20;
export const FALLBACK_SESSION = "unknown-session";

const iso = (ms) => new Date(ms).toISOString();

/** One line of plain text: no control characters, whitespace collapsed, bounded. */
export function oneLine(text, max) {
  const flat = String(text ?? "")
    .replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]+/g, " ")
    .replace(/\s+/g, " ")
    .trim();
  return flat.length > max ? `${flat.slice(0, max - 3)}...` : flat;
}

/** The key tickets are filed under: the host's session key (or id). */
export function sessionKeyOf(ctx) {
  for (const key of [ctx?.sessionKey, ctx?.sessionId]) {
    if (typeof key === "string" && key !== "") return key;
  }
  return null;
}

/** The --detail line stored with each settlement in the ledger's journal. */
export function outcomeDetail(event) {
  const parts = ["openclaw agent_end", `success=${event?.success === true}`];
  if (Number.isFinite(event?.durationMs)) parts.push(`durationMs=${Math.round(event.durationMs)}`);
  if (typeof event?.runId === "string" && event.runId) parts.push(`run=${oneLine(event.runId, 80)}`);
  parts.push(`error=${event?.error ? JSON.stringify(oneLine(event.error, 200)) : "none"}`);
  return parts.join(" ");
}

/**
 * agent_end's event with `success` as measured. OpenClaw (verified with 2026.9.6)
 * reports `success: true` for a run whose model call failed (an HTTP error from the
 * provider ends the run with an assistant message whose `stopReason` is "error",
 * which is not a prompt error), so a run whose last assistant message stopped on
 * an error or an abort counts as failed here, with that message's error.
 */
export function measuredOutcome(event) {
  if (event?.success !== true || !Array.isArray(event.messages)) return event;
  const last = [...event.messages].reverse().find((m) => m && typeof m === "object" && m.role === "assistant");
  if (!last || (last.stopReason !== "error" && last.stopReason !== "aborted")) return event;
  const error =
    typeof last.errorMessage === "string" && last.errorMessage.trim() !== ""
      ? last.errorMessage
      : `the model's last reply stopped with ${last.stopReason}`;
  return { ...event, success: false, error: event.error || error };
}

function backoff(attempts) {
  return Math.min(RETRY_BASE_MS * 2 ** Math.max(0, attempts - 1), RETRY_MAX_MS);
}

export class Settler {
  constructor({ book, ledger, config, logger, now = () => Date.now() }) {
    this.book = book;
    this.ledger = ledger;
    this.config = config;
    this.logger = logger;
    this.now = now;
    this.inFlight = new Set();
  }

  /** File a ticket memory_recall just opened. */
  async recordTicket(session, ticket, query) {
    await this.book.update((b) => {
      b.open.push({ ticket, session, openedAt: iso(this.now()), query: oneLine(query, 200) });
    });
  }

  /** The agent_end hook: settle every open ticket of the ending session. */
  async onAgentEnd(rawEvent, ctx) {
    const session = sessionKeyOf(ctx) ?? FALLBACK_SESSION;
    const event = measuredOutcome(rawEvent);
    const measured = typeof event?.success === "boolean";
    const op = measured ? "settle" : "abandon";
    const delta = measured ? (event.success ? this.config.successDelta : this.config.failureDelta) : 0;
    const detail = measured ? outcomeDetail(event) : "";
    const queuedAt = iso(this.now());
    const claimed = [];
    let moved;
    try {
      moved = await this.book.update((b) => {
        const mine = b.open.filter((t) => t.session === session);
        if (mine.length === 0) return [];
        b.open = b.open.filter((t) => t.session !== session);
        for (const t of mine) {
          // Claim them before the book is saved, so a concurrent sweep in this
          // process does not send the same settlement twice.
          this.inFlight.add(t.ticket);
          claimed.push(t.ticket);
          b.outbox.push({
            ticket: t.ticket,
            session,
            op,
            delta,
            detail,
            queuedAt,
            attempts: 0,
            nextAttemptAt: queuedAt,
            lastError: null,
          });
        }
        return mine.map((t) => t.ticket);
      });
    } catch (err) {
      for (const t of claimed) this.inFlight.delete(t);
      throw err;
    }
    if (moved.length === 0) return { tickets: 0 };
    if (!measured) {
      this.logger.warn(
        `agent_end for session ${session} carried no success flag; abandoning ${moved.length} ticket(s) instead of settling`,
      );
    }
    const result = await this.deliver(new Set(moved), { claimed: true });
    this.logger.info(
      `agent_end ${measured ? `success=${event.success}` : "(no outcome)"}: ` +
        `${op} ${moved.length} ticket(s)${measured ? ` at ${delta}` : ""}; ` +
        `${result.landed} landed, ${result.refused} refused by the ledger, ${result.retrying} to retry`,
    );
    return { tickets: moved.length, ...result };
  }

  /** Abandon tickets whose run never reported agent_end. */
  async abandonStale() {
    const cutoff = this.now() - this.config.maxTicketAgeHours * 3600 * 1000;
    const queuedAt = iso(this.now());
    const stale = await this.book.update((b) => {
      const old = b.open.filter((t) => !(Date.parse(t.openedAt) >= cutoff));
      if (old.length === 0) return [];
      b.open = b.open.filter((t) => Date.parse(t.openedAt) >= cutoff);
      for (const t of old) {
        b.outbox.push({
          ticket: t.ticket,
          session: t.session,
          op: "abandon",
          delta: 0,
          detail: "",
          queuedAt,
          attempts: 0,
          nextAttemptAt: queuedAt,
          lastError: null,
        });
      }
      return old.map((t) => t.ticket);
    });
    if (stale.length) {
      this.logger.warn(
        `abandoning ${stale.length} ticket(s) open longer than ${this.config.maxTicketAgeHours} h: ` +
          "their runs never reported agent_end (if this keeps happening, grant the plugin " +
          "hooks.allowConversationAccess so OpenClaw delivers agent_end to it)",
      );
    }
    return stale.length;
  }

  /**
   * Send outbox items to the ledger: the given tickets now, or (only === null)
   * every item whose retry time has come.
   */
  async deliver(only = null, { claimed = false } = {}) {
    const summary = { landed: 0, refused: 0, retrying: 0, dropped: 0 };
    // `claimed`: the caller already holds these tickets in inFlight (agent_end).
    const held = claimed ? [...only] : [];
    try {
      const t = this.now();
      const book = await this.book.read();
      const items = book.outbox.filter((i) => {
        if (only && !only.has(i.ticket)) return false;
        if (claimed) return true;
        if (this.inFlight.has(i.ticket)) return false;
        return only !== null || !(Date.parse(i.nextAttemptAt) > t);
      });
      if (!claimed) {
        for (const i of items) {
          this.inFlight.add(i.ticket);
          held.push(i.ticket);
        }
      }
      if (items.length === 0) return summary;

      const results = await Promise.all(items.map((item) => this.#send(item)));
      const byTicket = new Map(results.map((r) => [r.item.ticket, r]));
      await this.book.update((b) => {
        const keep = [];
        for (const entry of b.outbox) {
          const r = byTicket.get(entry.ticket);
          if (!r) {
            keep.push(entry); // not ours this round
            continue;
          }
          if (r.error === undefined) continue; // answered by the ledger: done
          if (!r.error.transient) continue; // can never succeed: dropped, logged below
          entry.attempts = (entry.attempts || 0) + 1;
          entry.lastError = oneLine(r.error.message, 300);
          if (entry.attempts >= MAX_ATTEMPTS) {
            r.gaveUp = true;
            continue;
          }
          entry.nextAttemptAt = iso(this.now() + backoff(entry.attempts));
          r.attempts = entry.attempts;
          keep.push(entry);
        }
        b.outbox = keep;
      });
      for (const r of results) this.#report(r, summary);
      return summary;
    } finally {
      for (const ticket of held) this.inFlight.delete(ticket);
    }
  }

  async #send(item) {
    try {
      if (item.op === "abandon") {
        const res = await this.ledger.abandon(item.ticket);
        return { item, landed: res.abandoned === true };
      }
      const res = await this.ledger.settle(item.ticket, item.delta, item.detail);
      return { item, landed: res.settled === true };
    } catch (error) {
      return { item, error };
    }
  }

  #report(r, summary) {
    const { item } = r;
    const what = `${item.op} of ticket ${item.ticket} (session ${item.session})`;
    if (r.error === undefined) {
      if (r.landed) {
        summary.landed += 1;
        this.logger.debug?.(`${what} landed`);
      } else {
        summary.refused += 1;
        this.logger.warn(`${what}: the ledger did not take it (unknown, expired or already settled)`);
      }
    } else if (r.gaveUp) {
      summary.dropped += 1;
      this.logger.error(`${what} failed ${MAX_ATTEMPTS} times; giving up: ${r.error.message}`);
    } else if (!r.error.transient) {
      summary.dropped += 1;
      this.logger.error(`${what} was rejected and will not be retried: ${r.error.message}`);
    } else {
      summary.retrying += 1;
      this.logger.warn(`${what} failed (attempt ${r.attempts ?? "?"}), will retry: ${r.error.message}`);
    }
  }

  /** The periodic sweep: abandon stale tickets, then retry whatever is due. */
  async sweep() {
    await this.abandonStale();
    return this.deliver(null);
  }
}
