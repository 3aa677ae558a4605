// The console's few behaviours; loaded as a file because the CSP allows no inline script.
(function () {
  "use strict";

  // Confirmation before destructive posts: data-confirm on the form or on the clicked button.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var button = event.submitter;
    var question = (button && button.getAttribute("data-confirm")) || form.getAttribute("data-confirm");
    if (button && button.hasAttribute("formaction") && !button.hasAttribute("data-confirm")) {
      question = null;
    }
    if (form.id === "selection" && !form.querySelector("input[name=ids]:checked")) {
      event.preventDefault();
      window.alert("Select at least one job first.");
      return;
    }
    if (question && !window.confirm(question)) {
      event.preventDefault();
    }
  });

  // "Select all" checkbox of a listing.
  document.addEventListener("change", function (event) {
    var box = event.target;
    if (!box.matches || !box.matches("[data-select-all]")) return;
    var form = box.closest("form");
    form.querySelectorAll("input[name=ids]").forEach(function (each) { each.checked = box.checked; });
  });

  // Pausing the dashboard's live refresh; remembered across pages.
  var KEY = "lowkiq.live.paused";
  function paused() {
    try { return window.localStorage.getItem(KEY) === "1"; } catch (e) { return false; }
  }
  function show() {
    var button = document.getElementById("live-toggle");
    var status = document.getElementById("live-status");
    if (!button) return;
    button.textContent = paused() ? "Resume" : "Pause";
    button.setAttribute("aria-pressed", paused() ? "true" : "false");
    if (status) {
      status.dataset.text = status.dataset.text || status.textContent;
      status.textContent = paused() ? "Live refresh paused" : status.dataset.text;
    }
  }
  document.addEventListener("click", function (event) {
    if (!event.target.closest || !event.target.closest("#live-toggle")) return;
    try { window.localStorage.setItem(KEY, paused() ? "0" : "1"); } catch (e) { /* private mode */ }
    show();
  });
  document.addEventListener("htmx:beforeRequest", function (event) {
    if (event.detail.elt && event.detail.elt.id === "live" && paused()) event.preventDefault();
  });
  document.addEventListener("DOMContentLoaded", show);
})();
