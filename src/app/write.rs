//! The write path of the registry: requireBuffer → sendShuffleData, commitShuffleTask,
//! finishShuffle (SEMANTICS §3 and §7).

use crate::app::AppRegistry;
use crate::error::{Error, Result};
use crate::ids::{AppId, PartitionKey};
use crate::memory::Claim;
use crate::store::memory::PartitionBuffer;
use crate::store::{Block, Payloads, PurgeScope};

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Longest a `requireBuffer` holding the budget's claim waits for the spill it caused, when
/// `memory_store.require_buffer_wait` is shorter (and not 0). Far below the client's 60 s RPC
/// deadline; a disk that takes longer is failing, and `NO_BUFFER` is then the right answer.
pub const SPILL_WAIT: Duration = Duration::from_secs(5);

/// A successful `requireBuffer`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequireOutcome {
    /// The ticket id (≥ 1).
    pub ticket_id: i64,
    /// Partitions past `hybrid_store.huge_partition_split_limit`, in request order: a 0.10
    /// client keeps the blocks it sends under this ticket here and has the driver reassign
    /// the partition's later blocks to another server. Empty without a limit, and for
    /// requests without per-partition sizes (clients before 0.10 could not act on it).
    pub need_split: Vec<i32>,
}

/// The ticket a `sendShuffleData` took, as Java's Netty handler audits it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TicketSeen {
    /// The ticket's reservation in bytes, once found (Java's `requireSize`); `None` when no
    /// ticket was taken (missing, expired, or the request failed before it was looked up).
    pub require_size: Option<u64>,
}

/// One `requireBuffer` as the registry takes it, from either plane.
#[derive(Clone, Copy, Debug)]
pub struct Require<'a> {
    /// `None` for legacy clients that send no app id (no checks, as Java).
    pub app: Option<&'a AppId>,
    /// Shuffle id.
    pub shuffle: i32,
    /// The partitions the bytes are for (huge-partition checks).
    pub partitions: &'a [i32],
    /// Their sizes, when the client sends them (0.10), else empty.
    pub partition_sizes: &'a [i32],
    /// `requireSize`: the bytes to reserve.
    pub size: i32,
}

impl AppRegistry {
    /// `requireBuffer`: checks huge-partition limits, then reserves `size` bytes under a
    /// ticket.
    pub fn require_buffer(&self, req: Require<'_>) -> Result<RequireOutcome> {
        let result = self.reserve(req, None);
        self.stats().require_outcome(&result);
        result
    }

    fn reserve(&self, req: Require<'_>, claim: Option<&Claim>) -> Result<RequireOutcome> {
        let Require {
            app,
            shuffle,
            partitions,
            partition_sizes,
            size,
        } = req;
        let verified = app
            .map(|id| self.verify_and_touch(id).map(|a| (id, a)))
            .transpose()?;
        if let Some(id) = app {
            self.writes_admitted(id)?;
        }
        if size < 0 {
            return Err(Error::bad_request(format!(
                "requireSize {size} is negative"
            )));
        }
        let size = size as u64;
        if size > self.store().memory().budget().capacity() {
            return Err(Error::bad_request(format!(
                "requireSize {size} is larger than the whole buffer capacity {}",
                self.store().memory().budget().capacity()
            )));
        }
        let mut need_split = Vec::new();
        if let Some((app_id, app)) = &verified {
            // Per-partition sizes are only meaningful when the lists line up (0.10 clients).
            let sizes = (partition_sizes.len() == partitions.len()).then_some(partition_sizes);
            if let Some(shuffle) = app.shuffle(shuffle) {
                for (i, &p) in partitions.iter().enumerate() {
                    let key = shuffle.registered_key(app_id, p)?;
                    let extra = sizes.map_or(0, |s| s[i].max(0) as u64);
                    let buffer = self.store().memory().get(&key);
                    if let Some(buffer) = &buffer {
                        self.check_huge(buffer, extra)?;
                    }
                    // Java checks the split limit last, so a partition refused above is never
                    // also listed; the ticket is still granted in full.
                    if sizes.is_some() {
                        let used = buffer.as_ref().map_or(0, |b| b.encoded_bytes()) + extra;
                        if self.past_split_limit(used) {
                            tracing::info!(
                                app_id = %app_id,
                                shuffle_id = shuffle.id(),
                                partition_id = p,
                                used,
                                "partition past the split limit: listed in needSplitPartitionIds"
                            );
                            need_split.push(p);
                        }
                    }
                }
            } else if !partitions.is_empty() {
                return Err(Error::NotRegistered {
                    app_id: app_id.to_string(),
                    shuffle_id: shuffle,
                    what: format!("shuffle {shuffle}"),
                });
            }
        }
        let tenant = verified.as_ref().map(|(_, app)| app.memory());
        let reservation = self
            .store()
            .memory()
            .budget()
            .reserve_for(size, tenant, claim)?;
        let ticket_id = self.tickets().issue(app.cloned(), reservation);
        Ok(RequireOutcome {
            ticket_id,
            need_split,
        })
    }

