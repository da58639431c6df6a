//! Raw little-endian arrays after a frame or static header: writing them from a `Frame` /
//! `StaticData`, and reading them back with every size checked before use.

use shm_protocol::layout::SpeciesMethod;
use shm_protocol::{
    BodyTransform, FieldKind, Frame, FrameSample, MeshStatic, SpeciesRecord, StaticData,
};

use crate::codec::CodecError;
use crate::protocol::{FrameHeader, PositionEncoding, StaticHeader, WireMesh, WireSpecies};

/// Bytes of one body transform on the wire (18 `f32`).
pub const BODY_BYTES: usize = 72;

fn pad4(n: usize) -> usize {
    n.div_ceil(4) * 4
}

/// Bytes per particle of `field` on the wire.
fn element_bytes(field: FieldKind, enc: PositionEncoding) -> u64 {
    match (field, enc) {
        (FieldKind::Position, PositionEncoding::Quantized16) => 6,
        _ => field.element_size(),
    }
}

/// Fields of `frame` that are present and wanted.
pub fn sendable_fields(frame: &Frame, wanted: u32) -> u32 {
    FieldKind::ALL
        .into_iter()
        .filter(|&f| wanted & f.bit() != 0 && field_bytes(frame, f).is_some())
        .fold(0, |m, f| m | f.bit())
}

/// Stride of a frame of `n` particles for a client wanting at most `max_particles` (0: all):
/// the smallest k with `ceil(n / k) <= max_particles`.
pub fn sampling_stride(n: u64, max_particles: u64) -> u64 {
    if max_particles == 0 || n <= max_particles {
        1
    } else {
        n.div_ceil(max_particles)
    }
}

/// The raw bytes of a field of an owned frame.
fn field_bytes(frame: &Frame, f: FieldKind) -> Option<&[u8]> {
    fn v3(v: &Option<Vec<[f32; 3]>>) -> Option<&[u8]> {
        v.as_deref().map(bytemuck::cast_slice::<[f32; 3], u8>)
    }
    fn s(v: &Option<Vec<f32>>) -> Option<&[u8]> {
        v.as_deref().map(bytemuck::cast_slice::<f32, u8>)
    }
    match f {
        FieldKind::Position => v3(&frame.positions),
        FieldKind::Velocity => v3(&frame.velocities),
        FieldKind::AngularVelocity => v3(&frame.angular_velocities),
        FieldKind::Force => v3(&frame.forces),
        FieldKind::ContactCount => frame
            .contact_counts
            .as_deref()
            .map(bytemuck::cast_slice::<u32, u8>),
        FieldKind::Density => s(&frame.densities),
        FieldKind::Pressure => s(&frame.pressures),
        FieldKind::ParticleId => frame
            .particle_ids
            .as_deref()
            .map(bytemuck::cast_slice::<u32, u8>),
        FieldKind::ParticleKind => frame
            .particle_kinds
            .as_deref()
            .map(bytemuck::cast_slice::<u32, u8>),
    }
}

/// Payload size of a frame with these counts, or None on overflow.
pub fn frame_payload_len(
    particles: u64,
    bodies: u64,
    fields: u32,
    enc: PositionEncoding,
) -> Option<u64> {
    let mut total = bodies.checked_mul(BODY_BYTES as u64)?;
    for f in FieldKind::ALL {
        if fields & f.bit() != 0 {
            let n = particles.checked_mul(element_bytes(f, enc))?;
            total = total.checked_add(n.checked_add(3)? / 4 * 4)?;
        }
    }
    Some(total)
}

/// The quantisation box for a frame: the static world box when usable, else the positions'
/// bounding box.
pub fn quant_box(world: Option<([f64; 3], [f64; 3])>, positions: &[[f32; 3]]) -> [[f32; 3]; 2] {
    if let Some((lo, hi)) = world {
        let ok = (0..3).all(|a| lo[a].is_finite() && hi[a].is_finite() && hi[a] > lo[a]);
        if ok {
            return [lo.map(|v| v as f32), hi.map(|v| v as f32)];
        }
    }
    let mut lo = [f32::INFINITY; 3];
    let mut hi = [f32::NEG_INFINITY; 3];
    for p in positions {
        for a in 0..3 {
            if p[a].is_finite() {
                lo[a] = lo[a].min(p[a]);
                hi[a] = hi[a].max(p[a]);
            }
        }
    }
    for a in 0..3 {
        if lo[a] > hi[a] {
            (lo[a], hi[a]) = (0.0, 1.0);
        }
    }
    [lo, hi]
}

