/* sieve.js: the sieve roles of a head (Pande et al.): the roles assigned to it, its test table and the
 * histograms of the per-example scores against τ. data.tasks[].sieve indexes (layer * H + head) * R + role.
 * Exports assignedRoles, sieveTable, histograms. */
const {h, s, clamp, fmt, fmtP, fmtInt, VARIANT_NAME, VARIANT_COLOUR} = app;

function assignedRoles(t, v, l, hd) {
  const sv = t.sieve, st = sv && sv.stats[v];
  if (!st) return [];
  const R = sv.roles.length, base = (l * t.heads + hd) * R;
  return sv.roles.filter((r, k) => st.assigned[base + k]);
}
function sieveTable(t, l, hd) {
  const sv = t.sieve, R = sv.roles.length, base = (l * t.heads + hd) * R;
  const vs = Object.keys(sv.stats);
  const head = h('tr', null, h('th', null, 'role'),
    vs.map(v => [h('th', null, `${VARIANT_NAME[v]} bias`), h('th', null, 'p')]));
  const rows = sv.roles.map((r, k) => h('tr', {'data-role': r},
    h('td', null, r),
    vs.map(v => {
      const st = sv.stats[v], on = st.assigned[base + k];
      const style = on ? 'font-weight:700;color:#8d2b0b' : '';
      const at = {'data-role': r, 'data-variant': v};
      return [h('td', {style, ...at, 'data-field': 'mean', 'data-value': st.mean[base + k] ?? ''},
        fmt(st.mean[base + k], 3)),
      h('td', {style, ...at, 'data-field': 'p_value', 'data-value': st.p_value[base + k] ?? '',
        'data-assigned': on ? '1' : '0', title: `t = ${fmt(st.t[base + k], 3)}, n = ${fmtInt(st.n[base + k])}`},
      fmtP(st.p_value[base + k]), on ? ' ✓' : '')];
    })));
  const roles = vs.map(v => h('div', null, h('b', null, VARIANT_NAME[v] + ': '),
    assignedRoles(t, v, l, hd).join(', ') || 'no role'));
  return h('div', null, h('div', {class: 'desc'},
    `One-sided t-test of H0: mean bias ≤ τ = ${sv.tau} over examples; assigned (✓, bold) when p < α = ${sv.alpha}` +
    (sv.correction !== 'none' ? ` (${sv.correction} adjusted)` : '') +
    '. Bias = n × mean attention to the role\'s tokens; 1 = uniform.'),
  h('div', {id: 'head-roles'}, roles),
  h('table', {class: 'stats', id: 'sieve-table'}, h('thead', null, head), h('tbody', null, rows)));
}
// one small histogram per role, every variant's counts; ▲ this example's score (ex.sieve)
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
      counts[v].forEach((c, b) => {
        const y = y0 - (c / top) * 40;
        pts.push(`${x0 + b * w / B},${y}`, `${x0 + (b + 1) * w / B},${y}`);
      });
      pts.push(`${x0 + w},${y0}`);
      svg.append(s('polyline', {points: pts.join(' '), fill: v === 'finetuned' ? 'rgba(198,93,33,.25)' : 'none',
        stroke: VARIANT_COLOUR[v], 'stroke-width': 1.3, 'data-variant': v, 'data-counts': counts[v].join(',')}));
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
      svg.append(s('path', {d: `M${x},${y0 + 1} l-4,7 h8 z`, fill: VARIANT_COLOUR[v], 'data-example-score': sc,
        'data-variant': v}, s('title', null, `${VARIANT_NAME[v]}: this example's score ${fmt(sc, 4)}`)));
    }
    const on = Object.keys(sv.stats).some(v => sv.stats[v].assigned[base + k]);
    const ft = sv.stats.finetuned ? 'finetuned' : Object.keys(sv.stats)[0];
    const p = `p=${fmtP(sv.stats[ft].p_value[base + k])}${sv.stats[ft].assigned[base + k] ? ' ✓' : ''}`;
    out.append(h('div', {class: 'hist' + (on ? ' assigned' : '')},
      h('div', {class: 'h'}, h('b', null, sv.roles[k]), h('span', {class: 'muted'}, p)), svg));
  }
  const scored = Object.entries(sv.n_scored).map(([v, n]) => `${n} ${VARIANT_NAME[v]}`).join(', ');
  return h('div', null, h('div', {class: 'keys'},
    Object.keys(sv.hist).map(v => h('span', null, h('i', {class: 'sw', style: `background:${VARIANT_COLOUR[v]}`}),
      VARIANT_NAME[v])),
    h('span', null, h('i', {class: 'sw', style: 'background:#d64545'}), `τ = ${sv.tau}`),
    h('span', null, '▲ this example'),
    h('span', null, `${scored} examples scored`)), out);
}

Object.assign(app, {assignedRoles, sieveTable, histograms});
