/* tcbreplay report: the samples table (sort, filter, pages) and the sample detail.
   Charts are Plotly figures built in Python; this only hands them to Plotly.newPlot. */
(function () {
  "use strict";
  const $ = (id) => document.getElementById(id);
  const D = JSON.parse($("report-data").textContent);
  let X = null; // trajectories and transcripts: parsed at the first click
  // an integer beyond a double's (2^53) kept as its digits, where the browser can say them
  // (JSON.rawJSON): a call's argument 9007199254740993 is not shown as ...992
  const exact = (k, v, at) => typeof v === "number" && !Number.isSafeInteger(v) && at &&
    typeof JSON.rawJSON === "function" && /^-?\d+$/.test(at.source) ? JSON.rawJSON(at.source) : v;
  const details = () => X || (X = JSON.parse($("report-details").textContent, exact));
  const S = D.samples, R = D.runs, N = S.id.length;
  const ESC = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
  const esc = (v) => String(v ?? "").replace(/[&<>"']/g, (c) => ESC[c]);
  const fmt = (v, d = 3) => (v == null ? "—" : Number(v).toFixed(d));
  const json = (v) => esc(JSON.stringify(v));
  // control characters and the marks that reorder text shown escaped (\x1b, \u202e), as the
  // terminal's tables show them (tcbreplay._cli.render's _UNPRINTABLE, kept alike), in the
  // names of samples, categories and tools: a sample id starting with U+202E was drawn
  // reversed, and a category's reversed the rest of the sample's facts line
  const UNPRINTABLE =
    /[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]|(?<![^\u200d])\u200d/g;
  const hex = (c, n) => c.charCodeAt(0).toString(16).padStart(n, "0");
  const printable = (v) => String(v ?? "").replace(UNPRINTABLE,
    (c) => (c.charCodeAt(0) < 0x100 ? `\\x${hex(c, 2)}` : `\\u${hex(c, 4)}`));
  // a key's own value (an argument named constructor or __proto__ is no Object's member)
  const own = (o, k) => (o != null && Object.prototype.hasOwnProperty.call(o, k) ? o[k] : undefined);

  const charts = Object.entries(D.charts).map(([id, fig]) =>
    Plotly.newPlot(id, fig.data, fig.layout, { displaylogo: false, responsive: true }));

  /* ---- table ---- */
  // Markers beside a later run's metric in which the sample got worse than in the first run,
  // as diff decides it (the "regressed" filter's samples): with trials, over the sample's
  // trials, so each of its trials' rows is marked. Bits as data.METRICS orders them.
  const WORSE = { tsa: 1, tp: 2, ahr: 4 };
  const worse = (r, s, m) => (D.cols[r].worse[s] & WORSE[m]) !== 0;
  const over = D.rows === "trials" ? " (the sample over its trials, as diff compares it)" : "";
  const mark = (sign, what) =>
    `<span class="down" title="${what} than in the first run${over}">${sign}</span>`;
  const pill = (v, lowerBetter) => {
    if (v == null) return '<span class="pill none">—</span>';
    const best = lowerBetter ? v <= 0 : v >= 1;
    const cls = best ? "good" : (lowerBetter ? v <= 0.5 : v >= 0.5) ? "mid" : "bad";
    return `<span class="pill ${cls}">${fmt(v, 2)}</span>`;
  };
  const cols = [
    { key: "idx", label: "#", num: true, get: (s) => s, cell: (s) => s + 1 },
    { key: "id", label: "sample", cls: "id", title: (s) => printable(S.id[s]), get: (s) => S.id[s],
      cell: (s) => `<code>${esc(printable(S.id[s]))}</code>` },
    { key: "cat", label: "category", cls: "cat", title: (s) => printable(S.cat[s]),
      get: (s) => S.cat[s] || "", cell: (s) => esc(printable(S.cat[s])) },
    { key: "input", label: "input", cls: "input", title: true, get: (s) => S.input[s],
      cell: (s) => esc(S.input[s]) },
    { key: "ngold", label: "gold calls", num: true, get: (s) => S.ngold[s], cell: (s) => S.ngold[s] },
  ];
  R.forEach((run, r) => {
    const C = D.cols[r];
    cols.push(
      { key: `calls${r}`, run: r, label: "calls", num: true, get: (s) => C.calls[s],
        cell: (s) => C.calls[s] ?? "—" },
      { key: `tsa${r}`, run: r, label: "TSA", num: true, get: (s) => C.tsa[s],
        cell: (s) => pill(C.tsa[s], false) + (worse(r, s, "tsa") ? mark("▼", "lower") : "") },
      { key: `tp${r}`, run: r, label: "TP", num: true, get: (s) => C.tp[s],
        cell: (s) => pill(C.tp[s], false) + (worse(r, s, "tp") ? mark("▼", "lower") : "") },
      { key: `ahr${r}`, run: r, label: "AHR", num: true, get: (s) => C.ahr[s],
        cell: (s) => pill(C.ahr[s], true) + (worse(r, s, "ahr") ? mark("▲", "higher") : "") });
  });

  const state = { sort: "idx", desc: false, page: 0, size: 100, rows: [] };
  const lowered = { id: null, input: null }; // the searched texts, lower-cased at first use

  function header() {
    const th = (c, span) => `<th data-sort="${c.key}"${span}${c.num ? ' class="num"' : ""}>` +
      `${esc(c.label)}</th>`;
    const base = cols.filter((c) => c.run === undefined);
    const perRun = cols.filter((c) => c.run === 0).length;
    if (R.length === 1) return `<tr>${cols.map((c) => th(c, "")).join("")}</tr>`;
    const groups = R.map((run) => `<th class="group" colspan="${perRun}" style="--run:${run.color}">` +
      `<span class="swatch"></span>${esc(run.id)}</th>`).join("");
    return `<tr>${base.map((c) => th(c, ' rowspan="2"')).join("")}${groups}</tr>` +
      `<tr>${cols.filter((c) => c.run !== undefined).map((c) => th(c, "")).join("")}</tr>`;
  }

  function apply() {
    const show = $("f-show").value, tool = $("f-tool").value, cat = $("f-cat").value;
    const text = $("f-text").value.trim().toLowerCase();
    const ti = tool ? D.tools.indexOf(tool) : -1;
    if (text && !lowered.id) {
      lowered.id = S.id.map((v) => v.toLowerCase());
      lowered.input = S.input.map((v) => (v || "").toLowerCase());
    }
    const rows = [];
    for (let s = 0; s < N; s++) {
      if (show === "failed" && !S.failed[s]) continue;
      if (show === "regressed" && !S.regressed[s]) continue;
      if (ti >= 0 && !S.tools[s].includes(ti)) continue;
      if (cat && S.cat[s] !== cat) continue;
      if (text && !lowered.id[s].includes(text) && !lowered.input[s].includes(text)) continue;
      rows.push(s);
    }
    state.rows = rows;
    state.page = 0;
    sort();
  }

  function sort() {
    const get = cols.find((c) => c.key === state.sort).get, sign = state.desc ? -1 : 1;
    state.rows.sort((a, b) => {
      const x = get(a), y = get(b);
      if (x == null || y == null) return x == null ? (y == null ? a - b : 1) : -1;
      return x < y ? -sign : x > y ? sign : a - b;
    });
    document.querySelectorAll("#samples-table th[data-sort]").forEach((th) => {
      th.classList.toggle("sorted", th.dataset.sort === state.sort);
      th.classList.toggle("desc", th.dataset.sort === state.sort && state.desc);
    });
    draw();
  }

  function draw() {
    const { rows, size } = state;
    const pages = Math.max(1, Math.ceil(rows.length / size));
    state.page = Math.min(state.page, pages - 1);
    const start = state.page * size, shown = rows.slice(start, start + size);
    $("samples-table").tBodies[0].innerHTML = shown.map((s) =>
      `<tr data-s="${s}"${S.failed[s] ? ' class="failed"' : ""}>` + cols.map((c) =>
        `<td class="${c.num ? "num" : ""} ${c.cls || ""}"${c.title ? ` title="${esc(
          c.title === true ? c.get(s) : c.title(s))}"` : ""}>` +
        `${c.cell(s)}</td>`).join("") + "</tr>").join("");
    const count = $("row-count");
    count.dataset.count = rows.length;
    const n = (v) => v.toLocaleString("en-US");
    count.textContent = rows.length === N ? `${n(N)} ${D.rows}` : `${n(rows.length)} of ${n(N)} ${D.rows}`;
    $("p-info").textContent = rows.length ?
      `${start + 1}–${start + shown.length} of ${rows.length}, page ${state.page + 1} of ${pages}` :
      "no sample matches";
    $("p-prev").disabled = state.page === 0;
    $("p-next").disabled = state.page >= pages - 1;
  }

  $("samples-table").tHead.innerHTML = header();
  $("samples-table").tHead.addEventListener("click", (ev) => {
    const th = ev.target.closest("th[data-sort]");
    if (!th) return;
    state.desc = state.sort === th.dataset.sort ? !state.desc : false;
    state.sort = th.dataset.sort;
    sort();
  });
  ["f-show", "f-tool", "f-cat", "f-text"].forEach((id) => $(id).addEventListener("input", apply));
  $("p-prev").addEventListener("click", () => { state.page--; draw(); });
  $("p-next").addEventListener("click", () => { state.page++; draw(); });
  $("p-size").addEventListener("change", (ev) => { state.size = +ev.target.value; draw(); });
  $("samples-table").tBodies[0].addEventListener("click", (ev) => {
    const tr = ev.target.closest("tr[data-s]");
    if (tr) open(+tr.dataset.s);
  });
  apply();

  /* ---- sample detail ---- */
  const detail = { s: null, run: 0 };
  const TAGS = { wrong: "wrong", unknown: "invented", not_default: "≠ default",
    no_default: "no default", not_integer: "not an integer", missing: "left out",
    accepted: "accepted", optional: "optional, left out" };
  // verdicts that are valid (shown, not counted)
  const VALID = new Set(["accepted"]);

  // a gold call's rules ([name, args, {accept, optional, group}]): each key with its other
  // acceptable values, optional keys marked (and listed when gold leaves them out)
  function call(c, marks, missing, optional) {
    const [name, args, rules] = c;
    const accept = (rules && rules.accept) || {}, opt = (rules && rules.optional) || [];
    // arguments that are no object (scored as none) are shown as their JSON
    const object = args !== null && typeof args === "object" && !Array.isArray(args);
    const arg = (k, v) => {
      const m = own(marks, k) || (missing && missing.includes(k) ? "missing" : "") ||
        (optional && optional.includes(k) ? "optional" : "");
      const tag = m ? `<span class="tag ${m}">${TAGS[m]}</span>` : "";
      const others = (own(accept, k) || []).filter((x) => v === undefined || json(x) !== json(v));
      const alt = others.length ? `<span class="alt"> | ${others.map(json).join(" | ")}</span>` : "";
      const value = v === undefined ? "" : json(v);
      const isOpt = opt.includes(k) ? '<span class="opt">?</span>' : "";
      return `<span class="arg${m ? " " + m : ""}">${esc(k)}${isOpt}=${value}${alt}${tag}</span>`;
    };
    const parts = !object ? [json(args)] : Object.entries(args).map(([k, v]) => arg(k, v));
    if (object) opt.filter((k) => own(args, k) === undefined).forEach((k) => parts.push(arg(k, undefined)));
    const group = rules && rules.group !== undefined ?
      `<span class="tag group" title="calls of one group may come in any order">group ${json(rules.group)}</span>` : "";
    return `<span class="call mono"><span class="name">${esc(printable(name))}</span>(${parts.join(", ")})${group}</span>`;
  }

  const calls = (n) => (n ? `${n} call${n > 1 ? "s" : ""}` : "no calls");
  const NO_CALLS = '<span class="empty none">no calls</span>';

  // pairs in agent order; inside an order-free group a pair may go back in gold's order, so
  // unpaired gold calls are shown before the first pair with a later gold call
  function trajectories(gold, agent, pairs) {
    let h = `<div class="traj"><div class="h">gold · ${calls(gold.length)}</div>` +
      `<div class="h mid">alignment</div><div class="h">agent · ${calls(agent.length)}</div>`;
    const row = (g, mid, cls, a) => { h += `<div>${g}</div><div class="mid ${cls}">${mid}</div><div>${a}</div>`; };
    // an empty trajectory is a row of its own: with no calls on either side, the table has no other
    if (!gold.length && !agent.length) row(NO_CALLS, "same: none", "paired", NO_CALLS);
    const paired = new Set(pairs.map((p) => p[1]));
    let i = 0, j = 0;
    for (const p of [...pairs, [agent.length, gold.length, null]]) {
      for (; j < p[1]; j++) {
        if (!paired.has(j)) row(call(gold[j]), "missed ←", "missed", '<span class="empty">not called</span>');
      }
      for (; i < p[0]; i++) row('<span class="empty">not in gold</span>', "→ extra", "extra", call(agent[i]));
      if (p[2] === null) break;
      const bad = Object.values(p[2]).filter((v) => !VALID.has(v)).length;
      row(call(gold[p[1]], null, p[3], p[4]), bad ? `paired · ${bad} invalid` : "paired",
        bad ? "paired bad" : "paired",
        call(agent[i], p[2]));
      i++;
    }
    return h + "</div>";
  }

  function transcript(run, e) {
    const own = e.o !== undefined, specs = own ? e.o : run.tools;
    const tools = specs.map((t) => `<div><code>${esc(printable(t.name))}(${Object.keys(
      (t.parameters || {}).properties || {}).map(esc).join(", ")})</code> — ${esc(t.description)}</div>`);
    const from = '<span class="stats">from the run manifest</span>';
    const toolsFrom = own ? '<span class="stats">the sample\'s own</span>' : from;
    let h = '<div class="msgs">' + (run.system ?
      `<details class="msg system"><summary class="who">system prompt ${from}</summary>` +
      `<div class="text">${esc(run.system)}</div></details>` :
      '<div class="msg system"><div class="who"><span>system prompt <span class="stats">' +
      "none in the run manifest</span></span></div></div>") +
      `<details class="msg system"><summary class="who">tools (${specs.length}) ${toolsFrom}` +
      `</summary>${tools.join("")}</details>`;
    for (const m of e.t) h += message(m);
    return h + "</div>";
  }

  // one transcript message; "mark": a value (JSON) to mark in its text, "cls": more classes
  function message([type, t, extra, tin, tout, lat, bad], mark, cls) {
    const strs = details().strings;
    const who = { human: "user", ai: "AI", tool: `tool · ${esc(printable(extra && extra[0]))}` }[type] || esc(type);
    const stats = [tin != null ? `${tin} in` : "", tout != null ? `${tout} out` : "",
      lat != null ? `${(lat * 1000).toFixed(lat < 0.01 ? 1 : 0)} ms` : ""].filter(Boolean).join(" · ");
    const status = type === "tool" && extra && extra[1] === "error" ? ' <span class="tag wrong">error</span>' : "";
    let h = `<div class="msg ${esc(type)}${cls ? " " + cls : ""}"><div class="who"><span>${who}${status}</span>` +
      `<span class="stats">${stats}</span></div>`;
    if (strs[t]) h += `<div class="text">${marked(strs[t], mark)}</div>`;
    if (type === "ai" && extra && extra.length) {
      h += `<div class="calls">${extra.map((c) => `<div>→ ${call(c)}</div>`).join("")}</div>`;
    }
    if (bad) {
      h += '<div class="error">unparseable tool calls (not agent calls here): ' +
        bad.map(([n, a, err]) => `${esc(printable(n))} ${esc(a)}${err ? ` (${esc(err)})` : ""}`).join("; ") +
        "</div>";
    }
    return h + "</div>";
  }

  // a text with a differing value marked: the value's text where it occurs in it
  function marked(text, value) {
    if (value == null) return esc(text);
    let v;
    try { v = JSON.parse(value); } catch (err) { v = value; }
    const needle = typeof v === "string" ? v : JSON.stringify(v);
    const at = needle ? text.indexOf(needle) : -1;
    if (at < 0) return esc(text);
    return esc(text.slice(0, at)) + `<mark class="diff">${esc(needle)}</mark>` +
      esc(text.slice(at + needle.length));
  }

  // a replay's sample that diverged: the parent's transcript beside the replay's, from the
  // message where they first differ (marked on both sides)
  function divergence(e, r) {
    const v = e.v, value = (x) => (x == null ? '<span class="empty">nothing</span>' :
      `<mark class="diff">${esc(x)}</mark>`);
    let h = `<h3>Divergence from <code>${esc(v.parent)}</code></h3>` +
      `<div class="facts"><span>turn <b>${v.turn}</b></span><span>component <b>${esc(v.component)}</b></span>` +
      `<span>at <code>${esc(v.path)}</code></span></div>` +
      `<div class="diff-values"><div>recorded ${value(v.recorded)}</div><div>replayed ${value(v.replayed)}</div></div>`;
    if (!v.found) return h + `<p>The parent run ${esc(v.parent)} is not in the store: only this replay's side is shown.</p>`;
    const mine = e.t.slice(v.at), theirs = v.pt, n = Math.max(mine.length, theirs.length);
    h += `<div class="side"><div class="h">parent · ${esc(v.parent)}</div><div class="h">replay · ${esc(R[r].id)}</div>`;
    for (let i = 0; i < n; i++) {
      const first = i === 0 && v.marked;
      const cell = (m, mark) => (m ? message(m, first ? mark : null, first ? "diverged" : "") :
        '<div class="msg none"><span class="empty">nothing here</span></div>');
      h += cell(theirs[i], v.recorded) + cell(mine[i], v.replayed);
    }
    return h + "</div>";
  }

  function failedIn(s) {
    const runs = R.filter((run, r) => D.cols[r].failed[s]).map((run) => esc(run.id));
    if (!runs.length) return R.length > 1 ? "matched gold in every run" : "matched gold";
    return `<b>failed</b>${R.length > 1 ? " in " + runs.join(", ") : ""}`;
  }

  function render() {
    const s = detail.s, r = detail.run, x = details(), run = x.runs[r], e = run.samples[s];
    const C = D.cols[r];
    let h = `<div class="facts"><span>category <b>${esc(printable(S.cat[s]) || "—")}</b></span>` +
      `<span>gold calls <b>${S.ngold[s]}</b></span>` +
      `<span>${failedIn(s)}</span>` +
      (S.regressed[s] ? "<span><b>regressed</b> vs the first run</span>" : "") + "</div>" +
      `<h3>Input</h3><div class="input-text">${esc(S.input[s])}</div>`;
    if (R.length > 1) {
      h += '<div class="tabs">' + R.map((run2, k) => `<button type="button" data-run="${k}" ` +
        `style="--run:${run2.color}" class="${k === r ? "active" : ""}">${esc(run2.id)}</button>`)
        .join("") + "</div>";
    }
    if (!e) {
      h += "<p>This run has no such sample.</p>";
    } else {
      h += `<div class="facts" style="margin-top:10px"><span>run <b>${esc(R[r].id)}</b></span>` +
        `<span>status <b>${esc(C.status[s])}</b></span><span>TSA <b>${fmt(C.tsa[s])}</b></span>` +
        `<span>TP <b>${fmt(C.tp[s])}</b></span><span>AHR <b>${fmt(C.ahr[s])}</b></span>` +
        `<span>invalid args <b>${C.inv[s]} / ${C.tot[s]}</b></span>` +
        `<span>gold args left out <b>${C.mis[s]}</b></span>` +
        `<span>tokens <b>${C.tin[s] ?? "—"} in / ${C.tout[s] ?? "—"} out</b></span>` +
        `<span>duration <b>${C.dur[s] == null ? "—" : C.dur[s] + " s"}</b></span></div>`;
      if (e.e) h += `<div class="error">${esc(e.e)}</div>`;
      if (e.v) h += divergence(e, r);
      if (e.m) h += `<h3>Metadata</h3><pre class="input-text">${esc(JSON.stringify(e.m, null, 2))}</pre>`;
      h += "<h3>Trajectories</h3><div class=\"legend\">" + Object.entries(TAGS).map(([k, v]) =>
        `<span class="arg ${k}">${v}</span>`).join("") + "</div>" +
        trajectories(e.g || x.gold[s], e.a, e.p) + "<h3>Transcript</h3>" + transcript(run, e);
    }
    $("d-body").innerHTML = h;
  }

  function open(s, run) {
    detail.s = s;
    if (run != null) detail.run = run;
    if (D.cols[detail.run].tp[s] == null) detail.run = Math.max(0, D.cols.findIndex((c) => c.tp[s] != null));
    $("d-title").textContent = printable(S.id[s]);
    render();
    $("detail").hidden = $("backdrop").hidden = false;
    $("d-body").scrollTop = 0;
    remember(false);
  }

  /* ---- a link per sample: #run=RUN&sample=ID opens it ---- */
  const opened = () => !$("detail").hidden;
  const link = () => "#" + new URLSearchParams({ run: R[detail.run].id, sample: S.id[detail.s] });
  // The address bar holds the open sample's link, a history entry per sample opened (Back
  // returns to the one before); switching runs replaces it.
  function remember(replace) {
    const frag = link();
    $("d-link").href = frag;
    if (location.hash === frag) return;
    if (replace) history.replaceState(null, "", frag);
    else location.hash = frag;
  }
  const linked = () => new URLSearchParams(location.hash.slice(1));
  function close() {
    if (!opened()) return;
    $("detail").hidden = $("backdrop").hidden = true;
    if (linked().has("sample")) history.replaceState(null, "", location.pathname + location.search);
  }
  // Open the sample the fragment names (on load, and when it changes); an id no sample has
  // is put in the search box, so the table says that nothing matches.
  function route() {
    const q = linked(), sid = q.get("sample");
    if (sid == null) return close();
    const s = S.id.indexOf(sid), r = R.findIndex((run) => run.id === q.get("run"));
    if (s < 0) {
      $("detail").hidden = $("backdrop").hidden = true;
      $("f-text").value = sid;
      return apply();
    }
    if (opened() && detail.s === s && (r < 0 || r === detail.run)) return;
    open(s, r < 0 ? null : r);
  }

  $("d-body").addEventListener("click", (ev) => {
    const b = ev.target.closest("button[data-run]");
    if (b) { detail.run = +b.dataset.run; render(); remember(true); }
  });
  $("d-close").addEventListener("click", close);
  $("backdrop").addEventListener("click", close);
  document.addEventListener("keydown", (ev) => { if (ev.key === "Escape") close(); });
  window.addEventListener("hashchange", route);
  route();

  Promise.all(charts).then(() => {
    window.tcbReportReadyMs = performance.now();
    document.body.dataset.ready = "1";
  });
})();
