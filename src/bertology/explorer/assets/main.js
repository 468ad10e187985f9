/* main.js: the page frame (the header's task picker and tabs, the "What this page holds" card) and the start:
 * read the URL hash, render the selected view, follow the hash and the window's size. Sets render.about and
 * window.bertologyExplorer (data, state, attnRGB, viridis, rdbu, go, maps, fmt: for tests and the console). */
const {$, h, fmt, data, selection, task, render, go, readHash, attnRGB, VIRIDIS, RDBU, maps} = app;

// how to open an example of the store in a notebook
function notebookCode(t0) {
  const store = t0 ? t0.stores[t0.variants[t0.variants.length - 1]] : 'results/attention/TASK/finetuned.zarr';
  const name = t0 ? t0.task : 'TASK';
  return `import numpy as np
from bertology.store import open_store
ds = open_store("${store}")   # lazy, checked
print(ds.sizes["example"], "examples")
one = ds.attention.isel(example=123).sel(layer=2, head=5)           # 0-based layer/head
n = int(ds.length[123]); one = one[:n, :n].values                  # the real tokens only
# or plain xarray: xr.open_zarr(path); words: pd.read_parquet("results/attention/${name}/words.parquet")`;
}
function about() {
  const box = $('#about');
  const rows = data.tasks.map(t => h('li', null,
    `${t.display}: ${t.examples.filter(ex => !ex.probe).length} of ${t.store_examples} examples ` +
    `of the ${t.split} store` +
    (t.dropped ? ` (${t.dropped} more sampled but left out to keep the page small)` : '') +
    (t.notes.length ? ` — ${t.notes.join('; ')}` : '')));
  const code = notebookCode(task());
  box.replaceChildren(...[h('h3', null, 'What this page holds'),
    h('p', null, `Built from ${data.results} by bertology ${data.bertology_version} on ${data.generated}; ` +
      `model ${data.model || '?'}. ` +
      'Every number is read from the pipeline\'s CSVs and attention stores; nothing is recomputed. ' +
      'Attention maps are a sample of each store (the examples with token views first, then seeded by ' +
      `${data.seed}), rounded to 1/255 for display (±0.002); statistics keep 6 significant digits.`),
    h('ul', null, rows),
    data.skipped.length
      ? h('p', {class: 'muted'}, 'Skipped: ' + data.skipped.map(x => `${x.task} (${x.why})`).join('; ')) : null,
    h('p', null, 'Every other example, at full float16 precision, is in the stores; open one in a notebook:'),
    h('pre', null, code)].filter(x => x));
}
render.about = about;

function init() {
  if (!data.tasks.length) {
    $('#error').hidden = false;
    $('#error').textContent = 'No task with an attention store was found: run the pipeline first.';
    about();
    document.body.dataset.busy = '0';
    return;
  }
  const first = data.tasks[0];
  $('#meta').textContent = `model ${data.model || '?'} · ${data.tasks.map(t => t.display).join(', ')} · ` +
    `${first.layers} layers × ${first.heads} heads`;
  const tsel = $('#task');
  data.tasks.forEach((t, i) => tsel.append(h('option', {value: i}, t.display)));
  tsel.addEventListener('change', e => go({task: +e.target.value, example: 0}));
  for (const b of document.querySelectorAll('#tabs button')) {
    b.addEventListener('click', () => go({view: b.dataset.view}));
  }
  window.addEventListener('hashchange', () => { readHash(); go(); });
  let rt = null;
  window.addEventListener('resize', () => { clearTimeout(rt); rt = setTimeout(() => go(), 150); });
  readHash();
  go();
}
window.bertologyExplorer = {data, state: selection, attnRGB, viridis: VIRIDIS, rdbu: RDBU, go, maps, fmt};
init();
