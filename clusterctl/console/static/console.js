// Live regions: <div id="live" data-live="VIEW"> is replaced by each server-sent event from /live/VIEW.
(function () {
  "use strict";
  var region = document.getElementById("live");
  var dot = document.getElementById("live-state");
  if (!region || !region.dataset.live || !window.EventSource) {
    return;
  }
  var source = new EventSource("/live/" + region.dataset.live);
  source.onopen = function () {
    if (dot) dot.className = "live-state on";
  };
  source.onerror = function () {
    if (dot) dot.className = "live-state off";
  };
  source.onmessage = function (event) {
    region.innerHTML = event.data;
    region.dataset.updated = String(Date.now());
    if (dot) dot.className = "live-state on";
  };
  window.addEventListener("pagehide", function () {
    source.close();
  });
})();
