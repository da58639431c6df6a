//! Prints every record's field offsets (used to write and check LAYOUT.md).
use shm_protocol::layout::*;
use std::mem::{offset_of, size_of};

macro_rules! fields {
    ($t:ty: $($f:ident),*) => {{
        println!("{} ({} bytes)", stringify!($t), size_of::<$t>());
        $( println!("  {:>4}  {}", offset_of!($t, $f), stringify!($f)); )*
    }};
}

fn main() {
    fields!(SegmentHeader: magic, abi_version, header_size, layout_hash, total_size, capacities, plan, owner_pid, group_access, owner_start_ticks, created_unix_ns, solver_state, frame_futex, ack_futex, command_futex, frame_waiters, ack_waiters, heartbeat_mono_ns, heartbeat_unix_ns, newest_seq, newest_slot, _pad0, command_submit_seq, command_mutex, _reserved);
    fields!(Capacities: max_particles, max_triangles, max_bodies, max_species, slot_count, command_records, fields, config_bytes);
    fields!(LayoutPlan: static_offset, static_size, config_offset, species_offset, particle_id_offset, particle_species_offset, particle_radius_offset, mesh_table_offset, triangles_offset, slots_offset, slot_stride, slot_bodies_offset, slot_field_offsets, commands_offset, commands_size, total_size);
    fields!(StaticHeader: generation, particle_count, triangle_count, species_count, mesh_count, config_len, config_format, world_min, world_max, cell_size, _reserved);
    fields!(SpeciesRecord: name, method, _pad, radius, density, params, _reserved);
    fields!(MeshRecord: name, first_triangle, triangle_count, _reserved);
    fields!(SlotHeader: lock_seq, frame_seq, step, sim_time, dt, wall_unix_ns, publish_mono_ns, particle_count, fields, body_count, static_generation, steps_per_s, _reserved);
    fields!(BodyTransform: rotation, translation, velocity, angular_velocity);
    fields!(CommandRecord: state, client_id, request_id, submit_seq, submit_mono_ns, ack_mono_ns, request_len, ack_len, request, ack, _reserved);
    println!("LAYOUT_HASH = {LAYOUT_HASH:#018x}");
}
