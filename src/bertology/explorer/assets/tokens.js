/* tokens.js: the token views of an example (Abnar & Zuidema 2020; Kobayashi et al. 2020 and the newer mixing
 * views): one row per view or importance, each model in a column, the wordpieces coloured by their score
 * (selection.tvscale: words or all tokens in the scale; selection.tvfrom: from the row's minimum or 0), and ρ
 * with the fine-tuned classifier's importance. Exports tokenViews. */
const {h, fmt, VARIANT_NAME, showTip, hideTip, seg, selection, go} = app;
const {css, RDBU, YLORRD, luminance, NA, VARIANT_COLOUR, legend} = app;

// view or importance -> [label, what it measures]
const TV = {
  raw: ['raw attention', 'the last layer\'s [CLS] row, heads averaged'],
  norm: ['norm-weighted', '‖Σ_h α_h[CLS, j] f_h(x_j)‖ of the last layer (Kobayashi et al. 2020)'],
  rollout: ['rollout', 'each layer\'s head-averaged attention mixed half and half with the identity, ' +
    'multiplied through the layers'],
  flow: ['flow', 'maximum flow from the token to the top [CLS] through the layered attention graph'],
  alti: ['ALTI', 'Ferrando et al. 2022: max(0, ‖y_i‖₁ − ‖y_i − T_i(x_j)‖₁) through attention, residual and LN1, ' +
    'rows normalised, rolled out'],
  globenc: ['GlobEnc', 'Modarressi et al. 2022: ‖contribution‖ through attention, residual and both LayerNorms, ' +
    'the raw norms rolled out (as the authors\' code)'],
  decompx: ['DecompX', 'Modarressi et al. 2023: the token\'s signed part of the predicted class\'s logit, ' +
    'decomposed through every layer and the head (pretrained: ‖part of the top [CLS]‖)'],
  value_zeroing: ['Value Zeroing', 'Mohebbi et al. 2023: cosine distance of each output when the token\'s values ' +
    'are zeroed, rows normalised, rolled out'],
  ablation: ['ablation importance', 'drop in the predicted class\'s probability when the token is replaced by the ' +
    'mask token'],
  gradient: ['input × gradient', 'Σ_d e_jd ∂p_c/∂e_jd at the embeddings\' output'],
};
const tvLabel = m => (TV[m] || [m])[0];
const tvWhat = m => (TV[m] || ['', ''])[1];

