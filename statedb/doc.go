// Package statedb stores a training job's consistency state: the job's
// identity, a per-step ledger of parameter digests, the allocation history,
// and checkpoints (safetensors files plus the logical workers' (ESTs')
// contexts at the checkpoint's step). The backfill daemon's store is the
// sibling package statedb/backfillstore; what the two share about a SQLite
// file (connection string, schema version, network-filesystem refusal, the
// lock holder, the errors that report them) is statedb/internal/sqlitefile.
// Only packages under statedb/ link SQLite (github.com/mattn/go-sqlite3).
//
// # Layout of a state directory
//
//	DIR/                     created with mode 0700; flock(2)ed by the single writer
//	  state.db               SQLite database, WAL mode (+ state.db-wal, state.db-shm)
//	  lock                   also flock(2)ed by the writer; holds "pid=<pid> host=<host>"
//	  checkpoints/
//	    step-<step>.safetensors
//	  numerics.json          what the ledger was computed with (engines whose bits depend
//	                         on where they run: the torch engine); SetNumerics, Numerics
//	  superseded/<time>/     the state of runs the job started over from (StartOver),
//	                         each a state directory of its own
//
// # Writers and readers
//
// Open takes an exclusive, non-blocking flock on DIR itself and on DIR/lock;
// a second writer gets a *LockedError naming the PID and host of the first
// (the PID from /proc/locks, else from DIR/lock). The lock on the directory
// is what keeps a second writer out: deleting or rewriting DIR/lock while a
// writer runs changes nothing. DIR/lock is still locked for binaries that
// only know it, and alone guards a network filesystem that cannot flock a
// directory (Options.AllowNetworkFS on NFS). The kernel drops the locks when
// the holder dies, so a killed writer leaves no stale lock.
// OpenReadOnly takes no lock and opens the database with mode=ro; it can
// read while a writer runs. Open refuses directories on network filesystems
// (NFS, Lustre, GPFS, CephFS, SMB, BeeGFS, ...; detected by statfs(2) magic)
// because SQLite's locks and WAL shared memory do not work there
// (https://www.sqlite.org/wal.html); Options.AllowNetworkFS overrides.
//
// # Schema (PRAGMA user_version = 5)
//
//	job(singleton=1, job_id, name, spec, logical_workers, created_ns,
//	    data_files JSON [{name, size, sha256}] in load order, '' before version 3, checksum)
//	ledger(step PK, digest, tensor_digests JSON, loss REAL NULL=NaN, wall_seconds,
//	       workers, placement, samples_hash, redo, redo_count, time_ns, checksum,
//	       unhashed: 1 for a step whose digest was not computed (digest ''), version 5)
//	allocations(seq PK AUTOINCREMENT, step, workers, speeds JSON, placement, reason, time_ns)
//	checkpoints(step PK, file, sha256 hex, size bytes, time_ns, checksum)
//	est_contexts(step -> checkpoints.step ON DELETE CASCADE, est, blob; PK (step, est))
//
// # Row checksums
//
// SQLite's integrity check only sees its own pages: a changed value in a
// well-formed page (a flipped bit, an UPDATE by hand) passes it. So every
// row a resume depends on carries a SHA-256 over a canonical encoding of
// its stored values (checksum.go): ledger.checksum covers its row, and
// checkpoints.checksum covers the checkpoint's row and all its est_contexts
// rows (the manifest), whose sha256 in turn covers the safetensors file.
// LatestCheckpoint skips a checkpoint whose rows do not match, exactly as
// it skips a damaged file (a *CheckpointError wrapping a *CorruptRowError);
// Ledger leaves out rows that do not match and names their steps in a
// *CorruptLedgerError; CheckLedger lists them without decoding; AppendLedger
// replaces such a row when the step is recomputed. Both match
// ErrCorruptRow. Migration 2 computes the checksums of rows written before
// it; migration 5 re-checksums the ledger rows that match their schema-4
// checksum so that the new unhashed column is covered too (a row that did
// not match stays corrupt). A ledger row of an unhashed step (the torch
// engine hashes every K steps when hashing costs more than 1 % of a step)
// is still a row: it is checksummed, and MissingLedgerSteps names it when
// it is deleted. The job row and the allocation history are not covered: a resume
// compares the job's ID (a change is refused as another job) and does not
// read the allocations.
//
// Times are Unix nanoseconds. Migrations are applied in order by Open, each
// in its own transaction together with its user_version bump; a database
// with a newer user_version than the binary knows is refused
// (ErrSchemaTooNew).
//
// # Checkpoint files
//
// safetensors (https://huggingface.co/docs/safetensors): an 8-byte
// little-endian header length, a JSON header mapping each tensor name to
// {"dtype":"F32","shape":[...],"data_offsets":[begin,end]} plus a
// "__metadata__" string map, then the raw little-endian data. Reading and
// writing use github.com/nlpodyssey/safetensors: it writes through an
// io.Writer, caps the header at 100 MB and checks it against the buffer
// before parsing, validates offsets with overflow-checked arithmetic, and
// fuzzing found no panic (FuzzDecodeCheckpoint). Its writer orders tensors
// by dtype and name, so statedb records the caller's order and the step
// under the reserved "__metadata__" keys "easyscale.order" and
// "easyscale.step". Files are only parsed after their SHA-256 and size
// match the database, so memory stays bounded by the recorded size.
//
// # Durability
//
// The database runs in WAL mode with synchronous=NORMAL, busy_timeout 5 s and
// BEGIN IMMEDIATE transactions. Under NORMAL a commit is not fsynced: a power
// failure or kernel crash may lose the last few committed transactions, but
// SQLite guarantees the database is never corrupted; a killed process loses
// nothing that was committed (the WAL is in the page cache). A checkpoint is
// written to step-<step>.safetensors.tmp, fsynced, renamed, and its
// directory fsynced before it is recorded; the recording transaction is
// committed with synchronous=FULL, which also makes every earlier ledger row
// durable. Hence after any crash: every recorded checkpoint row points to a
// complete file, the ledger reaches at least the newest recorded checkpoint,
// and a pruned checkpoint's file is deleted only after the rows that
// superseded it are on disk.
//
// # Crash cases of SaveCheckpoint
//
//   - Killed while writing the .tmp file: the database is unchanged, the
//     previous checkpoint stays newest, Open removes the .tmp file.
//   - Killed after the rename, before the commit: the file is not recorded;
//     LatestCheckpoint ignores it and Open removes it.
//   - Killed after the commit, before pruned files are deleted: the pruned
//     rows are gone; Open removes their now unrecorded files.
//   - Power loss after the commit: the synchronous=FULL commit survived.
//   - A recorded file later damaged or removed: LatestCheckpoint reports a
//     *CheckpointError with the expected and actual SHA-256 and falls back
//     to the previous checkpoint.
//   - Write errors (disk full): SaveCheckpoint returns a wrapped error
//     (errors.Is(err, syscall.ENOSPC) holds), removes the .tmp file and
//     records nothing.
package statedb
