//! The segment reader: a plain thread that attaches by name, waits for frames on the segment's
//! futex, copies the fields clients want and publishes them; re-attaches when the segment is
//! removed or replaced (a solver restart) and reports the solver's state all along.

use std::os::unix::fs::MetadataExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use shm_protocol::{Consumer, FieldKind, Frame, FrameView, WaitOutcome};

use super::{EncodingCache, Hub, Published, PublishedStatic};
use crate::protocol::WireStatus;

/// How often a detached forwarder tries to attach again.
const ATTACH_POLL: Duration = Duration::from_millis(250);
/// Longest wait for a frame before the loop re-checks status and the segment's identity.
const WAIT_SLICE: Duration = Duration::from_millis(100);
/// How often the segment's name is checked for a replacement object.
const IDENTITY_CHECK: Duration = Duration::from_millis(200);
/// How often static data is re-read while no frames arrive (frames name their generation).
const IDLE_STATIC_CHECK: Duration = Duration::from_secs(1);

pub fn spawn(hub: Arc<Hub>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("segment-reader".into())
        .spawn(move || run(&hub))
        .map(|_| ())
}

/// Device and inode of the object currently behind the name.
fn identity(name: &str) -> Option<(u64, u64)> {
    std::fs::metadata(shm_protocol::shm_path(name))
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

fn run(hub: &Hub) {
    let name = hub.config.segment.clone();
    let mut epoch = 0;
    let mut last_error = String::new();
    loop {
        let before = identity(&name);
        let attached = Consumer::attach(&name).map(|c| (c, identity(&name)));
        match attached {
            Ok((consumer, after)) if after.is_some() && after == before => {
                epoch += 1;
                last_error.clear();
                let st = consumer.status();
                tracing::info!(
                    segment = %name,
                    epoch,
                    owner_pid = st.owner_pid,
                    state = st.state_name(),
                    "attached"
                );
                Follower::new(hub, &consumer, epoch, after).run();
                tracing::info!(segment = %name, "segment removed or replaced; re-attaching");
            }
            Ok(_) => continue, // replaced while attaching: try again at once
            Err(e) => {
                let msg = e.to_string();
                if msg != last_error {
                    tracing::warn!(segment = %name, "not attached: {msg} (retrying every {ATTACH_POLL:?})");
                    last_error = msg.clone();
                }
                let status = WireStatus {
                    attached: false,
                    epoch,
                    message: msg,
                    ..WireStatus::default()
                };
                set_status(hub, status);
                std::thread::sleep(ATTACH_POLL);
            }
        }
    }
}

/// Publishes a status; clients are woken only when something they show changed (the newest
/// sequence and heartbeat change all the time and travel with the periodic status).
fn set_status(hub: &Hub, new: WireStatus) {
    hub.status.send_if_modified(|old| {
        let key = |s: &WireStatus| {
            (
                s.attached,
                s.epoch,
                s.solver.as_ref().map(|x| (x.state, x.alive, x.owner_pid)),
                s.static_generation,
                s.message.clone(),
            )
        };
        let significant = key(old) != key(&new);
        *old = new;
        significant
    });
}

/// Copies the wanted fields of a frame view (the caller validates the view afterwards).
fn copy_fields(v: &FrameView<'_>, wanted: u32) -> Frame {
    let want = |f: FieldKind| wanted & f.bit() != 0;
    Frame {
        meta: v.meta,
        bodies: v.bodies().to_vec(),
        positions: v
            .positions()
            .filter(|_| want(FieldKind::Position))
            .map(<[_]>::to_vec),
        velocities: v
            .velocities()
            .filter(|_| want(FieldKind::Velocity))
            .map(<[_]>::to_vec),
        angular_velocities: v
            .angular_velocities()
            .filter(|_| want(FieldKind::AngularVelocity))
            .map(<[_]>::to_vec),
        forces: v
            .forces()
            .filter(|_| want(FieldKind::Force))
            .map(<[_]>::to_vec),
        contact_counts: v
            .contact_counts()
            .filter(|_| want(FieldKind::ContactCount))
            .map(<[_]>::to_vec),
        densities: v
            .densities()
            .filter(|_| want(FieldKind::Density))
            .map(<[_]>::to_vec),
        pressures: v
            .pressures()
            .filter(|_| want(FieldKind::Pressure))
            .map(<[_]>::to_vec),
        particle_ids: v
            .particle_ids()
            .filter(|_| want(FieldKind::ParticleId))
            .map(<[_]>::to_vec),
        particle_kinds: v
            .particle_kinds()
            .filter(|_| want(FieldKind::ParticleKind))
            .map(<[_]>::to_vec),
        sample: None,
    }
}

struct Follower<'a> {
    hub: &'a Hub,
    c: &'a Consumer,
    epoch: u64,
    identity: Option<(u64, u64)>,
    last_seq: u64,
    /// Fields the newest frame had in the segment, and those copied of it.
    last_fields: u32,
    last_copied: u32,
    static_generation: u64,
    world: Option<([f64; 3], [f64; 3])>,
    message: String,
}

