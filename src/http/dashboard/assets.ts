// The dashboard's only stylesheet and script, served by Hearth itself (no CDN, no inline code: the page's CSP
// allows 'self' only). The script is progressive: every form works without it.

export const DASHBOARD_CSS = `
:root { color-scheme: light; --ink: #1d2330; --muted: #5b6475; --line: #d9dee7; --bg: #f6f7f9; --card: #fff;
  --accent: #2f5bd3; --accent-ink: #fff; --danger: #b42318; --ok: #067647; --focus: #f59e0b;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--ink); line-height: 1.45; }
a { color: var(--accent); }
:focus-visible { outline: 3px solid var(--focus); outline-offset: 2px; }
.visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
.skip { position: absolute; left: -999px; top: 0; background: var(--card); padding: .5rem 1rem; }
.skip:focus { left: .5rem; z-index: 10; }
.top { display: flex; flex-wrap: wrap; gap: .75rem 1.5rem; align-items: center; justify-content: space-between;
  padding: .75rem 1.5rem; background: var(--ink); color: #fff; }
.brand { color: #fff; font-weight: 700; font-size: 1.15rem; text-decoration: none; }
.account { display: flex; flex-wrap: wrap; gap: .5rem 1rem; align-items: center; font-size: .9rem; }
.account .role { color: #c5cbd6; }
.account .secondary { background: transparent; color: #fff; border-color: #8a93a5; }
.org-switch { display: flex; gap: .4rem; align-items: center; }
.org-switch select { padding: .3rem; border-radius: 4px; }
.nav { background: var(--card); border-bottom: 1px solid var(--line); padding: 0 1.5rem; overflow-x: auto; }
.nav ul { display: flex; gap: .25rem; list-style: none; margin: 0; padding: 0; }
.nav a { display: block; padding: .75rem .9rem; text-decoration: none; color: var(--muted);
  border-bottom: 3px solid transparent; white-space: nowrap; }
.nav a[aria-current="page"] { color: var(--ink); border-bottom-color: var(--accent); font-weight: 600; }
main { max-width: 72rem; margin: 0 auto; padding: 1.5rem; }
main:focus { outline: none; }
h1 { font-size: 1.5rem; margin: 0 0 1rem; }
h2 { font-size: 1.15rem; margin: 1.5rem 0 .75rem; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 1.25rem; margin-bottom: 1.25rem; }
.narrow { max-width: 26rem; margin: 3rem auto; }
.head { display: flex; flex-wrap: wrap; gap: 1rem; justify-content: space-between; align-items: center; }
.head h1 { margin: 0; }
label { display: block; font-weight: 600; margin: 0 0 .3rem; }
.field { margin-bottom: 1rem; }
.hint { color: var(--muted); font-size: .875rem; margin: .25rem 0 0; }
input[type=text], input[type=email], input[type=password], select { font: inherit; width: 100%; padding: .55rem .65rem;
  border: 1px solid #b8c0cc; border-radius: 6px; background: #fff; color: var(--ink); }
button { font: inherit; cursor: pointer; padding: .5rem 1rem; border-radius: 6px; border: 1px solid var(--accent);
  background: var(--accent); color: var(--accent-ink); font-weight: 600; }
button.secondary { background: var(--card); color: var(--ink); border-color: #b8c0cc; }
button.danger { background: var(--danger); border-color: var(--danger); color: #fff; }
button.danger-outline { background: var(--card); color: var(--danger); border-color: #e4a9a2; padding: .3rem .7rem; }
form.inline, td form { display: inline; margin: 0; }
.actions { display: flex; flex-wrap: wrap; gap: .5rem; margin-top: 1rem; }
.table-wrap { overflow-x: auto; margin-bottom: 1.5rem; }
.card h2 { margin-top: 0; }
.lead { color: var(--muted); margin: .5rem 0 1.25rem; }
table { width: 100%; border-collapse: collapse; background: var(--card); }
th, td { text-align: left; padding: .6rem .75rem; border-bottom: 1px solid var(--line); vertical-align: middle; }
th { font-size: .8rem; text-transform: uppercase; letter-spacing: .03em; color: var(--muted); }
td.key { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; white-space: nowrap; }
.status { display: inline-block; padding: .1rem .5rem; border-radius: 999px; font-size: .8rem; font-weight: 600; }
.status.active { background: #dcfae6; color: var(--ok); }
.status.revoked, .status.expired { background: #fee4e2; color: var(--danger); }
.empty { color: var(--muted); }
.notice { padding: .75rem 1rem; border-radius: 6px; margin: 0 0 1rem; border: 1px solid; }
.notice.error { background: #fef3f2; border-color: #fecdca; color: var(--danger); }
.notice.success { background: #ecfdf3; border-color: #abefc6; color: var(--ok); }
.notice.info { background: #eff4ff; border-color: #c7d7fe; color: #1d3fa8; }
.secret { background: #fffaeb; border: 1px solid #fedf89; border-radius: 8px; padding: 1rem; margin-bottom: 1.25rem; }
.secret-row { display: flex; gap: .5rem; }
.secret-row input { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.secret .warning { margin: .6rem 0 0; font-weight: 600; color: #93370d; }
.row-form { display: flex; gap: .4rem; align-items: center; }
.row-form select { width: auto; }
dialog { border: 1px solid var(--line); border-radius: 10px; padding: 1.5rem; max-width: 32rem; width: calc(100% - 2rem); }
dialog::backdrop { background: rgba(17, 24, 39, .45); }
dialog h2 { margin-top: 0; }
@media (max-width: 640px) {
  .top, .nav { padding-left: 1rem; padding-right: 1rem; }
  main { padding: 1rem; }
  th.opt, td.opt { display: none; }
  .secret-row { flex-direction: column; }
}
`;