    /// Java's `used > rss.server.huge-partition.split.limit`, where `used` is the partition's
    /// encoded size so far plus the size this request asks for it. The hint is not remembered:
    /// it is recomputed on every request, and `sendShuffleData` does not look at it.
    /// (Read from `ShuffleTaskManager.requireBufferReturnPair` and `ShuffleServerConf` at
    /// post-0.10 commits of apache/uniffle, which match 0.10's protocol notes, SEMANTICS §3.1
    /// step 4c; the `HugePartitionUtils` versions at hand predate the split helper.)
    fn past_split_limit(&self, used: u64) -> bool {
        self.huge_partition_split_limit()
            .is_some_and(|limit| used > limit)
    }

    /// [`AppRegistry::require_buffer`], but a `NO_BUFFER` for want of memory (not a huge
    /// partition's) is answered only after memory stayed full for
    /// `memory_store.require_buffer_wait`: the attempt is repeated when memory is released
    /// (waiters take turns, see `MemoryBudget::pass_on`) until then.
    ///
    /// Without it, thousands of writers over a full budget each sleep a client back-off
    /// between attempts, and memory freed by a spill sits unused until one wakes: measured
    /// with the load generator, 2,000 writers over 64 MiB moved half of what 8 writers did.
    ///
    /// A refused attempt makes the server spill for it (`MemoryBudget::next_spill`), and the
    /// oldest waiter holds the budget's claim, so the room that spill makes is kept for it.
    /// While it holds the claim and bytes are on their way out, it waits for them up to
    /// [`SPILL_WAIT`] instead of answering at `require_buffer_wait`: a client back-off after
    /// `NO_BUFFER` is 2 s or more, and the spill it caused is usually done in less.
    ///
    /// Waiters are in line by app: a request of an app refused earlier and not served since
    /// ranks from that refusal (`Claim::rank_by`), so an app whose client backs off after
    /// `NO_BUFFER` keeps its place instead of queueing behind every request that arrived
    /// while it slept (measured: 2,000 apps over 64 MiB, `curves backpressure`).
    pub async fn require_buffer_waiting(&self, req: Require<'_>) -> Result<RequireOutcome> {
        let budget = self.store().memory().budget().clone();
        let wait = self.opts.require_buffer_wait;
        let start = tokio::time::Instant::now();
        let deadline = start + wait;
        // `0s` means "answer at once, as Java does": then there is no waiting for a spill either.
        let spill_deadline = if wait.is_zero() {
            deadline
        } else {
            start + wait.max(SPILL_WAIT)
        };
        let claim = budget.claim();
        let waiting_app = req.app.and_then(|id| self.verify(id).ok());
        if let Some(a) = &waiting_app {
            let since = a.refused_since();
            if since != 0 {
                claim.rank_by(since);
            }
        }
        loop {
            let freed = budget.freed();
            let for_claimant = budget.freed_for_claimant();
            tokio::pin!(freed, for_claimant);
            freed.as_mut().enable();
            // The claimant's wake-up is armed only once a refusal may have made this request
            // the claimant: a request granted at once (the common case) pays for one waiter.
            let armed = claim.may_be_held();
            if armed {
                for_claimant.as_mut().enable();
            }
            // `reserve`, not `require_buffer`: the refusal metrics count answers, not attempts.
            let result = self.reserve(req, Some(&claim));
            if let Err(Error::NoBuffer { .. }) = result {
                if let Some(a) = &waiting_app {
                    a.note_refused(claim.id());
                }
                let held = claim.is_held();
                if held && !armed {
                    // This refusal made it the claimant: try once more with its wake-up armed,
                    // so no release between here and the wait is missed.
                    continue;
                }
                let until = if held && budget.snapshot().spill_under_way() {
                    spill_deadline
                } else {
                    deadline
                };
                if tokio::time::Instant::now() < until {
                    // Woken by a release, or at the deadline (then one more attempt). Only the
                    // claimant can use the claimed bytes, so it hears every release.
                    let woken = async {
                        if held {
                            tokio::select! {
                                _ = freed => {}
                                _ = for_claimant => {}
                            }
                        } else {
                            freed.await
                        }
                    };
                    let _ = tokio::time::timeout_at(until, woken).await;
                    continue;
                }
            }
            if result.is_ok() {
                if let Some(a) = &waiting_app {
                    a.note_served(claim.rank());
                }
                // The release that woke us may have room for the next waiter too.
                budget.pass_on();
            }
            self.stats().require_outcome(&result);
            return result;
        }
    }

