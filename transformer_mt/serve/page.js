// mt serve's page: translate, then steer the decoder and look inside it, through POST
// /v1/translate only (prefix, alternatives, attention, topk, beam_steps). No library, no CDN.
"use strict";
const $ = (id) => document.getElementById(id);
let info = {tokenizer: "spacy", decode: {alpha: 0.6}};
let lines = [];        // the sentences translated, one per line
let chosen = 0;        // the sentence the instrument works on
let inside = null;     // its translation, with what the model did
let view = {layer: -1, head: "mean"};
let timer = null;

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (name === "role" || name.startsWith("aria")) {  // attributes, e.g. ariaLabel: aria-label
      node.setAttribute(name.replace(/^aria/, "aria-").toLowerCase(), value);
    } else node[name] = value;
  }
  node.append(...children);
  return node;
}

async function api(path, body) {
  const headers = {"Content-Type": "application/json"};
  if ($("key").value) headers.Authorization = "Bearer " + $("key").value;
  const response = await fetch(path, {method: "POST", headers, body: JSON.stringify(body)});
  const data = await response.json();
  if (!response.ok) throw new Error(forPage(response.status, data.error || response.statusText));
  return data;
}

async function call(body) { return (await api("/v1/translate", body)).translations; }

// The API's words for a client, said as the page's user acts: the box to type in.
function forPage(code, message) {
  if (code === 401 || code === 403) return "this server needs an API key: type it in the API key box";
  if (/holds \d+ sentences/.test(message)) return "type one sentence per line to give a translation's start";
  return message;
}

function status(message, error = false) {
  $("status").replaceChildren(message ? el("span", {className: error ? "error" : "muted", textContent: message}) : "");
}

const fixed = (x) => (x === null || x === undefined ? "–" : x.toFixed(3));
const percent = (logp) => (100 * Math.exp(logp)).toFixed(1) + " %";

function sampling() { return +$("topk").value > 0 || +$("topp").value < 1; }

function settings() {
  const repeats = {no_repeat_ngram_size: Math.max(0, +$("norepeat").value || 0)};
  if (!sampling()) return {beam_size: +$("beam").value, ...repeats};
  return {beam_size: 1, sample_topk: +$("topk").value, top_p: +$("topp").value,
          temperature: +$("temperature").value, sample_seed: +$("seed").value, ...repeats};
}

// The text that tokenizes back into these output tokens, ending in a space: all of them forced.
function prefixText(tokens) {
  if (!tokens.length) return "";
  if (info.tokenizer === "sentencepiece") return tokens.join("").replace(/\u2581/g, " ").trim() + " ";
  return tokens.join(" ") + " ";
}

async function translateAll() {
  lines = $("source").value.split("\n").filter((l) => l.trim());
  if (!lines.length) return;
  chosen = Math.min(chosen, lines.length - 1);
  status("translating…");
  try {
    const nbest = Math.max(1, +$("nbest").value);  // (sampling: that many draws)
    const found = await call({text: lines, nbest, ...settings()});
    $("results").replaceChildren(...found.map((t, i) => row(i, t)));
    await lookInside();
  } catch (e) { status(e.message, true); }
}

function row(i, t) {
  const div = el("div", {className: "result" + (i === chosen ? " chosen" : ""), id: "row-" + i});
  div.append(el("div", {className: "source", dir: "auto", textContent: lines[i]}),
             el("div", {className: "translation", dir: "auto", textContent: t.text}),
             el("span", {className: "score", textContent: "score " + fixed(t.score)}));
  if (i !== chosen) {
    div.append(" ", el("button", {type: "button", textContent: "choose", onclick: () => {
      chosen = i; $("prefix").value = ""; translateAll(); }}));
  }
  if (t.nbest) div.append(el("ol", {className: "nbest"}, ...t.nbest.map((h) =>
    el("li", {textContent: `${h.text}  (score ${fixed(h.score)})`}))));
  return div;
}

async function lookInside() {
  if (info && info.inspect === false) {  // an exported model: its translations, nothing inside
    $("inside").hidden = true;
    resetDeeper();
    status(`this server decodes an exported model (engine ${info.engine}): translations only; ` +
           "serve a PyTorch checkpoint (.pt) to look inside");
    return;
  }
  const body = {text: lines[chosen], ...settings(), attention: true, topk: 5};
  body.beam_steps = body.beam_size > 1;
  if ($("prefix").value.trim()) body.prefix = $("prefix").value;
  status("looking inside…");
  try {
    inside = (await call(body))[0];
  } catch (e) { $("inside").hidden = true; resetDeeper(); status(e.message, true); return; }
  resetDeeper();  // look.js: what it showed was of the sentence before
  if (inside.sentences) {  // what was shown is another sentence's: hidden
    $("inside").hidden = true;
    status("the chosen line holds several sentences: type one sentence per line to look inside", true);
    return;
  }
  status("");
  showChosen();
  $("alternatives").hidden = true;
  $("inside").hidden = false;
  $("deeper").hidden = false;
  drawGrid();
  drawLarge();
  showSteps();
  showBeam();
}

