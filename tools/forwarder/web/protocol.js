// WebSocket client of PROTOCOL.md ("WebSocket"): JSON to the server; binary messages from it,
// `json_len: u32 LE`, the JSON of a ServerMsg padded to 4 bytes, then the raw payload.

export const VERSION = 4;

// Field bits (LAYOUT.md "Fields") and the bytes per element of each.
export const FIELD = {
  position: 0, velocity: 1, angular_velocity: 2, force: 3, contact_count: 4,
  density: 5, pressure: 6, particle_id: 7, particle_kind: 8,
};
const VEC3 = new Set([FIELD.velocity, FIELD.angular_velocity, FIELD.force]);

export class Client {
  // handlers: {open, close(reason), welcome, refused(reason), status, static_, frame, ack}
  constructor(token, subscription, handlers) {
    this.handlers = handlers;
    this.nextId = 1;
    const url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws";
    this.ws = new WebSocket(url);
    this.ws.binaryType = "arraybuffer";
    this.ws.onopen = () => {
      this.send({ Hello: { protocol: "particle-shm-forwarder", version: VERSION, token,
        client: "browser", subscription } });
      handlers.open();
    };
    this.ws.onclose = (e) => handlers.close(e.reason || "closed");
    this.ws.onmessage = (ev) => { if (ev.data instanceof ArrayBuffer) this.receive(ev.data); };
  }

  send(msg) {
    if (this.ws.readyState === 1) this.ws.send(JSON.stringify(msg));
  }

  subscribe(subscription) {
    this.send({ Subscribe: subscription });
  }

  // Sends a LAYOUT.md `Command` (serde JSON: "Pause" or {"SetRefresh": {...}}); returns its id.
  command(command) {
    const id = this.nextId++;
    this.send({ Command: { id, timeout_ms: 5000, command } });
    return id;
  }

  close() {
    this.ws.onclose = null;
    this.ws.close();
  }

  receive(buf) {
    const jsonLen = new DataView(buf).getUint32(0, true);
    const msg = JSON.parse(new TextDecoder().decode(new Uint8Array(buf, 4, jsonLen)));
    const off = 4 + jsonLen;
    const h = this.handlers;
    if (msg.Frame) h.frame(decodeFrame(msg.Frame, buf, off));
    else if (msg.Static) h.static_(decodeStatic(msg.Static, buf, off));
    else if (msg.Status) h.status(msg.Status);
    else if (msg.Ack) h.ack(msg.Ack.id, ackText(msg.Ack.outcome));
    else if (msg.Welcome) h.welcome(msg.Welcome);
    else if (msg.Refused) h.refused(msg.Refused.reason);
    else if (msg.Error) h.refused(msg.Error.reason);
  }
}

function ackText(o) {
  if (o.Ok) return o.Ok.Done !== undefined ? "done: " + o.Ok.Done : "rejected: " + o.Ok.Rejected;
  return "failed (" + o.Err[0] + "): " + o.Err[1];
}

// Static header + arrays (ids, species, radii) + every mesh's body-frame triangles.
function decodeStatic(h, buf, off) {
  const s = { header: h, ids: null, species: null, radius: null, meshes: [] };
  let o = off;
  if (h.arrays) {
    const n = h.particle_count;
    s.ids = new Uint32Array(buf, o, n); o += 4 * n;
    s.species = new Uint32Array(buf, o, n); o += 4 * n;
    s.radius = new Float32Array(buf, o, n); o += 4 * n;
    for (const m of h.meshes) {
      s.meshes.push({ name: m.name, triangles: new Float32Array(buf, o, 9 * m.triangle_count) });
      o += 36 * m.triangle_count;
    }
  }
  return s;
}

// Frame: body transforms, then each field present in increasing bit order, each padded to 4.
function decodeFrame(h, buf, off) {
  const m = h.meta, n = m.particle_count;
  const f = { header: h, meta: m, n, bodies: [], fields: {} };
  const dv = new DataView(buf);
  for (let b = 0; b < m.body_count; b++) {
    const r = [];
    for (let k = 0; k < 18; k++) r.push(dv.getFloat32(off + 72 * b + 4 * k, true));
    f.bodies.push({ rotation: r.slice(0, 9), translation: r.slice(9, 12) });
  }
  let o = off + 72 * m.body_count;
  for (let bit = 0; bit < 16; bit++) {
    if (!(m.fields & (1 << bit))) continue;
    let arr, bytes;
    if (bit === FIELD.position && h.positions === "Quantized16") {
      arr = new Uint16Array(buf, o, 3 * n); bytes = 6 * n;
    } else if (bit === FIELD.position || VEC3.has(bit)) {
      arr = new Float32Array(buf, o, 3 * n); bytes = 12 * n;
    } else if (bit === FIELD.contact_count || bit === FIELD.particle_id || bit === FIELD.particle_kind) {
      arr = new Uint32Array(buf, o, n); bytes = 4 * n;
    } else {
      arr = new Float32Array(buf, o, n); bytes = 4 * n;
    }
    f.fields[bit] = arr;
    o += (bytes + 3) & ~3;
  }
  f.quantised = h.positions === "Quantized16";
  return f;
}
