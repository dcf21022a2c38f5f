// The odfd console: a single page talking to the node's JSON API under /ui/api.
// Templating: htm + Preact (vendor/htm-preact-standalone.mjs); lineage layout: dagre
// (vendor/dagre.min.js, global `dagre`). Routes live in the URL fragment: #/, #/datasets/NAME/TAB,
// #/mirrors, #/resources, #/node.
import { html, render, useState, useEffect, useCallback } from "./vendor/htm-preact-standalone.mjs";

// --- token and API ---------------------------------------------------------------------------

const TOKEN_KEY = "odfd-console-token";

function takeTokenFromUrl() {
  // `odfd ui` hands a one-time token in the fragment (never sent to a server).
  const match = location.hash.match(/^#token=([^&]+)/);
  if (match) {
    sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(match[1]));
    history.replaceState(null, "", location.pathname + "#/");
  }
}

function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

async function api(path, options = {}) {
  const headers = { Accept: "application/json" };
  if (token()) headers.Authorization = `Bearer ${token()}`;
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(`/ui/api/${path}`, {
    method: options.method || "GET",
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
  });
  const type = response.headers.get("Content-Type") || "";
  const payload = type.includes("application/json") ? await response.json() : await response.text();
  if (!response.ok) {
    const message = typeof payload === "string" ? payload : payload.message ?? payload.error;
    throw new Error(message || `${response.status} ${response.statusText}`);
  }
  return payload;
}

function useApi(path, deps) {
  const [state, setState] = useState({ data: null, error: null, loading: true });
  const load = useCallback(() => {
    if (path === null) return;
    setState((s) => ({ ...s, loading: true }));
    api(path).then(
      (data) => setState({ data, error: null, loading: false }),
      (error) => setState({ data: null, error: error.message, loading: false }),
    );
  }, [path]);
  useEffect(load, deps || [path]);
  return { ...state, reload: load };
}

// --- formatting ------------------------------------------------------------------------------

const enc = encodeURIComponent;
const datasetHref = (alias, tab = "overview") => `#/datasets/${enc(alias)}/${tab}`;
const shortHash = (hash) => (hash ? `…${hash.slice(-10)}` : "–");

function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${i === 0 ? n : n.toFixed(1)} ${units[i]}`;
}

function span(seconds) {
  if (seconds < 90) return `${Math.round(seconds)} s`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min`;
  if (seconds < 129600) return `${Math.round(seconds / 3600)} h`;
  return `${Math.round(seconds / 86400)} d`;
}

function ago(time) {
  if (!time) return "–";
  const seconds = (Date.now() - new Date(time).getTime()) / 1000;
  return seconds < 0 ? `in ${span(-seconds)}` : `${span(seconds)} ago`;
}

