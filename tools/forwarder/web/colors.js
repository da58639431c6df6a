// Colouring (the native viewer's `color.rs`: same modes, Tableau-10 species palette, viridis)
// and the per-frame pass that picks what is drawn: level of detail (every k-th element so that
// at most `maxParticles` remain), species filter and clipping plane, then per element its
// position, true radius (static data, through the frame's particle ids) and colour.

import { FIELD } from "./protocol.js";

// mode -> [legend title, frame field it needs (null: static data only)]
export const COLOR_BY = {
  species: ["species", null],
  speed: ["speed [m/s]", FIELD.velocity],
  "angular-speed": ["angular speed [rad/s]", FIELD.angular_velocity],
  id: ["particle id", null],
  contacts: ["contacts", FIELD.contact_count],
  force: ["force [N]", FIELD.force],
  density: ["density [kg/m^3]", FIELD.density],
  pressure: ["pressure [Pa]", FIELD.pressure],
};

export const SPECIES_PALETTE = [
  [78, 121, 167], [242, 142, 43], [225, 87, 89], [118, 183, 178], [89, 161, 79],
  [237, 201, 72], [176, 122, 161], [255, 157, 167], [156, 117, 95], [186, 176, 172],
];

const VIRIDIS = [
  [68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142], [33, 144, 141],
  [39, 173, 129], [92, 200, 99], [170, 220, 50], [253, 231, 37],
];

export function viridis(t) {
  t = Number.isNaN(t) ? 0 : Math.min(1, Math.max(0, t));
  const x = t * (VIRIDIS.length - 1), i = Math.min(Math.floor(x), VIRIDIS.length - 2), f = x - i;
  const a = VIRIDIS[i], b = VIRIDIS[i + 1];
  return [0, 1, 2].map((k) => Math.round(a[k] + (b[k] - a[k]) * f));
}

// 256-entry lookup so the per-particle loop does no interpolation.
const LUT = new Uint8Array(256 * 3);
for (let i = 0; i < 256; i++) LUT.set(viridis(i / 255), 3 * i);

// SPH runs: the boundary (wall) particles enclose the tank, lid included, and would hide the
// fluid; like the native viewer (`viewer/src/sph.rs`) the page hides them by default, or draws
// them as small grey dots outside the colour range ("dimmed"), or like the fluid ("shown").
export const WALLS = ["hidden", "dimmed", "shown"];
const DIMMED = [110, 110, 110];
const DIMMED_RADIUS = 0.2;

// Whether the static data describes an SPH run (a species of an SPH method).
export function isSph(st) {
  return !!st && st.header.species.some((s) => s.method === "sph_fluid" || s.method === "sph_boundary");
}

export function speciesColor(s) {
  return SPECIES_PALETTE[s % SPECIES_PALETTE.length];
}

// Scalar of element i for a continuous mode, or null when the frame lacks the field.
function scalarOf(mode, frame, ids) {
  const need = COLOR_BY[mode][1];
  if (mode === "id") return ids ? (i) => ids[i] : (i) => i;
  const a = need === null ? null : frame.fields[need];
  if (!a) return null;
  if (a.length === 3 * frame.n) {
    return (i) => Math.hypot(a[3 * i], a[3 * i + 1], a[3 * i + 2]);
  }
  return (i) => a[i];
}

