/* map.js: one head's attention map on one example (buf: n*n levels, value = level / 255, queries down): the
 * heatmap with token labels, the bertviz line view, the small map of the example view, and the colour control
 * (selection.gamma). Exports heatmap, lineView, smallMap, gammaSeg. */
const {h, s, clamp, VARIANT_NAME, tip, showTip, hideTip, seg, selection, go} = app;
const {css, attnRGB, VARIANT_COLOUR} = app;

const clipText = (x, max) => x.length > max ? x.slice(0, max - 1) + '…' : x;

// a canvas of about `target` pixels, cells of 3 to 20 pixels; the tooltip gives the value under the pointer
function heatmap(t, ex, buf, variant, {target = 440, labels = true} = {}) {
  const n = ex.n, c = clamp(Math.floor(target / n), 3, 20);
  const font = clamp(c - 2, 8, 11);
  const showLab = labels && c >= 7;
  const ctx0 = document.createElement('canvas').getContext('2d');
  ctx0.font = `${font}px system-ui,sans-serif`;
  const lw = showLab ? Math.min(90, Math.ceil(Math.max(...ex.tokens.map(x => ctx0.measureText(x).width))) + 6) : 2;
  const x0 = lw, y0 = lw, W = x0 + n * c + 2, Hh = y0 + n * c + 2;
  const dpr = window.devicePixelRatio || 1;
  const cv = h('canvas', {width: Math.round(W * dpr), height: Math.round(Hh * dpr), class: 'heatmap',
    'data-variant': variant, 'data-x0': x0, 'data-y0': y0, 'data-cell': c, 'data-n': n, 'data-dpr': dpr,
    style: `width:${W}px;height:${Hh}px`});
  const ctx = cv.getContext('2d');
  ctx.scale(dpr, dpr);
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, W, Hh);
  for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) {
    ctx.fillStyle = css(attnRGB(buf[i * n + j] / 255));
    ctx.fillRect(x0 + j * c, y0 + i * c, c, c);
  }
  ctx.strokeStyle = '#cbd2d9';
  ctx.strokeRect(x0 - 0.5, y0 - 0.5, n * c + 1, n * c + 1);
  if (showLab) {
    ctx.fillStyle = '#243b53';
    ctx.font = `${font}px system-ui,sans-serif`;
    ctx.textBaseline = 'middle';
    ctx.textAlign = 'right';
    for (let i = 0; i < n; i++) ctx.fillText(clipText(ex.tokens[i], 12), x0 - 3, y0 + i * c + c / 2);
    for (let j = 0; j < n; j++) {
      ctx.save();
      ctx.translate(x0 + j * c + c / 2, y0 - 3);
      ctx.rotate(-Math.PI / 2);
      ctx.textAlign = 'left';
      ctx.fillText(clipText(ex.tokens[j], 12), 0, 0);
      ctx.restore();
    }
  }
  cv.addEventListener('mousemove', e => {
    const r = cv.getBoundingClientRect();
    const j = Math.floor((e.clientX - r.left - x0) / c), i = Math.floor((e.clientY - r.top - y0) / c);
    if (i < 0 || j < 0 || i >= n || j >= n) { hideTip(); return; }
    showTip(e, `${VARIANT_NAME[variant]}: query ${i + 1} “${ex.tokens[i]}” → key ${j + 1} “${ex.tokens[j]}”\n` +
      `attention ${(buf[i * n + j] / 255).toFixed(4)} (±0.002 display rounding)`);
    tip.dataset.query = i; tip.dataset.key = j; tip.dataset.value = buf[i * n + j] / 255;
  });
  cv.addEventListener('mouseleave', hideTip);
  return cv;
}

// bertviz head view: queries left, keys right, one line per pair, opacity = attention
function lineView(t, ex, buf, variant) {
  const n = ex.n, row = clamp(Math.floor(560 / n), 12, 18), lw = 96, W = 420, mid0 = lw + 10, mid1 = W - lw - 10;
  const Hh = n * row + 8;
  const colour = VARIANT_COLOUR[variant];
  const svg = s('svg', {width: W, height: Hh, class: 'lines', 'data-variant': variant});
  const keyBg = [];
  for (let j = 0; j < n; j++) {
    const r = s('rect', {x: mid1 + 4, y: 4 + j * row, width: lw - 4, height: row - 1, fill: colour, 'fill-opacity': 0});
    keyBg.push(r);
    svg.append(r);
  }
  const groups = [];
  for (let i = 0; i < n; i++) {
    const g = s('g', {'data-q': i});
    for (let j = 0; j < n; j++) {
      const q = buf[i * n + j];
      if (q < 3) continue;
      g.append(s('line', {x1: mid0, y1: 4 + i * row + row / 2, x2: mid1, y2: 4 + j * row + row / 2, stroke: colour,
        'stroke-opacity': (q / 255).toFixed(3), 'stroke-width': 2}));
    }
    groups.push(g);
    svg.append(g);
  }
  const focus = i => {
    groups.forEach((g, k) => { g.style.display = (i === null || k === i) ? '' : 'none'; });
    keyBg.forEach((r, j) => r.setAttribute('fill-opacity', i === null ? 0 : (buf[i * n + j] / 255 * 0.8).toFixed(3)));
  };
  for (let i = 0; i < n; i++) {
    const y = 4 + i * row + row / 2 + 4, size = Math.min(12, row - 2);
    svg.append(s('text', {x: mid0 - 6, y, 'text-anchor': 'end', 'font-size': size, class: 'tok',
      onmouseenter: () => focus(i), onmouseleave: () => focus(null)}, clipText(ex.tokens[i], 14)));
    svg.append(s('text', {x: mid1 + 6, y, 'font-size': size, class: 'tok'}, clipText(ex.tokens[i], 14)));
  }
  return svg;
}

// the example view's map: n x n pixels scaled to size x size, framed in the variant's colour
function smallMap(ex, buf, size, variant) {
  const off = document.createElement('canvas');
  off.width = ex.n; off.height = ex.n;
  const octx = off.getContext('2d'), img = octx.createImageData(ex.n, ex.n);
  for (let k = 0; k < ex.n * ex.n; k++) {
    const c = attnRGB(buf[k] / 255);
    img.data[4 * k] = c[0]; img.data[4 * k + 1] = c[1]; img.data[4 * k + 2] = c[2]; img.data[4 * k + 3] = 255;
  }
  octx.putImageData(img, 0, 0);
  const cv = h('canvas', {width: size, height: size, 'data-variant': variant,
    style: `width:${size}px;height:${size}px;border:1px solid ${VARIANT_COLOUR[variant]}`});
  const ctx = cv.getContext('2d');
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(off, 0, 0, size, size);
  return cv;
}

const gammaSeg = () => h('label', null, 'colour ',
  seg('gamma', [['1', 'linear'], ['0.5', '√ (shows small weights)']], String(selection.gamma), k => go({gamma: +k})));

Object.assign(app, {heatmap, lineView, smallMap, gammaSeg});
