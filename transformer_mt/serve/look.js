// mt serve's page, part two: look deeper at the chosen sentence through POST /v1/lens,
// /v1/switch, /v1/run and /v1/compare (serve/inside.py). Uses page.js's $, el, api, status,
// fixed, lines, chosen, inside and view.
"use strict";
let runs = [];  // /v1/run's checkpoints, in the order of their steps
const PARTS = {attention: "cross", decoder_attention: "decoder-self", encoder_attention: "encoder-self"};
const th = (text) => el("th", {scope: "col", textContent: text});
const td = (text) => el("td", {textContent: text});
const caption = (text) => el("caption", {className: "sr-only", textContent: text});

function resetDeeper() {  // what was shown is of the sentence before
  $("deeper").hidden = true;
  $("lens").replaceChildren(caption("logit lens"));
  $("switched").replaceChildren();
  $("compare-part").replaceChildren();
  $("run-part").hidden = true;
  runs = [];
}

async function busy(button, work) {
  button.disabled = true;
  status("looking deeper…");
  try { await work(); status(""); } catch (e) { status(e.message, true); } finally { button.disabled = false; }
}

// ------------------------------------------------------------------- logit lens

async function showLens() {
  const found = await api("/v1/lens", {text: lines[chosen], tokens: inside.tokens, k: 3});
  const rows = found.output.map((token, t) => el("tr", {}, el("th", {scope: "row", textContent: token}),
    ...found.layers.map((_, i) => lensCell(found.top[i][t], found.written[i][t], token))));
  $("lens").replaceChildren(caption("logit lens: a row per token written, a column per layer"),
                            el("tr", {}, th("written"), ...found.layers.map(th)), ...rows);
}

function lensCell(top, written, token) {
  const cell = td(`${top[0][0]} · ${(100 * written).toFixed(0)} %`);
  cell.title = "most probable here: " + top.map(([w, p]) => `${w} ${(100 * p).toFixed(1)} %`).join(", ");
  cell.style.background = `hsl(220, 75%, ${Math.round(100 - 30 * written)}%)`;  // dark text stays readable
  if (top[0][0] === token) cell.style.fontWeight = "bold";
  return cell;
}

// ------------------------------------------------------------------- switches

function addChosenHead() {
  if (view.head === "mean") { status("pick one head (not the mean) in the attention grid", true); return; }
  const spec = `${PARTS[$("kind").value]}:${view.layer + 1}:${view.head + 1}`;
  const specs = $("switches").value.split(",").map((x) => x.trim()).filter(Boolean);
  if (!specs.includes(spec)) specs.push(spec);
  $("switches").value = specs.join(", ");
}

async function showSwitched() {
  const switches = $("switches").value.split(",").map((x) => x.trim()).filter(Boolean);
  if (!switches.length) throw new Error("write a part to switch first, e.g. cross:1:1");
  const found = await api("/v1/switch", {text: lines[chosen], switches});
  const was = found.trained.tokens, now = found.switched.tokens;
  const changed = now.filter((t, i) => was[i] !== t).length + Math.max(0, was.length - now.length);
  const cost = found.trained_scored === null ? "cannot write it at all"
    : `gives it log-prob ${fixed(found.trained_scored)} (${(found.trained_scored - found.trained.log_prob).toFixed(3)})`;
  $("switched").replaceChildren(
    el("p", {}, el("strong", {textContent: "As trained: "}), `${found.trained.text} (log-prob ${fixed(found.trained.log_prob)})`),
    el("p", {}, el("strong", {textContent: `With ${switches.join(", ")} switched: `}),
       `${found.switched.text} (log-prob ${fixed(found.switched.log_prob)})`),
    el("div", {className: "tokens", role: "group", ariaLabel: "the switched translation's tokens"},
       ...now.map((t, i) => el("span", {className: "tok" + (was[i] !== t ? " changed" : ""), textContent: t}))),
    el("p", {className: "muted", id: "switch-summary",
             textContent: `${changed} token${changed === 1 ? "" : "s"} changed (highlighted). The switched model ${cost} to the translation as trained.`}));
}

