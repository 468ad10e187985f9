/* colour.js: colour scales (functions of t in [0, 1] to [r, g, b]), each variant's colour and the legends.
 * Exports css, VIRIDIS, RDBU, BLUES, YLORRD, attnRGB, luminance, NA, VARIANT_COLOUR, legend. */
const {s, clamp, fmt, selection} = app;

const hex = c => [1, 3, 5].map(i => parseInt(c.slice(i, i + 2), 16));
function ramp(stops) {
  const rgb = stops.map(hex);
  return t => {
    const x = clamp(Number.isFinite(t) ? t : 0, 0, 1) * (rgb.length - 1);
    const i = Math.min(Math.floor(x), rgb.length - 2), f = x - i;
    return rgb[i].map((c, k) => Math.round(c + (rgb[i + 1][k] - c) * f));
  };
}
const css = c => `rgb(${c[0]},${c[1]},${c[2]})`;
const VIRIDIS = ramp(['#440154', '#482878', '#3e4989', '#31688e', '#26828e', '#1f9e89', '#35b779', '#6ece58',
  '#b5de2b', '#fde725']);
const RDBU = ramp(['#2166ac', '#4393c3', '#92c5de', '#d1e5f0', '#f7f7f7', '#fddbc7', '#f4a582', '#d6604d',
  '#b2182b']);
const BLUES = ramp(['#ffffff', '#deebf7', '#c6dbef', '#9ecae1', '#6baed6', '#4292c6', '#2171b5', '#08519c',
  '#08306b']);
const YLORRD = ramp(['#ffffff', '#ffeda0', '#fed976', '#feb24c', '#fd8d3c', '#fc4e2a', '#e31a1c', '#bd0026',
  '#800026']);
// attention in [0, 1]; selection.gamma 1 = linear, 0.5 = square root (shows small weights)
const attnRGB = v => BLUES(selection.gamma === 1 ? v : Math.pow(v, selection.gamma));
const luminance = c => (0.299 * c[0] + 0.587 * c[1] + 0.114 * c[2]) / 255;
const NA = '#e4e7eb';  // no value
const VARIANT_COLOUR = {pretrained: '#486581', finetuned: '#c65d21'};

// an SVG colour bar from lo to hi of scale 'div' (RDBU), 'attn' (attnRGB) or any other (VIRIDIS), or of rgb;
// ref: a value marked in red with refLabel; gamma: a tick at 0.5
let gradId = 0;
function legend(scale, lo, hi, {width = 260, label = '', ref = null, refLabel = '', gamma = false, rgb = null} = {}) {
  const id = 'g' + (gradId++);
  const f = rgb || (scale === 'div' ? RDBU : (scale === 'attn' ? attnRGB : VIRIDIS));
  const stops = [];
  for (let i = 0; i <= 10; i++) stops.push(s('stop', {offset: `${i * 10}%`, 'stop-color': css(f(i / 10))}));
  const x0 = 8, w = width - 16;
  const X = v => x0 + (hi === lo ? 0 : (v - lo) / (hi - lo)) * w;
  const ticks = scale === 'div' ? [lo, 0, hi] : (gamma ? [lo, 0.5, hi] : [lo, hi]);
  const anchor = v => v === lo ? 'start' : (v === hi ? 'end' : 'middle');
  return s('svg', {class: 'legend', width, height: 42, 'data-lo': lo, 'data-hi': hi},
    s('defs', null, s('linearGradient', {id}, stops)),
    s('text', {x: x0, y: 10}, label),
    s('rect', {x: x0, y: 14, width: w, height: 10, fill: `url(#${id})`, stroke: '#bbb'}),
    ticks.map(v => [s('line', {x1: X(v), x2: X(v), y1: 24, y2: 28, stroke: '#555'}),
      s('text', {x: X(v), y: 39, 'text-anchor': anchor(v)}, fmt(v))]),
    (ref !== null && ref > lo && ref < hi)
      ? [s('line', {x1: X(ref), x2: X(ref), y1: 12, y2: 26, stroke: '#d64545', 'stroke-width': 2}),
        s('text', {x: X(ref), y: 39, 'text-anchor': 'middle', fill: '#d64545'}, refLabel)]
      : null);
}

Object.assign(app, {css, VIRIDIS, RDBU, BLUES, YLORRD, attnRGB, luminance, NA, VARIANT_COLOUR, legend});
