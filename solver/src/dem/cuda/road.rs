//! The road of records between MPI ranks' GPUs (issue 15), shared by the DEM ranks
//! (`dem::cuda::ranks`) and the SPH ranks (`sph::cuda::ranks`): device to device through NCCL
//! where its library loads and no two ranks of a host share a GPU (NCCL refuses that), else
//! through page-locked host memory and one MPI all-to-all. `PARTICLE_SHM_RANK_WIRE=host` keeps
//! the records on the host road.

use std::sync::{Arc, Mutex};

use cudarc::driver::CudaStream;

use super::CudaError;
use crate::exec::comm::{decode, encode, Comm};

/// How the records travel: NCCL, or the host road's buffers.
pub(crate) struct Road {
    nccl: Option<Nccl>,
    host: Mutex<HostRoad>,
}

impl Road {
    /// Chooses the road on every rank alike (collective: `want_nccl`, then the communicator,
    /// which every rank joins or none does), on `stream`'s GPU, `device` of this host; `step`
    /// names the step in the error of a rank that failed elsewhere.
    pub(crate) fn new(
        comm: &dyn Comm,
        device: usize,
        stream: &Arc<CudaStream>,
        step: u64,
    ) -> Result<Road, CudaError> {
        let nccl = if want_nccl(comm, device) {
            let made = Nccl::new(comm, stream);
            // Every rank joins or none: a failure anywhere fails the start everywhere.
            let ok = comm.min_u64(made.is_ok() as u64);
            let made = made?;
            if ok == 0 {
                return Err(CudaError::OtherRank { step });
            }
            Some(made)
        } else {
            None
        };
        Ok(Road {
            nccl,
            host: Mutex::default(),
        })
    }

    /// Whether the records go through NCCL.
    pub(crate) fn is_nccl(&self) -> bool {
        self.nccl.is_some()
    }

    /// Words for a log line: how the records travel.
    pub(crate) fn describe(&self) -> &'static str {
        if self.is_nccl() {
            "through NCCL, device to device"
        } else {
            "through host memory and MPI"
        }
    }

    /// Moves `parts` between this rank and its neighbours, ordered on `stream` (the compute
    /// stream, or the refresh's beside the collide): by NCCL device to device (the kernels
    /// queued after on `stream` read what arrives), or through host memory and one MPI
    /// all-to-all (the copies on `stream`, waited for).
    pub(crate) fn move_parts(
        &self,
        comm: &dyn Comm,
        stream: &Arc<CudaStream>,
        parts: &[Part],
    ) -> Result<(), CudaError> {
        match &self.nccl {
            Some(n) => parts_by_nccl(n, stream, parts),
            None => self.parts_by_host(comm, stream, parts),
        }
    }

    /// [`Road::move_parts`] through host memory: one message per neighbour, its parts
    /// one after the other, between page-locked buffers that live as long as the rank (grown,
    /// never per step): the parts are copied into the send buffer at the link's speed, the
    /// ranks exchange the buffers in one all-to-all, and the parts are copied out. Session 25
    /// measured the allocating road (a fresh vector per part, copied into the message and out
    /// of it) at 50 steps/s against 402 in one process (two ranks sharing one H200, 20 M).
    fn parts_by_host(
        &self,
        comm: &dyn Comm,
        stream: &Arc<CudaStream>,
        parts: &[Part],
    ) -> Result<(), CudaError> {
        let g = comm.size();
        let (mut send_lens, mut want) = (vec![0usize; g], vec![0usize; g]);
        for p in parts {
            send_lens[p.peer] += p.out;
            want[p.peer] += p.into;
        }
        let said = comm.exchange_lens(&send_lens);
        let mut road = self.host.lock().unwrap_or_else(|e| e.into_inner());
        let HostRoad { send, recv } = &mut *road;
        let offsets = |lens: &[usize]| -> Vec<usize> {
            lens.iter()
                .scan(0, |acc, &l| {
                    let at = *acc;
                    *acc += l;
                    Some(at)
                })
                .collect()
        };
        let send_n: usize = send_lens.iter().sum();
        let send = pinned(stream, send, send_n, "records to send")?;
        super::driver::bind(stream)?;
        let mut at = offsets(&send_lens);
        for p in parts.iter().filter(|p| p.out > 0) {
            let dst = &mut send[at[p.peer]..at[p.peer] + p.out];
            // SAFETY: `src` is a live device allocation of this rank's GPU holding at least
            // `out` bytes (a send buffer after the counts were read, written by work ordered
            // before on `stream`); `dst` is page-locked memory of this rank, read only after
            // the stream is synchronised below.
            unsafe { cudarc::driver::result::memcpy_dtoh_async(dst, p.src, stream.cu_stream()) }
                .map_err(|e| CudaError::driver("copying records to the host", e))?;
            at[p.peer] += p.out;
        }
        stream
            .synchronize()
            .map_err(|e| CudaError::driver("copying records to the host", e))?;
        // Every rank passes both collectives, so that a rank whose counts disagree (an error
        // below) cannot leave the others waiting in one of them.
        let recv_n: usize = said.iter().sum();
        let recv = pinned(stream, recv, recv_n, "records received")?;
        comm.exchange_into(&send[..send_n], &send_lens, &mut recv[..recv_n], &said);
        if let Some(peer) = (0..g).find(|&r| said[r] != want[r]) {
            return Err(CudaError::Unsupported(format!(
                "rank {peer} sent {} bytes of records, its counts say {}",
                said[peer], want[peer]
            )));
        }
        let mut at = offsets(&said);
        for p in parts.iter().filter(|p| p.into > 0) {
            let src = &recv[at[p.peer]..at[p.peer] + p.into];
            // SAFETY: `dst` is a live device allocation of this rank's GPU holding at least `into`
            // bytes (make_room or ensure_refresh_room grew it); `src` is page-locked memory
            // of this rank, not written again before the stream is synchronised below.
            unsafe { cudarc::driver::result::memcpy_htod_async(p.dst, src, stream.cu_stream()) }
                .map_err(|e| CudaError::driver("copying records to the GPU", e))?;
            at[p.peer] += p.into;
        }
        stream
            .synchronize()
            .map_err(|e| CudaError::driver("copying records to the GPU", e))
    }
}

