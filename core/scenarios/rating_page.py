"""The offline HTML rating page of a blind rating sheet (``index.html`` of ``ianvs judge export``).

One self-contained file: no network, no server, no library. The rater enters a name (the
``rater`` column of the downloaded CSV, so several raters' sheets can be imported side by side),
picks *acceptable* / *not acceptable* per answer and may add a note; **Download ratings.csv**
saves the sheet in the CSV format ``ianvs judge import`` reads.

**Persistence.** Every change is saved at once in the browser's ``localStorage`` under
``ianvs-rating-sheet:<sheet id>``, the sheet id being a hash of the sheet's item ids (so two
sheets never share saved ratings, and re-exporting the same items finds them again). On load the
page restores the saved name, choices and notes, so a reload, a crash or a closed tab loses
nothing. Where storage is unavailable (some browsers' private modes, or a file URL they refuse)
the page still works; it says that ratings are not kept. **Forget saved ratings** clears them.
"""
from __future__ import annotations

import hashlib
import html
import json
from collections.abc import Sequence
from typing import Any

STORAGE_PREFIX = "ianvs-rating-sheet:"


def sheet_id(items: Sequence[dict[str, Any]]) -> str:
    """16 hex digits of the SHA-256 of the items' ids in sheet order."""
    return hashlib.sha256("\n".join(str(i["item"]) for i in items).encode("utf-8")).hexdigest()[:16]


def _section(n: int, item: dict[str, Any]) -> str:
    ident = html.escape(item["item"])
    return (f'<section data-item="{ident}"><h2>{n}. item {ident}</h2><h3>Task</h3>'
            f'<pre>{html.escape(item["task"])}</pre>'
            f'<h3>Reference</h3><pre>{html.escape(item["reference"])}</pre>'
            f'<h3>Answer to rate</h3><pre>{html.escape(item["answer"] or "(empty)")}</pre>'
            f'<p><label><input type="radio" name="r{n}" value="1"> acceptable</label> '
            f'<label><input type="radio" name="r{n}" value="0"> not acceptable</label> '
            f'<input type="text" class="note" placeholder="note (optional)" size="50"></p>'
            f'</section>')


_SCRIPT = """
const ITEMS = %(items)s;
const STORE = %(store)s;
function q(v) { return '"' + String(v).replace(/"/g, '""') + '"'; }
function rater() { return document.getElementById('rater').value.trim(); }
function state() {
  const s = {rater: rater(), ratings: {}, notes: {}};
  document.querySelectorAll('section').forEach((sec) => {
    const picked = sec.querySelector('input[type=radio]:checked');
    const note = sec.querySelector('.note').value;
    if (picked) s.ratings[sec.dataset.item] = picked.value;
    if (note) s.notes[sec.dataset.item] = note;
  });
  return s;
}
function storage() {
  try { const t = '__ianvs_probe__'; localStorage.setItem(t, t); localStorage.removeItem(t);
        return localStorage; } catch (e) { return null; }
}
function save() {
  const st = storage();
  if (st) st.setItem(STORE, JSON.stringify(state()));
}
function restore() {
  const st = storage();
  document.getElementById('kept').textContent = st
    ? 'Your ratings are kept in this browser (reloading the page loses nothing).'
    : 'This browser does not let the page keep ratings: download them before closing it.';
  if (!st) return;
  let s = null;
  try { s = JSON.parse(st.getItem(STORE) || 'null'); } catch (e) { s = null; }
  if (!s) return;
  document.getElementById('rater').value = s.rater || '';
  document.querySelectorAll('section').forEach((sec) => {
    const v = (s.ratings || {})[sec.dataset.item];
    if (v !== undefined) {
      const box = sec.querySelector('input[type=radio][value="' + v + '"]');
      if (box) box.checked = true;
    }
    sec.querySelector('.note').value = (s.notes || {})[sec.dataset.item] || '';
  });
}
function count() {
  const n = document.querySelectorAll('input[type=radio]:checked').length;
  document.getElementById('count').textContent = n + ' of ' + ITEMS.length + ' rated';
}
function csvText() {
  const lines = ['item,task,reference,answer,rating,note,rater'];
  document.querySelectorAll('section').forEach((sec, i) => {
    const it = ITEMS[i];
    const picked = sec.querySelector('input[type=radio]:checked');
    const note = sec.querySelector('.note').value;
    lines.push([it.item, it.task, it.reference, it.answer, picked ? picked.value : '', note,
                rater()].map(q).join(','));
  });
  return lines.join('\\r\\n') + '\\r\\n';
}
document.getElementById('download').onclick = () => {
  if (!rater()) { document.getElementById('rater').focus(); }
  const blob = new Blob([csvText()], {type: 'text/csv'});
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob); a.download = 'ratings.csv'; a.click();
};
document.getElementById('forget').onclick = () => {
  const st = storage();
  if (st) st.removeItem(STORE);
};
document.addEventListener('change', () => { save(); count(); });
document.addEventListener('input', save);
restore();
count();
"""


def rating_page(items: Sequence[dict[str, Any]], kind: str) -> str:
    """The page for ``items`` (each with ``item``, ``task``, ``reference``, ``answer``) of task
    kind ``kind`` (module docstring). Item texts are HTML-escaped; the embedded JSON cannot
    close the script element."""
    data = json.dumps([{k: i[k] for k in ("item", "task", "reference", "answer")}
                       for i in items]).replace("</", "<\\/")
    store = json.dumps(STORAGE_PREFIX + sheet_id(items))
    rows = "".join(_section(n, item) for n, item in enumerate(items, start=1))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Rating sheet ({html.escape(kind)})</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:auto}}pre{{white-space:pre-wrap;
background:#f4f4f4;padding:.5em}}section{{border-bottom:1px solid #ccc;padding-bottom:1em}}</style>
</head><body>
<h1>Rating sheet: {html.escape(kind)} answers</h1>
<p>For each answer, choose <b>acceptable</b> if you would accept it as an answer to the task
(compare with the reference), else <b>not acceptable</b>. Answers are shuffled and do not say
which model wrote them. When done, press <b>Download ratings.csv</b> and give the file to
<code>ianvs judge import</code>. Nothing leaves this page.</p>
<p><label>Your name or initials (one per rater): <input type="text" id="rater" size="20"></label>
<span id="kept"></span></p>
<p><button id="download">Download ratings.csv</button> <span id="count"></span>
<button id="forget">Forget saved ratings</button></p>
{rows}
<script>{_SCRIPT % {"items": data, "store": store}}</script></body></html>
"""
