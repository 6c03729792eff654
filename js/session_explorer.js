// pi_nb session explorer — the front end of pi_nb.notebook.widget.SessionExplorer.
//
// A plain ES module for anywidget (>= 0.9): no build step, no imports. Three panels:
//   (a) the session tree (collapsible, long chains folded, current path highlighted),
//   (b) the live projection (what the model sees next, with greyed explanations),
//   (c) the token bar (usage against W − R and W).
// Rows are virtualized (only the visible window is in the DOM), built with
// DocumentFragments, and every panel uses one delegated listener.

const ROW_H = 24; // px, must match .pinb-row height in the CSS
const OVERSCAN = 16; // rows rendered above/below the viewport
const CHAIN_MAX = 8; // a linear run longer than this folds (off the current path)
const CHAIN_KEEP = 2; // rows kept at each end of a folded run
const LARGE_TREE = 500; // above this, branches off the current path start collapsed
const EDITABLE = new Set(["user", "assistant", "toolResult", "custom"]);

const ROLE_LABEL = {
  user: "user",
  assistant: "assistant",
  toolResult: "tool",
  bashExecution: "bash",
  system: "system",
  custom: "custom",
  compactionSummary: "summary",
  branchSummary: "branch sum.",
  summary: "summaries",
  overhead: "system prompt + tool declarations",
};
const KIND_LABEL = {
  compaction: "compaction",
  branch_summary: "branch summary",
  context_edit: "edit",
  label: "label",
  model_change: "model",
  thinking_level_change: "thinking",
  session_info: "name",
  custom: "custom",
  custom_message: "custom msg",
  usage: "usage",
};

const nf = new Intl.NumberFormat("en-US");
const fmt = (n) => (typeof n === "number" ? nf.format(n) : n == null ? "–" : String(n));

function h(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text != null) node.textContent = text;
  return node;
}

const SKELETON = `
  <div class="pinb-head">
    <span class="pinb-logo" aria-hidden="true"></span>
    <span class="pinb-title">Session explorer</span>
    <span class="pinb-meta"></span>
  </div>
  <div class="pinb-tokens"></div>
  <div class="pinb-panels">
    <section class="pinb-panel pinb-tree-panel">
      <header><span class="pinb-ptitle">History</span><span class="pinb-psub pinb-tree-sub"></span>
        <span class="pinb-tools">
          <button class="pinb-link" data-tool="expand" title="Expand every branch and chain">expand all</button>
          <button class="pinb-link" data-tool="collapse" title="Back to the default folding">reset</button>
          <button class="pinb-link" data-tool="leaf" title="Scroll to the leaf">leaf</button>
        </span>
      </header>
      <div class="pinb-scroll pinb-tree" tabindex="0" role="tree" aria-label="Session tree">
        <div class="pinb-spacer"><div class="pinb-rows"></div></div>
      </div>
    </section>
    <section class="pinb-panel pinb-ctx-panel">
      <header><span class="pinb-ptitle">Next model call</span><span class="pinb-psub pinb-ctx-sub"></span></header>
      <div class="pinb-scroll pinb-ctx" tabindex="0" aria-label="Projected context">
        <div class="pinb-spacer"><div class="pinb-rows"></div></div>
      </div>
    </section>
  </div>
  <div class="pinb-actions">
    <div class="pinb-selected"></div>
    <div class="pinb-buttons">
      <span class="pinb-group">
        <button class="pinb-btn pinb-primary" data-act="branch" title="Move the leaf to the selected entry; the next message starts a new branch there">Branch here</button>
        <label class="pinb-check" title="Write a summary of the branch being left (needs a model)"><input type="checkbox" data-field="summarize"> summarize abandoned branch</label>
      </span>
      <span class="pinb-group">
        <button class="pinb-btn" data-act="omit" title="Append a context edit that drops this message from the context (history is kept)">Omit message</button>
        <button class="pinb-btn" data-act="replace" title="Append a context edit that replaces this message's content">Replace…</button>
        <button class="pinb-btn" data-act="pin" title="Pin this message: every later compaction keeps it verbatim">Pin</button>
      </span>
      <span class="pinb-group">
        <button class="pinb-btn" data-act="compact" title="Summarize older history into a compaction checkpoint">Compact</button>
        <button class="pinb-btn" data-act="preview" title="Show what a compaction would produce, without writing it">Preview compaction</button>
        <input class="pinb-input pinb-focus" data-field="focus" placeholder="summary focus (optional)" aria-label="Summary focus">
      </span>
    </div>
    <div class="pinb-replace" hidden>
      <textarea class="pinb-input" rows="3" data-field="replacement" placeholder="New content the model will see instead"></textarea>
      <div class="pinb-replace-btns">
        <button class="pinb-btn pinb-primary" data-act="replace-apply">Apply edit</button>
        <button class="pinb-btn" data-act="replace-cancel">Cancel</button>
      </div>
    </div>
  </div>
  <div class="pinb-preview" hidden>
    <div class="pinb-preview-head"><span class="pinb-preview-title"></span>
      <button class="pinb-link" data-act="discard-preview">discard</button></div>
    <pre class="pinb-preview-body"></pre>
  </div>
  <div class="pinb-status" role="status" aria-live="polite"></div>
`;

