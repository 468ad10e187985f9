/* example.js: the example view (selection.example): the example's text, its token views, and every head's map
 * on it (selection.exmode: both models side by side, or one); a click on a map opens the head view.
 * Sets render.example. */
const {$, h, clamp, VARIANT_NAME, seg, selection, task, render, go, legend, VARIANT_COLOUR} = app;
const {maps, headMap, exampleNav, exampleText, smallMap, gammaSeg, tokenViews} = app;

async function renderExample() {
  const t = task(), root = $('#example');
  root.replaceChildren();
  const ex = t.examples[selection.example];
  if (!ex) { root.append(h('div', {class: 'card'}, 'No example of this task is embedded.')); return; }
  const bufs = {};
  for (const v of t.variants) bufs[v] = await maps(selection.task, selection.example, v);
  const modes = [['both', 'pretrained | fine-tuned', t.variants.length < 2],
    ['pretrained', 'pretrained', !t.variants.includes('pretrained')],
    ['finetuned', 'fine-tuned', !t.variants.includes('finetuned')]];
  const last = t.variants[t.variants.length - 1];
  const shown = selection.exmode === 'both' && t.variants.length === 2 ? t.variants
    : [t.variants.includes(selection.exmode) ? selection.exmode : last];
  const L = t.layers, H = t.heads;
  const avail = Math.max(400, (root.clientWidth || document.body.clientWidth - 60) - 80);
  const size = clamp(Math.floor((avail / H - 8 - 2 * shown.length) / shown.length), 16, 140);
  const grid = h('div', {class: 'sm-grid', id: 'sm-grid',
    style: `grid-template-columns:28px repeat(${H}, max-content)`});
  grid.append(h('div', {class: 'sm-lab'}, 'L\\H'));
  for (let hd = 0; hd < H; hd++) grid.append(h('div', {class: 'sm-lab'}, hd + 1));
  for (let l = 0; l < L; l++) {
    grid.append(h('div', {class: 'sm-lab'}, l + 1));
    for (let hd = 0; hd < H; hd++) {
      grid.append(h('div', {class: 'sm-cell', 'data-layer': l, 'data-head': hd,
        title: `layer ${l + 1} · head ${hd + 1}: click for the head view`,
        onclick: () => go({view: 'head', layer: l, head: hd})},
      shown.map(v => smallMap(ex, headMap(bufs[v], t, ex, l, hd), size, v))));
    }
  }
  root.append(h('div', {class: 'card'}, h('h3', null, `One example — ${t.display}`),
    exampleNav(t, i => go({example: i})), exampleText(t, ex)));
  if (!ex.probe) root.append(tokenViews(t, ex));  // the decoder probe's sequences are no text: no token views
  const keys = h('span', {class: 'keys'}, t.variants.map(v =>
    h('span', null, h('i', {class: 'sw', style: `background:${VARIANT_COLOUR[v]}`}), `${VARIANT_NAME[v]} (frame)`)));
  root.append(h('div', {class: 'card'}, h('h3', null, 'Every head on this example'),
    h('div', {class: 'controls'}, seg('exmode', modes, shown.length === 2 ? 'both' : shown[0], k => go({exmode: k})),
      keys, legend('attn', 0, 1, {label: 'attention', width: 200, gamma: true}), gammaSeg()),
    h('p', {class: 'desc'}, 'Rows: layers, columns: heads (from 1). Each map: queries down, keys across. ' +
      'Click a head to open it on this example.'),
    h('div', {style: 'overflow-x:auto'}, grid)));
}

render.example = renderExample;