// ------------------------------------------------------------------- across the training run

async function showRun() {
  runs = (await api("/v1/run", {text: lines[chosen]})).checkpoints;
  const slider = $("run-slider");
  slider.max = runs.length - 1;
  slider.value = runs.length - 1;
  $("run-table").replaceChildren(caption("every checkpoint's translation"),
    el("tr", {}, th("step"), th("checkpoint"), th("log-prob"), th("translation")),
    ...runs.map((c, i) => el("tr", {id: "run-" + i}, td(c.step), td(c.name), td(fixed(c.log_prob)), td(c.text))));
  $("run-part").hidden = false;
  showCheckpoint();
}

function showCheckpoint() {
  const n = +$("run-slider").value, c = runs[n];
  $("run-out").textContent = `step ${c.step} (${c.name}): ${c.text}`;
  runs.forEach((_, i) => $("run-" + i).classList.toggle("chosen-row", i === n));
  const linked = new Set(c.links.map(([i, j]) => `${i},${j}`));
  $("run-links").replaceChildren(caption(`word links at step ${c.step}: a row per output word, a column per source word`),
    el("tr", {}, el("td"), ...c.source_words.map(th)),
    ...c.output_words.map((word, j) => el("tr", {}, el("th", {scope: "row", textContent: word}),
      ...c.source_words.map((_, i) => linked.has(`${i},${j}`) ? el("td", {className: "on", textContent: "●"}) : td("")))));
}

// ------------------------------------------------------------------- two models

async function showCompare() {
  const models = (await api("/v1/compare", {text: lines[chosen]})).models;
  const words = [...new Set(models.flatMap((m) => Object.keys(m.links)))].sort((a, b) => parseInt(a) - parseInt(b));
  const links = words.map((w) => {
    const linked = models.map((m) => (m.links[w] || []).join(" ") || "–");
    const differs = new Set(linked).size > 1;
    return el("tr", {className: differs ? "differs" : ""},
              el("th", {scope: "row", textContent: w.split(":").slice(1).join(":") + (differs ? " ≠" : "")}), ...linked.map(td));
  });
  $("compare-part").replaceChildren(
    el("table", {className: "steps", id: "compare-table"}, caption("the two models' translations"),
       el("tr", {}, th("model"), th("translation"), th("log-prob"), th("log-prob of the other's")),
       ...models.map((m) => el("tr", {}, td(m.name), td(m.text), td(fixed(m.log_prob)),
                               td(m.of_other === null ? "cannot write it" : fixed(m.of_other))))),
    el("table", {className: "lens", id: "compare-links"}, caption("source word by source word, the output words each model links to it; ≠ where they differ"),
       el("tr", {}, th("source word"), ...models.map((m) => th(m.name))), ...links));
}

// ------------------------------------------------------------------- wiring

$("lens-go").onclick = () => busy($("lens-go"), showLens);
$("switch-head").onclick = addChosenHead;
$("switch-go").onclick = () => busy($("switch-go"), showSwitched);
$("run-go").onclick = () => busy($("run-go"), showRun);
$("compare-go").onclick = () => busy($("compare-go"), showCompare);
$("run-slider").addEventListener("input", showCheckpoint);
fetch("/v1/info").then((r) => r.json()).then((data) => {
  if (!data.look.run.length) {
    $("run-go").disabled = true;
    $("run-note").textContent = "This server shows no training run: start mt serve with --run-dir DIR (a run directory of mt train).";
  }
  if (data.look.compare) $("compare-go").textContent = `Compare with ${data.compare}`;
  else {
    $("compare-go").disabled = true;
    $("compare-note").textContent = "This server has no second model: start mt serve with --compare CHECKPOINT.";
  }
});
