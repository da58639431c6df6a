//! CPU rasteriser for headless snapshots: sphere impostor splats with exact per-pixel depth and
//! Blinn-Phong shading, flat-lit mesh triangles (solid, transparent, wireframe or hidden, see
//! [`MeshStyle`]) and the world box as lines.
//!
//! The image is cut into horizontal bands of `BAND_ROWS` rows; primitives are binned by the rows
//! they cover and the bands are drawn in parallel (rayon), each owning its rows of the colour
//! and depth buffers, so no locking is needed.

use rayon::prelude::*;

use crate::camera::{cross, dot, normalize, sub, transform, Bounds, Camera, Vec3};
use crate::color::Rgb;
use crate::mesh_style::{MeshMode, MeshStyle};
use crate::scene::Scene;

/// Background colour of every rendering (tests compare against it).
pub const BACKGROUND: Rgb = [24, 26, 32];
const BOX_COLOR: Rgb = [150, 152, 165];
/// Base colour of meshes, lit for solid and transparent surfaces, as is for wireframe edges.
pub const MESH_COLOR: Rgb = [175, 175, 185];
const BAND_ROWS: usize = 16;
/// Wireframe: a pixel belongs to an edge when its centre lies within this many pixels inside a
/// triangle from the edge (about 1 px per side of an edge, so 1.5 px lines between two faces).
const EDGE_PX: f32 = 0.75;

/// An RGB image.
#[derive(Clone, Debug)]
pub struct Image {
    pub width: usize,
    pub height: usize,
    pub pixels: Vec<Rgb>,
}

impl Image {
    pub fn new(width: usize, height: usize, fill: Rgb) -> Self {
        Self {
            width,
            height,
            pixels: vec![fill; width * height],
        }
    }
    #[cfg(test)]
    pub fn get(&self, x: usize, y: usize) -> Rgb {
        self.pixels[y * self.width + x]
    }
    /// Alpha-blends `c` over pixel (x, y), ignoring coordinates outside the image.
    pub fn blend(&mut self, x: i64, y: i64, c: Rgb, alpha: f32) {
        if x < 0 || y < 0 || x >= self.width as i64 || y >= self.height as i64 {
            return;
        }
        let p = &mut self.pixels[y as usize * self.width + x as usize];
        *p = std::array::from_fn(|k| (p[k] as f32 + (c[k] as f32 - p[k] as f32) * alpha) as u8);
    }
}

/// Light direction in view space (from the upper left, in front of the camera).
fn light() -> Vec3 {
    normalize([-0.45, 0.6, 0.65])
}

/// `dst` moved towards `src` by `alpha` (0 keeps `dst`, 1 gives `src`).
fn mix(dst: Rgb, src: Rgb, alpha: f32) -> Rgb {
    std::array::from_fn(|k| (dst[k] as f32 + (src[k] as f32 - dst[k] as f32) * alpha).round() as u8)
}

/// Lambert + Blinn-Phong highlight for a view-space unit normal.
fn shade(base: Rgb, n: Vec3) -> Rgb {
    let l = light();
    let diffuse = dot(n, l).max(0.0);
    let h = normalize([l[0], l[1], l[2] + 1.0]);
    let spec = dot(n, h).max(0.0).powi(32) * 70.0;
    std::array::from_fn(|k| (base[k] as f32 * (0.28 + 0.72 * diffuse) + spec).min(255.0) as u8)
}

/// Maps view space to pixels.
#[derive(Clone, Copy)]
struct Projector {
    view: [f32; 16],
    /// Pixels per unit of x/z at distance 1.
    scale: f32,
    cx: f32,
    cy: f32,
    near: f32,
}

impl Projector {
    fn new(cam: &Camera, world: &Bounds, width: usize, height: usize) -> Self {
        let (near, _) = cam.clip_range(world);
        Self {
            view: cam.view_matrix(),
            scale: 0.5 * height as f32 / (cam.fov_y_deg.to_radians() * 0.5).tan(),
            cx: 0.5 * width as f32,
            cy: 0.5 * height as f32,
            near,
        }
    }
    fn view_of(&self, p: Vec3) -> Vec3 {
        let v = transform(&self.view, p);
        [v[0], v[1], v[2]]
    }
    /// Pixel x, y and distance along the view axis of a view-space point in front.
    fn project(&self, v: Vec3) -> [f32; 3] {
        let d = -v[2];
        [
            self.cx + v[0] / d * self.scale,
            self.cy - v[1] / d * self.scale,
            d,
        ]
    }
}

