//! Moving exchange messages between workers. [`InProcess`]: CPU workers in one address space (a
//! message is moved, not copied). [`Ranks`]: workers of several processes (MPI ranks), each
//! driving a contiguous block of the workers; messages between ranks are encoded and go through
//! one all-to-all per delivery. Device copies between GPUs will implement the same interface.

use super::comm::{decode, encode, Comm};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::ops::Range;
use std::sync::Arc;

/// Delivers messages between workers.
pub trait Transport<M>: Send {
    /// `outboxes[w]` holds worker `w`'s messages as (destination, message). Returns each worker's
    /// inbox, ordered by sender and, per sender, by send order (so delivery is deterministic).
    fn deliver(&mut self, outboxes: Vec<Vec<(usize, M)>>) -> Vec<Vec<M>>;
}

/// Workers of one process.
#[derive(Debug, Default, Clone, Copy)]
pub struct InProcess;

impl<M: Send> Transport<M> for InProcess {
    fn deliver(&mut self, outboxes: Vec<Vec<(usize, M)>>) -> Vec<Vec<M>> {
        let n = outboxes.len();
        let mut inboxes: Vec<Vec<M>> = (0..n).map(|_| Vec::new()).collect();
        for out in outboxes {
            for (to, m) in out {
                assert!(to < n, "message to worker {to} of {n}");
                inboxes[to].push(m);
            }
        }
        inboxes
    }
}

/// Workers spread over the ranks of `comm`: rank r drives global workers `blocks[r]`; the
/// outboxes and inboxes of [`Transport::deliver`] are this rank's workers', destinations are
/// global worker indices. Every rank must deliver at the same time (a collective operation).
#[derive(Debug)]
pub struct Ranks {
    comm: Arc<dyn Comm>,
    blocks: Vec<Range<usize>>,
}

impl Ranks {
    pub fn new(comm: Arc<dyn Comm>, blocks: Vec<Range<usize>>) -> Ranks {
        assert_eq!(blocks.len(), comm.size(), "one worker block per rank");
        Ranks { comm, blocks }
    }

    fn rank_of(&self, worker: usize) -> usize {
        self.blocks
            .iter()
            .position(|b| b.contains(&worker))
            .unwrap_or_else(|| panic!("message to worker {worker}, which no rank drives"))
    }
}

impl<M: Send + Serialize + DeserializeOwned> Transport<M> for Ranks {
    fn deliver(&mut self, outboxes: Vec<Vec<(usize, M)>>) -> Vec<Vec<M>> {
        let me = self.comm.rank();
        let local = self.blocks[me].clone();
        assert_eq!(outboxes.len(), local.len(), "one outbox per local worker");
        // (destination worker, message) per destination rank, in sender order.
        let mut per_rank: Vec<Vec<(usize, M)>> =
            (0..self.blocks.len()).map(|_| Vec::new()).collect();
        for out in outboxes {
            for (to, m) in out {
                per_rank[self.rank_of(to)].push((to, m));
            }
        }
        let own = std::mem::take(&mut per_rank[me]);
        let sends: Vec<Vec<u8>> = per_rank
            .iter()
            .enumerate()
            .map(|(r, v)| if r == me { Vec::new() } else { encode(v) })
            .collect();
        // Lengths first, then one buffer each way (the GPU ranks' host road does the same
        // with page-locked buffers).
        let lens: Vec<usize> = sends.iter().map(Vec::len).collect();
        let said = self.comm.exchange_lens(&lens);
        let mut received = vec![0u8; said.iter().sum()];
        self.comm
            .exchange_into(&sends.concat(), &lens, &mut received, &said);
        let mut own = Some(own);
        let mut inboxes: Vec<Vec<M>> = local.clone().map(|_| Vec::new()).collect();
        // Ranks hold ascending blocks of workers, so rank order is sender order.
        let mut at = 0;
        for (r, &n) in said.iter().enumerate() {
            let bytes = &received[at..at + n];
            at += n;
            let msgs: Vec<(usize, M)> = if r == me {
                own.take().unwrap_or_default()
            } else {
                decode(bytes, "exchange messages")
            };
            for (to, m) in msgs {
                assert!(
                    local.contains(&to),
                    "rank {me} got a message for worker {to}"
                );
                inboxes[to - local.start].push(m);
            }
        }
        inboxes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_process_delivers_in_sender_order() {
        let out = vec![vec![(1, "a"), (2, "b")], vec![(2, "c")], vec![(1, "d")]];
        let inbox = InProcess.deliver(out);
        assert_eq!(inbox, vec![vec![], vec!["a", "d"], vec!["b", "c"]]);
    }
}