// opts: {colorBy, range: [lo, hi] | null (auto), maxParticles, hidden: Set of species,
//        clip: {axis 0..2, value, keep: "below"|"above"} | null, walls: one of WALLS}
// st: decoded static message or null. Returns what the renderer uploads.
export function build(frame, st, opts) {
  const n = frame.n;
  const pos = frame.fields[FIELD.position];
  const frameIds = frame.fields[FIELD.particle_id] || null;
  // The forwarder already sent every k-th particle (header.stride); a frame that arrives with
  // more than maxParticles (sent before a smaller limit reached the forwarder) is thinned here.
  const stride = Math.max(1, Math.ceil(n / Math.max(1, opts.maxParticles)));
  const cap = Math.ceil(n / stride);
  const q = frame.quantised;
  const h = frame.header;
  const out = {
    total: h.frame_particles ?? n, stride: (h.stride || 1) * stride, count: 0, quantised: q,
    pos: q ? new Uint16Array(3 * cap) : new Float32Array(3 * cap),
    radius: new Float32Array(cap), color: new Uint8Array(4 * cap),
    range: null, mode: opts.colorBy,
  };
  const lo = frame.header.quant_min, hi = frame.header.quant_max;
  const qs = [0, 1, 2].map((a) => (hi[a] - lo[a]) / 65535);
  const sSpecies = st && st.species, sRadius = st && st.radius, nStatic = sSpecies ? sSpecies.length : 0;
  const defaultRadius = st && st.header.species.length ? st.header.species[0].radius : 0.005;
  // Static index of element i: its particle id when the frame carries ids (LAYOUT.md, runs
  // whose particle set changes; every subsampled frame), else i itself.
  const staticIndex = frameIds ? (i) => frameIds[i] : (i) => i;
  const clip = opts.clip, hidden = opts.hidden;
  // Species whose particles are SPH walls, and what becomes of them.
  const wall = st ? st.header.species.map((s) => s.method === "sph_boundary") : [];
  const walls = opts.walls || "shown";
  out.walls = 0;
  let mode = opts.colorBy;
  let scalar = mode === "species" ? null : scalarOf(mode, frame, frameIds);
  if (mode !== "species" && !scalar) mode = "species";
  out.mode = mode;
  const values = scalar ? new Float32Array(cap) : null;
  const species = new Uint32Array(cap);
  const dimmed = [];
  let c = 0, vmin = Infinity, vmax = -Infinity;
  for (let i = 0; i < n; i += stride) {
    const j = staticIndex(i);
    const sp = j < nStatic ? sSpecies[j] : 0;
    if (hidden.size && hidden.has(sp)) continue;
    const isWall = walls !== "shown" && wall[sp] === true;
    if (isWall && walls === "hidden") { out.walls++; continue; }
    if (clip) {
      const a = clip.axis;
      const x = q ? lo[a] + pos[3 * i + a] * qs[a] : pos[3 * i + a];
      if (clip.keep === "below" ? x > clip.value : x < clip.value) continue;
    }
    out.pos[3 * c] = pos[3 * i]; out.pos[3 * c + 1] = pos[3 * i + 1]; out.pos[3 * c + 2] = pos[3 * i + 2];
    out.radius[c] = (j < nStatic ? sRadius[j] : defaultRadius) * (isWall ? DIMMED_RADIUS : 1);
    species[c] = sp;
    if (isWall) {
      // Outside the colour range: NaN marks the element for the grey below.
      if (values) values[c] = NaN; else dimmed.push(c);
      c++;
      continue;
    }
    if (values) {
      const v = scalar(i);
      values[c] = v;
      if (v < vmin) vmin = v;
      if (v > vmax) vmax = v;
    }
    c++;
  }
  out.count = c;
  if (values) {
    if (!(vmin <= vmax)) { vmin = 0; vmax = 1; }
    const [r0, r1] = opts.range || [vmin, vmax];
    out.range = [r0, r1];
    const scale = r1 > r0 ? 255 / (r1 - r0) : 0;
    for (let k = 0; k < c; k++) {
      if (Number.isNaN(values[k])) { out.color.set([...DIMMED, 255], 4 * k); continue; }
      const t = Math.min(255, Math.max(0, Math.round((values[k] - r0) * scale))) | 0;
      out.color[4 * k] = LUT[3 * t]; out.color[4 * k + 1] = LUT[3 * t + 1];
      out.color[4 * k + 2] = LUT[3 * t + 2]; out.color[4 * k + 3] = 255;
    }
  } else {
    for (let k = 0; k < c; k++) {
      const rgb = speciesColor(species[k]);
      out.color[4 * k] = rgb[0]; out.color[4 * k + 1] = rgb[1]; out.color[4 * k + 2] = rgb[2];
      out.color[4 * k + 3] = 255;
    }
    for (const k of dimmed) out.color.set([...DIMMED, 255], 4 * k);
  }
  return out;
}
