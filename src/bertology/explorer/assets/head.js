/* head.js: the head view (selection.layer, selection.head): every statistic of the head, its sieve roles, and its
 * maps on the selected example (heatmap, line view, dependency arcs of the variant selection.hv).
 * Sets render.head. */
const {$, h, fmt, fmtInt, VARIANT_NAME, seg, selection, task, render, go, legend, VARIANT_COLOUR} = app;
const {maps, headMap, assignedRoles, sieveTable, histograms, seedValues, exampleNav, exampleText} = app;
const {heatmap, lineView, gammaSeg, arcView} = app;

// the values of metric m at cell i: one, or one per variant
const valuesAt = (m, i) => m.single ? [m.single[i]] : Object.values(m.variants).map(x => x[i]);

function headStatsTable(t, l, hd) {
  const i = l * t.heads + hd;
  const rows = [], skipped = new Set();
  let group = '';
  for (const m of t.metrics) {
    if (m.id.startsWith('sieve:') && m.id !== 'sieve:count') continue;
    const vals = valuesAt(m, i);
    if (vals.every(v => v === null)) { skipped.add(m.group); continue; }
    if (m.group !== group) { group = m.group; rows.push(h('tr', null, h('td', {class: 'grp', colspan: 4}, group))); }
    const ff = m.fmt === 'int' ? fmtInt : (x => fmt(x, 4));
    const cell = (v, variant, extra) => h('td', {'data-metric': m.id, 'data-variant': variant,
      'data-value': v === null ? '' : v}, ff(v), extra || '');
    if (m.single) {
      let extra = '';
      if (m.ci) extra = ` [${fmt(m.ci.low[i], 3)}, ${fmt(m.ci.high[i], 3)}]`;
      if (m.marks && m.marks.single && m.marks.single[i]) extra += ' ●';
      const over = m.seeds ? seedValues(m, i) : m.id.startsWith('seeds:') ? 'over seeds'
        : m.id === 'cosine' ? 'pre vs fine-tuned' : 'fine-tuned';
      rows.push(h('tr', null, h('td', null, m.label), h('td', {colspan: 2, class: 'muted'}, over),
        cell(m.single[i], 'single', extra)));
    } else {
      const pv = m.variants.pretrained ? m.variants.pretrained[i] : null;
      const fv = m.variants.finetuned ? m.variants.finetuned[i] : null;
      const mk = v => (m.marks && m.marks[v] && m.marks[v][i]) ? ' ●' : '';
      rows.push(h('tr', null, h('td', null, m.label), cell(pv, 'pretrained', mk('pretrained')),
        cell(fv, 'finetuned', mk('finetuned')),
        h('td', {class: 'muted'}, (pv === null || fv === null) ? '–' : fmt(fv - pv, 3))));
    }
  }
  const none = [...skipped].filter(g => !t.metrics.some(m => m.group === g && valuesAt(m, i).some(v => v !== null)));
  return h('div', null, h('table', {class: 'stats', id: 'head-stats'},
    h('thead', null, h('tr', null, h('th', null, 'statistic'), h('th', null, 'pretrained'), h('th', null, 'fine-tuned'),
      h('th', null, 'Δ'))),
    h('tbody', null, rows)),
  none.length ? h('p', {class: 'muted'}, `No value for this head: ${none.join('; ')}.`) : null);
}

// the title, the layer and head pickers, previous and next head
function headBar(t, l, hd) {
  const L = t.layers, H = t.heads;
  const options = (count, on) => Array.from({length: count},
    (_, i) => h('option', {value: i, selected: i === on}, i + 1));
  const lsel = h('select', {id: 'layer-select', onchange: e => go({layer: +e.target.value})}, options(L, l));
  const hsel = h('select', {id: 'head-select', onchange: e => go({head: +e.target.value})}, options(H, hd));
  const step = d => { const k = (l * H + hd + d + L * H) % (L * H); go({layer: Math.floor(k / H), head: k % H}); };
  return h('div', {class: 'card'}, h('div', {class: 'controls'},
    h('h2', {id: 'head-title', style: 'margin:0'}, `${t.display} · layer ${l + 1} · head ${hd + 1}`),
    h('label', null, 'layer ', lsel), h('label', null, 'head ', hsel),
    h('button', {onclick: () => step(-1)}, '‹ previous head'), h('button', {onclick: () => step(1)}, 'next head ›'),
    h('span', {class: 'muted'}, '0-based in the CSVs and the store: ', h('code', null, `layer=${l}, head=${hd}`))));
}
const keySwatch = (background, text) => h('span', null, h('i', {class: 'sw', style: `background:${background}`}), text);

