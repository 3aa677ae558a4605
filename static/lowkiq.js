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

  // Live refresh: every element marked data-live polls (htmx) and replaces itself. One Pause/Resume for every
  // page, remembered in this browser.
  var KEY = "lowkiq.live.paused";
  function paused() {
    try { return window.localStorage.getItem(KEY) === "1"; } catch (e) { return false; }
  }
  function isLive(element) { return !!(element && element.hasAttribute && element.hasAttribute("data-live")); }
  // An operator in the middle of something on a listing (rows ticked, a payload unfolded, a field in use) would
  // lose it to a refresh: the refresh waits until they are done.
  function holding(element) {
    if (element.id !== "live") return false;
    // A folded panel (data-fold) open is a page layout, not work in progress: it does not hold the refresh.
    if (element.querySelector("input[name=ids]:checked, details[open]:not([data-fold])")) return true;
    var focused = document.activeElement;
    return !!(focused && focused !== document.body && element.contains(focused) && focused.matches("input, select, textarea"));
  }
  function show(held) {
    var button = document.getElementById("live-toggle");
    var status = document.getElementById("live-status");
    if (!button) return;
    // "refresh" in the label: a worker's page has a Pause of its own, which stops the queue.
    button.textContent = paused() ? "Resume refresh" : "Pause refresh";
    button.setAttribute("aria-pressed", paused() ? "true" : "false");
    if (status) {
      status.dataset.text = status.dataset.text || status.textContent;
      status.textContent = paused() ? "Live refresh paused" : held ? "Live refresh held while rows are selected or open" :
        status.dataset.text;
    }
  }
  document.addEventListener("click", function (event) {
    if (!event.target.closest || !event.target.closest("#live-toggle")) return;
    try { window.localStorage.setItem(KEY, paused() ? "0" : "1"); } catch (e) { /* private mode */ }
    show(false);
  });
  document.addEventListener("htmx:beforeRequest", function (event) {
    var element = event.detail.elt;
    if (!isLive(element)) return;
    var held = !paused() && holding(element);
    if (paused() || held) event.preventDefault();
    if (element.id === "live") show(held);
  });
  document.addEventListener("DOMContentLoaded", function () { show(false); });

  // A refresh that fails (Redis down, the console gone) must not leave old numbers looking current:
  // say so above them, grey them out, and clear it all at the first refresh that works.
  var failingSince = null;
  function liveFailed(event, why) {
    if (!isLive(event.detail.elt)) return;
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
      banner.append(since, ": " + why + ". What this page shows is from before then.");
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
    if (!isLive(event.detail.elt) || failingSince === null) return;
    failingSince = null;
    var banner = document.getElementById("live-error");
    if (banner) banner.hidden = true;
    show(false);
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
  // "14:05" of a moment in the zone chosen; the server's zone is read from an ISO time the server wrote (its offset).
  function clock(date, chosen, serverIso) {
    if (chosen === "utc") return two(date.getUTCHours()) + ":" + two(date.getUTCMinutes());
    if (chosen !== "local") {
      var offset = /([+-])(\d\d):(\d\d)$/.exec(serverIso || "");
      if (offset) {
        var minutes = (offset[1] === "-" ? -1 : 1) * (parseInt(offset[2], 10) * 60 + parseInt(offset[3], 10));
        var shifted = new Date(date.getTime() + minutes * 60000);
        return two(shifted.getUTCHours()) + ":" + two(shifted.getUTCMinutes());
      }
    }
    return two(date.getHours()) + ":" + two(date.getMinutes());
  }
  window.lowkiqClock = function (date, serverIso) { return clock(date, zone(), serverIso); };
  function rewrite(root) {
    var chosen = zone();
    var button = document.getElementById("tz-toggle");
    if (button) {
      button.hidden = false;
      button.textContent = chosen === "utc" ? "UTC" : chosen === "local" ? "Local time" : "Server time";
      button.setAttribute("aria-label", "Times shown: " + button.textContent + ". Change");
    }
    // A chart's time axis: hours and minutes only, in the zone chosen.
    (root || document).querySelectorAll("[data-clock]").forEach(function (element) {
      if (!element.hasAttribute("data-server-text")) element.setAttribute("data-server-text", element.textContent);
      var when = new Date(element.getAttribute("data-clock"));
      var server = element.getAttribute("data-server-text");
      if ((chosen !== "utc" && chosen !== "local") || isNaN(when.getTime()) || server.indexOf(":") < 0) {
        element.textContent = server;
        return;
      }
      element.textContent = clock(when, chosen, "");
    });
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
    var select = form.querySelector("select[name=order_by]");
    form.querySelectorAll("[data-text-order]").forEach(function (note) { note.hidden = !select || select.value !== "id"; });
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

// Relative times and running spans move on every second. Each carries what it was when the page (or the part
// refreshed) was drawn, by the server's clock: data-ago (seconds since the moment; negative: still to come)
// or data-elapsed; the browser adds the seconds since it first saw the element, so its own clock's error never shows.
(function () {
  "use strict";
  var seen = new WeakMap();
  function duration(seconds) {
    var s = Math.abs(seconds);
    if (s < 10) return s.toFixed(1) + " s";
    if (s < 60) return Math.round(s) + " s";
    if (s < 3600) return Math.floor(s / 60) + " min";
    if (s < 86400) return Math.floor(s / 3600) + " h " + Math.floor(s % 3600 / 60) + " min";
    return Math.floor(s / 86400) + " d " + Math.floor(s % 86400 / 3600) + " h";
  }
  function relative(ago) {
    if (Math.abs(ago) < 1) return "just now";
    return ago > 0 ? duration(ago) + " ago" : "in " + duration(ago);
  }
  function since(element, attribute) {
    var first = seen.get(element);
    if (first === undefined) {
      first = Date.now();
      seen.set(element, first);
    }
    return parseFloat(element.getAttribute(attribute)) + (Date.now() - first) / 1000;
  }
  function tick() {
    document.querySelectorAll("[data-ago]").forEach(function (element) {
      var text = relative(since(element, "data-ago"));
      if (element.textContent !== text) element.textContent = text;
    });
    document.querySelectorAll("[data-elapsed]").forEach(function (element) {
      var text = duration(since(element, "data-elapsed"));
      if (element.textContent !== text) element.textContent = text;
    });
  }
  window.lowkiqDuration = duration;
  document.addEventListener("DOMContentLoaded", function () {
    tick();
    window.setInterval(tick, 1000);
  });
  document.addEventListener("htmx:afterSettle", tick);
})();

// The history charts' read-out: under the pointer (or a finger), the time and the values of the minute there, or
// that nothing was recorded then. The points come with the chart (data-points), so no request is made.
(function () {
  "use strict";
  function number(value) { return value.toLocaleString("en-US", {maximumFractionDigits: 1}); }
  function points(box) {
    if (!box._points) {
      try { box._points = JSON.parse(box.getAttribute("data-points") || "[]"); } catch (e) { box._points = []; }
    }
    return box._points;
  }
  function at(box, when) {
    var list = points(box);
    var best = null;
    var distance = Infinity;
    for (var i = 0; i < list.length; i++) {
      var p = list[i];
      var d = when < p[0] ? p[0] - when : when > p[1] ? when - p[1] : 0;
      if (d < distance || (d === distance && d === 0 && best && best[5] && !p[5])) { best = p; distance = d; }
    }
    return {point: best, distance: distance};
  }
  function clock(seconds, box) {
    var iso = (box.querySelector("[data-clock]") || {getAttribute: function () { return ""; }}).getAttribute("data-clock");
    return window.lowkiqClock ? window.lowkiqClock(new Date(seconds * 1000), iso) : new Date(seconds * 1000).toTimeString().slice(0, 5);
  }
  function describe(box, when) {
    var found = at(box, when);
    var p = found.point;
    if (!p || found.distance > 120) {
      var last = points(box)[points(box).length - 1];
      return clock(when, box) + " · no data recorded" + (last && when > last[1] ? " since " + clock(last[1], box) : "");
    }
    var span = p[1] - p[0];
    var when_ = span > 90 ? clock(p[0], box) + "–" + clock(p[1], box) : clock(p[1], box);
    if (p[5]) {
      return when_ + " · no data recorded (" + number(p[2] * span / 60) + " processed and " + number(p[3] * span / 60) +
        " failed over the span)";
    }
    var lag = window.lowkiqDuration ? window.lowkiqDuration(p[4]) : p[4] + " s";
    return when_ + " · " + number(p[2]) + " processed/min · " + number(p[3]) + " failed/min · lag " + lag +
      (span > 90 ? " (averages over " + Math.round(span / 60) + " min)" : "");
  }
  function hide(box) {
    var tip = box.querySelector(".chart-tip");
    var cursor = box.querySelector(".chart-cursor");
    if (tip) tip.hidden = true;
    if (cursor) cursor.hidden = true;
  }
  function move(event) {
    var plot = event.target.closest && event.target.closest(".chart-plot");
    var box = plot && plot.closest(".chart-box");
    document.querySelectorAll(".chart-box").forEach(function (other) { if (other !== box) hide(other); });
    if (!box) return;
    var area = plot.getBoundingClientRect();
    var frame = box.getBoundingClientRect();
    var fraction = Math.min(Math.max((event.clientX - area.left) / area.width, 0), 1);
    var start = parseFloat(box.getAttribute("data-start"));
    var end = parseFloat(box.getAttribute("data-end"));
    var tip = box.querySelector(".chart-tip");
    tip.textContent = describe(box, start + fraction * (end - start));
    tip.hidden = false;
    var cursor = box.querySelector(".chart-cursor");
    if (!cursor) {
      cursor = document.createElement("div");
      cursor.className = "chart-cursor";
      box.appendChild(cursor);
    }
    var x = event.clientX - frame.left;
    cursor.hidden = false;
    cursor.style.left = x + "px";
    var plots = box.querySelectorAll(".chart-plot");
    cursor.style.top = (plots[0].getBoundingClientRect().top - frame.top) + "px";
    cursor.style.height = (plots[plots.length - 1].getBoundingClientRect().bottom - plots[0].getBoundingClientRect().top) + "px";
    var left = Math.min(Math.max(x - tip.offsetWidth / 2, 0), Math.max(frame.width - tip.offsetWidth, 0));
    tip.style.left = left + "px";
  }
  document.addEventListener("pointermove", move);
  document.addEventListener("pointerdown", move);
})();

// Folded panels (charts, groups, Redis's facts): <details data-fold="NAME">, open or closed as this browser last left
// it (localStorage), also when a live refresh draws it again.
(function () {
  "use strict";
  var PREFIX = "lowkiq.fold.";
  function remembered(name) {
    try { return window.localStorage.getItem(PREFIX + name); } catch (e) { return null; }
  }
  function apply(root) {
    (root || document).querySelectorAll("details[data-fold]").forEach(function (details) {
      var state = remembered(details.getAttribute("data-fold"));
      if (state !== null) details.open = state === "open";
    });
  }
  document.addEventListener("toggle", function (event) {
    var details = event.target;
    if (!details.matches || !details.matches("details[data-fold]")) return;
    try {
      window.localStorage.setItem(PREFIX + details.getAttribute("data-fold"), details.open ? "open" : "closed");
    } catch (e) { /* private mode: this page only */ }
  }, true);
  document.addEventListener("DOMContentLoaded", function () { apply(); });
  document.addEventListener("htmx:afterSwap", function () { apply(); });
})();

// On a phone the filter form folds unless a filter is set, so that the list is the first thing on the screen.
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    if (!window.matchMedia || !window.matchMedia("(max-width: 600px)").matches) return;
    document.querySelectorAll("details[data-narrow-fold]:not([data-active])").forEach(function (details) {
      details.open = false;
    });
  });
})();
