// Quarry console: live updates from the server's SSE feed (/console/watch). The pages are
// complete without this script; it only keeps them current. Values are set as text, never HTML.
"use strict";
(function () {
  function set(root, field, value) {
    var cell = root.querySelector('[data-field="' + field + '"]');
    if (!cell || value === undefined || value === null) return;
    var text = String(value);
    if (cell.textContent !== text) cell.textContent = text;
    if (field === "phase") cell.className = "phase phase-" + text.replace(/[^A-Za-z]/g, "");
  }
  function cell(text) { var td = document.createElement("td"); td.textContent = text; return td; }
  function listPage(table) {
    var source = new EventSource(table.getAttribute("data-watch"));
    source.addEventListener("run", function (e) {
      var run = JSON.parse(e.data);
      var key = run.namespace + "/" + run.name;
      var row = null;
      table.querySelectorAll("tr[data-run]").forEach(function (r) { if (r.getAttribute("data-run") === key) row = r; });
      if (!row) {
        row = document.createElement("tr");
        row.setAttribute("data-run", key);
        var link = document.createElement("a");
        link.href = "/console/runs/" + encodeURIComponent(run.namespace) + "/" + encodeURIComponent(run.name);
        link.textContent = run.name;
        var name = document.createElement("td"); name.appendChild(link);
        row.appendChild(cell(run.namespace)); row.appendChild(name); row.appendChild(cell(run.mode));
        ["phase", "progress", "cost", "tokens"].forEach(function (f) { var td = cell(""); td.setAttribute("data-field", f); row.appendChild(td); });
        row.appendChild(cell(run.age));
        var report = cell(""); report.setAttribute("data-field", "report"); row.appendChild(report);
        table.querySelector("tbody").appendChild(row);
      }
      ["phase", "progress", "cost", "tokens", "report"].forEach(function (f) { set(row, f, run[f]); });
    });
  }
  function runPage(facts) {
    if (facts.getAttribute("data-finished") === "true") return;
    var source = new EventSource(facts.getAttribute("data-watch"));
    source.addEventListener("run", function (e) {
      var run = JSON.parse(e.data);
      ["phase", "progress", "cost", "tokens", "report"].forEach(function (f) { set(facts, f, run[f]); });
      set(document, "message", run.message);
      var agenda = document.querySelector("#agenda tbody");
      if (agenda && run.agenda) {
        var rows = agenda.querySelectorAll("tr");
        run.agenda.forEach(function (t, i) {
          var state = rows[i] && rows[i].children[1];
          if (state && state.textContent !== t.state) { state.textContent = t.state; state.className = "task-" + t.state; }
        });
      }
      // The report and the event log are stored when the run ends: show them once.
      if (run.finished) { source.close(); window.location.reload(); }
    });
  }
  function liveLog(list) {
    var source = new EventSource(list.getAttribute("data-stream"));
    source.onmessage = function (e) {
      var item = document.createElement("li");
      item.textContent = e.data;
      list.appendChild(item);
      list.scrollTop = list.scrollHeight;
    };
  }
  document.addEventListener("DOMContentLoaded", function () {
    var log = document.querySelector("#events[data-stream]");
    if (log) liveLog(log);
    var table = document.getElementById("runs");
    if (table) listPage(table);
    var facts = document.getElementById("run");
    if (facts) runPage(facts);
  });
})();
