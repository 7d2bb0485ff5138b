// Refreshes the page body from /content every data-refresh-ms, while the tab is visible. The
// server renders everything (tables and SVG); this only swaps the HTML in.
(function () {
  var main = document.getElementById("content");
  var status = document.getElementById("status");
  var ms = parseInt(main.getAttribute("data-refresh-ms"), 10) || 2000;
  function tick() {
    if (document.hidden) { return; }
    fetch("/content", { cache: "no-store" }).then(function (r) {
      if (!r.ok) { throw new Error("HTTP " + r.status); }
      return r.text();
    }).then(function (html) {
      main.innerHTML = html;
      status.textContent = "updated " + new Date().toLocaleTimeString();
    }).catch(function (e) {
      status.textContent = "board unreachable (" + e.message + "); retrying";
    });
  }
  setInterval(tick, ms);
})();
