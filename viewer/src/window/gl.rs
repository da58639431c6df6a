//! OpenGL renderer for the window (through eframe's glow backend): instanced sphere impostors
//! (one quad per particle, ray-sphere intersection and exact depth per fragment), mesh
//! triangles (lit and opaque, blended, edges only or not at all: [`MeshStyle`]) and the world
//! box as lines. Works on GL 3.3 core and GLES 3.0, so Mesa's llvmpipe
//! (software) runs it as well as a GPU driver.

use eframe::glow::{self, HasContext};

use crate::camera::Bounds;
use crate::mesh_style::{MeshMode, MeshStyle};
use crate::render::cpu::MESH_COLOR;
use crate::scene::Scene;

/// Bytes per particle instance: centre xyz + radius (f32 x4), colour rgba8.
const INSTANCE_BYTES: usize = 20;

/// CPU-side data ready to upload; built on the UI thread when the scene changes.
pub struct Upload {
    pub instances: Vec<u8>,
    /// Largest particle radius [m] (decides between point sprites and quads).
    pub max_radius: f32,
    /// Triangle vertices: position xyz, normal xyz (f32).
    pub triangles: Vec<f32>,
    /// Box edge vertices: position xyz, normal xyz (normal unused).
    pub lines: Vec<f32>,
}

impl Upload {
    pub fn from_scene(scene: &Scene) -> Self {
        let mut instances = Vec::with_capacity(scene.centers.len() * INSTANCE_BYTES);
        for ((c, r), col) in scene.centers.iter().zip(&scene.radii).zip(&scene.colors) {
            for v in [c[0], c[1], c[2], *r] {
                instances.extend_from_slice(&v.to_le_bytes());
            }
            instances.extend_from_slice(&[col[0], col[1], col[2], 255]);
        }
        let max_radius = scene.radii.iter().copied().fold(0.0, f32::max);
        let mut triangles = Vec::with_capacity(scene.triangles.len() * 18);
        for t in &scene.triangles {
            let n = crate::camera::normalize(crate::camera::cross(
                crate::camera::sub(t[1], t[0]),
                crate::camera::sub(t[2], t[0]),
            ));
            for p in t {
                triangles.extend_from_slice(p);
                triangles.extend_from_slice(&n);
            }
        }
        let corners = scene.world.corners();
        let mut lines = Vec::with_capacity(Bounds::EDGES.len() * 12);
        for (i, j) in Bounds::EDGES {
            for p in [corners[i], corners[j]] {
                lines.extend_from_slice(&p);
                lines.extend_from_slice(&[0.0; 3]);
            }
        }
        Self {
            instances,
            max_radius,
            triangles,
            lines,
        }
    }
}

/// Per-draw parameters.
pub struct DrawParams {
    /// Largest sphere on screen, radius in pixels (bounded from above).
    pub max_radius_px: f32,
    pub viewport_height_px: f32,
    pub view: [f32; 16],
    pub proj: [f32; 16],
    pub background: [f32; 3],
    pub meshes: MeshStyle,
}

/// Uniforms of one draw with the flat program.
struct FlatLook {
    color: [f32; 3],
    /// Shaded by the normal (meshes) or not (lines, wireframe edges).
    lit: bool,
    alpha: f32,
    /// Keep only the fragments near triangle edges (wireframe).
    edges: bool,
}

/// GPU objects. Created once with the GL context; all methods run on the GL thread.
pub struct GlScene {
    sphere_prog: glow::Program,
    point_prog: glow::Program,
    point_vao: glow::VertexArray,
    /// Largest point size the driver draws [px].
    max_point_px: f32,
    flat_prog: glow::Program,
    sphere_vao: glow::VertexArray,
    corner_vbo: glow::Buffer,
    instance_vbo: glow::Buffer,
    instances: i32,
    tri_vao: glow::VertexArray,
    tri_vbo: glow::Buffer,
    tri_verts: i32,
    line_vao: glow::VertexArray,
    line_vbo: glow::Buffer,
    line_verts: i32,
}

