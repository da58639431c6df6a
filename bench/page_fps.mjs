// Frames per second of the forwarder's browser page (issue 19) in headless Chromium over
// loopback, at each particle count given. For each: starts `forwarder-page-serve` (fake
// solver + forwarder), opens the page with `?bench=S` (it counts the frames it builds,
// uploads and draws during S seconds after its first one), reads the result over the DevTools
// protocol and writes every record to bench/results/forwarder_page.json.
//
// cargo build --release -p forwarder
// node --experimental-websocket bench/page_fps.mjs [--seconds 10] [--max 2000000] 1000000 10000000:200000
// (N:M: N particles published, the page's max-particles control at M; default --max)

import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync, readFileSync } from "node:fs";
import { tmpdir, cpus } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

const argv = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = argv.indexOf(name);
  if (i < 0) return dflt;
  const v = argv[i + 1];
  argv.splice(i, 2);
  return v;
};
const seconds = Number(opt("--seconds", "10"));
const maxDrawn = Number(opt("--max", "2000000"));
const out = opt("--out", "bench/results/forwarder_page.json");
const cases = (argv.length ? argv : ["1000000"]).map((a) => { const [n, m] = a.split(":").map(Number); return { n, max: m || maxDrawn }; });
const chromium = process.env.CHROMIUM || "/usr/bin/chromium";
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function serve(n) {
  const child = spawn("target/release/forwarder-page-serve", ["--particles", String(n)], { stdio: ["pipe", "pipe", "inherit"] });
  const line = await new Promise((resolve, reject) => {
    createInterface({ input: child.stdout }).once("line", resolve);
    child.once("exit", (c) => reject(new Error("forwarder-page-serve exited " + c)));
  });
  return { child, addr: line.replace("listening on ", "") };
}

async function devtools(url) {
  const dir = mkdtempSync(join(tmpdir(), "page-bench-"));
  const child = spawn(chromium, ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
    "--disable-background-networking", "--window-size=1280,800", "--remote-debugging-port=0",
    `--user-data-dir=${dir}`, url], { stdio: "ignore" });
  let port = null;
  for (let i = 0; i < 200 && !port; i++) {
    await sleep(100);
    try { port = readFileSync(join(dir, "DevToolsActivePort"), "utf8").split("\n")[0]; } catch { /* not yet */ }
  }
  const targets = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
  const page = targets.find((t) => t.type === "page");
  const ws = new WebSocket(page.webSocketDebuggerUrl);
  await new Promise((r) => ws.addEventListener("open", r, { once: true }));
  let id = 0;
  const pending = new Map();
  ws.addEventListener("message", (e) => {
    const m = JSON.parse(e.data);
    if (pending.has(m.id)) { pending.get(m.id)(m); pending.delete(m.id); }
  });
  const evaluate = (expression) => new Promise((r) => {
    pending.set(++id, (m) => r(m.result && m.result.result && m.result.result.value));
    ws.send(JSON.stringify({ id, method: "Runtime.evaluate", params: { expression } }));
  });
  return { child, evaluate, close: () => { ws.close(); child.kill(); } };
}

const runs = [];
for (const { n, max } of cases) {
  const server = await serve(n);
  const url = `http://${server.addr}/?bench=${seconds}&max=${max}`;
  const browser = await devtools(url);
  let result = null;
  const deadline = Date.now() + (seconds + 120) * 1000;
  while (!result && Date.now() < deadline) {
    await sleep(1000);
    const v = await browser.evaluate("document.body.dataset.bench || ''");
    if (v) result = JSON.parse(v);
  }
  const hud = await browser.evaluate("document.getElementById('hud').textContent");
  browser.close();
  server.child.stdin.end();
  await new Promise((r) => server.child.once("exit", r));
  const rec = { particles: n, max_particles: max, ...(result || { error: "no result within the time limit" }), hud };
  console.log(JSON.stringify(rec));
  runs.push(rec);
}

writeFileSync(out, JSON.stringify({
  bench: "forwarder browser page: frames built, uploaded and drawn per second (headless Chromium, software GL), fake solver publishing positions at 60 Hz, page subscribed to quantised 16-bit positions at max_rate_hz 30 and max_particles M (protocol 4: the forwarder sends every k-th particle)",
  command: `cargo build --release -p forwarder && node --experimental-websocket bench/page_fps.mjs --seconds ${seconds} --max ${maxDrawn} ${argv.join(" ")}`,
  cores: cpus().length,
  note: "fake solver, forwarder, Chromium (renderer + GPU process running SwiftShader on the CPU) share this machine's cores; the page's colour mode is species (positions + static arrays)",
  runs,
}, null, 1) + "\n");