// --- the tree model ----------------------------------------------------------------------

function indexTree(rows) {
  const n = rows.length;
  const index = new Map();
  for (let i = 0; i < n; i++) index.set(rows[i].id, i);
  const parent = new Int32Array(n).fill(-1);
  const kids = new Array(n);
  const roots = [];
  for (let i = 0; i < n; i++) {
    const p = rows[i].parent;
    const pi = p == null ? undefined : index.get(p);
    if (pi === undefined || pi === i) roots.push(i);
    else {
      parent[i] = pi;
      (kids[pi] || (kids[pi] = [])).push(i);
    }
  }
  // subtree sizes and "contains the current path", children after parents in file order
  const size = new Int32Array(n).fill(1);
  const hasPath = new Uint8Array(n);
  for (let i = n - 1; i >= 0; i--) {
    if (rows[i].on_path) hasPath[i] = 1;
    const p = parent[i];
    if (p >= 0 && p < i) {
      size[p] += size[i];
      if (hasPath[i]) hasPath[p] = 1;
    }
  }
  let leaf = -1;
  for (let i = 0; i < n; i++) if (rows[i].leaf) leaf = i;
  const t = { rows, index, parent, kids, roots, size, hasPath, leaf, large: n > LARGE_TREE };
  // At a fork, the "main" child continues at the same depth (the one holding the current
  // path, else the biggest subtree); the others are side branches, indented and foldable.
  t.main = new Int32Array(n).fill(-1);
  for (let i = 0; i < n; i++) if (kids[i] && kids[i].length > 1) t.main[i] = mainOf(t, kids[i]);
  t.mainRoot = roots.length ? mainOf(t, roots) : -1;
  return t;
}

function mainOf(t, list) {
  let best = list[list.length - 1];
  for (const c of list) {
    if (t.hasPath[c]) return c;
    if (t.size[c] > t.size[best]) best = c;
  }
  return best;
}

// Is node i a side branch (indented, foldable) rather than the main continuation?
function isSide(t, i) {
  const p = t.parent[i];
  if (p < 0) return t.roots.length > 1 && i !== t.mainRoot;
  return t.kids[p].length > 1 && t.main[p] !== i;
}

// A run = a maximal chain from `start` following single children.
function runFrom(t, start) {
  const run = [start];
  let i = start;
  while (t.kids[i] && t.kids[i].length === 1) {
    i = t.kids[i][0];
    run.push(i);
    if (run.length > t.rows.length) break; // cycle guard
  }
  return run;
}

// Flatten the tree into the visible items, honouring folds (explicit or default).
function flatten(t, open) {
  const items = [];
  const stack = [];
  const pushChildren = (list, main, depth) => {
    if (main >= 0) stack.push([main, depth, false]);
    for (let c = list.length - 1; c >= 0; c--) if (list[c] !== main) stack.push([list[c], depth + 1, true]);
  };
  pushChildren(t.roots, t.mainRoot, 0);
  while (stack.length) {
    const [start, depth, side] = stack.pop();
    const id = t.rows[start].id;
    if (side) {
      const key = "b:" + id;
      const isOpen = open.has(key) ? open.get(key) : !t.large || t.hasPath[start] === 1;
      if (!isOpen) {
        items.push({ i: start, depth, tw: "closed", key, hidden: t.size[start] - 1, side: true });
        continue;
      }
    }
    const run = runFrom(t, start);
    const rkey = "r:" + id;
    let folded = false;
    if (run.length > CHAIN_MAX) {
      // Default: fold runs off the current path; in large trees also runs of the path
      // that the model no longer sees (summarized by a compaction).
      let onPath = false;
      let live = false;
      for (const i of run) {
        const r = t.rows[i];
        if (r.on_path) onPath = true;
        if (r.in_context || r.leaf) { live = true; break; }
      }
      folded = open.has(rkey) ? !open.get(rkey) : !onPath || (t.large && !live);
    }
    const head = (k) => {
      const item = { i: run[k], depth };
      if (k === 0 && side) { item.tw = "open"; item.key = "b:" + id; item.side = true; }
      return item;
    };
    if (folded) {
      for (let k = 0; k < CHAIN_KEEP; k++) items.push(head(k));
      items.push({ gap: true, depth, key: rkey, count: run.length - 2 * CHAIN_KEEP, from: run[CHAIN_KEEP] });
      for (let k = run.length - CHAIN_KEEP; k < run.length; k++) items.push({ i: run[k], depth });
    } else {
      for (let k = 0; k < run.length; k++) {
        const item = head(k);
        if (k === 0 && run.length > CHAIN_MAX && open.get(rkey)) item.refold = rkey;
        items.push(item);
      }
    }
    const end = run[run.length - 1];
    const children = t.kids[end];
    if (children && children.length > 1) pushChildren(children, t.main[end], depth);
  }
  return items;
}

