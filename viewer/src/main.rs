//! `viewer`: the live 3D window onto a running simulation (issue 5).
//!
//! Will attach to a segment by name, draw particles as sphere impostors and the moving meshes,
//! and send commands back. Until then it only says so.
fn main() {
    eprintln!(
        "viewer {}: not built yet (issue 5); use `shmctl info NAME` to inspect a run",
        shm_protocol::ABI_VERSION
    );
    std::process::exit(2);
}
