// Package store defines corral's persistent state: the contracts that keep
// sandboxes and agent runs alive across host crashes and let several corral
// processes, on several machines, share one database.
//
// Six contracts make up a [Store]:
//
//   - [InstanceStore] maps a sandbox key to the provider sandbox to resume
//     (its id, latest snapshot, thread and run). A put is a full replace.
//   - [Locker] gives per-name mutual exclusion with leases that renew
//     themselves and fencing tokens that only ever grow.
//   - [RunStore] keeps run records, including the four durable fields
//     (SandboxKey, DetachedSince, CancelRequested, DriverEpoch) that let a
//     second host take over a detached run. Updates are patches that tell
//     "leave this field" from "clear this field" ([Opt]).
//   - [EventLog] keeps each run's delivered events with dense 1-based
//     sequence numbers. Appends are fenced by the run's DriverEpoch in the
//     same transaction, so a superseded writer can never add to the log.
//   - [CheckpointStore] keeps each thread's portable snapshots (checkpoints),
//     its head and its writer lease; every publishing write is fenced by
//     the lease in its own transaction, and blob references are counted.
//   - [BlobStore] keeps the content-addressed blobs checkpoints name. The
//     database stores keep them in a table; store/blobstore keeps them in
//     any gocloud.dev/blob bucket (a directory, S3, GCS, Azure).
//
// This package holds interfaces and small shared types only; it imports no
// database driver. The implementations are store/memstore (in process),
// store/sqlitestore (the embedded default, one file shared by several
// processes on one machine) and store/pgstore (PostgreSQL, shared by several
// machines). store/storeurl opens one of them from a URL, and
// store/storetest is the conformance suite all three pass.
//
// Every error a store returns carries a code from corral's closed set (see
// [github.com/d10ffeed/corral/sandbox.Code]): NotFound, AlreadyExists,
// InvalidArgument, FailedPrecondition, Unavailable, Canceled,
// DeadlineExceeded, Internal and so on. Times are kept as epoch milliseconds:
// every time a store returns is in UTC and truncated to the millisecond.
package store
