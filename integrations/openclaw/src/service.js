// The background service: a periodic sweep (abandon stale tickets, retry
// settlements that failed) and the ledger tick on a persisted cadence.
//
// The tick cadence survives restarts: the last tick time lives in the ticket
// book, and a process claims a tick there before running it, so two gateways
// sharing a state directory do not both tick, and a gateway that was down past
// the due time ticks once when it comes back. The first start only starts the
// clock; it does not charge upkeep.

export const SWEEP_INTERVAL_MS = 5 * 60 * 1000;
const TICK_RETRY_MS = 15 * 60 * 1000;
const MAX_TIMER_MS = 2 ** 31 - 1;

const iso = (ms) => new Date(ms).toISOString();

export class Upkeep {
  constructor({ settler, ledger, book, config, logger, now = () => Date.now(), sweepIntervalMs = SWEEP_INTERVAL_MS }) {
    this.settler = settler;
    this.ledger = ledger;
    this.book = book;
    this.config = config;
    this.logger = logger;
    this.now = now;
    this.sweepIntervalMs = sweepIntervalMs;
    this.sweepTimer = null;
    this.tickTimer = null;
    this.running = false;
    this.pending = new Set(); // promises of work in progress, awaited by stop()
  }

  get tickIntervalMs() {
    return this.config.tickIntervalHours * 3600 * 1000;
  }

  start() {
    if (this.running) return;
    this.running = true;
    this.#track(this.sweep());
    this.sweepTimer = setInterval(() => this.#track(this.sweep()), this.sweepIntervalMs);
    this.sweepTimer.unref?.();
    if (this.tickIntervalMs > 0) this.#track(this.#tickLoop());
    else this.logger.info("background ledger tick disabled (tickIntervalHours <= 0)");
  }

  async stop() {
    this.running = false;
    clearInterval(this.sweepTimer);
    clearTimeout(this.tickTimer);
    this.sweepTimer = this.tickTimer = null;
    await Promise.allSettled([...this.pending]);
  }

  #track(promise) {
    this.pending.add(promise);
    promise.finally(() => this.pending.delete(promise)).catch(() => {});
  }

  async sweep() {
    try {
      return await this.settler.sweep();
    } catch (err) {
      this.logger.warn(`ticket sweep failed: ${err.message}`);
      return null;
    }
  }

  async #tickLoop() {
    const next = await this.tickIfDue();
    if (!this.running) return;
    const delay = Math.min(Math.max(next - this.now(), 1000), MAX_TIMER_MS);
    this.tickTimer = setTimeout(() => this.#track(this.#tickLoop()), delay);
    this.tickTimer.unref?.();
  }

  /** Run `ledger tick` if one is due; returns when the next one is due (ms epoch). */
  async tickIfDue() {
    const interval = this.tickIntervalMs;
    let claim;
    try {
      claim = await this.book.update((b) => {
        const t = this.now();
        const last = Date.parse(b.lastTickAt);
        if (!Number.isFinite(last) || last > t) {
          b.lastTickAt = iso(t); // first start (or a clock that went back): start the clock
          return { due: false, next: t + interval };
        }
        if (t < last + interval) return { due: false, next: last + interval };
        const previous = b.lastTickAt;
        b.lastTickAt = iso(t);
        return { due: true, previous, claimed: b.lastTickAt, next: t + interval };
      });
    } catch (err) {
      this.logger.warn(`could not read the tick schedule: ${err.message}`);
      return this.now() + Math.min(interval, TICK_RETRY_MS);
    }
    if (!claim.due) return claim.next;
    try {
      const res = await this.ledger.tick();
      if (res.store === "missing") {
        this.logger.info(`ledger tick: no memory store yet at ${this.config.memoryPath}; nothing to tick`);
        return claim.next;
      }
      this.logger.info(
        `ledger tick ${res.tick}: population ${res.population}, deaths ${res.deaths}, ` +
          `merges ${res.merges}, expired ${res.expired}, pending ${res.pending}`,
      );
      return claim.next;
    } catch (err) {
      this.logger.warn(`ledger tick failed, will retry: ${err.message}`);
      await this.book
        .update((b) => {
          if (b.lastTickAt === claim.claimed) b.lastTickAt = claim.previous;
        })
        .catch(() => {});
      return this.now() + Math.min(interval, TICK_RETRY_MS);
    }
  }
}
