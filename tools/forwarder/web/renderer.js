// WebGL2 renderer: particles as sphere impostors (one point sprite each, sized from its true
// radius, shaded as a sphere and writing the sphere's depth), meshes with their per-frame body
// transforms (`x_world = R x_body + t`, LAYOUT.md), and the world box.

export const BACKGROUND = [16, 20, 24];
const MESH_COLOR = [170, 180, 195];
const BOX_COLOR = [90, 100, 112];

const SPHERE_VS = `#version 300 es
in vec3 aPos; in float aRadius; in vec4 aColor;
uniform mat4 uView, uProj; uniform vec3 uLo, uScale; uniform float uPixelScale, uMaxPoint;
out vec3 vCenter; out float vRadius; out vec3 vColor;
void main() {
  vec4 v = uView * vec4(uLo + aPos * uScale, 1.0);
  vCenter = v.xyz; vRadius = aRadius; vColor = aColor.rgb;
  gl_Position = uProj * v;
  // Projected diameter in pixels at this depth; clamped to what the GL can draw.
  gl_PointSize = clamp(2.0 * aRadius * uPixelScale / max(-v.z, 1e-6), 1.0, uMaxPoint);
}`;

// Headlight diffuse (exactly the particle's colour at the sprite's centre, so colours can be
// read back from the picture) plus a small highlight off to the upper left.
const SPHERE_FS = `#version 300 es
precision highp float;
in vec3 vCenter; in float vRadius; in vec3 vColor;
uniform mat4 uProj;
out vec4 outColor;
void main() {
  vec2 p = gl_PointCoord * 2.0 - 1.0; p.y = -p.y;
  float r2 = dot(p, p);
  if (r2 > 1.0) discard;
  vec3 n = vec3(p, sqrt(1.0 - r2));
  vec4 c = uProj * vec4(vCenter + vRadius * n, 1.0);
  gl_FragDepth = clamp(0.5 * c.z / c.w + 0.5, 0.0, 1.0);
  float spec = pow(max(dot(n, normalize(vec3(-0.4, 0.5, 1.0))), 0.0), 40.0);
  outColor = vec4(vColor * (0.25 + 0.75 * n.z) + 0.35 * spec, 1.0);
}`;

const MESH_VS = `#version 300 es
in vec3 aPos; in vec3 aNormal;
uniform mat4 uView, uProj, uModel;
out vec3 vNormal;
void main() {
  vNormal = mat3(uView) * mat3(uModel) * aNormal;
  gl_Position = uProj * uView * uModel * vec4(aPos, 1.0);
}`;

const MESH_FS = `#version 300 es
precision highp float;
in vec3 vNormal; uniform vec3 uColor; out vec4 outColor;
void main() { outColor = vec4(uColor * (0.3 + 0.7 * abs(normalize(vNormal).z)), 1.0); }`;

const LINE_VS = `#version 300 es
in vec3 aPos; uniform mat4 uView, uProj;
void main() { gl_Position = uProj * uView * vec4(aPos, 1.0); }`;

const LINE_FS = `#version 300 es
precision highp float; uniform vec3 uColor; out vec4 outColor;
void main() { outColor = vec4(uColor, 1.0); }`;

export class Renderer {
  constructor(canvas) {
    this.canvas = canvas;
    const gl = canvas.getContext("webgl2", { preserveDrawingBuffer: true, antialias: false });
    if (!gl) throw new Error("WebGL2 is not available in this browser");
    this.gl = gl;
    const dbg = gl.getExtension("WEBGL_debug_renderer_info");
    this.glName = dbg ? gl.getParameter(dbg.UNMASKED_RENDERER_WEBGL) : gl.getParameter(gl.RENDERER);
    this.maxPoint = gl.getParameter(gl.ALIASED_POINT_SIZE_RANGE)[1];
    this.sphere = program(gl, SPHERE_VS, SPHERE_FS);
    this.mesh = program(gl, MESH_VS, MESH_FS);
    this.line = program(gl, LINE_VS, LINE_FS);
    this.buf = { pos: gl.createBuffer(), radius: gl.createBuffer(), color: gl.createBuffer(),
      box: gl.createBuffer() };
    this.particles = null; // {count, quantised, lo, scale}
    this.meshes = []; // {buffer, vertices}
    this.bodies = [];
    this.boxVertices = 0;
  }