/// [`Road::move_parts`] device to device through NCCL, on `stream`.
fn parts_by_nccl(nccl: &Nccl, stream: &Arc<CudaStream>, parts: &[Part]) -> Result<(), CudaError> {
    use cudarc::nccl::{result, sys};
    let fail = |e: result::NcclError| {
        CudaError::Unsupported(format!("NCCL between ranks: moving the records: {e:?}"))
    };
    super::driver::bind(stream)?;
    let stream = stream.cu_stream() as sys::cudaStream_t;
    result::group_start().map_err(fail)?;
    for p in parts {
        // Each side's sizes come from counts both ranks hold (DEM: all-gathered, or lists
        // checked equal at the search; SPH: told with exchange_lens): each send meets a
        // receive of its size (none when 0).
        if p.out > 0 {
            // SAFETY: `src` holds `out` bytes (the counts fit the send buffer; the kernel
            // that wrote it is ordered before this stream's send: queued on it, or waited for
            // by an event); it is written again only by work ordered after this send.
            unsafe {
                result::send(
                    p.src as *const std::ffi::c_void,
                    p.out,
                    sys::ncclDataType_t::ncclUint8,
                    p.peer as std::ffi::c_int,
                    nccl.0,
                    stream,
                )
            }
            .map_err(fail)?;
        }
        if p.into > 0 {
            // SAFETY: `dst` holds `into` bytes (the caller grew it: make_room,
            // ensure_refresh_room); what reads it is ordered after this receive.
            unsafe {
                result::recv(
                    p.dst as *mut std::ffi::c_void,
                    p.into,
                    sys::ncclDataType_t::ncclUint8,
                    p.peer as std::ffi::c_int,
                    nccl.0,
                    stream,
                )
            }
            .map_err(fail)?;
        }
    }
    result::group_end().map_err(fail)?;
    Ok(())
}

/// An NCCL communicator over the ranks' GPUs (issue 15: records device to device between
/// processes), bootstrapped through MPI: rank 0's unique id is broadcast.
struct Nccl(cudarc::nccl::sys::ncclComm_t);

// SAFETY: an NCCL communicator may be used from any one thread at a time; the rank that owns
// it is driven by one thread.
unsafe impl Send for Nccl {}

impl Drop for Nccl {
    fn drop(&mut self) {
        // SAFETY: a communicator made by comm_init_rank, destroyed once, after the streams that
        // used it were synchronised (the ranks' drops synchronise them before their fields go).
        let _ = unsafe { cudarc::nccl::result::comm_destroy(self.0) };
    }
}

/// Whether records should go through NCCL: `PARTICLE_SHM_RANK_WIRE` (`nccl`, `host`; default:
/// NCCL where its library loads and no two ranks of a host share a GPU, which NCCL refuses).
/// Collective: every rank gets the same answer.
fn want_nccl(comm: &dyn Comm, device: usize) -> bool {
    let asked = std::env::var("PARTICLE_SHM_RANK_WIRE").unwrap_or_default();
    // SAFETY: a dlopen probe of libnccl; nothing is called.
    let present = unsafe { cudarc::nccl::sys::is_culib_present() };
    let mine = (crate::exec::comm::hostname(), device);
    let all: Vec<(String, usize)> = comm
        .all_gather(encode(&mine))
        .iter()
        .map(|b| decode(b, "rank devices"))
        .collect();
    let local = nccl_usable(&all, &asked, present);
    comm.min_u64(local as u64) == 1
}

