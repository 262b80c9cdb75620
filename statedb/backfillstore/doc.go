// Package backfillstore is the backfill daemon's own SQLite store
// (easyscale-backfilld's state_db), separate from a job's state.db
// (package statedb): the extra jobs it submitted, its submission intents
// its decisions and its shrink-to-admit records.
//
// # Schema of the backfill database (PRAGMA user_version = 10)
//
//	extras(job_id PK, parent_id, user_name, node, gpu_type, gpus, partition,
//	       submitted_ns, end_ns, state, signalled_ns, ended_ns, reason, adopted,
//	       job_name, comment, lent_s, user_id)
//	decisions(seq PK AUTOINCREMENT, time_ns, kind, job_id, extra_id, node, gpus,
//	          dry_run, detail)
//	intents(seq PK AUTOINCREMENT, parent_id, user_name, job_name, comment,
//	        partition, node, time_ns, lent_s, gpus, user_id)
//	admit_shrinks(seq PK AUTOINCREMENT, job_id, queued_id, user_name, partition,
//	              orig_nodes, from_nodes, to_nodes, old_limit_s, new_limit_s,
//	              state, time_ns, detail, user_id)
//	lend_failures(job_id, node, failures, last_ns, status, stopped_ns;
//	              PK (job_id, node))
//	kept_off(job_id PK, nodes, set_to, types, since_ns, released)
//	moved(job_id PK, from_nodes, owner, set_to, since_ns, state)
//	started_small(job_id PK, user, from_nodes, to_nodes, old_limit_s,
//	              new_limit_s, at_ns, restored, gpus, user_id)
//
// user_id is the owner's numeric uid as squeue printed it (UserId), beside
// the name it printed (user_name, user): Slurm prints a stand-in name for
// an owner the name service does not resolve (22.05 "nobody", 24.11 the
// uid), so the daemon compares owners by uid; "" in rows written before
// version 10, which are compared by name.
//
// extras holds every extra Slurm job the daemon submitted (or adopted after a
// restart), with its lifecycle state and what it was submitted as (user, job
// name, comment, partition: the daemon checks these against Slurm before it
// signals or cancels the job; rows of version 1 have "" name and comment;
// lent_s is the time limit it was lent for, 0 in rows before version 9);
// intents holds each submission from just before sbatch until its extra job
// is recorded, so a daemon killed in between can tell its own job from a
// look-alike and hold it to the time limit and GPUs it was lent (lent_s,
// gpus; 0 in rows before version 9); decisions is an append-only log of
// what each cycle decided (grows, shrinks, cancels, adoptions);
// admit_shrinks holds each
// shrink-to-admit of a running elastic job, written before its first
// scontrol update and marked done or abandoned afterwards, so a restarted
// daemon finishes or undoes a half-applied one and counts what each job has
// lost against admit.max_loss; lend_failures holds, per elastic job, its
// consecutive failed lends (extra jobs that ended on their own long before
// their time limit), job-wide in the row whose node is empty (with the job's
// status key then and when the daemon announced it stopped growing the
// job) and per node in the others, so that a restarted daemon keeps
// backing off; kept_off holds, per pending job, the nodes keep_off_pinned
// added to its excluded nodes and the whole list it set (comma-separated),
// their GPU types, when the job was first kept off and whether its owner
// has since changed the list (released), so that the daemon, restarted or
// not, takes out exactly those, never a node the job's owner excluded, and
// keeps no job off for longer than its time limit; moved holds, per job
// move_to_faster requeued, the nodes it ran on, its owner's excluded nodes
// before, the list the daemon set and how far the move got (requeued,
// excluded, ran, restored), written before the requeue, so that a job is
// moved once at most and its owner's list goes back when it waits again;
// started_small holds, per job start-small started on fewer nodes, its
// owner, node counts, GPUs, time limits before and after the raise and
// whether the old limit was put back (StartedSmall). [DB.Prune] keeps the
// file bounded: decisions and ended extra jobs beyond the newest counts or
// older than an age, and old finished shrink-to-admit records of jobs
// Slurm no longer lists, are deleted, and
// SQLite reuses their pages. Times are Unix
// nanoseconds. The file is opened in WAL mode with synchronous=FULL: the daemon
// writes a few rows per cycle, and a row for a submitted extra job must survive
// a power cut so that the next start reconciles it.
package backfillstore