function showChosen() {
  const div = $("row-" + chosen);
  const forced = inside.forced || 0;
  const tokens = el("div", {className: "tokens", role: "group", ariaLabel: "the translation's tokens"});
  // a word the model wrote as <unk>, copied from the source (decode.replace_unk)
  const copied = (tok, i) => i >= forced && inside.output_tokens[i] === "<unk>" && tok !== "<unk>";
  inside.tokens.forEach((tok, i) => tokens.append(el("button", {
    type: "button", className: "tok" + (i < forced ? " forced" : "") + (copied(tok, i) ? " copied" : ""),
    textContent: tok, onclick: (e) => alternatives(i, e.target),
    title: (copied(tok, i) ? "the model wrote <unk> (a word it does not have): this is the source word it attends to most. " : "")
      + "what else could come here?"})));
  const penalty = ((5 + inside.tokens.length + 1) / 6) ** info.decode.alpha;
  const beam = settings().beam_size > 1;
  const summary = beam
    ? `log-prob ${fixed(inside.log_prob)} · score ${fixed(inside.score)} (= log-prob ÷ length penalty ${penalty.toFixed(2)}, as beam search ranks it)`
    : `log-prob ${fixed(inside.log_prob)}`;
  div.replaceChildren(el("div", {className: "source", dir: "auto", textContent: lines[chosen]}), tokens,
                      el("div", {className: "translation", dir: "auto", textContent: inside.text}),
                      el("span", {className: "score", textContent: summary}));
}

async function alternatives(position, button) {
  document.querySelectorAll(".tok.picked").forEach((b) => b.classList.remove("picked"));
  button.classList.add("picked");
  const tokens = inside.tokens.slice(0, position);
  status("asking for alternatives…");
  let found;
  try {
    found = (await call({text: lines[chosen], ...settings(), prefix: prefixText(tokens), alternatives: 5}))[0];
  } catch (e) { status(e.message, true); return; }
  status("");
  $("alternatives-title").textContent = `After “${tokens.join(" ") || "<bos>"}” the model could write:`;
  $("alternatives-list").replaceChildren(...found.alternatives.map((a) => {
    const bar = el("span", {className: "bar"});
    bar.style.width = Math.max(1, Math.round(80 * Math.exp(a.log_prob))) + "px";
    const ends = a.token === "<eos>";
    const label = `${ends ? "(end here)" : a.token} ${percent(a.log_prob)} → ${a.text || "(nothing)"}`;
    const pick = el("button", {type: "button", className: "alt", disabled: ends, onclick: () => {
      $("prefix").value = prefixText(a.tokens.slice(0, position + 1));
      lookInside(); }}, bar, label);
    return el("li", {}, pick);
  }));
  $("alternatives").hidden = false;
}

// ------------------------------------------------------------------- attention

function maps() { return inside[$("kind").value]; }

function labels(kind) {
  const src = inside.source_tokens, out = inside.output_tokens;
  if (kind === "encoder_attention") return [src, src];
  if (kind === "decoder_attention") return [out, ["<bos>", ...out.slice(0, -1)]];
  return [out, src];
}

function matrix(layer, head) {
  const heads = maps()[layer];
  if (head !== "mean") return heads[head];
  return heads[0].map((r, i) => r.map((_, j) => heads.reduce((a, h) => a + h[i][j], 0) / heads.length));
}

const shade = (v) => Math.round(255 * (1 - Math.sqrt(Math.max(0, v))));  // sqrt: small weights stay visible

