/* claims.js: the claims of results/claims.csv in the overview: the claims matrix (claims down, tasks across, as
 * in the report) and the claim picker; a picked claim (selection.claim) outlines its heads in the grid.
 * Exports claimedHeads, claimMatrix, claimPicker. */
const {h, fmt, data, selection, go} = app;

// the heads behind the claim picked in the overview (cell indices l * H + h)
function claimedHeads(t) {
  const c = (t.claims || []).find(x => x.id === selection.claim);
  return new Set(c ? c.heads.map(([l, hd]) => l * t.heads + hd) : []);
}
// pick a claim on task index ti: its heads outlined, the grid on its statistic
function pickClaim(ti, id) {
  const t = data.tasks[ti], c = (t.claims || []).find(x => x.id === id);
  const m = c && c.statistic
    ? t.metrics.find(x => x.id === c.statistic || x.id.startsWith(c.statistic + ':')) : null;
  go(m ? {task: ti, claim: id, metric: m.id} : {task: ti, claim: id});
}
const verdictClass = c => c.verdict.replace(' ', '-');
// one cell of the matrix: the verdict as colour and word, the effect [interval] and what it rests on; a
// task-free claim (c.all) spans the tasks; a click picks the claim
function matrixCell(ti, c, span) {
  if (!c) return h('td', {class: 'mcell'});
  const on = selection.claim === c.id && (c.all || ti === selection.task);
  return h('td', {class: 'mcell c-' + verdictClass(c) + (on ? ' on' : ''),
    colspan: span || 1, 'data-claim': c.id, 'data-task': c.all ? 'all' : data.tasks[ti].task, title: c.rests_on || '',
    onclick: () => pickClaim(c.all ? selection.task : ti, c.id)},
  h('b', null, (c.all ? 'all tasks: ' : '') + c.verdict), h('span', null, c.effect || '–'),
  h('small', null, (c.rests_on || '').replace(/^no interval: /, '').split(';')[0].split(' (')[0]));
}
function claimMatrix() {
  const ids = [], first = {};
  for (const t of data.tasks) {
    for (const c of t.claims || []) if (!(c.id in first)) { ids.push(c.id); first[c.id] = c; }
  }
  if (!ids.length) return null;
  const rows = ids.map(id => {
    const c0 = first[id];
    const head = h('th', {class: 'mclaim'}, h('span', null, c0.statement), h('small', null, `${c0.paper} · ${id}`));
    if (c0.all) return h('tr', null, head, matrixCell(selection.task, c0, data.tasks.length));
    return h('tr', null, head, data.tasks.map((t, ti) => matrixCell(ti, (t.claims || []).find(x => x.id === id), 1)));
  });
  const tbl = h('table', {class: 'matrix', id: 'claims-matrix'},
    h('thead', null, h('tr', null, h('th', null, 'claim'), data.tasks.map(t => h('th', null, t.display || t.task)))),
    h('tbody', null, rows));
  const det = h('details', {id: 'claims-view', open: selection.claim ? null : ''},
    h('summary', null, `Claims matrix: ${ids.length} claims × ${data.tasks.length} task(s); ` +
      'click a cell to outline the heads behind the claim'),
    h('p', {class: 'desc'}, 'holds: the interval lies wholly on the paper\'s side of the null; ' +
      'contradicted: wholly on the other side; ',
    'inconclusive: it touches the null, or there is none; not computed: the run lacks the claim\'s tables.'), tbl);
  return det;
}
function claimPicker(t) {
  const cs = t.claims || [];
  if (!cs.length) return null;
  const sel = h('select', {id: 'claim', onchange: e => pickClaim(selection.task, e.target.value)},
    h('option', {value: ''}, '—'),
    cs.map(c => h('option', {value: c.id, selected: c.id === selection.claim}, `${c.id} (${c.verdict})`)));
  const c = cs.find(x => x.id === selection.claim);
  const info = c ? h('span', {id: 'claim-info', class: 'claim-info'},
    h('b', {class: 'v-' + verdictClass(c)}, c.verdict),
    ` ${c.effect || '–'} (holds if ${c.side} ${fmt(c.null)}) · ${c.paper}: ${c.statement}`,
    c.heads.length ? ` · ${c.heads.length} head(s) outlined` : '') : null;
  return h('div', {class: 'controls'}, h('label', null, 'claim ', sel), info);
}

Object.assign(app, {claimedHeads, claimMatrix, claimPicker});