// Copy buttons, and confirmation <dialog>s opened by ConfirmTrigger forms (layout.tsx). Without it: the secret
// is a selectable read-only field and every trigger leads to a confirmation page.
export const DASHBOARD_JS = `
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("[data-copy]").forEach(function (button) {
    var field = document.getElementById(button.getAttribute("data-copy"));
    if (!field) return;
    button.hidden = false;
    button.addEventListener("click", function () {
      field.select();
      var done = function () { button.textContent = "Copied"; };
      if (navigator.clipboard) navigator.clipboard.writeText(field.value).then(done, function () {
        document.execCommand("copy"); done();
      });
      else { document.execCommand("copy"); done(); }
    });
  });
  document.querySelectorAll("[data-select]").forEach(function (field) {
    field.addEventListener("focus", function () { field.select(); });
  });
  // A form that asks in a dialog first (its own confirmation page without the script).
  var bindConfirmTriggers = function (root) {
    root.querySelectorAll("form[data-dialog]").forEach(function (trigger) {
      var dialog = document.getElementById(trigger.getAttribute("data-dialog"));
      if (!dialog || typeof dialog.showModal !== "function") return;
      trigger.addEventListener("submit", function (event) {
        event.preventDefault();
        var form = dialog.querySelector("form[data-dialog-form]");
        var post = trigger.getAttribute("data-post");
        if (form && post) form.setAttribute("action", post);
        var subject = trigger.getAttribute("data-subject") || "";
        dialog.querySelectorAll("[data-subject-slot]").forEach(function (slot) { slot.textContent = subject; });
        dialog.returnFocusTo = trigger.querySelector("button");
        dialog.showModal();
      });
    });
  };
  bindConfirmTriggers(document);
  document.querySelectorAll("dialog").forEach(function (dialog) {
    dialog.querySelectorAll("[data-close]").forEach(function (button) {
      button.addEventListener("click", function () { dialog.close(); });
    });
    dialog.addEventListener("close", function () {
      if (dialog.returnFocusTo && dialog.returnFocusTo.isConnected) dialog.returnFocusTo.focus();
    });
  });
  // The operator's models table follows downloads, loads and unloads: while a row is on its way (and for a few
  // seconds after the page opens, as a load just asked for starts), the page is fetched again each second and
  // the rows that changed are swapped in. A row holding the focus waits for the next round.
  var live = document.querySelector("tbody[data-live-models]");
  if (live && window.fetch && window.DOMParser) {
    var MOVING = ["downloading", "loading", "unloading"];
    var grace = 3;
    var held = false;
    // A page that cannot be read (the server gone, the session ended) stops the refreshes after a few tries.
    var failures = 0;
    var rowOf = function (root, id) {
      var rows = root.querySelectorAll("tr[data-model]");
      for (var i = 0; i < rows.length; i++) if (rows[i].getAttribute("data-model") === id) return rows[i];
      return null;
    };
    var moving = function () {
      var rows = live.querySelectorAll("tr[data-model]");
      for (var i = 0; i < rows.length; i++) if (MOVING.indexOf(rows[i].getAttribute("data-state")) >= 0) return true;
      return false;
    };
    var schedule = function () {
      if (failures < 5 && (moving() || held || grace-- > 0)) setTimeout(refresh, 1000);
    };
    var refresh = function () {
      fetch(window.location.pathname, { credentials: "same-origin", headers: { accept: "text/html" } })
        .then(function (response) { return response.ok ? response.text() : null; })
        .then(function (html) {
          held = false;
          var fresh = html && new DOMParser().parseFromString(html, "text/html").querySelector("tbody[data-live-models]");
          failures = fresh ? 0 : failures + 1;
          if (fresh) fresh.querySelectorAll("tr[data-model]").forEach(function (row) {
            var current = rowOf(live, row.getAttribute("data-model"));
            if (current && current.outerHTML === row.outerHTML) return;
            if (current && current.contains(document.activeElement)) { held = true; return; }
            var adopted = document.importNode(row, true);
            if (current) current.replaceWith(adopted); else live.appendChild(adopted);
            bindConfirmTriggers(adopted);
          });
          schedule();
        }, function () {
          failures++;
          schedule();
        });
    };
    schedule();
  }
});
`;