#[derive(Clone, Copy)]
struct Splat {
    x: f32,
    y: f32,
    r_px: f32,
    depth: f32,
    r: f32,
    color: Rgb,
}

#[derive(Clone, Copy)]
struct Tri {
    /// Pixel x, y and depth of each corner.
    p: [[f32; 3]; 3],
    color: Rgb,
}

/// How `draw_tri` writes a triangle's pixels.
#[derive(Clone, Copy)]
enum Fill {
    /// Colour and depth (solid meshes, drawn before the particles).
    Opaque,
    /// Blended over the pixels it is in front of, depth untouched (after the particles).
    Blend(f32),
    /// Only pixels within `EDGE_PX` of an edge, unlit, depth untouched (after the particles).
    Edges,
}

impl Fill {
    fn of(style: &MeshStyle) -> Option<Fill> {
        match style.mode {
            MeshMode::Solid => Some(Fill::Opaque),
            MeshMode::Transparent => Some(Fill::Blend(style.opacity.clamp(0.0, 1.0))),
            MeshMode::Wireframe => Some(Fill::Edges),
            MeshMode::Hidden => None,
        }
    }
}

/// Bins primitives covering rows `y0..=y1` into bands.
fn bin(bands: &mut [Vec<u32>], idx: usize, y0: f32, y1: f32, height: usize) {
    if y1 < 0.0 || y0 >= height as f32 {
        return;
    }
    let b0 = (y0.max(0.0) as usize) / BAND_ROWS;
    let last = bands.len() - 1;
    let b1 = ((y1.min(height as f32 - 1.0)) as usize) / BAND_ROWS;
    for b in &mut bands[b0.min(last)..=b1.min(last)] {
        b.push(idx as u32);
    }
}

fn project_splats(scene: &Scene, pj: &Projector, w: usize, h: usize) -> Vec<Splat> {
    scene
        .centers
        .par_iter()
        .zip(scene.radii.par_iter())
        .zip(scene.colors.par_iter())
        .filter_map(|((c, &r), &color)| {
            let v = pj.view_of(*c);
            if -v[2] - r < pj.near * 0.5 {
                return None;
            }
            let [x, y, depth] = pj.project(v);
            let r_px = r * pj.scale / depth;
            let off =
                x + r_px < 0.0 || y + r_px < 0.0 || x - r_px > w as f32 || y - r_px > h as f32;
            (!off).then_some(Splat {
                x,
                y,
                r_px,
                depth,
                r,
                color,
            })
        })
        .collect()
}

fn project_triangles(scene: &Scene, pj: &Projector, fill: Option<Fill>) -> Vec<Tri> {
    let Some(fill) = fill else {
        return Vec::new();
    };
    let mut tris: Vec<Tri> = scene
        .triangles
        .par_iter()
        .filter_map(|t| {
            let v = t.map(|p| pj.view_of(p));
            if v.iter().any(|p| -p[2] < pj.near) {
                return None; // crosses the near plane: dropped rather than clipped
            }
            let mut n = normalize(cross(sub(v[1], v[0]), sub(v[2], v[0])));
            // Two-sided lighting: face the normal towards the camera.
            if dot(n, v[0]) > 0.0 {
                n = n.map(|c| -c);
            }
            Some(Tri {
                p: v.map(|p| pj.project(p)),
                color: shade(MESH_COLOR, n),
            })
        })
        .collect();
    if let Fill::Blend(_) = fill {
        // Blending is done in order: farthest first (by centroid), so a drum's front wall is
        // blended over its back wall. Bins keep this order within each band.
        let key = |t: &Tri| t.p[0][2] + t.p[1][2] + t.p[2][2];
        tris.par_sort_by(|a, b| key(b).total_cmp(&key(a)));
    }
    tris
}

