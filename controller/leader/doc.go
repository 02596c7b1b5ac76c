// Package leader elects one controller among two or three that share state
// in etcd, and fences every write the leader makes, so a deposed leader's
// late writes never land. It is the building block of the HA controller
// (issue 15); bbolt stays the single-node default and needs none of this.
//
// # Election
//
// An Elector campaigns under a prefix (DefaultPrefix, /edgeset/leader) the
// way go.etcd.io/etcd/client/v3/concurrency's Election does, and with its
// Session. Each round grants a lease of the configured TTL (DefaultTTL,
// 10 s), opens a concurrency.Session on it and puts a candidate key
// prefix/<lease-hex> whose value is the candidate's Info (controller id and
// API URL), so a standby can tell a client where the leader is
// (Elector.Leader, or an Observer that follows it). The candidate whose key
// was created first leads; the others wait for the keys before theirs to be
// deleted. The keys are those concurrency.Election reads, but the Elector
// does not call Election.Campaign: cancelled, it resigns on the client's
// own context, which blocks for as long as etcd is unreachable (found by
// this package's partition tests), and its wait trusts a single watch.
//
// # Terms and fencing
//
// A won campaign is a Term: the leader key and its create revision. The
// Elector runs Options.Lead(ctx, term) for the leader-only work; ctx ends the
// moment the term can no longer be trusted, and context.Cause(ctx) says
// why: ErrSessionLost (the session's keep-alive ended or etcd no longer knows
// the lease), ErrLeaseDeadline (no renewal was confirmed in time, as in a
// partition from etcd), ErrKeyLost (the leader key was deleted or replaced)
// or ErrResigned (shutdown, or Lead returned). Term.Txn sends every write in
// an outer transaction conditioned on CreateRevision(key) == rev, with the
// caller's transaction nested inside: once the key is gone, the write fails
// with ErrNotLeader and changes nothing. A standby can only win after the
// old key is deleted, so etcd itself orders the old term's last write
// before the new term's first. Once the term's context has ended, Txn
// refuses without asking etcd, and a call still in flight is abandoned.
//
// # Pitfalls defended
//
//   - A campaign that outlives its session: the wait watches keys, not the
//     lease, and can end in an apparent win after the session's lease
//     expired (its own key gone with it), as Election.Campaign can. The
//     campaign's context ends with the session, and after the wait the
//     Elector re-reads the prefix and leads only if the first-created key
//     is still its own, with its revision and lease.
//   - A watch that misses the deletion of the leader key (compaction, a
//     cancelled or silently stalled watch): the term's key guard and the
//     Observer are level-triggered. Every watch event, error or close, and
//     a periodic resync, lead to a fresh Get of the prefix; a missing key
//     means no leader.
//   - A leader partitioned from etcd: the client's own keep-alive deadline
//     runs from when a response arrived, later than the server's expiry.
//     The Elector renews the lease itself as well and takes the deadline
//     from when each renewal was sent (the server renewed no earlier), less
//     a tenth of the TTL for clock-rate drift; the term's context ends
//     then, before etcd can expire the lease and elect a successor. (This
//     costs one extra KeepAliveOnce per third of the TTL.)
//
// # Shutdown
//
// When Run's context ends, the Elector ends the term, waits for Lead to
// return, resigns (deletes its key, so a standby takes over at once rather
// than after the TTL), revokes the lease and returns; every goroutine it
// started has been joined.
package leader