// Open every fold between the root and entry i, so it is visible.
function reveal(t, open, i) {
  let node = i;
  let guard = 0;
  while (node >= 0 && guard++ <= t.rows.length) {
    if (isSide(t, node)) open.set("b:" + t.rows[node].id, true);
    node = t.parent[node];
  }
  // the run holding i
  let s = i;
  guard = 0;
  while (t.parent[s] >= 0 && t.kids[t.parent[s]].length === 1 && guard++ <= t.rows.length) s = t.parent[s];
  open.set("r:" + t.rows[s].id, true);
}

// --- virtual list ------------------------------------------------------------------------

function virtualList(scroller, paintRow) {
  const spacer = scroller.querySelector(".pinb-spacer");
  const rowsEl = scroller.querySelector(".pinb-rows");
  let items = [];
  let frame = 0;
  const paint = () => {
    frame = 0;
    const height = scroller.clientHeight || 360;
    const first = Math.max(0, Math.floor(scroller.scrollTop / ROW_H) - OVERSCAN);
    const last = Math.min(items.length, Math.ceil((scroller.scrollTop + height) / ROW_H) + OVERSCAN);
    const frag = document.createDocumentFragment();
    for (let k = first; k < last; k++) {
      const row = paintRow(items[k], k);
      row.style.top = k * ROW_H + "px";
      frag.appendChild(row);
    }
    rowsEl.replaceChildren(frag);
  };
  const schedule = () => {
    if (!frame) frame = requestAnimationFrame(paint);
  };
  scroller.addEventListener("scroll", schedule, { passive: true });
  return {
    set(next) {
      items = next;
      spacer.style.height = Math.max(items.length * ROW_H, 1) + "px";
      paint();
    },
    repaint: paint,
    schedule,
    items: () => items,
    scrollTo(k) {
      const height = scroller.clientHeight || 360;
      const top = k * ROW_H;
      if (top < scroller.scrollTop || top + ROW_H > scroller.scrollTop + height) {
        scroller.scrollTop = Math.max(0, top - height / 2 + ROW_H / 2);
      }
      paint();
    },
    dispose() {
      scroller.removeEventListener("scroll", schedule);
      if (frame) cancelAnimationFrame(frame);
    },
  };
}

// --- rows --------------------------------------------------------------------------------

function roleChip(role) {
  const chip = h("span", "pinb-role pinb-r-" + (role || "none"), ROLE_LABEL[role] || role || "");
  return chip;
}

function badge(text, cls, title) {
  const b = h("span", "pinb-badge " + cls, text);
  if (title) b.title = title;
  return b;
}

function statusBadge(status) {
  return badge(status, "pinb-s-" + status, STATUS_HELP[status]);
}

const STATUS_HELP = {
  summary: "A compaction or branch summary the model reads instead of older history",
  kept: "Sent to the model verbatim",
  edited: "Sent with the content of a context edit",
  omitted: "Dropped by a context edit (still in the history)",
  summarized: "Replaced by the compaction summary (still in the history)",
};