/// Quantises positions to `u16 x3` within `[lo, hi]` (clamped; NaN maps to 0).
fn quantise<'a>(
    positions: impl ExactSizeIterator<Item = &'a [f32; 3]>,
    lo: [f32; 3],
    hi: [f32; 3],
    out: &mut Vec<u8>,
) {
    let scale: [f32; 3] = std::array::from_fn(|a| {
        if hi[a] > lo[a] {
            65535.0 / (hi[a] - lo[a])
        } else {
            0.0
        }
    });
    out.reserve(positions.len() * 6);
    for p in positions {
        for a in 0..3 {
            // `as u16` saturates and maps NaN to 0.
            let q = ((p[a] - lo[a]) * scale[a] + 0.5) as u16;
            out.extend_from_slice(&q.to_le_bytes());
        }
    }
}

/// Appends `bytes` and zero padding up to a multiple of 4 of their length.
fn push_padded(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(bytes);
    pad_to_4(out, bytes.len());
}

/// Zero bytes after an array of `len` bytes, up to a multiple of 4.
fn pad_to_4(out: &mut Vec<u8>, len: usize) {
    out.resize(out.len() + pad4(len) - len, 0);
}

/// Builds a frame's header for `wanted` fields, at most `max_particles` particles (0: all)
/// (see [`crate::protocol::FrameHeader::stride`]).
pub fn frame_header(
    frame: &Frame,
    epoch: u64,
    wanted: u32,
    enc: PositionEncoding,
    world: Option<([f64; 3], [f64; 3])>,
    max_particles: u64,
) -> FrameHeader {
    let n = frame.meta.particle_count;
    let stride = sampling_stride(n, max_particles);
    let mut fields = sendable_fields(frame, wanted);
    if stride > 1 {
        // Each element must be nameable: the frame's ids, or the sampled indices.
        fields |= FieldKind::ParticleId.bit();
    }
    let mut meta = frame.meta;
    meta.fields = fields;
    meta.particle_count = n.div_ceil(stride);
    let [quant_min, quant_max] = match (&frame.positions, enc) {
        (Some(p), PositionEncoding::Quantized16) if fields & FieldKind::Position.bit() != 0 => {
            quant_box(world, p)
        }
        _ => [[0.0; 3]; 2],
    };
    FrameHeader {
        epoch,
        meta,
        positions: enc,
        quant_min,
        quant_max,
        stride,
        frame_particles: n,
    }
}

/// Appends the payload described by `h` (from [`frame_header`]) to `out`
/// (`out` already holds the message start, see `codec::begin_*`; it starts 4-aligned).
pub fn write_frame_payload(frame: &Frame, h: &FrameHeader, out: &mut Vec<u8>) {
    for b in &frame.bodies {
        for v in b
            .rotation
            .iter()
            .chain(&b.translation)
            .chain(&b.velocity)
            .chain(&b.angular_velocity)
        {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    let k = h.stride.max(1) as usize;
    let count = h.meta.particle_count as usize;
    for f in FieldKind::ALL {
        if h.meta.fields & f.bit() == 0 {
            continue;
        }
        match (f, h.positions, &frame.positions) {
            (FieldKind::Position, PositionEncoding::Quantized16, Some(p)) => {
                quantise(p.iter().step_by(k), h.quant_min, h.quant_max, out);
                pad_to_4(out, count * 6);
            }
            _ => match field_bytes(frame, f) {
                Some(bytes) if k == 1 => push_padded(out, bytes),
                Some(bytes) => {
                    let e = f.element_size() as usize;
                    for c in bytes.chunks_exact(e).step_by(k) {
                        out.extend_from_slice(c);
                    }
                    pad_to_4(out, count * e);
                }
                // Only `particle_id` of a subsampled frame without ids: the sampled indices
                // (ids are static entries, and element i of such a frame is static entry i).
                None => {
                    for i in 0..count {
                        out.extend_from_slice(&((i * k) as u32).to_le_bytes());
                    }
                }
            },
        }
    }
}

/// Splits `n` bytes off the front of `rest`.
fn take<'a>(rest: &mut &'a [u8], n: usize) -> Result<&'a [u8], CodecError> {
    if rest.len() < n {
        return Err(CodecError::Invalid(format!(
            "payload ends early ({} bytes left, {n} needed)",
            rest.len()
        )));
    }
    let (head, tail) = rest.split_at(n);
    *rest = tail;
    Ok(head)
}