function drawGrid() {
  const all = maps(), layers = all.length, heads = all[0].length;
  if (view.layer < 0 || view.layer >= layers) view.layer = layers - 1;
  const grid = $("grid");
  grid.style.gridTemplateColumns = `max-content repeat(${heads + 1}, max-content)`;
  const cells = [el("span")];
  for (let h = 0; h < heads; h++) cells.push(el("span", {className: "label", textContent: "head " + (h + 1)}));
  cells.push(el("span", {className: "label", textContent: "mean"}));
  for (let l = 0; l < layers; l++) {
    cells.push(el("span", {className: "label", textContent: "layer " + (l + 1)}));
    for (const h of [...Array(heads).keys(), "mean"]) {
      const m = matrix(l, h);
      const canvas = el("canvas", {width: m[0].length, height: m.length});
      canvas.style.imageRendering = "pixelated";
      const image = canvas.getContext("2d").createImageData(m[0].length, m.length);
      m.forEach((r, i) => r.forEach((v, j) => {
        const at = 4 * (i * m[0].length + j), s = shade(v);
        image.data.set([s, s, 255, 255], at);
      }));
      canvas.getContext("2d").putImageData(image, 0, 0);
      const pressed = view.layer === l && String(view.head) === String(h);
      cells.push(el("button", {type: "button", ariaLabel: `layer ${l + 1}, ${h === "mean" ? "mean over heads" : "head " + (h + 1)}`, ariaPressed: String(pressed),
                               onclick: () => { view = {layer: l, head: h}; drawGrid(); drawLarge(); }}, canvas));
    }
  }
  grid.replaceChildren(...cells);
}

function drawLarge() {
  const kind = $("kind").value, w = matrix(view.layer, view.head);
  const [rows, cols] = labels(kind);
  const canvas = $("heatmap"), ctx = canvas.getContext("2d");
  const cell = 24, left = 110, top = 90;
  canvas.width = left + cell * cols.length + 10;
  canvas.height = top + cell * rows.length + 10;
  ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, canvas.width, canvas.height);
  ctx.font = "12px system-ui, sans-serif"; ctx.fillStyle = "#1d1d1d";
  cols.forEach((tok, s) => {
    ctx.save(); ctx.translate(left + s * cell + cell / 2, top - 6); ctx.rotate(-Math.PI / 3);
    ctx.fillText(tok, 0, 0); ctx.restore();
  });
  rows.forEach((tok, t) => {
    ctx.fillStyle = "#1d1d1d"; ctx.textAlign = "right";
    ctx.fillText(tok, left - 6, top + t * cell + cell * 0.65);
    ctx.textAlign = "left";
    w[t].forEach((v, s) => {
      ctx.fillStyle = `rgb(${shade(v)}, ${shade(v)}, 255)`;
      ctx.fillRect(left + s * cell, top + t * cell, cell - 1, cell - 1);
    });
  });
  const name = $("kind").selectedOptions[0].textContent;
  const caption = `${name}, layer ${view.layer + 1}, ${view.head === "mean" ? "mean over heads" : "head " + (view.head + 1)}: a row per token that looks, a column per token looked at`;
  $("heatmap-caption").textContent = caption;
  canvas.setAttribute("aria-label", caption);
}

// ------------------------------------------------------------------- steps and beam

function showSteps() {
  $("steps").replaceChildren($("steps").querySelector("caption"), ...inside.steps.map((step, i) => {
    const cands = el("td");
    step.top.forEach(([tok, p]) => {
      const bar = el("span", {className: "bar"});
      bar.style.width = Math.max(1, Math.round(60 * p)) + "px";
      cands.append(el("span", {className: "cand" + (tok === step.chosen ? " pick" : "")}, bar, `${tok} ${p.toFixed(3)}`));
    });
    const notBest = step.top[0][0] !== step.chosen;
    return el("tr", {className: notBest ? "not-best" : ""}, el("td", {textContent: "step " + i}),
              el("td", {textContent: `→ ${step.chosen} (its log-prob ${fixed(step.log_prob)})`}), cands);
  }));
}

function showBeam() {
  $("beam-part").hidden = !inside.beam_steps;
  if (!inside.beam_steps) return;
  const key = (t) => t.join("\u0001");
  const root = {tokens: [], logp: 0, step: -1, children: []};
  const nodes = new Map([["", root]]);
  inside.beam_steps.forEach((kept, step) => kept.forEach((h) => {
    if (nodes.has(key(h.tokens))) return;
    const node = {tokens: h.tokens, logp: h.log_prob, step, children: []};
    nodes.set(key(h.tokens), node);
    const parent = nodes.get(key(h.tokens.slice(0, -1)));
    if (parent) parent.children.push(node);
  }));
  (inside.beam_finished || []).forEach((f) => {
    const parent = nodes.get(key(f.tokens));
    if (parent) parent.children.push({tokens: [...f.tokens, "<eos>"], logp: f.log_prob, score: f.score, step: f.step, children: [], ended: true});
  });
  const last = inside.beam_steps.length - 1;
  $("beam-tree").replaceChildren(el("ul", {}, treeNode(root, last)));
}

