//! Ranks as threads of one process: the [`Comm`] of an SPH run cut into CPU sub-domains
//! (`solver --backend cpu --subdomains N --case dambreak.toml`), so that the code written for
//! MPI ranks ([`crate::sph::ranks::SphCpuRank`]) runs in one process without MPI, step for step
//! and bit for bit as over `mpirun`.
//!
//! Every collective is one all-to-all round over a shared table guarded by a mutex: each rank
//! leaves its messages in its row, the last to arrive opens the round, each takes its column,
//! and the last to take closes it. Messages move (no copy) except where the trait hands over
//! slices. A rank that waits sleeps on a condition variable.
//!
//! MPI ends the whole job when a rank dies; threads cannot. A rank whose thread fails calls
//! [`ThreadComm::abandon`]: every rank waiting in (or entering) an operation that can no longer
//! complete then unwinds with an [`Abandoned`] payload (`resume_unwind`, so no panic message is
//! printed), which the owner of the threads turns into an error.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::comm::Comm;

/// The unwinding payload of a rank whose operation cannot complete because another rank
/// failed; the text says why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Abandoned(pub String);

/// One rank of a group of threads ([`ThreadComm::group`]).
#[derive(Debug)]
pub struct ThreadComm {
    rank: usize,
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    size: usize,
    table: Mutex<Table>,
    turn: Condvar,
}

#[derive(Debug)]
struct Table {
    /// `sent[from]`: rank `from`'s messages of the open round, by destination.
    sent: Vec<Option<Vec<Vec<u8>>>>,
    /// Ranks that left their messages in the round being filled.
    arrived: usize,
    /// Ranks that took their messages of the round being drained.
    taken: usize,
    /// Every rank has arrived: the round is being drained, and no rank may start the next.
    draining: bool,
    /// What each rank other than 0 posted to rank 0 and rank 0 has not taken yet, in order.
    posts: Vec<VecDeque<Vec<u8>>>,
    /// Why the group was abandoned ([`ThreadComm::abandon`]).
    abandoned: Option<String>,
}

impl ThreadComm {
    /// The `size` ranks of one group, rank r at index r; give each to its own thread.
    pub fn group(size: usize) -> Vec<ThreadComm> {
        assert!(size > 0, "a group has at least one rank");
        let shared = Arc::new(Shared {
            size,
            table: Mutex::new(Table {
                sent: (0..size).map(|_| None).collect(),
                arrived: 0,
                taken: 0,
                draining: false,
                posts: (0..size).map(|_| VecDeque::new()).collect(),
                abandoned: None,
            }),
            turn: Condvar::new(),
        });
        (0..size)
            .map(|rank| ThreadComm {
                rank,
                shared: shared.clone(),
            })
            .collect()
    }

    /// Marks the group failed (the first reason is kept): every rank waiting in an operation
    /// that needs another rank, and every rank that enters one, unwinds with [`Abandoned`].
    /// Operations that already completed, and posts, are unaffected.
    pub fn abandon(&self, why: String) {
        let mut t = self.lock();
        if t.abandoned.is_none() {
            t.abandoned = Some(why);
        }
        drop(t);
        self.shared.turn.notify_all();
    }

