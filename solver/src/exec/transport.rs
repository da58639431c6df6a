//! Moving exchange messages between workers. The first implementation is in-process (CPU
//! workers in one address space: a message is moved, not copied); device copies between GPUs and
//! MPI between processes implement the same interface.

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
