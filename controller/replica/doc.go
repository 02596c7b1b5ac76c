// Package replica keeps the controller's store in etcd for the HA
// controller (issue 15): etcd is the source of truth, and the leader's
// bbolt file (package store) is a cache of it, rebuilt at the start of
// each term with Restore. Every read-write transaction of the store hands
// its write set to Commit (store.Options.Replicate) before bbolt commits;
// the local commit happens only once etcd holds the write set, fenced by
// the leader's term (Fence, satisfied by *leader.Term), so a deposed
// leader's late writes never land. Every write of the package goes
// through the Fence; reads go to the client.
//
// # Layout
//
// Under the prefix (DefaultPrefix, /edgeset/store), one etcd key per bbolt
// key, and the buckets' existence and sequences as keys of their own:
//
//	<prefix>/d/b/<bucket>/                a top-level bucket's directory
//	<dir>b/<bucket>/                      a nested bucket's directory
//	<dir>!                                the bucket exists (empty value)
//	<dir>#                                its sequence, 8 bytes big-endian
//	<dir>k/<key>                          one of its keys: bbolt's bytes
//	<prefix>/txn/<id>/<chunk>             a staged transaction's chunks
//	<prefix>/txn/<id>/commit              its commit marker
//
// for example /edgeset/store/d/b/revisions/b/default%2Fweb/k/<hash>.
// Bucket names are percent-escaped ('%', '/', and bytes outside printable
// ASCII), so a bucket's directory is a prefix of exactly its own subtree:
// deleting bucket "a" is one range delete that leaves its sibling "ab"
// alone. Within a directory "!" sorts before "#", "b/" and "k/", so a
// read in key order meets every bucket before its contents. Values are
// bbolt's bytes unchanged.
//
// # Atomicity
//
// Commit first reduces the write set to its net effect: one put or
// delete per key, and per deleted bucket a range delete split around the
// keys put in it afterwards (etcd refuses a transaction that writes a key
// twice or puts a key inside a range it deletes). These effects commute
// and are idempotent, so they may be applied in any split and again.
//
// A write set within etcd's limits (Options.MaxTxnOps, below the server's
// --max-txn-ops of 128 with room for the fence; Options.MaxRequestBytes,
// below --max-request-bytes of 1.5 MiB) is one fenced transaction. A
// larger one (an apply to 100,000 nodes writes 200,000 keys) is staged:
// its effects, packed into chunks under each request's size, are written
// under <prefix>/txn/<id>/, each chunk in a fenced request of its own;
// then one fenced put of the commit marker (the chunk count) commits it;
// then its effects go to the main keys in fenced batches, and the staging
// keys are deleted. Restore, and the first Commit of a replica (a new
// term), first finish every staged transaction whose marker is present
// (applying it again, in marker order) and delete those without one. A
// leader killed between any two requests thus leaves, once the next
// Restore ran, all of the transaction or none of it.
//
// Commit returns nil once etcd holds the write set durably: after the
// single transaction, or after the marker (a failure of the apply after
// it is left to the next recovery, which the replica's next Commit runs
// first). It fails with the fence's error (leader.ErrNotLeader) once the
// term is lost, with nothing written, and with etcd's own error when etcd
// refused a request as such (too large, over its quota), nothing written
// either. When a request fails in flight its outcome is unknown: etcd may hold what the store is about to roll back,
// so that commit's error is ErrDiverged, and the replica refuses every
// later Commit with ErrDiverged until Restore rebuilt the store from etcd.
//
// # Limits
//
// One value must fit in one request (MaxRequestBytes): a larger one fails
// its commit, and the store rolls it back. A staged transaction costs its
// size twice in etcd until it is applied, and Restore holds a page of
// PageKeys keys in memory. etcd keeps every revision until compaction,
// and refuses writes past --quota-backend-bytes: both must be set for the
// fleet's size (docs/scale-out.md, "HA controllers on etcd").
package replica
