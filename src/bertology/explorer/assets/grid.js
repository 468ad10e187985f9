/* grid.js: the overview: one statistic (selection.metric) on the layer x head grid, per variant (selection.ov:
 * pretrained, finetuned, diff or all), with the claims above it; a click on a head opens the head view.
 * Exports seedValues; sets render.overview. */
const {taskTables, $, h, s, clamp, fmt, fmtInt, VARIANT_NAME, showTip, hideTip} = app;
const {selection, task, render, go} = app;
const {css, VIRIDIS, RDBU, NA, legend, assignedRoles, claimedHeads, claimMatrix, claimPicker} = app;

// the panels of metric m: its single grid, or the selected variant(s) and their difference
function metricPanels(t, m) {
  if (m.single) {
    const title = m.id.startsWith('seeds:') ? 'over the fine-tuning seeds'
      : m.id === 'cosine' ? 'pretrained vs fine-tuned' : 'fine-tuned model';
    return [{key: 'single', title, values: m.single, marks: m.marks && m.marks.single, scale: m.scale}];
  }
  const vs = Object.keys(m.variants);
  const diff = () => {
    const a = m.variants.pretrained, b = m.variants.finetuned;
    return a.map((x, i) => (x === null || b[i] === null) ? null : b[i] - x);
  };
  const panel = v => ({key: v, title: VARIANT_NAME[v], values: m.variants[v], marks: m.marks && m.marks[v],
    scale: m.scale});
  const diffPanel = () => ({key: 'diff', title: VARIANT_NAME.diff, values: diff(), scale: 'div'});
  const both = vs.includes('pretrained') && vs.includes('finetuned');
  if (selection.ov === 'diff' && both) return [diffPanel()];
  if (selection.ov === 'all' && both) return [panel('pretrained'), panel('finetuned'), diffPanel()];
  if (vs.includes(selection.ov)) return [panel(selection.ov)];
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
      let line = `${VARIANT_NAME[v]}: ${ff(m.variants[v][i])}`;
      if (m.marks && m.marks[v] && m.marks[v][i]) line += ` (${m.mark_label})`;
      if (m.id === 'sieve:count') line += ' ' + (assignedRoles(t, v, l, hd).join(', ') || 'no role');
      lines.push(line);
    }
  }
  lines.push('click: head view');
  return lines.join('\n');
}
// one panel's grid: cells cw x ch pixels coloured on the domain dom, the value written in when they are large
function gridSVG(t, m, panel, dom, cw, ch) {
  const L = t.layers, H = t.heads, lw = 34, th = 30, claimed = claimedHeads(t);
  const f = panel.scale === 'div' ? RDBU : VIRIDIS;
  const svg = s('svg', {width: lw + H * cw + 2, height: th + L * ch + 2, class: 'grid', 'data-panel': panel.key,
    'data-metric': m.id});
  svg.append(s('text', {x: lw + H * cw / 2, y: 11, 'text-anchor': 'middle', 'font-size': 11, fill: '#486581'}, 'head'));
  svg.append(s('text', {x: 10, y: th + L * ch / 2, 'text-anchor': 'middle', 'font-size': 11, fill: '#486581',
    transform: `rotate(-90 10 ${th + L * ch / 2})`}, 'layer'));
  for (let hd = 0; hd < H; hd++) {
    svg.append(s('text', {x: lw + hd * cw + cw / 2, y: th - 4, 'text-anchor': 'middle', 'font-size': 11}, hd + 1));
  }
  for (let l = 0; l < L; l++) {
    svg.append(s('text', {x: lw - 5, y: th + l * ch + ch / 2 + 4, 'text-anchor': 'end', 'font-size': 11}, l + 1));
  }
  const showText = cw >= 34 && ch >= 18;
  for (let l = 0; l < L; l++) for (let hd = 0; hd < H; hd++) {
    const i = l * H + hd, v = panel.values[i];
    const t01 = v === null ? 0 : (dom[1] === dom[0] ? 0.5 : (v - dom[0]) / (dom[1] - dom[0]));
    const rgb = v === null ? null : f(t01);
    const g = s('g', null);
    const cls = 'cell' + (l === selection.layer && hd === selection.head ? ' sel' : '') +
      (claimed.has(i) ? ' claimed' : '');
    const rect = s('rect', {x: lw + hd * cw + 1, y: th + l * ch + 1, width: cw - 2, height: ch - 2, rx: 2,
      fill: rgb ? css(rgb) : NA, class: cls,
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
    if (panel.marks && panel.marks[i]) {
      g.append(s('circle', {cx: lw + hd * cw + cw - 6, cy: th + l * ch + 6, r: 3.5,
        fill: '#d64545', stroke: '#fff', 'stroke-width': 1, 'pointer-events': 'none', class: 'mark'}));
    }
    svg.append(g);
  }
  return svg;
}
// the statistic picker, grouped as the registry groups them
function metricSelect(t, m) {
  const sel = h('select', {id: 'metric', onchange: e => go({metric: e.target.value})});
  const groups = new Map();
  for (const x of t.metrics) {
    if (!groups.has(x.group)) groups.set(x.group, []);
    groups.get(x.group).push(x);
  }
  for (const [g, xs] of groups) {
    sel.append(h('optgroup', {label: g},
      xs.map(x => h('option', {value: x.id, selected: x.id === m.id}, x.label))));
  }
  return sel;
}
// pretrained | fine-tuned | difference | all three, for a metric per variant
function variantSeg(m) {
  const byVariant = !!m.variants, both = byVariant && 'pretrained' in m.variants && 'finetuned' in m.variants;
  const items = [['pretrained', 'pretrained'], ['finetuned', 'fine-tuned'], ['diff', 'difference'],
    ['all', 'all three']];
  const disabled = k => !byVariant || ((k === 'diff' || k === 'all') && !both) ||
    (k !== 'diff' && k !== 'all' && !(k in m.variants));
  return h('span', {class: 'seg', id: 'ov-variant'}, items.map(([k, lab]) =>
    h('button', {class: (byVariant && selection.ov === k) ? 'on' : '', 'data-ov': k, disabled: disabled(k),
      onclick: () => go({ov: k})}, lab)));
}
function renderOverview() {
  const t = task(), root = $('#overview');
  root.replaceChildren();
  if (!t.metrics.length) {
    root.append(h('div', {class: 'card'}, 'No per-head statistics found for this task.'), taskTables(t));
    return;
  }
  const m = t.metrics.find(x => x.id === selection.metric);
  const sel = metricSelect(t, m);
  const variants = variantSeg(m);
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
  const dot = () => s('svg', {width: 10, height: 10}, s('circle', {cx: 5, cy: 5, r: 3.5, fill: '#d64545'}));
  const marks = m.marks ? h('span', {class: 'keys'}, h('span', null, dot(), ' ' + m.mark_label)) : null;
  root.append(h('div', {class: 'card'},
    claimMatrix(),
    claimPicker(t),
    h('div', {class: 'controls'}, h('label', null, 'statistic ', sel), variants, marks),
    h('p', {class: 'desc'}, m.desc, ' ', h('span', {class: 'muted'}, 'Source: ', h('code', null, `results/${m.source}`),
      '. Layers and heads numbered from 1; grey: no value. Click a head to open it.')),
    grids), taskTables(t));
}

render.overview = renderOverview;
Object.assign(app, {seedValues});
