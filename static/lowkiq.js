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
      // The moment is this browser's; the header's toggle shows it in UTC or with its offset like every other time.
      var since = document.createElement("span");
      since.setAttribute("data-time", failingSince.toISOString());
      since.textContent = failingSince.toLocaleTimeString() + " (this browser's clock)";
      banner.textContent = "Live refresh failing since ";
      banner.append(since, ": " + why + ". The numbers below are from before then.");
      banner.hidden = false;
      banner.dispatchEvent(new CustomEvent("lowkiq:times", {bubbles: true}));
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

// Absolute times in the server's zone, in UTC or in this browser's zone, by the header's toggle, remembered. The server renders
// its own zone (with the offset); elements with data-time (an ISO time) are rewritten, again after swaps.
(function () {
  "use strict";
  var KEY = "lowkiq.times";
  function zone() {
    try { return window.localStorage.getItem(KEY) || ""; } catch (e) { return ""; }
  }
  function two(n) { return (n < 10 ? "0" : "") + n; }
  function format(date, utc) {
    if (utc) {
      return date.getUTCFullYear() + "-" + two(date.getUTCMonth() + 1) + "-" + two(date.getUTCDate()) + " " +
        two(date.getUTCHours()) + ":" + two(date.getUTCMinutes()) + ":" + two(date.getUTCSeconds()) + " UTC";
    }
    var offset = -date.getTimezoneOffset();
    var sign = offset >= 0 ? "+" : "-";
    offset = Math.abs(offset);
    return date.getFullYear() + "-" + two(date.getMonth() + 1) + "-" + two(date.getDate()) + " " +
      two(date.getHours()) + ":" + two(date.getMinutes()) + ":" + two(date.getSeconds()) + " " + sign +
      two(Math.floor(offset / 60)) + two(offset % 60);
  }
  function rewrite(root) {
    var chosen = zone();
    var button = document.getElementById("tz-toggle");
    if (button) {
      button.hidden = false;
      button.textContent = chosen === "utc" ? "UTC" : chosen === "local" ? "Local time" : "Server time";
      button.setAttribute("aria-label", "Times shown: " + button.textContent + ". Change");
    }
    (root || document).querySelectorAll("[data-time]").forEach(function (element) {
      // The server's rendering is kept, so that "Server time" can be chosen again.
      if (!element.hasAttribute("data-server-text")) element.setAttribute("data-server-text", element.textContent);
      if (chosen !== "utc" && chosen !== "local") {
        element.textContent = element.getAttribute("data-server-text");
        return;
      }
      var when = new Date(element.getAttribute("data-time"));
      if (!isNaN(when.getTime())) element.textContent = format(when, chosen === "utc");
    });
  }
  document.addEventListener("click", function (event) {
    if (!event.target.closest || !event.target.closest("#tz-toggle")) return;
    // Server time, then UTC, then the browser's zone, then the server's again.
    var next = {utc: "local", local: "server"}[zone()] || "utc";
    try { window.localStorage.setItem(KEY, next); } catch (e) { /* private mode: this page only */ }
    rewrite();
  });
  document.addEventListener("DOMContentLoaded", function () { rewrite(); });
  document.addEventListener("htmx:afterSwap", function (event) { rewrite(event.detail.elt); });
  document.addEventListener("htmx:oobAfterSwap", function (event) { rewrite(event.detail.target); });
  document.addEventListener("lowkiq:times", function (event) { rewrite(event.target); });
})();

// Filters by a time (perform_in, updated_at) get a date-time picker, to the second. The browser's local time is
// what the operator means: it is sent as unix seconds, so the server's own zone never matters. A bound the
// operator did not touch is sent back exactly as it came (a picker cannot show fractions of a second), and a
// picked Max counts its whole second.
(function () {
  "use strict";
  function pad(n) { return (n < 10 ? "0" : "") + n; }
  function toLocalInput(seconds) {
    var d = new Date(Math.floor(seconds) * 1000);
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + "T" + pad(d.getHours()) + ":" +
      pad(d.getMinutes()) + ":" + pad(d.getSeconds());
  }
  function isTime(form) {
    var select = form.querySelector("select[name=order_by]");
    var orders = (form.getAttribute("data-time-orders") || "").split(" ");
    return select && orders.indexOf(select.value) >= 0;
  }
  // switched: the operator chose another order; bounds of the other kind (ids, times) mean nothing there.
  function arrange(form, switched) {
    var time = isTime(form);
    form.querySelectorAll("input[data-bound]").forEach(function (input) {
      if (time && input.type !== "datetime-local") {
        var exact = input.value;
        var number = parseFloat(exact);
        var value = !switched && exact && isFinite(number) && /^[0-9.eE+-]+$/.test(exact) ? toLocalInput(number) : "";
        input.value = "";  // a unix time is no valid datetime-local value: cleared before the type changes
        input.type = "datetime-local";
        input.step = "1";
        input.value = value;
        input.setAttribute("data-exact", value ? exact : "");
        input.setAttribute("data-shown", input.value);  // as the browser normalized it (":00" seconds dropped)
      } else if (!time && input.type === "datetime-local") {
        input.type = "text";
        input.value = "";
        input.removeAttribute("data-exact");
      }
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("form.filters[data-time-orders]").forEach(function (form) { arrange(form, false); });
  });
  document.addEventListener("change", function (event) {
    var select = event.target;
    if (select.name === "order_by" && select.form && select.form.hasAttribute("data-time-orders")) {
      arrange(select.form, true);
    }
  });
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.hasAttribute || !form.hasAttribute("data-time-orders")) return;
    form.querySelectorAll("input[data-bound]").forEach(function (input) {
      if (input.type !== "datetime-local") return;
      var value = input.value;
      var exact = input.getAttribute("data-exact");
      input.type = "text";
      if (value && exact && value === input.getAttribute("data-shown")) {
        input.value = exact;  // untouched: exactly the bound the page was given
      } else if (value) {
        var seconds = new Date(value).getTime() / 1000;  // a datetime-local value is read as local time
        input.value = String(input.name === "max" ? seconds + 0.999 : seconds);
      }
    });
  }, true);
})();