const SHADE: &str = r#"
const vec3 LIGHT = normalize(vec3(-0.45, 0.6, 0.65));
vec3 shade(vec3 base, vec3 n) {
    float diffuse = max(dot(n, LIGHT), 0.0);
    vec3 h = normalize(LIGHT + vec3(0.0, 0.0, 1.0));
    float spec = pow(max(dot(n, h), 0.0), 32.0) * (70.0 / 255.0);
    return min(base * (0.28 + 0.72 * diffuse) + vec3(spec), vec3(1.0));
}
"#;

const SPHERE_VS: &str = r#"
layout(location = 0) in vec2 a_corner;
layout(location = 1) in vec4 a_center_radius;
layout(location = 2) in vec4 a_color;
uniform mat4 u_view;
uniform mat4 u_proj;
out vec3 v_pos;
out vec3 v_center;
out float v_radius;
out vec3 v_color;
void main() {
    vec3 c = (u_view * vec4(a_center_radius.xyz, 1.0)).xyz;
    float r = a_center_radius.w;
    // A quad in front of the sphere, large enough to cover its perspective silhouette.
    float d = max(-c.z, 1e-6);
    float grow = 1.0 / sqrt(max(1.0 - (r * r) / (d * d), 0.05));
    vec3 p = c + vec3(a_corner * r * grow * 1.05, r);
    v_pos = p;
    v_center = c;
    v_radius = r;
    v_color = a_color.rgb;
    gl_Position = u_proj * vec4(p, 1.0);
}
"#;

/// The same impostor as a point sprite: one vertex per particle instead of four, which is
/// several times faster on software rasterisers; used while every sprite fits the point-size
/// limit.
const POINT_VS: &str = r#"
layout(location = 1) in vec4 a_center_radius;
layout(location = 2) in vec4 a_color;
uniform mat4 u_view;
uniform mat4 u_proj;
uniform float u_viewport_h;
out vec3 v_center;
out float v_radius;
out float v_half;
out vec3 v_color;
void main() {
    vec3 c = (u_view * vec4(a_center_radius.xyz, 1.0)).xyz;
    float r = a_center_radius.w;
    float d = max(-c.z, 1e-6);
    float grow = 1.0 / sqrt(max(1.0 - (r * r) / (d * d), 0.05));
    float half_size = r * grow * 1.05;
    vec3 p = c + vec3(0.0, 0.0, r);
    v_center = c;
    v_radius = r;
    v_half = half_size;
    v_color = a_color.rgb;
    gl_Position = u_proj * vec4(p, 1.0);
    gl_PointSize = max(2.0 * half_size / max(-p.z, 1e-6) * u_proj[1][1] * 0.5 * u_viewport_h, 1.0);
}
"#;

const POINT_FS: &str = r#"
in vec3 v_center;
in float v_radius;
in float v_half;
in vec3 v_color;
uniform mat4 u_proj;
out vec4 out_color;
void main() {
    vec2 uv = gl_PointCoord * 2.0 - 1.0;
    vec3 pos = v_center + vec3(uv.x * v_half, -uv.y * v_half, v_radius);
    vec3 dir = normalize(pos);
    float b = dot(dir, v_center);
    float disc = b * b - dot(v_center, v_center) + v_radius * v_radius;
    if (disc < 0.0) discard;
    vec3 hit = dir * (b - sqrt(disc));
    vec3 n = (hit - v_center) / v_radius;
    vec4 clip = u_proj * vec4(hit, 1.0);
    gl_FragDepth = 0.5 * (clip.z / clip.w) + 0.5;
    out_color = vec4(shade(v_color, n), 1.0);
}
"#;