/// Rows `y0..y0 + rows` of the colour and depth buffers, `w` pixels wide (one rayon task).
struct Band<'a> {
    y0: usize,
    rows: usize,
    w: usize,
    color: &'a mut [Rgb],
    depth: &'a mut [f32],
}

fn draw_splat(s: &Splat, band: &mut Band<'_>) {
    let (y_band, rows, w) = (band.y0, band.rows, band.w);
    let x0 = (s.x - s.r_px).floor().max(0.0) as usize;
    let x1 = ((s.x + s.r_px).ceil() as usize).min(w);
    let y0 = ((s.y - s.r_px).floor().max(y_band as f32) as usize).max(y_band);
    let y1 = ((s.y + s.r_px).ceil() as usize).min(y_band + rows);
    // Very small splats still cover their pixel.
    let inv = 1.0 / s.r_px.max(0.5);
    for py in y0..y1 {
        let dy = (s.y - (py as f32 + 0.5)) * inv;
        let row = (py - y_band) * w;
        for px in x0..x1 {
            let dx = (px as f32 + 0.5 - s.x) * inv;
            let d2 = dx * dx + dy * dy;
            if d2 > 1.0 {
                continue;
            }
            let nz = (1.0 - d2).sqrt();
            let z = s.depth - nz * s.r;
            let i = row + px;
            if z < band.depth[i] {
                band.depth[i] = z;
                band.color[i] = shade(s.color, [dx, dy, nz]);
            }
        }
    }
}

fn edge(a: [f32; 3], b: [f32; 3], x: f32, y: f32) -> f32 {
    (b[0] - a[0]) * (y - a[1]) - (b[1] - a[1]) * (x - a[0])
}

/// One edge of a triangle whose corners are ordered to give a positive `edge` area.
#[derive(Clone, Copy)]
struct Edge {
    /// The edge's ends, lexicographically smaller first, and +1 or -1 to give the edge function
    /// of the edge as the triangle runs it: two triangles sharing this edge (running it
    /// opposite ways) get exact negatives of each other.
    ends: [[f32; 3]; 2],
    sign: f32,
    /// Whether a pixel centre exactly on the edge is this triangle's: when the edge runs up or
    /// right. Of two triangles sharing an edge exactly one takes such a pixel, so every pixel
    /// is covered once (a transparent wall is blended once, not twice along its diagonals).
    owns_ties: bool,
    /// 1 / length [1/px].
    inv_len: f32,
}

impl Edge {
    fn new(from: [f32; 3], to: [f32; 3]) -> Self {
        let (dx, dy) = (to[0] - from[0], to[1] - from[1]);
        let forward = (from[0], from[1]) <= (to[0], to[1]);
        Self {
            ends: if forward { [from, to] } else { [to, from] },
            sign: if forward { 1.0 } else { -1.0 },
            owns_ties: dy > 0.0 || (dy == 0.0 && dx > 0.0),
            inv_len: 1.0 / dx.hypot(dy).max(1e-12),
        }
    }
    /// The edge function at (x, y): > 0 inside.
    fn at(&self, x: f32, y: f32) -> f32 {
        self.sign * edge(self.ends[0], self.ends[1], x, y)
    }
    fn owns(&self, e: f32) -> bool {
        e > 0.0 || (e == 0.0 && self.owns_ties)
    }
}

