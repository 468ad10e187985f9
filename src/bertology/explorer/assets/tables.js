/* tables.js: the task's tables in the overview: every table a report section shows for the task that is not per
 * head (bertology.explorer.tables), one collapsible table each, with the section's title, the file and its variant.
 * Exports taskTables. */
const {h, fmt} = app;

function cell(x) {
  return typeof x === 'number' ? (Number.isInteger(x) ? String(x) : fmt(x)) : (x === null ? '–' : String(x));
}
function taskTable(tb) {
  const more = tb.n_rows > tb.rows.length ? ` (first ${tb.rows.length} of ${tb.n_rows} rows)` : '';
  return h('details', {class: 'task-table', 'data-file': tb.file},
    h('summary', null, h('b', null, tb.title), ' ', h('code', null, tb.file), tb.variant ? ` · ${tb.variant}` : '',
      h('span', {class: 'muted'}, more)),
    h('table', {class: 'stats'}, h('thead', null, h('tr', null, tb.columns.map(c => h('th', null, c)))),
      h('tbody', null, tb.rows.map(r => h('tr', null, r.map(x => h('td', null, cell(x))))))));
}
// the task's tables, or null when it has none
function taskTables(t) {
  const tables = t.tables || [];
  if (!tables.length) return null;
  return h('div', {class: 'card', id: 'task-tables'}, h('h3', null, 'Task tables'),
    h('p', {class: 'desc'}, 'Tables of this task that are not per head, as the report shows them.'),
    tables.map(taskTable));
}

Object.assign(app, {taskTables});