function treeRow(t, item, selected) {
  if (item.gap) {
    const row = h("div", "pinb-row pinb-gap");
    row.dataset.key = item.key;
    row.appendChild(indent(item.depth));
    row.appendChild(h("span", "pinb-tw", "⋯"));
    row.appendChild(h("span", "pinb-text", `${fmt(item.count)} more entries — click to expand`));
    return row;
  }
  const r = t.rows[item.i];
  let cls = "pinb-row";
  if (r.on_path) cls += " pinb-path";
  if (r.leaf) cls += " pinb-leaf";
  if (r.id === selected) cls += " pinb-sel";
  if (r.status === "summarized") cls += " pinb-dim";
  if (r.status === "omitted") cls += " pinb-struck";
  const row = h("div", cls);
  row.dataset.i = item.i;
  row.setAttribute("role", "treeitem");
  row.appendChild(indent(item.depth));
  const tw = h("span", "pinb-tw", item.tw === "open" ? "▾" : item.tw === "closed" ? "▸" : "");
  if (item.key) tw.dataset.key = item.key;
  row.appendChild(tw);
  row.appendChild(h("span", "pinb-dot"));
  row.appendChild(h("span", "pinb-id", r.id));
  if (r.kind === "message" || r.kind === "custom_message") row.appendChild(roleChip(r.role));
  else row.appendChild(badge(KIND_LABEL[r.kind] || r.kind, "pinb-k-" + r.kind));
  let text = r.preview || "";
  if (r.kind === "context_edit") text = text.replace(/^context edit: /, "");
  else if (r.kind === "compaction") text = text.replace(/^compaction /, "");
  else if (r.kind === "branch_summary") text = text.replace(/^branch summary /, "");
  const span = h("span", "pinb-text", text);
  row.appendChild(span);
  if (r.status === "edited" || r.status === "omitted" || r.status === "summarized") row.appendChild(statusBadge(r.status));
  if (r.label) row.appendChild(badge("# " + r.label, "pinb-label", "label"));
  if (r.pinned) row.appendChild(badge("pinned", "pinb-pinned", "Pinned: every later compaction keeps this message verbatim"));
  if (r.leaf) row.appendChild(badge("leaf", "pinb-leafbadge", "The current leaf: the next message is appended here"));
  if (item.tw === "closed" && item.hidden) row.appendChild(badge("+" + fmt(item.hidden), "pinb-count", `${fmt(item.hidden)} hidden entries in this branch`));
  if (item.refold) {
    const fold = h("span", "pinb-tw pinb-refold", "fold");
    fold.dataset.key = item.refold;
    fold.dataset.refold = "1";
    row.appendChild(fold);
  }
  row.appendChild(h("span", "pinb-tok", r.tokens ? fmt(r.tokens) : ""));
  row.title = `${r.id} · ${r.kind}${r.role ? " · " + r.role : ""}${r.status ? " · " + r.status : ""}${r.tokens ? " · " + fmt(r.tokens) + " tok" : ""}`;
  return row;
}

function indent(depth) {
  const s = h("span", "pinb-indent");
  s.style.width = depth * 14 + "px";
  return s;
}

function ctxRow(item, selected) {
  const c = item.row;
  let cls = "pinb-row pinb-crow";
  if (!c.in_context) cls += " pinb-dim";
  if (c.status === "omitted") cls += " pinb-struck";
  if (item.sub) cls += " pinb-sub";
  if (c.id === selected && !item.group) cls += " pinb-sel";
  if (item.would) cls += " pinb-would";
  const row = h("div", cls);
  if (item.group) {
    row.dataset.group = "1";
    row.classList.add("pinb-group-row");
    row.appendChild(h("span", "pinb-tw", item.open ? "▾" : "▸"));
    row.appendChild(statusBadge("summarized"));
    row.appendChild(h("span", "pinb-text", `${fmt(c.count)} earlier entries replaced by the summary of ${c.compaction}`));
    row.appendChild(h("span", "pinb-tok", fmt(c.tokens)));
    row.title = `These entries are still in the history but the model reads the compaction summary instead (${fmt(c.tokens_before)} tokens before compacting).`;
    return row;
  }
  row.dataset.id = c.id;
  row.appendChild(h("span", "pinb-idx", c.index == null ? "" : String(c.index)));
  row.appendChild(roleChip(c.role));
  row.appendChild(h("span", "pinb-text", c.preview || ""));
  row.appendChild(h("span", "pinb-tok", fmt(c.tokens)));
  row.appendChild(statusBadge(c.status));
  if (c.pinned) row.appendChild(badge("pinned", "pinb-pinned", "Pinned: every later compaction keeps this message verbatim"));
  row.title = `${c.id} · ${c.role} · ${fmt(c.tokens)} tokens · ${c.status}: ${STATUS_HELP[c.status] || ""}`
    + (item.would ? " — the previewed compaction would summarize this" : "");
  return row;
}

// --- the token bar -----------------------------------------------------------------------

const SEGMENTS = ["overhead", "system", "summary", "user", "assistant", "toolResult", "custom", "bashExecution"];

