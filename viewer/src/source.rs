//! Getting frames: opening a [`FrameSource`] with clear errors, waiting for the first frame
//! (snapshots), and the background [`Feed`] thread the window reads from.
//!
//! Everything goes through `Box<dyn FrameSource>` made by an [`Opener`], so a network source
//! (`--connect HOST:PORT`, the forwarder's client) drops in without touching the renderers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use shm_protocol::{
    AttachError, Command, CommandOutcome, Consumer, Frame, FrameSource, SolverStatus, StaticData,
    WaitOutcome,
};

/// Why a source could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct OpenError {
    pub message: String,
    /// Worth retrying (the run may not have started yet).
    pub retryable: bool,
}

/// Makes a fresh source each time it is called (first attach and re-attach).
pub type Opener = Arc<dyn Fn() -> Result<Box<dyn FrameSource>, OpenError> + Send + Sync>;

/// An opener for a shared-memory segment.
pub fn attach_opener(name: String) -> Opener {
    Arc::new(move || match Consumer::attach(&name) {
        Ok(c) => Ok(Box::new(c) as Box<dyn FrameSource>),
        Err(e) => Err(OpenError {
            retryable: matches!(
                e,
                AttachError::NotFound { .. } | AttachError::NotInitialised
            ),
            message: match e {
                // These messages already name the segment.
                AttachError::NotFound { .. } | AttachError::InvalidName { .. } => e.to_string(),
                AttachError::PermissionDenied { .. } | AttachError::NotAnObject { .. } => {
                    e.to_string()
                }
                _ => format!("cannot attach to segment {name:?}: {e}"),
            },
        }),
    })
}

/// An opener for a run served by a forwarder (`--connect HOST:PORT`): every field the viewer
/// can colour by, at full precision, the particle ids of runs whose particle set changes
/// (species and radii are looked up by them) and the particle kinds of SPH runs (boundary
/// particles are hidden or dimmed by them). At most `max_particles` per frame (0: all) cross
/// the network: the forwarder sends every k-th particle of a larger frame (`Frame::sample`).
pub fn connect_opener(addr: String, token: Option<String>, max_particles: u64) -> Opener {
    use shm_protocol::FieldKind;
    let fields = shm_protocol::DEFAULT_FIELDS
        | FieldKind::ContactCount.bit()
        | FieldKind::Density.bit()
        | FieldKind::Pressure.bit()
        | FieldKind::ParticleId.bit()
        | FieldKind::ParticleKind.bit();
    Arc::new(move || {
        match forwarder::RemoteSource::connect_with(
            &addr,
            connect_options(token.clone(), fields, max_particles),
        ) {
            Ok(c) => Ok(Box::new(c) as Box<dyn FrameSource>),
            Err(e) => Err(OpenError {
                retryable: matches!(e, forwarder::client::ConnectError::Connect { .. }),
                message: e.to_string(),
            }),
        }
    })
}

/// What the viewer asks a forwarder for.
fn connect_options(
    token: Option<String>,
    fields: u32,
    max_particles: u64,
) -> forwarder::ConnectOptions {
    forwarder::ConnectOptions {
        token,
        subscription: forwarder::Subscription {
            fields,
            max_particles,
            ..forwarder::Subscription::default()
        },
        client_name: "viewer".into(),
        ..forwarder::ConnectOptions::default()
    }
}

/// One consistent picture of the run: a frame with the static data it belongs to.
#[derive(Clone)]
pub struct Latest {
    pub statics: Arc<StaticData>,
    pub frame: Arc<Frame>,
    pub status: SolverStatus,
}

/// Reads the newest frame and, if its static generation changed, the static data.
pub fn read_latest(
    src: &mut dyn FrameSource,
    statics: &mut Option<Arc<StaticData>>,
) -> Result<Option<Latest>, String> {
    let status = src.status().map_err(|e| e.to_string())?;
    let Some(frame) = src.read_newest().map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    let stale = statics
        .as_ref()
        .is_none_or(|s| s.generation != frame.meta.static_generation);
    if stale {
        match src.read_static() {
            Ok(s) => *statics = Some(Arc::new(s)),
            Err(shm_protocol::SourceError::Read(shm_protocol::ReadError::NoStatic)) => {
                *statics = Some(Arc::new(StaticData::default()));
            }
            Err(e) => return Err(e.to_string()),
        }
    }
    let statics = statics.clone().unwrap_or_default();
    // Re-read and still different: the frame describes other particles than the static data.
    statics
        .check_frame(&frame.meta)
        .map_err(|e| e.to_string())?;
    Ok(Some(Latest {
        statics,
        frame: Arc::new(frame),
        status,
    }))
}

