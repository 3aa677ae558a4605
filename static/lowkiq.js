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

  // A refresh that fails (Redis down, the console gone) must not leave old numbers looking current:
  // say so above them, grey them out, and clear it all at the first refresh that works.
  var failingSince = null;
  function liveFailed(event, why) {
    if (!event.detail.elt || event.detail.elt.id !== "live") return;
    var banner = document.getElementById("live-error");
    var live = document.getElementById("live");
    var status = document.getElementById("live-status");
    if (failingSince === null) failingSince = new Date();
    if (banner) {
      banner.textContent = "Live refresh failing since " + failingSince.toLocaleTimeString() + ": " + why +
        ". The numbers below are from before then.";
      banner.hidden = false;
    }
    if (live) live.classList.add("stale");
    if (status) status.textContent = "Live: failing";
  }
  document.addEventListener("htmx:responseError", function (event) {
    var xhr = event.detail.xhr;
    var said = "";
    if (xhr && xhr.responseText) {
      // The console's error page names the problem; parsed inertly, read as text.
      var doc = new DOMParser().parseFromString(xhr.responseText, "text/html");
      var message = doc.querySelector(".error-panel p");
      said = message ? message.textContent.trim() : "";
    }
    liveFailed(event, (xhr ? "HTTP " + xhr.status : "no answer") + (said ? " (" + said + ")" : ""));
  });
  document.addEventListener("htmx:sendError", function (event) { liveFailed(event, "the console did not answer"); });
  document.addEventListener("htmx:afterSwap", function (event) {
    if (!event.detail.elt || event.detail.elt.id !== "live" || failingSince === null) return;
    failingSince = null;
    var banner = document.getElementById("live-error");
    if (banner) banner.hidden = true;
    show();
  });
})();