function paintTokens(box, tok) {
  box.replaceChildren();
  if (!tok || !tok.window) return;
  const W = tok.window;
  const used = tok.used || 0;
  const pct = (x) => Math.max(0, Math.min(100, (x / W) * 100));
  const line = h("div", "pinb-tokline");
  const big = h("span", "pinb-used", fmt(used));
  line.appendChild(big);
  line.appendChild(h("span", "pinb-unit", " tokens in context "));
  const kind = h("span", "pinb-kind pinb-kind-" + tok.kind, tok.kind);
  kind.title = tok.kind === "reported"
    ? `Provider-reported usage of the last reply (${fmt(tok.usage_tokens)}) + estimate of what came after (${fmt(tok.trailing_tokens)})`
    : "Estimated with Pi's heuristic: ceil(chars / 4) per message";
  line.appendChild(kind);
  // the share is not capped (4,080 of 2,048 is 199%); only the bar stops at W
  const share_pct = tok.percent != null ? tok.percent : (used / W) * 100;
  const share = h("span", "pinb-share", ` ${share_pct.toFixed(used / W < 0.01 ? 2 : 1)}% of the window · ${fmt(tok.messages)} messages`);
  line.appendChild(share);
  const state = used > tok.threshold ? "over" : used > 0.85 * tok.threshold ? "near" : "ok";
  const verdict = h("span", "pinb-verdict pinb-v-" + state,
    state === "over" ? `over W − R by ${fmt(used - tok.threshold)}: compaction due`
      : `${fmt(tok.threshold - used)} left before compaction`);
  line.appendChild(verdict);
  box.appendChild(line);

  const bar = h("div", "pinb-bar pinb-bar-" + state);
  bar.setAttribute("role", "meter");
  bar.setAttribute("aria-valuemin", "0");
  bar.setAttribute("aria-valuemax", String(W));
  bar.setAttribute("aria-valuenow", String(used));
  const fill = h("div", "pinb-fill");
  fill.style.width = `max(3px, ${pct(used)}%)`;
  const roles = tok.by_role || {};
  const total = Object.values(roles).reduce((a, b) => a + b, 0) || 1;
  const frag = document.createDocumentFragment();
  const seen = new Set();
  for (const role of [...SEGMENTS, ...Object.keys(roles)]) {
    if (seen.has(role) || !roles[role]) continue;
    seen.add(role);
    const seg = h("div", "pinb-seg pinb-c-" + role);
    seg.style.width = (roles[role] / total) * 100 + "%";
    seg.title = `${ROLE_LABEL[role] || role}: ${fmt(roles[role])} tokens (estimated)`;
    frag.appendChild(seg);
  }
  fill.appendChild(frag);
  bar.appendChild(fill);
  const mark = h("div", "pinb-mark");
  mark.style.left = pct(tok.threshold) + "%";
  mark.title = `Compaction threshold W − R = ${fmt(W)} − ${fmt(tok.reserve)}`;
  bar.appendChild(mark);
  box.appendChild(bar);

  const scale = h("div", "pinb-scale");
  scale.appendChild(h("span", "pinb-s0", "0"));
  const src = tok.window_source;
  const wText = `W ${fmt(W)}${src === "default" ? " (assumed)" : src === "pending" ? " (looking up…)" : ""}`;
  const wl = h("span", "pinb-sw");
  wl.title = src === "default"
    ? "Pi's fallback window; pass window= (or a Session with a model) for the real one"
    : src === "pending" ? "Looking up the model's context window"
    : src === "session" ? "The session model's context window" : "Context window W";
  const mText = `W − R ${fmt(tok.threshold)}`;
  if (pct(tok.threshold) > 55) {
    // the marker sits near the end: one right-aligned label names both
    const m = h("b", "pinb-smark-inline", mText);
    m.title = mark.title;
    wl.appendChild(m);
    wl.appendChild(document.createTextNode("  ·  " + wText));
  } else {
    const ml = h("span", "pinb-smark", mText);
    ml.style.left = pct(tok.threshold) + "%";
    ml.title = mark.title;
    scale.appendChild(ml);
    wl.textContent = wText;
  }
  scale.appendChild(wl);
  box.appendChild(scale);

  const legend = h("div", "pinb-legend");
  for (const role of seen) {
    const item = h("span", "pinb-leg");
    item.appendChild(h("i", "pinb-c-" + role));
    item.appendChild(document.createTextNode(`${ROLE_LABEL[role] || role} ${fmt(roles[role])}`));
    legend.appendChild(item);
  }
  legend.appendChild(h("span", "pinb-leg pinb-reserve", `reserve R ${fmt(tok.reserve)}`));
  box.appendChild(legend);
}

// --- render ------------------------------------------------------------------------------

// The kernel also displays a static snapshot of this explorer as a separate output, for
// pages without the widget runtime. Where the live view runs, hide that snapshot (and its
// output area, where the page has one) so the explorer shows once.
function hideSnapshot(id) {
  if (!/^[0-9a-f]+$/.test(id || "") || document.getElementById("pinb-hide-" + id)) return;
  const style = document.createElement("style");
  style.id = "pinb-hide-" + id;
  const sel = `[data-pi-nb-snapshot="${id}"]`;
  style.textContent =
    `${sel}{display:none!important}` +
    `.jp-OutputArea-child:has(${sel}),.output_area:has(${sel}){display:none!important}`;
  document.head.appendChild(style);
}