  // Box edges and the meshes' triangles (body frame, with flat normals).
  setStatic(st) {
    const gl = this.gl;
    for (const m of this.meshes) gl.deleteBuffer(m.buffer);
    this.meshes = [];
    if (!st) return;
    const lo = st.header.world_min, hi = st.header.world_max;
    if (lo.every((v, i) => Number.isFinite(v) && Number.isFinite(hi[i]) && hi[i] > v)) {
      const c = (k) => [k & 1 ? hi[0] : lo[0], k & 2 ? hi[1] : lo[1], k & 4 ? hi[2] : lo[2]];
      const v = [];
      for (let a = 0; a < 8; a++) for (const bit of [1, 2, 4]) if (!(a & bit)) v.push(...c(a), ...c(a | bit));
      gl.bindBuffer(gl.ARRAY_BUFFER, this.buf.box);
      gl.bufferData(gl.ARRAY_BUFFER, new Float32Array(v), gl.STATIC_DRAW);
      this.boxVertices = v.length / 3;
    } else this.boxVertices = 0;
    for (const m of st.meshes) {
      const t = m.triangles, nt = t.length / 9, data = new Float32Array(nt * 18);
      for (let k = 0; k < nt; k++) {
        const p = (j) => [t[9 * k + 3 * j], t[9 * k + 3 * j + 1], t[9 * k + 3 * j + 2]];
        const [a, b, c] = [p(0), p(1), p(2)];
        const u = b.map((x, i) => x - a[i]), w = c.map((x, i) => x - a[i]);
        let nrm = [u[1] * w[2] - u[2] * w[1], u[2] * w[0] - u[0] * w[2], u[0] * w[1] - u[1] * w[0]];
        const len = Math.hypot(...nrm) || 1;
        nrm = nrm.map((x) => x / len);
        for (let j = 0; j < 3; j++) data.set([...p(j), ...nrm], 18 * k + 6 * j);
      }
      const buffer = gl.createBuffer();
      gl.bindBuffer(gl.ARRAY_BUFFER, buffer);
      gl.bufferData(gl.ARRAY_BUFFER, data, gl.STATIC_DRAW);
      this.meshes.push({ buffer, vertices: 3 * nt });
    }
  }

  // `built` from colors.build; `header` the frame's (quantisation box).
  setParticles(built, header) {
    const gl = this.gl;
    gl.bindBuffer(gl.ARRAY_BUFFER, this.buf.pos);
    gl.bufferData(gl.ARRAY_BUFFER, built.pos.subarray(0, 3 * built.count), gl.DYNAMIC_DRAW);
    gl.bindBuffer(gl.ARRAY_BUFFER, this.buf.radius);
    gl.bufferData(gl.ARRAY_BUFFER, built.radius.subarray(0, built.count), gl.DYNAMIC_DRAW);
    gl.bindBuffer(gl.ARRAY_BUFFER, this.buf.color);
    gl.bufferData(gl.ARRAY_BUFFER, built.color.subarray(0, 4 * built.count), gl.DYNAMIC_DRAW);
    const lo = built.quantised ? header.quant_min : [0, 0, 0];
    const scale = built.quantised ? header.quant_max.map((h, i) => (h - lo[i]) / 65535) : [1, 1, 1];
    this.particles = { count: built.count, quantised: built.quantised, lo, scale };
  }

  setBodies(bodies) {
    this.bodies = bodies;
  }

  resize() {
    const c = this.canvas, dpr = window.devicePixelRatio || 1;
    c.width = Math.max(1, Math.floor(c.clientWidth * dpr));
    c.height = Math.max(1, Math.floor(c.clientHeight * dpr));
  }

