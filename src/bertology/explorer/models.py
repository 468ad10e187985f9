"""results/explorer.html of a run of several models: one page that switches between the models' own explorers
(results/m/{name}/explorer.html, each self-contained) and shows two of them side by side. Pure: names and links in,
HTML text out.

The page holds no data of its own: a model selector shows the chosen model's explorer in a frame (its relative
path, so the run's folder can be moved or copied whole), and a second selector ("beside it") a second model's
explorer in a frame beside the first. Each explorer tells the page its selection (its URL hash: task, view, statistic,
layer, head, example; ``postMessage`` from bertology.explorer's state.js), and the page gives it to the other frame, so
both show the same statistic, head or example of the same task, each for its own model. The page keeps the models and
the selection in its own URL hash (``#model=a&beside=b&at=...``), so a view can be bookmarked.
"""

from __future__ import annotations

import html
from collections.abc import Mapping

from bertology.explorer.render import script_json

CSS = """
*{box-sizing:border-box}html,body{margin:0;height:100%}
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;color:#1d1d1f;background:#fafafa;
display:flex;flex-direction:column}
header{background:#243b53;color:#fff;padding:.5em 1.2em;display:flex;flex-wrap:wrap;gap:.4em 1.5em;align-items:center}
header h1{font-size:1.1em;margin:0}header label{font-size:.9em}header select{font-size:.95em;margin-left:.4em}
header a{color:#f0b429}header .note{font-size:.8em;opacity:.85}
#frames{flex:1;display:flex;min-height:0}#frames iframe{flex:1;border:0;border-left:1px solid #bcccdc;height:100%;
min-width:0;background:#fff}#frames iframe:first-child{border-left:0}
"""

SCRIPT = """
(() => {
'use strict';
const models = JSON.parse(document.getElementById('models-data').textContent);
const names = Object.keys(models);
const pick = document.getElementById('model'), beside = document.getElementById('beside');
const frames = [document.getElementById('left'), document.getElementById('right')];
const known = ['', ''], echo = [true, true];
let at = '';

function readHash() {
  const q = new URLSearchParams(location.hash.slice(1));
  const m = q.get('model'), b = q.get('beside') || '';
  pick.value = names.includes(m) ? m : names[0];
  beside.value = names.includes(b) ? b : '';
  at = q.get('at') || '';
}
function writeHash() {
  const q = new URLSearchParams({model: pick.value});
  if (beside.value) q.set('beside', beside.value);
  if (at) q.set('at', at);
  history.replaceState(null, '', '#' + q.toString());
}
function frameSrc(i, name) {
  return models[name] + (at ? '#' + at : '');
}
function show() {
  const chosen = [pick.value, beside.value];
  chosen.forEach((name, i) => {
    const f = frames[i];
    f.hidden = !name;
    if (!name) { f.removeAttribute('src'); f.dataset.model = ''; return; }
    if (f.dataset.model !== name) {
      f.dataset.model = name;
      f.title = 'explorer of ' + name;
      known[i] = ''; echo[i] = true;
      f.src = frameSrc(i, name);
    }
  });
  document.body.dataset.models = chosen.filter(Boolean).join(',');
  writeHash();
}
window.addEventListener('message', ev => {
  const i = frames.findIndex(f => f.contentWindow === ev.source);
  const h = ev.data && typeof ev.data.bertologyExplorer === 'string' ? ev.data.bertologyExplorer : null;
  if (i < 0 || h === null) return;
  const sel = h.replace(/^#/, '');
  known[i] = sel;
  frames[i].dataset.at = sel;
  if (echo[i]) { echo[i] = false; if (!at) { at = sel; writeHash(); } return; }
  at = sel;
  writeHash();
  const j = 1 - i, other = frames[j];
  if (!other.hidden && other.dataset.model && known[j] !== sel) {
    echo[j] = true;
    other.src = frameSrc(j, other.dataset.model);
  }
});
pick.addEventListener('change', show);
beside.addEventListener('change', show);
window.addEventListener('hashchange', () => { readHash(); show(); });
readHash();
show();
})();
"""


def models_explorer_html(models: Mapping[str, str], reports: Mapping[str, str] | None = None) -> str:
    """The page: models: each model's short name -> its explorer's path relative to the page (in the run's
    order; at least one); reports: the same for the models' reports (a link in the header), where there are."""
    if not models:
        raise ValueError("no model's explorer: nothing to switch between")
    options = "".join(f'<option value="{html.escape(m)}">{html.escape(m)}</option>' for m in models)
    links = " ".join(f'<a href="{html.escape(href)}">{html.escape(m)}</a>' for m, href in (reports or {}).items())
    reports_line = f"<span class=note>reports: {links}</span>" if links else ""
    return ("<!doctype html><html lang=en><head><meta charset=utf-8>"
            f"<title>bertology explorer — {html.escape(', '.join(models))}</title><style>{CSS}</style></head><body>"
            f"<header><h1>bertology explorer</h1>"
            f'<label>model<select id=model>{options}</select></label>'
            f'<label>beside it<select id=beside><option value="">none</option>{options}</select></label>'
            "<span class=note>beside it: a second model's explorer, showing the task, statistic, head or example "
            f"chosen in either</span>{reports_line}</header>"
            '<div id=frames><iframe id=left></iframe><iframe id=right hidden></iframe></div>'
            f'<script type="application/json" id=models-data>{script_json(dict(models))}</script>'
            f"<script>{SCRIPT}</script></body></html>")
