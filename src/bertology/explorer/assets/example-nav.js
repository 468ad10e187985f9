/* example-nav.js: the example picker (selection.example) and the example's text, shared by the head and the
 * example views. Exports exampleNav, exampleText. */
const {h, selection} = app;

// ◆ every token view (flow, importance), ◇ some; the list's examples with token scores come first
function tvMark(ex) {
  const vs = Object.values(ex.views || {});
  if (!vs.length) return '';
  return (vs.some(m => m.flow) && ex.importance && Object.keys(ex.importance).length) ? '◆ ' : '◇ ';
}
function exampleOption(ex, i) {
  const start = (ex.text_a || ex.tokens.slice(1, 9).join(' ')).slice(0, 70);
  const text = ex.probe ? `decoder probe ${-ex.idx} (n=${ex.n}): random tokens repeated twice`
    : `${tvMark(ex)}#${i + 1} (idx ${ex.idx}, n=${ex.n}) ${start}`;
  return h('option', {value: i, selected: i === selection.example}, text);
}
// ‹ select › and where the examples come from; onpick(i) with the example's index in t.examples
function exampleNav(t, onpick) {
  const sel = h('select', {id: 'example-select', onchange: e => onpick(+e.target.value)},
    t.examples.map(exampleOption));
  const n = t.examples.length, probes = t.examples.filter(ex => ex.probe).length;
  return h('div', {class: 'exnav'}, 'example ',
    h('button', {onclick: () => onpick((selection.example + n - 1) % n), title: 'previous example'}, '‹'), sel,
    h('button', {onclick: () => onpick((selection.example + 1) % n), title: 'next example'}, '›'),
    h('span', {class: 'muted'}, `${n - probes} of ${t.store_examples} examples of the store (` +
      (t.examples.some(tvMark) ? 'those with token views first: ◆ every view, ◇ some; then a seeded sample)'
        : 'seeded sample)') +
      (probes ? `, then ${probes} sequence${probes > 1 ? 's' : ''} of the decoder probe` : '')));
}
function exampleText(t, ex) {
  const parts = [];
  if (ex.text_a !== undefined) {
    parts.push(h('div', null, h('b', null, ex.probe ? 'probe ' : t.pair ? 'A ' : 'text '), ex.text_a));
    if (ex.text_b) parts.push(h('div', null, h('b', null, 'B '), ex.text_b));
    if (ex.label) parts.push(h('div', null, h('b', null, 'label '), ex.label));
  }
  parts.push(h('div', {class: 'muted'}, ex.probe
    ? `sequence ${ex.pos} of the probe stores (attention/${t.task}/probe-*.zarr) · ${ex.n} tokens`
    : `example_idx ${ex.idx} · store position ${ex.pos} · ${ex.n} wordpieces`));
  return h('div', {class: 'extext'}, parts);
}

Object.assign(app, {exampleNav, exampleText});