fn draw_tri(t: &Tri, fill: Fill, band: &mut Band<'_>) {
    let (y_band, rows, w) = (band.y0, band.rows, band.w);
    let [a, mut b, mut c] = t.p;
    let mut area = edge(a, b, c[0], c[1]);
    if area.abs() < 1e-12 {
        return;
    }
    if area < 0.0 {
        std::mem::swap(&mut b, &mut c);
        area = -area;
    }
    // Edge k is opposite corner k: its edge function over `area` is corner k's weight, and over
    // the edge's length the distance from it in pixels.
    let edges = [Edge::new(b, c), Edge::new(c, a), Edge::new(a, b)];
    let xmin = a[0].min(b[0]).min(c[0]).floor().max(0.0) as usize;
    let xmax = (a[0].max(b[0]).max(c[0]).ceil().max(0.0) as usize).min(w);
    let ymin = (a[1].min(b[1]).min(c[1]).floor().max(0.0) as usize).max(y_band);
    let ymax = (a[1].max(b[1]).max(c[1]).ceil().max(0.0) as usize).min(y_band + rows);
    // Perspective-correct depth: 1/depth is affine in screen space.
    let inv = [1.0 / a[2], 1.0 / b[2], 1.0 / c[2]];
    for py in ymin..ymax {
        let y = py as f32 + 0.5;
        for px in xmin..xmax {
            let x = px as f32 + 0.5;
            let e = edges.map(|ed| ed.at(x, y));
            if !(0..3).all(|k| edges[k].owns(e[k])) {
                continue;
            }
            let z = area / (e[0] * inv[0] + e[1] * inv[1] + e[2] * inv[2]);
            let i = (py - y_band) * w + px;
            if z >= band.depth[i] {
                continue;
            }
            match fill {
                Fill::Opaque => {
                    band.depth[i] = z;
                    band.color[i] = t.color;
                }
                Fill::Blend(alpha) => band.color[i] = mix(band.color[i], t.color, alpha),
                Fill::Edges => {
                    let d = (0..3)
                        .map(|k| e[k] * edges[k].inv_len)
                        .fold(f32::MAX, f32::min);
                    if d < EDGE_PX {
                        band.color[i] = MESH_COLOR;
                    }
                }
            }
        }
    }
}

/// Draws the world box edges, depth-tested against what is already drawn.
fn draw_box(world: &Bounds, pj: &Projector, img: &mut Image, depth: &[f32]) {
    let corners = world.corners().map(|c| pj.view_of(c));
    for (i, j) in Bounds::EDGES {
        let (mut a, mut b) = (corners[i], corners[j]);
        // Clip the segment to the part in front of the near plane.
        let (da, db) = (-a[2] - pj.near, -b[2] - pj.near);
        if da < 0.0 && db < 0.0 {
            continue;
        }
        if da < 0.0 {
            a = lerp3(a, b, da / (da - db));
        } else if db < 0.0 {
            b = lerp3(b, a, db / (db - da));
        }
        let (pa, pb) = (pj.project(a), pj.project(b));
        let steps =
            ((pb[0] - pa[0]).abs().max((pb[1] - pa[1]).abs()).ceil() as usize).clamp(1, 100_000);
        for s in 0..=steps {
            let t = s as f32 / steps as f32;
            let x = pa[0] + (pb[0] - pa[0]) * t;
            let y = pa[1] + (pb[1] - pa[1]) * t;
            let z = 1.0 / (1.0 / pa[2] + (1.0 / pb[2] - 1.0 / pa[2]) * t);
            let (xi, yi) = (x.floor() as i64, y.floor() as i64);
            if xi < 0 || yi < 0 || xi >= img.width as i64 || yi >= img.height as i64 {
                continue;
            }
            let k = yi as usize * img.width + xi as usize;
            // Lines behind particles are dimmed rather than hidden, so the box stays readable.
            let alpha = if z <= depth[k] * 1.001 { 0.9 } else { 0.25 };
            img.blend(xi, yi, BOX_COLOR, alpha);
        }
    }
}

fn lerp3(a: Vec3, b: Vec3, t: f32) -> Vec3 {
    std::array::from_fn(|k| a[k] + (b[k] - a[k]) * t)
}