async function renderHead() {
  const t = task(), root = $('#head'), l = selection.layer, hd = selection.head;
  const ex = t.examples[selection.example];
  const bufs = {};
  if (ex) for (const v of t.variants) bufs[v] = headMap(await maps(selection.task, selection.example, v), t, ex, l, hd);
  root.replaceChildren();
  root.append(headBar(t, l, hd));
  const statsCard = h('div', {class: 'card'}, h('h3', null, 'Statistics of this head'), headStatsTable(t, l, hd),
    h('p', {class: 'muted'}, '● marked (assigned, flagged or significant); Δ = fine-tuned − pretrained; ' +
      'intervals: paired bootstrap.'));
  const sieveCard = t.sieve
    ? h('div', {class: 'card'}, h('h3', null, 'Sieve roles (Pande et al.)'), sieveTable(t, l, hd)) : null;
  root.append(h('div', {class: 'row'}, statsCard, sieveCard));
  if (t.sieve) {
    root.append(h('div', {class: 'card'}, h('h3', null, 'Distribution of the sieve scores over examples, against τ'),
      histograms(t, l, hd, ex)));
  }
  if (!ex) { root.append(h('div', {class: 'card'}, 'No example of this task is embedded.')); return; }
  const pick = i => go({example: i});
  const figure = (v, drawing) => h('figure', null, h('figcaption', null, VARIANT_NAME[v]), drawing);
  root.append(h('div', {class: 'card', id: 'head-maps'}, h('h3', null, 'Attention maps on an example'),
    exampleNav(t, pick), exampleText(t, ex),
    h('div', {class: 'maps'}, t.variants.map(v => figure(v, heatmap(t, ex, bufs[v], v)))),
    h('div', {class: 'controls'},
      legend('attn', 0, 1, {label: 'attention (rows = queries, columns = keys)', gamma: true}), gammaSeg())));
  const variants = t.variants.map(v => [v, VARIANT_NAME[v]]);
  const hv = selection.hv;
  root.append(h('div', {class: 'card'}, h('h3', null, 'Line view (bertviz)'),
    h('p', {class: 'desc'}, 'Each query on the left sends lines to the keys on the right; line opacity = attention. ' +
      'Hover a query token to isolate it.'),
    h('div', {class: 'maps'}, t.variants.map(v => figure(v, lineView(t, ex, bufs[v], v))))));
  const roles = assignedRoles(t, hv, l, hd);
  const arc = arcView(t, ex, bufs[hv], hv, roles);
  const thr = h('select', {id: 'thr', onchange: e => go({thr: +e.target.value})},
    [0.05, 0.1, 0.2, 0.3, 0.5].map(x => h('option', {value: x, selected: x === selection.thr}, `≥ ${x}`)));
  root.append(h('div', {class: 'card', id: 'arc-card'}, h('h3', null, 'Dependency arcs over the attention (Dodrio)'),
    h('div', {class: 'controls'}, seg('hv', variants, hv, k => go({hv: k})), h('label', null, 'attention arcs ', thr),
      h('span', {class: 'keys'}, keySwatch('#e8590c', 'arc followed by this head'),
        keySwatch('#9fb3c8', 'other dependency arcs'),
        keySwatch(VARIANT_COLOUR[hv], 'attention (below, opacity = weight)'))),
    ex.words.length ? arc.summary : h('p', {class: 'muted'}, 'No words table for this example: attention arcs only.'),
    h('div', {style: 'overflow-x:auto'}, arc.svg)));
}

render.head = renderHead;