    /// The memory limit of a huge partition first, then the hard limit, as Java's
    /// `requireBufferReturnPair` orders them: a partition past both is told to wait
    /// (`NO_BUFFER_FOR_HUGE_PARTITION`, retried) rather than to fail the task.
    ///
    /// Told to wait, the partition is also spilled: it can pass the limit in the send that
    /// made it huge (spilled at insert only once it is huge), and below the watermarks
    /// nothing else would ever bring it back under, so every retry would be refused.
    fn check_huge(&self, buffer: &Arc<PartitionBuffer>, extra: u64) -> Result<()> {
        let total = buffer.total_bytes() + extra;
        if total > self.huge_partition_threshold() {
            let in_memory = buffer.memory_bytes();
            if in_memory > self.opts.huge_partition_memory_limit {
                if self.store().spiller().spill(buffer) {
                    tracing::info!(partition = %buffer.key(), in_memory,
                        "huge partition over its memory limit: spilled for the refused requireBuffer");
                }
                return Err(Error::NoBufferForHugePartition {
                    partition: buffer.key().clone(),
                    reason: format!(
                        "it holds {in_memory} bytes in memory, the limit is {}",
                        self.opts.huge_partition_memory_limit
                    ),
                });
            }
        }
        if let Some(hard) = self.huge_partition_hard_limit() {
            if total > hard {
                return Err(Error::HugePartitionHardLimit {
                    partition: buffer.key().clone(),
                    reason: format!("size {total} > hard limit {hard}"),
                });
            }
        }
        Ok(())
    }

