// particle-shm forwarder browser viewer: wires the protocol client, the camera, the colouring
// pass and the WebGL2 renderer to the page's controls and HUD.
//
// Query flags (all optional): token=T, rate=HZ (max_rate_hz), color=MODE, range=LO,HI,
// max=N (max particles received and drawn), clip=AXIS,VALUE[,above], view=top, hide=S1,S2 (species ids),
// walls=hidden|dimmed|shown (SPH boundary particles; default hidden, and an SPH run is coloured
// by pressure unless color= says otherwise, as in the native viewer).
// Test/bench hooks, each doing what a user would: autopause=1 (presses Pause after the first
// frame is drawn), typetoken=T (types T into the token form when it appears and presses
// Connect), probe=X,Y,Z;... (writes the screen positions of these world points to
// body[data-probes]), bench=S (counts frames drawn for S s, result in body[data-bench]).
// The page reports its state on <body data-*>: renderer, state, frames, drawn, total, received
// (particles in the last frame message), legend, walls (SPH runs: what is done with the walls).

import { Camera } from "./camera.js";
import { build, COLOR_BY, isSph, SPECIES_PALETTE, WALLS } from "./colors.js";
import { Client, FIELD } from "./protocol.js";
import { Renderer } from "./renderer.js";

const params = new URLSearchParams(location.search);
const $ = (id) => document.getElementById(id);
const body = document.body.dataset;

const opts = {
  colorBy: COLOR_BY[params.get("color")] ? params.get("color") : "species",
  range: params.get("range") ? params.get("range").split(",").map(Number) : null,
  maxParticles: Number(params.get("max") || 2_000_000),
  hidden: new Set((params.get("hide") || "").split(",").filter((s) => s !== "").map(Number)),
  clip: null,
  walls: WALLS.includes(params.get("walls")) ? params.get("walls") : "hidden",
};
// The colouring was chosen (URL or menu): an SPH run's static data does not change it.
let colorChosen = COLOR_BY[params.get("color")] !== undefined;
if (params.get("clip")) {
  const [axis, value, keep] = params.get("clip").split(",");
  opts.clip = { axis: "xyz".indexOf(axis), value: Number(value), keep: keep === "above" ? "above" : "below" };
}
let rate = Number(params.get("rate") || 30);
let token = params.get("token") || "";

const camera = new Camera();
let renderer;
try {
  renderer = new Renderer($("c"));
  body.renderer = renderer.glName;
} catch (e) {
  body.renderer = "none";
  $("hud").textContent = "cannot draw: " + e.message;
  throw e;
}

// ---- state ----------------------------------------------------------------------------------
let client = null;
let segment = "", status = null, st = null, frame = null, built = null;
let framesDrawn = 0, received = 0, fps = 0, fpsFrames = 0, fpsT = performance.now();
let needBuild = false, needDraw = true, fitted = params.get("view") ? null : false;
const acks = new Map(); // id -> line
let autopaused = false;

function subscription() {
  const need = COLOR_BY[opts.colorBy][1];
  let fields = (1 << FIELD.position) | (1 << FIELD.particle_id);
  if (need !== null) fields |= 1 << need;
  // The forwarder sends at most maxParticles (every k-th, named by id): a 10 M-particle frame
  // costs the network and this page what a 200 k one does.
  return { fields, positions: "Quantized16", max_rate_hz: rate, static_arrays: true,
    max_particles: opts.maxParticles };
}

function connect() {
  if (client) client.close();
  body.state = "connecting";
  client = new Client(token, subscription(), {
    open: () => { body.state = "connected"; showHud(); },
    close: (why) => {
      if (body.state !== "refused") {
        body.state = "disconnected";
        setTimeout(connect, 2000);
      }
      showHud(why);
    },
    welcome: (w) => { segment = w.segment; },
    refused: (why) => {
      body.state = "refused";
      $("tokenwhy").textContent = "refused: " + why;
      $("tokenform").style.display = "block";
      showHud(why);
      const typed = params.get("typetoken");
      if (typed !== null && !$("token").dataset.typed) {
        $("token").dataset.typed = "1";
        $("token").value = typed;
        $("connect").click();
      }
    },
    status: (s) => { status = s; showHud(); },
    static_: (s) => {
      st = s;
      const sph = isSph(s);
      $("wallsbox").style.display = sph ? "" : "none";
      body.walls = sph ? opts.walls : "";
      if (sph && !colorChosen && opts.colorBy !== "pressure") {
        opts.colorBy = "pressure";
        $("colorby").value = opts.colorBy;
        client.subscribe(subscription());
      }
      renderer.setStatic(s);
      if (fitted !== null && !fitted) { fitBox(); fitted = true; }
      if (fitted === null) { applyView(); fitted = true; }
      showLegend();
      needBuild = true;
    },
    frame: (f) => { frame = f; received++; needBuild = true; },
    ack: (id, text) => { setAck(id, text); },
  });
}

