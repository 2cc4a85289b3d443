// darwin-memo dashboard. Plain JavaScript, no dependencies, no build step.
//
// Memory text is untrusted: every string from the API reaches the page through
// textContent or a text node (the el() helper), never through innerHTML. The
// page polls /api/version and refetches its panels when another process writes
// the store; the body's data-version and data-refreshes attributes say which
// version is on screen (the browser tests wait on them).
//
// Every /api/ request carries the server's per-run token (X-Darwin-Memo-Token).
// It arrives once in the printed URL (?token=...); the page keeps it for this tab in
// sessionStorage and takes it out of the address bar, so it is not left in history
// or on screen.
"use strict";

(function () {
  const TOKEN = (function () {
    const params = new URLSearchParams(location.search);
    const given = params.get("token");
    if (given) {
      try {
        sessionStorage.setItem("darwin-memo-token", given);
      } catch (e) {
        // storage refused (private mode): the token stays in the address bar instead
        return given;
      }
      params.delete("token");
      const rest = params.toString();
      history.replaceState(null, "", location.pathname + (rest ? "?" + rest : "") + location.hash);
      return given;
    }
    try {
      return sessionStorage.getItem("darwin-memo-token") || "";
    } catch (e) {
      return "";
    }
  })();

  const POLL_MS = 1500;
  const SVG_NS = "http://www.w3.org/2000/svg";
  const CAUSES = ["executed", "starved", "merged", "forgotten"];
  const ui = {
    version: null,
    refreshes: 0,
    living: { q: "", sort: "balance", order: "desc", offset: 0, limit: 25, kind: "", flag: "" },
    dead: { q: "", offset: 0, limit: 25 },
    entry: null,
    doctorTimer: null,
    busy: false,
  };

  // -- small helpers ---------------------------------------------------------------

  // Stored text is shown as text, and what a person could not see is shown as an
  // escape: control characters, bidi overrides and isolates (which would reorder the
  // rest of a row), zero-width and tag characters, byte order marks.
  const HIDDEN = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff]|\udb40[\udc00-\udc7f]/g;

  function visible(text) {
    return String(text).replace(HIDDEN, (ch) => {
      const code = ch.codePointAt(0);
      return code > 0xffff ? "\\U" + code.toString(16).padStart(8, "0") : "\\u" + code.toString(16).padStart(4, "0");
    });
  }

  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    if (props) {
      for (const [key, value] of Object.entries(props)) {
        if (value === undefined || value === null || value === false) continue;
        if (key === "class") node.className = value;
        else if (key === "text") node.textContent = visible(value);
        else if (key === "on") for (const [ev, fn] of Object.entries(value)) node.addEventListener(ev, fn);
        else if (key === "data") for (const [k, v] of Object.entries(value)) node.dataset[k] = String(v);
        else node.setAttribute(key, String(value));
      }
    }
    for (const child of children) {
      if (child === undefined || child === null || child === false) continue;
      node.append(child instanceof Node ? child : visible(child));
    }
    return node;
  }

  function svg(tag, attrs, text) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
    if (text !== undefined) node.textContent = String(text);
    return node;
  }

  function $(id) {
    return document.getElementById(id);
  }

  function clear(node) {
    node.replaceChildren();
    return node;
  }

  function num(x, digits) {
    if (x === null || x === undefined) return "\u2013";
    if (typeof x !== "number") return String(x);
    if (digits === undefined) return x.toLocaleString("en-US");
    return x.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
  }

  function signed(x, digits) {
    if (x === null || x === undefined) return "\u2013";
    return (x > 0 ? "+" : "") + num(x, digits);
  }

  async function getJSON(path) {
    const response = await fetch(path, {
      cache: "no-store",
      headers: { Accept: "application/json", "X-Darwin-Memo-Token": TOKEN },
    });
    let body = null;
    try {
      body = await response.json();
    } catch (e) {
      body = null;
    }
    if (!response.ok) {
      const message = body && typeof body.error === "string" ? body.error : response.statusText;
      throw new Error(message || "HTTP " + response.status);
    }
    return body;
  }

  function query(params) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== "" && v !== null && v !== undefined) q.set(k, v);
    return q.toString();
  }

  function entryButton(id) {
    return el("button", { type: "button", class: "link", title: "open the life story", on: { click: () => openEntry(id) } }, id);
  }

  // -- live status -----------------------------------------------------------------

  function setLive(ok, message) {
    const node = $("live");
    node.className = "live " + (ok ? "ok" : "down");
    node.textContent = message;
  }

  async function poll() {
    try {
      const { version } = await getJSON("/api/version");
      if (version !== ui.version && !ui.busy) {
        ui.busy = true;
        try {
          await refreshAll();
          ui.version = version;
          ui.refreshes += 1;
          document.body.dataset.version = version;
          document.body.dataset.refreshes = String(ui.refreshes);
        } finally {
          ui.busy = false;
        }
      }
      setLive(true, "live \u00b7 store version " + version + " \u00b7 checked " + new Date().toLocaleTimeString());
    } catch (err) {
      setLive(false, "not updating: " + err.message);
    } finally {
      setTimeout(poll, POLL_MS);
    }
  }

  async function refreshAll() {
    const jobs = [loadSummary(), loadSeries(), loadLiving(), loadDead(), loadTickets(), loadEvents(), loadDoctor()];
    if (ui.entry) jobs.push(loadEntry(ui.entry));
    const results = await Promise.allSettled(jobs);
    const failed = results.find((r) => r.status === "rejected");
    if (failed) throw failed.reason;
  }

  // -- summary cards and economics ---------------------------------------------------

  async function loadSummary() {
    const s = await getJSON("/api/summary");
    $("store-name").textContent = s.store + " (" + s.backend + ")";
    document.title = "darwin-memo \u00b7 " + s.store;
    const cards = [
      ["tick", num(s.tick), "tick"],
      ["living", num(s.counts.alive), "alive"],
      ["dead", num(s.counts.dead), "dead"],
      ["pinned", num(s.counts.pinned), "pinned"],
      ["open tickets", num(s.counts.pending), "pending"],
      ["total energy", num(s.total_energy, 3), "energy"],
    ];
    clear($("cards")).append(
      ...cards.map(([label, value, key]) =>
        el("div", { class: "card", data: { card: key } }, el("div", { class: "label", text: label }), el("div", { class: "value", text: value })),
      ),
    );
    const kinds = $("living-kind");
    const chosen = kinds.value;
    const wanted = ["", ...s.kinds];
    if (chosen && !wanted.includes(chosen)) wanted.push(chosen);
    const have = Array.from(kinds.options).map((o) => o.value);
    if (have.join("\u0000") !== wanted.join("\u0000")) {
      clear(kinds).append(...wanted.map((k) => el("option", { value: k, text: k || "all kinds" })));
      kinds.value = chosen;
    }
    const e = s.economics;
    const facts = [
      ["resource delta", signed(e.resource.delta_total) + " over " + num(e.resource.decides) + " decisions (" + num(e.resource.silent) + " silent), " + num(e.resource.settles) + " settlements"],
      ["energy earned", "+" + num(e.energy.credited, 3) + " credited, \u2212" + num(e.energy.debited, 3) + " debited, net " + signed(e.energy.net, 3)],
      ["upkeep paid", num(e.energy.upkeep_paid, 3), e.energy.upkeep_exact ? null : "estimated"],
      ["earned vs upkeep", signed(e.energy.net - e.energy.upkeep_paid, 3)],
      ["population", num(e.population.alive) + " alive, " + num(e.population.dead) + " dead"],
      ["energy by kind", Object.entries(s.stats.energy_share_by_kind).map(([k, v]) => k + " " + Math.round(v * 100) + "%").join(", ") || "\u2013"],
    ];
    const dl = clear($("economics-body"));
    for (const [term, value, flag] of facts) {
      const dd = el("dd", { data: { fact: term } }, value);
      if (flag) dd.append(el("span", { class: "estimated", title: e.energy.upkeep_caveat || "", text: flag }));
      dl.append(el("dt", { text: term }), dd);
    }
  }

  // -- charts -----------------------------------------------------------------------

  function niceTicks(lo, hi, count) {
    if (!(hi > lo)) {
      hi = lo + 1;
    }
    const raw = (hi - lo) / count;
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => raw <= s) || 10 * mag;
    const start = Math.floor(lo / step) * step;
    const ticks = [];
    for (let v = start; v <= hi + step * 1e-9; v += step) ticks.push(Number(v.toPrecision(12)));
    if (ticks[ticks.length - 1] < hi) ticks.push(Number((ticks[ticks.length - 1] + step).toPrecision(12)));
    return ticks;
  }

  function shortNum(v) {
    const a = Math.abs(v);
    if (a >= 1e9) return (v / 1e9).toFixed(1) + "G";
    if (a >= 1e6) return (v / 1e6).toFixed(1) + "M";
    if (a >= 1e4) return (v / 1e3).toFixed(0) + "k";
    if (a >= 1e3) return (v / 1e3).toFixed(1) + "k";
    return String(Number(v.toPrecision(3)));
  }

  // A frame with an x axis over n slots and one or two y axes; returns scale functions.
  function frame(plot, rows, left, right, label) {
    const W = 560, H = 220, M = { l: 46, r: right ? 46 : 12, t: 10, b: 26 };
    const root = svg("svg", { viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": label });
    root.append(svg("title", {}, label));
    const n = Math.max(rows.length, 1);
    const slot = (W - M.l - M.r) / n;
    const x = (i) => M.l + slot * (i + 0.5);
    const axis = svg("g", { class: "axis" });
    root.append(axis);
    function yScale(range, side) {
      const ticks = niceTicks(range[0], range[1], 4);
      const lo = ticks[0], hi = ticks[ticks.length - 1];
      const y = (v) => H - M.b - ((v - lo) / (hi - lo || 1)) * (H - M.t - M.b);
      for (const t of ticks) {
        if (side === "left") axis.append(svg("line", { class: "grid", x1: M.l, x2: W - M.r, y1: y(t), y2: y(t) }));
        axis.append(svg("text", { x: side === "left" ? M.l - 4 : W - M.r + 4, y: y(t) + 3, "text-anchor": side === "left" ? "end" : "start" }, shortNum(t)));
      }
      return y;
    }
    const yl = yScale(left, "left");
    const yr = right ? yScale(right, "right") : null;
    const every = Math.max(1, Math.ceil(n / 8));
    rows.forEach((row, i) => {
      if (i % every === 0 || i === n - 1) {
        axis.append(svg("text", { x: x(i), y: H - 8, "text-anchor": "middle" }, row.open ? "now" : "t" + row.tick));
      }
    });
    clear(plot).append(root);
    return { root, x, yl, yr, slot };
  }

  function range(values, includeZero) {
    const finite = values.filter((v) => typeof v === "number" && isFinite(v));
    let lo = Math.min(...finite), hi = Math.max(...finite);
    if (!finite.length) { lo = 0; hi = 1; }
    if (includeZero) { lo = Math.min(lo, 0); hi = Math.max(hi, 0); }
    if (hi === lo) hi = lo + 1;
    return [lo, hi];
  }

  function polyline(f, rows, key, y, cls, fmt) {
    const pts = [];
    const g = svg("g", { class: "series " + cls, "data-series": cls });
    rows.forEach((row, i) => {
      const v = row[key];
      if (typeof v !== "number") return;
      pts.push(f.x(i).toFixed(1) + "," + y(v).toFixed(1));
      const dot = svg("circle", { class: "dot " + cls, cx: f.x(i), cy: y(v), r: rows.length > 60 ? 1 : 2.5 });
      dot.append(svg("title", {}, (row.open ? "now" : "tick " + row.tick) + ": " + cls + " " + fmt(v)));
      g.append(dot);
    });
    if (pts.length) g.prepend(svg("polyline", { class: "line " + cls, points: pts.join(" ") }));
    f.root.append(g);
    return pts.length;
  }

  function legend(figure, items) {
    clear(figure.querySelector(".legend")).append(
      ...items.map(([cls, text]) => el("li", { data: { series: cls } }, el("span", { class: "swatch " + cls }), text)),
    );
  }

  function emptyChart(figure, message) {
    clear(figure.querySelector(".plot")).append(el("p", { class: "empty", text: message }));
    clear(figure.querySelector(".legend"));
    figure.dataset.points = "0";
  }

  function drawPopulation(rows) {
    const fig = $("chart-population");
    const ticks = rows.filter((r) => !r.open && typeof r.population === "number");
    if (!ticks.length) return emptyChart(fig, "No ticks recorded yet: run `darwin-memo ledger STORE tick`.");
    const f = frame(fig.querySelector(".plot"), ticks, range(ticks.map((r) => r.population), true), range(ticks.map((r) => r.total_energy), true), "Population and total energy per tick");
    const n = polyline(f, ticks, "population", f.yl, "population", (v) => num(v));
    polyline(f, ticks, "total_energy", f.yr, "energy", (v) => num(v, 3));
    const last = ticks[ticks.length - 1];
    fig.dataset.points = String(n);
    fig.dataset.lastPopulation = String(last.population);
    legend(fig, [
      ["population", "population (left) \u00b7 " + num(last.population) + " at t" + last.tick],
      ["energy", "total energy (right) \u00b7 " + num(last.total_energy, 3)],
    ]);
  }

  function drawDeaths(rows, totals) {
    const fig = $("chart-deaths");
    const any = CAUSES.some((c) => totals[c] > 0);
    if (!rows.length || !any) return emptyChart(fig, "No deaths recorded in the journal.");
    const stacks = rows.map((r) => CAUSES.reduce((s, c) => s + r.died[c], 0));
    const f = frame(fig.querySelector(".plot"), rows, [0, Math.max(...stacks, 1)], null, "Deaths by cause per tick");
    const width = Math.max(1, f.slot * 0.7);
    let bars = 0;
    rows.forEach((row, i) => {
      let base = 0;
      for (const cause of CAUSES) {
        const n = row.died[cause];
        if (!n) continue;
        const y0 = f.yl(base), y1 = f.yl(base + n);
        const rect = svg("rect", { class: "bar " + cause, x: f.x(i) - width / 2, y: y1, width: width, height: Math.max(0.5, y0 - y1), "data-cause": cause });
        rect.append(svg("title", {}, (row.open ? "now" : "tick " + row.tick) + ": " + n + " " + cause));
        f.root.append(rect);
        base += n;
        bars += 1;
      }
    });
    fig.dataset.points = String(bars);
    legend(fig, CAUSES.map((c) => [c, c + " " + num(totals[c])]));
  }

  function drawEconomics(rows) {
    const fig = $("chart-economics");
    if (!rows.length) return emptyChart(fig, "No settlements or ticks recorded yet.");
    const net = rows.map((r) => ({ ...r, net: r.credited - r.debited }));
    const energy = net.flatMap((r) => [r.upkeep_charged, r.net]);
    const f = frame(fig.querySelector(".plot"), net, range(net.map((r) => r.delta), true), range(energy, true), "Measured resource delta against upkeep paid and energy earned per tick");
    const width = Math.max(1, f.slot * 0.6);
    const zero = f.yl(0);
    f.root.append(svg("line", { class: "zero", x1: f.x(0) - f.slot / 2, x2: f.x(net.length - 1) + f.slot / 2, y1: zero, y2: zero }));
    net.forEach((row, i) => {
      if (!row.delta) return;
      const y = f.yl(row.delta);
      const rect = svg("rect", { class: "bar " + (row.delta > 0 ? "pos" : "neg"), x: f.x(i) - width / 2, y: Math.min(y, zero), width: width, height: Math.max(0.5, Math.abs(zero - y)) });
      rect.append(svg("title", {}, (row.open ? "now" : "tick " + row.tick) + ": measured delta " + signed(row.delta)));
      f.root.append(rect);
    });
    polyline(f, net, "upkeep_charged", f.yr, "upkeep", (v) => num(v, 3));
    polyline(f, net, "net", f.yr, "earned", (v) => signed(v, 3));
    const sum = (k) => net.reduce((s, r) => s + (typeof r[k] === "number" ? r[k] : 0), 0);
    fig.dataset.points = String(net.length);
    fig.dataset.deltaTotal = String(sum("delta"));
    legend(fig, [
      ["pos", "measured delta (left) \u00b7 total " + signed(sum("delta"))],
      ["upkeep", "upkeep paid (right) \u00b7 total " + num(sum("upkeep_charged"), 3)],
      ["earned", "energy earned, net (right) \u00b7 total " + signed(sum("net"), 3)],
    ]);
  }

  async function loadSeries() {
    const s = await getJSON("/api/series");
    drawPopulation(s.ticks);
    drawDeaths(s.ticks, s.deaths_by_cause);
    drawEconomics(s.ticks);
  }

  // -- tables -------------------------------------------------------------------------

  const LIVING_COLUMNS = [
    ["balance", "balance", "num", (r) => num(r.balance, 3)],
    ["id", "id", "", (r) => entryButton(r.id)],
    ["kind", "kind", "", (r) => r.kind],
    ["age_ticks", "age", "num", (r) => num(r.age_ticks)],
    ["last_settled_tick", "last settled", "num", (r) => (r.last_settled_tick === null ? "never" : "t" + r.last_settled_tick)],
    ["ticks_to_starvation", "runway", "num", (r) => (r.ticks_to_starvation === null ? "\u221e" : num(r.ticks_to_starvation, 1))],
    ["uses", "uses", "num", (r) => num(r.uses)],
    [null, "flags", "", flagBadges],
    ["question", "question", "text", (r) => r.question],
  ];

  function flagBadges(r) {
    const span = el("span");
    if (r.pinned) span.append(el("span", { class: "badge pinned", text: "pinned" }));
    if (r.probation) span.append(el("span", { class: "badge probation", text: "probation " + r.probation }));
    return span;
  }

  function header(table, columns, sortState, onSort) {
    const row = el("tr");
    for (const [key, label, cls] of columns) {
      const th = el("th", { class: cls || null, scope: "col" });
      if (key && sortState) {
        const active = sortState.sort === key;
        const arrow = active ? (sortState.order === "desc" ? " \u25bc" : " \u25b2") : "";
        th.append(el("button", { type: "button", class: active ? "sorted" : null, data: { sort: key }, on: { click: () => onSort(key) } }, label + arrow));
        if (active) th.setAttribute("aria-sort", sortState.order === "desc" ? "descending" : "ascending");
      } else {
        th.textContent = label;
      }
      row.append(th);
    }
    clear(table.tHead).append(row);
  }

  function body(table, columns, rows, emptyText) {
    const tbody = clear(table.tBodies[0]);
    if (!rows.length) {
      tbody.append(el("tr", { class: "empty" }, el("td", { colspan: columns.length, text: emptyText })));
      return;
    }
    for (const r of rows) {
      const tr = el("tr", { data: { id: r.id } });
      for (const [, , cls, cell] of columns) tr.append(el("td", { class: cls || null }, cell(r)));
      tbody.append(tr);
    }
  }

  function pager(nav, page, onMove) {
    const first = page.total ? page.offset + 1 : 0;
    const last = Math.min(page.offset + page.limit, page.total);
    clear(nav).append(
      el("button", { type: "button", disabled: page.offset <= 0, on: { click: () => onMove(Math.max(0, page.offset - page.limit)) } }, "\u2190 previous"),
      el("span", { class: "range", text: num(first) + "\u2013" + num(last) + " of " + num(page.total) }),
      el("button", { type: "button", disabled: last >= page.total, on: { click: () => onMove(page.offset + page.limit) } }, "next \u2192"),
    );
  }

  async function loadLiving() {
    const s = ui.living;
    const page = await getJSON("/api/entries?" + query(s));
    const table = $("living-table");
    header(table, LIVING_COLUMNS, s, (key) => {
      if (s.sort === key) s.order = s.order === "desc" ? "asc" : "desc";
      else {
        s.sort = key;
        s.order = ["id", "kind", "question"].includes(key) ? "asc" : "desc";
      }
      s.offset = 0;
      loadLiving().catch(showError);
    });
    body(table, LIVING_COLUMNS, page.entries, s.q ? "No living entry matches." : "No living entries.");
    table.dataset.total = String(page.total);
    $("living-count").textContent = "(" + num(page.total) + (s.q || s.kind || s.flag ? " matching" : "") + ")";
    pager($("living-pager"), page, (offset) => {
      s.offset = offset;
      loadLiving().catch(showError);
    });
  }

  const DEAD_COLUMNS = [
    [null, "id", "", (r) => entryButton(r.id)],
    [null, "cause", "", (r) => el("span", { class: "badge " + (r.cause || ""), text: r.cause || "unknown" })],
    [null, "died", "num", (r) => (r.died_tick === null ? "\u2013" : "t" + r.died_tick)],
    [null, "uses", "num", (r) => num(r.uses)],
    [null, "kind", "", (r) => r.kind || "\u2013"],
    [null, "sources", "", (r) => (r.sources || []).join(", ")],
    [null, "question", "text", (r) => r.question || ""],
  ];

  async function loadDead() {
    const s = ui.dead;
    const page = await getJSON("/api/graveyard?" + query(s));
    const table = $("graveyard-table");
    header(table, DEAD_COLUMNS, null, null);
    body(table, DEAD_COLUMNS, page.entries, s.q ? "No dead entry matches." : "The graveyard is empty.");
    table.dataset.total = String(page.total);
    $("graveyard-count").textContent = "(" + num(page.total) + (s.q ? " matching" : "") + ")";
    clear($("graveyard-causes")).append(
      ...CAUSES.map((c) => el("li", { data: { cause: c } }, el("span", { class: "badge " + c, text: c }), el("span", { class: "n", text: num(page.deaths_by_cause[c]) }))),
    );
    pager($("graveyard-pager"), page, (offset) => {
      s.offset = offset;
      loadDead().catch(showError);
    });
  }

  const TICKET_COLUMNS = [
    [null, "ticket", "", (r) => el("code", { text: r.id })],
    [null, "age", "num", (r) => num(r.age_ticks) + " ticks"],
    [null, "born", "num", (r) => "t" + r.born_tick],
    [null, "deciding entry", "", (r) => (r.deciding_entry ? entryButton(r.deciding_entry) : "\u2013")],
    [null, "supporters", "num", (r) => num(r.supporting_entries.length)],
    [null, "query", "text", (r) => r.query],
  ];

  async function loadTickets() {
    const t = await getJSON("/api/tickets");
    const table = $("tickets-table");
    header(table, TICKET_COLUMNS, null, null);
    body(table, TICKET_COLUMNS, t.tickets, "No open tickets.");
    table.dataset.total = String(t.tickets.length);
    $("tickets-count").textContent = "(" + num(t.tickets.length) + ")";
  }

  function eventText(e) {
    const parts = [];
    for (const key of ["entry", "ticket", "delta", "detail", "question", "query", "population", "deaths", "total_energy", "reason"]) {
      if (e[key] === undefined || e[key] === null || e[key] === "") continue;
      let value = e[key];
      if (typeof value === "string" && value.length > 120) value = value.slice(0, 117) + "\u2026";
      parts.push(key + " " + (key === "delta" ? signed(value) : value));
    }
    if (Array.isArray(e.applied) && e.applied.length) parts.push("credited " + e.applied.length + " entries");
    if (Array.isArray(e.buried) && e.buried.length) parts.push("buried " + e.buried.join(", "));
    if (e.silent === true) parts.push("silent");
    return parts.join(" \u00b7 ");
  }

  async function loadEvents() {
    const data = await getJSON("/api/events?last=60");
    const list = clear($("events-list"));
    const events = data.events.slice().reverse();
    if (!events.length) list.append(el("li", { text: "The journal is empty." }));
    for (const e of events) {
      list.append(
        el("li", { data: { event: e.event } }, el("span", { class: "tick", text: "t" + (e.tick ?? "?") }), el("span", { class: "kind", text: e.event }), eventText(e)),
      );
    }
  }

  // -- doctor ---------------------------------------------------------------------------

  async function loadDoctor() {
    clearTimeout(ui.doctorTimer);
    const d = await getJSON("/api/doctor");
    const box = clear($("doctor-body"));
    box.dataset.count = String(d.findings.length);
    box.dataset.pending = String(Boolean(d.pending));
    if (d.as_of === null && d.pending) {
      box.append(el("p", { class: "meta", text: "Diagnosing the store\u2026" }));
    } else if (!d.findings.length) {
      box.append(el("p", { class: "clean", text: "No degeneracy detected." }));
    }
    for (const f of d.findings) {
      box.append(
        el(
          "div",
          { class: "finding " + f.severity, data: { code: f.code } },
          el("p", {}, el("span", { class: "code", text: f.severity.toUpperCase() + " [" + f.code + "]" }), " ", f.summary),
          el("p", {}, el("strong", { text: "evidence: " }), f.evidence),
          el("p", {}, el("strong", { text: "fix: " }), f.fix),
        ),
      );
    }
    if (d.error) box.append(el("p", { class: "meta", text: "diagnosis failed: " + d.error }));
    if (d.stale && d.as_of !== null) box.append(el("p", { class: "meta", text: "updating: shown as of store version " + d.as_of }));
    if (d.pending) ui.doctorTimer = setTimeout(() => loadDoctor().catch(showError), 2000);
  }

  // -- life story -----------------------------------------------------------------------

  function openEntry(id) {
    if (location.hash !== "#entry=" + encodeURIComponent(id)) location.hash = "entry=" + encodeURIComponent(id);
    else showEntry(id);
  }

  function showEntry(id) {
    ui.entry = id;
    $("drawer").hidden = false;
    loadEntry(id).catch(showError);
  }

  function closeEntry() {
    ui.entry = null;
    $("drawer").hidden = true;
    if (location.hash.startsWith("#entry=")) history.replaceState(null, "", location.pathname + location.search);
  }

  function fromHash() {
    const m = /^#entry=(.+)$/.exec(location.hash);
    if (m) showEntry(decodeURIComponent(m[1]));
    else if (ui.entry) closeEntry();
  }

  async function loadEntry(id) {
    const target = clear($("drawer-body"));
    let life;
    try {
      life = await getJSON("/api/entry/" + encodeURIComponent(id));
    } catch (err) {
      target.append(el("p", { class: "meta", text: err.message }));
      $("drawer").dataset.entry = id;
      return;
    }
    if (ui.entry !== id) return;
    $("drawer").dataset.entry = id;
    $("drawer-title").textContent = "Life story of " + id;
    const facts = el("dl", { class: "facts" });
    const fact = (term, value) => facts.append(el("dt", { text: term }), el("dd", { data: { fact: term } }, value));
    fact("status", el("span", { class: "status " + life.status, text: life.status + (life.cause_of_death ? " (" + life.cause_of_death + ")" : "") }));
    fact("kind", life.kind || "\u2013");
    fact("balance", num(life.balance, 3));
    fact("uses", num(life.uses));
    fact("runway", life.ticks_to_starvation === null ? (life.status === "living" ? "cannot starve" : "\u2013") : num(life.ticks_to_starvation, 1) + " ticks");
    fact("sources", (life.sources || []).join(", ") || "\u2013");
    const flags = [];
    if (life.pinned) flags.push("pinned");
    if (life.probation) flags.push("probation " + life.probation);
    if (life.juvenile) flags.push("juvenile " + life.juvenile);
    fact("flags", flags.join(", ") || "\u2013");
    if (life.birth) fact("born", "tick " + life.birth.tick + (life.birth.source ? " from " + life.birth.source : "") + (life.birth.ts ? " (" + life.birth.ts + ")" : ""));
    if (life.merged_into) fact("merged into", entryButton(life.merged_into));
    target.append(
      el("p", { class: "qa q", text: life.question ?? "(question unknown: merged away)" }),
      el("p", { class: "qa a", text: life.answer ?? "" }),
      facts,
    );
    target.append(el("h3", { text: "Settlements (" + life.settlements.length + ")" }));
    if (life.settlements.length) {
      const table = el("table", { class: "data settlements" });
      table.append(el("thead", {}, el("tr", {}, ...["tick", "credit", "measured delta", "detail", "ticket"].map((h) => el("th", { text: h })))));
      const tb = el("tbody");
      for (const s of life.settlements) {
        tb.append(
          el("tr", {}, el("td", { class: "num", text: "t" + s.tick }), el("td", { class: "num", text: signed(s.credit, 3) }), el("td", { class: "num", text: signed(s.delta) }), el("td", { class: "text", text: s.detail || "" }), el("td", {}, el("code", { text: s.ticket || "" }))),
        );
      }
      table.append(tb);
      target.append(el("div", { class: "scroll" }, table));
    } else {
      target.append(el("p", { class: "meta", text: "No settlement has reached this entry." }));
    }
    const related = life.related || [];
    target.append(el("h3", { text: "Related entries (" + related.length + ")" }));
    if (related.length) {
      const table = el("table", { class: "data related" });
      table.append(el("thead", {}, el("tr", {}, ...["entry", "question", "score", "link"].map((h) => el("th", { text: h })))));
      const tb = el("tbody");
      for (const r of related) {
        tb.append(
          el("tr", { data: { related: r.entry_id } }, el("td", {}, entryButton(r.entry_id)), el("td", { class: "text", text: r.question || "" }), el("td", { class: "num", text: num(r.score, 3) }), el("td", { class: "num", text: num(r.link, 3) })),
        );
      }
      table.append(tb);
      target.append(el("div", { class: "scroll" }, table));
    } else {
      target.append(el("p", { class: "meta", text: "No related entries listed (the organic layer links living entries only; stores over 10,000 entries: darwin-memo ledger STORE related ID)." }));
    }
    target.append(el("h3", { text: "Everything that happened to it" }));
    const story = el("ol", { class: "story" });
    for (const note of life.events) story.append(el("li", { text: note.text ?? JSON.stringify(note) }));
    if (!life.events.length) story.append(el("li", { text: "No notes recorded." }));
    target.append(story);
  }

  // -- wiring ---------------------------------------------------------------------------

  function showError(err) {
    setLive(false, "error: " + err.message);
  }

  function debounce(fn, ms) {
    let timer = null;
    return (...args) => {
      clearTimeout(timer);
      timer = setTimeout(() => fn(...args), ms);
    };
  }

  function init() {
    const living = ui.living;
    const onLiving = debounce(() => {
      living.q = $("living-search").value;
      living.kind = $("living-kind").value;
      living.flag = $("living-flag").value;
      living.offset = 0;
      loadLiving().catch(showError);
    }, 250);
    $("living-search").addEventListener("input", onLiving);
    $("living-kind").addEventListener("change", onLiving);
    $("living-flag").addEventListener("change", onLiving);
    $("living-form").addEventListener("submit", (ev) => ev.preventDefault());
    const onDead = debounce(() => {
      ui.dead.q = $("graveyard-search").value;
      ui.dead.offset = 0;
      loadDead().catch(showError);
    }, 250);
    $("graveyard-search").addEventListener("input", onDead);
    $("graveyard-form").addEventListener("submit", (ev) => ev.preventDefault());
    $("drawer-close").addEventListener("click", closeEntry);
    document.addEventListener("keydown", (ev) => {
      if (ev.key === "Escape" && ui.entry) closeEntry();
    });
    window.addEventListener("hashchange", fromHash);
    fromHash();
    poll();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
