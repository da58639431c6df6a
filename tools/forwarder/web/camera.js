// Perspective orbit camera, z up (as the native viewer): the eye sits at `distance` from
// `target` in the direction given by yaw (about z) and pitch (above the xy plane). Matrices
// are column-major Float32Arrays, as WebGL expects.

const FOV_Y = (45 * Math.PI) / 180;

export class Camera {
  constructor() {
    this.target = [0.5, 0.5, 0.5];
    this.yaw = -2.2;
    this.pitch = 0.5;
    this.distance = 3;
    this.box = [[0, 0, 0], [1, 1, 1]];
  }

  // Orthonormal basis: right, up, back (eye direction from the target). Built from the angles,
  // not from a look-at with a fixed up vector, so a view straight down (pitch = pi/2) works.
  basis() {
    const cy = Math.cos(this.yaw), sy = Math.sin(this.yaw);
    const cp = Math.cos(this.pitch), sp = Math.sin(this.pitch);
    const back = [cp * cy, cp * sy, sp];
    const right = [-sy, cy, 0];
    const up = cross(back, right);
    return { right, up, back };
  }

  eye() {
    const { back } = this.basis();
    return this.target.map((t, i) => t + this.distance * back[i]);
  }

  view() {
    const { right, up, back } = this.basis();
    const e = this.eye();
    const d = (v) => -(v[0] * e[0] + v[1] * e[1] + v[2] * e[2]);
    return new Float32Array([
      right[0], up[0], back[0], 0,
      right[1], up[1], back[1], 0,
      right[2], up[2], back[2], 0,
      d(right), d(up), d(back), 1,
    ]);
  }

  // Near and far planes follow the distance so that depth precision stays usable at any zoom.
  projection(aspect) {
    const f = 1 / Math.tan(FOV_Y / 2);
    const size = Math.hypot(...sub(this.box[1], this.box[0])) || 1;
    const near = Math.max(1e-6, (this.distance - size) * 0.5, this.distance * 1e-3);
    const far = this.distance + 2 * size;
    return new Float32Array([
      f / aspect, 0, 0, 0,
      0, f, 0, 0,
      0, 0, (far + near) / (near - far), -1,
      0, 0, (2 * far * near) / (near - far), 0,
    ]);
  }

  // Pixels per world unit at view depth 1 for a viewport `height` pixels tall (sprite sizes).
  pixelScale(height) {
    return height / (2 * Math.tan(FOV_Y / 2));
  }

  orbit(dx, dy) {
    this.yaw -= dx * 0.008;
    this.pitch = Math.max(-Math.PI / 2, Math.min(Math.PI / 2, this.pitch + dy * 0.008));
  }

  // Moves the target in the view plane by a drag of (dx, dy) pixels on a `height`-pixel view.
  pan(dx, dy, height) {
    const { right, up } = this.basis();
    const s = this.distance / this.pixelScale(height);
    this.target = this.target.map((t, i) => t - dx * s * right[i] + dy * s * up[i]);
  }

  zoom(factor) {
    this.distance = Math.max(1e-6, this.distance * factor);
  }

  // Frames the box [lo, hi]: target at its centre, distance so that its bounding sphere fits.
  fit(lo, hi) {
    this.box = [lo, hi];
    this.target = lo.map((l, i) => 0.5 * (l + hi[i]));
    const radius = 0.5 * Math.hypot(...sub(hi, lo)) || 1;
    this.distance = radius / Math.sin(FOV_Y / 2);
  }

  reset(lo, hi) {
    this.yaw = -2.2;
    this.pitch = 0.5;
    this.fit(lo, hi);
  }

  // Straight down the z axis, x to the right and y up on screen.
  top(lo, hi) {
    this.yaw = -Math.PI / 2;
    this.pitch = Math.PI / 2;
    this.fit(lo, hi);
  }

  // Screen position [css px] of world point p on a w x h view, or null behind the eye.
  project(p, w, h) {
    const v = mul4(this.view(), [p[0], p[1], p[2], 1]);
    const c = mul4(this.projection(w / h), v);
    if (c[3] <= 0) return null;
    return [((c[0] / c[3] + 1) / 2) * w, ((1 - c[1] / c[3]) / 2) * h];
  }
}

export function cross(a, b) {
  return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]];
}

function sub(a, b) {
  return a.map((v, i) => v - b[i]);
}

function mul4(m, v) {
  const r = [0, 0, 0, 0];
  for (let i = 0; i < 4; i++) for (let k = 0; k < 4; k++) r[i] += m[k * 4 + i] * v[k];
  return r;
}