function worldBox() {
  const h = st && st.header;
  if (h && h.world_min.every((v, i) => Number.isFinite(v) && h.world_max[i] > v)) return [h.world_min, h.world_max];
  if (frame) return [frame.header.quant_min, frame.header.quant_max];
  return [[0, 0, 0], [1, 1, 1]];
}
function fitBox() { const [lo, hi] = worldBox(); camera.fit(lo, hi); needDraw = true; }
function applyView() {
  const [lo, hi] = worldBox();
  if (params.get("view") === "top") camera.top(lo, hi); else camera.reset(lo, hi);
  needDraw = true;
}

// ---- drawing --------------------------------------------------------------------------------
function tick() {
  requestAnimationFrame(tick);
  if (needBuild && frame) {
    built = build(frame, st, opts);
    renderer.setParticles(built, frame.header);
    renderer.setBodies(frame.bodies);
    needBuild = false;
    needDraw = true;
    framesDrawn++;
    fpsFrames++;
    body.frames = framesDrawn;
    body.drawn = built.count;
    body.total = built.total;
    body.received = frame.n;
    showLegend();
    if (framesDrawn === 1) showHud(); // not "no frame yet" for up to a second
  }
  if (needDraw) {
    renderer.draw(camera);
    needDraw = false;
    writeProbes();
    if (params.get("autopause") === "1" && built && !autopaused) { autopaused = true; $("pause").click(); }
  }
  const now = performance.now();
  if (now - fpsT >= 1000) { fps = (fpsFrames * 1000) / (now - fpsT); fpsFrames = 0; fpsT = now; showHud(); }
}

function writeProbes() {
  const p = params.get("probe");
  if (!p) return;
  const c = $("c");
  body.viewport = `${c.clientWidth},${c.clientHeight}`;
  body.probes = JSON.stringify(p.split(";").map((s) => camera.project(s.split(",").map(Number), c.clientWidth, c.clientHeight)));
}

// ---- HUD, legend, acks ----------------------------------------------------------------------
function showHud(extra) {
  const s = status && status.solver;
  const state = !status ? (body.state || "?") : !status.attached ? "detached" : s && s.state ? String(s.state).toLowerCase() : "unknown";
  const m = frame && frame.meta;
  const lines = [`segment ${segment || "?"}   ${state}${s && s.alive === false ? " (solver gone)" : ""}`];
  if (m) {
    const age = Date.now() - m.wall_unix_ns / 1e6;
    lines.push(`t = ${m.sim_time.toPrecision(6)} s   step ${m.step}   ${m.steps_per_s.toFixed(1)} steps/s`);
    lines.push(`frame ${m.seq}   age ${age < 1e4 ? age.toFixed(0) + " ms" : (age / 1000).toFixed(1) + " s"}   ${fps.toFixed(1)} frames/s drawn`);
    if (built) lines.push(`particles ${built.count.toLocaleString()} drawn of ${built.total.toLocaleString()}` + (built.stride > 1 ? ` (every ${built.stride}th)` : "") + (built.walls > 0 ? `, ${built.walls.toLocaleString()} walls hidden` : ""));
    if (m.removed_count > 0) lines.push(`${m.removed_count} removed (${m.removed_mass.toPrecision(4)} kg)`);
  } else lines.push("no frame yet");
  lines.push(`GL: ${renderer.glName}`);
  if (extra) lines.push(String(extra));
  $("hud").textContent = lines.join("\n");
}