impl<'a> Follower<'a> {
    fn new(hub: &'a Hub, c: &'a Consumer, epoch: u64, identity: Option<(u64, u64)>) -> Self {
        Self {
            hub,
            c,
            epoch,
            identity,
            last_seq: 0,
            last_fields: 0,
            last_copied: 0,
            static_generation: 0,
            world: None,
            message: String::new(),
        }
    }

    fn run(&mut self) {
        self.refresh_static();
        self.publish_status();
        let mut last_identity_check = Instant::now();
        let mut last_static_check = Instant::now();
        loop {
            match self.c.wait_newer(self.last_seq, WAIT_SLICE) {
                WaitOutcome::Newer(_) => self.read_frame(),
                WaitOutcome::TimedOut => {}
                // The owner is gone or finished: keep the last frame, poll for a replacement.
                WaitOutcome::SolverGone => std::thread::sleep(ATTACH_POLL),
            }
            // A client wants a field the last copy skipped: copy the newest frame again (the
            // solver may be paused, so waiting for the next frame could take forever).
            if self.last_seq > 0
                && self.hub.wanted_fields() & self.last_fields & !self.last_copied != 0
            {
                self.read_frame();
            }
            if last_static_check.elapsed() >= IDLE_STATIC_CHECK {
                last_static_check = Instant::now();
                self.refresh_static();
            }
            self.publish_status();
            if last_identity_check.elapsed() >= IDENTITY_CHECK {
                last_identity_check = Instant::now();
                if identity(&self.hub.config.segment) != self.identity {
                    return;
                }
            }
        }
    }

    fn read_frame(&mut self) {
        let wanted = self.hub.wanted_fields();
        match self.c.with_newest(|v| copy_fields(v, wanted)) {
            Ok(Some(frame)) => {
                self.last_seq = frame.meta.seq;
                self.last_fields = frame.meta.fields;
                self.last_copied = wanted & frame.meta.fields;
                if frame.meta.static_generation != self.static_generation {
                    self.refresh_static();
                }
                self.hub.frame.send_replace(Some(Arc::new(Published {
                    epoch: self.epoch,
                    frame,
                    copied: self.last_copied,
                    world: self.world,
                    cache: EncodingCache::default(),
                })));
                self.message.clear();
            }
            Ok(None) => {}
            Err(e) => {
                // Contended or corrupt: say so, and do not spin on the same sequence.
                self.message = format!("reading a frame: {e}");
                self.last_seq = self.c.newest_seq();
            }
        }
    }

    fn refresh_static(&mut self) {
        match self.c.read_static() {
            Ok(data) if data.generation != self.static_generation => {
                self.static_generation = data.generation;
                self.world = Some((data.world_min, data.world_max));
                tracing::info!(
                    generation = data.generation,
                    particles = data.particle_ids.len(),
                    "static data"
                );
                self.hub
                    .statics
                    .send_replace(Some(Arc::new(PublishedStatic {
                        epoch: self.epoch,
                        data,
                        cache: EncodingCache::default(),
                    })));
            }
            Ok(_) | Err(shm_protocol::ReadError::NoStatic) => {}
            Err(e) => self.message = format!("reading static data: {e}"),
        }
    }

    fn publish_status(&self) {
        set_status(
            self.hub,
            WireStatus {
                attached: true,
                epoch: self.epoch,
                solver: Some(self.c.status()),
                static_generation: self.static_generation,
                frame_seq: self.last_seq,
                message: self.message.clone(),
            },
        );
    }
}
