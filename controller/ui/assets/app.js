// edgeset dashboard: live counts and events over Server-Sent Events,
// instance log follow, auto-submitting selects. No external requests.
"use strict";

(function () {
  var maxLiveRows = 200;

  function setText(el, v) {
    if (el && el.textContent !== String(v)) { el.textContent = String(v); }
  }

  function applyCounts(c) {
    Object.keys(c).forEach(function (k) {
      document.querySelectorAll('[data-count="' + k + '"]').forEach(function (el) { setText(el, c[k]); });
    });
    (c.rollouts || []).forEach(function (r) {
      document.querySelectorAll('[data-ds="' + CSS.escape(r.key) + '"]').forEach(function (el) {
        var f = el.getAttribute("data-field");
        if (f in r) { setText(el, r[f]); }
      });
      document.querySelectorAll('[data-state="' + CSS.escape(r.key) + '"]').forEach(function (el) {
        setText(el, r.state);
        el.className = "state " + r.state;
      });
      document.querySelectorAll('[data-bar="' + CSS.escape(r.key) + '"]').forEach(function (el) {
        var w = r.total > 0 ? (100 * r.updated / r.total) : 0;
        el.setAttribute("width", w.toFixed(1));
      });
    });
  }

  function addEvent(e) {
    var body = document.getElementById("live-events");
    if (!body) { return; }
    if (body.getAttribute("data-only-warnings") === "true" && !e.warning) { return; }
    var cols = (body.getAttribute("data-columns") || "time,object,reason,message").split(",");
    var empty = body.querySelector("tr.empty");
    if (empty) { empty.remove(); }
    var tr = document.createElement("tr");
    if (e.warning) { tr.className = "warning"; }
    cols.forEach(function (c) {
      var td = document.createElement("td");
      td.textContent = e[c] === undefined ? "" : String(e[c]);
      tr.appendChild(td);
    });
    body.insertBefore(tr, body.firstChild);
    while (body.rows.length > maxLiveRows) { body.deleteRow(body.rows.length - 1); }
  }

  function startLive() {
    var url = document.body.getAttribute("data-stream");
    var status = document.getElementById("live-status");
    if (!url || !window.EventSource) { return; }
    var es = new EventSource(url);
    es.addEventListener("open", function () { setText(status, "live"); });
    es.addEventListener("error", function () { setText(status, "reconnecting…"); });
    es.addEventListener("counts", function (m) { applyCounts(JSON.parse(m.data)); setText(status, "live"); });
    es.addEventListener("event", function (m) { addEvent(JSON.parse(m.data)); });
    window.addEventListener("pagehide", function () { es.close(); });
  }

  function startLogs() {
    var form = document.getElementById("log-form");
    if (!form) { return; }
    var out = document.getElementById("log");
    var status = document.getElementById("log-status");
    var stop = document.getElementById("log-stop");
    var es = null;
    function end(why) {
      if (es) { es.close(); es = null; }
      stop.disabled = true;
      setText(status, why);
    }
    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      end("");
      out.textContent = "";
      var q = new URLSearchParams(new FormData(form));
      es = new EventSource(form.getAttribute("data-log-base") + "?" + q.toString());
      stop.disabled = false;
      setText(status, "following " + q.get("ds") + "…");
      es.addEventListener("line", function (m) {
        out.appendChild(document.createTextNode(JSON.parse(m.data) + "\n"));
        out.scrollTop = out.scrollHeight;
      });
      es.addEventListener("end", function (m) { end("log ended: " + JSON.parse(m.data)); });
      es.addEventListener("error", function () { if (es) { end("log stream closed"); } });
    });
    stop.addEventListener("click", function () { end("stopped"); });
  }

  function autosubmit() {
    document.querySelectorAll("select[data-autosubmit]").forEach(function (sel) {
      sel.addEventListener("change", function () { sel.form.submit(); });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    startLive();
    startLogs();
    autosubmit();
  });
})();