/// Opens a source and waits up to `wait` for it to exist and publish its first frame.
pub fn wait_first(
    opener: &Opener,
    wait: Duration,
) -> Result<(Box<dyn FrameSource>, Latest), String> {
    let deadline = Instant::now() + wait;
    let mut src = loop {
        match opener() {
            Ok(s) => break s,
            Err(e) if e.retryable && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) if e.retryable && !wait.is_zero() => {
                return Err(format!(
                    "{} (waited {:.1} s)",
                    e.message,
                    wait.as_secs_f64()
                ))
            }
            Err(e) => return Err(e.message),
        }
    };
    let mut statics = None;
    loop {
        if let Some(latest) = read_latest(src.as_mut(), &mut statics)? {
            return Ok((src, latest));
        }
        let status = src.status().map_err(|e| e.to_string())?;
        if status.is_over() {
            return Err(format!(
                "{}: the solver (pid {}) is {} and never published a frame",
                src.describe(),
                status.owner_pid,
                if status.alive {
                    status.state_name()
                } else {
                    "gone"
                }
            ));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!(
                "{}: no frame published within {:.1} s (solver {})",
                src.describe(),
                wait.as_secs_f64(),
                status.state_name()
            ));
        }
        let _ = src.wait_newer(0, left.min(Duration::from_millis(200)));
    }
}

/// What the window shows about the connection, updated by the feed thread.
#[derive(Default)]
pub struct FeedState {
    pub describe: String,
    pub latest: Option<Latest>,
    /// Bumped whenever `latest` changes.
    pub version: u64,
    pub status: Option<SolverStatus>,
    /// Why nothing (new) can be shown, if so.
    pub error: Option<String>,
    /// Command outcomes, newest last.
    pub acks: Vec<String>,
    /// Times the feed switched to a newly created segment of the same name.
    pub reattached: u32,
}