function onPath(node) {
  const out = inside.tokens;
  if (node.ended) return key2(node.tokens.slice(0, -1)) === key2(out);
  return node.tokens.every((t, i) => out[i] === t);
}
const key2 = (t) => t.join("\u0001");

function treeNode(node, last) {
  const token = node.tokens.length ? node.tokens[node.tokens.length - 1] : "<bos>";
  let text = `${token}  log-prob ${fixed(node.logp)}`;
  let cls = "node";
  if (node.ended) { text = `✓ ended: ${text}, score ${fixed(node.score)}`; cls += " ended"; }
  else if (!node.children.length && node.step < last) { text += `  ✗ dropped at step ${node.step + 1}`; cls += " dropped"; }
  const li = el("li", {className: onPath(node) ? "on-path" : ""}, el("span", {className: cls, textContent: text}));
  const kids = [...node.children].sort((a, b) => b.logp - a.logp);
  const main = kids.filter(onPath), others = kids.filter((k) => !onPath(k));
  if (main.length) li.append(el("ul", {}, ...main.map((k) => treeNode(k, last))));
  if (others.length) {
    li.append(el("details", {}, el("summary", {textContent: `${others.length} other branch${others.length > 1 ? "es" : ""}`}),
                 el("ul", {}, ...others.map((k) => treeNode(k, last)))));
  }
  return li;
}

// A file, through LibreTranslate's /translate_file: a link to the translation, or why not.
async function translateFile() {
  const file = $("file").files[0];
  const say = (message, error) => $("file-status").replaceChildren(
    el("span", {className: error ? "error" : "muted", textContent: message}));
  if (!file) return say("choose a file first", true);
  const form = new FormData();
  form.append("file", file);
  form.append("source", info.source_language);
  form.append("target", info.target_language);
  const headers = $("key").value ? {Authorization: "Bearer " + $("key").value} : {};
  say(`translating ${file.name}…`);
  try {
    const response = await fetch("/translate_file", {method: "POST", headers, body: form});
    const data = await response.json();
    if (!response.ok) throw new Error(forPage(response.status, data.error || response.statusText));
    $("file-status").replaceChildren(el("a", {id: "file-link", href: data.translatedFileUrl, download: "",
                                              textContent: `${file.name}, translated`}));
  } catch (e) { say(e.message, true); }
}

// ------------------------------------------------------------------- wiring

for (const id of ["beam", "temperature", "topk", "topp"]) {
  $(id).addEventListener("input", () => { $(id + "-out").textContent = $(id).value; syncControls(); });
  $(id).addEventListener("change", translateAll);
}
function syncControls() { $("beam").disabled = sampling(); $("temperature").disabled = !sampling(); $("seed").disabled = !sampling(); }
$("seed").addEventListener("change", translateAll);
$("norepeat").addEventListener("change", translateAll);
$("translate").onclick = translateAll;
$("file-go").onclick = translateFile;
fetch("/frontend/settings").then((r) => r.json()).then((settings) => {
  $("file").accept = settings.supportedFilesFormat.join(",");
  $("file-note").append(" Formats: " + settings.supportedFilesFormat.join(", ") + ".");
});
$("kind").onchange = () => { drawGrid(); drawLarge(); };
$("prefix").addEventListener("input", () => {
  clearTimeout(timer);
  timer = setTimeout(() => { if (lines.length) lookInside(); else translateAll(); }, 350);
});
syncControls();
fetch("/v1/info").then((r) => r.json()).then((data) => {
  info = data;
  $("norepeat").value = info.decode.no_repeat_ngram_size || 0;  // the server's settings
  $("beam").value = $("beam-out").textContent = Math.min(info.decode.beam_size || 5, +$("beam").max);
  if (info.source_language !== "de" && $("source").value === $("source").defaultValue) {
    $("source").value = "";  // the German example is no use to a model of another language
    $("source").placeholder = `Sentences in ${info.source_language}, one per line`;
  }
  $("prefix").disabled = !info.inspect;  // (a prefix is looked inside: a PyTorch checkpoint's)
  $("about").textContent = `${info.source_language} → ${info.target_language}, ${info.tokenizer} tokens, ` +
    `d_model ${info.model.d_model}, ${info.model.encoder_layers}+${info.model.decoder_layers} layers, ` +
    `${info.model.heads} heads` + (info.step ? `, step ${info.step}` : "") +
    (info.best_val_bleu ? `, val BLEU ${info.best_val_bleu.toFixed(1)}` : "") + `, engine ${info.engine}`;
});