const SPHERE_FS: &str = r#"
in vec3 v_pos;
in vec3 v_center;
in float v_radius;
in vec3 v_color;
uniform mat4 u_proj;
out vec4 out_color;
void main() {
    // Ray from the eye (origin of view space) through this fragment, against the sphere.
    vec3 dir = normalize(v_pos);
    float b = dot(dir, v_center);
    float disc = b * b - dot(v_center, v_center) + v_radius * v_radius;
    if (disc < 0.0) discard;
    vec3 hit = dir * (b - sqrt(disc));
    vec3 n = (hit - v_center) / v_radius;
    vec4 clip = u_proj * vec4(hit, 1.0);
    gl_FragDepth = 0.5 * (clip.z / clip.w) + 0.5;
    out_color = vec4(shade(v_color, n), 1.0);
}
"#;

/// Flat geometry: mesh triangles and box lines. `v_bary` is the barycentric coordinate of the
/// fragment in its triangle (vertices come three per triangle, drawn from index 0), used by the
/// wireframe mode; lines ignore it.
const FLAT_VS: &str = r#"
layout(location = 0) in vec3 a_pos;
layout(location = 1) in vec3 a_normal;
uniform mat4 u_view;
uniform mat4 u_proj;
out vec3 v_normal;
out vec3 v_bary;
void main() {
    v_normal = mat3(u_view) * a_normal;
    int k = gl_VertexID % 3;
    v_bary = vec3(float(k == 0), float(k == 1), float(k == 2));
    gl_Position = u_proj * u_view * vec4(a_pos, 1.0);
}
"#;

/// `u_edges > 0.5`: keep only fragments within `EDGE_PX` pixels of a triangle edge (a
/// barycentric coordinate divided by its change per pixel is the distance to that edge in
/// pixels), as the CPU rasteriser's wireframe does.
const FLAT_FS: &str = r#"
in vec3 v_normal;
in vec3 v_bary;
uniform vec3 u_color;
uniform float u_lit;
uniform float u_alpha;
uniform float u_edges;
out vec4 out_color;
const float EDGE_PX = 0.75;
void main() {
    if (u_edges > 0.5) {
        vec3 d = v_bary / max(fwidth(v_bary), vec3(1e-6));
        if (min(d.x, min(d.y, d.z)) > EDGE_PX) discard;
    }
    vec3 n = normalize(v_normal);
    if (n.z < 0.0) n = -n;
    out_color = vec4(u_lit > 0.5 ? shade(u_color, n) : u_color, u_alpha);
}
"#;

fn header(gl: &glow::Context) -> &'static str {
    if gl.version().is_embedded {
        "#version 300 es\nprecision highp float;\n"
    } else {
        "#version 330 core\n"
    }
}

/// Compiles and links a program; errors carry the driver's log.
///
/// # Safety
/// `gl` must be current on this thread.
unsafe fn program(gl: &glow::Context, vs: &str, fs: &str) -> Result<glow::Program, String> {
    let prog = gl.create_program()?;
    let mut shaders = Vec::new();
    for (kind, body) in [(glow::VERTEX_SHADER, vs), (glow::FRAGMENT_SHADER, fs)] {
        let sh = gl.create_shader(kind)?;
        let src = if kind == glow::FRAGMENT_SHADER {
            format!("{}{SHADE}{body}", header(gl))
        } else {
            format!("{}{body}", header(gl))
        };
        gl.shader_source(sh, &src);
        gl.compile_shader(sh);
        if !gl.get_shader_compile_status(sh) {
            return Err(format!("shader: {}", gl.get_shader_info_log(sh)));
        }
        gl.attach_shader(prog, sh);
        shaders.push(sh);
    }
    gl.link_program(prog);
    if !gl.get_program_link_status(prog) {
        return Err(format!("link: {}", gl.get_program_info_log(prog)));
    }
    for sh in shaders {
        gl.detach_shader(prog, sh);
        gl.delete_shader(sh);
    }
    Ok(prog)
}