function render({ model, el }) {
  const t0 = performance.now();
  hideSnapshot(model.get("_snapshot_id"));
  const root = h("div", "pinb-explorer");
  root.innerHTML = SKELETON;
  const $ = (sel) => root.querySelector(sel);
  const treeBox = $(".pinb-tree");
  const ctxBox = $(".pinb-ctx");
  const statusEl = $(".pinb-status");
  const replaceBox = $(".pinb-replace");
  for (const b of root.querySelectorAll("[data-act]")) b.dataset.help = b.title || "";

  const open = new Map(); // fold overrides: "b:<id>" / "r:<id>" → open?
  let t = indexTree([]);
  let ctxOpen = false;
  let busy = 0;
  let seq = 0;

  const selected = () => model.get("selected_id");
  const treeList = virtualList(treeBox, (item) => treeRow(t, item, selected()));
  const ctxList = virtualList(ctxBox, (item) => ctxRow(item, selected()));

  function rebuildTree() {
    t = indexTree(model.get("_tree") || []);
    const sel = selected();
    if (sel != null && t.index.has(sel)) reveal(t, open, t.index.get(sel));
    treeList.set(flatten(t, open));
    const paths = t.rows.reduce((a, r) => a + (r.on_path ? 1 : 0), 0);
    $(".pinb-tree-sub").textContent = `${fmt(t.rows.length)} entries · ${fmt(paths)} on the current path`;
  }

  function rebuildContext() {
    const rows = model.get("_context") || [];
    const items = [];
    let inCtx = 0;
    let tokens = 0;
    for (const c of rows) {
      if (c.status === "summarized" && c.count != null) {
        items.push({ row: c, group: true, open: ctxOpen });
        if (ctxOpen) {
          // the entries the summary replaced: on-path tree rows marked "summarized"
          for (const r of t.rows) {
            if (r.on_path && r.status === "summarized") {
              items.push({ row: { id: r.id, index: null, role: r.role || r.kind, preview: r.preview, tokens: r.tokens, status: "summarized", in_context: false }, sub: true });
            }
          }
        }
        continue;
      }
      items.push({ row: c });
      if (c.in_context) { inCtx++; tokens += c.tokens || 0; }
    }
    // a compaction preview: mark what it would summarize (the context before its first kept entry)
    const keep = (model.get("_preview") || {}).first_kept_id;
    const k = keep ? items.findIndex((it) => it.row.id === keep) : -1;
    if (k > 0) for (let j = 0; j < k; j++) if (items[j].row.in_context && items[j].row.status !== "summary") items[j].would = true;
    ctxList.set(items);
    $(".pinb-ctx-sub").textContent = `${fmt(inCtx)} messages · ${fmt(tokens)} tok est.`;
  }

  function paintHead() {
    const info = model.get("_info") || {};
    const parts = [];
    if (info.name) parts.push(info.name);
    if (info.session_id) parts.push(String(info.session_id).slice(0, 8));
    parts.push(`${fmt(info.entries)} entries`);
    // a Session: the model of the next call; a bare file: the last model it names
    if (info.model) parts.push(info.model_source === "session" ? `next model ${info.model}` : `model ${info.model} (last in the file)`);
    if (info.thinking && info.thinking !== "off") parts.push(`thinking ${info.thinking}`);
    // follow mode: the kernel re-reads the file another process writes (SessionExplorer(follow=...))
    const every = model.get("following") || 0;
    if (every > 0) parts.push(`following the file · every ${every} s`);
    root.dataset.following = every > 0 ? "1" : "0";
    const meta = $(".pinb-meta");
    meta.textContent = parts.join(" · ");
    meta.title = info.path || "in memory";
  }

  // While following, the view keeps the leaf in sight as entries arrive, unless the user
  // selected an entry elsewhere.
  function followLeaf(before) {
    if (!(model.get("following") > 0) || t.leaf < 0 || t.leaf === before) return;
    const sel = selected();
    if (sel != null && t.index.has(sel) && t.index.get(sel) !== before) return;
    const k = treeList.items().findIndex((it) => it.i === t.leaf && !it.gap);
    if (k >= 0) treeList.scrollTo(k);
  }

  function selectedRow() {
    const sel = selected();
    return sel != null && t.index.has(sel) ? t.rows[t.index.get(sel)] : null;
  }

  function paintActions() {
    const r = selectedRow();
    const caps = model.get("_caps") || {};
    const box = $(".pinb-selected");
    box.replaceChildren();
    if (r) {
      box.appendChild(h("span", "pinb-sel-label", "Selected"));
      box.appendChild(h("code", "pinb-id", r.id));
      if (r.kind === "message" || r.kind === "custom_message") box.appendChild(roleChip(r.role));
      else box.appendChild(badge(KIND_LABEL[r.kind] || r.kind, "pinb-k-" + r.kind));
      box.appendChild(h("span", "pinb-text", r.preview || ""));
    } else {
      box.appendChild(h("span", "pinb-hint", "Click an entry in the history (or the context) to act on it."));
    }
    const editable = !!r && r.on_path && EDITABLE.has(r.role) && r.status !== "summarized";
    const set = (act, enabled, why) => {
      const b = root.querySelector(`[data-act="${act}"]`);
      b.disabled = busy > 0 || !enabled;
      b.title = enabled ? b.dataset.help : why;
    };
    set("branch", !!r && !r.leaf, r ? "This entry is already the leaf" : "Select an entry first");
    set("omit", editable, "Select a user, assistant or tool message on the current path");
    set("replace", editable, "Select a user, assistant or tool message on the current path");
    set("pin", editable && caps.compact, caps.compact ? "Select a message on the current path" : "Needs a pi_nb.agent.Session");
    for (const act of ["compact", "preview"]) {
      set(act, true, "");
      const b = root.querySelector(`[data-act="${act}"]`);
      b.classList.toggle("pinb-unavailable", !caps.compact);
      if (!caps.compact) b.title = "Needs a pi_nb.agent.Session (a model writes the summary)";
    }
    const check = root.querySelector('[data-field="summarize"]');
    check.parentElement.classList.toggle("pinb-unavailable", !caps.summarize);
    if (!editable && !replaceBox.hidden) replaceBox.hidden = true;
  }

  function paintStatus() {
    const text = busy ? "Working…" : model.get("status") || "Ready.";
    statusEl.textContent = text;
    statusEl.className = "pinb-status" + (busy ? " pinb-busy" : /^error/i.test(text) ? " pinb-error" : model.get("status") ? " pinb-ok" : "");
  }

  function paintPreview() {
    const p = model.get("_preview") || {};
    const box = $(".pinb-preview");
    box.hidden = !p.summary;
    if (!p.summary) return;
    $(".pinb-preview-title").textContent = `Compaction preview · ${fmt(p.tokens_before)}${p.tokens_after != null ? " → " + fmt(p.tokens_after) : ""} tokens · keeps from ${p.first_kept_id || "?"} · nothing written yet`;
    $(".pinb-preview-body").textContent = p.summary;
  }

  function select(id) {
    if (id == null || id === selected()) return;
    model.set("selected_id", id);
    model.save_changes();
    onSelected();
  }

  function onSelected() {
    const sel = selected();
    if (sel != null && t.index.has(sel)) {
      const i = t.index.get(sel);
      let k = treeList.items().findIndex((it) => it.i === i && !it.gap);
      if (k < 0) {
        reveal(t, open, i);
        treeList.set(flatten(t, open));
        k = treeList.items().findIndex((it) => it.i === i && !it.gap);
      }
      if (k >= 0) treeList.scrollTo(k);
    } else treeList.repaint();
    ctxList.repaint();
    paintActions();
  }

  function send(msg) {
    busy++;
    seq++;
    model.send({ ...msg, seq });
    paintStatus();
    paintActions();
  }

  // --- delegated events ------------------------------------------------------------
  function onTreeClick(ev) {
    const tw = ev.target.closest("[data-key]");
    if (tw && treeBox.contains(tw)) {
      const key = tw.dataset.key;
      if (tw.dataset.refold) open.set(key, false);
      else if (key.startsWith("r:") && tw.classList.contains("pinb-gap")) open.set(key, true);
      else {
        const item = treeList.items().find((it) => it.key === key && !it.gap);
        open.set(key, !(item && item.tw === "open"));
      }
      treeList.set(flatten(t, open));
      return;
    }
    const row = ev.target.closest("[data-i]");
    if (row) select(t.rows[Number(row.dataset.i)].id);
  }

  function onTreeKey(ev) {
    if (ev.key !== "ArrowDown" && ev.key !== "ArrowUp") return;
    const items = treeList.items();
    const sel = selected();
    let k = items.findIndex((it) => !it.gap && t.rows[it.i].id === sel);
    const step = ev.key === "ArrowDown" ? 1 : -1;
    for (k += step; k >= 0 && k < items.length; k += step) {
      if (!items[k].gap) { select(t.rows[items[k].i].id); break; }
    }
    ev.preventDefault();
  }

  function onCtxClick(ev) {
    const group = ev.target.closest("[data-group]");
    if (group) { ctxOpen = !ctxOpen; rebuildContext(); return; }
    const row = ev.target.closest("[data-id]");
    if (row) select(row.dataset.id);
  }

  function onRootClick(ev) {
    const tool = ev.target.closest("[data-tool]");
    if (tool) {
      if (tool.dataset.tool === "expand") {
        for (let i = 0; i < t.rows.length; i++) { open.set("b:" + t.rows[i].id, true); open.set("r:" + t.rows[i].id, true); }
        treeList.set(flatten(t, open));
      } else if (tool.dataset.tool === "collapse") {
        open.clear();
        treeList.set(flatten(t, open));
      } else if (tool.dataset.tool === "leaf" && t.leaf >= 0) {
        const k = treeList.items().findIndex((it) => it.i === t.leaf && !it.gap);
        if (k >= 0) treeList.scrollTo(k);
      }
      return;
    }
    const btn = ev.target.closest("[data-act]");
    if (!btn || btn.disabled) return;
    const act = btn.dataset.act;
    const id = selected();
    const focus = root.querySelector('[data-field="focus"]').value.trim() || null;
    if (act === "branch") send({ action: "branch", id, summarize: root.querySelector('[data-field="summarize"]').checked, focus });
    else if (act === "omit") send({ action: "omit", id });
    else if (act === "pin") send({ action: "pin", id });
    else if (act === "replace") {
      replaceBox.hidden = false;
      const area = replaceBox.querySelector("textarea");
      const r = selectedRow();
      area.placeholder = r ? `New content for ${r.id} (${r.role}) — the model will see this instead` : "";
      area.focus();
    } else if (act === "replace-apply") {
      const text = replaceBox.querySelector("textarea").value;
      if (!text.trim()) { statusEl.textContent = "Type the replacement text first."; statusEl.className = "pinb-status pinb-error"; return; }
      replaceBox.hidden = true;
      replaceBox.querySelector("textarea").value = "";
      send({ action: "replace", id, text });
    } else if (act === "replace-cancel") replaceBox.hidden = true;
    else if (act === "compact") send({ action: "compact", preview: false, focus });
    else if (act === "preview") send({ action: "compact", preview: true, focus });
    else if (act === "discard-preview") send({ action: "discard_preview" });
  }

  treeBox.addEventListener("click", onTreeClick);
  treeBox.addEventListener("keydown", onTreeKey);
  ctxBox.addEventListener("click", onCtxClick);
  root.addEventListener("click", onRootClick);

  // --- model events ----------------------------------------------------------------
  const handlers = {
    "change:_tree": () => { const s = performance.now(); const leaf = t.leaf; rebuildTree(); rebuildContext(); paintActions(); followLeaf(leaf); root.dataset.updateMs = (performance.now() - s).toFixed(1); },
    "change:following": paintHead,
    "change:_context": () => rebuildContext(),
    "change:_tokens": () => paintTokens($(".pinb-tokens"), model.get("_tokens")),
    "change:_info": paintHead,
    "change:_caps": paintActions,
    "change:_preview": () => { paintPreview(); rebuildContext(); },
    "change:selected_id": onSelected,
    "change:status": paintStatus,
    "change:_ack": () => { busy = 0; paintStatus(); paintActions(); },
  };
  for (const [evt, fn] of Object.entries(handlers)) model.on(evt, fn);

  // The first scroll to the leaf waits until the panel has a size: in JupyterLab the view
  // is attached to the page only after render() returns.
  let pendingScroll = null;
  const flushScroll = () => {
    if (pendingScroll != null && treeBox.clientHeight > 0) {
      const k = pendingScroll;
      pendingScroll = null;
      treeList.scrollTo(k);
    }
  };
  const resize = typeof ResizeObserver === "function"
    ? new ResizeObserver(() => { flushScroll(); treeList.schedule(); ctxList.schedule(); })
    : null;
  if (resize) { resize.observe(treeBox); resize.observe(ctxBox); }

  // --- first paint -----------------------------------------------------------------
  paintHead();
  paintTokens($(".pinb-tokens"), model.get("_tokens"));
  rebuildTree();
  rebuildContext();
  paintActions();
  paintPreview();
  paintStatus();
  el.appendChild(root);
  const target = selected() != null && t.index.has(selected()) ? t.index.get(selected()) : t.leaf;
  if (target >= 0) {
    pendingScroll = treeList.items().findIndex((it) => it.i === target && !it.gap);
    if (pendingScroll < 0) pendingScroll = null;
    flushScroll();
  }
  root.dataset.renderMs = (performance.now() - t0).toFixed(1);
  requestAnimationFrame(() => {
    flushScroll();
    treeList.repaint();
    ctxList.repaint();
    root.dataset.paintMs = (performance.now() - t0).toFixed(1);
    root.classList.add("pinb-ready");
  });

  return () => {
    for (const [evt, fn] of Object.entries(handlers)) model.off(evt, fn);
    if (resize) resize.disconnect();
    treeList.dispose();
    ctxList.dispose();
    treeBox.removeEventListener("click", onTreeClick);
    treeBox.removeEventListener("keydown", onTreeKey);
    ctxBox.removeEventListener("click", onCtxClick);
    root.removeEventListener("click", onRootClick);
    root.remove();
  };
}

export default { render };