fn f32s(bytes: &[u8]) -> impl Iterator<Item = f32> + '_ {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
}

fn u32s(bytes: &[u8]) -> impl Iterator<Item = u32> + '_ {
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
}

fn vec3s(bytes: &[u8]) -> Vec<[f32; 3]> {
    let mut it = f32s(bytes);
    let mut out = Vec::with_capacity(bytes.len() / 12);
    while let (Some(x), Some(y), Some(z)) = (it.next(), it.next(), it.next()) {
        out.push([x, y, z]);
    }
    out
}

/// Rebuilds a `Frame` from a header and its payload. The payload's size must be exactly what
/// the header implies (checked before any array is built).
pub fn read_frame(h: &FrameHeader, payload: &[u8]) -> Result<Frame, CodecError> {
    let n = h.meta.particle_count;
    if h.meta.fields & !shm_protocol::layout::ALL_FIELDS_MASK != 0 {
        return Err(CodecError::Invalid(format!(
            "unknown field bits {:#x}",
            h.meta.fields
        )));
    }
    if h.stride == 0 || h.frame_particles.div_ceil(h.stride) != n {
        return Err(CodecError::Invalid(format!(
            "frame of {} particles sampled every {} cannot hold {n}",
            h.frame_particles, h.stride
        )));
    }
    if h.stride > 1 && h.meta.fields & FieldKind::ParticleId.bit() == 0 {
        return Err(CodecError::Invalid(
            "subsampled frame without particle ids".into(),
        ));
    }
    let want = frame_payload_len(n, h.meta.body_count as u64, h.meta.fields, h.positions)
        .ok_or_else(|| CodecError::Invalid("frame sizes overflow".into()))?;
    if want != payload.len() as u64 {
        return Err(CodecError::PayloadSize {
            got: payload.len() as u64,
            want,
        });
    }
    let n = n as usize;
    let mut rest = payload;
    let body_bytes = take(&mut rest, h.meta.body_count as usize * BODY_BYTES)?;
    let bodies = body_bytes
        .chunks_exact(BODY_BYTES)
        .map(|c| {
            let v: Vec<f32> = f32s(c).collect();
            BodyTransform {
                rotation: std::array::from_fn(|i| v[i]),
                translation: std::array::from_fn(|i| v[9 + i]),
                velocity: std::array::from_fn(|i| v[12 + i]),
                angular_velocity: std::array::from_fn(|i| v[15 + i]),
            }
        })
        .collect();
    let mut frame = Frame {
        meta: h.meta,
        bodies,
        sample: (h.stride > 1).then_some(FrameSample {
            stride: h.stride,
            of: h.frame_particles,
        }),
        ..Frame::default()
    };
    for f in FieldKind::ALL {
        if h.meta.fields & f.bit() == 0 {
            continue;
        }
        let len = n * element_bytes(f, h.positions) as usize;
        let bytes = take(&mut rest, len)?;
        take(&mut rest, pad4(len) - len)?;
        match f {
            FieldKind::Position => {
                frame.positions = Some(match h.positions {
                    PositionEncoding::F32 => vec3s(bytes),
                    PositionEncoding::Quantized16 => dequantise(bytes, h.quant_min, h.quant_max),
                })
            }
            FieldKind::Velocity => frame.velocities = Some(vec3s(bytes)),
            FieldKind::AngularVelocity => frame.angular_velocities = Some(vec3s(bytes)),
            FieldKind::Force => frame.forces = Some(vec3s(bytes)),
            FieldKind::ContactCount => frame.contact_counts = Some(u32s(bytes).collect()),
            FieldKind::Density => frame.densities = Some(f32s(bytes).collect()),
            FieldKind::Pressure => frame.pressures = Some(f32s(bytes).collect()),
            FieldKind::ParticleId => frame.particle_ids = Some(u32s(bytes).collect()),
            FieldKind::ParticleKind => frame.particle_kinds = Some(u32s(bytes).collect()),
        }
    }
    Ok(frame)
}

fn dequantise(bytes: &[u8], lo: [f32; 3], hi: [f32; 3]) -> Vec<[f32; 3]> {
    let step: [f32; 3] = std::array::from_fn(|a| (hi[a] - lo[a]) / 65535.0);
    bytes
        .chunks_exact(6)
        .map(|c| {
            std::array::from_fn(|a| {
                let q = u16::from_le_bytes([c[2 * a], c[2 * a + 1]]);
                lo[a] + q as f32 * step[a]
            })
        })
        .collect()
}