function showLegend() {
  const el = $("legend");
  const mode = built ? built.mode : "species";
  const title = COLOR_BY[mode][0];
  if (mode === "species") {
    const names = st ? st.header.species.map((s) => s.name) : [];
    const key = "species:" + names.join(",") + [...opts.hidden].join(",");
    if (el.dataset.key === key) return;
    el.dataset.key = key;
    body.legend = "species";
    el.innerHTML = `<div>${title} (click to filter)</div>`;
    names.forEach((name, i) => {
      const c = SPECIES_PALETTE[i % SPECIES_PALETTE.length];
      const l = document.createElement("label");
      l.innerHTML = `<input type="checkbox" ${opts.hidden.has(i) ? "" : "checked"}><span class="sw" style="background:rgb(${c})"></span>`;
      l.append(name);
      l.firstChild.onchange = (e) => { if (e.target.checked) opts.hidden.delete(i); else opts.hidden.add(i); rebuild(); };
      el.append(l);
    });
    return;
  }
  const [lo, hi] = built.range;
  const key = `${mode}:${lo}:${hi}`;
  if (el.dataset.key === key) return;
  el.dataset.key = key;
  body.legend = `${lo},${hi}`;
  el.innerHTML = `<div>${title}</div><canvas width="256" height="1"></canvas><div class="ends"><span>${fmt(lo)}</span><span>${fmt(hi)}</span></div>`;
  const g = el.querySelector("canvas").getContext("2d");
  const grad = g.createLinearGradient(0, 0, 256, 0);
  for (let i = 0; i <= 8; i++) grad.addColorStop(i / 8, `rgb(${viridisStop(i)})`);
  g.fillStyle = grad;
  g.fillRect(0, 0, 256, 1);
  if (opts.range === null) { $("rmin").value = fmt(lo); $("rmax").value = fmt(hi); }
}
const viridisStop = (i) => [[68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142], [33, 144, 141],
  [39, 173, 129], [92, 200, 99], [170, 220, 50], [253, 231, 37]][i];
const fmt = (v) => (Math.abs(v) >= 1e4 || (Math.abs(v) < 1e-3 && v !== 0) ? v.toExponential(3) : String(+v.toPrecision(4)));

function setAck(id, text) {
  ackSeen = true;
  const line = acks.get(id);
  if (!line) return;
  acks.set(id, line.replace(/: .*$/, "") + ": " + text);
  showAcks();
}
function showAcks() {
  $("acks").textContent = [...acks.values()].slice(-6).join("\n");
}
function command(name, cmd) {
  const id = client.command(cmd);
  acks.set(id, `#${id} ${name}: sent`);
  showAcks();
}

function rebuild() { needBuild = true; }

// ---- controls -------------------------------------------------------------------------------
for (const [mode, [title]] of Object.entries(COLOR_BY)) {
  const o = document.createElement("option");
  o.value = mode; o.textContent = title; $("colorby").append(o);
}
$("colorby").value = opts.colorBy;
$("colorby").onchange = (e) => {
  opts.colorBy = e.target.value;
  colorChosen = true;
  if (opts.range === null) $("rmin").value = $("rmax").value = "";
  client.subscribe(subscription());
  rebuild();
};
for (const w of WALLS) {
  const o = document.createElement("option");
  o.value = w; o.textContent = w; $("walls").append(o);
}
$("walls").value = opts.walls;
$("walls").onchange = (e) => { opts.walls = e.target.value; body.walls = opts.walls; rebuild(); };
$("rauto").checked = opts.range === null;
if (opts.range) { $("rmin").value = opts.range[0]; $("rmax").value = opts.range[1]; }
const setRange = () => {
  const lo = Number($("rmin").value), hi = Number($("rmax").value);
  opts.range = $("rauto").checked || !(hi > lo) ? null : [lo, hi];
  rebuild();
};
$("rauto").onchange = setRange;
$("rmin").onchange = $("rmax").onchange = () => { $("rauto").checked = false; setRange(); };
$("clipaxis").value = opts.clip ? String(opts.clip.axis) : "";
if (opts.clip) { $("clipvalue").value = opts.clip.value; $("clipkeep").value = opts.clip.keep; }
$("clipaxis").onchange = $("clipvalue").onchange = $("clipkeep").onchange = () => {
  const a = $("clipaxis").value;
  opts.clip = a === "" ? null : { axis: Number(a), value: Number($("clipvalue").value), keep: $("clipkeep").value };
  rebuild();
};
$("maxp").value = opts.maxParticles;
$("maxp").onchange = (e) => {
  opts.maxParticles = Math.max(1, Math.floor(Number(e.target.value)) || 1);
  client.subscribe(subscription());
  rebuild();
};
$("rate").value = rate;
$("rate").onchange = (e) => { rate = Math.max(1, Number(e.target.value) || 30); client.subscribe(subscription()); };
$("reset").onclick = () => { const [lo, hi] = worldBox(); camera.reset(lo, hi); needDraw = true; };
$("fit").onclick = fitBox;
$("topview").onclick = () => { const [lo, hi] = worldBox(); camera.top(lo, hi); needDraw = true; };