  draw(camera) {
    const gl = this.gl, w = this.canvas.width, h = this.canvas.height;
    gl.viewport(0, 0, w, h);
    gl.clearColor(BACKGROUND[0] / 255, BACKGROUND[1] / 255, BACKGROUND[2] / 255, 1);
    gl.clear(gl.COLOR_BUFFER_BIT | gl.DEPTH_BUFFER_BIT);
    gl.enable(gl.DEPTH_TEST);
    const view = camera.view(), proj = camera.projection(w / h);
    const common = (p) => {
      gl.useProgram(p.prog);
      gl.uniformMatrix4fv(p.u("uView"), false, view);
      gl.uniformMatrix4fv(p.u("uProj"), false, proj);
    };
    if (this.boxVertices) {
      common(this.line);
      gl.uniform3fv(this.line.u("uColor"), BOX_COLOR.map((c) => c / 255));
      attrib(gl, this.line, "aPos", this.buf.box, 3, gl.FLOAT, 0, 0);
      gl.drawArrays(gl.LINES, 0, this.boxVertices);
      off(gl, this.line, "aPos");
    }
    if (this.meshes.length) {
      common(this.mesh);
      gl.uniform3fv(this.mesh.u("uColor"), MESH_COLOR.map((c) => c / 255));
      this.meshes.forEach((m, k) => {
        gl.uniformMatrix4fv(this.mesh.u("uModel"), false, model(this.bodies[k]));
        attrib(gl, this.mesh, "aPos", m.buffer, 3, gl.FLOAT, 24, 0);
        attrib(gl, this.mesh, "aNormal", m.buffer, 3, gl.FLOAT, 24, 12);
        gl.drawArrays(gl.TRIANGLES, 0, m.vertices);
      });
      off(gl, this.mesh, "aPos");
      off(gl, this.mesh, "aNormal");
    }
    const p = this.particles;
    if (p && p.count) {
      const s = this.sphere;
      common(s);
      gl.uniform3fv(s.u("uLo"), p.lo);
      gl.uniform3fv(s.u("uScale"), p.scale);
      gl.uniform1f(s.u("uPixelScale"), camera.pixelScale(h));
      gl.uniform1f(s.u("uMaxPoint"), this.maxPoint);
      attrib(gl, s, "aPos", this.buf.pos, 3, p.quantised ? gl.UNSIGNED_SHORT : gl.FLOAT, 0, 0);
      attrib(gl, s, "aRadius", this.buf.radius, 1, gl.FLOAT, 0, 0);
      attrib(gl, s, "aColor", this.buf.color, 4, gl.UNSIGNED_BYTE, 0, 0, true);
      gl.drawArrays(gl.POINTS, 0, p.count);
      for (const a of ["aPos", "aRadius", "aColor"]) off(gl, s, a);
    }
  }
}

// Column-major model matrix of a body transform (rotation row-major, LAYOUT.md).
function model(b) {
  if (!b) return new Float32Array([1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1]);
  const r = b.rotation, t = b.translation;
  return new Float32Array([r[0], r[3], r[6], 0, r[1], r[4], r[7], 0, r[2], r[5], r[8], 0,
    t[0], t[1], t[2], 1]);
}

function program(gl, vs, fs) {
  const prog = gl.createProgram();
  for (const [type, src] of [[gl.VERTEX_SHADER, vs], [gl.FRAGMENT_SHADER, fs]]) {
    const sh = gl.createShader(type);
    gl.shaderSource(sh, src);
    gl.compileShader(sh);
    if (!gl.getShaderParameter(sh, gl.COMPILE_STATUS)) throw new Error(gl.getShaderInfoLog(sh));
    gl.attachShader(prog, sh);
  }
  gl.linkProgram(prog);
  if (!gl.getProgramParameter(prog, gl.LINK_STATUS)) throw new Error(gl.getProgramInfoLog(prog));
  const uniforms = new Map();
  return {
    prog,
    u: (name) => {
      if (!uniforms.has(name)) uniforms.set(name, gl.getUniformLocation(prog, name));
      return uniforms.get(name);
    },
  };
}

function attrib(gl, p, name, buffer, size, type, stride, offset, normalized = false) {
  const loc = gl.getAttribLocation(p.prog, name);
  if (loc < 0) return;
  gl.bindBuffer(gl.ARRAY_BUFFER, buffer);
  gl.enableVertexAttribArray(loc);
  gl.vertexAttribPointer(loc, size, type, normalized, stride, offset);
}

function off(gl, p, name) {
  const loc = gl.getAttribLocation(p.prog, name);
  if (loc >= 0) gl.disableVertexAttribArray(loc);
}
