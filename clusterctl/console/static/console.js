// Live regions: <div id="live" data-live="VIEW"> is replaced by each server-sent event from /live/VIEW.
// Also: relative ages beside <time> elements, click-to-sort tables, and the messages page's live tail.
(function () {
  "use strict";
  var dot = document.getElementById("live-state");

  function ages(root) {
    var now = Date.now();
    root.querySelectorAll("time.when").forEach(function (el) {
      var t = Date.parse(el.getAttribute("datetime"));
      if (isNaN(t)) return;
      var s = Math.round((now - t) / 1000);
      var text = Math.abs(s) < 90 ? s + " s" : Math.abs(s) < 5400 ? Math.round(s / 60) + " min" :
        Math.abs(s) < 172800 ? Math.round(s / 3600) + " h" : Math.round(s / 86400) + " d";
      var age = el.nextElementSibling;
      if (!age || !age.classList.contains("age")) {
        age = document.createElement("span");
        age.className = "age muted";
        el.after(age);
      }
      age.textContent = " (" + (s >= 0 ? text + " ago" : "in " + text.replace("-", "")) + ")";
    });
  }

  // sortable tables: a click on a header sorts by that column (numbers as numbers); the order survives live updates
  var sorted = {};
  function cellKey(row, i) {
    var td = row.children[i];
    if (!td) return "";
    var raw = td.dataset.sort !== undefined ? td.dataset.sort : td.innerText.trim();
    var n = Number(raw.replace(/,/g, ""));
    return raw !== "" && !isNaN(n) ? n : raw.toLowerCase();
  }
  function sortTable(table, i, desc) {
    var body = table.tBodies[0];
    if (!body) return;
    var rows = Array.prototype.slice.call(body.rows).filter(function (r) { return r.cells.length > 1; });
    rows.sort(function (a, b) {
      var x = cellKey(a, i), y = cellKey(b, i);
      var c = typeof x === typeof y ? (x < y ? -1 : x > y ? 1 : 0) : typeof x === "number" ? -1 : 1;
      return desc ? -c : c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
    table.querySelectorAll("thead th").forEach(function (th, j) {
      th.dataset.sorted = j === i ? (desc ? "desc" : "asc") : "";
    });
  }
  function sortable(root) {
    root.querySelectorAll("table").forEach(function (table) {
      if (!table.tHead || table.id === "tail") return;
      var ths = table.tHead.querySelectorAll("th");
      ths.forEach(function (th, i) {
        th.classList.add("sort");
        th.title = "sort";
        th.onclick = function () {
          var key = table.id || "";
          var desc = sorted[key] && sorted[key].i === i && !sorted[key].desc;
          sorted[key] = { i: i, desc: desc };
          sortTable(table, i, desc);
        };
      });
      var s = sorted[table.id || ""];
      if (s) sortTable(table, s.i, s.desc);
    });
  }

  function refresh(root) {
    ages(root);
    sortable(root);
  }
  refresh(document);
  setInterval(function () { ages(document); }, 5000);

  var region = document.getElementById("live");
  if (region && region.dataset.live && window.EventSource) {
    var source = new EventSource("/live/" + region.dataset.live);
    source.onopen = function () { if (dot) dot.className = "live-state on"; };
    source.onerror = function () { if (dot) dot.className = "live-state off"; };
    source.onmessage = function (event) {
      region.innerHTML = event.data;
      region.dataset.updated = String(Date.now());
      refresh(region);
      if (dot) dot.className = "live-state on";
    };
    window.addEventListener("pagehide", function () { source.close(); });
  }

  // the configs pages: a filter over the rows (a broker has hundreds)
  var filter = document.getElementById("config-filter");
  if (filter) {
    filter.oninput = function () {
      var needle = filter.value.toLowerCase();
      document.querySelectorAll("#configs tbody tr").forEach(function (tr) {
        tr.hidden = needle !== "" && tr.innerText.toLowerCase().indexOf(needle) < 0;
      });
    };
  }

  // the messages page's live tail: each event is table rows, newest first; the table keeps the last 200
  var box = document.getElementById("tail-box");
  var toggle = document.getElementById("tail-toggle");
  if (box && toggle && window.EventSource) {
    var tail = null;
    var state = document.getElementById("tail-state");
    var rows = document.getElementById("tail-rows");
    toggle.onclick = function () {
      if (tail) {
        tail.close();
        tail = null;
        state.textContent = "off";
        toggle.textContent = "Live tail";
        return;
      }
      document.getElementById("tail").hidden = false;
      tail = new EventSource(box.dataset.src);
      state.textContent = "connecting";
      state.className = "muted";
      toggle.textContent = "Stop tail";
      tail.onopen = function () { state.textContent = "on"; box.dataset.open = "1"; };
      tail.onerror = function () { state.textContent = "reconnecting"; };
      tail.addEventListener("failed", function (e) { state.textContent = e.data; });
      tail.addEventListener("refused", function (e) {  // the console's bound on open tails: no retry
        tail.close();
        tail = null;
        state.textContent = e.data;
        state.className = "error";
        toggle.textContent = "Live tail";
      });
      tail.onmessage = function (event) {
        var t = document.createElement("tbody");
        t.innerHTML = event.data;
        ages(t);
        while (t.lastElementChild) rows.insertBefore(t.lastElementChild, rows.firstElementChild);
        while (rows.rows.length > 200) rows.deleteRow(-1);
      };
      window.addEventListener("pagehide", function () { if (tail) tail.close(); });
    };
  }
})();
