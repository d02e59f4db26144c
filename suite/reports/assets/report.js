// REPORT.html: the heat maps (Chart.js matrix charts, colours computed by the report on its shared
// scale), their hover card, and the per-scenario table's sorting and filters; for a run timed on
// several input distributions, the view of the heat maps and of the table (each baseline's worst
// distribution, each row's lowest ratio, or one distribution), every view's cells computed by the
// report. Every string from the data goes in through textContent.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("page-data").textContent);
  const charts = {};
  let heatView = data.heatmap_view;  // null: a run timed on one distribution, no views
  let tableView = data.table_view;

  function el(tag, attrs, children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "text") e.textContent = v; else e.setAttribute(k, v);
    }
    for (const c of children || []) e.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    return e;
  }
  const fmt = (x, d) => (x === null || x === undefined ? "-" : Number(x).toFixed(d));
  const spread = (t) => (t.iqr_ms === null || !t.median_ms ? "-" : (100 * t.iqr_ms / t.median_ms).toFixed(1) + "%");

  // ------------------------------------------------------------------ hover card of a scenario
  function distributionTable(s) {
    // one line per distribution: the kernel's median time and its ratio to every baseline there
    const names = data.distributions.filter((d) => d in s.by_distribution);  // the run's order
    const bases = s.impls.filter((t) => t.name !== "kernel").map((t) => t.name);
    const head = el("tr", {}, ["inputs", data.kernel + " ms", ...bases.map((b) => "vs " + b)].map((h) => el("th", {text: h})));
    const rows = names.map((d) => {
      const by = Object.fromEntries(s.by_distribution[d].map((t) => [t.name, t]));
      return el("tr", {}, [el("td", {text: d}), el("td", {text: fmt(by.kernel.median_ms, 4)}),
        ...bases.map((b) => el("td", {text: by[b].ratio === null ? "-" : fmt(by[b].ratio, 3) + "x"}))]);
    });
    return el("table", {class: "by-distribution"}, [el("thead", {}, [head]), el("tbody", {}, rows)]);
  }

  function scenarioCard(id) {
    const s = data.scenarios[id];
    const card = el("div");
    card.appendChild(el("h4", {text: id}));
    const ok = s.status === "ok";
    card.appendChild(el("div", {class: ok ? "" : "bad",
      text: ok ? "correct" : `${s.status}${s.code ? " (" + s.code + ")" : ""}: ${s.reason || ""}`}));
    if (s.data_dependent) {
      const dd = s.data_dependent;
      card.appendChild(el("div", {class: "bad", text: `data-dependent: the kernel's time spreads ${fmt(dd.kernel, 3)}x ` +
        `across the inputs, past the baselines' largest spread in the run (${fmt(data.data_dependent_threshold, 3)}x)`}));
    }
    const dists = Object.keys(s.by_distribution || {});
    const one = dists.includes(heatView) ? heatView : null;  // the distribution the maps show, if one
    if (dists.length) card.appendChild(el("div", {class: "note", text: one ? `on the ${one} inputs` : "pooled over every input distribution"}));
    const impls = one ? s.by_distribution[one] : s.impls;
    const head = el("tr", {}, ["", "median ms", "IQR", "min-max ms", "TFLOP/s", "ratio"].map((h) => el("th", {text: h})));
    const rows = impls.map((t) => el("tr", {}, [
      el("td", {text: t.name === "kernel" ? data.kernel : t.name}),
      el("td", {text: fmt(t.median_ms, 4)}),
      el("td", {text: spread(t)}),
      el("td", {text: t.min_ms === null ? "-" : `${fmt(t.min_ms, 4)}-${fmt(t.max_ms, 4)}`}),
      el("td", {text: fmt(t.tflops, 1)}),
      el("td", {text: t.ratio === null ? "-" : fmt(t.ratio, 3) + "x"}),
    ]));
    card.appendChild(el("table", {}, [el("thead", {}, [head]), el("tbody", {}, rows)]));
    if (dists.length) card.appendChild(distributionTable(s));
    const check = [];
    if (s.max_err !== null) check.push(`max err ${s.max_err.toExponential(2)} (tol ${fmt(s.tol, 4)})`);
    if (s.lse_err !== null) check.push(`LSE err ${s.lse_err.toExponential(2)}`);
    if (s.recheck_max_err !== null) check.push(`after timing ${s.recheck_max_err.toExponential(2)} (tol ${fmt(s.recheck_tol, 4)})`);
    if (check.length) card.appendChild(el("div", {class: "note", text: "check: " + check.join("; ")}));
    for (const f of s.flags) card.appendChild(el("div", {class: "bad", text: "flagged: " + f}));
    for (const t of s.impls) if (t.note) card.appendChild(el("div", {class: "note", text: `${t.name}: ${t.note}`}));
    return card;
  }

  const tip = document.getElementById("tooltip");
  function showTip(chart, tooltip) {
    if (!tooltip || tooltip.opacity === 0 || !tooltip.dataPoints || !tooltip.dataPoints.length) {
      tip.hidden = true;
      delete tip.dataset.scenario;
      return;
    }
    const id = tooltip.dataPoints[0].raw.scenario;
    if (tip.dataset.scenario !== id || tip.dataset.view !== String(heatView)) {
      tip.replaceChildren(scenarioCard(id));
      tip.dataset.scenario = id;
      tip.dataset.view = String(heatView);
    }
    tip.hidden = false;
    const box = chart.canvas.getBoundingClientRect();
    let x = box.left + tooltip.caretX + 14, y = box.top + tooltip.caretY + 14;
    const w = tip.offsetWidth, h = tip.offsetHeight;
    if (x + w > window.innerWidth - 8) x = box.left + tooltip.caretX - w - 14;
    if (y + h > window.innerHeight - 8) y = Math.max(8, window.innerHeight - h - 8);
    tip.style.left = Math.max(8, x) + "px";
    tip.style.top = y + "px";
  }

  // ------------------------------------------------------------------ heat maps
  const viewCells = (h, key) => (h.views && h.views[key]) || h.cells;
  function viewName(h, key) {
    if (!h.views) return "";
    if (key === "worst") return ` (on ${h.worst}, the headline's)`;
    if (key === "lowest") return " (each row's lowest ratio)";
    return ` (on ${key})`;
  }

  function heatmap(h) {
    const fig = document.getElementById("heatmap-" + h.id);
    const canvas = fig.querySelector("canvas");
    fig.querySelector(".view-name").textContent = viewName(h, heatView);
    const nx = h.seqlens.length, ny = h.head_configs.length;
    const chart = new Chart(canvas, {
      type: "matrix",
      plugins: [ChartDataLabels],
      data: {datasets: [{
        label: `vs ${h.baseline}, ${h.mask}`,
        data: viewCells(h, heatView),
        backgroundColor: (c) => (c.raw ? c.raw.color : "#d0d0d0"),
        borderColor: (c) => (c.raw && c.raw.dd ? "#1b1f24" : "#ffffff"),
        borderWidth: (c) => (c.raw && c.raw.dd ? 2 : 1),
        hoverBackgroundColor: (c) => (c.raw ? c.raw.color : "#d0d0d0"), hoverBorderColor: "#1b1f24", hoverBorderWidth: 2,
        width: ({chart}) => (chart.chartArea || {width: 0}).width / nx,
        height: ({chart}) => (chart.chartArea || {height: 0}).height / ny,
      }]},
      options: {
        animation: false, responsive: true, maintainAspectRatio: false,
        interaction: {mode: "nearest", intersect: true},
        scales: {
          x: {type: "category", labels: h.seqlens, offset: true, grid: {display: false},
              title: {display: true, text: "sequence length"}},
          y: {type: "category", labels: h.head_configs, offset: true, reverse: false, grid: {display: false}},
        },
        plugins: {
          legend: {display: false},
          datalabels: {formatter: (v, c) => c.dataset.data[c.dataIndex].label,
                       color: (c) => c.dataset.data[c.dataIndex].text, font: {size: 10}},
          tooltip: {enabled: false, external: ({chart, tooltip}) => showTip(chart, tooltip)},
        },
      },
    });
    charts[h.id] = chart;
  }
  data.heatmaps.forEach(heatmap);
  document.addEventListener("scroll", () => { tip.hidden = true; }, {passive: true});

  function setHeatmapView(key) {
    heatView = key;
    for (const h of data.heatmaps) {
      const chart = charts[h.id];
      chart.data.datasets[0].data = viewCells(h, key);
      chart.update();
      document.getElementById("heatmap-" + h.id).querySelector(".view-name").textContent = viewName(h, key);
    }
    tip.hidden = true;
    delete tip.dataset.scenario;
  }
  const heatSelect = document.getElementById("heatmap-view");
  if (heatSelect) heatSelect.addEventListener("change", () => setHeatmapView(heatSelect.value));

  // ------------------------------------------------------------------ the table: sort and filter
  const table = document.getElementById("scenario-table");
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  const sortKey = (td) => {
    const v = td.dataset.sort;
    if (v === "") return null;
    const n = Number(v);
    return Number.isNaN(n) ? v.toLowerCase() : n;
  };
  function sortBy(th, keep) {
    const col = Number(th.dataset.col);
    const asc = th.getAttribute("aria-sort") === "ascending";
    const dir = keep ? (asc ? 1 : -1) : (asc ? -1 : 1);  // keep: sort again the way it is sorted
    for (const other of table.tHead.rows[0].cells) other.removeAttribute("aria-sort");
    th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
    const keyed = Array.from(body.rows).map((tr, i) => [sortKey(tr.cells[col]), i, tr]);
    keyed.sort((a, b) => {
      if (a[0] === null || b[0] === null) return (a[0] === null) - (b[0] === null) || a[1] - b[1];
      if (a[0] < b[0]) return -dir;
      if (a[0] > b[0]) return dir;
      return a[1] - b[1];
    });
    body.append(...keyed.map((k) => k[2]));
  }
  for (const th of table.tHead.rows[0].cells) {
    th.addEventListener("click", () => sortBy(th));
    th.addEventListener("keydown", (e) => { if (e.key === "Enter") sortBy(th); });
  }

  // the table's view: the cells that change with it (TFLOP/s, ratios), and the ratios the filter tests
  function setTableView(key) {
    const tv = data.table_views;
    if (!tv || !tv.cells || !tv.cells[key] || key === tableView) return;
    tableView = key;
    for (const tr of rows) {
      const cells = tv.cells[key][tr.dataset.scenario];
      tv.cols.forEach((col, i) => {
        const [raw, text] = cells[i];
        tr.cells[col].dataset.sort = raw === null ? "" : String(raw);
        tr.cells[col].textContent = text;
      });
      for (const [b, col] of Object.entries(tv.ratio_cols)) tr.setAttribute("data-ratio-" + b, tr.cells[col].dataset.sort);
    }
    const sorted = Array.from(table.tHead.rows[0].cells).find((th) => th.hasAttribute("aria-sort"));
    if (sorted) sortBy(sorted, true);
  }

  const form = document.getElementById("filters");
  const shown = document.getElementById("shown");
  function applyFilters() {
    const f = Object.fromEntries(new FormData(form).entries());
    const below = f.below === "" || f.below === undefined ? null : Number(f.below);
    if (f.view) setTableView(f.view);
    let n = 0;
    for (const tr of rows) {
      const d = tr.dataset;
      let keep = (!f.head_config || d.headConfig === f.head_config) && (!f.seqlen || d.seqlen === f.seqlen) &&
                 (!f.mask || d.mask === f.mask) && (!f.data_dependent || d.dataDependent === "1");
      if (keep && below !== null && !Number.isNaN(below)) {
        const r = tr.getAttribute("data-ratio-" + f.baseline);
        keep = r !== null && r !== "" && Number(r) < below;
      }
      tr.hidden = !keep;
      n += keep;
    }
    shown.textContent = `${n} of ${rows.length} scenarios shown`;
  }
  form.addEventListener("input", applyFilters);
  form.addEventListener("change", applyFilters);
  form.addEventListener("reset", () => setTimeout(applyFilters, 0));
  applyFilters();

  window.ksReport = {charts, data, applyFilters, setHeatmapView, setTableView};
  document.body.dataset.ready = "1";
})();
