(function () {
  "use strict";
  var status = document.getElementById("report-status");
  function record() {
    status.setAttribute("data-errors", window.__inferperfErrors.join(" | "));
  }
  // sortable tables: numbers by data-value, text otherwise
  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
    var heads = table.querySelectorAll("thead th");
    Array.prototype.forEach.call(heads, function (th, col) {
      th.addEventListener("click", function () {
        var asc = !th.classList.contains("sorted-asc");
        Array.prototype.forEach.call(heads, function (h) { h.classList.remove("sorted-asc", "sorted-desc"); });
        th.classList.add(asc ? "sorted-asc" : "sorted-desc");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = a.cells[col], y = b.cells[col];
          var xv = x.getAttribute("data-value"), yv = y.getAttribute("data-value");
          var c = (xv !== null && yv !== null) ? parseFloat(xv) - parseFloat(yv)
                  : x.textContent.localeCompare(y.textContent, undefined, { numeric: true });
          return asc ? c : -c;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
  // charts
  var specs = JSON.parse(document.getElementById("chart-specs").textContent);
  var ids = Object.keys(specs);
  var drawn = 0;
  var jobs = ids.map(function (id) {
    var el = document.getElementById(id);
    if (!el || typeof Plotly === "undefined") {
      window.__inferperfErrors.push("cannot draw " + id + (el ? ": Plotly missing" : ": no element"));
      return Promise.resolve();
    }
    var fig = specs[id];
    return Plotly.newPlot(el, fig.data, fig.layout, { responsive: true, displaylogo: false })
      .then(function () { if (el.querySelector("svg.main-svg")) { drawn += 1; } })
      .catch(function (e) { window.__inferperfErrors.push(id + ": " + e); });
  });
  Promise.all(jobs).then(function () {
    status.setAttribute("data-charts-drawn", String(drawn));
    record();
    status.setAttribute("data-done", "yes");
  });
  window.addEventListener("beforeprint", function () {
    ids.forEach(function (id) { var el = document.getElementById(id); if (el && el.data) { Plotly.Plots.resize(el); } });
  });
})();
