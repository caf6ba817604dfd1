// src/report/report.js: the HTML report's script (inlined by `memlens report`).
//
// Reads the data from <script id="memlens-data" type="application/json"> (its shape:
// docs/report.md) and draws every view. Every name from the capture is inserted as text
// (textContent, attribute values), never as HTML. No network access: the page's policy forbids
// it and nothing here asks for any. Plain DOM and SVG; no library.
'use strict';
(function () {
  const data = JSON.parse(document.getElementById('memlens-data').textContent);
  const S = data.strings;
  const F = data.frames;
  const SVG_NS = 'http://www.w3.org/2000/svg';

  // --- helpers ---------------------------------------------------------------------------------
  function el(tag, props, ...children) {
    const e = document.createElement(tag);
    if (props) {
      for (const [k, v] of Object.entries(props)) {
        if (v === undefined || v === null) continue;
        if (k === 'text') e.textContent = v;
        else if (k === 'class') e.className = v;
        else if (k === 'data') Object.assign(e.dataset, v);
        else e.setAttribute(k, v);
      }
    }
    for (const c of children) {
      if (c !== null && c !== undefined) e.append(c);
    }
    return e;
  }
  function svgEl(tag, attrs, text) {
    const e = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  // As the terminal views print bytes (src/analyzer/export/format_units.cc).
  function fmtBytes(n) {
    if (n < 1024) return n + ' B';
    let v = n;
    let u = 0;
    while (v >= 1024 && u < 4) { v /= 1024; ++u; }
    return v.toFixed(2) + ' ' + UNITS[u];
  }
  function fmtSigned(n) {
    return (n > 0 ? '+' : n < 0 ? '-' : '') + fmtBytes(Math.abs(n));
  }
  function fmtCount(n) { return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ','); }
  // A sampled figure's standard error as ' \u00b1...' (docs/sampling.md); '' where it has none.
  function pmBytes(e) { return e === undefined ? '' : ' \u00b1' + fmtBytes(Math.round(e)); }
  function pmCount(e) { return e === undefined ? '' : ' \u00b1' + fmtCount(Math.round(e)); }
  function fmtSec(s) { return (s === null ? 0 : s).toFixed(3) + ' s'; }
  function fmtPct(part, whole) { return (whole ? (100 * part / whole) : 0).toFixed(1) + '%'; }
  function baseName(path) { const i = path.lastIndexOf('/'); return i < 0 ? path : path.slice(i + 1); }
  function frameName(f) { return f < 0 ? '' : S[F[f][0]]; }
  function frameFile(f) { return f < 0 ? '' : S[F[f][1]]; }
  function frameLocation(f) {
    if (f < 0) return '';
    const file = S[F[f][1]];
    const line = F[f][2];
    return file ? baseName(file) + (line ? ':' + line : '') : '';
  }
  function frameModule(f) { return f < 0 ? '' : S[F[f][3]]; }
  function frameIsPython(f) { return f >= 0 && (F[f][4] & 2) !== 0; }
  function frameInlined(f) { return f >= 0 && (F[f][4] & 1) !== 0; }
  function frameTitle(f) {
    if (f < 0) return '';
    const file = frameFile(f);
    return frameName(f) + (file ? '\n' + file + (F[f][2] ? ':' + F[f][2] : '') : '') +
      '\n' + frameModule(f) + (frameInlined(f) ? ' (inlined)' : '');
  }

  // --- summary ---------------------------------------------------------------------------------
  function renderSummary() {
    const t = data.totals;
    const c = data.capture;
    document.getElementById('command').textContent =
      (data.process.argv.length ? data.process.argv.join(' ') : data.process.executable) +
      '  (pid ' + data.process.pid + ')';
    const cards = document.getElementById('summary-cards');
    function card(label, value, detail, opts) {
      const v = el('div', Object.assign({ class: 'value', text: value }, opts || {}));
      cards.append(el('div', { class: 'card' + (opts && opts.id === 'peak-value' ? ' main' : '') },
        el('div', { class: 'label', text: label }), v,
        detail ? el('div', { class: 'detail', text: detail }) : null));
    }
    // A sampled capture's figure with its standard error (FIELD_error), else the figure alone.
    const pm = (key, fmt) => (key in t ? ' \u00b1' + fmt(Math.round(t[key])) : '');
    card('In use at peak', fmtBytes(t.peak_bytes) + pm('peak_bytes_error', fmtBytes),
      fmtCount(t.peak_bytes) + pm('peak_bytes_error', fmtCount) + ' bytes, ' +
      fmtCount(t.peak_blocks) + pm('peak_blocks_error', fmtCount) + ' blocks, at ' +
      fmtSec(t.peak_time_s) +
      (t.mappings.at_peak_bytes ? ', ' + fmtBytes(t.mappings.at_peak_bytes) + ' mapped' : ''),
      { id: 'peak-value', title: fmtCount(t.peak_bytes) + ' bytes', data: { bytes: String(t.peak_bytes) } });
    card('In use at ' + c.snapshot.label, fmtBytes(t.in_use_at_exit_bytes) +
      pm('in_use_at_exit_bytes_error', fmtBytes),
      fmtCount(t.in_use_at_exit_blocks) + pm('in_use_at_exit_blocks_error', fmtCount) + ' blocks' +
      (t.mappings.in_use_bytes ? ', ' + fmtBytes(t.mappings.in_use_bytes) + ' mapped' : '') +
      // A Python program's default "exit": the end of its own code (docs/python.md).
      (c.snapshot.spec === 'program-end' && c.snapshot.label === 'exit'
        ? '; exit: the end of the program\'s own Python code (' + fmtSec(c.snapshot.time_s) +
          '), before atexit handlers and the interpreter\'s shutdown' : ''),
      { id: 'in-use-value', title: fmtCount(t.in_use_at_exit_bytes) + ' bytes',
        data: { bytes: String(t.in_use_at_exit_bytes) } });
    if (data.runtime.blocks) {  // not the program's (docs/runtime-allocations.md)
      const rt = data.runtime;
      card('Kept by the runtime', fmtBytes(rt.bytes) + pmBytes(rt.bytes_error),
        fmtCount(rt.blocks) + pmCount(rt.blocks_error) + ' blocks the C/C++ runtime keeps for ' +
        'the life of the process (not leaks): ' +
        rt.rules.map((r) => r.what + ' ' + fmtBytes(r.bytes) + pmBytes(r.bytes_error)).join(', '),
        { id: 'runtime-value', title: fmtCount(data.runtime.bytes) + ' bytes',
          data: { bytes: String(data.runtime.bytes) } });
    }
    card('Allocated', fmtBytes(t.allocated_bytes) + pm('allocated_bytes_error', fmtBytes),
      fmtCount(t.allocations) + pm('allocations_error', fmtCount) + ' allocations, ' +
      fmtCount(t.frees) + pm('frees_error', fmtCount) + ' frees',
      { title: fmtCount(t.allocated_bytes) + ' bytes' });
    card('Temporary allocations', fmtCount(t.temporary) + pm('temporary_error', fmtCount),
      'freed before the thread allocated again');
    card('Duration', fmtSec(c.duration_s), (c.complete ? 'complete' : 'incomplete') +
      (c.end_reason ? ', ended by ' + c.end_reason : ''));
    card('Events', fmtCount(t.events), fmtCount(t.stacks) + ' stacks, ' +
      fmtCount(data.process.threads) + ' threads');
    if (t.python_allocated_bytes) {
      card('Python allocator', fmtBytes(t.python_allocated_bytes) +
        pm('python_allocated_bytes_error', fmtBytes),
        'allocated; ' + (t.mimalloc_mapped_peak_bytes  // free-threaded builds: mimalloc's arenas
          ? 'mimalloc mapped ' + fmtBytes(t.mimalloc_mapped_peak_bytes) + ' of address space at most'
          : 'pymalloc arenas peak ' + fmtBytes(t.pymalloc_arena_peak_bytes)));
    }
    const warnings = document.getElementById('warnings');
    if (c.estimates) {  // a sampled capture: say so before anything else (docs/sampling.md)
      warnings.append(el('li', { id: 'estimates-note', text: 'Estimates: heap allocations were ' +
        'sampled (one byte in ' + fmtBytes(c.sample_rate) + ' on average); every byte and ' +
        'block figure is scaled up from the samples. \u00b1 is one standard error of the ' +
        'estimate, from the sampling model: the true figure lies within \u00b11.96 of it 95% ' +
        'of the time, and a small figure can be very uncertain.' }));
    }
    for (const w of c.warnings) warnings.append(el('li', { text: w }));
    document.getElementById('footer').textContent = data.generator + ', capture ' + c.path;
  }

  // --- flame graph -----------------------------------------------------------------------------
  const TREES = [['peak', 'Peak memory'], ['in_use', 'In use at ' + data.capture.snapshot.label],
    ['allocated', 'All allocations']];
  const trees = {};  // name -> root node, built on first use
  let nextNodeId = 0;
  function buildNode(a, parent, depth) {
    // A sampled capture's node ends with the standard errors of its total and self (ve, se).
    const n = { f: a[0], v: a[1], s: a[2], ve: a[4], se: a[5], parent, depth, id: nextNodeId++,
      children: [] };
    if (parent && a[0] < 0) { n.other = a[2]; n.s = 0; }
    if (a.length > 3) for (const c of a[3]) n.children.push(buildNode(c, n, depth + 1));
    return n;
  }
  function tree(name) {
    if (!trees[name]) trees[name] = buildNode(data.trees[name].root, null, 0);
    return trees[name];
  }
  const flame = { name: 'peak', focus: null, query: '' };
  const ROW = 18;

  function nodeLabel(n) {
    if (!n.parent) return 'all';
    if (n.f < 0) return '(other: ' + fmtCount(n.other) + ' smaller)';
    return frameName(n.f);
  }
  function nodeMatches(n) {
    if (!flame.query || n.f < 0) return false;
    return frameName(n.f).toLowerCase().includes(flame.query) ||
      frameFile(n.f).toLowerCase().includes(flame.query);
  }
  function colorOf(n) {
    if (!n.parent) return 'hsl(220, 15%, 80%)';
    const name = frameName(n.f);
    let h = 0;
    for (let i = 0; i < name.length; ++i) h = (h * 31 + name.charCodeAt(i)) >>> 0;
    return frameIsPython(n.f) ? 'hsl(' + (190 + h % 40) + ', 55%, 70%)'
                              : 'hsl(' + (10 + h % 45) + ', 80%, ' + (62 + h % 12) + '%)';
  }

  function renderFlameTabs() {
    const tabs = document.getElementById('flame-tabs');
    for (const [name, label] of TREES) {
      const b = el('button', { type: 'button', role: 'tab', 'aria-selected': String(name === flame.name),
        data: { tree: name }, text: label });
      b.addEventListener('click', () => {
        flame.name = name;
        flame.focus = null;
        for (const x of tabs.children) x.setAttribute('aria-selected', String(x === b));
        renderFlame();
      });
      tabs.append(b);
    }
    document.getElementById('flame-reset').addEventListener('click', () => {
      flame.focus = null;
      renderFlame();
    });
    document.getElementById('flame-search').addEventListener('input', (e) => {
      flame.query = e.target.value.trim().toLowerCase();
      renderFlame();
    });
  }

  function renderFlame() {
    const root = tree(flame.name);
    const info = data.trees[flame.name];
    const focus = flame.focus || root;
    const box = document.getElementById('flame-graph');
    const width = box.clientWidth || 1000;
    document.getElementById('flame-info').textContent =
      TREES.find((t) => t[0] === flame.name)[1] + ': ' + fmtBytes(root.v) + pmBytes(root.ve) + ' in ' +
      fmtCount(info.nodes) + ' nodes' + (info.threshold_bytes
        ? '; nodes under ' + fmtBytes(info.threshold_bytes) + ' (' + fmtPct(info.threshold_bytes, root.v) +
          ' of the total) are folded into "(other)"'
        : '; nothing folded') + '. Click a frame to zoom, the greyed frames above to zoom out.';
    const nodes = [];
    let maxDepth = 0;
    function place(n, x, w, cls) {
      nodes.push([n, x, w, cls]);
      if (n.depth > maxDepth) maxDepth = n.depth;
    }
    // Ancestors of the focus span the whole width; the focus and below are scaled to it.
    for (let a = focus.parent; a; a = a.parent) place(a, 0, width, ' fg-ancestor');
    const scale = focus.v ? width / focus.v : 0;
    (function layout(n, x) {
      const w = n.v * scale;
      if (w < 1) return;
      place(n, x, w, '');
      let cx = x;  // children from the left edge; the self part is the space left at the right
      for (const c of n.children) {
        layout(c, cx);
        cx += c.v * scale;
      }
    })(focus, 0);
    let matchedBytes = 0;
    let matchedFrames = 0;
    const frag = document.createDocumentFragment();
    for (const [n, x, w, cls] of nodes) {
      const match = nodeMatches(n);
      let className = 'fg-node' + cls + (n.f < 0 && n.parent ? ' fg-other' : '');
      if (match) {
        className += ' fg-match';
        ++matchedFrames;
        let inside = false;  // count bytes once when a match is inside another
        for (let a = n.parent; a; a = a.parent) if (nodeMatches(a)) { inside = true; break; }
        if (!inside && !cls) matchedBytes += n.v;
      }
      const d = el('div', { class: className, data: { id: String(n.id), depth: String(n.depth) },
        title: (n.parent ? (n.f < 0 ? nodeLabel(n) + ', each under ' + fmtBytes(info.threshold_bytes)
                                     : frameTitle(n.f)) : 'all') +
          '\n' + fmtBytes(n.v) + pmBytes(n.ve) + ' (' + fmtPct(n.v, root.v) + ')' +
          (n.s ? ', self ' + fmtBytes(n.s) + pmBytes(n.se) : ''),
        text: nodeLabel(n) });
      d.style.left = x + 'px';
      d.style.width = Math.max(w, 1) + 'px';
      d.style.top = (n.depth * ROW) + 'px';
      if (!match && !(n.f < 0 && n.parent)) d.style.backgroundColor = colorOf(n);
      d.addEventListener('click', () => {
        flame.focus = n === root ? null : n;
        renderFlame();
      });
      d.addEventListener('mouseenter', () => {
        document.getElementById('flame-hover').textContent = nodeLabel(n) + '  ' +
          (n.f >= 0 ? frameLocation(n.f) + '  ' : '') + fmtBytes(n.v) + pmBytes(n.ve) + ' (' +
          fmtPct(n.v, root.v) + ')';
      });
      frag.append(d);
    }
    box.replaceChildren(frag);
    box.style.height = ((maxDepth + 1) * ROW) + 'px';
    document.getElementById('flame-search-info').textContent = flame.query
      ? matchedFrames + ' frames shown match "' + flame.query + '": ' + fmtBytes(matchedBytes) +
        ' (' + fmtPct(matchedBytes, focus.v) + ' of the view)'
      : '';
  }

  // --- timeline and diffs ----------------------------------------------------------------------
  const CP = data.checkpoints;
  const TL = { W: 1000, H: 280, L: 78, R: 12, T: 12, B: 40 };
  const duration = Math.max(data.capture.duration_s || 0, 1e-9);
  let pendingPoint = null;
  // Who follows a moment clicked on the timeline (the memory map's playback), and the cursor
  // that shows the moment the map is at: set by renderTimeline, used by renderMap.
  const momentListeners = [];
  let showMapCursor = () => {};

  function nearestCheckpoint(seconds) {
    let best = 0;
    for (let i = 1; i < CP.length; ++i) {
      if (Math.abs(CP[i].time_s - seconds) < Math.abs(CP[best].time_s - seconds)) best = i;
    }
    return best;
  }
  function siteLabel(site) {
    return site < 0 ? { name: '(other sites)', loc: '', title: 'sites not listed in the report' }
      : { name: frameName(data.sites[site]), loc: frameLocation(data.sites[site]),
          title: frameTitle(data.sites[site]) };
  }
  function liveMap(cp) {
    const m = new Map();
    for (let i = 0; i < cp.live.length; i += 2) m.set(cp.live[i], cp.live[i + 1]);
    return m;
  }
  // A sampled capture: each site's standard error at the checkpoint (live_error), else empty.
  function liveErrors(cp) {
    const m = new Map();
    const e = cp.live_error || [];
    for (let i = 0; i < e.length; i += 2) m.set(e[i], e[i + 1]);
    return m;
  }
  // The error of a change between two moments of one capture: at most sqrt(a^2 + b^2) (the
  // blocks live at both cancel out of it exactly), given as that bound.
  function pmChange(a, b) {
    return a === undefined && b === undefined ? '' : pmBytes(Math.hypot(a || 0, b || 0));
  }
  function showSnapshot(index) {
    const cp = CP[index];
    const view = document.getElementById('diff-view');
    const rows = [...liveMap(cp)].sort((a, b) => b[1] - a[1]).slice(0, 200);
    const errors = liveErrors(cp);
    const table = el('table', { class: 'data', id: 'snapshot-table' },
      el('thead', null, el('tr', null, el('th', { text: 'Function' }), el('th', { text: 'Location' }),
        el('th', { class: 'num', text: 'In use' }), el('th', { class: 'num', text: 'Share' }))));
    const body = el('tbody');
    for (const [site, bytes] of rows) {
      const s = siteLabel(site);
      body.append(el('tr', { data: { site: String(site) } },
        el('td', { class: 'fn', title: s.title, text: s.name }), el('td', { text: s.loc }),
        el('td', { class: 'num', title: fmtCount(bytes) + ' bytes',
          text: fmtBytes(bytes) + pmBytes(errors.get(site)) }),
        el('td', { class: 'num', text: fmtPct(bytes, cp.heap_bytes) })));
    }
    table.append(body);
    view.replaceChildren(el('h3', { id: 'diff-title', text: 'In use at ' + fmtSec(cp.time_s) + ': ' +
      fmtBytes(cp.heap_bytes) + pmBytes(cp.heap_bytes_error) + ' (click a second moment for the diff)' }),
      el('div', { class: 'table-wrap' }, table));
  }
  function showDiff(fromIndex, toIndex) {
    const a = CP[fromIndex];
    const b = CP[toIndex];
    const before = liveMap(a);
    const after = liveMap(b);
    const beforeErr = liveErrors(a);
    const afterErr = liveErrors(b);
    const rows = [];
    for (const site of new Set([...before.keys(), ...after.keys()])) {
      const x = before.get(site) || 0;
      const y = after.get(site) || 0;
      if (x !== y) rows.push([site, x, y, y - x]);
    }
    rows.sort((p, q) => q[3] - p[3]);
    const view = document.getElementById('diff-view');
    const table = el('table', { class: 'data', id: 'diff-table' },
      el('thead', null, el('tr', null, el('th', { text: 'Function' }), el('th', { text: 'Location' }),
        el('th', { class: 'num', text: 'Before' }), el('th', { class: 'num', text: 'After' }),
        el('th', { class: 'num', text: 'Change' }))));
    const body = el('tbody');
    for (const [site, x, y, d] of rows.slice(0, 300)) {
      const s = siteLabel(site);
      body.append(el('tr', { data: { site: String(site) } },
        el('td', { class: 'fn', title: s.title, text: s.name }), el('td', { text: s.loc }),
        el('td', { class: 'num', text: fmtBytes(x) + pmBytes(beforeErr.get(site)) }),
        el('td', { class: 'num', text: fmtBytes(y) + pmBytes(afterErr.get(site)) }),
        el('td', { class: 'num change ' + (d > 0 ? 'grow' : 'shrink'), title: (d > 0 ? '+' : '') + d + ' bytes',
          text: fmtSigned(d) + pmChange(beforeErr.get(site), afterErr.get(site)) })));
    }
    table.append(body);
    view.replaceChildren(el('h3', { id: 'diff-title', text: 'From ' + fmtSec(a.time_s) + ' (' +
      fmtBytes(a.heap_bytes) + pmBytes(a.heap_bytes_error) + ') to ' + fmtSec(b.time_s) + ' (' +
      fmtBytes(b.heap_bytes) + pmBytes(b.heap_bytes_error) + '): ' +
      fmtSigned(b.heap_bytes - a.heap_bytes) + pmChange(a.heap_bytes_error, b.heap_bytes_error) +
      (rows.length ? '' : ', no site changed') }),
      el('div', { class: 'table-wrap' }, table));
    document.getElementById('diff-from').value = a.time_s.toFixed(3);
    document.getElementById('diff-to').value = b.time_s.toFixed(3);
  }

  function renderTimeline() {
    const { W, H, L, R, T, B } = TL;
    const heap = data.timeline.heap;
    const rss = data.timeline.resident;
    let top = data.timeline.peak.bytes;
    for (let i = 1; i < rss.length; i += 2) top = Math.max(top, rss[i]);
    top = Math.max(top, 1);
    const pw = W - L - R;
    const ph = H - T - B;
    const X = (s) => L + Math.min(Math.max(s / duration, 0), 1) * pw;
    const Y = (b) => T + ph - (b / top) * ph;
    const svg = svgEl('svg', { viewBox: '0 0 ' + W + ' ' + H, id: 'timeline-svg', role: 'img',
      'aria-label': 'heap in use over time', 'data-duration': String(duration),
      'data-plot-left': String(L), 'data-plot-width': String(pw), 'data-width': String(W) });
    for (let k = 0; k <= 4; ++k) {
      const b = top * k / 4;
      svg.append(svgEl('line', { x1: L, x2: W - R, y1: Y(b), y2: Y(b), stroke: '#eef0f4' }));
      svg.append(svgEl('text', { x: L - 6, y: Y(b) + 4, 'text-anchor': 'end', class: 'axis' }, fmtBytes(Math.round(b))));
    }
    for (let k = 0; k <= 5; ++k) {  // the last label ends at the right edge, not past it
      const s = duration * k / 5;
      svg.append(svgEl('text', { x: X(s), y: H - 8, 'text-anchor': k === 5 ? 'end' : 'middle',
        class: 'axis' }, fmtSec(s)));
    }
    // Heap: a step line (the value holds until the next mark).
    let d = 'M' + L + ',' + Y(0);
    for (let i = 0; i < heap.length; i += 2) {
      d += 'H' + X(heap[i]).toFixed(1) + 'V' + Y(heap[i + 1]).toFixed(1);
    }
    d += 'H' + X(duration).toFixed(1);
    svg.append(svgEl('path', { d: d + 'V' + Y(0) + 'Z', class: 'heap-area' }));
    svg.append(svgEl('path', { d, class: 'heap-line' }));
    if (rss.length) {
      let r = '';
      for (let i = 0; i < rss.length; i += 2) r += (i ? 'L' : 'M') + X(rss[i]).toFixed(1) + ',' + Y(rss[i + 1]).toFixed(1);
      svg.append(svgEl('path', { d: r, class: 'rss-line' }));
    }
    const peak = data.timeline.peak;
    svg.append(svgEl('circle', { cx: X(peak.time_s), cy: Y(peak.bytes), r: 4, class: 'peak-dot' },
      undefined));
    // Its label beside the dot, on the side with room, haloed so the lines under it stay apart.
    const right = X(peak.time_s) < W - R - 120;
    svg.append(svgEl('text', { x: X(peak.time_s) + (right ? 8 : -8), y: Y(peak.bytes) + 14,
      'text-anchor': right ? 'start' : 'end', class: 'axis peak-label', id: 'timeline-peak' },
      'peak ' + fmtBytes(peak.bytes) + pmBytes(peak.bytes_error)));
    for (const cp of CP) {
      svg.append(svgEl('line', { x1: X(cp.time_s), x2: X(cp.time_s), y1: T + ph, y2: T + ph + 5, class: 'checkpoint-mark' }));
    }
    // The program's markers (ticks from the top) and snapshot requests (full height), named on hover.
    const markers = data.timeline.markers || [];
    for (const [s, label, snapshot] of markers) {
      const tick = svgEl('line', { x1: X(s), x2: X(s), y1: T, y2: snapshot ? T + ph : T + 8,
        class: snapshot ? 'snapshot-mark' : 'marker-mark', 'data-label': label });
      tick.append(svgEl('title', {}, (snapshot ? 'snapshot ' : 'marker ') + label + ' at ' + fmtSec(s)));
      svg.append(tick);
    }
    // The legend, and which markers the ticks are, by name and count: a line of the page above
    // the chart, so that nothing drawn in the chart (the peak's label) can lie under them.
    const legend = el('p', { class: 'legend', id: 'timeline-legend' },
      el('span', { class: 'key key-heap' }), 'heap in use', el('span', { class: 'key key-rss' }),
      'resident', el('span', { class: 'key key-peak' }), 'peak');
    if (markers.length) {
      const counts = new Map();
      for (const [, label, snapshot] of markers) {
        const key = (snapshot ? 'snapshot ' : '') + label;
        counts.set(key, (counts.get(key) || 0) + 1);
      }
      const names = [...counts].slice(0, 6).map(([k, n]) => (n > 1 ? k + ' \u00d7' + n : k));
      legend.prepend(el('span', { id: 'timeline-markers', text:
        'markers: ' + names.join(', ') + (counts.size > 6 ? ', \u2026' : '') +
        (data.timeline.markers_total > markers.length ? ' (' + markers.length + ' of ' +
          data.timeline.markers_total + ' shown)' : '') }));
    }
    const selection = svgEl('rect', { x: 0, y: T, width: 0, height: ph, class: 'selection' });
    const mark = svgEl('line', { x1: 0, x2: 0, y1: T, y2: T + ph, class: 'point-mark', visibility: 'hidden' });
    svg.append(selection, mark);
    const mapCursor = svgEl('line', { x1: 0, x2: 0, y1: T, y2: T + ph, class: 'map-cursor',
      id: 'timeline-map-cursor', visibility: 'hidden' });
    mapCursor.append(svgEl('title', {}, 'the memory map\'s moment'));
    svg.append(mapCursor);
    showMapCursor = (s) => {
      mapCursor.setAttribute('x1', X(s));
      mapCursor.setAttribute('x2', X(s));
      mapCursor.setAttribute('visibility', 'visible');
    };
    const overlay = svgEl('rect', { x: L, y: T, width: pw, height: ph, fill: 'transparent', id: 'timeline-plot' });
    svg.append(overlay);
    document.getElementById('timeline-chart').append(legend, svg);

    const toSeconds = (clientX) => {
      const box = svg.getBoundingClientRect();
      const x = (clientX - box.left) / box.width * W;
      return Math.min(Math.max((x - L) / pw, 0), 1) * duration;
    };
    let dragStart = null;
    overlay.addEventListener('pointerdown', (e) => {
      dragStart = toSeconds(e.clientX);
      overlay.setPointerCapture(e.pointerId);
      selection.setAttribute('x', X(dragStart));
      selection.setAttribute('width', 0);
    });
    overlay.addEventListener('pointermove', (e) => {
      if (dragStart === null) return;
      const s = toSeconds(e.clientX);
      selection.setAttribute('x', X(Math.min(s, dragStart)));
      selection.setAttribute('width', Math.abs(X(s) - X(dragStart)));
    });
    overlay.addEventListener('pointerup', (e) => {
      if (dragStart === null) return;
      const end = toSeconds(e.clientX);
      const start = dragStart;
      dragStart = null;
      if (Math.abs(X(end) - X(start)) >= 4) {  // a range
        pendingPoint = null;
        mark.setAttribute('visibility', 'hidden');
        showDiff(nearestCheckpoint(Math.min(start, end)), nearestCheckpoint(Math.max(start, end)));
        return;
      }
      selection.setAttribute('width', 0);
      for (const follow of momentListeners) follow(end);
      if (pendingPoint === null) {  // one moment: its snapshot
        pendingPoint = end;
        mark.setAttribute('x1', X(end));
        mark.setAttribute('x2', X(end));
        mark.setAttribute('visibility', 'visible');
        showSnapshot(nearestCheckpoint(end));
      } else {  // a second: the diff
        const first = pendingPoint;
        pendingPoint = null;
        selection.setAttribute('x', X(Math.min(first, end)));
        selection.setAttribute('width', Math.abs(X(end) - X(first)));
        mark.setAttribute('visibility', 'hidden');
        showDiff(nearestCheckpoint(Math.min(first, end)), nearestCheckpoint(Math.max(first, end)));
      }
    });
    document.getElementById('diff-go').addEventListener('click', () => {
      const from = parseFloat(document.getElementById('diff-from').value);
      const to = parseFloat(document.getElementById('diff-to').value);
      if (Number.isFinite(from) && Number.isFinite(to)) {
        selection.setAttribute('x', X(Math.min(from, to)));
        selection.setAttribute('width', Math.abs(X(to) - X(from)));
        showDiff(nearestCheckpoint(Math.min(from, to)), nearestCheckpoint(Math.max(from, to)));
      }
    });
  }

  // --- resident memory, explained -------------------------------------------------------------
  // The parts at each mapping sample, stacked (resident_parts in the data; docs/rss.md); the
  // table gives the sample clicked (the last one at first).
  function renderResident() {
    const rp = data.resident_parts;
    if (!rp) return;
    document.getElementById('rss').hidden = false;
    document.getElementById('rss-link').hidden = false;
    const { W, H, L, R, T, B } = TL;
    const parts = rp.parts;
    const samples = rp.samples;
    let top = 1;
    for (const s of samples) top = Math.max(top, s.slice(1).reduce((a, b) => a + b, 0));
    const pw = W - L - R;
    const ph = H - T - B;
    const X = (s) => L + Math.min(Math.max(s / duration, 0), 1) * pw;
    const Y = (b) => T + ph - (b / top) * ph;
    const svg = svgEl('svg', { viewBox: '0 0 ' + W + ' ' + H, id: 'rss-svg', role: 'img',
      'aria-label': 'resident memory by part over time' });
    for (let k = 0; k <= 4; ++k) {
      const b = top * k / 4;
      svg.append(svgEl('line', { x1: L, x2: W - R, y1: Y(b), y2: Y(b), stroke: '#eef0f4' }));
      svg.append(svgEl('text', { x: L - 6, y: Y(b) + 4, 'text-anchor': 'end', class: 'axis' }, fmtBytes(Math.round(b))));
    }
    for (let k = 0; k <= 5; ++k) {
      const s = duration * k / 5;
      svg.append(svgEl('text', { x: X(s), y: H - 8, 'text-anchor': k === 5 ? 'end' : 'middle',
        class: 'axis' }, fmtSec(s)));
    }
    // Each part's band: from the parts below it to them plus it, holding until the next sample.
    const below = samples.map(() => 0);
    parts.forEach((part, p) => {
      if (!samples.some((s) => s[p + 1] > 0)) return;
      let upper = '';
      let lower = '';
      samples.forEach((s, i) => {
        const x0 = X(s[0]).toFixed(1);
        const x1 = X(i + 1 < samples.length ? samples[i + 1][0] : s[0]).toFixed(1);
        const y = Y(below[i] + s[p + 1]).toFixed(1);
        const yb = Y(below[i]).toFixed(1);
        upper += (i ? 'L' : 'M') + x0 + ',' + y + 'L' + x1 + ',' + y;
        lower = 'L' + x1 + ',' + yb + 'L' + x0 + ',' + yb + lower;
        below[i] += s[p + 1];
      });
      const band = svgEl('path', { d: upper + lower + 'Z', class: 'rss-part-' + p, 'data-part': part.part });
      band.append(svgEl('title', {}, part.title + ': ' + part.explanation));
      svg.append(band);
    });
    const cursor = svgEl('line', { x1: 0, x2: 0, y1: T, y2: T + ph, class: 'point-mark', visibility: 'hidden' });
    const overlay = svgEl('rect', { x: L, y: T, width: pw, height: ph, fill: 'transparent', id: 'rss-plot' });
    svg.append(cursor, overlay);
    const legend = el('p', { class: 'legend', id: 'rss-legend' });
    parts.forEach((part, p) => {
      if (samples.some((s) => s[p + 1] > 0)) {
        legend.append(el('span', { class: 'rss-key rss-part-' + p }), part.title);
      }
    });
    document.getElementById('rss-chart').append(legend, svg);

    function showSample(i) {
      const s = samples[i];
      const total = s.slice(1).reduce((a, b) => a + b, 0);
      const last = i === samples.length - 1;
      document.getElementById('rss-info').textContent = 'At ' + fmtSec(s[0]) + ': ' +
        fmtBytes(total) + ' resident' + (last ? ' (the last sample)' : '') +
        '. Blocks in use are counted as resident here; memlens rss counts them page by page.';
      const table = document.getElementById('rss-table');
      const head = el('thead', null, el('tr', null, el('th', { text: 'Part' }),
        el('th', { class: 'num', text: 'Resident' }), el('th', { class: 'num', text: 'Share' }),
        ...(last ? [el('th', { class: 'num', text: 'Virtual' })] : []),
        el('th', { text: 'What it is' })));
      const body = el('tbody');
      parts.forEach((part, p) => {
        body.append(el('tr', { data: { part: part.part } },
          el('td', null, el('span', { class: 'rss-key rss-part-' + p }), part.title),
          el('td', { class: 'num', title: fmtCount(s[p + 1]) + ' bytes', text: fmtBytes(s[p + 1]),
            data: { bytes: String(s[p + 1]) } }),
          el('td', { class: 'num', text: fmtPct(s[p + 1], total) }),
          ...(last ? [el('td', { class: 'num', text: fmtBytes(rp.last_virtual[p]) })] : []),
          el('td', { text: part.explanation })));
      });
      table.replaceChildren(head, body);
      cursor.setAttribute('x1', X(s[0]));
      cursor.setAttribute('x2', X(s[0]));
      cursor.setAttribute('visibility', 'visible');
    }
    overlay.addEventListener('click', (e) => {
      const box = svg.getBoundingClientRect();
      const seconds = Math.min(Math.max(((e.clientX - box.left) / box.width * W - L) / pw, 0), 1) * duration;
      let best = 0;  // the last sample at or before the moment
      for (let i = 0; i < samples.length && samples[i][0] <= seconds; ++i) best = i;
      showSample(best);
    });
    showSample(samples.length - 1);
  }

  // --- TopX table ------------------------------------------------------------------------------
  const TOP_COLUMNS = [
    ['Function', (r) => frameName(data.sites[r[0]]), 'fn'],
    ['Location', (r) => frameLocation(data.sites[r[0]]), ''],
    ['Module', (r) => baseName(frameModule(data.sites[r[0]])), ''],
    // The 4th: where a sampled capture's row holds the figure's standard error (its index + 9).
    ['Peak', (r) => r[3], 'bytes', 12],
    ['In use', (r) => r[5], 'bytes', 14],
    ['Allocated', (r) => r[2], 'bytes', 11],
    ['Allocations', (r) => r[1], 'count', 10],
    ['Temporary', (r) => r[8], 'count', 17],
    ['Python', (r) => (r[2] ? r[7] / r[2] : 0), 'pct'],
  ];
  const topState = { column: 3, descending: true, filter: '' };
  function renderTop() {
    const table = document.getElementById('top-table');
    const [, key, kind] = TOP_COLUMNS[topState.column];
    let rows = data.top;
    if (topState.filter) {
      rows = rows.filter((r) => {
        const f = data.sites[r[0]];
        return (frameName(f) + ' ' + frameFile(f) + ' ' + frameModule(f)).toLowerCase().includes(topState.filter);
      });
    }
    rows = rows.slice().sort((a, b) => {
      const x = key(a);
      const y = key(b);
      const c = typeof x === 'string' ? x.localeCompare(y) : x - y;
      return topState.descending ? -c : c;
    });
    const shown = rows.slice(0, 500);
    const head = el('tr');
    TOP_COLUMNS.forEach(([label, , k], i) => {
      const arrow = i === topState.column ? (topState.descending ? ' \u25bc' : ' \u25b2') : '';
      const th = el('th', { class: k && k !== 'fn' ? 'num' : '', 'aria-sort': i === topState.column
        ? (topState.descending ? 'descending' : 'ascending') : 'none', text: label + arrow,
        data: { column: String(i) } });
      th.addEventListener('click', () => {
        if (topState.column === i) topState.descending = !topState.descending;
        else { topState.column = i; topState.descending = !!TOP_COLUMNS[i][2] && TOP_COLUMNS[i][2] !== 'fn'; }
        renderTop();
      });
      head.append(th);
    });
    const body = el('tbody');
    for (const r of shown) {
      const f = data.sites[r[0]];
      const tr = el('tr');
      for (const [, get, k, error] of TOP_COLUMNS) {
        const v = get(r);
        const pm = error && r.length > error ? ' \u00b1' +
          (k === 'bytes' ? fmtBytes(Math.round(r[error])) : fmtCount(Math.round(r[error]))) : '';
        if (k === 'bytes') tr.append(el('td', { class: 'num', title: fmtCount(v) + ' bytes', text: fmtBytes(v) + pm }));
        else if (k === 'count') tr.append(el('td', { class: 'num', text: fmtCount(v) + pm }));
        else if (k === 'pct') tr.append(el('td', { class: 'num', text: r[2] ? (100 * v).toFixed(0) + '%' : '' }));
        else if (k === 'fn') tr.append(el('td', { class: 'fn', title: frameTitle(f), text: v }));
        else tr.append(el('td', { text: v }));
      }
      body.append(tr);
    }
    table.replaceChildren(el('thead', null, head), body);
    document.getElementById('top-info').textContent = 'Showing ' + fmtCount(shown.length) + ' of ' +
      fmtCount(rows.length) + ' rows (the report keeps the largest sites by each column; ' +
      fmtCount(data.site_count) + ' sites in the capture). Click a heading to sort.';
  }

  // --- sizes -----------------------------------------------------------------------------------
  function renderSizes() {
    const hist = data.size_histogram;
    const box = document.getElementById('size-chart');
    if (!hist.length) { box.append(el('p', { class: 'note', text: 'No allocations.' })); return; }
    const W = 1000;
    const H = 250;
    const L = 70;
    const T = 20;
    const B = 60;
    const bw = (W - L - 10) / hist.length;
    const svg = svgEl('svg', { viewBox: '0 0 ' + W + ' ' + H, id: 'size-svg', role: 'img',
      'aria-label': 'allocations by size' });
    const maxCount = Math.max(1, ...hist.map((b) => b[0]));
    const maxBytes = Math.max(1, ...hist.map((b) => b[1]));
    const ph = H - T - B;
    hist.forEach(([count, bytes, countError, bytesError], b) => {
      const x = L + b * bw;
      const lo = b === 0 ? 0 : 2 ** b;
      const hi = 2 ** (b + 1) - 1;
      const label = fmtBytes(lo) + ' - ' + fmtBytes(hi) + ': ' + fmtCount(count) + pmCount(countError) +
        ' allocations, ' + fmtBytes(bytes) + pmBytes(bytesError);
      const hc = ph * count / maxCount;
      const hb = ph * bytes / maxBytes;
      const r1 = svgEl('rect', { x: x + 1, y: T + ph - hc, width: bw / 2 - 1, height: hc, class: 'bar' });
      r1.append(svgEl('title', {}, label));
      const r2 = svgEl('rect', { x: x + bw / 2, y: T + ph - hb, width: bw / 2 - 1, height: hb, class: 'bar bytes' });
      r2.append(svgEl('title', {}, label));
      svg.append(r1, r2);
      if (b % 2 === 0 || hist.length < 16) {
        svg.append(svgEl('text', { x: x + bw / 2, y: T + ph + 14, 'text-anchor': 'middle', class: 'axis' },
          fmtBytes(lo).replace('.00', '')));
      }
    });
    svg.append(svgEl('text', { x: L, y: 12, class: 'axis' },
      'allocations (blue) and bytes (orange) by size, each bar scaled to its own maximum; sizes in powers of two'));
    box.append(svg);
  }

  // --- memory map ------------------------------------------------------------------------------
  function hex(n) { return '0x' + n.toString(16); }
  function renderMap() {
    const m = data.address_map;
    const table = document.getElementById('map-table');
    const head = el('tr', null, ...['Range', 'Span', 'In use', 'Fill', 'Blocks', 'Largest gap', 'Kind', 'Mostly from']
      .map((t, i) => el('th', { class: i >= 1 && i <= 5 ? 'num' : '', text: t })));
    const body = el('tbody');
    for (const [begin, end, inUse, blocks, gap, kind, frame, inUseError, blocksError] of m.regions) {
      const span = end - begin;
      const fill = el('span', { class: 'fill' });
      fill.style.width = Math.round(80 * Math.min(1, span ? inUse / span : 0)) + 'px';
      body.append(el('tr', null,
        el('td', { class: 'fn', text: hex(begin) + ' - ' + hex(end) }),
        el('td', { class: 'num', text: fmtBytes(span) }),
        el('td', { class: 'num', title: fmtCount(inUse) + ' bytes', text: fmtBytes(inUse) + pmBytes(inUseError) }),
        el('td', { class: 'num' }, el('span', { class: 'fill-wrap' }, fill), fmtPct(inUse, span)),
        el('td', { class: 'num', text: fmtCount(blocks) + pmCount(blocksError) }),
        el('td', { class: 'num', text: fmtBytes(gap) }),
        el('td', { text: kind }),
        el('td', { class: 'fn', title: frameTitle(frame), text: frameName(frame) + ' ' + frameLocation(frame) })));
    }
    table.replaceChildren(el('thead', null, head), body);
    document.getElementById('map-info').textContent = fmtCount(m.regions_total) +
      ' regions of live blocks at ' + data.capture.snapshot.label + ' (no gap over 1 MiB inside one)' +
      (m.regions.length < m.regions_total ? '; the ' + fmtCount(m.regions.length) + ' holding most are listed' : '') + '.';
    renderMapPlayback();
  }

  // A region's cells (base64, a byte each: 0 empty to 255 full) as a strip: one rectangle per
  // run of equal cells, its opacity the share in use. Text for assistive technology says how
  // many parts are full, partly used and empty.
  function occupancyStrip(cells, kind) {
    const bytes = atob(cells);
    const n = bytes.length;
    const svg = svgEl('svg', { viewBox: '0 0 ' + Math.max(n, 1) + ' 1', preserveAspectRatio: 'none',
      class: 'strip', role: 'img' });
    svg.append(svgEl('rect', { x: 0, y: 0, width: Math.max(n, 1), height: 1, class: 'strip-bg' }));
    let full = 0, empty = 0;
    for (let i = 0; i < n;) {
      const v = bytes.charCodeAt(i);
      let j = i + 1;
      while (j < n && bytes.charCodeAt(j) === v) ++j;
      if (v === 255) full += j - i;
      if (v === 0) empty += j - i;
      if (v) {
        svg.append(svgEl('rect', { x: i, y: 0, width: j - i, height: 1, 'fill-opacity': (v / 255).toFixed(3),
          class: 'strip-cell' + (kind === 'reserved' ? ' reserved' : '') }));
      }
      i = j;
    }
    svg.setAttribute('aria-label', n + ' parts: ' + full + ' full, ' + (n - full - empty) +
      ' partly used, ' + empty + ' empty');
    return svg;
  }

  // The playback: the frames of address_map.frames, one at a time.
  function renderMapPlayback() {
    const frames = data.address_map.frames || [];
    if (!frames.length) return;
    document.getElementById('map-playback').hidden = false;
    const slider = document.getElementById('map-slider');
    const play = document.getElementById('map-play');
    slider.max = String(frames.length - 1);
    let timer = null;
    function show(index) {
      const f = frames[index];
      slider.value = String(index);
      slider.setAttribute('aria-valuetext', fmtSec(f.seconds));
      document.getElementById('map-time').textContent = fmtSec(f.seconds) + ' (' + (index + 1) +
        ' of ' + frames.length + ')';
      showMapCursor(f.seconds);
      const figure = (id, bytes, text) => el('b', { id, title: fmtCount(bytes) + ' bytes',
        data: { bytes: String(bytes) }, text });
      document.getElementById('map-frame-info').replaceChildren('At ' + fmtSec(f.seconds) + ': ',
        figure('map-frame-in-use', f.in_use_bytes, fmtBytes(f.in_use_bytes) + pmBytes(f.in_use_bytes_error)),
        ' in use over ', figure('map-frame-span', f.span_bytes, fmtBytes(f.span_bytes)),
        ' of address space (', el('b', { id: 'map-frame-fill', text: fmtPct(f.in_use_bytes, f.span_bytes) }),
        ') in ' + fmtCount(f.regions_total) + ' region' + (f.regions_total === 1 ? '' : 's') +
        '; largest free gap ', figure('map-frame-gap', f.largest_gap, fmtBytes(f.largest_gap)),
        f.regions.length < f.regions_total ? '; the ' + f.regions.length + ' holding most are listed.' : '.');
      const head = el('tr', null, ...['Range', 'Where blocks sit', 'In use', 'Span', 'Fill',
        'Largest gap', 'Kind', 'Mostly from']
        .map((t, i) => el('th', { class: (i >= 2 && i <= 5) ? 'num' : '', text: t })));
      const body = el('tbody');
      for (const [begin, end, inUse, blocks, gap, kind, frame, cells, inUseError] of f.regions) {
        const span = end - begin;
        body.append(el('tr', { data: { begin: hex(begin), end: hex(end) } },
          el('td', { class: 'fn', text: hex(begin) + ' - ' + hex(end) }),
          el('td', null, occupancyStrip(cells, kind)),
          el('td', { class: 'num in-use', title: fmtCount(inUse) + ' bytes in ' + fmtCount(blocks) + ' blocks',
            data: { bytes: String(inUse) }, text: fmtBytes(inUse) + pmBytes(inUseError) }),
          el('td', { class: 'num span', title: fmtCount(span) + ' bytes', data: { bytes: String(span) },
            text: fmtBytes(span) }),
          el('td', { class: 'num fill-share', text: fmtPct(inUse, span) }),
          el('td', { class: 'num gap', title: fmtCount(gap) + ' bytes', data: { bytes: String(gap) },
            text: fmtBytes(gap) }),
          el('td', { text: kind }),
          el('td', { class: 'fn', title: frameTitle(frame), text: frameName(frame) + ' ' + frameLocation(frame) })));
      }
      document.getElementById('map-frame-table').replaceChildren(el('thead', null, head), body);
    }
    function stop() {
      if (timer !== null) clearInterval(timer);
      timer = null;
      play.textContent = 'Play';
      play.setAttribute('aria-pressed', 'false');
    }
    play.addEventListener('click', () => {
      if (timer !== null) return stop();
      if (Number(slider.value) >= frames.length - 1) show(0);  // from the start again
      play.textContent = 'Pause';
      play.setAttribute('aria-pressed', 'true');
      timer = setInterval(() => {
        const next = Number(slider.value) + 1;
        if (next >= frames.length) return stop();
        show(next);
      }, 400);
    });
    slider.addEventListener('input', () => { stop(); show(Number(slider.value)); });
    momentListeners.push((seconds) => {  // a moment clicked on the timeline: the nearest frame
      let best = 0;
      for (let i = 1; i < frames.length; ++i) {
        if (Math.abs(frames[i].seconds - seconds) < Math.abs(frames[best].seconds - seconds)) best = i;
      }
      stop();
      show(best);
    });
    show(frames.length - 1);
  }

  // --- a run's processes (memlens run --follow-children): the tree, each one's heap over time ---
  function renderProcesses() {
    const list = data.processes;
    if (!list) return;
    document.getElementById('processes').hidden = false;
    document.getElementById('processes-link').hidden = false;
    const runEnd = Math.max(duration, 1e-9, ...list.map((p) => p.end_s));
    const W = 320, H = 28;
    const head = el('tr', null, ...['Process', 'Peak', 'At exit', 'Heap in use over the run']
      .map((t, i) => el('th', { class: i === 1 || i === 2 ? 'num' : '', text: t })));
    const body = el('tbody');
    for (const p of list) {
      const top = Math.max(1, p.peak_bytes, ...p.timeline.filter((v, i) => i % 2 === 1));
      const x = (s) => (W * s / runEnd).toFixed(1);
      const y = (b) => (H - 2 - (H - 4) * b / top).toFixed(1);
      let d = 'M' + x(p.start_s) + ',' + y(0);
      for (let i = 0; i < p.timeline.length; i += 2) {
        d += ' H' + x(p.timeline[i]) + ' V' + y(p.timeline[i + 1]);
      }
      d += ' H' + x(p.end_s) + ' V' + y(0);
      const svg = svgEl('svg', { viewBox: '0 0 ' + W + ' ' + H, width: W, height: H,
        class: 'spark', 'data-pid': p.pid });
      svg.append(svgEl('rect', { x: x(p.start_s), y: 0, width: Math.max(1, x(p.end_s) - x(p.start_s)),
        height: H, class: 'spark-life' }));
      svg.append(svgEl('path', { d, class: 'spark-line' }));
      const name = el('td', { class: 'fn', title: p.capture });
      name.style.paddingLeft = (8 + 16 * p.depth) + 'px';
      name.textContent = p.pid + (p.forked ? ' (forked) ' : ' ') + p.command;
      body.append(el('tr', { data: { pid: String(p.pid) } }, name,
        el('td', { class: 'num', text: fmtBytes(p.peak_bytes) }),
        el('td', { class: 'num', text: fmtBytes(p.in_use_bytes) }),
        el('td', null, svg)));
    }
    document.getElementById('processes-table').replaceChildren(el('thead', null, head), body);
    document.getElementById('processes-info').textContent = list.length +
      ' processes, each under the one that started it; every figure and view of this page is ' +
      'theirs added up, each process at its own moment (its peak, its exit). Each line is a ' +
      "process's heap in use on the run's clock (" + runEnd.toFixed(3) + ' s), scaled to its own peak.';
  }

  document.getElementById('top-filter').addEventListener('input', (e) => {
    topState.filter = e.target.value.trim().toLowerCase();
    renderTop();
  });
  renderSummary();
  renderProcesses();
  renderFlameTabs();
  renderFlame();
  renderTimeline();
  renderResident();
  renderTop();
  renderSizes();
  renderMap();
  window.addEventListener('resize', () => renderFlame());
  document.body.dataset.readyMs = String(Math.round(performance.now()));  // for bench/report_paint.mjs
  document.body.dataset.ready = 'true';
})();