/// Header of the static message for `data`.
pub fn static_header(data: &StaticData, epoch: u64, arrays: bool) -> StaticHeader {
    StaticHeader {
        epoch,
        generation: data.generation,
        world_min: data.world_min,
        world_max: data.world_max,
        cell_size: data.cell_size,
        config_toml: data.config_toml.clone(),
        species: data.species.iter().map(wire_species).collect(),
        meshes: data
            .meshes
            .iter()
            .map(|m| WireMesh {
                name: m.name.clone(),
                triangle_count: m.triangles.len() as u64,
            })
            .collect(),
        particle_count: data.particle_ids.len() as u64,
        arrays,
    }
}

/// Appends the static payload (when `h.arrays`).
pub fn write_static_payload(data: &StaticData, h: &StaticHeader, out: &mut Vec<u8>) {
    if !h.arrays {
        return;
    }
    out.extend_from_slice(bytemuck::cast_slice(&data.particle_ids));
    out.extend_from_slice(bytemuck::cast_slice(&data.particle_species));
    out.extend_from_slice(bytemuck::cast_slice(&data.particle_radius));
    for m in &data.meshes {
        out.extend_from_slice(bytemuck::cast_slice(&m.triangles));
    }
}

/// Rebuilds `StaticData` from a header and its payload (exact size checked first).
pub fn read_static(h: &StaticHeader, payload: &[u8]) -> Result<StaticData, CodecError> {
    let overflow = || CodecError::Invalid("static sizes overflow".into());
    let triangles = h
        .meshes
        .iter()
        .try_fold(0u64, |t, m| t.checked_add(m.triangle_count))
        .ok_or_else(overflow)?;
    let want = if h.arrays {
        h.particle_count
            .checked_mul(12)
            .and_then(|a| a.checked_add(triangles.checked_mul(36)?))
            .ok_or_else(overflow)?
    } else {
        0
    };
    if want != payload.len() as u64 {
        return Err(CodecError::PayloadSize {
            got: payload.len() as u64,
            want,
        });
    }
    let mut rest = payload;
    let mut data = StaticData {
        config_toml: h.config_toml.clone(),
        species: h.species.iter().map(species_record).collect(),
        world_min: h.world_min,
        world_max: h.world_max,
        cell_size: h.cell_size,
        generation: h.generation,
        ..StaticData::default()
    };
    if h.arrays {
        let n = h.particle_count as usize;
        data.particle_ids = u32s(take(&mut rest, n * 4)?).collect();
        data.particle_species = u32s(take(&mut rest, n * 4)?).collect();
        data.particle_radius = f32s(take(&mut rest, n * 4)?).collect();
    }
    for m in &h.meshes {
        let tris = if h.arrays {
            let bytes = take(&mut rest, m.triangle_count as usize * 36)?;
            let v: Vec<f32> = f32s(bytes).collect();
            v.chunks_exact(9)
                .map(|c| std::array::from_fn(|i| c[i]))
                .collect()
        } else {
            Vec::new()
        };
        data.meshes.push(MeshStatic {
            name: m.name.clone(),
            triangles: tris,
        });
    }
    Ok(data)
}

/// The wire form of a species record: unknown methods keep their number as the name.
fn wire_species(s: &SpeciesRecord) -> WireSpecies {
    let method = s.method();
    let names = method.map(SpeciesMethod::param_names).unwrap_or(&[]);
    WireSpecies {
        name: shm_protocol::static_data::decode_name(&s.name),
        method: method
            .map(|m| m.name().to_string())
            .unwrap_or_else(|| s.method.to_string()),
        radius: s.radius,
        density: s.density,
        params: names
            .iter()
            .zip(s.params)
            .map(|(n, v)| (n.to_string(), v))
            .collect(),
    }
}