/// Renders `scene` seen by `cam` into a `width` x `height` image (no legend), its meshes drawn
/// as `meshes` says.
pub fn render(
    scene: &Scene,
    cam: &Camera,
    width: usize,
    height: usize,
    meshes: &MeshStyle,
) -> Image {
    let (w, h) = (width.max(1), height.max(1));
    let pj = Projector::new(cam, &scene.world, w, h);
    let splats = project_splats(scene, &pj, w, h);
    let fill = Fill::of(meshes);
    let tris = project_triangles(scene, &pj, fill);
    let nbands = h.div_ceil(BAND_ROWS);
    let mut splat_bins = vec![Vec::new(); nbands];
    for (i, s) in splats.iter().enumerate() {
        bin(&mut splat_bins, i, s.y - s.r_px, s.y + s.r_px, h);
    }
    let mut tri_bins = vec![Vec::new(); nbands];
    for (i, t) in tris.iter().enumerate() {
        let ys = t.p.map(|p| p[1]);
        bin(
            &mut tri_bins,
            i,
            ys[0].min(ys[1]).min(ys[2]),
            ys[0].max(ys[1]).max(ys[2]),
            h,
        );
    }
    let mut img = Image::new(w, h, BACKGROUND);
    let mut depth = vec![f32::INFINITY; w * h];
    img.pixels
        .par_chunks_mut(w * BAND_ROWS)
        .zip(depth.par_chunks_mut(w * BAND_ROWS))
        .enumerate()
        .for_each(|(b, (color, depth))| {
            let rows = color.len() / w;
            let mut band = Band {
                y0: b * BAND_ROWS,
                rows,
                w,
                color,
                depth,
            };
            // Solid meshes go first so their depth hides the particles behind them; the others
            // are drawn over the finished particles, tested against their depth only.
            let draw_tris = |band: &mut Band<'_>, fill| {
                for &i in &tri_bins[b] {
                    draw_tri(&tris[i as usize], fill, band);
                }
            };
            if let Some(Fill::Opaque) = fill {
                draw_tris(&mut band, Fill::Opaque);
            }
            for &i in &splat_bins[b] {
                draw_splat(&splats[i as usize], &mut band);
            }
            if let Some(f @ (Fill::Blend(_) | Fill::Edges)) = fill {
                draw_tris(&mut band, f);
            }
        });
    draw_box(&scene.world, &pj, &mut img, &depth);
    img
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::camera::{CameraSpec, UpAxis};
    use crate::color::Legend;

    fn scene(centers: Vec<Vec3>, r: f32) -> Scene {
        let n = centers.len();
        Scene {
            centers,
            radii: vec![r; n],
            colors: vec![[200, 50, 50]; n],
            triangles: vec![],
            world: Bounds {
                min: [0.0; 3],
                max: [1.0; 3],
            },
            legend: Legend::Ramp {
                title: String::new(),
                min: 0.0,
                max: 1.0,
            },
            total_particles: n,
            color_by: crate::color::ColorBy::Species,
            boundary_particles: 0,
            boundary: crate::sph::BoundaryMode::Hidden,
            stride: 1,
            note: None,
        }
    }

    #[test]
    fn sphere_covers_its_projected_disc() {
        let s = scene(vec![[0.5, 0.5, 0.5]], 0.1);
        let cam = Camera::framing(
            &s.world,
            &"front".parse::<CameraSpec>().expect("preset"),
            UpAxis::Z,
            1.0,
        );
        let img = render(&s, &cam, 200, 200, &MeshStyle::default());
        assert_ne!(img.get(100, 100), BACKGROUND);
        // Radius 0.1 at distance d: r_px = 0.1 * scale / d; pixels well outside stay background.
        let d = cam.distance;
        let r_px = 0.1 * 100.0 / (cam.fov_y_deg.to_radians() * 0.5).tan() / d;
        assert_ne!(img.get(100 + (r_px * 0.8) as usize, 100), BACKGROUND);
        assert_eq!(img.get(100 + (r_px * 1.3) as usize, 100), BACKGROUND);
    }

    #[test]
    fn nearer_sphere_wins() {
        let mut s = scene(vec![[0.5, 0.6, 0.5], [0.5, 0.4, 0.5]], 0.1);
        s.colors = vec![[200, 0, 0], [0, 0, 200]];
        let cam = Camera::framing(
            &s.world,
            &"front".parse::<CameraSpec>().expect("preset"),
            UpAxis::Z,
            1.0,
        );
        let c = render(&s, &cam, 100, 100, &MeshStyle::default()).get(50, 50);
        // The front camera sits at -y: the sphere at y = 0.4 (blue) is nearer.
        assert!(c[2] > c[0], "{c:?}");
    }
}