/// The background reader: attaches, follows new frames, re-attaches to a re-created segment,
/// and sends commands. The solver never waits for it (the protocol's readers are lock-free).
pub struct Feed {
    shared: Arc<Mutex<FeedState>>,
    commands: Sender<Command>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// How long the window waits for a command's acknowledgement.
pub const ACK_TIMEOUT: Duration = Duration::from_secs(3);

impl Feed {
    /// Starts the thread; `wake` is called after every change (to repaint the window).
    pub fn start(opener: Opener, wake: Box<dyn Fn() + Send>) -> Feed {
        let shared = Arc::new(Mutex::new(FeedState::default()));
        let (tx, rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let worker = Worker {
            opener,
            shared: shared.clone(),
            commands: rx,
            stop: stop.clone(),
            wake,
        };
        let thread = std::thread::Builder::new()
            .name("frame-feed".into())
            .spawn(move || worker.run())
            .ok();
        Feed {
            shared,
            commands: tx,
            stop,
            thread,
        }
    }

    pub fn state(&self) -> MutexGuard<'_, FeedState> {
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn send(&self, cmd: Command) {
        let _ = self.commands.send(cmd);
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Worker {
    opener: Opener,
    shared: Arc<Mutex<FeedState>>,
    commands: Receiver<Command>,
    stop: Arc<AtomicBool>,
    wake: Box<dyn Fn() + Send>,
}

/// The identity of one run behind a name (a re-created segment differs).
fn identity(s: &SolverStatus) -> (u64, u32) {
    (s.created_unix_ns, s.owner_pid)
}

impl Worker {
    fn update(&self, f: impl FnOnce(&mut FeedState)) {
        let mut st = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        let before = st.error.clone();
        f(&mut st);
        // Each new problem is also reported once on stderr (the window shows it too).
        if let Some(e) = st.error.as_ref().filter(|e| before.as_ref() != Some(*e)) {
            eprintln!("viewer: {e}");
        }
        drop(st);
        (self.wake)();
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn run(self) {
        while !self.stopped() {
            let src = match (self.opener)() {
                Ok(s) => s,
                Err(e) => {
                    self.update(|st| st.error = Some(e.message.clone()));
                    self.sleep(Duration::from_millis(if e.retryable { 300 } else { 1000 }));
                    continue;
                }
            };
            self.follow(src);
        }
    }

    fn sleep(&self, d: Duration) {
        let end = Instant::now() + d;
        while !self.stopped() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Follows one source until it is replaced by a newer run of the same name (or stop).
    fn follow(&self, mut src: Box<dyn FrameSource>) {
        let describe = src.describe();
        self.update(|st| {
            st.describe = describe.clone();
            st.error = None;
        });
        let mut statics: Option<Arc<StaticData>> = None;
        let mut seen = 0u64;
        let mut ident = None;
        let mut last_probe = Instant::now();
        while !self.stopped() {
            self.handle_commands(src.as_mut());
            let status = match src.status() {
                Ok(s) => s,
                Err(e) => {
                    self.update(|st| st.error = Some(e.to_string()));
                    return;
                }
            };
            let id = *ident.get_or_insert(identity(&status));
            if status.newest_seq != seen {
                match read_latest(src.as_mut(), &mut statics) {
                    Ok(Some(latest)) => {
                        seen = latest.frame.meta.seq;
                        self.update(|st| {
                            st.latest = Some(latest);
                            st.version += 1;
                            st.status = Some(status.clone());
                            st.error = None;
                        });
                    }
                    Ok(None) => seen = 0,
                    Err(e) => self.update(|st| st.error = Some(e)),
                }
            } else {
                self.update(|st| st.status = Some(status.clone()));
            }
            if status.is_over() {
                // Keep the last frame; look for a new run created under the same name.
                if last_probe.elapsed() >= Duration::from_millis(500) {
                    last_probe = Instant::now();
                    if let Some(newer) = self.probe_new_run(id) {
                        eprintln!(
                            "viewer: a new run took over {}; re-attached",
                            newer.describe()
                        );
                        self.update(|st| st.reattached += 1);
                        src = newer;
                        statics = None;
                        seen = 0;
                        ident = None;
                        continue;
                    }
                }
                self.sleep(Duration::from_millis(100));
                continue;
            }
            match src.wait_newer(seen, Duration::from_millis(100)) {
                Ok(WaitOutcome::SolverGone) => self.sleep(Duration::from_millis(50)),
                Ok(_) => {}
                Err(e) => self.update(|st| st.error = Some(e.to_string())),
            }
        }
    }

    /// A source for a different (newer) run behind the same name, if one exists now.
    fn probe_new_run(&self, current: (u64, u32)) -> Option<Box<dyn FrameSource>> {
        let mut fresh = (self.opener)().ok()?;
        let status = fresh.status().ok()?;
        (identity(&status) != current).then_some(fresh)
    }

    fn handle_commands(&self, src: &mut dyn FrameSource) {
        loop {
            let cmd = match self.commands.try_recv() {
                Ok(c) => c,
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => return,
            };
            let text = match src.send(&cmd, ACK_TIMEOUT) {
                Ok(CommandOutcome::Done(m)) => format!("{cmd:?}: done {m}"),
                Ok(CommandOutcome::Rejected(m)) => format!("{cmd:?}: rejected: {m}"),
                Err(e) => format!("{cmd:?}: failed: {e}"),
            };
            self.update(|st| {
                st.acks.push(text);
                let excess = st.acks.len().saturating_sub(20);
                st.acks.drain(..excess);
            });
        }
    }
}

#[cfg(test)]
mod connect_tests {
    /// The limit reaches the forwarder's subscription (0: every particle).
    #[test]
    fn the_particle_limit_goes_into_the_subscription() {
        let o = super::connect_options(Some("t".into()), 0b11, 2_000_000);
        assert_eq!(
            (o.subscription.max_particles, o.subscription.fields),
            (2_000_000, 0b11)
        );
        assert_eq!(o.token.as_deref(), Some("t"));
        assert_eq!(
            super::connect_options(None, 1, 0)
                .subscription
                .max_particles,
            0
        );
    }
}