/// A VAO over a position+normal buffer (6 f32 per vertex).
///
/// # Safety
/// `gl` must be current on this thread.
unsafe fn pos_normal_vao(gl: &glow::Context) -> Result<(glow::VertexArray, glow::Buffer), String> {
    let vao = gl.create_vertex_array()?;
    let vbo = gl.create_buffer()?;
    gl.bind_vertex_array(Some(vao));
    gl.bind_buffer(glow::ARRAY_BUFFER, Some(vbo));
    gl.enable_vertex_attrib_array(0);
    gl.vertex_attrib_pointer_f32(0, 3, glow::FLOAT, false, 24, 0);
    gl.enable_vertex_attrib_array(1);
    gl.vertex_attrib_pointer_f32(1, 3, glow::FLOAT, false, 24, 12);
    gl.bind_vertex_array(None);
    Ok((vao, vbo))
}

impl GlScene {
    /// # Safety
    /// `gl` must be current on this thread (eframe's creation context or a paint callback).
    pub unsafe fn new(gl: &glow::Context) -> Result<Self, String> {
        let sphere_prog = program(gl, SPHERE_VS, SPHERE_FS)?;
        let flat_prog = program(gl, FLAT_VS, FLAT_FS)?;
        let point_prog = program(gl, POINT_VS, POINT_FS)?;
        let mut range = [0.0f32; 2];
        gl.get_parameter_f32_slice(glow::ALIASED_POINT_SIZE_RANGE, &mut range);
        let max_point_px = range[1];
        let sphere_vao = gl.create_vertex_array()?;
        let corner_vbo = gl.create_buffer()?;
        let instance_vbo = gl.create_buffer()?;
        gl.bind_vertex_array(Some(sphere_vao));
        gl.bind_buffer(glow::ARRAY_BUFFER, Some(corner_vbo));
        let corners: [f32; 8] = [-1.0, -1.0, 1.0, -1.0, -1.0, 1.0, 1.0, 1.0];
        gl.buffer_data_u8_slice(
            glow::ARRAY_BUFFER,
            bytemuck::cast_slice(&corners),
            glow::STATIC_DRAW,
        );
        gl.enable_vertex_attrib_array(0);
        gl.vertex_attrib_pointer_f32(0, 2, glow::FLOAT, false, 8, 0);
        gl.bind_buffer(glow::ARRAY_BUFFER, Some(instance_vbo));
        gl.enable_vertex_attrib_array(1);
        gl.vertex_attrib_pointer_f32(1, 4, glow::FLOAT, false, INSTANCE_BYTES as i32, 0);
        gl.vertex_attrib_divisor(1, 1);
        gl.enable_vertex_attrib_array(2);
        gl.vertex_attrib_pointer_f32(2, 4, glow::UNSIGNED_BYTE, true, INSTANCE_BYTES as i32, 16);
        gl.vertex_attrib_divisor(2, 1);
        let point_vao = gl.create_vertex_array()?;
        gl.bind_vertex_array(Some(point_vao));
        gl.bind_buffer(glow::ARRAY_BUFFER, Some(instance_vbo));
        gl.enable_vertex_attrib_array(1);
        gl.vertex_attrib_pointer_f32(1, 4, glow::FLOAT, false, INSTANCE_BYTES as i32, 0);
        gl.enable_vertex_attrib_array(2);
        gl.vertex_attrib_pointer_f32(2, 4, glow::UNSIGNED_BYTE, true, INSTANCE_BYTES as i32, 16);
        gl.bind_vertex_array(None);
        let (tri_vao, tri_vbo) = pos_normal_vao(gl)?;
        let (line_vao, line_vbo) = pos_normal_vao(gl)?;
        Ok(Self {
            sphere_prog,
            point_prog,
            point_vao,
            max_point_px,
            flat_prog,
            sphere_vao,
            corner_vbo,
            instance_vbo,
            instances: 0,
            tri_vao,
            tri_vbo,
            tri_verts: 0,
            line_vao,
            line_vbo,
            line_verts: 0,
        })
    }