    /// Why the group was abandoned, if it was.
    pub fn abandoned(&self) -> Option<String> {
        self.lock().abandoned.clone()
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        // A rank that panicked while holding the lock left the table consistent (no operation
        // panics half-way through an update), so a poisoned lock is taken as it is.
        self.shared.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until `ready` holds; unwinds with [`Abandoned`] if the group is abandoned first.
    /// `ready` is tested before the abandonment, so that an operation whose partners all
    /// arrived completes.
    fn wait_until<'a>(
        &'a self,
        mut t: MutexGuard<'a, Table>,
        ready: impl Fn(&Table) -> bool,
    ) -> MutexGuard<'a, Table> {
        loop {
            if ready(&t) {
                return t;
            }
            if let Some(why) = t.abandoned.clone() {
                drop(t);
                std::panic::resume_unwind(Box::new(Abandoned(why)));
            }
            t = self.shared.turn.wait(t).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// The one collective: `sends[r]` goes to rank r; returns what each rank sent this one.
    fn all_to_all(&self, sends: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        let n = self.shared.size;
        assert_eq!(sends.len(), n, "one message per rank");
        // The previous round must be drained before this one fills.
        let mut t = self.wait_until(self.lock(), |t| !t.draining && t.abandoned.is_none());
        t.sent[self.rank] = Some(sends);
        t.arrived += 1;
        if t.arrived == n {
            t.arrived = 0;
            t.draining = true;
            self.shared.turn.notify_all();
        } else {
            t = self.wait_until(t, |t| t.draining);
        }
        let me = self.rank;
        let got = (0..n)
            .map(|from| match t.sent[from].as_mut() {
                Some(row) => std::mem::take(&mut row[me]),
                None => unreachable!("every rank left its row before the round opened"),
            })
            .collect();
        t.taken += 1;
        if t.taken == n {
            t.taken = 0;
            t.draining = false;
            t.sent.iter_mut().for_each(|row| *row = None);
            self.shared.turn.notify_all();
        }
        got
    }

    /// Every rank's `bytes` on every rank, by rank.
    fn everyone(&self, bytes: Vec<u8>) -> Vec<Vec<u8>> {
        let n = self.shared.size;
        let mut sends = vec![bytes.clone(); n - 1];
        sends.insert(self.rank, bytes);
        self.all_to_all(sends)
    }

    /// Rank 0's `bytes` on every rank.
    fn rank_0s(&self, bytes: Vec<u8>) -> Vec<u8> {
        let n = self.shared.size;
        let sends = if self.rank == 0 {
            vec![bytes; n]
        } else {
            vec![Vec::new(); n]
        };
        let mut got = self.all_to_all(sends);
        std::mem::take(&mut got[0])
    }

    fn words(&self, x: u64) -> impl Iterator<Item = u64> {
        self.everyone(x.to_le_bytes().to_vec())
            .into_iter()
            .map(|b| u64::from_le_bytes(word(&b)))
    }
}

/// The first eight bytes of `b`, as a rank of this group wrote them.
fn word(b: &[u8]) -> [u8; 8] {
    match b.get(..8).and_then(|w| w.try_into().ok()) {
        Some(w) => w,
        None => unreachable!("a rank of the group sent {} bytes for a word", b.len()),
    }
}

impl Comm for ThreadComm {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.shared.size
    }
    fn exchange(&self, sends: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        self.all_to_all(sends)
    }
    fn exchange_lens(&self, lens: &[usize]) -> Vec<usize> {
        let sends = lens
            .iter()
            .map(|&l| (l as u64).to_le_bytes().to_vec())
            .collect();
        self.all_to_all(sends)
            .iter()
            .map(|b| u64::from_le_bytes(word(b)) as usize)
            .collect()
    }
    fn exchange_into(
        &self,
        send: &[u8],
        send_lens: &[usize],
        recv: &mut [u8],
        recv_lens: &[usize],
    ) {
        let n = self.shared.size;
        assert_eq!(send_lens.len(), n, "one send length per rank");
        assert_eq!(recv_lens.len(), n, "one receive length per rank");
        let mut at = 0;
        let sends = send_lens
            .iter()
            .map(|&l| {
                at += l;
                send[at - l..at].to_vec()
            })
            .collect();
        let mut at = 0;
        for (from, part) in self.all_to_all(sends).into_iter().enumerate() {
            // As MPI, a receive length that is not what the sender sent is the caller's error.
            assert_eq!(
                part.len(),
                recv_lens[from],
                "rank {from} sent rank {} {} bytes, {} expected",
                self.rank,
                part.len(),
                recv_lens[from]
            );
            recv[at..at + part.len()].copy_from_slice(&part);
            at += part.len();
        }
    }
    fn gather(&self, local: Vec<u8>) -> Vec<Vec<u8>> {
        let mut sends = vec![Vec::new(); self.shared.size];
        sends[0] = local;
        let got = self.all_to_all(sends);
        if self.rank == 0 {
            got
        } else {
            Vec::new()
        }
    }
    fn all_gather(&self, local: Vec<u8>) -> Vec<Vec<u8>> {
        self.everyone(local)
    }
    fn broadcast(&self, data: &mut Vec<u8>) {
        *data = self.rank_0s(std::mem::take(data));
    }
    fn broadcast_control(&self, words: &mut [u64; 4]) {
        let bytes = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let got = self.rank_0s(bytes);
        for (k, w) in words.iter_mut().enumerate() {
            *w = u64::from_le_bytes(word(&got[8 * k..]));
        }
    }
    fn min_f64(&self, x: f64) -> f64 {
        self.words(x.to_bits())
            .map(f64::from_bits)
            .fold(f64::INFINITY, f64::min)
    }
    fn min_u64(&self, x: u64) -> u64 {
        self.words(x).fold(u64::MAX, u64::min)
    }
    fn sum_u64(&self, x: u64) -> u64 {
        self.words(x).fold(0, u64::wrapping_add)
    }
    fn post_to_root(&self, bytes: Vec<u8>) {
        assert_ne!(self.rank, 0, "rank 0 posts nothing to itself");
        self.lock().posts[self.rank].push_back(bytes);
        self.shared.turn.notify_all();
    }
    fn try_take_posted(&self, from: usize) -> Option<Vec<u8>> {
        self.lock().posts[from].pop_front()
    }
    fn take_posted(&self, from: usize) -> Vec<u8> {
        let mut t = self.wait_until(self.lock(), |t| !t.posts[from].is_empty());
        match t.posts[from].pop_front() {
            Some(b) => b,
            None => unreachable!("waited for a post"),
        }
    }
}

