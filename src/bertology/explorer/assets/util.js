/* util.js: DOM builders, number formatting, the tooltip and segmented buttons; no state of the page.
 * Exports h (HTML element), s (SVG element), $ (querySelector), clamp, fmt, fmtP, fmtInt, showTip, hideTip,
 * tip (the tooltip element), seg, VARIANT_NAME (the page's name of each model variant). */
const SVG_NS = 'http://www.w3.org/2000/svg';

const $ = (sel, root = document) => root.querySelector(sel);
function setAttrs(e, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'text') e.textContent = v;
    else e.setAttribute(k, v === true ? '' : v);
  }
}
function appendKids(e, kids) {
  for (const k of kids.flat(Infinity)) {
    if (k !== null && k !== undefined && k !== false) e.append(k instanceof Node ? k : String(k));
  }
  return e;
}
// h('div', {class: 'card', onclick: f}, kid, [kids]...): an HTML element; null, undefined and false kids are left out
function h(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  setAttrs(e, attrs);
  return appendKids(e, kids);
}
// s('rect', {...}, ...kids): the same for an SVG element
function s(tag, attrs, ...kids) {
  const e = document.createElementNS(SVG_NS, tag);
  setAttrs(e, attrs);
  return appendKids(e, kids);
}
const clamp = (x, a, b) => Math.max(a, Math.min(b, x));

// ------------------------------------------------------------------ formatting
function fmt(v, digits = 3) {
  if (v === null || v === undefined || !Number.isFinite(v)) return '–';
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a >= 1e4 || a < 1e-3) return v.toExponential(digits - 1).replace('e+', 'e');
  return String(Number(v.toPrecision(digits)));
}
const fmtP = p => {
  if (p === null || p === undefined) return '–';
  return p < 1e-4 ? p.toExponential(1) : String(Number(p.toPrecision(2)));
};
const fmtInt = v => (v === null || v === undefined) ? '–' : String(Math.round(v));

const VARIANT_NAME = {pretrained: 'pretrained', finetuned: 'fine-tuned', diff: 'fine-tuned − pretrained', single: ''};

// ------------------------------------------------------------------ tooltip
const tip = $('#tip');
function showTip(evt, text) {
  tip.textContent = text;
  tip.hidden = false;
  const w = tip.offsetWidth, hh = tip.offsetHeight;
  let x = evt.clientX + 14, y = evt.clientY + 14;
  if (x + w > window.innerWidth - 4) x = evt.clientX - w - 10;
  if (y + hh > window.innerHeight - 4) y = evt.clientY - hh - 10;
  tip.style.left = x + 'px';
  tip.style.top = y + 'px';
}
const hideTip = () => { tip.hidden = true; };

// a row of buttons, one on: items [key, label, disabled?], cur the key that is on, onpick(key) on a click
function seg(id, items, cur, onpick) {
  return h('span', {class: 'seg', id}, items.map(([k, lab, dis]) =>
    h('button', {class: cur === k ? 'on' : '', 'data-k': k, disabled: !!dis, onclick: () => onpick(k)}, lab)));
}

Object.assign(app, {$, h, s, clamp, fmt, fmtP, fmtInt, VARIANT_NAME, tip, showTip, hideTip, seg});