    /// # Safety
    /// `gl` must be current on this thread.
    pub unsafe fn upload(&mut self, gl: &glow::Context, up: &Upload) {
        gl.bind_buffer(glow::ARRAY_BUFFER, Some(self.instance_vbo));
        gl.buffer_data_u8_slice(glow::ARRAY_BUFFER, &up.instances, glow::DYNAMIC_DRAW);
        self.instances = (up.instances.len() / INSTANCE_BYTES) as i32;
        gl.bind_buffer(glow::ARRAY_BUFFER, Some(self.tri_vbo));
        gl.buffer_data_u8_slice(
            glow::ARRAY_BUFFER,
            bytemuck::cast_slice(&up.triangles),
            glow::DYNAMIC_DRAW,
        );
        self.tri_verts = (up.triangles.len() / 6) as i32;
        gl.bind_buffer(glow::ARRAY_BUFFER, Some(self.line_vbo));
        gl.buffer_data_u8_slice(
            glow::ARRAY_BUFFER,
            bytemuck::cast_slice(&up.lines),
            glow::DYNAMIC_DRAW,
        );
        self.line_verts = (up.lines.len() / 6) as i32;
        gl.bind_buffer(glow::ARRAY_BUFFER, None);
    }

    unsafe fn set_matrices(&self, gl: &glow::Context, prog: glow::Program, p: &DrawParams) {
        gl.use_program(Some(prog));
        let view = gl.get_uniform_location(prog, "u_view");
        gl.uniform_matrix_4_f32_slice(view.as_ref(), false, &p.view);
        let proj = gl.get_uniform_location(prog, "u_proj");
        gl.uniform_matrix_4_f32_slice(proj.as_ref(), false, &p.proj);
    }

    /// Draws into the current viewport (set by egui to the callback's rectangle).
    ///
    /// # Safety
    /// `gl` must be current on this thread.
    pub unsafe fn draw(&self, gl: &glow::Context, scissor: [i32; 4], p: &DrawParams) {
        gl.enable(glow::SCISSOR_TEST);
        gl.scissor(scissor[0], scissor[1], scissor[2], scissor[3]);
        gl.clear_color(p.background[0], p.background[1], p.background[2], 1.0);
        gl.depth_mask(true);
        gl.clear(glow::COLOR_BUFFER_BIT | glow::DEPTH_BUFFER_BIT);
        gl.enable(glow::DEPTH_TEST);
        gl.depth_func(glow::LESS);
        gl.disable(glow::BLEND);
        gl.disable(glow::CULL_FACE);

        // Solid meshes first (their depth hides the particles behind them); transparent and
        // wireframe meshes last, tested against the particles' depth without writing their own.
        if p.meshes.mode == MeshMode::Solid {
            self.draw_meshes(gl, p);
        }
        if self.line_verts > 0 {
            let look = FlatLook {
                color: [0.59, 0.6, 0.65],
                lit: false,
                alpha: 1.0,
                edges: false,
            };
            self.use_flat(gl, p, &look);
            gl.bind_vertex_array(Some(self.line_vao));
            gl.draw_arrays(glow::LINES, 0, self.line_verts);
        }
        if self.instances > 0 && self.use_points(p) {
            self.set_matrices(gl, self.point_prog, p);
            let vh = gl.get_uniform_location(self.point_prog, "u_viewport_h");
            gl.uniform_1_f32(vh.as_ref(), p.viewport_height_px);
            if !gl.version().is_embedded {
                gl.enable(glow::PROGRAM_POINT_SIZE);
            }
            gl.bind_vertex_array(Some(self.point_vao));
            gl.draw_arrays(glow::POINTS, 0, self.instances);
        } else if self.instances > 0 {
            self.set_matrices(gl, self.sphere_prog, p);
            gl.bind_vertex_array(Some(self.sphere_vao));
            gl.draw_arrays_instanced(glow::TRIANGLE_STRIP, 0, 4, self.instances);
        }
        if matches!(p.meshes.mode, MeshMode::Transparent | MeshMode::Wireframe) {
            self.draw_meshes(gl, p);
        }
        gl.bind_vertex_array(None);
        gl.disable(glow::DEPTH_TEST);
    }