/// Runs `f` and returns its value, or the reason of an [`Abandoned`] unwind; any other panic
/// goes on unwinding.
pub fn catch_abandoned<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(v) => Ok(v),
        Err(payload) => match payload.downcast::<Abandoned>() {
            Ok(a) => Err(a.0),
            Err(other) => std::panic::resume_unwind(other),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread;

    /// Runs `f(comm)` on every rank of a group of `n` threads; results by rank.
    fn on_group<T: Send + 'static>(
        n: usize,
        f: impl Fn(ThreadComm) -> T + Send + Sync + 'static,
    ) -> Vec<T> {
        let f = Arc::new(f);
        let handles: Vec<_> = ThreadComm::group(n)
            .into_iter()
            .map(|c| {
                let f = f.clone();
                thread::spawn(move || f(c))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    }

    #[test]
    fn every_collective_gives_what_mpi_gives() {
        for n in 1..=4 {
            let out = on_group(n, move |c| {
                let r = c.rank();
                // Rounds back to back: a fast rank must not overtake a slow one's round.
                let mut seen = Vec::new();
                for round in 0..50u8 {
                    let sends = (0..n).map(|to| vec![r as u8, to as u8, round]).collect();
                    let got = c.exchange(sends);
                    for (from, m) in got.iter().enumerate() {
                        assert_eq!(m, &vec![from as u8, r as u8, round]);
                    }
                    seen.push(c.sum_u64(r as u64 + round as u64));
                }
                let lens: Vec<usize> = (0..n).map(|to| r + to).collect();
                let recv_lens = c.exchange_lens(&lens);
                assert_eq!(recv_lens, (0..n).map(|from| from + r).collect::<Vec<_>>());
                let send: Vec<u8> = (0..n)
                    .flat_map(|to| std::iter::repeat_n(to as u8 + 10 * r as u8, r + to))
                    .collect();
                let mut recv = vec![0u8; recv_lens.iter().sum::<usize>() + 3];
                c.exchange_into(&send, &lens, &mut recv, &recv_lens);
                let want: Vec<u8> = (0..n)
                    .flat_map(|from| std::iter::repeat_n(r as u8 + 10 * from as u8, from + r))
                    .collect();
                assert_eq!(&recv[..want.len()], &want[..]);
                let gathered = c.gather(vec![r as u8; r]);
                let all = c.all_gather(vec![r as u8]);
                let mut data = if r == 0 { vec![7, 8, 9] } else { vec![1] };
                c.broadcast(&mut data);
                let mut w = if r == 0 { [1, 2, 3, u64::MAX] } else { [0; 4] };
                c.broadcast_control(&mut w);
                let min = c.min_f64(if r == n - 1 { -0.5 } else { r as f64 });
                let minu = c.min_u64(10 + r as u64);
                (seen, gathered, all, data, w, min, minu)
            });
            for (r, (seen, gathered, all, data, w, min, minu)) in out.into_iter().enumerate() {
                let ranks: u64 = (0..n as u64).sum();
                let want: Vec<u64> = (0..50).map(|round| ranks + round * n as u64).collect();
                assert_eq!(seen, want);
                if r == 0 {
                    assert_eq!(
                        gathered,
                        (0..n).map(|k| vec![k as u8; k]).collect::<Vec<_>>()
                    );
                } else {
                    assert!(gathered.is_empty());
                }
                assert_eq!(all, (0..n).map(|k| vec![k as u8]).collect::<Vec<_>>());
                assert_eq!(data, vec![7, 8, 9]);
                assert_eq!(w, [1, 2, 3, u64::MAX]);
                assert_eq!(min, -0.5);
                assert_eq!(minu, 10);
            }
        }
    }

    #[test]
    fn posts_reach_rank_0_in_order_without_waiting() {
        let out = on_group(3, |c| {
            if c.rank() != 0 {
                for k in 0..5u8 {
                    c.post_to_root(vec![c.rank() as u8, k]);
                }
                // Posting never waits for rank 0: the barrier comes after all five.
                c.sum_u64(0);
                return Vec::new();
            }
            c.sum_u64(0);
            let mut got = Vec::new();
            for from in 1..3 {
                for k in 0..5u8 {
                    let m = if k % 2 == 0 {
                        c.take_posted(from)
                    } else {
                        c.try_take_posted(from).expect("posted before the barrier")
                    };
                    assert_eq!(m, vec![from as u8, k]);
                    got.push(m);
                }
                assert_eq!(c.try_take_posted(from), None);
            }
            got
        });
        assert_eq!(out[0].len(), 10);
    }

    #[test]
    fn an_abandoned_group_wakes_its_waiting_ranks() {
        let mut comms = ThreadComm::group(3).into_iter();
        let (c0, c1, c2) = (
            comms.next().unwrap(),
            comms.next().unwrap(),
            comms.next().unwrap(),
        );
        // Ranks 1 and 2 wait in a collective that rank 0 never enters, and rank 1 also in
        // a post that never comes.
        let h1 = thread::spawn(move || catch_abandoned(|| c1.sum_u64(1)));
        let h2 = thread::spawn(move || catch_abandoned(|| c2.sum_u64(2)));
        thread::sleep(std::time::Duration::from_millis(50));
        let waiting = thread::spawn({
            let c0 = ThreadComm {
                rank: 0,
                shared: c0.shared.clone(),
            };
            move || catch_abandoned(|| c0.take_posted(1))
        });
        thread::sleep(std::time::Duration::from_millis(20));
        c0.abandon("rank 0 failed: test".into());
        c0.abandon("a second reason is not kept".into());
        for h in [h1, h2] {
            assert_eq!(h.join().unwrap(), Err("rank 0 failed: test".to_string()));
        }
        assert_eq!(waiting.join().unwrap(), Err("rank 0 failed: test".into()));
        // Entering an operation afterwards unwinds at once.
        assert_eq!(
            catch_abandoned(|| c0.min_u64(0)),
            Err("rank 0 failed: test".into())
        );
        assert_eq!(c0.abandoned().as_deref(), Some("rank 0 failed: test"));
    }

    #[test]
    fn catch_abandoned_lets_other_panics_through() {
        let r = std::panic::catch_unwind(|| catch_abandoned(|| panic!("a bug")));
        assert!(r.is_err());
    }
}