// the notes above the rows: what is missing for the task or this example, and why
function tokenNotes(t, ex) {
  const tv = t.token_views, views = ex.views || {};
  const notes = [];
  for (const v of t.variants) if (tv.missing[v]) notes.push(`${VARIANT_NAME[v]}: ${tv.missing[v]}.`);
  if (tv.importance_missing) notes.push(tv.importance_missing + '.');
  if (tv.rho_missing) notes.push(tv.rho_missing + '.');
  for (const n of ex.views_note || []) notes.push(n + '.');
  const scored = t.variants.filter(v => !tv.missing[v]);
  if (scored.length && !t.variants.some(v => views[v])) {
    notes.push(`Example idx ${ex.idx} has no token scores: the norm analyses score a seeded sample ` +
      `(analysis.norms.examples, ${scored.map(v => tv.scored[v]).join(' / ')} examples); ` +
      'the examples marked ◆ (every view) or ◇ in the list have them.');
  }
  return notes;
}
function description(t, q, scaleAll) {
  return `Each row colours the example's wordpieces by one view of how much the last layer's ${q} draws on them; ` +
    (t.causal ? 'a decoder: every view is read from the last token\'s row, [CLS] below means that token, and the ' +
      'ablation importance deletes the token (no mask token); ' : '') +
    'one colour scale per row, shared by both models, from the smallest (or 0) to the largest score of either ' +
    'model on the ' +
    (scaleAll ? 'example\'s tokens'
      : 'example\'s words ([CLS], [SEP] and other specials outside it are clipped, dashed)') +
    '; importance rows are symmetric around 0. ' +
    'ρ: Spearman\'s correlation of the view with the fine-tuned classifier\'s importance over this example\'s ' +
    'ordinary tokens (faithfulness_examples.csv; mean over examples in faithfulness.csv). ' +
    'Hover a token to find it in every row.';
}
// why row r has no scores for variant v
function missingWhy(tv, views, r, v) {
  const newer = (tv.newer || []).includes(r.m), mixing = (tv.mixing || {})[v];
  if (r.kind === 'importance' && v !== 'finetuned') return 'importance is the fine-tuned classifier\'s only';
  if (r.kind === 'importance') {
    return tv.importance_missing ? 'not computed (see above)'
      : 'not computed for this example: the importance runs on the flow examples (analysis.flow.examples)';
  }
  if (tv.missing[v]) return 'no token scores for this model (see above)';
  if (!views[v]) return 'this example has no token scores';
  if (r.m === 'flow') {
    return `not computed for this example: flow runs on a capped sample (analysis.flow.examples; ${tv.flow[v]} ` +
      `of ${tv.scored[v]} scored examples, marked ◆)`;
  }
  if (newer && (mixing === 0 || ((tv.methods || {})[v] && !tv.methods[v].includes(r.m)))) {
    return 'not computed for this model: the newer mixing views need post-LN layers bertology decomposes, or ' +
      'analysis.mixing_views.examples is 0 (the log of norms_views says which)';
  }
  if (newer) {
    return 'not computed for this example: the newer mixing views run on a capped sample ' +
      `(analysis.mixing_views.examples; ${mixing} of ${tv.scored[v]} scored examples)`;
  }
  return 'not computed for this example';
}
// ρ of view m (fine-tuned) with each importance on this example, or the means over the examples that have them
function rhoLine(tv, ex, m) {
  const rho = (ex.rho || {})[m] || {};
  const faith = (tv.faith || {})[m] || {};
  const iname = i => i === 'gradient' ? 'input × gradient' : i;
  const mean = i => faith[i] && faith[i].mean !== null ? ` (mean ${fmt(faith[i].mean, 2)}, n ${faith[i].n})` : '';
  if (tv.importances.some(i => i in rho)) {
    return h('div', {class: 'tv-rhos'}, tv.importances.filter(i => i in rho).map(i =>
      h('span', {class: 'tv-rho', 'data-importance': i, 'data-rho': rho[i] === null ? '' : rho[i]},
        `ρ with ${iname(i)} `,
        h('b', {title: rho[i] === null ? 'undefined: fewer than 3 tokens or a constant score' : ''}, fmt(rho[i], 2)),
        h('span', {class: 'muted'}, mean(i)))));
  }
  if (tv.rho_missing) return null;
  const means = tv.importances.some(i => faith[i])
    ? '; over the examples that have it: ' + tv.importances.filter(i => faith[i]).map(i => `${iname(i)}${mean(i)}`)
      .join(', ')
    : '';
  return h('div', {class: 'tv-rhos muted'}, 'ρ: this example has no importance' + means);
}