$("pause").onclick = () => command("pause", "Pause");
$("resume").onclick = () => command("resume", "Resume");
$("stop").onclick = () => { $("confirm").style.display = "inline"; };
$("stopno").onclick = () => { $("confirm").style.display = "none"; };
$("stopyes").onclick = () => { $("confirm").style.display = "none"; command("stop", "Stop"); };
$("updatenow").onclick = () => command("update now", "UpdateNow");
$("checkpoint").onclick = () => command("checkpoint", "Checkpoint");
$("setrefresh").onclick = () => {
  const v = Number($("refresh").value);
  const sim = $("refreshunit").value === "sim";
  command(`refresh ${v} ${sim ? "sim s" : "wall ms"}`,
    { SetRefresh: { sim_seconds: sim ? v : null, wall_ms: sim ? null : Math.round(v) } });
};
$("tokenform").onsubmit = (e) => {
  e.preventDefault();
  token = $("token").value.trim();
  $("tokenform").style.display = "none";
  body.state = "connecting";
  connect();
};

// Orbit with the left button, pan with the right button or shift, zoom with the wheel.
const canvas = $("c");
let drag = null;
canvas.addEventListener("contextmenu", (e) => e.preventDefault());
canvas.addEventListener("mousedown", (e) => { drag = { x: e.clientX, y: e.clientY, pan: e.button === 2 || e.shiftKey }; });
window.addEventListener("mouseup", () => { drag = null; });
window.addEventListener("mousemove", (e) => {
  if (!drag) return;
  const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
  if (drag.pan) camera.pan(dx, dy, canvas.clientHeight); else camera.orbit(dx, dy);
  drag.x = e.clientX; drag.y = e.clientY;
  needDraw = true;
});
canvas.addEventListener("wheel", (e) => { camera.zoom(Math.exp(e.deltaY * 0.001)); needDraw = true; e.preventDefault(); }, { passive: false });
window.addEventListener("resize", () => { renderer.resize(); needDraw = true; });

// ---- bench: frames drawn per second over S seconds after the first one ----------------------
const benchS = Number(params.get("bench") || 0);
if (benchS > 0) {
  const start = () => {
    if (!framesDrawn) { setTimeout(start, 50); return; }
    const f0 = framesDrawn, r0 = received, t0 = performance.now();
    setTimeout(() => {
      const s = (performance.now() - t0) / 1000;
      body.bench = JSON.stringify({ seconds: s, frames_drawn: framesDrawn - f0,
        page_fps: (framesDrawn - f0) / s, received_fps: (received - r0) / s,
        particles: built.total, drawn: built.count, stride: built.stride, gl: renderer.glName });
    }, benchS * 1000);
  };
  start();
}

// ---- test hook: hold=1 ------------------------------------------------------------------
// Headless Chromium's --virtual-time-budget lets virtual time run (and ends the page) when no
// network fetch is pending; WebSocket messages do not count. With hold=1 the page keeps two
// small fetches of /status in flight until what the other hooks wait for has happened (a frame
// drawn and, with autopause, its acknowledgement; or a refusal), then lets the budget run out.
let ackSeen = false;
function ready() {
  if (body.state === "refused" && params.get("typetoken") === null) return true;
  if (framesDrawn < 2) return false;
  if (params.get("autopause") === "1" && !ackSeen) return false;
  return true;
}
if (params.get("hold") === "1") {
  let left = 20000;
  const hold = () => {
    if (ready() || --left <= 0) { body.held = left > 0 ? "ready" : "gave up"; return; }
    fetch("/status", { cache: "no-store" }).then((r) => r.text()).catch(() => {}).then(hold);
  };
  hold();
  hold();
}

renderer.resize();
showHud();
connect();
requestAnimationFrame(tick);