    /// Selects the flat program with the matrices and `look`'s uniforms.
    ///
    /// # Safety
    /// `gl` must be current on this thread.
    unsafe fn use_flat(&self, gl: &glow::Context, p: &DrawParams, look: &FlatLook) {
        let prog = self.flat_prog;
        self.set_matrices(gl, prog, p);
        let loc = |name| gl.get_uniform_location(prog, name);
        let c = look.color;
        let flag = |b: bool| if b { 1.0 } else { 0.0 };
        gl.uniform_3_f32(loc("u_color").as_ref(), c[0], c[1], c[2]);
        gl.uniform_1_f32(loc("u_lit").as_ref(), flag(look.lit));
        gl.uniform_1_f32(loc("u_alpha").as_ref(), look.alpha);
        gl.uniform_1_f32(loc("u_edges").as_ref(), flag(look.edges));
    }

    /// The mesh triangles as `p.meshes` says (nothing for `Hidden`).
    ///
    /// # Safety
    /// `gl` must be current on this thread.
    unsafe fn draw_meshes(&self, gl: &glow::Context, p: &DrawParams) {
        if self.tri_verts == 0 {
            return;
        }
        let solid = FlatLook {
            color: MESH_COLOR.map(|c| c as f32 / 255.0),
            lit: true,
            alpha: 1.0,
            edges: false,
        };
        match p.meshes.mode {
            MeshMode::Hidden => return,
            MeshMode::Solid => self.use_flat(gl, p, &solid),
            MeshMode::Transparent => {
                let alpha = p.meshes.opacity.clamp(0.0, 1.0);
                self.use_flat(gl, p, &FlatLook { alpha, ..solid });
                // Unsorted, unlike the CPU rasteriser: with one colour and one opacity the order
                // of two overlapping walls changes only their shading, not what shows through.
                gl.enable(glow::BLEND);
                gl.blend_func_separate(
                    glow::SRC_ALPHA,
                    glow::ONE_MINUS_SRC_ALPHA,
                    glow::ZERO,
                    glow::ONE,
                );
                gl.depth_mask(false);
            }
            MeshMode::Wireframe => {
                let edges = FlatLook {
                    lit: false,
                    edges: true,
                    ..solid
                };
                self.use_flat(gl, p, &edges);
                gl.depth_mask(false);
            }
        }
        gl.bind_vertex_array(Some(self.tri_vao));
        gl.draw_arrays(glow::TRIANGLES, 0, self.tri_verts);
        gl.disable(glow::BLEND);
        gl.depth_mask(true);
    }

    /// Point sprites while the largest sphere fits the driver's point size (with margin for
    /// the perspective growth), instanced quads otherwise.
    fn use_points(&self, p: &DrawParams) -> bool {
        std::env::var_os("VIEWER_NO_POINTS").is_none() && 2.6 * p.max_radius_px < self.max_point_px
    }

    /// # Safety
    /// `gl` must be current on this thread.
    pub unsafe fn destroy(&self, gl: &glow::Context) {
        gl.delete_program(self.sphere_prog);
        gl.delete_program(self.flat_prog);
        gl.delete_program(self.point_prog);
        for vao in [self.point_vao, self.sphere_vao, self.tri_vao, self.line_vao] {
            gl.delete_vertex_array(vao);
        }
        for b in [
            self.corner_vbo,
            self.instance_vbo,
            self.tri_vbo,
            self.line_vbo,
        ] {
            gl.delete_buffer(b);
        }
    }
}
