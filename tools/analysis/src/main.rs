//! `analysis`: live metrics (energies, speeds, coordination, mixing) on a running segment (issue 6).
fn main() {
    eprintln!(
        "analysis {}: not built yet (issue 6); use `shmctl info NAME --json` meanwhile",
        shm_protocol::ABI_VERSION
    );
    std::process::exit(2);
}