function tokenViews(t, ex) {
  const tv = t.token_views;
  const card = h('div', {class: 'card', id: 'token-views'});
  const q = t.causal ? 'last token' : '[CLS]';  // the row the classifier reads: a decoder's last token
  card.append(h('h3', null,
    `Token views: what the top layer's ${q} sees of each token, pretrained next to fine-tuned`));
  if (!tv) { card.append(h('p', {class: 'muted'}, 'This page was built without token views.')); return card; }
  const variants = t.variants, views = ex.views || {}, imp = ex.importance || {};
  const rows = [...tv.views.map(m => ({m, kind: 'view'})), ...tv.importances.map(m => ({m, kind: 'importance'}))];
  // importance and signed views (DecompX) can be negative: diverging scale around 0
  const signed = m => tv.importances.includes(m) || (tv.signed || []).includes(m);
  const scoresOf = (v, r) => r.kind === 'view' ? (views[v] || {})[r.m] : (v === 'finetuned' ? imp[r.m] : undefined);
  const scaleAll = selection.tvscale === 'all', fromMin = selection.tvfrom === 'min';
  const inScale = p => scaleAll || ex.word_ids[p] >= 0;
  const notes = tokenNotes(t, ex);
  card.append(h('p', {class: 'desc'}, description(t, q, scaleAll)));
  card.append(h('div', {class: 'controls'}, h('label', null, 'colour scale over ',
    seg('tvscale', [['words', 'words only'], ['all', 'all tokens']], scaleAll ? 'all' : 'words',
      k => go({tvscale: k}))),
  h('label', null, 'scores from ', seg('tvfrom', [['min', 'the row\'s minimum'], ['zero', '0']], selection.tvfrom,
    k => go({tvfrom: k})))));
  if (notes.length) card.append(h('ul', {class: 'tv-notes'}, notes.map(n => h('li', null, n))));
  const grid = h('div', {class: 'tv-grid',
    style: `grid-template-columns:minmax(150px,190px) repeat(${variants.length}, minmax(0,1fr))`});
  grid.append(h('div', {class: 'tv-corner'}), ...variants.map(v => h('div', {class: 'tv-vhead', 'data-variant': v,
    style: `border-color:${VARIANT_COLOUR[v]}`}, VARIANT_NAME[v])));
  const highlight = p => {
    for (const e of card.querySelectorAll('.tv-tok')) e.classList.toggle('hl', p !== null && +e.dataset.pos === p);
  };
  for (const r of rows) {
    const per = Object.fromEntries(variants.map(v => [v, scoresOf(v, r)]));
    // signed rows: symmetric around 0; the others from 0 or from the row's minimum (rollout and flow are flat)
    let hi = 0, lo = Infinity;
    for (const sc of Object.values(per)) {
      if (sc) {
        sc.forEach((x, p) => {
          if (x !== null && inScale(p)) { hi = Math.max(hi, signed(r.m) ? Math.abs(x) : x); lo = Math.min(lo, x); }
        });
      }
    }
    lo = signed(r.m) ? -hi : (fromMin && Number.isFinite(lo) && lo < hi ? lo : 0);
    const colour = x => signed(r.m) ? RDBU(hi ? (x / hi + 1) / 2 : 0.5) : YLORRD(hi > lo ? (x - lo) / (hi - lo) : 0);
    const anyScores = Object.values(per).some(x => x);
    grid.append(h('div', {class: 'tv-label', 'data-method': r.m}, h('b', {title: tvWhat(r.m)}, tvLabel(r.m)),
      h('div', {class: 'muted tv-what'}, tvWhat(r.m)),
      anyScores && hi > 0
        ? legend(signed(r.m) ? 'div' : 'seq', lo, hi, {width: 170, label: '', rgb: signed(r.m) ? RDBU : YLORRD})
        : null));
    for (const v of variants) {
      const sc = per[v];
      const cell = h('div', {class: 'tv-cell', 'data-variant': v, 'data-method': r.m});
      if (!sc) {
        cell.classList.add('tv-missing');
        cell.append(h('span', {class: 'muted'}, missingWhy(tv, views, r, v)));
        grid.append(cell);
        continue;
      }
      const order = sc.map((x, p) => [x, p]).filter(([x]) => x !== null).sort((a, b) => b[0] - a[0]).map(([, p]) => p);
      const rank = new Map(order.map((p, k) => [p, k + 1]));
      const toks = h('div', {class: 'tv-toks'});
      ex.tokens.forEach((tok, p) => {
        const x = sc[p];
        const c = x === null ? null : colour(x);
        const clipped = x !== null && hi > 0 && (x > hi || x < lo);
        const text = `“${tok}” · position ${p}\n${tvLabel(r.m)} (${VARIANT_NAME[v]}): ` +
          (x === null ? 'no value' : fmt(x, 4)) + (x === null ? '' : `\nrank ${rank.get(p)} of ${order.length}`) +
          (clipped ? '\nabove the scale (clipped)' : '');
        toks.append(h('span', {class: 'tv-tok' + (ex.word_ids[p] < 0 ? ' special' : '') + (clipped ? ' clipped' : ''),
          'data-pos': p, 'data-score': x === null ? '' : x,
          style: c ? `background:${css(c)};color:${luminance(c) < 0.5 ? '#fff' : '#102a43'}` : `background:${NA}`,
          onmouseenter: e => { highlight(p); showTip(e, text); },
          onmouseleave: () => { highlight(null); hideTip(); }}, tok));
      });
      cell.append(toks);
      if (r.kind === 'view' && v === 'finetuned') {
        const line = rhoLine(tv, ex, r.m);
        if (line) cell.append(line);
      }
      grid.append(cell);
    }
  }
  card.append(h('div', {style: 'overflow-x:auto'}, grid));
  return card;
}

Object.assign(app, {tokenViews});