    /// `sendShuffleData`: stages every partition's blocks under the ticket's reservation.
    ///
    /// Partitions are applied in order; on the first failure the rest are skipped and the
    /// earlier ones stay cached (as Java; the client resends everything and duplicates are
    /// dropped by block id). The unused part of the reservation returns to the budget.
    ///
    /// `frame_overhead` is what the transport itself reserved on top of the blocks: the Netty
    /// client adds its encoded message length to `requireSize` (SEMANTICS §3.4); that part is
    /// given back as soon as the ticket is taken. gRPC passes 0. `payloads` says whether the
    /// blocks share one request buffer (copied per partition) or own theirs (kept).
    ///
    /// `seen` notes the ticket it took (whatever the outcome), for the Netty plane's audit line.
    #[allow(clippy::too_many_arguments)]
    pub fn send(
        &self,
        app_id: &AppId,
        shuffle: i32,
        ticket_id: i64,
        parts: Vec<(i32, Vec<Block>)>,
        frame_overhead: u64,
        payloads: Payloads,
        seen: &mut TicketSeen,
    ) -> Result<()> {
        let app = self
            .apps
            .read()
            .get(app_id)
            .cloned()
            .ok_or_else(|| Error::AppStateMissing {
                app_id: app_id.to_string(),
            })?;
        if parts.iter().all(|(_, blocks)| blocks.is_empty()) {
            return Err(Error::Internal {
                reason: "No data in request".into(),
            });
        }
        let mut reservation = self.tickets().take(ticket_id, app_id)?;
        seen.require_size = Some(reservation.len());
        // Its storage refused the app for good: the reservation goes back with the error.
        self.writes_admitted(app_id)?;
        reservation.release(frame_overhead);
        app.touch();
        let need: u64 = parts
            .iter()
            .flat_map(|(_, b)| b)
            .map(Block::charged_len)
            .sum();
        if need > reservation.len() {
            return Err(Error::bad_request(format!(
                "blocks need {need} bytes but requireBufferId {ticket_id} reserved {}",
                reservation.len()
            )));
        }
        let shuffle = Self::shuffle_of(&app, shuffle)?;
        for (partition, blocks) in parts {
            if blocks.is_empty() {
                continue;
            }
            let key = shuffle.registered_key(app_id, partition)?;
            let buffer = self.buffer(&key)?;
            if let Some(hard) = self.huge_partition_hard_limit() {
                let incoming: u64 = blocks.iter().map(|b| b.data.len() as u64).sum();
                if buffer.total_bytes() + incoming > hard {
                    return Err(Error::HugePartitionHardLimit {
                        partition: key,
                        reason: format!(
                            "size would reach {} > {hard}",
                            buffer.total_bytes() + incoming
                        ),
                    });
                }
            }
            if let Some(sizes) = self.stats().block_sizes.get() {
                sizes.observe(app_id, blocks.iter().map(|b| b.data.len() as u64));
            }
            let threshold = self.huge_partition_threshold();
            let huge = (buffer.total_bytes() > threshold)
                .then_some(self.opts.huge_partition_memory_limit / 2);
            let inserted =
                self.store()
                    .insert(&buffer, blocks, payloads, &mut reservation, huge)?;
            app.add_data(inserted.bytes);
            // As Java's `markHugePartition` after each cached send: the lifetime counters
            // count a range once and an app once, the first time either is found huge.
            if buffer.total_bytes() > threshold && buffer.mark_huge() {
                let stats = self.stats();
                stats.huge_partitions.fetch_add(1, Ordering::Relaxed);
                if app.mark_huge() {
                    stats.apps_with_huge.fetch_add(1, Ordering::Relaxed);
                }
            }
            if inserted.duplicates > 0 {
                tracing::debug!(partition = %key, duplicates = inserted.duplicates, "dropped resent blocks");
            }
        }
        self.stats()
            .received_bytes
            .fetch_add(need, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    fn buffer(&self, key: &PartitionKey) -> Result<Arc<PartitionBuffer>> {
        self.store()
            .memory()
            .get(key)
            .ok_or_else(|| Error::NotRegistered {
                app_id: key.app.to_string(),
                shuffle_id: key.shuffle,
                what: format!("partition range {}", key.range),
            })
    }

    /// `commitShuffleTask`: counts a finished map task; returns the count.
    /// Answered once the new count is journaled, so a restart never counts a commit twice
    /// or forgets one.
    ///
    /// Under a store type whose clients read files only (`commit_waits_for_spill`), the
    /// shuffle's buffers are spilled first and the answer waits until they are durable (up to
    /// `commit_timeout`, then `INTERNAL_ERROR`), as Java's `commitShuffle` waits for the
    /// committed block count: the client reads right after the last commit and would
    /// otherwise miss blocks still in memory. Under `MEMORY_*` types no released client
    /// commits, and the watermarks decide when to spill (Java starts a spill without waiting).
    pub async fn commit_task(&self, app_id: &AppId, shuffle: i32) -> Result<i32> {
        let app = self.verify_and_touch(app_id)?;
        let count = Self::shuffle_of(&app, shuffle)?.commit();
        self.journal(crate::recovery::Record::Commit {
            app: app_id.to_string(),
            shuffle,
            count,
        })
        .await?;
        if self.opts.commit_waits_for_spill {
            self.spill_shuffle(app_id, shuffle).await.map_err(|e| {
                tracing::warn!(app = %app_id, shuffle, error = %e, "commit not durable in time");
                e
            })?;
        }
        Ok(count)
    }

    /// `finishShuffle`: spills every buffer of the shuffle and waits until it is durable.
    pub async fn finish_shuffle(&self, app_id: &AppId, shuffle: i32) -> Result<()> {
        let app = self.verify_and_touch(app_id)?;
        Self::shuffle_of(&app, shuffle)?;
        self.spill_shuffle(app_id, shuffle).await
    }

    /// Spills every buffer of the shuffle and waits, up to `commit_timeout`, until it is
    /// durable.
    async fn spill_shuffle(&self, app_id: &AppId, shuffle: i32) -> Result<()> {
        let scope = PurgeScope::shuffle(app_id.clone(), shuffle);
        tokio::time::timeout(self.opts.commit_timeout, self.store().flush(&scope))
            .await
            .map_err(|_| Error::Internal {
                reason: format!(
                    "Shuffle data commit timeout for {} ms: {app_id}/{shuffle} not durable yet, data may be lost",
                    self.opts.commit_timeout.as_millis()
                ),
            })?;
        // A spill its storage refused for good ends the wait without making anything durable.
        // (A quota reached by this flush is no reason to fail it: what it wrote is durable.)
        match self.store().failed(app_id) {
            Some(refused) => Err(refused),
            None => Ok(()),
        }
    }

    /// Whether the store still takes new data of `app`: the one place `requireBuffer` and
    /// `sendShuffleData` ask. An app whose storage refused it for good, with nothing to fall
    /// back to (see `store::admission`), or that holds its quota (see `store::quota`), gets
    /// the cause.
    fn writes_admitted(&self, app: &AppId) -> Result<()> {
        match self.store().refusal(app) {
            Some(refused) => Err(refused),
            None => Ok(()),
        }
    }
}
