// particle-shm forwarder browser view: WebSocket client (PROTOCOL.md, "WebSocket"), WebGL point
// renderer with a 2D-canvas fallback. Query flags: ?token=T, ?rate=HZ, ?autopause=1 (clicks
// the Pause button after the first frame is drawn; used by the headless browser test).
"use strict";
(function () {
  const params = new URLSearchParams(location.search);
  const token = params.get("token") || "";
  const rate = Number(params.get("rate") || 30);
  const autopause = params.get("autopause") === "1";
  const canvas = document.getElementById("c");
  const stateEl = document.getElementById("state");
  const infoEl = document.getElementById("info");
  const BG = [16 / 255, 20 / 255, 24 / 255];

  let yaw = 0.6, pitch = 0.45, zoom = 1.0;
  let world = null; // [min, max] from the static message
  let frame = null; // {n, data (Float32Array|Uint16Array), quantised, lo, hi, meta}
  let status = null;
  let nextId = 1;
  let pausedSent = false;
  let lastAck = "";
  let fps = 0, frames = 0, fpsT = performance.now();

  // ---- renderer: WebGL, else 2D canvas -------------------------------------------------
  const gl = canvas.getContext("webgl", { preserveDrawingBuffer: true, antialias: false });
  let draw = gl ? webglRenderer(gl) : canvas2dRenderer(canvas.getContext("2d"));
  document.body.dataset.renderer = gl ? "webgl" : "2d";

  function resize() {
    const dpr = window.devicePixelRatio || 1;
    canvas.width = Math.max(1, Math.floor(canvas.clientWidth * dpr));
    canvas.height = Math.max(1, Math.floor(canvas.clientHeight * dpr));
  }

  // Rotation about z (yaw) then x (pitch), orthographic; returns a 3x3 column-major matrix.
  function rotation() {
    const cy = Math.cos(yaw), sy = Math.sin(yaw), cp = Math.cos(pitch), sp = Math.sin(pitch);
    // view: x' = R * (p - 0.5), z up in the data becomes y up on screen
    return [cy, -sy * sp, sy * cp, sy, cy * sp, -cy * cp, 0, cp, sp];
  }

  function webglRenderer(gl) {
    const vs = `attribute vec3 a; uniform vec3 lo, scale; uniform mat3 r; uniform vec2 aspect;
      uniform float size; varying float h;
      void main() { vec3 p = (a - lo) * scale; h = p.z; vec3 q = r * (p - 0.5);
        gl_Position = vec4(q.x * aspect.x, q.y * aspect.y, -q.z * 0.5, 1.0); gl_PointSize = size; }`;
    const fs = `precision mediump float; varying float h;
      void main() { gl_FragColor = vec4(0.35 + 0.65 * h, 0.75 - 0.35 * h, 1.0 - 0.7 * h, 1.0); }`;
    const sh = (t, src) => { const s = gl.createShader(t); gl.shaderSource(s, src); gl.compileShader(s); return s; };
    const prog = gl.createProgram();
    gl.attachShader(prog, sh(gl.VERTEX_SHADER, vs));
    gl.attachShader(prog, sh(gl.FRAGMENT_SHADER, fs));
    gl.linkProgram(prog);
    if (!gl.getProgramParameter(prog, gl.LINK_STATUS)) return null;
    const buf = gl.createBuffer();
    const loc = (n) => gl.getUniformLocation(prog, n);
    const a = gl.getAttribLocation(prog, "a");
    let uploaded = null;
    return function (f) {
      gl.viewport(0, 0, canvas.width, canvas.height);
      gl.clearColor(BG[0], BG[1], BG[2], 1);
      gl.clear(gl.COLOR_BUFFER_BIT | gl.DEPTH_BUFFER_BIT);
      if (!f) return;
      gl.useProgram(prog);
      gl.bindBuffer(gl.ARRAY_BUFFER, buf);
      if (uploaded !== f) { gl.bufferData(gl.ARRAY_BUFFER, f.data, gl.DYNAMIC_DRAW); uploaded = f; }
      gl.enableVertexAttribArray(a);
      // Quantised positions arrive normalised to [0, 1] within the frame's box.
      gl.vertexAttribPointer(a, 3, f.quantised ? gl.UNSIGNED_SHORT : gl.FLOAT, f.quantised, 0, 0);
      const [lo, hi] = f.quantised ? [[0, 0, 0], [1, 1, 1]] : f.box;
      gl.uniform3fv(loc("lo"), lo);
      gl.uniform3fv(loc("scale"), hi.map((h, i) => 1 / Math.max(1e-30, h - lo[i])));
      gl.uniformMatrix3fv(loc("r"), false, rotation());
      const s = 1.2 * zoom, ar = canvas.width / canvas.height;
      gl.uniform2f(loc("aspect"), ar > 1 ? s / ar : s, ar > 1 ? s : s * ar);
      gl.uniform1f(loc("size"), Math.max(2, Math.min(6, 600 / Math.sqrt(f.n + 1))) * (window.devicePixelRatio || 1));
      gl.enable(gl.DEPTH_TEST);
      gl.drawArrays(gl.POINTS, 0, f.n);
    };
  }

  function canvas2dRenderer(ctx) {
    return function (f) {
      ctx.fillStyle = "rgb(16,20,24)";
      ctx.fillRect(0, 0, canvas.width, canvas.height);
      if (!f) return;
      const r = rotation(), d = f.data, step = Math.max(1, Math.floor(f.n / 200000));
      const [lo, hi] = f.quantised ? [[0, 0, 0], [65535, 65535, 65535]] : f.box;
      const sc = [0, 1, 2].map((i) => 1 / Math.max(1e-30, hi[i] - lo[i]));
      const s = 0.6 * zoom * Math.min(canvas.width, canvas.height), cx = canvas.width / 2, cy = canvas.height / 2;
      const size = Math.max(2, Math.min(6, 600 / Math.sqrt(f.n + 1)));
      for (let i = 0; i < f.n; i += step) {
        const x = (d[3 * i] - lo[0]) * sc[0] - 0.5, y = (d[3 * i + 1] - lo[1]) * sc[1] - 0.5, z = (d[3 * i + 2] - lo[2]) * sc[2] - 0.5;
        const X = r[0] * x + r[3] * y + r[6] * z, Y = r[1] * x + r[4] * y + r[7] * z;
        const h = z + 0.5;
        ctx.fillStyle = `rgb(${(90 + 165 * h) | 0},${(190 - 90 * h) | 0},${(255 - 180 * h) | 0})`;
        ctx.fillRect(cx + X * s - size / 2, cy - Y * s - size / 2, size, size);
      }
    };
  }
  if (!draw) { document.body.dataset.renderer = "2d"; draw = canvas2dRenderer(canvas.getContext("2d")); }

  // ---- protocol -------------------------------------------------------------------------
  const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws");
  ws.binaryType = "arraybuffer";
  const send = (m) => { if (ws.readyState === 1) ws.send(JSON.stringify(m)); };
  function command(c) {
    const id = nextId++;
    send({ Command: { id, timeout_ms: 5000, command: c } });
    lastAck = `${c}: sent`;
    show();
  }
  document.getElementById("pause").onclick = () => command("Pause");
  document.getElementById("resume").onclick = () => command("Resume");

  ws.onopen = () => {
    // Positions only, coloured by height: no static array is indexed per particle, so frames of
    // a run whose particle set changes need no particle ids here.
    send({ Hello: { protocol: "particle-shm-forwarder", version: 3, token, client: "browser",
      subscription: { fields: 1, positions: "Quantized16", max_rate_hz: rate, static_arrays: false } } });
    stateEl.textContent = "connected";
  };
  ws.onclose = (e) => { stateEl.textContent = "disconnected " + (e.reason || ""); };
  ws.onmessage = (ev) => {
    if (!(ev.data instanceof ArrayBuffer)) return;
    const buf = ev.data, dv = new DataView(buf);
    const hlen = dv.getUint32(0, true);
    const msg = JSON.parse(new TextDecoder().decode(new Uint8Array(buf, 4, hlen)));
    const off = 4 + hlen;
    if (msg.Frame) onFrame(msg.Frame, buf, off);
    else if (msg.Status) { status = msg.Status; show(); }
    else if (msg.Static) { world = [msg.Static.world_min, msg.Static.world_max]; }
    else if (msg.Ack) {
      const o = msg.Ack.outcome;
      lastAck = o.Ok ? (o.Ok.Done !== undefined ? "done: " + o.Ok.Done : "rejected: " + o.Ok.Rejected) : "failed: " + o.Err[1];
      show();
    } else if (msg.Refused || msg.Error) { stateEl.textContent = "refused: " + (msg.Refused || msg.Error).reason; }
  };

  function onFrame(h, buf, off) {
    const n = h.meta.particle_count;
    off += h.meta.body_count * 72;
    if (!(h.meta.fields & 1)) return;
    const quantised = h.positions === "Quantized16";
    const data = quantised ? new Uint16Array(buf, off, 3 * n) : new Float32Array(buf, off, 3 * n);
    const box = quantised ? [h.quant_min, h.quant_max] : world || bounds(data, n);
    frame = { n, data, quantised, box, meta: h.meta };
    frames++;
    const now = performance.now();
    if (now - fpsT > 1000) { fps = (frames * 1000) / (now - fpsT); frames = 0; fpsT = now; }
    draw(frame);
    show();
    // Clicks the page's own Pause button, so the test exercises what a user presses.
    if (autopause && !pausedSent) { pausedSent = true; document.getElementById("pause").click(); }
  }

  function bounds(d, n) {
    const lo = [Infinity, Infinity, Infinity], hi = [-Infinity, -Infinity, -Infinity];
    for (let i = 0; i < n; i++) for (let a = 0; a < 3; a++) { const v = d[3 * i + a]; if (v < lo[a]) lo[a] = v; if (v > hi[a]) hi[a] = v; }
    return [lo, hi];
  }

  function show() {
    const s = status && status.solver;
    const state = !status ? "?" : !status.attached ? "detached" : s && s.state ? s.state.toLowerCase() : "unknown";
    stateEl.textContent = "state: " + state + (s && !s.alive ? " (solver gone)" : "");
    const m = frame && frame.meta;
    const removed = m && m.removed_count > 0 ? `   ${m.removed_count} removed (${m.removed_mass.toPrecision(4)} kg)` : "";
    infoEl.textContent = (m ? `t = ${m.sim_time.toFixed(4)} s   step ${m.step}   frame ${m.seq}   ${m.particle_count} particles${removed}   ${fps.toFixed(1)} fps\n` : "no frame yet\n") +
      (lastAck ? "command " + lastAck : "");
  }

  // ---- interaction ----------------------------------------------------------------------
  let drag = null;
  canvas.addEventListener("mousedown", (e) => { drag = [e.clientX, e.clientY]; });
  window.addEventListener("mouseup", () => { drag = null; });
  window.addEventListener("mousemove", (e) => {
    if (!drag) return;
    yaw += (e.clientX - drag[0]) * 0.01;
    pitch = Math.max(-1.5, Math.min(1.5, pitch + (e.clientY - drag[1]) * 0.01));
    drag = [e.clientX, e.clientY];
    draw(frame);
  });
  canvas.addEventListener("wheel", (e) => { zoom *= Math.exp(-e.deltaY * 0.001); draw(frame); e.preventDefault(); }, { passive: false });
  window.addEventListener("resize", () => { resize(); draw(frame); });
  resize();
  draw(null);
})();
