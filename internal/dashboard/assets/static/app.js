// The dashboard's live parts: new alerts and telemetry pushed by the
// server (server-sent events from /ui/events), and the event-name filter.
// Everything shown is set with textContent, never parsed as HTML.
"use strict";
(function () {
  const body = document.body;
  const csrf = body.dataset.csrf;
  const live = document.getElementById("live-list");
  const status = document.getElementById("live-status");
  const filter = document.getElementById("filter");
  const alertList = document.getElementById("alert-list");
  const unread = document.getElementById("unread");
  const maxRows = 500;

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function hhmmss(iso) {
    return new Date(iso).toISOString().substring(11, 19);
  }
  function matches(name) {
    const f = filter.value.trim();
    return f === "" || name.indexOf(f) >= 0;
  }
  function applyFilter() {
    for (const row of live.children) row.hidden = !matches(row.dataset.name);
  }
  filter.addEventListener("input", applyFilter);

  function addTelemetry(r) {
    const row = el("li", "record");
    row.dataset.name = r.name;
    row.append(el("time", "", hhmmss(r.at)), " ");
    if (body.dataset.operator === "true") row.append(el("span", "tenant", r.tenant), " ");
    row.append(el("span", "event", r.name), " ");
    const text = JSON.stringify(r.event);
    row.append(el("code", "", text.length > 300 ? text.substring(0, 300) + "…" : text));
    row.hidden = !matches(r.name);
    live.prepend(row);
    while (live.children.length > maxRows) live.lastChild.remove();
  }

  function addAlert(a) {
    if (alertList.querySelector('[data-key="' + a.key + '"]')) return;
    const empty = alertList.querySelector(".empty");
    if (empty) empty.remove();
    const row = el("li", "alert fresh" + (a.critical ? " critical" : ""));
    row.dataset.key = a.key;
    row.append(el("time", "", hhmmss(a.at)), " ");
    if (a.critical) row.append(el("span", "tag", "critical"), " ");
    row.append(el("span", "event", a.event), " ", el("span", "summary", a.summary));
    const form = el("form");
    form.method = "post";
    form.action = "/ui/alerts/ack";
    for (const [n, v] of [["csrf", csrf], ["alert", a.key]]) {
      const i = el("input");
      i.type = "hidden";
      i.name = n;
      i.value = v;
      form.append(i);
    }
    form.append(el("button", "", "Acknowledge"));
    row.append(form);
    // Critical alerts stay pinned above the others.
    if (a.critical) {
      alertList.prepend(row);
    } else {
      const firstPlain = alertList.querySelector("li.alert:not(.critical)");
      alertList.insertBefore(row, firstPlain);
    }
    unread.textContent = String(a.unread);
    notifyCritical(a);
  }

  // Browser notifications of critical alerts, on opt-in: the button asks
  // for the browser's permission; the permission is the opt-in.
  const notify = document.getElementById("notify");
  function showNotify() {
    notify.hidden = !("Notification" in window) || Notification.permission !== "default";
  }
  notify.addEventListener("click", function () {
    Notification.requestPermission().then(showNotify);
  });
  showNotify();
  function notifyCritical(a) {
    if (!a.critical || !("Notification" in window) || Notification.permission !== "granted") return;
    new Notification("snavio: " + a.event, { body: a.summary, tag: a.key });
  }

  const since = encodeURIComponent(body.dataset.alertsSince || "");
  const es = new EventSource("/ui/events?alerts_since=" + since);
  es.addEventListener("open", function () { status.textContent = "live"; });
  es.addEventListener("error", function () { status.textContent = "reconnecting…"; });
  es.addEventListener("telemetry", function (m) { addTelemetry(JSON.parse(m.data)); });
  es.addEventListener("alert", function (m) { addAlert(JSON.parse(m.data)); });
  es.addEventListener("signedout", function () {
    es.close();
    window.location.assign("/ui/signin");
  });
  es.addEventListener("failure", function (m) {
    status.textContent = "stream failed: " + JSON.parse(m.data).error;
  });
})();
