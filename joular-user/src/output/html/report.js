// The report's own behaviour: the all/app switch and sortable tables. Kept in a closure: the
// flame graph's script defines globals of its own.
(function () {
  "use strict";
  function showView(view) {
    document.querySelectorAll("[data-jr-view]").forEach(function (el) {
      el.hidden = el.getAttribute("data-jr-view") !== view;
    });
    document.querySelectorAll("[data-jr-view-button]").forEach(function (b) {
      b.classList.toggle("jr-on", b.getAttribute("data-jr-view-button") === view);
    });
  }
  document.querySelectorAll("[data-jr-view-button]").forEach(function (b) {
    b.addEventListener("click", function () { showView(b.getAttribute("data-jr-view-button")); });
  });
  showView("all");

  function cellValue(row, col, numeric) {
    var cell = row.cells[col];
    if (numeric) { return parseFloat(cell.getAttribute("data-v")); }
    return cell.textContent;
  }
  document.querySelectorAll("table.jr-table th[data-jr-key]").forEach(function (th) {
    th.addEventListener("click", function () {
      var table = th.closest("table");
      var body = table.tBodies[0];
      var col = th.cellIndex;
      var numeric = th.getAttribute("data-jr-key") === "num";
      var asc = th.getAttribute("data-jr-dir") === "desc";
      table.querySelectorAll("th[data-jr-key]").forEach(function (o) { o.removeAttribute("data-jr-dir"); });
      th.setAttribute("data-jr-dir", asc ? "asc" : "desc");
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = cellValue(a, col, numeric), y = cellValue(b, col, numeric);
        var order = numeric ? x - y : x.localeCompare(y);
        return asc ? order : -order;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
})();