fn species_record(s: &WireSpecies) -> SpeciesRecord {
    // A method this build does not know travels as its number.
    let method = SpeciesMethod::from_name(&s.method)
        .map(|m| m as u32)
        .or_else(|| s.method.parse().ok())
        .unwrap_or(0);
    let mut params = [0.0; shm_protocol::layout::SPECIES_PARAMS];
    for (slot, (_, v)) in params.iter_mut().zip(&s.params) {
        *slot = *v;
    }
    SpeciesRecord {
        name: shm_protocol::static_data::encode_name(&s.name),
        method,
        radius: s.radius,
        density: s.density,
        params,
        ..SpeciesRecord::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(n: usize) -> Frame {
        Frame {
            meta: shm_protocol::FrameMeta {
                seq: 7,
                particle_count: n as u64,
                body_count: 1,
                fields: FieldKind::Position.bit() | FieldKind::ContactCount.bit(),
                ..Default::default()
            },
            bodies: vec![BodyTransform::IDENTITY],
            positions: Some((0..n).map(|i| [i as f32, 0.5, -1.0]).collect()),
            contact_counts: Some((0..n as u32).collect()),
            ..Frame::default()
        }
    }

    #[test]
    fn f32_frames_round_trip_exactly() {
        let f = frame(5);
        let h = frame_header(&f, 1, u32::MAX, PositionEncoding::F32, None, 0);
        let mut out = Vec::new();
        write_frame_payload(&f, &h, &mut out);
        assert_eq!(
            out.len() as u64,
            frame_payload_len(5, 1, h.meta.fields, h.positions).unwrap()
        );
        assert_eq!(read_frame(&h, &out).unwrap(), f);
    }

    #[test]
    fn quantised_positions_are_within_half_a_step() {
        let f = frame(5);
        let world = Some(([-2.0, 0.0, -2.0], [6.0, 1.0, 2.0]));
        let h = frame_header(
            &f,
            1,
            FieldKind::Position.bit(),
            PositionEncoding::Quantized16,
            world,
            0,
        );
        let mut out = Vec::new();
        write_frame_payload(&f, &h, &mut out);
        assert_eq!(out.len(), 72 + 32); // 30 bytes of positions padded to 32
        let back = read_frame(&h, &out).unwrap();
        for (a, b) in back.positions.unwrap().iter().zip(f.positions.unwrap()) {
            for k in 0..3 {
                let step = (h.quant_max[k] - h.quant_min[k]) / 65535.0;
                assert!((a[k] - b[k]).abs() <= step * 0.51, "{a:?} vs {b:?}");
            }
        }
        assert!(back.contact_counts.is_none());
    }

    /// A run whose particle set changes: five static particles of two species, a frame holding
    /// ids 1, 3, 4 and the outflow counters. Everything survives the wire (bincode header, raw
    /// payload), and the receiver finds species and radii by id.
    #[test]
    fn particle_ids_and_outflow_counters_cross_the_wire() {
        use crate::codec;
        use crate::protocol::ServerMsg;

        let st = StaticData {
            particle_ids: (0..5).collect(),
            particle_species: vec![0, 1, 0, 1, 0],
            particle_radius: vec![0.01, 0.02, 0.03, 0.04, 0.05],
            generation: 2,
            ..StaticData::default()
        };
        let mut f = frame(3);
        f.meta.fields |= FieldKind::ParticleId.bit();
        f.meta.static_generation = 2;
        (f.meta.removed_count, f.meta.removed_mass) = (2, 0.75);
        f.particle_ids = Some(vec![1, 3, 4]);

        let sh = static_header(&st, 1, true);
        let mut wire = codec::begin_tcp(&ServerMsg::Static(sh.clone()), 0);
        write_static_payload(&st, &sh, &mut wire);
        let body = codec::read_message(&mut &codec::finish_tcp(wire)[..], u64::MAX).unwrap();
        let (ServerMsg::Static(sh), payload) = codec::decode_server(&body).unwrap() else {
            panic!("not a static message");
        };
        let st_back = read_static(&sh, payload).unwrap();
        assert_eq!(st_back, st);

        let h = frame_header(&f, 1, u32::MAX, PositionEncoding::F32, None, 0);
        let mut wire = codec::begin_tcp(&ServerMsg::Frame(h.clone()), 0);
        write_frame_payload(&f, &h, &mut wire);
        let body = codec::read_message(&mut &codec::finish_tcp(wire)[..], u64::MAX).unwrap();
        let (ServerMsg::Frame(h), payload) = codec::decode_server(&body).unwrap() else {
            panic!("not a frame message");
        };
        let back = read_frame(&h, payload).unwrap();
        assert_eq!(back, f);
        assert_eq!((back.meta.removed_count, back.meta.removed_mass), (2, 0.75));

        let ids = back.particle_ids.as_deref();
        let species = StaticData::per_element(&st_back.particle_species, ids).unwrap();
        let radii = StaticData::per_element(&st_back.particle_radius, ids).unwrap();
        assert_eq!(
            (&species[..], &radii[..]),
            (&[1, 1, 0][..], &[0.02, 0.04, 0.05][..])
        );

        // The WebSocket header is JSON: the browser reads the counters by name.
        let json = serde_json::to_value(ServerMsg::Frame(h)).unwrap();
        assert_eq!(json["Frame"]["meta"]["removed_count"], 2);
        assert_eq!(json["Frame"]["meta"]["removed_mass"], 0.75);
    }

    /// Encodes `f` for a client wanting `fields` (`Quantized16` positions with `world`, or f32
    /// without) and at most `max` particles; returns the header and the frame read back.
    fn sampled(
        f: &Frame,
        fields: u32,
        world: Option<([f64; 3], [f64; 3])>,
        max: u64,
    ) -> (FrameHeader, Frame) {
        let enc = if world.is_some() {
            PositionEncoding::Quantized16
        } else {
            PositionEncoding::F32
        };
        let h = frame_header(f, 1, fields, enc, world, max);
        let mut out = Vec::new();
        write_frame_payload(f, &h, &mut out);
        let back = read_frame(&h, &out).unwrap();
        (h, back)
    }

    /// `max_particles`: every k-th particle, named by its id; quantised positions sampled the
    /// same way; frames with their own ids keep them; a frame within the limit is whole.
    #[test]
    fn subsampled_frames_name_their_particles() {
        let f = frame(10);
        let (h, back) = sampled(&f, u32::MAX, None, 4);
        assert_eq!(
            (h.stride, h.frame_particles, h.meta.particle_count),
            (3, 10, 4)
        );
        assert_eq!(back.sample, Some(FrameSample { stride: 3, of: 10 }));
        let want: Vec<u32> = vec![0, 3, 6, 9];
        assert_eq!(back.particle_ids.as_deref(), Some(&want[..]));
        assert_eq!(back.contact_counts.as_deref(), Some(&want[..]));
        let xs: Vec<f32> = back.positions.unwrap().iter().map(|p| p[0]).collect();
        assert_eq!(xs, [0.0, 3.0, 6.0, 9.0]);

        let world = Some(([0.0, 0.0, -2.0], [10.0, 1.0, 0.0]));
        let (h, back) = sampled(&f, FieldKind::Position.bit(), world, 5);
        let xs: Vec<f32> = back
            .positions
            .unwrap()
            .iter()
            .map(|p| p[0].round())
            .collect();
        assert_eq!((h.stride, xs), (2, vec![0.0, 2.0, 4.0, 6.0, 8.0]));
        assert_eq!(back.particle_ids.as_deref(), Some(&[0, 2, 4, 6, 8][..]));

        let mut g = frame(5);
        g.particle_ids = Some(vec![40, 41, 42, 43, 44]);
        g.meta.fields |= FieldKind::ParticleId.bit();
        let (_, back) = sampled(&g, FieldKind::Position.bit(), None, 2);
        assert_eq!(back.particle_ids.as_deref(), Some(&[40, 43][..]));

        let (h, back) = sampled(&f, FieldKind::Position.bit(), None, 10);
        assert_eq!((h.stride, h.meta.particle_count, h.meta.fields), (1, 10, 1));
        assert_eq!(back.sample, None);
    }

    #[test]
    fn inconsistent_sampling_is_rejected() {
        let f = frame(10);
        let h = frame_header(&f, 1, u32::MAX, PositionEncoding::F32, None, 4);
        let mut out = Vec::new();
        write_frame_payload(&f, &h, &mut out);
        for bad in [
            FrameHeader {
                stride: 0,
                ..h.clone()
            },
            FrameHeader {
                stride: 2,
                ..h.clone()
            },
            FrameHeader {
                frame_particles: 20,
                ..h.clone()
            },
        ] {
            assert!(read_frame(&bad, &out).is_err(), "{bad:?}");
        }
        let mut no_ids = h.clone();
        no_ids.meta.fields &= !FieldKind::ParticleId.bit();
        let e = read_frame(&no_ids, &out[..out.len() - 16]).unwrap_err();
        assert!(e.to_string().contains("without particle ids"), "{e}");
    }

    #[test]
    fn wrong_payload_sizes_are_rejected() {
        let f = frame(3);
        let h = frame_header(&f, 1, u32::MAX, PositionEncoding::F32, None, 0);
        let mut out = Vec::new();
        write_frame_payload(&f, &h, &mut out);
        out.pop();
        assert!(read_frame(&h, &out).is_err());
        let mut huge = h.clone();
        huge.meta.particle_count = u64::MAX / 2;
        huge.frame_particles = u64::MAX / 2;
        assert!(read_frame(&huge, &out).is_err());
    }
}
