/* bertology explorer: plain JavaScript + SVG/canvas, no library, no network.
 *
 * Data: the JSON in #explorer-data, written by bertology.explorer.load_explorer_data. Per task:
 *   metrics[]   per-head statistics, values row-major on the (layer, head) grid (index layer * H + head)
 *   sieve       roles, per-variant test table (index (layer * H + head) * R + role), score histograms
 *   examples[]  the sampled examples: tokens, words (text, pos, dep, head), maps per variant as
 *               base64(deflate(uint8 L*H*n*n)), value = level / 255; views {variant: {view: (n,)}},
 *               importance {importance: (n,)}, rho {view: {importance: rho}} (token views, when computed)
 *   token_views views and importances offered, what is missing and why, faithfulness.csv
 * State lives in the URL hash (#task=rte&view=head&layer=3&head=5&example=2...), so a view can be
 * bookmarked; layers and heads are numbered from 1 on the page, 0-based in the hash and the data.
 */
(() => {
  'use strict';
  const D = JSON.parse(document.getElementById('explorer-data').textContent);
  const NS = 'http://www.w3.org/2000/svg';
  const VN = {pretrained: 'pretrained', finetuned: 'fine-tuned', diff: 'fine-tuned − pretrained', single: ''};
  const VCOL = {pretrained: '#486581', finetuned: '#c65d21'};

  // ------------------------------------------------------------------ small DOM helpers
  const $ = (sel, root = document) => root.querySelector(sel);
  function h(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    setAttrs(e, attrs);
    for (const k of kids.flat(Infinity)) if (k !== null && k !== undefined && k !== false) e.append(k instanceof Node ? k : String(k));
    return e;
  }
  function s(tag, attrs, ...kids) {
    const e = document.createElementNS(NS, tag);
    setAttrs(e, attrs);
    for (const k of kids.flat(Infinity)) if (k !== null && k !== undefined && k !== false) e.append(k instanceof Node ? k : String(k));
    return e;
  }
  function setAttrs(e, attrs) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else if (k === 'text') e.textContent = v;
      else e.setAttribute(k, v === true ? '' : v);
    }
  }
  const clamp = (x, a, b) => Math.max(a, Math.min(b, x));

  // ------------------------------------------------------------------ colour scales
  const hex = c => [1, 3, 5].map(i => parseInt(c.slice(i, i + 2), 16));
  function ramp(stops) {
    const rgb = stops.map(hex);
    return t => {
      const x = clamp(Number.isFinite(t) ? t : 0, 0, 1) * (rgb.length - 1);
      const i = Math.min(Math.floor(x), rgb.length - 2), f = x - i;
      return rgb[i].map((c, k) => Math.round(c + (rgb[i + 1][k] - c) * f));
    };
  }
  const css = c => `rgb(${c[0]},${c[1]},${c[2]})`;
  const VIRIDIS = ramp(['#440154', '#482878', '#3e4989', '#31688e', '#26828e', '#1f9e89', '#35b779', '#6ece58', '#b5de2b', '#fde725']);
  const RDBU = ramp(['#2166ac', '#4393c3', '#92c5de', '#d1e5f0', '#f7f7f7', '#fddbc7', '#f4a582', '#d6604d', '#b2182b']);
  const BLUES = ramp(['#ffffff', '#deebf7', '#c6dbef', '#9ecae1', '#6baed6', '#4292c6', '#2171b5', '#08519c', '#08306b']);
  const attnRGB = v => BLUES(S.gamma === 1 ? v : Math.pow(v, S.gamma));  // attention in [0, 1]; gamma 1 = linear
  const NA = '#e4e7eb';

  // ------------------------------------------------------------------ formatting
  function fmt(v, digits = 3) {
    if (v === null || v === undefined || !Number.isFinite(v)) return '–';
    if (v === 0) return '0';
    const a = Math.abs(v);
    if (a >= 1e4 || a < 1e-3) return v.toExponential(digits - 1).replace('e+', 'e');
    return String(Number(v.toPrecision(digits)));
  }
  const fmtP = p => (p === null || p === undefined) ? '–' : (p < 1e-4 ? p.toExponential(1) : String(Number(p.toPrecision(2))));
  const fmtInt = v => (v === null || v === undefined) ? '–' : String(Math.round(v));

  // ------------------------------------------------------------------ state and routing
  const S = {task: 0, view: 'overview', metric: '', ov: 'finetuned', layer: 0, head: 0, example: 0, hv: 'finetuned',
    exmode: 'both', thr: 0.1, gamma: 1, tvscale: 'words', tvfrom: 'min', claim: ''};
  const T = () => D.tasks[S.task];
  function readHash() {
    const q = new URLSearchParams(location.hash.slice(1));
    const ti = D.tasks.findIndex(t => t.task === q.get('task'));
    if (ti >= 0) S.task = ti;
    for (const k of ['view', 'metric', 'ov', 'hv', 'exmode', 'tvscale', 'tvfrom', 'claim']) if (q.has(k)) S[k] = q.get(k);
    for (const k of ['layer', 'head', 'example']) if (q.has(k) && Number.isFinite(+q.get(k))) S[k] = +q.get(k);
    if (q.has('thr') && Number.isFinite(+q.get('thr'))) S.thr = +q.get('thr');
    if (q.has('gamma')) S.gamma = q.get('gamma') === '0.5' ? 0.5 : 1;
    sanitize();
  }
  function sanitize() {
    const t = T();
    if (!t) return;
    if (!['overview', 'head', 'example'].includes(S.view)) S.view = 'overview';
    S.layer = clamp(S.layer | 0, 0, t.layers - 1);
    S.head = clamp(S.head | 0, 0, t.heads - 1);
    S.example = clamp(S.example | 0, 0, Math.max(0, t.examples.length - 1));
    if (!t.metrics.some(m => m.id === S.metric)) S.metric = defaultMetric(t);
    if (!t.variants.includes(S.hv)) S.hv = t.variants[t.variants.length - 1];
    if (!['words', 'all'].includes(S.tvscale)) S.tvscale = 'words';
    if (!['min', 'zero'].includes(S.tvfrom)) S.tvfrom = 'min';
    if (!(t.claims || []).some(c => c.id === S.claim)) S.claim = '';
  }
  function defaultMetric(t) {
    const pref = ['sieve:delimiter', 'sieve:count', 'cosine'];
    for (const p of pref) if (t.metrics.some(m => m.id === p)) return p;
    return t.metrics.length ? t.metrics[0].id : '';
  }
  function writeHash() {
    const q = new URLSearchParams({task: T().task, view: S.view, metric: S.metric, ov: S.ov, layer: S.layer,
      head: S.head, example: S.example, hv: S.hv, exmode: S.exmode, thr: S.thr, gamma: S.gamma, tvscale: S.tvscale, tvfrom: S.tvfrom,
      claim: S.claim});
    history.replaceState(null, '', '#' + q.toString());
  }
  let renderCount = 0;
  async function go(patch) {
    Object.assign(S, patch || {});
    sanitize();
    writeHash();
    document.body.dataset.busy = '1';
    hideTip();
    try {
      for (const b of document.querySelectorAll('#tabs button')) b.classList.toggle('on', b.dataset.view === S.view);
      for (const v of ['overview', 'head', 'example']) {  // one view in the DOM at a time (ids stay unique)
        $('#' + v).hidden = v !== S.view;
        if (v !== S.view) $('#' + v).replaceChildren();
      }
      $('#task').value = String(S.task);
      about();
      if (S.view === 'overview') renderOverview();
      else if (S.view === 'head') await renderHead();
      else await renderExample();
    } catch (err) {
      showError(err);
    } finally {
      renderCount += 1;
      document.body.dataset.rendered = `${S.view}:${renderCount}`;
      document.body.dataset.busy = '0';
    }
  }
  function showError(err) {
    const box = $('#error');
    box.hidden = false;
    box.textContent = 'The explorer failed: ' + (err && err.message ? err.message : err) +
      (typeof DecompressionStream === 'undefined' ? ' — this browser lacks DecompressionStream; use a current Chrome, Edge, Firefox (113+) or Safari (16.4+).' : '');
    console.error(err);
  }

  // ------------------------------------------------------------------ attention maps (inflated on demand, cached)
  const mapCache = new Map();
  async function maps(ti, ei, variant) {
    const key = `${ti}|${ei}|${variant}`;
    if (mapCache.has(key)) return mapCache.get(key);
    const t = D.tasks[ti], ex = t.examples[ei];
    const bin = atob(ex.maps[variant]);
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('deflate'));
    const out = new Uint8Array(await new Response(stream).arrayBuffer());
    if (out.length !== t.layers * t.heads * ex.n * ex.n) throw new Error(`maps of example ${ex.idx} have ${out.length} values, expected ${t.layers * t.heads * ex.n * ex.n}`);
    mapCache.set(key, out);
    return out;
  }
  const headMap = (buf, t, ex, l, hd) => buf.subarray((l * t.heads + hd) * ex.n * ex.n, (l * t.heads + hd + 1) * ex.n * ex.n);

  // ------------------------------------------------------------------ tooltip
  const tip = $('#tip');
  function showTip(evt, text) {
    tip.textContent = text;
    tip.hidden = false;
    const w = tip.offsetWidth, hh = tip.offsetHeight;
    let x = evt.clientX + 14, y = evt.clientY + 14;
    if (x + w > window.innerWidth - 4) x = evt.clientX - w - 10;
    if (y + hh > window.innerHeight - 4) y = evt.clientY - hh - 10;
    tip.style.left = x + 'px';
    tip.style.top = y + 'px';
  }
  const hideTip = () => { tip.hidden = true; };

  // ------------------------------------------------------------------ legends
  let gradId = 0;
  function legend(scale, lo, hi, {width = 260, label = '', ref = null, refLabel = '', gamma = false, rgb = null} = {}) {
    const id = 'g' + (gradId++);
    const f = rgb || (scale === 'div' ? RDBU : (scale === 'attn' ? attnRGB : VIRIDIS));
    const stops = [];
    for (let i = 0; i <= 10; i++) stops.push(s('stop', {offset: `${i * 10}%`, 'stop-color': css(f(i / 10))}));
    const x0 = 8, w = width - 16;
    const X = v => x0 + (hi === lo ? 0 : (v - lo) / (hi - lo)) * w;
    const ticks = scale === 'div' ? [lo, 0, hi] : (gamma ? [lo, 0.5, hi] : [lo, hi]);
    return s('svg', {class: 'legend', width, height: 42, 'data-lo': lo, 'data-hi': hi},
      s('defs', null, s('linearGradient', {id}, stops)),
      s('text', {x: x0, y: 10}, label),
      s('rect', {x: x0, y: 14, width: w, height: 10, fill: `url(#${id})`, stroke: '#bbb'}),
      ticks.map(v => [s('line', {x1: X(v), x2: X(v), y1: 24, y2: 28, stroke: '#555'}),
        s('text', {x: X(v), y: 39, 'text-anchor': v === lo ? 'start' : (v === hi ? 'end' : 'middle')}, fmt(v))]),
      (ref !== null && ref > lo && ref < hi) ? [s('line', {x1: X(ref), x2: X(ref), y1: 12, y2: 26, stroke: '#d64545', 'stroke-width': 2}),
        s('text', {x: X(ref), y: 39, 'text-anchor': 'middle', fill: '#d64545'}, refLabel)] : null);
  }

  // ------------------------------------------------------------------ overview
  function metricPanels(t, m) {
    if (m.single) return [{key: 'single', title: m.id.startsWith('seeds:') ? 'over the fine-tuning seeds' : m.id === 'cosine' ? 'pretrained vs fine-tuned' : 'fine-tuned model',
      values: m.single, marks: m.marks && m.marks.single, scale: m.scale}];
    const vs = Object.keys(m.variants);
    const diff = () => {
      const a = m.variants.pretrained, b = m.variants.finetuned;
      return a.map((x, i) => (x === null || b[i] === null) ? null : b[i] - x);
    };
    const panel = v => ({key: v, title: VN[v], values: m.variants[v], marks: m.marks && m.marks[v], scale: m.scale});
    const both = vs.includes('pretrained') && vs.includes('finetuned');
    if (S.ov === 'diff' && both) return [{key: 'diff', title: VN.diff, values: diff(), scale: 'div'}];
    if (S.ov === 'all' && both) return [panel('pretrained'), panel('finetuned'), {key: 'diff', title: VN.diff, values: diff(), scale: 'div'}];
    if (vs.includes(S.ov)) return [panel(S.ov)];
    return [panel(vs[vs.length - 1])];
  }
  function domain(values, scale) {
    const fin = values.filter(v => v !== null && Number.isFinite(v));
    if (!fin.length) return [0, 1];
    let lo = Math.min(...fin), hi = Math.max(...fin);
    if (scale === 'div') { const a = Math.max(Math.abs(lo), Math.abs(hi)) || 1; return [-a, a]; }
    if (lo === hi) { lo -= 0.5; hi += 0.5; }
    return [lo, hi];
  }
  function assignedRoles(t, v, l, hd) {
    const sv = t.sieve, st = sv && sv.stats[v];
    if (!st) return [];
    const R = sv.roles.length, base = (l * t.heads + hd) * R;
    return sv.roles.filter((r, k) => st.assigned[base + k]);
  }
  // a seed-statistics metric carries each fine-tuning seed's grid (m.seeds: seed -> values)
  function seedValues(m, i) {
    return 'per seed: ' + Object.entries(m.seeds).map(([sd, xs]) => `${sd}: ${fmt(xs[i], 3)}`).join(' · ');
  }
  function cellTip(t, m, l, hd) {
    const i = l * t.heads + hd;
    const lines = [`layer ${l + 1} · head ${hd + 1} — ${m.label}`];
    const ff = m.fmt === 'int' ? fmtInt : (x => fmt(x, 4));
    if (m.single) {
      lines.push(`value ${ff(m.single[i])}`);
      if (m.ci) lines.push(`interval [${fmt(m.ci.low[i], 4)}, ${fmt(m.ci.high[i], 4)}]`);
      if (m.marks && m.marks.single && m.marks.single[i]) lines.push(m.mark_label);
      if (m.seeds) lines.push(seedValues(m, i));
    } else {
      for (const v of Object.keys(m.variants)) {
        let line = `${VN[v]}: ${ff(m.variants[v][i])}`;
        if (m.marks && m.marks[v] && m.marks[v][i]) line += ` (${m.mark_label})`;
        if (m.id === 'sieve:count') line += ' ' + (assignedRoles(t, v, l, hd).join(', ') || 'no role');
        lines.push(line);
      }
    }
    lines.push('click: head view');
    return lines.join('\n');
  }
  // the heads behind the claim picked in the overview (cell indices l * H + h)
  function claimedHeads(t) {
    const c = (t.claims || []).find(x => x.id === S.claim);
    return new Set(c ? c.heads.map(([l, hd]) => l * t.heads + hd) : []);
  }
  // pick a claim on task index ti: its heads outlined, the grid on its statistic
  function pickClaim(ti, id) {
    const t = D.tasks[ti], c = (t.claims || []).find(x => x.id === id);
    const m = c && c.statistic ? t.metrics.find(x => x.id === c.statistic || x.id.startsWith(c.statistic + ':')) : null;
    go(m ? {task: ti, claim: id, metric: m.id} : {task: ti, claim: id});
  }
  // the claims matrix (claims down, tasks across, as in the report): each cell the verdict as colour and word, the
  // effect [interval] and what it rests on; a task-free claim one cell across the tasks; a click picks the claim
  function claimMatrix() {
    const ids = [], first = {};
    for (const t of D.tasks) for (const c of t.claims || []) if (!(c.id in first)) { ids.push(c.id); first[c.id] = c; }
    if (!ids.length) return null;
    const cell = (ti, c, span) => c ? h('td', {class: 'mcell c-' + c.verdict.replace(' ', '-') + (S.claim === c.id && (c.all || ti === S.task) ? ' on' : ''),
      colspan: span || 1, 'data-claim': c.id, 'data-task': c.all ? 'all' : D.tasks[ti].task, title: c.rests_on || '',
      onclick: () => pickClaim(c.all ? S.task : ti, c.id)},
      h('b', null, (c.all ? 'all tasks: ' : '') + c.verdict), h('span', null, c.effect || '–'),
      h('small', null, (c.rests_on || '').replace(/^no interval: /, '').split(';')[0].split(' (')[0])) : h('td', {class: 'mcell'});
    const rows = ids.map(id => {
      const c0 = first[id];
      const head = h('th', {class: 'mclaim'}, h('span', null, c0.statement), h('small', null, `${c0.paper} · ${id}`));
      if (c0.all) return h('tr', null, head, cell(S.task, c0, D.tasks.length));
      return h('tr', null, head, D.tasks.map((t, ti) => cell(ti, (t.claims || []).find(x => x.id === id), 1)));
    });
    const tbl = h('table', {class: 'matrix', id: 'claims-matrix'},
      h('thead', null, h('tr', null, h('th', null, 'claim'), D.tasks.map(t => h('th', null, t.display || t.task)))),
      h('tbody', null, rows));
    const det = h('details', {id: 'claims-view', open: S.claim ? null : ''},
      h('summary', null, `Claims matrix: ${ids.length} claims × ${D.tasks.length} task(s); click a cell to outline the heads behind the claim`),
      h('p', {class: 'desc'}, 'holds: the interval lies wholly on the paper\'s side of the null; contradicted: wholly on the other side; ',
        'inconclusive: it touches the null, or there is none; not computed: the run lacks the claim\'s tables.'), tbl);
    return det;
  }
  function claimPicker(t) {
    const cs = t.claims || [];
    if (!cs.length) return null;
    const sel = h('select', {id: 'claim', onchange: e => pickClaim(S.task, e.target.value)}, h('option', {value: ''}, '—'), cs.map(c => h('option', {value: c.id, selected: c.id === S.claim}, `${c.id} (${c.verdict})`)));
    const c = cs.find(x => x.id === S.claim);
    const info = c ? h('span', {id: 'claim-info', class: 'claim-info'},
      h('b', {class: 'v-' + c.verdict.replace(' ', '-')}, c.verdict), ` ${c.effect || '–'} (holds if ${c.side} ${fmt(c.null)}) · ${c.paper}: ${c.statement}`,
      c.heads.length ? ` · ${c.heads.length} head(s) outlined` : '') : null;
    return h('div', {class: 'controls'}, h('label', null, 'claim ', sel), info);
  }
  function gridSVG(t, m, panel, dom, cw, ch) {
    const L = t.layers, H = t.heads, lw = 34, th = 30, claimed = claimedHeads(t);
    const f = panel.scale === 'div' ? RDBU : VIRIDIS;
    const svg = s('svg', {width: lw + H * cw + 2, height: th + L * ch + 2, class: 'grid', 'data-panel': panel.key, 'data-metric': m.id});
    svg.append(s('text', {x: lw + H * cw / 2, y: 11, 'text-anchor': 'middle', 'font-size': 11, fill: '#486581'}, 'head'));
    svg.append(s('text', {x: 10, y: th + L * ch / 2, 'text-anchor': 'middle', 'font-size': 11, fill: '#486581',
      transform: `rotate(-90 10 ${th + L * ch / 2})`}, 'layer'));
    for (let hd = 0; hd < H; hd++) svg.append(s('text', {x: lw + hd * cw + cw / 2, y: th - 4, 'text-anchor': 'middle', 'font-size': 11}, hd + 1));
    for (let l = 0; l < L; l++) svg.append(s('text', {x: lw - 5, y: th + l * ch + ch / 2 + 4, 'text-anchor': 'end', 'font-size': 11}, l + 1));
    const showText = cw >= 34 && ch >= 18;
    for (let l = 0; l < L; l++) for (let hd = 0; hd < H; hd++) {
      const i = l * H + hd, v = panel.values[i];
      const t01 = v === null ? 0 : (dom[1] === dom[0] ? 0.5 : (v - dom[0]) / (dom[1] - dom[0]));
      const rgb = v === null ? null : f(t01);
      const g = s('g', null);
      const rect = s('rect', {x: lw + hd * cw + 1, y: th + l * ch + 1, width: cw - 2, height: ch - 2, rx: 2,
        fill: rgb ? css(rgb) : NA, class: 'cell' + (l === S.layer && hd === S.head ? ' sel' : '') + (claimed.has(i) ? ' claimed' : ''),
        'data-layer': l, 'data-head': hd, 'data-value': v === null ? '' : v,
        onclick: () => go({view: 'head', layer: l, head: hd}),
        onmousemove: e => showTip(e, cellTip(t, m, l, hd)), onmouseleave: hideTip});
      g.append(rect);
      if (showText) {
        const lum = rgb ? (0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]) : 230;
        g.append(s('text', {x: lw + hd * cw + cw / 2, y: th + l * ch + ch / 2 + 4, 'text-anchor': 'middle',
          'font-size': Math.min(11, cw / 4), fill: lum > 140 ? '#102a43' : '#fff', 'pointer-events': 'none'},
          m.fmt === 'int' ? fmtInt(v) : fmt(v, 2)));
      }
      if (panel.marks && panel.marks[i]) g.append(s('circle', {cx: lw + hd * cw + cw - 6, cy: th + l * ch + 6, r: 3.5,
        fill: '#d64545', stroke: '#fff', 'stroke-width': 1, 'pointer-events': 'none', class: 'mark'}));
      svg.append(g);
    }
    return svg;
  }
  function renderOverview() {
    const t = T(), root = $('#overview');
    root.replaceChildren();
    if (!t.metrics.length) { root.append(h('div', {class: 'card'}, 'No per-head statistics found for this task.')); return; }
    const m = t.metrics.find(x => x.id === S.metric);
    const sel = h('select', {id: 'metric', onchange: e => go({metric: e.target.value})});
    const groups = new Map();
    for (const x of t.metrics) { if (!groups.has(x.group)) groups.set(x.group, []); groups.get(x.group).push(x); }
    for (const [g, xs] of groups) sel.append(h('optgroup', {label: g}, xs.map(x => h('option', {value: x.id, selected: x.id === m.id}, x.label))));
    const byVariant = !!m.variants, both = byVariant && 'pretrained' in m.variants && 'finetuned' in m.variants;
    const seg = h('span', {class: 'seg', id: 'ov-variant'}, [['pretrained', 'pretrained'], ['finetuned', 'fine-tuned'], ['diff', 'difference'], ['all', 'all three']]
      .map(([k, lab]) => h('button', {class: (byVariant && S.ov === k) ? 'on' : '', 'data-ov': k,
        disabled: !byVariant || ((k === 'diff' || k === 'all') && !both) || (k !== 'diff' && k !== 'all' && !(k in m.variants)),
        onclick: () => go({ov: k})}, lab)));
    const panels = metricPanels(t, m);
    const avail = Math.max(320, root.clientWidth || document.body.clientWidth - 60) - 40;
    const pw = avail / panels.length - 20;
    const cw = clamp(Math.floor((pw - 40) / t.heads), 14, 64), ch = clamp(Math.round(cw * 0.62), 14, 36);
    // pretrained and fine-tuned share one scale so their colours compare; the difference has its own
    const shared = domain(panels.filter(p => p.scale !== 'div' || p.key !== 'diff').flatMap(p => p.values), m.scale);
    const diffDom = panels.some(p => p.key === 'diff') ? domain(panels.find(p => p.key === 'diff').values, 'div') : null;
    const grids = h('div', {class: 'grids'});
    for (const p of panels) {
      const dom = p.key === 'diff' ? diffDom : shared;
      grids.append(h('div', {class: 'panel'}, h('div', {class: 'grid-title'}, p.title),
        gridSVG(t, m, p, dom, cw, ch),
        legend(p.scale, dom[0], dom[1], {label: p.key === 'diff' ? 'difference' : m.label,
          ref: p.key === 'diff' ? null : (m.ref ?? null), refLabel: m.ref !== undefined ? `τ=${m.ref}` : ''})));
    }
    const marks = m.marks ? h('span', {class: 'keys'}, h('span', null, s('svg', {width: 10, height: 10}, s('circle', {cx: 5, cy: 5, r: 3.5, fill: '#d64545'})), ' ' + m.mark_label)) : null;
    root.append(h('div', {class: 'card'},
      claimMatrix(),
      claimPicker(t),
      h('div', {class: 'controls'}, h('label', null, 'statistic ', sel), seg, marks),
      h('p', {class: 'desc'}, m.desc, ' ', h('span', {class: 'muted'}, 'Source: ', h('code', null, `results/${m.source}`),
        '. Layers and heads numbered from 1; grey: no value. Click a head to open it.')),
      grids));
  }

  // ------------------------------------------------------------------ head view
  function exampleNav(t, onpick) {
    const sel = h('select', {id: 'example-select', onchange: e => onpick(+e.target.value)},
      t.examples.map((ex, i) => h('option', {value: i, selected: i === S.example},
        ex.probe ? `decoder probe ${-ex.idx} (n=${ex.n}): random tokens repeated twice`
          : `${tvMark(ex)}#${i + 1} (idx ${ex.idx}, n=${ex.n}) ${(ex.text_a || ex.tokens.slice(1, 9).join(' ')).slice(0, 70)}`)));
    const n = t.examples.length, probes = t.examples.filter(ex => ex.probe).length;
    return h('div', {class: 'exnav'}, 'example ',
      h('button', {onclick: () => onpick((S.example + n - 1) % n), title: 'previous example'}, '‹'), sel,
      h('button', {onclick: () => onpick((S.example + 1) % n), title: 'next example'}, '›'),
      h('span', {class: 'muted'}, `${n - probes} of ${t.store_examples} examples of the store (` +
        (t.examples.some(tvMark) ? 'those with token views first: ◆ every view, ◇ some; then a seeded sample)' : 'seeded sample)') +
        (probes ? `, then ${probes} sequence${probes > 1 ? 's' : ''} of the decoder probe` : '')));
  }
  // ◆ every token view (flow, importance), ◇ some; the list's examples with token scores come first
  function tvMark(ex) {
    const vs = Object.values(ex.views || {});
    if (!vs.length) return '';
    return (vs.some(m => m.flow) && ex.importance && Object.keys(ex.importance).length) ? '◆ ' : '◇ ';
  }
  function exampleText(t, ex) {
    const parts = [];
    if (ex.text_a !== undefined) {
      parts.push(h('div', null, h('b', null, ex.probe ? 'probe ' : t.pair ? 'A ' : 'text '), ex.text_a));
      if (ex.text_b) parts.push(h('div', null, h('b', null, 'B '), ex.text_b));
      if (ex.label) parts.push(h('div', null, h('b', null, 'label '), ex.label));
    }
    parts.push(h('div', {class: 'muted'}, ex.probe ? `sequence ${ex.pos} of the probe stores (attention/${t.task}/probe-*.zarr) · ${ex.n} tokens`
      : `example_idx ${ex.idx} · store position ${ex.pos} · ${ex.n} wordpieces`));
    return h('div', {class: 'extext'}, parts);
  }
  function headStatsTable(t, l, hd) {
    const i = l * t.heads + hd;
    const rows = [], skipped = new Set();
    let group = '';
    for (const m of t.metrics) {
      if (m.id.startsWith('sieve:') && m.id !== 'sieve:count') continue;
      const vals = m.single ? [m.single[i]] : Object.values(m.variants).map(x => x[i]);
      if (vals.every(v => v === null)) { skipped.add(m.group); continue; }
      if (m.group !== group) { group = m.group; rows.push(h('tr', null, h('td', {class: 'grp', colspan: 4}, group))); }
      const ff = m.fmt === 'int' ? fmtInt : (x => fmt(x, 4));
      const cell = (v, variant, extra) => h('td', {'data-metric': m.id, 'data-variant': variant, 'data-value': v === null ? '' : v}, ff(v), extra || '');
      if (m.single) {
        let extra = '';
        if (m.ci) extra = ` [${fmt(m.ci.low[i], 3)}, ${fmt(m.ci.high[i], 3)}]`;
        if (m.marks && m.marks.single && m.marks.single[i]) extra += ' ●';
        rows.push(h('tr', null, h('td', null, m.label), h('td', {colspan: 2, class: 'muted'}, m.seeds ? seedValues(m, i) : m.id.startsWith('seeds:') ? 'over seeds' : m.id === 'cosine' ? 'pre vs fine-tuned' : 'fine-tuned'), cell(m.single[i], 'single', extra)));
      } else {
        const pv = m.variants.pretrained ? m.variants.pretrained[i] : null, fv = m.variants.finetuned ? m.variants.finetuned[i] : null;
        const mk = v => (m.marks && m.marks[v] && m.marks[v][i]) ? ' ●' : '';
        rows.push(h('tr', null, h('td', null, m.label), cell(pv, 'pretrained', mk('pretrained')), cell(fv, 'finetuned', mk('finetuned')),
          h('td', {class: 'muted'}, (pv === null || fv === null) ? '–' : fmt(fv - pv, 3))));
      }
    }
    const none = [...skipped].filter(g => !t.metrics.some(m => m.group === g && (m.single ? [m.single[i]] : Object.values(m.variants).map(x => x[i])).some(v => v !== null)));
    return h('div', null, h('table', {class: 'stats', id: 'head-stats'},
      h('thead', null, h('tr', null, h('th', null, 'statistic'), h('th', null, 'pretrained'), h('th', null, 'fine-tuned'), h('th', null, 'Δ'))),
      h('tbody', null, rows)), none.length ? h('p', {class: 'muted'}, `No value for this head: ${none.join('; ')}.`) : null);
  }
  function sieveTable(t, l, hd) {
    const sv = t.sieve, R = sv.roles.length, base = (l * t.heads + hd) * R;
    const vs = Object.keys(sv.stats);
    const head = h('tr', null, h('th', null, 'role'), vs.map(v => [h('th', null, `${VN[v]} bias`), h('th', null, 'p')]));
    const rows = sv.roles.map((r, k) => h('tr', {'data-role': r},
      h('td', null, r),
      vs.map(v => {
        const st = sv.stats[v], on = st.assigned[base + k];
        const style = on ? 'font-weight:700;color:#8d2b0b' : '';
        return [h('td', {style, 'data-role': r, 'data-variant': v, 'data-field': 'mean', 'data-value': st.mean[base + k] ?? ''}, fmt(st.mean[base + k], 3)),
          h('td', {style, 'data-role': r, 'data-variant': v, 'data-field': 'p_value', 'data-value': st.p_value[base + k] ?? '',
            'data-assigned': on ? '1' : '0', title: `t = ${fmt(st.t[base + k], 3)}, n = ${fmtInt(st.n[base + k])}`},
          fmtP(st.p_value[base + k]), on ? ' ✓' : '')];
      })));
    const roles = vs.map(v => h('div', null, h('b', null, VN[v] + ': '), assignedRoles(t, v, l, hd).join(', ') || 'no role'));
    return h('div', null, h('div', {class: 'desc'}, `One-sided t-test of H0: mean bias ≤ τ = ${sv.tau} over examples; assigned (✓, bold) when p < α = ${sv.alpha}` +
      (sv.correction !== 'none' ? ` (${sv.correction} adjusted)` : '') + '. Bias = n × mean attention to the role\'s tokens; 1 = uniform.'),
    h('div', {id: 'head-roles'}, roles), h('table', {class: 'stats', id: 'sieve-table'}, h('thead', null, head), h('tbody', null, rows)));
  }
  function histograms(t, l, hd, ex) {
    const sv = t.sieve;
    if (!sv.hist) return h('p', {class: 'muted'}, 'No per-example sieve scores (sieve_scores.npz) in this run.');
    const R = sv.roles.length, B = sv.bins, base = (l * t.heads + hd) * R;
    const W = 190, Hh = 62, x0 = 4, y0 = 48, w = W - 8;
    const out = h('div', {class: 'hists', id: 'sieve-hists'});
    for (let k = 0; k < R; k++) {
      const hi = sv.hi[base + k], X = v => x0 + clamp(v / hi, 0, 1) * w;
      const counts = {};
      let top = 1;
      for (const v of Object.keys(sv.hist)) {
        counts[v] = sv.hist[v].slice((base + k) * B, (base + k + 1) * B);
        top = Math.max(top, ...counts[v]);
      }
      const svg = s('svg', {width: W, height: Hh, 'data-role': sv.roles[k]});
      for (const v of Object.keys(counts)) {
        const pts = [`${x0},${y0}`];
        counts[v].forEach((c, b) => { const y = y0 - (c / top) * 40; pts.push(`${x0 + b * w / B},${y}`, `${x0 + (b + 1) * w / B},${y}`); });
        pts.push(`${x0 + w},${y0}`);
        svg.append(s('polyline', {points: pts.join(' '), fill: v === 'finetuned' ? 'rgba(198,93,33,.25)' : 'none',
          stroke: VCOL[v], 'stroke-width': 1.3, 'data-variant': v, 'data-counts': counts[v].join(',')}));
      }
      svg.append(s('line', {x1: x0, x2: x0 + w, y1: y0, y2: y0, stroke: '#999'}));
      svg.append(s('line', {x1: X(sv.tau), x2: X(sv.tau), y1: 4, y2: y0, stroke: '#d64545', 'stroke-dasharray': '3 2'}));
      svg.append(s('text', {x: X(sv.tau) + 2, y: 11, 'font-size': 10, fill: '#d64545'}, 'τ'));
      svg.append(s('text', {x: x0, y: Hh - 2, 'font-size': 10, fill: '#627d98'}, '0'));
      svg.append(s('text', {x: x0 + w, y: Hh - 2, 'font-size': 10, fill: '#627d98', 'text-anchor': 'end'}, fmt(hi)));
      for (const v of Object.keys(ex && ex.sieve || {})) {
        const sc = ex.sieve[v][base + k];
        if (sc === null || sc === undefined) continue;
        const x = X(sc);
        svg.append(s('path', {d: `M${x},${y0 + 1} l-4,7 h8 z`, fill: VCOL[v], 'data-example-score': sc, 'data-variant': v},
          s('title', null, `${VN[v]}: this example's score ${fmt(sc, 4)}`)));
      }
      const on = Object.keys(sv.stats).some(v => sv.stats[v].assigned[base + k]);
      const ft = sv.stats.finetuned ? 'finetuned' : Object.keys(sv.stats)[0];
      out.append(h('div', {class: 'hist' + (on ? ' assigned' : '')},
        h('div', {class: 'h'}, h('b', null, sv.roles[k]), h('span', {class: 'muted'}, `p=${fmtP(sv.stats[ft].p_value[base + k])}${sv.stats[ft].assigned[base + k] ? ' ✓' : ''}`)), svg));
    }
    return h('div', null, h('div', {class: 'keys'},
      Object.keys(sv.hist).map(v => h('span', null, h('i', {class: 'sw', style: `background:${VCOL[v]}`}), VN[v])),
      h('span', null, h('i', {class: 'sw', style: 'background:#d64545'}), `τ = ${sv.tau}`),
      h('span', null, '▲ this example'),
      h('span', null, `${Object.entries(sv.n_scored).map(([v, n]) => `${n} ${VN[v]}`).join(', ')} examples scored`)), out);
  }

  function heatmap(t, ex, buf, variant, {target = 440, labels = true} = {}) {
    const n = ex.n, c = clamp(Math.floor(target / n), 3, 20);
    const font = clamp(c - 2, 8, 11);
    const showLab = labels && c >= 7;
    const ctx0 = document.createElement('canvas').getContext('2d');
    ctx0.font = `${font}px system-ui,sans-serif`;
    const lw = showLab ? Math.min(90, Math.ceil(Math.max(...ex.tokens.map(x => ctx0.measureText(x).width))) + 6) : 2;
    const x0 = lw, y0 = lw, W = x0 + n * c + 2, Hh = y0 + n * c + 2;
    const dpr = window.devicePixelRatio || 1;
    const cv = h('canvas', {width: Math.round(W * dpr), height: Math.round(Hh * dpr), class: 'heatmap', 'data-variant': variant,
      'data-x0': x0, 'data-y0': y0, 'data-cell': c, 'data-n': n, 'data-dpr': dpr, style: `width:${W}px;height:${Hh}px`});
    const ctx = cv.getContext('2d');
    ctx.scale(dpr, dpr);
    ctx.fillStyle = '#fff';
    ctx.fillRect(0, 0, W, Hh);
    for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) {
      ctx.fillStyle = css(attnRGB(buf[i * n + j] / 255));
      ctx.fillRect(x0 + j * c, y0 + i * c, c, c);
    }
    ctx.strokeStyle = '#cbd2d9';
    ctx.strokeRect(x0 - 0.5, y0 - 0.5, n * c + 1, n * c + 1);
    if (showLab) {
      ctx.fillStyle = '#243b53';
      ctx.font = `${font}px system-ui,sans-serif`;
      ctx.textBaseline = 'middle';
      ctx.textAlign = 'right';
      const clip = x => x.length > 12 ? x.slice(0, 11) + '…' : x;
      for (let i = 0; i < n; i++) ctx.fillText(clip(ex.tokens[i]), x0 - 3, y0 + i * c + c / 2);
      for (let j = 0; j < n; j++) {
        ctx.save();
        ctx.translate(x0 + j * c + c / 2, y0 - 3);
        ctx.rotate(-Math.PI / 2);
        ctx.textAlign = 'left';
        ctx.fillText(clip(ex.tokens[j]), 0, 0);
        ctx.restore();
      }
    }
    cv.addEventListener('mousemove', e => {
      const r = cv.getBoundingClientRect();
      const j = Math.floor((e.clientX - r.left - x0) / c), i = Math.floor((e.clientY - r.top - y0) / c);
      if (i < 0 || j < 0 || i >= n || j >= n) { hideTip(); return; }
      showTip(e, `${VN[variant]}: query ${i + 1} “${ex.tokens[i]}” → key ${j + 1} “${ex.tokens[j]}”\nattention ${(buf[i * n + j] / 255).toFixed(4)} (±0.002 display rounding)`);
      tip.dataset.query = i; tip.dataset.key = j; tip.dataset.value = buf[i * n + j] / 255;
    });
    cv.addEventListener('mouseleave', hideTip);
    return cv;
  }

  function lineView(t, ex, buf, variant) {
    // bertviz head view: queries left, keys right, one line per pair, opacity = attention
    const n = ex.n, row = clamp(Math.floor(560 / n), 12, 18), lw = 96, W = 420, mid0 = lw + 10, mid1 = W - lw - 10;
    const Hh = n * row + 8;
    const svg = s('svg', {width: W, height: Hh, class: 'lines', 'data-variant': variant});
    const keyBg = [];
    for (let j = 0; j < n; j++) {
      const r = s('rect', {x: mid1 + 4, y: 4 + j * row, width: lw - 4, height: row - 1, fill: VCOL[variant], 'fill-opacity': 0});
      keyBg.push(r);
      svg.append(r);
    }
    const groups = [];
    for (let i = 0; i < n; i++) {
      const g = s('g', {'data-q': i});
      for (let j = 0; j < n; j++) {
        const q = buf[i * n + j];
        if (q < 3) continue;
        g.append(s('line', {x1: mid0, y1: 4 + i * row + row / 2, x2: mid1, y2: 4 + j * row + row / 2, stroke: VCOL[variant],
          'stroke-opacity': (q / 255).toFixed(3), 'stroke-width': 2}));
      }
      groups.push(g);
      svg.append(g);
    }
    const clip = x => x.length > 14 ? x.slice(0, 13) + '…' : x;
    const focus = i => {
      groups.forEach((g, k) => { g.style.display = (i === null || k === i) ? '' : 'none'; });
      keyBg.forEach((r, j) => r.setAttribute('fill-opacity', i === null ? 0 : (buf[i * n + j] / 255 * 0.8).toFixed(3)));
    };
    for (let i = 0; i < n; i++) {
      svg.append(s('text', {x: mid0 - 6, y: 4 + i * row + row / 2 + 4, 'text-anchor': 'end', 'font-size': Math.min(12, row - 2), class: 'tok',
        onmouseenter: () => focus(i), onmouseleave: () => focus(null)}, clip(ex.tokens[i])));
      svg.append(s('text', {x: mid1 + 6, y: 4 + i * row + row / 2 + 4, 'font-size': Math.min(12, row - 2), class: 'tok'}, clip(ex.tokens[i])));
    }
    return svg;
  }

  function wordLevel(ex, buf) {
    // Clark et al.: attention to a word = sum over its wordpieces; from a word = mean over its wordpieces
    const n = ex.n, W = ex.words.length, pieces = Array.from({length: W}, () => []);
    ex.word_ids.forEach((w, p) => { if (w >= 0 && w < W) pieces[w].push(p); });
    const M = Array.from({length: W}, () => new Float64Array(W));
    for (let u = 0; u < W; u++) {
      if (!pieces[u].length) continue;
      for (const t of pieces[u]) for (let v = 0; v < W; v++) for (const sp of pieces[v]) M[u][v] += buf[t * n + sp] / 255;
      for (let v = 0; v < W; v++) M[u][v] /= pieces[u].length;
    }
    return {M, pieces};
  }
  function followedArcs(ex, buf) {
    // an arc dependent -> head is followed when the dependent's most attended word is its head
    const {M, pieces} = wordLevel(ex, buf);
    return ex.words.map((w, u) => {
      const hw = w[3];
      if (hw === u || hw < 0 || hw >= ex.words.length || !pieces[u].length) return null;
      let best = -1, arg = -1;
      M[u].forEach((x, v) => { if (pieces[v].length && x > best) { best = x; arg = v; } });
      return {dep: u, head: hw, rel: w[2], followed: arg === hw, att: M[u][hw], argmax: arg};
    }).filter(x => x);
  }
  const ROLE_DEPS = {nsubj: ['nsubj'], dobj: ['dobj', 'obj'], amod: ['amod'], advmod: ['advmod']};

  function arcView(t, ex, buf, variant, roles) {
    // Dodrio-style: wordpieces in a row, dependency arcs above (orange = followed by this head), attention arcs below
    const n = ex.n;
    const ctx = document.createElement('canvas').getContext('2d');
    ctx.font = '12px system-ui,sans-serif';
    const widths = ex.tokens.map(x => Math.max(18, ctx.measureText(x).width + 10));
    const xs = [];
    let acc = 10;
    widths.forEach(w => { xs.push(acc + w / 2); acc += w; });
    const W = acc + 10;
    const arcs = followedArcs(ex, buf);
    const wx = u => { const ps = ex.word_ids.map((w, p) => w === u ? p : -1).filter(p => p >= 0); return ps.length ? ps.reduce((a, p) => a + xs[p], 0) / ps.length : null; };
    // dependency arc height grows with the number of words it spans (displaCy-like levels)
    const level = a => Math.abs(a.dep - a.head);
    const maxLevel = Math.max(1, ...arcs.map(level));
    const step = clamp(Math.floor(130 / maxLevel), 6, 16);
    const upH = ex.words.length ? 28 + maxLevel * step : 10;
    const baseY = upH + 14, downH = Math.min(170, 24 + W * 0.12);
    const Hh = baseY + 12 + downH;
    const svg = s('svg', {width: W, height: Hh, class: 'arcs', 'data-variant': variant});
    svg.append(s('defs', null,
      s('marker', {id: `ah-${variant}`, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 6, markerHeight: 6, orient: 'auto-start-reverse'},
        s('path', {d: 'M0,0 L10,5 L0,10 z', fill: '#829ab1'})),
      s('marker', {id: `ahf-${variant}`, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 6, markerHeight: 6, orient: 'auto-start-reverse'},
        s('path', {d: 'M0,0 L10,5 L0,10 z', fill: '#e8590c'}))));
    const roleRels = new Set(roles.flatMap(r => ROLE_DEPS[r] || []));
    for (const a of arcs) {
      const x1 = wx(a.head), x2 = wx(a.dep);
      if (x1 === null || x2 === null) continue;
      const ht = 10 + level(a) * step, y = baseY - 10;
      const col = a.followed ? '#e8590c' : '#9fb3c8';
      svg.append(s('path', {d: `M${x1},${y} C${x1},${y - ht} ${x2},${y - ht} ${x2},${y}`, fill: 'none', stroke: col,
        'stroke-width': a.followed ? 2.6 : 1.2, 'marker-end': `url(#${a.followed ? 'ahf' : 'ah'}-${variant})`,
        class: 'dep' + (a.followed ? ' followed' : ''), 'data-rel': a.rel, 'data-dep': a.dep, 'data-head': a.head},
      s('title', null, `${a.rel}: ${ex.words[a.dep][0]} → head ${ex.words[a.head][0]}; word-level attention ${fmt(a.att, 3)}` +
        (a.followed ? ' (followed: the dependent attends most to its head)' : ` (most attended: ${ex.words[a.argmax] ? ex.words[a.argmax][0] : '?'})`))));
      svg.append(s('text', {x: (x1 + x2) / 2, y: y - ht * 0.75 - 2, 'text-anchor': 'middle', 'font-size': 10,
        fill: a.followed ? '#e8590c' : '#627d98', 'font-weight': roleRels.has(a.rel) ? 700 : 400}, a.rel));
    }
    const groups = [];
    for (let i = 0; i < n; i++) {
      const g = s('g', {'data-q': i});
      for (let j = 0; j < n; j++) {
        const v = buf[i * n + j] / 255;
        if (j === i || v < S.thr) continue;
        const ht = Math.min(downH - 6, 10 + Math.abs(xs[j] - xs[i]) * 0.3), y = baseY + 8;
        g.append(s('path', {d: `M${xs[i]},${y} C${xs[i]},${y + ht} ${xs[j]},${y + ht} ${xs[j]},${y}`, fill: 'none',
          stroke: VCOL[variant], 'stroke-opacity': v.toFixed(3), 'stroke-width': 1 + 2.5 * v}));
      }
      groups.push(g);
      svg.append(g);
    }
    const focus = i => groups.forEach((g, k) => { g.style.display = (i === null || k === i) ? '' : 'none'; });
    for (let i = 0; i < n; i++) {
      svg.append(s('text', {x: xs[i], y: baseY + 4, 'text-anchor': 'middle', 'font-size': 12, class: 'tok',
        fill: ex.word_ids[i] < 0 ? '#829ab1' : '#102a43', onmouseenter: () => focus(i), onmouseleave: () => focus(null)}, ex.tokens[i]));
    }
    const nf = arcs.filter(a => a.followed);
    const summary = h('p', {class: 'desc', id: 'arc-summary'},
      `This head (${VN[variant]}) follows ${nf.length} of ${arcs.length} dependency arcs of this example` +
      (nf.length ? ': ' + nf.map(a => `${a.rel} (${ex.words[a.dep][0]} → ${ex.words[a.head][0]})`).join(', ') : '') +
      '. An arc is followed when the dependent\'s most attended word (Clark et al. word-level attention) is its syntactic head. ' +
      (roles.length ? `Its assigned sieve roles: ${roles.join(', ')} (bold arc labels).` : 'No sieve role assigned.'));
    return {svg, summary};
  }

  const gammaSeg = () => h('label', null, 'colour ', seg('gamma', [['1', 'linear'], ['0.5', '√ (shows small weights)']], String(S.gamma), k => go({gamma: +k})));
  function seg(id, items, cur, onpick) {
    return h('span', {class: 'seg', id}, items.map(([k, lab, dis]) => h('button', {class: cur === k ? 'on' : '', 'data-k': k, disabled: !!dis, onclick: () => onpick(k)}, lab)));
  }

  async function renderHead() {
    const t = T(), root = $('#head'), l = S.layer, hd = S.head;
    const ex = t.examples[S.example];
    const bufs = {};
    if (ex) for (const v of t.variants) bufs[v] = headMap(await maps(S.task, S.example, v), t, ex, l, hd);
    root.replaceChildren();
    const L = t.layers, H = t.heads;
    const lsel = h('select', {id: 'layer-select', onchange: e => go({layer: +e.target.value})}, Array.from({length: L}, (_, i) => h('option', {value: i, selected: i === l}, i + 1)));
    const hsel = h('select', {id: 'head-select', onchange: e => go({head: +e.target.value})}, Array.from({length: H}, (_, i) => h('option', {value: i, selected: i === hd}, i + 1)));
    const step = d => { const k = (l * H + hd + d + L * H) % (L * H); go({layer: Math.floor(k / H), head: k % H}); };
    root.append(h('div', {class: 'card'}, h('div', {class: 'controls'},
      h('h2', {id: 'head-title', style: 'margin:0'}, `${t.display} · layer ${l + 1} · head ${hd + 1}`),
      h('label', null, 'layer ', lsel), h('label', null, 'head ', hsel),
      h('button', {onclick: () => step(-1)}, '‹ previous head'), h('button', {onclick: () => step(1)}, 'next head ›'),
      h('span', {class: 'muted'}, '0-based in the CSVs and the store: ', h('code', null, `layer=${l}, head=${hd}`)))));
    const statsCard = h('div', {class: 'card'}, h('h3', null, 'Statistics of this head'), headStatsTable(t, l, hd),
      h('p', {class: 'muted'}, '● marked (assigned, flagged or significant); Δ = fine-tuned − pretrained; intervals: paired bootstrap.'));
    const sieveCard = t.sieve ? h('div', {class: 'card'}, h('h3', null, 'Sieve roles (Pande et al.)'), sieveTable(t, l, hd)) : null;
    root.append(h('div', {class: 'row'}, statsCard, sieveCard));
    if (t.sieve) root.append(h('div', {class: 'card'}, h('h3', null, 'Distribution of the sieve scores over examples, against τ'), histograms(t, l, hd, ex)));
    if (!ex) { root.append(h('div', {class: 'card'}, 'No example of this task is embedded.')); return; }
    const pick = i => go({example: i});
    root.append(h('div', {class: 'card', id: 'head-maps'}, h('h3', null, 'Attention maps on an example'), exampleNav(t, pick), exampleText(t, ex),
      h('div', {class: 'maps'}, t.variants.map(v => h('figure', null, h('figcaption', null, VN[v]), heatmap(t, ex, bufs[v], v)))),
      h('div', {class: 'controls'}, legend('attn', 0, 1, {label: 'attention (rows = queries, columns = keys)', gamma: true}), gammaSeg())));
    const variants = t.variants.map(v => [v, VN[v]]);
    const hv = S.hv;
    root.append(h('div', {class: 'card'}, h('h3', null, 'Line view (bertviz)'),
      h('p', {class: 'desc'}, 'Each query on the left sends lines to the keys on the right; line opacity = attention. Hover a query token to isolate it.'),
      h('div', {class: 'maps'}, t.variants.map(v => h('figure', null, h('figcaption', null, VN[v]), lineView(t, ex, bufs[v], v))))));
    const roles = assignedRoles(t, hv, l, hd);
    const arc = arcView(t, ex, bufs[hv], hv, roles);
    const thr = h('select', {id: 'thr', onchange: e => go({thr: +e.target.value})}, [0.05, 0.1, 0.2, 0.3, 0.5].map(x => h('option', {value: x, selected: x === S.thr}, `≥ ${x}`)));
    root.append(h('div', {class: 'card', id: 'arc-card'}, h('h3', null, 'Dependency arcs over the attention (Dodrio)'),
      h('div', {class: 'controls'}, seg('hv', variants, hv, k => go({hv: k})), h('label', null, 'attention arcs ', thr),
        h('span', {class: 'keys'}, h('span', null, h('i', {class: 'sw', style: 'background:#e8590c'}), 'arc followed by this head'),
          h('span', null, h('i', {class: 'sw', style: 'background:#9fb3c8'}), 'other dependency arcs'),
          h('span', null, h('i', {class: 'sw', style: `background:${VCOL[hv]}`}), 'attention (below, opacity = weight)'))),
      ex.words.length ? arc.summary : h('p', {class: 'muted'}, 'No words table for this example: attention arcs only.'),
      h('div', {style: 'overflow-x:auto'}, arc.svg)));
  }

  // ------------------------------------------------------------------ example view
  function smallMap(ex, buf, size, variant) {
    const off = document.createElement('canvas');
    off.width = ex.n; off.height = ex.n;
    const octx = off.getContext('2d'), img = octx.createImageData(ex.n, ex.n);
    for (let k = 0; k < ex.n * ex.n; k++) {
      const c = attnRGB(buf[k] / 255);
      img.data[4 * k] = c[0]; img.data[4 * k + 1] = c[1]; img.data[4 * k + 2] = c[2]; img.data[4 * k + 3] = 255;
    }
    octx.putImageData(img, 0, 0);
    const cv = h('canvas', {width: size, height: size, 'data-variant': variant, style: `width:${size}px;height:${size}px;border:1px solid ${VCOL[variant]}`});
    const ctx = cv.getContext('2d');
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(off, 0, 0, size, size);
    return cv;
  }
  // ------------------------------------------------------------------ token views (Abnar & Zuidema 2020; Kobayashi et al. 2020)
  const YLORRD = ramp(['#ffffff', '#ffeda0', '#fed976', '#feb24c', '#fd8d3c', '#fc4e2a', '#e31a1c', '#bd0026', '#800026']);
  const TV = {
    raw: ['raw attention', 'the last layer\'s [CLS] row, heads averaged'],
    norm: ['norm-weighted', '‖Σ_h α_h[CLS, j] f_h(x_j)‖ of the last layer (Kobayashi et al. 2020)'],
    rollout: ['rollout', 'each layer\'s head-averaged attention mixed half and half with the identity, multiplied through the layers'],
    flow: ['flow', 'maximum flow from the token to the top [CLS] through the layered attention graph'],
    alti: ['ALTI', 'Ferrando et al. 2022: max(0, ‖y_i‖₁ − ‖y_i − T_i(x_j)‖₁) through attention, residual and LN1, rows normalised, rolled out'],
    globenc: ['GlobEnc', 'Modarressi et al. 2022: ‖contribution‖ through attention, residual and both LayerNorms, the raw norms rolled out (as the authors\' code)'],
    decompx: ['DecompX', 'Modarressi et al. 2023: the token\'s signed part of the predicted class\'s logit, decomposed through every layer and the head (pretrained: ‖part of the top [CLS]‖)'],
    value_zeroing: ['Value Zeroing', 'Mohebbi et al. 2023: cosine distance of each output when the token\'s values are zeroed, rows normalised, rolled out'],
    ablation: ['ablation importance', 'drop in the predicted class\'s probability when the token is replaced by the mask token'],
    gradient: ['input × gradient', 'Σ_d e_jd ∂p_c/∂e_jd at the embeddings\' output'],
  };
  const tvLabel = m => (TV[m] || [m])[0];
  const luminance = c => (0.299 * c[0] + 0.587 * c[1] + 0.114 * c[2]) / 255;
  function tokenViews(t, ex) {
    const tv = t.token_views;
    const card = h('div', {class: 'card', id: 'token-views'});
    const q = t.causal ? 'last token' : '[CLS]';  // the row the classifier reads: a decoder's last token
    card.append(h('h3', null, `Token views: what the top layer's ${q} sees of each token, pretrained next to fine-tuned`));
    if (!tv) { card.append(h('p', {class: 'muted'}, 'This page was built without token views.')); return card; }
    const variants = t.variants, views = ex.views || {}, imp = ex.importance || {};
    const rows = [...tv.views.map(m => ({m, kind: 'view'})), ...tv.importances.map(m => ({m, kind: 'importance'}))];
    // importance and signed views (DecompX) can be negative: diverging scale around 0
    const signed = m => tv.importances.includes(m) || (tv.signed || []).includes(m);
    const scoresOf = (v, r) => r.kind === 'view' ? (views[v] || {})[r.m] : (v === 'finetuned' ? imp[r.m] : undefined);
    const scaleAll = S.tvscale === 'all', fromMin = S.tvfrom === 'min';
    const inScale = p => scaleAll || ex.word_ids[p] >= 0;
    const notes = [];
    for (const v of variants) if (tv.missing[v]) notes.push(`${VN[v]}: ${tv.missing[v]}.`);
    if (tv.importance_missing) notes.push(tv.importance_missing + '.');
    if (tv.rho_missing) notes.push(tv.rho_missing + '.');
    for (const n of ex.views_note || []) notes.push(n + '.');
    const scored = variants.filter(v => !tv.missing[v]);
    if (scored.length && !variants.some(v => views[v])) notes.push(`Example idx ${ex.idx} has no token scores: the norm analyses score a seeded sample (analysis.norms.examples, ${scored.map(v => tv.scored[v]).join(' / ')} examples); the examples marked ◆ (every view) or ◇ in the list have them.`);
    card.append(h('p', {class: 'desc'}, `Each row colours the example's wordpieces by one view of how much the last layer's ${q} draws on them; ` +
      (t.causal ? 'a decoder: every view is read from the last token\'s row, [CLS] below means that token, and the ablation importance deletes the token (no mask token); ' : '') +
      'one colour scale per row, shared by both models, from the smallest (or 0) to the largest score of either model on the ' +
      (scaleAll ? 'example\'s tokens' : 'example\'s words ([CLS], [SEP] and other specials outside it are clipped, dashed)') +
      '; importance rows are symmetric around 0. ' +
      'ρ: Spearman\'s correlation of the view with the fine-tuned classifier\'s importance over this example\'s ordinary tokens (faithfulness_examples.csv; mean over examples in faithfulness.csv). Hover a token to find it in every row.'));
    card.append(h('div', {class: 'controls'}, h('label', null, 'colour scale over ',
      seg('tvscale', [['words', 'words only'], ['all', 'all tokens']], scaleAll ? 'all' : 'words', k => go({tvscale: k}))),
      h('label', null, 'scores from ', seg('tvfrom', [['min', 'the row\'s minimum'], ['zero', '0']], S.tvfrom, k => go({tvfrom: k})))));
    if (notes.length) card.append(h('ul', {class: 'tv-notes'}, notes.map(n => h('li', null, n))));
    const grid = h('div', {class: 'tv-grid', style: `grid-template-columns:minmax(150px,190px) repeat(${variants.length}, minmax(0,1fr))`});
    grid.append(h('div', {class: 'tv-corner'}), ...variants.map(v => h('div', {class: 'tv-vhead', 'data-variant': v, style: `border-color:${VCOL[v]}`}, VN[v])));
    const highlight = p => { for (const e of card.querySelectorAll('.tv-tok')) e.classList.toggle('hl', p !== null && +e.dataset.pos === p); };
    for (const r of rows) {
      const per = Object.fromEntries(variants.map(v => [v, scoresOf(v, r)]));
      // signed rows: symmetric around 0; the others from 0 or from the row's minimum (rollout and flow are flat)
      let hi = 0, lo = Infinity;
      for (const sc of Object.values(per)) if (sc) sc.forEach((x, p) => {
        if (x !== null && inScale(p)) { hi = Math.max(hi, signed(r.m) ? Math.abs(x) : x); lo = Math.min(lo, x); }
      });
      lo = signed(r.m) ? -hi : (fromMin && Number.isFinite(lo) && lo < hi ? lo : 0);
      const colour = x => signed(r.m) ? RDBU(hi ? (x / hi + 1) / 2 : 0.5) : YLORRD(hi > lo ? (x - lo) / (hi - lo) : 0);
      const anyScores = Object.values(per).some(x => x);
      grid.append(h('div', {class: 'tv-label', 'data-method': r.m}, h('b', {title: (TV[r.m] || ['', ''])[1]}, tvLabel(r.m)),
        h('div', {class: 'muted tv-what'}, (TV[r.m] || ['', ''])[1]),
        anyScores && hi > 0 ? legend(signed(r.m) ? 'div' : 'seq', lo, hi, {width: 170, label: '', rgb: signed(r.m) ? RDBU : YLORRD}) : null));
      for (const v of variants) {
        const sc = per[v];
        const cell = h('div', {class: 'tv-cell', 'data-variant': v, 'data-method': r.m});
        if (!sc) {
          let why;
          if (r.kind === 'importance' && v !== 'finetuned') why = 'importance is the fine-tuned classifier\'s only';
          else if (r.kind === 'importance') why = tv.importance_missing ? 'not computed (see above)' : 'not computed for this example: the importance runs on the flow examples (analysis.flow.examples)';
          else if (tv.missing[v]) why = 'no token scores for this model (see above)';
          else if (!views[v]) why = 'this example has no token scores';
          else if (r.m === 'flow') why = `not computed for this example: flow runs on a capped sample (analysis.flow.examples; ${tv.flow[v]} of ${tv.scored[v]} scored examples, marked ◆)`;
          else if ((tv.newer || []).includes(r.m) && ((tv.mixing || {})[v] === 0 || ((tv.methods || {})[v] && !tv.methods[v].includes(r.m)))) why = 'not computed for this model: the newer mixing views need post-LN layers bertology decomposes, or analysis.mixing_views.examples is 0 (the log of norms_views says which)';
          else if ((tv.newer || []).includes(r.m)) why = `not computed for this example: the newer mixing views run on a capped sample (analysis.mixing_views.examples; ${(tv.mixing || {})[v]} of ${tv.scored[v]} scored examples)`;
          else why = 'not computed for this example';
          cell.classList.add('tv-missing');
          cell.append(h('span', {class: 'muted'}, why));
          grid.append(cell);
          continue;
        }
        const order = sc.map((x, p) => [x, p]).filter(([x]) => x !== null).sort((a, b) => b[0] - a[0]).map(([, p]) => p);
        const rank = new Map(order.map((p, k) => [p, k + 1]));
        const toks = h('div', {class: 'tv-toks'});
        ex.tokens.forEach((tok, p) => {
          const x = sc[p];
          const c = x === null ? null : colour(x);
          const clipped = x !== null && hi > 0 && (x > hi || x < lo);
          toks.append(h('span', {class: 'tv-tok' + (ex.word_ids[p] < 0 ? ' special' : '') + (clipped ? ' clipped' : ''),
            'data-pos': p, 'data-score': x === null ? '' : x,
            style: c ? `background:${css(c)};color:${luminance(c) < 0.5 ? '#fff' : '#102a43'}` : `background:${NA}`,
            onmouseenter: e => { highlight(p); showTip(e, `“${tok}” · position ${p}\n${tvLabel(r.m)} (${VN[v]}): ${x === null ? 'no value' : fmt(x, 4)}` +
              (x === null ? '' : `\nrank ${rank.get(p)} of ${order.length}`) + (clipped ? '\nabove the scale (clipped)' : '')); },
            onmouseleave: () => { highlight(null); hideTip(); }}, tok));
        });
        cell.append(toks);
        if (r.kind === 'view' && v === 'finetuned') {
          const rho = (ex.rho || {})[r.m] || {};
          const faith = (tv.faith || {})[r.m] || {};
          const iname = i => i === 'gradient' ? 'input × gradient' : i;
          const mean = i => faith[i] && faith[i].mean !== null ? ` (mean ${fmt(faith[i].mean, 2)}, n ${faith[i].n})` : '';
          if (tv.importances.some(i => i in rho)) {
            cell.append(h('div', {class: 'tv-rhos'}, tv.importances.filter(i => i in rho).map(i =>
              h('span', {class: 'tv-rho', 'data-importance': i, 'data-rho': rho[i] === null ? '' : rho[i]},
                `ρ with ${iname(i)} `, h('b', {title: rho[i] === null ? 'undefined: fewer than 3 tokens or a constant score' : ''}, fmt(rho[i], 2)),
                h('span', {class: 'muted'}, mean(i))))));
          } else if (!tv.rho_missing) {
            cell.append(h('div', {class: 'tv-rhos muted'}, 'ρ: this example has no importance' +
              (tv.importances.some(i => faith[i]) ? '; over the examples that have it: ' + tv.importances.filter(i => faith[i]).map(i => `${iname(i)}${mean(i)}`).join(', ') : '')));
          }
        }
        grid.append(cell);
      }
    }
    card.append(h('div', {style: 'overflow-x:auto'}, grid));
    return card;
  }

  async function renderExample() {
    const t = T(), root = $('#example');
    root.replaceChildren();
    const ex = t.examples[S.example];
    if (!ex) { root.append(h('div', {class: 'card'}, 'No example of this task is embedded.')); return; }
    const bufs = {};
    for (const v of t.variants) bufs[v] = await maps(S.task, S.example, v);
    const modes = [['both', 'pretrained | fine-tuned', t.variants.length < 2], ['pretrained', 'pretrained', !t.variants.includes('pretrained')],
      ['finetuned', 'fine-tuned', !t.variants.includes('finetuned')]];
    const shown = S.exmode === 'both' && t.variants.length === 2 ? t.variants : [t.variants.includes(S.exmode) ? S.exmode : t.variants[t.variants.length - 1]];
    const L = t.layers, H = t.heads;
    const avail = Math.max(400, (root.clientWidth || document.body.clientWidth - 60) - 80);
    const size = clamp(Math.floor((avail / H - 8 - 2 * shown.length) / shown.length), 16, 140);
    const grid = h('div', {class: 'sm-grid', id: 'sm-grid', style: `grid-template-columns:28px repeat(${H}, max-content)`});
    grid.append(h('div', {class: 'sm-lab'}, 'L\\H'));
    for (let hd = 0; hd < H; hd++) grid.append(h('div', {class: 'sm-lab'}, hd + 1));
    for (let l = 0; l < L; l++) {
      grid.append(h('div', {class: 'sm-lab'}, l + 1));
      for (let hd = 0; hd < H; hd++) {
        grid.append(h('div', {class: 'sm-cell', 'data-layer': l, 'data-head': hd, title: `layer ${l + 1} · head ${hd + 1}: click for the head view`,
          onclick: () => go({view: 'head', layer: l, head: hd})},
        shown.map(v => smallMap(ex, headMap(bufs[v], t, ex, l, hd), size, v))));
      }
    }
    root.append(h('div', {class: 'card'}, h('h3', null, `One example — ${t.display}`), exampleNav(t, i => go({example: i})), exampleText(t, ex)));
    if (!ex.probe) root.append(tokenViews(t, ex));  // the decoder probe's sequences are no text: no token views
    root.append(h('div', {class: 'card'}, h('h3', null, 'Every head on this example'),
      h('div', {class: 'controls'}, seg('exmode', modes, shown.length === 2 ? 'both' : shown[0], k => go({exmode: k})),
        h('span', {class: 'keys'}, t.variants.map(v => h('span', null, h('i', {class: 'sw', style: `background:${VCOL[v]}`}), `${VN[v]} (frame)`))),
        legend('attn', 0, 1, {label: 'attention', width: 200, gamma: true}), gammaSeg()),
      h('p', {class: 'desc'}, 'Rows: layers, columns: heads (from 1). Each map: queries down, keys across. Click a head to open it on this example.'),
      h('div', {style: 'overflow-x:auto'}, grid)));
  }

  // ------------------------------------------------------------------ page frame
  function about() {
    const box = $('#about');
    const rows = D.tasks.map(t => h('li', null, `${t.display}: ${t.examples.filter(ex => !ex.probe).length} of ${t.store_examples} examples of the ${t.split} store` +
      (t.dropped ? ` (${t.dropped} more sampled but left out to keep the page small)` : '') +
      (t.notes.length ? ` — ${t.notes.join('; ')}` : '')));
    const t0 = T();
    const code = `import numpy as np
from bertology.store import open_store
ds = open_store("${t0 ? t0.stores[t0.variants[t0.variants.length - 1]] : 'results/attention/TASK/finetuned.zarr'}")   # lazy, checked
print(ds.sizes["example"], "examples")
one = ds.attention.isel(example=123).sel(layer=2, head=5)           # 0-based layer/head
n = int(ds.length[123]); one = one[:n, :n].values                  # the real tokens only
# or plain xarray: xr.open_zarr(path); words: pd.read_parquet("results/attention/${t0 ? t0.task : 'TASK'}/words.parquet")`;
    box.replaceChildren(...[h('h3', null, 'What this page holds'),
      h('p', null, `Built from ${D.results} by bertology ${D.bertology_version} on ${D.generated}; model ${D.model || '?'}. ` +
        `Every number is read from the pipeline's CSVs and attention stores; nothing is recomputed. ` +
        `Attention maps are a sample of each store (the examples with token views first, then seeded by ${D.seed}), rounded to 1/255 for display (±0.002); statistics keep 6 significant digits.`),
      h('ul', null, rows),
      D.skipped.length ? h('p', {class: 'muted'}, 'Skipped: ' + D.skipped.map(x => `${x.task} (${x.why})`).join('; ')) : null,
      h('p', null, 'Every other example, at full float16 precision, is in the stores; open one in a notebook:'),
      h('pre', null, code)].filter(x => x));
  }
  function init() {
    if (!D.tasks.length) { $('#error').hidden = false; $('#error').textContent = 'No task with an attention store was found: run the pipeline first.'; about(); document.body.dataset.busy = '0'; return; }
    $('#meta').textContent = `model ${D.model || '?'} · ${D.tasks.map(t => t.display).join(', ')} · ${D.tasks[0].layers} layers × ${D.tasks[0].heads} heads`;
    const tsel = $('#task');
    D.tasks.forEach((t, i) => tsel.append(h('option', {value: i}, t.display)));
    tsel.addEventListener('change', e => go({task: +e.target.value, example: 0}));
    for (const b of document.querySelectorAll('#tabs button')) b.addEventListener('click', () => go({view: b.dataset.view}));
    window.addEventListener('hashchange', () => { readHash(); go(); });
    let rt = null;
    window.addEventListener('resize', () => { clearTimeout(rt); rt = setTimeout(() => go(), 150); });
    readHash();
    go();
  }
  window.bertologyExplorer = {data: D, state: S, attnRGB, viridis: VIRIDIS, rdbu: RDBU, go, maps, fmt};
  init();
})();
