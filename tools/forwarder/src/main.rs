//! `forwarder`: serves a segment's frames and commands over TCP/WebSocket (issue 7).
fn main() {
    eprintln!(
        "forwarder {}: not built yet (issue 7)",
        shm_protocol::ABI_VERSION
    );
    std::process::exit(2);
}
