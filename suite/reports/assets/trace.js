// The trace viewer: panes of runs (two side by side when there are several), each with its summary,
// best-so-far chart (Chart.js), and three lazily drawn lists: the timeline, the conversation and the
// evaluations with their diffs. Lists draw a chunk of rows at a time as they scroll into view; tool
// outputs and diffs are drawn when opened. Every string from a trace goes in through textContent.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("page-data").textContent);
  const runs = data.runs;
  const CHUNK = 150;
  const PALETTE = ["#0969da", "#d1242f", "#1a7f37", "#8250df", "#bc4c00", "#1b7c83", "#bf3989", "#6e7781"];
  const CATEGORY = {"layer-shift": "#1a7f37", "limit-rejection": "#d1242f", "information": "#8250df",
                    "human": "#bc4c00", "uncategorized": "#6e7781"};
  const GROUPS = ["model", "eval", "question", "human", "decision", "retry", "resume", "context", "agent", "exit",
                  "step", "run", "extension"];
  const GROUP_LABEL = {model: "model calls", eval: "evaluations", question: "questions", human: "human messages",
                       decision: "decision points", retry: "retries", resume: "resumes",
                       context: "context compactions", agent: "agent sessions", exit: "exit and limits",
                       step: "step checkpoints", run: "run start and end", extension: "extensions"};

  function el(tag, attrs, children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "text") e.textContent = v; else e.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children || []) if (c) e.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    return e;
  }
  const x3 = (v) => (v === null || v === undefined ? "-" : Number(v).toFixed(3) + "x");
  function clock(s) {
    s = Math.max(0, Math.round(s || 0));
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = String(s % 60).padStart(2, "0");
    return h ? `${h}:${String(m).padStart(2, "0")}:${sec}` : `${m}:${sec}`;
  }

  // ------------------------------------------------------------------ a list drawn chunk by chunk
  class LazyList {
    constructor(container, render) {
      this.container = container;
      this.render = render;
      this.items = [];
      this.drawn = 0;
      this.observer = new IntersectionObserver((entries) => {
        if (entries.some((e) => e.isIntersecting)) this.more();
      }, {root: container, rootMargin: "600px"});
    }
    reset(items) {
      this.items = items;
      this.drawn = 0;
      this.nodes = [];
      this.container.replaceChildren();
      this.sentinel = el("div", {class: "sentinel"});
      this.container.appendChild(this.sentinel);
      this.observer.disconnect();
      this.observer.observe(this.sentinel);
      this.more();
    }
    more() {
      const frag = document.createDocumentFragment();
      const end = Math.min(this.items.length, this.drawn + CHUNK);
      for (let i = this.drawn; i < end; i++) {
        const node = this.render(this.items[i], i);
        this.nodes.push(node);
        frag.appendChild(node);
      }
      this.drawn = end;
      this.container.insertBefore(frag, this.sentinel);
      if (this.drawn >= this.items.length) this.observer.disconnect();
    }
    reveal(i) {  // draw up to item i and scroll it into view
      while (this.drawn <= i && this.drawn < this.items.length) this.more();
      const node = this.nodes[i];
      if (node) node.scrollIntoView({block: "center"});
      return node;
    }
  }

  // ------------------------------------------------------------------ best-so-far charts
  function curveDatasets(run, color, withPoints) {
    const last = run.rows.length ? run.rows[run.rows.length - 1].s : 0;
    const best = run.curve.filter((p) => p.best !== null).map((p) => ({x: p.step, y: p.best,
      tip: `${run.arm} ${run.run_id}: best ${x3(p.best)} after evaluation ${p.index}`}));
    if (best.length) best.push({x: Math.max(last, best[best.length - 1].x), y: best[best.length - 1].y,
                                tip: `${run.arm} ${run.run_id}: best ${x3(best[best.length - 1].y)} at the end`});
    const sets = [{type: "line", label: withPoints ? "best so far" : `${run.arm}: ${run.run_id}`, data: best,
                   stepped: "after", borderColor: color, backgroundColor: color, pointRadius: 0, borderWidth: 2}];
    if (withPoints) {
      sets.push({type: "scatter", label: "correct evaluation", borderColor: color, backgroundColor: color + "80",
                 pointRadius: 3, data: run.curve.filter((p) => p.geomean !== null).map((p) => ({x: p.step, y: p.geomean,
                   tip: `evaluation ${p.index} (step ${p.step}): ${x3(p.geomean)}`}))});
      sets.push({type: "scatter", label: "not correct (drawn at 0)", pointStyle: "crossRot", borderColor: "#d1242f",
                 pointRadius: 5, data: run.curve.filter((p) => p.geomean === null).map((p) => ({x: p.step, y: 0,
                   tip: `evaluation ${p.index} (step ${p.step}): ${p.status}`}))});
    }
    const qs = run.questions.map((q) => ({x: q.step, y: q.best === null ? 0 : q.best,
      tip: `question at step ${q.step} [${q.trigger}; ${q.category}]: ${q.text.slice(0, 160)}`}));
    sets.push({type: "scatter", label: withPoints ? "question" : `${run.arm}: questions`, data: qs,
               pointStyle: "triangle", pointRadius: 7, borderColor: withPoints ? "#8250df" : color,
               backgroundColor: (c) => (withPoints && c.raw ? (CATEGORY[run.questions[c.dataIndex].category] || "#8250df")
                                                             : color + "60")});
    return sets;
  }
  function bestChart(canvas, datasets, baseline) {
    return new Chart(canvas, {
      data: {datasets},
      options: {
        animation: false, responsive: true, maintainAspectRatio: false, parsing: true,
        interaction: {mode: "nearest", intersect: true},
        scales: {x: {type: "linear", title: {display: true, text: "step"}, beginAtZero: true},
                 y: {beginAtZero: true, title: {display: true, text: `speed-up vs ${baseline || "baseline"}`}}},
        plugins: {legend: {position: "bottom", labels: {boxWidth: 12, font: {size: 11},
                                                               filter: (item, d) => d.datasets[item.datasetIndex].data.length > 0}},
                  tooltip: {callbacks: {label: (c) => c.raw.tip || ""}}},
      },
    });
  }
  const baselineOf = (run) => (run.evals.length ? run.evals[0].baseline : null);

  // ------------------------------------------------------------------ one row, message, evaluation
  function timelineRow(row, pane) {
    const node = el("div", {class: `row${row.k === "step" ? " k-step-row" : ""}${row.m !== undefined ? " linked" : ""}`,
                            "data-seq": row.q}, [
      el("span", {class: "when", text: clock(row.t)}),
      el("span", {class: "step", text: `step ${row.s}`}),
      el("span", {class: `kind k-${row.k}`, text: row.g.startsWith("tool:") ? row.g.slice(5) : row.k}),
      el("span", {class: "label", text: row.l}),
    ]);
    if (row.l.includes("NEW BEST")) node.classList.add("new-best");
    if (row.m !== undefined) {
      node.title = "show in the conversation";
      node.addEventListener("click", () => pane.openMessage(row.m));
    }
    return node;
  }
  function messageNode(m, i) {
    const node = el("div", {class: `msg role-${m.role}${m.discarded ? " discarded" : ""}`, "data-index": i});
    node.appendChild(el("div", {class: "meta", text: `#${i} ${m.role}, step ${m.step}` +
      (m.discarded ? " (discarded: after the checkpoint a resume continued from)" : "")}));
    if (m.role === "tool") {
      const first = (m.content.split("\n").find((l) => l.trim()) || "").slice(0, 120);
      const det = el("details", {}, [el("summary", {text: `tool output (${m.content.length} characters): ${first}`})]);
      det.addEventListener("toggle", () => {
        if (det.open && det.children.length === 1) det.appendChild(el("pre", {text: m.content}));
      });
      node.appendChild(det);
    } else if (m.content) {
      node.appendChild(el("pre", {text: m.content}));
    }
    for (const c of m.calls) {
      node.appendChild(el("div", {class: "call"}, ["-> ", el("code", {text: `${c.name}(${c.arguments})`})]));
    }
    return node;
  }
  function diffNode(d) {
    const pre = el("div", {class: "diff"});
    for (const line of d.lines) {
      const cls = line.startsWith("@@") ? "hunk" : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "";
      pre.appendChild(el("span", {class: cls, text: line || " "}));
    }
    if (d.cut) pre.appendChild(el("span", {class: "hunk", text: `[${d.cut} more lines not shown]`}));
    return pre;
  }
  function evalNode(e) {
    const node = el("div", {class: `eval${e.correct ? "" : " bad"}${e.new_best ? " best" : ""}`, "data-index": e.index});
    node.appendChild(el("div", {class: "head", text:
      `evaluation ${e.index} (step ${e.step}): ${e.status}, ${e.scenarios} correct` +
      (e.extended ? `, extended ${e.extended}` : "") +
      `, geomean ${x3(e.geomean)} vs ${e.baseline}` + (e.new_best ? ", new best" : "") +
      `; best so far ${x3(e.best_after)}` + (e.goal_met ? "; goal met" : "")}));
    if (e.min_ratio !== null && e.min_ratio !== undefined)
      node.appendChild(el("div", {class: "muted", text: `slowest ${x3(e.min_ratio)} (${e.min_ratio_scenario})`}));
    if (e.error) node.appendChild(el("pre", {text: e.error}));
    for (const f of e.failing) node.appendChild(el("div", {class: "muted", text: `${f.scenario}: ${f.status} ${f.reason || ""}`}));
    const d = e.diff;
    if (d.same) {
      node.appendChild(el("div", {class: "muted", text: `the same candidate as ${d.against}`}));
    } else if (d.missing) {
      node.appendChild(el("div", {class: "muted", text: `no diff: ${d.missing}`}));
    } else {
      const det = el("details", {}, [el("summary", {text: `diff against ${d.against}: +${d.added} -${d.removed} lines`})]);
      det.addEventListener("toggle", () => { if (det.open && det.children.length === 1) det.appendChild(diffNode(d)); });
      node.appendChild(det);
    }
    return node;
  }

  // ------------------------------------------------------------------ a pane
  class Pane {
    constructor(index, runIndex) {
      const root = document.getElementById("pane-template").content.firstElementChild.cloneNode(true);
      document.getElementById("panes").appendChild(root);
      this.root = root;
      this.q = (s) => root.querySelector(s);
      const select = this.q(".run-select");
      if (runs.length > 1) {
        runs.forEach((r, i) => select.appendChild(el("option", {value: i, text: `${r.arm}: ${r.run_id}`})));
        select.addEventListener("change", () => this.show(Number(select.value)));
      } else {
        select.hidden = true;
      }
      for (const b of root.querySelectorAll(".tabs button")) b.addEventListener("click", () => this.tab(b.dataset.tab));
      this.timeline = new LazyList(this.q(".timeline"), (row) => timelineRow(row, this));
      this.conversation = new LazyList(this.q(".conversation"), messageNode);
      this.evaluations = new LazyList(this.q(".evaluations"), evalNode);
      this.drawnTabs = new Set();
      this.show(runIndex);
    }
    show(i) {
      const run = this.run = runs[i];
      this.q(".run-select").value = String(i);
      this.q(".run-title").textContent = `${run.arm || "?"}: ${run.run_id}`;
      const t = run.totals || {};
      const items = [
        ["task", `${run.task || "?"} (${run.kernel || "?"})`], ["goal", run.goal], ["model", run.model],
        ["seed", run.seed], ["sandbox", run.sandbox], ["started", run.started],
        ["steps", `${t.steps ?? "-"} (${run.events} events)`],
        ["tokens", t.total_tokens !== undefined ? `${t.total_tokens} (${t.prompt_tokens} in, ${t.completion_tokens} out)` : "-"],
        ["cost", t.cost === null || t.cost === undefined ? "-" : `$${Number(t.cost).toFixed(4)}`],
        ["wall time", clock(t.wall_s)],
        ["tool calls", Object.entries(run.tools).map(([k, v]) => `${k} ${v}`).join(", ") || "-"],
        ["evaluations", `${run.evals.length}, best ${x3(run.best)}`],
        ["questions", `${run.questions.length}` + (run.groups.human ? ` (${run.groups.human} typed by a person)` : "")],
        ["retries, resumes", `${run.groups.retry || 0}, ${run.resumes}`],
        ["end", run.finished ? `${run.exit}${run.limit ? " (" + run.limit + " limit)" : ""}, goal ${run.goal_met ? "met" : "not met"}`
                             : "no run_end: still running, or interrupted (it can be resumed)"],
      ];
      this.q(".summary").replaceChildren(...items.flatMap(([k, v]) => [el("dt", {text: k}), el("dd", {text: v ?? "-"})]));
      this.q(".problems").textContent = run.problems.join("; ");
      if (this.chart) this.chart.destroy();
      this.chart = bestChart(this.q(".best-chart"), curveDatasets(run, PALETTE[i % PALETTE.length], true), baselineOf(run));
      this.filters();
      this.drawnTabs = new Set();
      this.tab(this.current || "timeline");
    }
    filters() {
      const box = this.q(".filters");
      box.replaceChildren();
      const run = this.run;
      const tools = Object.keys(run.groups).filter((g) => g.startsWith("tool:")).sort();
      const order = ["model", ...tools, ...GROUPS.slice(1)].filter((g) => run.groups[g]);
      this.enabled = new Set(order);
      for (const g of order) {
        const cb = el("input", {type: "checkbox", checked: true, "data-group": g});
        cb.addEventListener("change", () => {
          if (cb.checked) this.enabled.add(g); else this.enabled.delete(g);
          this.timeline.reset(this.run.rows.filter((r) => this.enabled.has(r.g)));
        });
        const name = g.startsWith("tool:") ? `${g.slice(5)} calls` : GROUP_LABEL[g] || g;
        box.appendChild(el("label", {}, [cb, ` ${name} (${run.groups[g]})`]));
      }
    }
    tab(name) {
      this.current = name;
      for (const b of this.root.querySelectorAll(".tabs button")) b.setAttribute("aria-selected", String(b.dataset.tab === name));
      for (const t of this.root.querySelectorAll(".tab")) t.hidden = t.dataset.tab !== name;
      if (this.drawnTabs.has(name)) return;
      this.drawnTabs.add(name);
      if (name === "timeline") this.timeline.reset(this.run.rows.filter((r) => this.enabled.has(r.g)));
      if (name === "conversation") this.conversation.reset(this.run.messages);
      if (name === "evaluations") this.evaluations.reset(this.run.evals);
    }
    openMessage(i) {
      this.tab("conversation");
      const node = this.conversation.reveal(i);
      if (node) {
        for (const n of this.root.querySelectorAll(".msg.highlight")) n.classList.remove("highlight");
        node.classList.add("highlight");
      }
    }
  }

  // ------------------------------------------------------------------ the page
  if (runs.length > 1) {
    const sets = runs.flatMap((r, i) => curveDatasets(r, PALETTE[i % PALETTE.length], false));
    bestChart(document.getElementById("overview-chart"), sets, baselineOf(runs[0]));
  }
  const panes = [new Pane(0, 0)];
  if (runs.length > 1) {
    const other = runs.findIndex((r) => r.arm !== runs[0].arm);
    panes.push(new Pane(1, other > 0 ? other : 1));
  }
  window.ksTraces = {panes, runs, readyAt: performance.now()};
  document.body.dataset.ready = "1";
})();
