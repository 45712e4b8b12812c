// bench report's site: sortable tables and the leaderboards' filters. No framework, no network.
(function () {
  "use strict";

  function sortValue(cell) {
    if (cell.classList.contains("na")) return "";  // nothing to sort by: last
    var v = cell.getAttribute("data-v");
    return v === null ? cell.textContent.trim() : v;
  }

  // numbers numerically, text alphabetically; empty values (no finished run) last in either direction
  function compare(a, b, direction) {
    if (a === "" || b === "") return a === b ? 0 : (a === "" ? 1 : -1);
    var x = Number(a), y = Number(b);
    var order = (!isNaN(x) && !isNaN(y)) ? x - y : a.localeCompare(b, undefined, {numeric: true});
    return order * direction;
  }

  function sortBy(table, column, direction) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows).map(function (row, i) {
      return {row: row, key: sortValue(row.cells[column]), i: i};
    });
    rows.sort(function (p, q) { return compare(p.key, q.key, direction) || p.i - q.i; });
    var fragment = document.createDocumentFragment();
    rows.forEach(function (r) { fragment.appendChild(r.row); });
    body.appendChild(fragment);
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
      if (i === column) th.setAttribute("aria-sort", direction > 0 ? "ascending" : "descending");
      else th.removeAttribute("aria-sort");
    });
  }

  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, column) {
      th.addEventListener("click", function () {
        sortBy(table, column, th.getAttribute("aria-sort") === "ascending" ? -1 : 1);
      });
    });
  });

  var selects = Array.prototype.slice.call(document.querySelectorAll("select[data-filter]"));
  var search = document.querySelector("input[data-filter-text]");
  var count = document.querySelector(".filter-count");

  function applyFilters() {
    var text = search ? search.value.trim().toLowerCase() : "";
    var shown = 0, total = 0;
    Array.prototype.forEach.call(document.querySelectorAll("table.filterable tbody tr"), function (row) {
      var keep = selects.every(function (s) {
        return !s.value || row.getAttribute("data-" + s.getAttribute("data-filter")) === s.value;
      }) && (!text || row.textContent.toLowerCase().indexOf(text) >= 0);
      row.hidden = !keep;
      if (row.closest("table.leaderboard")) { total += 1; shown += keep ? 1 : 0; }
    });
    Array.prototype.forEach.call(document.querySelectorAll("figure.curves"), function (figure) {
      var dataset = selects.filter(function (s) { return s.getAttribute("data-filter") === "dataset"; })[0];
      figure.hidden = !!(dataset && dataset.value && figure.getAttribute("data-dataset") !== dataset.value);
    });
    if (count) count.textContent = shown + " of " + total + " leaderboard rows";
  }

  // a curve figure's legend: a click hides or shows that method's lines in both panels
  Array.prototype.forEach.call(document.querySelectorAll("figure.curves ul.legend li"), function (item) {
    item.addEventListener("click", function () {
      var off = item.classList.toggle("off");
      Array.prototype.forEach.call(item.closest("figure").querySelectorAll("svg g[data-label]"), function (g) {
        if (g.getAttribute("data-label") === item.getAttribute("data-label")) g.classList.toggle("off", off);
      });
    });
  });

  selects.forEach(function (s) { s.addEventListener("change", applyFilters); });
  if (search) search.addEventListener("input", applyFilters);
  if (count) applyFilters();
  document.body.setAttribute("data-ready", "1");
})();