/// Whether this rank can take the NCCL road: not asked for the host one, the library loads,
/// and no two ranks run on the same (host, GPU).
fn nccl_usable(ranks: &[(String, usize)], asked: &str, present: bool) -> bool {
    let mut seen = ranks.to_vec();
    seen.sort();
    seen.dedup();
    asked != "host" && present && seen.len() == ranks.len()
}

impl Nccl {
    /// Collective over the ranks of `comm`, on `stream`'s GPU.
    fn new(comm: &dyn Comm, stream: &Arc<CudaStream>) -> Result<Nccl, CudaError> {
        let nccl_err = |what: &str, e: cudarc::nccl::result::NcclError| {
            CudaError::Unsupported(format!("NCCL between ranks: {what}: {e:?}"))
        };
        // Rank 0 broadcasts its id, or nothing when it has none: the others must not wait.
        let mut id = Vec::new();
        let mut made = Ok(());
        if comm.rank() == 0 {
            match cudarc::nccl::result::get_uniqueid() {
                Ok(u) => id = u.internal.iter().map(|&c| c as u8).collect(),
                Err(e) => made = Err(nccl_err("making the unique id", e)),
            }
        }
        comm.broadcast(&mut id);
        made?;
        if id.len() != 128 {
            return Err(CudaError::OtherRank { step: 0 });
        }
        let mut internal = [0 as std::ffi::c_char; 128];
        for (c, b) in internal.iter_mut().zip(&id) {
            *c = *b as std::ffi::c_char;
        }
        let uid = cudarc::nccl::sys::ncclUniqueId { internal };
        super::driver::bind(stream)?;
        let mut c: cudarc::nccl::sys::ncclComm_t = std::ptr::null_mut();
        // SAFETY: `c` is written by the call; every rank calls it with the same id and its own
        // rank, its GPU's context current.
        unsafe {
            cudarc::nccl::result::comm_init_rank(
                &mut c,
                comm.size() as std::ffi::c_int,
                uid,
                comm.rank() as std::ffi::c_int,
            )
        }
        .map_err(|e| nccl_err("joining the communicator", e))?;
        Ok(Nccl(c))
    }
}

/// The page-locked buffers of the records' host road ([`Road::move_parts`] without NCCL).
#[derive(Default)]
struct HostRoad {
    send: Option<cudarc::driver::PinnedHostSlice<u8>>,
    recv: Option<cudarc::driver::PinnedHostSlice<u8>>,
}

/// The first `bytes` of `slot`'s page-locked buffer, which grows (with a quarter to spare)
/// where it is shorter.
fn pinned<'a>(
    stream: &Arc<CudaStream>,
    slot: &'a mut Option<cudarc::driver::PinnedHostSlice<u8>>,
    bytes: usize,
    what: &str,
) -> Result<&'a mut [u8], CudaError> {
    if slot.as_ref().is_none_or(|s| s.len() < bytes) {
        *slot = None;
        let len = (bytes + bytes / 4).max(1 << 16);
        // SAFETY: the bytes are written (a device-to-host copy, or MPI) before anything reads
        // them; flags 0 (not write-combined, which the host reads slowly).
        *slot = Some(
            unsafe { stream.context().alloc_pinned_with_flags::<u8>(len, 0) }.map_err(|e| {
                CudaError::driver(&format!("allocating page-locked memory for the {what}"), e)
            })?,
        );
    }
    let buf = slot
        .as_mut()
        .expect("allocated above")
        .as_mut_slice()
        .map_err(|e| CudaError::driver(&format!("waiting for the {what}"), e))?;
    Ok(&mut buf[..bytes])
}

/// One buffer to a neighbour rank and one from it: `out` bytes at `src` go to `peer`, `into`
/// bytes from it land at `dst` (device addresses of this rank's GPU).
pub(crate) struct Part {
    pub peer: usize,
    pub src: u64,
    pub out: usize,
    pub dst: u64,
    pub into: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NCCL only with a GPU per rank, its library, and not when the host road is asked for.
    #[test]
    fn the_nccl_road_needs_a_gpu_per_rank() {
        let gpus = |v: &[(&str, usize)]| -> Vec<(String, usize)> {
            v.iter().map(|&(h, d)| (h.to_string(), d)).collect()
        };
        let two = gpus(&[("a", 0), ("a", 1)]);
        assert!(nccl_usable(&two, "", true));
        assert!(nccl_usable(&two, "nccl", true));
        assert!(!nccl_usable(&two, "host", true));
        assert!(!nccl_usable(&two, "", false));
        assert!(!nccl_usable(&gpus(&[("a", 0), ("a", 0)]), "", true));
        assert!(nccl_usable(&gpus(&[("a", 0), ("b", 0)]), "", true));
    }
}
