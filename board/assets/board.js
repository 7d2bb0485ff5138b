// Refreshes the page body from /content every data-refresh-ms, while the tab is visible, with the
// view the controls ask for: the x axis, the smoothing, the runs hidden. The server renders
// everything (tables and SVG); this only keeps the view and swaps the HTML in. The view lives in
// the page's address, so a reload keeps it too.
(function () {
  var main = document.getElementById("content");
  var status = document.getElementById("status");
  var form = document.getElementById("view");
  var ms = parseInt(main.getAttribute("data-refresh-ms"), 10) || 2000;
  var hidden = new URLSearchParams(location.search).getAll("hide");
  var latest = 0; // the newest request's number: an older answer must not undo a newer choice
  function query() {
    var q = new URLSearchParams();
    q.set("x", form.elements.x.value);
    q.set("smooth", form.elements.smooth.value);
    hidden.forEach(function (name) { q.append("hide", name); });
    return q.toString();
  }
  function load() {
    var n = ++latest, q = query();
    fetch("/content?" + q, { cache: "no-store" }).then(function (r) {
      if (!r.ok) { return r.text().then(function (t) { throw new Error("HTTP " + r.status + ": " + t); }); }
      return r.text();
    }).then(function (html) {
      if (n !== latest) { return; }
      main.innerHTML = html;
      history.replaceState(null, "", "?" + q);
      status.textContent = "updated " + new Date().toLocaleTimeString();
    }).catch(function (e) {
      status.textContent = "board unreachable (" + e.message + "); retrying";
    });
  }
  form.addEventListener("submit", function (e) { e.preventDefault(); load(); });
  var pause; // a dragged slider sends many inputs: ask once it rests
  form.addEventListener("input", function () {
    form.querySelector("output").textContent = form.elements.smooth.value;
    clearTimeout(pause);
    pause = setTimeout(load, 150);
  });
  main.addEventListener("change", function (e) {
    var box = e.target;
    if (!box.classList || !box.classList.contains("toggle")) { return; }
    hidden = hidden.filter(function (name) { return name !== box.value; });
    if (!box.checked) { hidden.push(box.value); }
    load();
  });
  setInterval(function () { if (!document.hidden) { load(); } }, ms);
})();