function cell(value) {
  if (value === null || value === undefined) return html`<span class="muted">null</span>`;
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

const Error_ = ({ message }) => (message ? html`<div class="error" role="alert">${message}</div>` : null);
const Loading = () => html`<p class="loading">Loading…</p>`;

function Pill({ kind, children }) {
  return html`<span class=${`pill ${kind || ""}`}>${children}</span>`;
}

function statusPill(status) {
  const kind = { ok: "ok", updated: "ok", unchanged: "ok", failed: "bad", error: "bad" }[status] || "warn";
  return html`<${Pill} kind=${kind}>${status}<//>`;
}

function Table({ columns, rows, className, onRow }) {
  return html`<table class=${`grid ${className || ""}`}>
    <thead><tr>${columns.map((c) => html`<th>${c}</th>`)}</tr></thead>
    <tbody>${rows.map((row) => html`<tr class=${onRow ? "clickable" : ""} onClick=${onRow ? () => onRow(row) : undefined}>${row.map((v) => html`<td class="mono">${cell(v)}</td>`)}</tr>`)}</tbody>
  </table>`;
}

// --- header ----------------------------------------------------------------------------------

function Header({ route }) {
  const [value, setValue] = useState(token());
  const [saved, setSaved] = useState(false);
  const save = (event) => {
    event.preventDefault();
    if (value) sessionStorage.setItem(TOKEN_KEY, value); else sessionStorage.removeItem(TOKEN_KEY);
    setSaved(true);
    window.dispatchEvent(new HashChangeEvent("hashchange"));
  };
  const link = (href, label, active) => html`<a href=${href} class=${active ? "active" : ""}>${label}</a>`;
  return html`<header class="top">
    <a class="brand" href="#/">odfd</a>
    <nav>
      ${link("#/", "Datasets", route.page === "datasets" || route.page === "dataset")}
      ${link("#/mirrors", "Mirrors", route.page === "mirrors")}
      ${link("#/resources", "Resources", route.page === "resources")}
      ${link("#/node", "Node", route.page === "node")}
    </nav>
    <form class="token" onSubmit=${save}>
      <label for="token">Token</label>
      <input id="token" type="password" autocomplete="off" value=${value}
        onInput=${(e) => { setValue(e.target.value); setSaved(false); }} />
      <button type="submit" class="secondary" id="token-save">${saved ? "Saved" : "Use"}</button>
    </form>
  </header>`;
}

// --- datasets list ---------------------------------------------------------------------------

const PAGE = 100;

function mirrorCell(d) {
  if (!d.mirrorOf) return html`<span class="muted">local</span>`;
  const sync = d.lastSync;
  return html`<span title=${d.mirrorOf}>
    ${sync ? statusPill(sync.outcome) : html`<${Pill}>never synced<//>`}
    ${" "}${d.lagBlocks === null || d.lagBlocks === undefined ? "" : `lag ${d.lagBlocks}`}
  </span>`;
}

function DatasetsPage() {
  const [query, setQuery] = useState("");
  const [offset, setOffset] = useState(0);
  const [debounced, setDebounced] = useState("");
  useEffect(() => {
    const timer = setTimeout(() => { setDebounced(query); setOffset(0); }, 200);
    return () => clearTimeout(timer);
  }, [query]);
  const { data, error, loading } = useApi(`datasets?q=${enc(debounced)}&offset=${offset}&limit=${PAGE}`);
  return html`<main>
    <h1>Datasets</h1>
    <input type="search" id="dataset-search" placeholder="Search by name…" value=${query}
      onInput=${(e) => setQuery(e.target.value)} />
    <${Error_} message=${error} />
    ${loading && !data ? html`<${Loading} />` : null}
    ${data ? html`
      <p class="muted" id="dataset-count">${data.total} dataset${data.total === 1 ? "" : "s"}</p>
      <table class="grid" id="datasets">
        <thead><tr><th>Name</th><th>Kind</th><th>Head</th><th class="num">Blocks</th>
          <th class="num">Records</th><th class="num">Size</th><th>Last update</th><th>Mirror</th><th>Audit</th><th>IPNS</th></tr></thead>
        <tbody>${data.datasets.map((d) => html`<tr class="dataset-row" data-alias=${d.alias}>
          <td><a class="dataset-link" href=${datasetHref(d.alias)}>${d.alias}</a>
            ${d.private ? html` <${Pill} kind="warn">private<//>` : null}
            ${d.withheld ? html` <${Pill} kind="bad">withheld<//>` : null}</td>
          <td>${d.kind}</td>
          <td class="mono" title=${d.head || ""}>${shortHash(d.head)}</td>
          <td class="num">${d.blocks}</td>
          <td class="num">${d.records.toLocaleString()}</td>
          <td class="num">${bytes(d.size)}</td>
          <td title=${d.lastUpdate || ""}>${ago(d.lastUpdate)}</td>
          <td>${mirrorCell(d)}</td>
          <td>${d.lastAudit ? statusPill(d.lastAudit.status) : html`<span class="muted">–</span>`}</td>
          <td class="ipns" title=${d.ipns ? d.ipns.name : ""}>${d.ipns ? html`<span class="mono">${shortHash(d.ipns.name)}</span>
            <span class="muted" title=${d.ipns.lastRepublished || ""}> · ${d.ipns.lastRepublished ? `republished ${ago(d.ipns.lastRepublished)}` : "never republished"}</span>` : html`<span class="muted">–</span>`}</td>
        </tr>`)}</tbody>
      </table>
      <div class="pager">
        <button class="secondary" disabled=${offset === 0} onClick=${() => setOffset(Math.max(0, offset - PAGE))}>Previous</button>
        <span class="muted">${data.total ? `${offset + 1}–${offset + data.datasets.length} of ${data.total}` : ""}</span>
        <button class="secondary" disabled=${offset + PAGE >= data.total} onClick=${() => setOffset(offset + PAGE)}>Next</button>
      </div>` : null}
  </main>`;
}

// --- one dataset -----------------------------------------------------------------------------

const TABS = ["overview", "data", "metadata", "lineage", "history", "audits"];

function DatasetPage({ alias, tab }) {
  const { data, error } = useApi(`datasets/${enc(alias)}`);
  const [notice, setNotice] = useState(null);
  const [actionError, setActionError] = useState(null);
  const audit = async () => {
    setNotice(null); setActionError(null);
    try {
      const result = await api(`datasets/${enc(alias)}/audit`, { method: "POST", body: { scope: "integrity" } });
      setNotice(`Audit of ${result.queued} queued (${result.scope}).`);
    } catch (e) { setActionError(e.message); }
  };
  if (error) return html`<main><h1>${alias}</h1><${Error_} message=${error} /></main>`;
  if (!data) return html`<main><h1>${alias}</h1><${Loading} /></main>`;
  return html`<main>
    <h1 id="dataset-title">${data.alias} <${Pill}>${data.kind}<//>
      ${data.private ? html` <${Pill} kind="warn">private<//>` : null}
      ${data.withheld ? html` <${Pill} kind="bad">withheld<//>` : null}</h1>
    <div class="row-actions"><button class="secondary" id="audit-now" onClick=${audit}>Audit now</button></div>
    <${Error_} message=${actionError} />
    ${notice ? html`<div class="notice" role="status">${notice}</div>` : null}
    <nav class="tabs">${TABS.map((t) => html`<a id=${`tab-${t}`} class=${t === tab ? "active" : ""} href=${datasetHref(alias, t)}>${t}</a>`)}</nav>
    ${tab === "overview" ? html`<${Overview} data=${data} />` : null}
    ${tab === "data" ? html`<${DataTab} alias=${alias} />` : null}
    ${tab === "metadata" ? html`<${MetadataTab} alias=${alias} />` : null}
    ${tab === "lineage" ? html`<${LineageTab} alias=${alias} />` : null}
    ${tab === "history" ? html`<${HistoryTab} alias=${alias} />` : null}
    ${tab === "audits" ? html`<${AuditsTab} alias=${alias} />` : null}
  </main>`;
}

function Overview({ data }) {
  const schema = data.schema;
  return html`<div id="overview">
    <div class="card"><dl class="facts">
      <dt>Name</dt><dd id="fact-name">${data.alias}</dd>
      <dt>ID</dt><dd class="mono" id="fact-id">${data.id}</dd>
      <dt>Kind</dt><dd>${data.kind}</dd>
      <dt>Head</dt><dd class="mono">${data.head || "–"}</dd>
      <dt>Blocks</dt><dd>${data.blocks}</dd>
      <dt>Records</dt><dd id="fact-records">${data.records.toLocaleString()}</dd>
      <dt>Size</dt><dd>${bytes(data.size)}</dd>
      <dt>Last update</dt><dd>${data.lastUpdate || "–"}</dd>
      <dt>Description</dt><dd id="fact-description">${data.description || html`<span class="muted">none</span>`}</dd>
      ${data.keywords.length ? html`<dt>Keywords</dt><dd>${data.keywords.join(", ")}</dd>` : null}
      <dt>License</dt><dd id="fact-license">${data.license
        ? html`<a href=${data.license.websiteUrl} rel="noreferrer">${data.license.name}</a> (${data.license.spdxId || data.license.shortName})`
        : html`<span class="muted">none</span>`}</dd>
      ${data.status && data.status.mirrorOf ? html`<dt>Mirror of</dt><dd class="mono">${data.status.mirrorOf}</dd>` : null}
    </dl></div>
    ${data.readme ? html`<h2>Readme</h2><div class="card readme" id="readme">${data.readme}</div>` : null}
    <h2>Schema</h2>
    ${schema.arrow
      ? html`<div class="card" id="schema"><${Table} columns=${["Column", "Arrow type", "Nullable"]}
          rows=${schema.arrow.map((f) => [f.name, f.type, f.nullable ? "yes" : "no"])} />
          <details><summary>DDL</summary><pre class="mono">${schema.ddl}</pre></details>
          ${schema.odf ? html`<details><summary>ODF schema (JSON)</summary><pre class="mono">${JSON.stringify(schema.odf, null, 2)}</pre></details>` : null}
        </div>`
      : html`<p class="muted">No schema yet: no data was added.</p>`}
    ${data.transforms.length ? html`<h2>Transform</h2>${data.transforms.map((t) => html`<div class="card transform">
        <div class="muted">block ${t.sequenceNumber} · engine ${t.engine} · inputs ${t.inputs.join(", ")} · ${t.blocks.length} transaction(s)</div>
        ${t.queries.map((q) => html`<div>${q.alias ? html`<b>${q.alias}</b>` : null}<pre class="mono">${q.query}</pre></div>`)}
      </div>`)}` : null}
  </div>`;
}

// The signed answer behind the rows shown: who signed it, what it commits to, and the whole
// document to save and check with `odfd sql --verify FILE` (or any node's /verify).
function AnswerProof({ answer }) {
  const { commitment, proof, input } = answer;
  return html`<details class="card" id="sql-proof">
    <summary>Proof: signed by <code id="sql-proof-signer">${proof.verificationMethod}</code></summary>
    <dl class="facts">
      <dt>Input hash</dt><dd class="mono">${commitment.inputHash}</dd>
      <dt>Output hash</dt><dd class="mono" id="sql-proof-output">${commitment.outputHash}</dd>
      <dt>Sub-queries hash</dt><dd class="mono">${commitment.subQueriesHash}</dd>
      ${(input.datasets || []).map((d) => html`<dt>${d.alias}</dt><dd class="mono">at block ${d.blockHash}</dd>`)}
      <dt>Signature</dt><dd class="mono">${proof.type}: ${proof.proofValue}</dd>
    </dl>
    <p class="muted">Save the answer below and check it with <code>odfd sql --verify FILE</code> (add <code>--remote URL</code> to have another node re-execute it).</p>
    <pre class="mono" id="sql-proof-json">${JSON.stringify(answer, null, 2)}</pre>
  </details>`;
}

function DataTab({ alias }) {
  const [offset, setOffset] = useState(0);
  const limit = 50;
  const { data, error } = useApi(`datasets/${enc(alias)}/data?offset=${offset}&limit=${limit}`);
  // DataFusion SQL, as `odfd sql` runs it: names are quoted with double quotes.
  const quoted = '"' + alias.replace(/"/g, '""') + '"';
  const [sql, setSql] = useState(`SELECT * FROM ${quoted} ORDER BY "offset" DESC LIMIT 10`);
  const [result, setResult] = useState(null);
  const [sqlError, setSqlError] = useState(null);
  const [running, setRunning] = useState(false);
  const [withProof, setWithProof] = useState(false);
  const [selected, setSelected] = useState(null);
  const run = async (event) => {
    event.preventDefault();
    setRunning(true); setSqlError(null); setResult(null);
    try { setResult(await api("sql", { method: "POST", body: { query: sql, proof: withProof } })); }
    catch (e) { setSqlError(e.message); }
    setRunning(false);
  };
  return html`<div>
    <h2>SQL</h2>
    <form onSubmit=${run} class="card">
      <textarea id="sql-query" value=${sql} onInput=${(e) => setSql(e.target.value)}></textarea>
      <div class="pager"><button type="submit" id="sql-run" disabled=${running}>${running ? "Running…" : "Run"}</button>
        <label class="muted"><input type="checkbox" id="sql-with-proof" checked=${withProof} onChange=${(e) => setWithProof(e.target.checked)} /> with proof</label>
        <span class="muted" id="sql-help">DataFusion SQL, as <code>odfd sql</code> runs it: quote names with "double quotes". Needs a read or admin token.</span></div>
    </form>
    <${Error_} message=${sqlError} />
    ${result ? html`<div id="sql-result"><p class="muted">${result.rows.length} row(s)${result.truncated ? " (truncated)" : ""} in ${result.ms} ms (${result.engine})</p>
      <${Table} columns=${result.columns} rows=${result.rows} />
      ${result.answer ? html`<${AnswerProof} answer=${result.answer} />` : null}</div>` : null}
    <h2>Latest rows</h2>
    <${Error_} message=${error} />
    ${selected !== null ? html`<${RowDetail} alias=${alias} offset=${selected} onClose=${() => setSelected(null)} />` : null}
    ${data ? html`<div id="rows">
      ${data.rows.length ? html`<p class="muted">Click a row for its provenance.</p><${Table} columns=${data.columns} rows=${data.rows}
          onRow=${(row) => setSelected(row[Math.max(0, data.columns.indexOf("offset"))])} />` : html`<p class="muted">No rows.</p>`}
      <div class="pager">
        <button class="secondary" disabled=${offset === 0} onClick=${() => setOffset(Math.max(0, offset - limit))}>Newer</button>
        <span class="muted">${data.total ? `rows ${offset + 1}–${offset + data.rows.length} of ${data.total}, newest first` : ""}</span>
        <button class="secondary" disabled=${offset + limit >= data.total} onClick=${() => setOffset(offset + limit)}>Older</button>
      </div></div>` : html`<${Loading} />`}
  </div>`;
}

// A row's detail: why it exists (odfd provenance), each answer checked by re-execution.
function RowDetail({ alias, offset, onClose }) {
  const { data, error } = useApi(`datasets/${enc(alias)}/provenance?offset=${offset}`);
  return html`<div class="card" id="row-detail">
    <div class="pager"><b>Row ${offset} of ${alias}</b><button class="secondary" onClick=${onClose}>Close</button></div>
    <${Error_} message=${error} />
    ${data ? html`<p class="muted" id="provenance-checked">Witness rows below, checked by re-execution:
        the transform, re-run on them alone, gives this row again.</p>
      <ul class="provenance">${html`<${ProvenanceRow} row=${data.row} />`}</ul>`
      : error ? null : html`<${Loading} />`}
  </div>`;
}

function ProvenanceRow({ row }) {
  const values = Object.entries(row.values || {}).filter(([k]) => !["offset", "op", "system_time"].includes(k));
  const copies = Object.entries(row.columns || {});
  return html`<li class="provenance-row" data-dataset=${row.dataset} data-offset=${row.offset}>
    <a href=${datasetHref(row.dataset)}>${row.dataset}</a> offset ${row.offset}
    <span class="muted"> · block ${row.block.sequenceNumber} ${shortHash(row.block.hash)}</span>
    ${row.checked ? html` <${Pill} kind="ok">checked<//>` : null}
    <div class="mono">${values.map(([k, v]) => `${k}=${v}`).join(", ")}</div>
    ${copies.length ? html`<div class="muted">columns: ${copies.map(([out, src]) => `${out} ← ${src}`).join(", ")}</div>` : null}
    ${row.ingest ? html`<div class="muted ingest">ingested: ${row.ingest.source}${row.ingest.sourceState
        ? ` (${row.ingest.sourceState.kind} ${row.ingest.sourceState.value})` : ""} at ${row.ingest.systemTime}</div>` : null}
    ${row.derived && !row.traced ? html`<div class="muted">not traced further</div>` : null}
    ${row.inputs && row.inputs.length ? html`<ul>${row.inputs.map((w) => html`<${ProvenanceRow} row=${w} />`)}</ul>` : null}
  </li>`;
}

function MetadataTab({ alias }) {
  const [blocks, setBlocks] = useState([]);
  const [error, setError] = useState(null);
  const [done, setDone] = useState(false);
  const more = useCallback(async (reset) => {
    const before = !reset && blocks.length ? `&before=${blocks[blocks.length - 1].sequenceNumber}` : "";
    try {
      const page = await api(`datasets/${enc(alias)}/blocks?limit=50${before}`);
      setBlocks((old) => (reset ? page.blocks : old.concat(page.blocks)));
      setDone(page.blocks.length < 50);
    } catch (e) { setError(e.message); }
  }, [alias, blocks]);
  useEffect(() => { more(true); }, [alias]);
  return html`<div id="blocks">
    <${Error_} message=${error} />
    ${blocks.map((b) => html`<details class="block" data-sequence=${b.sequenceNumber}>
      <summary><b>#${b.sequenceNumber}</b> ${b.kind} <span class="muted">${b.systemTime}</span>
        ${b.records !== undefined ? html` <${Pill}>${b.records} records<//>` : null}
        <span class="mono muted"> ${shortHash(b.hash)}</span></summary>
      <pre class="mono block-yaml">${b.yaml}</pre>
    </details>`)}
    ${done ? null : html`<div class="pager"><button class="secondary" onClick=${() => more(false)}>Older blocks</button></div>`}
  </div>`;
}

function layoutLineage(graph) {
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: "LR", nodesep: 18, ranksep: 70, marginx: 12, marginy: 12 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const node of graph.nodes) {
    g.setNode(node.id, { width: Math.min(Math.max(node.alias.length * 7.5 + 28, 110), 300), height: 36 });
  }
  for (const edge of graph.edges) g.setEdge(edge.from, edge.to);
  dagre.layout(g);
  return g;
}

function LineageTab({ alias }) {
  const { data, error } = useApi(`datasets/${enc(alias)}/lineage`);
  if (error) return html`<${Error_} message=${error} />`;
  if (!data) return html`<${Loading} />`;
  const g = layoutLineage(data);
  const size = g.graph();
  const byId = Object.fromEntries(data.nodes.map((n) => [n.id, n]));
  const path = (points) => points.map((p, i) => `${i ? "L" : "M"}${p.x.toFixed(1)},${p.y.toFixed(1)}`).join(" ");
  return html`<div>
    <p class="legend muted"><span>Data flows left to right.</span><span>Blue: root dataset</span><span>Green: derivative</span><span>Dashed: not on this node</span></p>
    <svg class="lineage" id="lineage" width=${size.width} height=${size.height} viewBox=${`0 0 ${size.width} ${size.height}`}
      role="img" aria-label=${`Lineage of ${alias}`}>
      <defs><marker id="arrowhead" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto">
        <path d="M0,0L10,5L0,10z" fill="#7d8594" /></marker></defs>
      ${data.edges.map((e) => html`<path class="lineage-edge" data-from=${byId[e.from].alias} data-to=${byId[e.to].alias}
        d=${path(g.edge(e.from, e.to).points)} marker-end="url(#arrowhead)" />`)}
      ${data.nodes.map((n) => {
        const p = g.node(n.id);
        const classes = `lineage-node ${n.kind.toLowerCase()} ${n.id === data.root ? "current" : ""}`;
        const box = html`<rect x=${p.x - p.width / 2} y=${p.y - p.height / 2} width=${p.width} height=${p.height} rx="6" />
          <text x=${p.x} y=${p.y + 4} text-anchor="middle">${n.alias}</text><title>${n.id}</title>`;
        return n.kind === "Missing"
          ? html`<g class=${classes} data-alias=${n.alias}>${box}</g>`
          : html`<a href=${datasetHref(n.alias, "lineage")} class=${classes} data-alias=${n.alias}>${box}</a>`;
      })}
    </svg></div>`;
}

function HistoryTab({ alias }) {
  const { data, error } = useApi(`datasets/${enc(alias)}/history`);
  if (error) return html`<${Error_} message=${error} />`;
  if (!data) return html`<${Loading} />`;
  const points = data.points;
  if (!points.length) return html`<p class="muted">No data was added yet.</p>`;
  const width = Math.max(360, Math.min(1200, points.length * 28 + 80));
  const height = 240, left = 56, bottom = 40, top = 12;
  const max = Math.max(...points.map((p) => p.records), 1);
  const step = Math.min(48, (width - left - 10) / points.length);
  const y = (v) => top + (height - top - bottom) * (1 - v / max);
  const labelEvery = Math.ceil(points.length / 10);
  return html`<div>
    <p class="muted">Records added per block, oldest left.</p>
    <svg class="chart" id="history-chart" width=${width} height=${height} role="img" aria-label="Records added per block">
      <line class="axis" x1=${left} y1=${y(0)} x2=${width - 10} y2=${y(0)} />
      <line class="axis" x1=${left} y1=${top} x2=${left} y2=${y(0)} />
      <text x=${left - 6} y=${top + 4} text-anchor="end">${max}</text>
      <text x=${left - 6} y=${y(0)} text-anchor="end">0</text>
      ${points.map((p, i) => html`<g>
        <rect class="bar" data-records=${p.records} x=${left + i * step + 2} y=${y(p.records)} width=${Math.max(step - 4, 2)} height=${y(0) - y(p.records)}>
          <title>block ${p.sequenceNumber} at ${p.systemTime}: ${p.records} records</title></rect>
        ${i % labelEvery === 0 ? html`<text x=${left + i * step + step / 2} y=${height - bottom + 14} text-anchor="middle">#${p.sequenceNumber}</text>
          <text x=${left + i * step + step / 2} y=${height - bottom + 28} text-anchor="middle">${(p.systemTime || "").slice(0, 10)}</text>` : null}
      </g>`)}
    </svg></div>`;
}

function Findings({ report }) {
  const findings = [];
  for (const dataset of report.datasets || []) {
    for (const [layer, result] of Object.entries(dataset.layers || {})) {
      for (const f of result.findings || []) findings.push({ layer, dataset: dataset.alias, ...f });
    }
  }
  if (!findings.length) return html`<p class="muted">No findings.</p>`;
  return html`${findings.map((f) => html`<div class="finding card">
    <div>${statusPill(f.status)} <b>${f.rule}</b> <span class="muted">${f.dataset} · ${f.layer}${f.block ? ` · block ${f.block.sequenceNumber}` : ""}</span></div>
    <p>${f.message}</p>
    ${f.expected || f.actual ? html`<dl class="facts"><dt>expected</dt><dd class="mono">${f.expected}</dd><dt>actual</dt><dd class="mono">${f.actual}</dd></dl>` : null}
    ${f.details && f.details.sample ? html`<${RowDiff} sample=${f.details.sample} />` : null}
  </div>`)}`;
}

function RowDiff({ sample }) {
  const side = (title, rows) => (rows && rows.length
    ? html`<h3>${title}</h3><${Table} className="row-diff" columns=${Object.keys(rows[0])} rows=${rows.map((r) => Object.values(r))} />`
    : null);
  if (sample.unavailable) return html`<p class="muted">Row diff unavailable: ${sample.unavailable}</p>`;
  return html`<div class="diff">${side("Recorded only", sample.recordedOnly)}${side("Recomputed only", sample.recomputedOnly)}
    ${sample.columnsDiffer ? html`<pre class="mono">${JSON.stringify(sample.columnsDiffer, null, 2)}</pre>` : null}</div>`;
}

function AuditsTab({ alias }) {
  const { data, error } = useApi(`datasets/${enc(alias)}/audits`);
  if (error) return html`<${Error_} message=${error} />`;
  if (!data) return html`<${Loading} />`;
  if (!data.audits.length) return html`<p class="muted" id="no-audits">No audit has run on this dataset yet.</p>`;
  return html`<div id="audits">${data.audits.map((a) => html`<details class="card audit" open=${a.status !== "ok"}>
    <summary>${statusPill(a.status)} ${a.scope} audit, ${a.trigger} · <span title=${a.finishedAt}>${ago(a.finishedAt)}</span> · ${a.summary}</summary>
    ${a.report ? html`<${Findings} report=${a.report} />` : html`<p class="muted">The audit could not run.</p>`}
  </details>`)}</div>`;
}

// --- mirrors and node ------------------------------------------------------------------------

function MirrorsPage() {
  const { data, error, reload } = useApi("mirrors");
  const [notice, setNotice] = useState(null);
  const [actionError, setActionError] = useState(null);
  const sync = async (name) => {
    setNotice(null); setActionError(null);
    try {
      const result = await api(`mirrors/${enc(name)}/sync`, { method: "POST", body: {} });
      setNotice(`Sync of ${result.queued} queued.`);
      setTimeout(reload, 1500);
    } catch (e) { setActionError(e.message); }
  };
  return html`<main>
    <h1>Mirrors</h1>
    <${Error_} message=${error || actionError} />
    ${notice ? html`<div class="notice" role="status" id="action-notice">${notice}</div>` : null}
    ${data ? (data.mirrors.length ? html`<table class="grid" id="mirrors">
      <thead><tr><th>Name</th><th>Source</th><th>State</th><th class="num">Lag</th><th>Last sync</th>
        <th>Last success</th><th>Next attempt</th><th class="num">Failures</th><th>Last error</th><th></th></tr></thead>
      <tbody>${data.mirrors.map((m) => html`<tr class="mirror-row" data-name=${m.name}>
        <td><a href=${datasetHref(m.name)}>${m.name}</a></td>
        <td class="mono wrap">${m.source}</td>
        <td>${m.paused ? html`<${Pill}>paused<//>` : statusPill(m.lastOutcome || "new")}</td>
        <td class="num">${m.lagBlocks ?? "–"}</td>
        <td title=${m.lastAttemptAt || ""}>${ago(m.lastAttemptAt)}</td>
        <td title=${m.lastSuccessAt || ""}>${ago(m.lastSuccessAt)}</td>
        <td title=${m.nextRunAt || ""}>${m.paused ? "–" : ago(m.nextRunAt)}${m.consecutiveFailures ? html` <span class="muted">(backing off after ${m.consecutiveFailures} failure(s); every ${m.every})</span>` : html` <span class="muted">(every ${m.every})</span>`}</td>
        <td class="num">${m.consecutiveFailures}</td>
        <td class="mono wrap">${m.lastError || ""}</td>
        <td class="nowrap"><button class="secondary sync-now" onClick=${() => sync(m.name)}>Sync now</button></td>
      </tr>`)}</tbody></table>` : html`<p class="muted">No mirrors are configured (<span class="mono">odfd mirror add</span>).</p>`)
      : html`<${Loading} />`}
    ${data && !data.daemon.running ? html`<p class="muted">No daemon runs on this workspace: the schedule shown is the one stored in the catalog.</p>` : null}
  </main>`;
}

// --- resources, flow runs, webhook deliveries --------------------------------------------------

function phasePill(phase) {
  const kind = { Ready: "ok", Failed: "bad" }[phase] || "warn";
  return html`<${Pill} kind=${kind}>${phase || "?"}<//>`;
}

function statePill(state) {
  const kind = { succeeded: "ok", delivered: "ok", failed: "bad" }[state] || "warn";
  return html`<${Pill} kind=${kind}>${state}<//>`;
}

function conditionText(conditions) {
  return Object.entries(conditions)
    .map(([key, c]) => `${key}: ${c.status || c.code || c.value || ""}${c.message ? ` (${c.message})` : ""}`)
    .join("; ");
}

function ResourcesPage() {
  const resources = useApi("resources");
  const runs = useApi("flowruns");
  const deliveries = useApi("webhookdeliveries");
  return html`<main id="resources-page">
    <h1>Resources</h1>
    <${Error_} message=${resources.error} />
    ${resources.data ? (resources.data.resources.length ? html`<table class="grid" id="resources">
      <thead><tr><th>Kind</th><th>Name</th><th>Phase</th><th class="num">Generation</th><th class="num">Observed</th><th>Conditions</th><th>Updated</th></tr></thead>
      <tbody>${resources.data.resources.map((r) => html`<tr class="resource-row" data-kind=${r.kind} data-name=${r.name}>
        <td>${r.kind}</td><td class="mono">${r.name}</td><td class="phase">${phasePill(r.phase)}</td>
        <td class="num">${r.generation}</td><td class="num">${r.observedGeneration ?? "–"}</td>
        <td class="wrap conditions">${conditionText(r.conditions)}</td>
        <td title=${r.updatedAt}>${ago(r.updatedAt)}</td>
      </tr>`)}</tbody></table>` : html`<p class="muted">No resources (<span class="mono">odfd apply -f FILE</span>).</p>`)
      : resources.error ? null : html`<${Loading} />`}
    <h2>Flow runs</h2>
    <${Error_} message=${runs.error} />
    ${runs.data ? (runs.data.runs.length ? html`<table class="grid" id="flow-runs">
      <thead><tr><th class="num">Run</th><th>Flow</th><th>Trigger</th><th>State</th><th>Started</th><th>Finished</th><th>Error</th></tr></thead>
      <tbody>${runs.data.runs.map((r) => html`<tr class="run-row" data-flow=${r.flowName}>
        <td class="num">${r.runId}</td><td class="mono">${r.flowName}</td><td>${r.trigger}</td>
        <td class="state">${statePill(r.state)}</td>
        <td title=${r.startedAt}>${ago(r.startedAt)}</td><td title=${r.finishedAt || ""}>${ago(r.finishedAt)}</td>
        <td class="mono wrap">${r.error || ""}</td>
      </tr>`)}</tbody></table>` : html`<p class="muted">No flow has run yet.</p>`)
      : runs.error ? null : html`<${Loading} />`}
    <h2>Webhook deliveries</h2>
    <${Error_} message=${deliveries.error} />
    ${deliveries.data ? (deliveries.data.deliveries.length ? html`<table class="grid" id="webhook-deliveries">
      <thead><tr><th>Message</th><th>Target</th><th>Event</th><th>State</th><th class="num">Attempts</th><th class="num">HTTP</th><th>Created</th><th>Error</th></tr></thead>
      <tbody>${deliveries.data.deliveries.map((d) => html`<tr class="delivery-row" data-target=${d.targetName}>
        <td class="mono">${d.messageId}</td><td class="mono">${d.targetName}</td><td>${d.eventType}</td>
        <td class="state">${statePill(d.state)}</td>
        <td class="num">${d.attempts}</td><td class="num">${d.lastStatus ?? "–"}</td>
        <td title=${d.createdAt}>${ago(d.createdAt)}</td><td class="mono wrap">${d.error || ""}</td>
      </tr>`)}</tbody></table>` : html`<p class="muted">No webhook deliveries yet.</p>`)
      : deliveries.error ? null : html`<${Loading} />`}
  </main>`;
}

function NodePage() {
  const { data, error } = useApi("node");
  if (error) return html`<main><h1>Node</h1><${Error_} message=${error} /></main>`;
  if (!data) return html`<main><h1>Node</h1><${Loading} /></main>`;
  const d = data.daemon;
  return html`<main id="node">
    <h1>Node</h1>
    <div class="card"><dl class="facts">
      <dt>Workspace</dt><dd class="mono">${data.workspace}</dd>
      <dt>Daemon</dt><dd id="node-daemon">${d.running ? `running (pid ${d.pid}) since ${d.startedAt}; syncs ${d.syncsRunning} running, ${d.syncsQueued} queued; audits ${d.auditsQueued} queued` : "not running"}</dd>
      <dt>Datasets</dt><dd>${data.datasets} (${data.served.length} served${data.withheld.length ? `, ${data.withheld.length} withheld: ${data.withheld.join(", ")}` : ""})</dd>
      <dt>Mirrors</dt><dd>${data.mirrors}</dd>
      <dt>Your token</dt><dd>${data.tokens.admin ? "admin" : data.tokens.read ? "read" : "none (public view)"}</dd>
    </dl></div>
    <h2>IPFS node</h2>
    <div class="card" id="ipfs"><dl class="facts">
      <dt>API</dt><dd class="mono">${data.ipfs.api}</dd>
      <dt>State</dt><dd>${data.ipfs.online ? html`<${Pill} kind="ok">online<//> ${data.ipfs.agent} <span class="mono">${data.ipfs.peerId}</span>` : html`<${Pill} kind="warn">offline<//> <span class="muted">${data.ipfs.error}</span>`}</dd>
    </dl></div>
    <h2>Engines</h2>
    <${Table} columns=${["Engine", "Version", "Master", "Running"]} rows=${data.engines.map((e) => [e.name, e.version, e.master, e.running ? "yes" : "no"])} />
    <h2>Served datasets</h2>
    <p>${data.served.map((alias, i) => html`${i ? ", " : ""}<a href=${datasetHref(alias)}>${alias}</a>`)}</p>
    <h2>Metrics</h2>
    ${data.metrics.length ? html`<table class="grid" id="metrics"><thead><tr><th>Metric</th><th>Labels</th><th class="num">Value</th></tr></thead>
      <tbody>${data.metrics.map((m) => html`<tr title=${m.help}><td class="mono">${m.name}</td>
        <td class="mono">${Object.entries(m.labels).map(([k, v]) => `${k}=${v}`).join(" ")}</td><td class="num">${m.value}</td></tr>`)}</tbody></table>`
      : html`<p class="muted">Metrics come from the daemon (none runs here).</p>`}
  </main>`;
}

// --- routing ---------------------------------------------------------------------------------

function parseRoute() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  if (parts[0] === "datasets" && parts[1]) {
    return { page: "dataset", alias: parts[1], tab: TABS.includes(parts[2]) ? parts[2] : "overview" };
  }
  if (parts[0] === "mirrors") return { page: "mirrors" };
  if (parts[0] === "resources") return { page: "resources" };
  if (parts[0] === "node") return { page: "node" };
  return { page: "datasets" };
}

function App() {
  const [route, setRoute] = useState(parseRoute());
  const [generation, setGeneration] = useState(0);
  useEffect(() => {
    const changed = () => { setRoute(parseRoute()); setGeneration((g) => g + 1); };
    window.addEventListener("hashchange", changed);
    return () => window.removeEventListener("hashchange", changed);
  }, []);
  let page;
  if (route.page === "dataset") page = html`<${DatasetPage} key=${`${route.alias}/${generation}`} alias=${route.alias} tab=${route.tab} />`;
  else if (route.page === "mirrors") page = html`<${MirrorsPage} key=${generation} />`;
  else if (route.page === "node") page = html`<${NodePage} key=${generation} />`;
  else if (route.page === "resources") page = html`<${ResourcesPage} key=${generation} />`;
  else page = html`<${DatasetsPage} key=${generation} />`;
  return html`<${Header} route=${route} />${page}`;
}

takeTokenFromUrl();
const mount = document.getElementById("app");
mount.textContent = "";
render(html`<${App} />`, mount);
