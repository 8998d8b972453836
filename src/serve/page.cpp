// The page of GET / (see page.h).
#include "serve/page.h"

namespace vit::serve {

const std::string& page_html() {
  static const std::string html = R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>vit serve</title>
<style>
  body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 60em; padding: 0 1em; color: #222; }
  h1 { font-size: 1.4em; margin-bottom: 0.2em; }
  .row { display: flex; gap: 2em; flex-wrap: wrap; align-items: flex-start; }
  #drop { border: 2px dashed #888; border-radius: 8px; padding: 1.5em; text-align: center; width: 20em; cursor: pointer; }
  #drop.over { background: #eef; }
  #preview { max-width: 20em; max-height: 20em; display: none; margin-top: 1em; }
  .bar { display: flex; align-items: center; gap: 0.5em; margin: 0.25em 0; }
  .bar .label { width: 10em; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
  .bar .track { width: 16em; }
  .bar .fill { height: 1em; background: #4a7bd0; min-width: 1px; }
  .bar .pct { width: 4em; text-align: right; font-variant-numeric: tabular-nums; }
  #attention { max-width: 100%; display: none; margin-top: 1em; }
  #status { color: #a00; min-height: 1.2em; }
  table { border-collapse: collapse; } td { padding: 0.1em 0.8em 0.1em 0; }
</style>
</head>
<body>
<h1>vit serve</h1>
<p>Pick a model and an image: the model's top-5 classes, its embedding, and where it looks.</p>
<div class="row">
  <div>
    <label>Model <select id="model"></select></label>
    <div id="modelinfo"></div>
    <div id="drop" tabindex="0">Drop an image here, or click to choose one
      <input id="file" type="file" accept="image/*" style="display:none">
    </div>
    <img id="preview" alt="the image">
  </div>
  <div>
    <div id="status"></div>
    <div id="bars"></div>
    <table>
      <tr><td>top-1</td><td id="top1">-</td></tr>
      <tr><td>embedding</td><td id="embedding">-</td></tr>
      <tr><td>latency</td><td id="latency">-</td></tr>
    </table>
  </div>
</div>
<img id="attention" alt="attention: the image, the last block's CLS attention, the rollout">
<script>
"use strict";
const $ = (id) => document.getElementById(id);
let models = [];
function show(text) { $("status").textContent = text; }
async function loadModels() {
  const r = await fetch("/v1/models");
  models = (await r.json()).models;
  for (const m of models) {
    const o = document.createElement("option");
    o.value = m.name; o.textContent = m.name;
    $("model").appendChild(o);
  }
  describe();
}
function current() { return models.find((m) => m.name === $("model").value); }
function describe() {
  const m = current();
  if (!m) return;
  $("modelinfo").textContent = m.model + " (" + m.layout + ", " + m.image_size + "x" + m.image_size + ", " +
    (m.classes > 0 ? m.classes + " classes" : "features only") + ")";
}
async function post(path, file) {
  const t0 = performance.now();
  const r = await fetch(path + "?model=" + encodeURIComponent($("model").value), {method: "POST", body: file});
  const ms = performance.now() - t0;
  if (!r.ok) { const e = await r.json(); throw new Error(e.error || r.statusText); }
  return {response: r, ms};
}
async function run(file) {
  show("");
  $("preview").src = URL.createObjectURL(file);
  $("preview").style.display = "block";
  $("bars").innerHTML = ""; $("top1").textContent = "..."; $("embedding").textContent = "...";
  const times = [];
  try {
    const m = current();
    if (m.classes > 0) {
      const p = await post("/v1/predict", file);
      times.push("predict " + p.ms.toFixed(1) + " ms");
      const answer = await p.response.json();
      for (const c of answer.predictions) {
        const row = document.createElement("div");
        row.className = "bar";
        row.innerHTML = '<span class="label"></span><span class="track"><div class="fill"></div></span><span class="pct"></span>';
        row.querySelector(".label").textContent = c.label;
        row.querySelector(".fill").style.width = (c.probability * 16).toFixed(2) + "em";
        row.querySelector(".pct").textContent = (c.probability * 100).toFixed(1) + "%";
        $("bars").appendChild(row);
      }
      $("top1").textContent = answer.predictions[0].label;
      $("top1").dataset.index = answer.predictions[0].index;
    } else {
      $("top1").textContent = "(no classifier)";
    }
    const e = await post("/v1/embed", file);
    times.push("embed " + e.ms.toFixed(1) + " ms");
    $("embedding").textContent = (await e.response.json()).shape.join(" x ") + " values";
    const a = await post("/v1/attention", file);
    times.push("attention " + a.ms.toFixed(1) + " ms");
    $("attention").src = URL.createObjectURL(await a.response.blob());
    $("attention").style.display = "block";
  } catch (err) {
    show(err.message);
  }
  $("latency").textContent = times.join(", ");
  document.body.dataset.done = "1";
}
$("model").addEventListener("change", describe);
$("drop").addEventListener("click", () => $("file").click());
$("file").addEventListener("change", () => { if ($("file").files[0]) run($("file").files[0]); });
$("drop").addEventListener("dragover", (ev) => { ev.preventDefault(); $("drop").classList.add("over"); });
$("drop").addEventListener("dragleave", () => $("drop").classList.remove("over"));
$("drop").addEventListener("drop", (ev) => {
  ev.preventDefault(); $("drop").classList.remove("over");
  if (ev.dataTransfer.files[0]) run(ev.dataTransfer.files[0]);
});
loadModels().catch((err) => show("cannot list the models: " + err.message));
</script>
</body>
</html>
)HTML";
  return html;
}

}  // namespace vit::serve
