//! [`FrameSource`]: what a consumer tool needs from a run, whether it reads the segment
//! directly ([`Consumer`]) or through the network (the forwarder's client), so `viewer` and
//! `analysis` work the same with `--attach NAME` and `--connect HOST:PORT`.

use std::time::Duration;

use crate::command::{Command, CommandOutcome};
use crate::consumer::{Consumer, SolverStatus, WaitOutcome};
use crate::error::{CommandError, ReadError};
use crate::frame::Frame;
use crate::static_data::StaticData;

/// Errors of a [`FrameSource`].
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(transparent)]
    Command(#[from] CommandError),
    #[error("connection: {0}")]
    Connection(String),
}

/// A live run seen by a consumer.
pub trait FrameSource: Send {
    /// Human-readable origin (segment name or address).
    fn describe(&self) -> String;
    fn status(&mut self) -> Result<SolverStatus, SourceError>;
    fn read_static(&mut self) -> Result<StaticData, SourceError>;
    fn read_newest(&mut self) -> Result<Option<Frame>, SourceError>;
    /// The newest frame into `out`, reusing its buffers where the source can; `false` when
    /// there is no frame yet.
    fn read_newest_into(&mut self, out: &mut Frame) -> Result<bool, SourceError> {
        match self.read_newest()? {
            Some(f) => {
                *out = f;
                Ok(true)
            }
            None => Ok(false),
        }
    }
    /// [`FrameSource::read_newest_into`] of at least the fields in `fields` (a
    /// [`crate::FieldKind::bit`] mask): a source may leave the others out to copy less.
    fn read_newest_fields_into(
        &mut self,
        out: &mut Frame,
        fields: u32,
    ) -> Result<bool, SourceError> {
        let _ = fields;
        self.read_newest_into(out)
    }
    fn wait_newer(&mut self, seq: u64, timeout: Duration) -> Result<WaitOutcome, SourceError>;
    fn send(&mut self, cmd: &Command, timeout: Duration) -> Result<CommandOutcome, SourceError>;
}

impl FrameSource for Consumer {
    fn describe(&self) -> String {
        format!("segment {}", self.name())
    }
    fn status(&mut self) -> Result<SolverStatus, SourceError> {
        Ok(Consumer::status(self))
    }
    fn read_static(&mut self) -> Result<StaticData, SourceError> {
        Ok(Consumer::read_static(self)?)
    }
    fn read_newest(&mut self) -> Result<Option<Frame>, SourceError> {
        Ok(Consumer::read_newest(self)?)
    }
    fn read_newest_into(&mut self, out: &mut Frame) -> Result<bool, SourceError> {
        Ok(Consumer::read_newest_into(self, out)?)
    }
    fn read_newest_fields_into(
        &mut self,
        out: &mut Frame,
        fields: u32,
    ) -> Result<bool, SourceError> {
        Ok(Consumer::read_newest_fields_into(self, out, fields)?)
    }
    fn wait_newer(&mut self, seq: u64, timeout: Duration) -> Result<WaitOutcome, SourceError> {
        Ok(Consumer::wait_newer(self, seq, timeout))
    }
    fn send(&mut self, cmd: &Command, timeout: Duration) -> Result<CommandOutcome, SourceError> {
        Ok(Consumer::send(self, cmd, timeout)?)
    }
}
