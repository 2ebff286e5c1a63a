// durq dashboard: live refresh of marked fragments and confirmation of risky actions.
// No inline script anywhere (the Content-Security-Policy forbids it); no build step.
"use strict";
(function () {
  function refresh(el) {
    var url = el.getAttribute("data-refresh");
    var id = el.id;
    fetch(url, { credentials: "same-origin", headers: { "X-Durq-Partial": "1" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html === null) return;
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById(id);
        var now = document.getElementById(id);
        if (fresh && now) now.replaceWith(document.importNode(fresh, true));
      })
      .catch(function () {});
  }
  function start() {
    document.querySelectorAll("[data-refresh]").forEach(function (el) {
      var every = Math.max(2, parseInt(el.getAttribute("data-every") || "5", 10)) * 1000;
      var id = el.id;
      setInterval(function () {
        var cur = document.getElementById(id);
        if (cur && !document.hidden) refresh(cur);
      }, every);
    });
    document.addEventListener("submit", function (ev) {
      var form = ev.target;
      var q = form.getAttribute && form.getAttribute("data-confirm");
      if (q && !window.confirm(q)) ev.preventDefault();
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
