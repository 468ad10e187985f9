/* arcs.js: Dodrio-style dependency arcs over one head's attention on one example: the wordpieces in a row, the
 * example's dependency arcs above (orange when this head follows them), attention arcs of at least selection.thr
 * below. Exports arcView. */
const {h, s, clamp, fmt, VARIANT_NAME, selection, VARIANT_COLOUR} = app;

// Clark et al.: attention to a word = sum over its wordpieces; from a word = mean over its wordpieces
function wordLevel(ex, buf) {
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
// an arc dependent -> head is followed when the dependent's most attended word is its head
function followedArcs(ex, buf) {
  const {M, pieces} = wordLevel(ex, buf);
  return ex.words.map((w, u) => {
    const hw = w[3];
    if (hw === u || hw < 0 || hw >= ex.words.length || !pieces[u].length) return null;
    let best = -1, arg = -1;
    M[u].forEach((x, v) => { if (pieces[v].length && x > best) { best = x; arg = v; } });
    return {dep: u, head: hw, rel: w[2], followed: arg === hw, att: M[u][hw], argmax: arg};
  }).filter(x => x);
}
// the dependency relations behind each sieve role (its arc labels in bold)
const ROLE_DEPS = {nsubj: ['nsubj'], dobj: ['dobj', 'obj'], amod: ['amod'], advmod: ['advmod']};

const arrowHead = (id, fill) => s('marker', {id, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 6,
  markerHeight: 6, orient: 'auto-start-reverse'}, s('path', {d: 'M0,0 L10,5 L0,10 z', fill}));

// {svg, summary}: the arcs of variant's map and a sentence on the arcs this head follows; roles: its sieve roles
function arcView(t, ex, buf, variant, roles) {
  const n = ex.n;
  const ctx = document.createElement('canvas').getContext('2d');
  ctx.font = '12px system-ui,sans-serif';
  const widths = ex.tokens.map(x => Math.max(18, ctx.measureText(x).width + 10));
  const xs = [];
  let acc = 10;
  widths.forEach(w => { xs.push(acc + w / 2); acc += w; });
  const W = acc + 10;
  const arcs = followedArcs(ex, buf);
  const wx = u => {  // a word's x: the mean of its wordpieces'
    const ps = ex.word_ids.map((w, p) => w === u ? p : -1).filter(p => p >= 0);
    return ps.length ? ps.reduce((a, p) => a + xs[p], 0) / ps.length : null;
  };
  // dependency arc height grows with the number of words it spans (displaCy-like levels)
  const level = a => Math.abs(a.dep - a.head);
  const maxLevel = Math.max(1, ...arcs.map(level));
  const step = clamp(Math.floor(130 / maxLevel), 6, 16);
  const upH = ex.words.length ? 28 + maxLevel * step : 10;
  const baseY = upH + 14, downH = Math.min(170, 24 + W * 0.12);
  const Hh = baseY + 12 + downH;
  const svg = s('svg', {width: W, height: Hh, class: 'arcs', 'data-variant': variant});
  svg.append(s('defs', null, arrowHead(`ah-${variant}`, '#829ab1'), arrowHead(`ahf-${variant}`, '#e8590c')));
  const roleRels = new Set(roles.flatMap(r => ROLE_DEPS[r] || []));
  const word = u => ex.words[u][0];
  for (const a of arcs) {
    const x1 = wx(a.head), x2 = wx(a.dep);
    if (x1 === null || x2 === null) continue;
    const ht = 10 + level(a) * step, y = baseY - 10;
    const col = a.followed ? '#e8590c' : '#9fb3c8';
    const title = `${a.rel}: ${word(a.dep)} → head ${word(a.head)}; word-level attention ${fmt(a.att, 3)}` +
      (a.followed ? ' (followed: the dependent attends most to its head)'
        : ` (most attended: ${ex.words[a.argmax] ? word(a.argmax) : '?'})`);
    svg.append(s('path', {d: `M${x1},${y} C${x1},${y - ht} ${x2},${y - ht} ${x2},${y}`, fill: 'none', stroke: col,
      'stroke-width': a.followed ? 2.6 : 1.2, 'marker-end': `url(#${a.followed ? 'ahf' : 'ah'}-${variant})`,
      class: 'dep' + (a.followed ? ' followed' : ''), 'data-rel': a.rel, 'data-dep': a.dep, 'data-head': a.head},
    s('title', null, title)));
    svg.append(s('text', {x: (x1 + x2) / 2, y: y - ht * 0.75 - 2, 'text-anchor': 'middle', 'font-size': 10,
      fill: a.followed ? '#e8590c' : '#627d98', 'font-weight': roleRels.has(a.rel) ? 700 : 400}, a.rel));
  }
  const groups = [];
  for (let i = 0; i < n; i++) {
    const g = s('g', {'data-q': i});
    for (let j = 0; j < n; j++) {
      const v = buf[i * n + j] / 255;
      if (j === i || v < selection.thr) continue;
      const ht = Math.min(downH - 6, 10 + Math.abs(xs[j] - xs[i]) * 0.3), y = baseY + 8;
      g.append(s('path', {d: `M${xs[i]},${y} C${xs[i]},${y + ht} ${xs[j]},${y + ht} ${xs[j]},${y}`, fill: 'none',
        stroke: VARIANT_COLOUR[variant], 'stroke-opacity': v.toFixed(3), 'stroke-width': 1 + 2.5 * v}));
    }
    groups.push(g);
    svg.append(g);
  }
  const focus = i => groups.forEach((g, k) => { g.style.display = (i === null || k === i) ? '' : 'none'; });
  for (let i = 0; i < n; i++) {
    svg.append(s('text', {x: xs[i], y: baseY + 4, 'text-anchor': 'middle', 'font-size': 12, class: 'tok',
      fill: ex.word_ids[i] < 0 ? '#829ab1' : '#102a43', onmouseenter: () => focus(i), onmouseleave: () => focus(null)},
    ex.tokens[i]));
  }
  const nf = arcs.filter(a => a.followed);
  const summary = h('p', {class: 'desc', id: 'arc-summary'},
    `This head (${VARIANT_NAME[variant]}) follows ${nf.length} of ${arcs.length} dependency arcs of this example` +
    (nf.length ? ': ' + nf.map(a => `${a.rel} (${word(a.dep)} → ${word(a.head)})`).join(', ') : '') +
    '. An arc is followed when the dependent\'s most attended word (Clark et al. word-level attention) is its ' +
    'syntactic head. ' +
    (roles.length ? `Its assigned sieve roles: ${roles.join(', ')} (bold arc labels).` : 'No sieve role assigned.'));
  return {svg, summary};
}

Object.assign(app, {arcView});
