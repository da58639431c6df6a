//! The command-line arguments that choose where a consumer reads a run from, shared by
//! `viewer` and `analysis`: a local segment (`--attach NAME`) or a forwarder (`--connect`).

/// `--attach NAME` or `--connect HOST:PORT [--token TOKEN]` (flatten into a clap parser).
#[derive(clap::Args, Debug, Clone)]
pub struct SourceArgs {
    /// Shared-memory segment of the run (the solver's --name-shm).
    #[arg(
        long,
        value_name = "NAME",
        required_unless_present = "connect",
        conflicts_with = "connect"
    )]
    pub attach: Option<String>,
    /// Read the run through a forwarder instead of the segment (`forwarder --listen`).
    #[arg(long, value_name = "HOST:PORT")]
    pub connect: Option<String>,
    /// Token for a forwarder listening beyond loopback (or set PARTICLE_SHM_TOKEN).
    #[arg(
        long,
        value_name = "TOKEN",
        env = "PARTICLE_SHM_TOKEN",
        requires = "connect"
    )]
    pub token: Option<String>,
}

/// Where to read from, once the arguments are checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceChoice {
    Segment(String),
    Forwarder { addr: String, token: Option<String> },
}

impl SourceArgs {
    /// The chosen source (clap enforces one of `--attach` / `--connect`; built by hand without
    /// either, this is the error to show).
    pub fn choice(&self) -> Result<SourceChoice, &'static str> {
        match (&self.attach, &self.connect) {
            (Some(name), _) => Ok(SourceChoice::Segment(name.clone())),
            (None, Some(addr)) => Ok(SourceChoice::Forwarder {
                addr: addr.clone(),
                token: self.token.clone(),
            }),
            (None, None) => Err("give --attach NAME or --connect HOST:PORT"),
        }
    }
}
