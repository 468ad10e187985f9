/* state.js: the page's data and its selection, kept in the URL hash, and go(), which changes the selection and
 * renders the selected view.
 *
 * data: the JSON in #explorer-data, written by bertology.explorer.load_explorer_data. Per task:
 *   metrics[]   per-head statistics, values row-major on the (layer, head) grid (index layer * H + head)
 *   sieve       roles, per-variant test table (index (layer * H + head) * R + role), score histograms
 *   examples[]  the sampled examples: tokens, words (text, pos, dep, head), maps per variant as
 *               base64(deflate(uint8 L*H*n*n)), value = level / 255; views {variant: {view: (n,)}},
 *               importance {importance: (n,)}, rho {view: {importance: rho}} (token views, when computed)
 *   token_views views and importances offered, what is missing and why, faithfulness.csv
 * selection: the task (index into data.tasks), the view and what each view shows. It lives in the URL hash
 * (#task=rte&view=head&layer=3&head=5&example=2...), so a view can be bookmarked; layers and heads are
 * numbered from 1 on the page, 0-based in the hash and the data.
 * render: the views' renderers (overview, head, example) and the page frame's (about), set by their modules.
 * Exports data, selection, task, render, go, readHash, showError. */
const {$, clamp, hideTip} = app;

const data = JSON.parse(document.getElementById('explorer-data').textContent);
const VIEWS = ['overview', 'head', 'example'];
const selection = {
  task: 0, view: 'overview', metric: '', ov: 'finetuned', layer: 0, head: 0, example: 0, hv: 'finetuned',
  exmode: 'both', thr: 0.1, gamma: 1, tvscale: 'words', tvfrom: 'min', claim: '',
};
const task = () => data.tasks[selection.task];
const render = {};

function readHash() {
  const q = new URLSearchParams(location.hash.slice(1));
  const ti = data.tasks.findIndex(t => t.task === q.get('task'));
  if (ti >= 0) selection.task = ti;
  for (const k of ['view', 'metric', 'ov', 'hv', 'exmode', 'tvscale', 'tvfrom', 'claim']) {
    if (q.has(k)) selection[k] = q.get(k);
  }
  for (const k of ['layer', 'head', 'example']) {
    if (q.has(k) && Number.isFinite(+q.get(k))) selection[k] = +q.get(k);
  }
  if (q.has('thr') && Number.isFinite(+q.get('thr'))) selection.thr = +q.get('thr');
  if (q.has('gamma')) selection.gamma = q.get('gamma') === '0.5' ? 0.5 : 1;
  sanitize();
}
function sanitize() {
  const t = task();
  if (!t) return;
  if (!VIEWS.includes(selection.view)) selection.view = 'overview';
  selection.layer = clamp(selection.layer | 0, 0, t.layers - 1);
  selection.head = clamp(selection.head | 0, 0, t.heads - 1);
  selection.example = clamp(selection.example | 0, 0, Math.max(0, t.examples.length - 1));
  if (!t.metrics.some(m => m.id === selection.metric)) selection.metric = defaultMetric(t);
  if (!t.variants.includes(selection.hv)) selection.hv = t.variants[t.variants.length - 1];
  if (!['words', 'all'].includes(selection.tvscale)) selection.tvscale = 'words';
  if (!['min', 'zero'].includes(selection.tvfrom)) selection.tvfrom = 'min';
  if (!(t.claims || []).some(c => c.id === selection.claim)) selection.claim = '';
}
function defaultMetric(t) {
  const pref = ['sieve:delimiter', 'sieve:count', 'cosine'];
  for (const p of pref) if (t.metrics.some(m => m.id === p)) return p;
  return t.metrics.length ? t.metrics[0].id : '';
}
function writeHash() {
  const sel = selection;
  const q = new URLSearchParams({task: task().task, view: sel.view, metric: sel.metric, ov: sel.ov,
    layer: sel.layer, head: sel.head, example: sel.example, hv: sel.hv, exmode: sel.exmode, thr: sel.thr,
    gamma: sel.gamma, tvscale: sel.tvscale, tvfrom: sel.tvfrom, claim: sel.claim});
  history.replaceState(null, '', '#' + q.toString());
  // inside the run's page of several models (results/explorer.html): tell it the selection, to show it beside
  if (window.parent !== window) window.parent.postMessage({bertologyExplorer: location.hash}, '*');
}

// body[data-busy] is '1' while a view renders; body[data-rendered] = 'view:count' once it has
let renderCount = 0;
async function go(patch) {
  Object.assign(selection, patch || {});
  sanitize();
  writeHash();
  document.body.dataset.busy = '1';
  hideTip();
  try {
    for (const b of document.querySelectorAll('#tabs button')) {
      b.classList.toggle('on', b.dataset.view === selection.view);
    }
    for (const v of VIEWS) {  // one view in the DOM at a time (ids stay unique)
      $('#' + v).hidden = v !== selection.view;
      if (v !== selection.view) $('#' + v).replaceChildren();
    }
    $('#task').value = String(selection.task);
    render.about();
    if (selection.view === 'overview') render.overview();  // synchronous: no maps to inflate
    else await render[selection.view]();
  } catch (err) {
    showError(err);
  } finally {
    renderCount += 1;
    document.body.dataset.rendered = `${selection.view}:${renderCount}`;
    document.body.dataset.busy = '0';
  }
}
function showError(err) {
  const box = $('#error');
  box.hidden = false;
  box.textContent = 'The explorer failed: ' + (err && err.message ? err.message : err) +
    (typeof DecompressionStream === 'undefined' ? ' — this browser lacks DecompressionStream; use a current ' +
      'Chrome, Edge, Firefox (113+) or Safari (16.4+).' : '');
  console.error(err);
}

Object.assign(app, {data, selection, task, render, go, readHash, showError});
