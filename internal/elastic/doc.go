// Package elastic is the one definition of an EasyScale elastic request: the
// options a user writes at submission, how they are parsed and validated, and
// how the request is recorded in the Slurm job comment for the backfill
// daemon.
//
// # Options
//
// Three options, each with an environment twin (the flag wins over the twin):
//
//	--elastic=MIN[-MAX]   EASYSCALE_ELASTIC          node count range (MAX defaults to MIN)
//	--logical-workers=N   EASYSCALE_LOGICAL_WORKERS  logical workers (EasyScaleThreads, ESTs)
//	--determinism=d1|d2   EASYSCALE_DETERMINISM      determinism level, default d1
//
// and a fourth that easyscale-sbatch and the runtime read (the SPANK plugin
// does not register it; its environment twin reaches the job all the same):
//
//	--speeds=TYPE:SPEED,...  EASYSCALE_SPEEDS  the job's throughput per GPU type ([ParseSpeeds])
//
// d1 asks for bitwise-identical training results whatever the number of
// physical workers on one GPU type; d2 also across GPU types (the
// heterogeneous level of the EasyScale paper, arXiv 2208.14228, which rules out
// type-specific kernels such as TF32). Counts are decimal digits only, at
// least 1 and at most [MaxCount]; MIN <= MAX; when both are given, MAX <=
// logical workers (every node runs at least one logical worker). The same
// rules are implemented in C by the SPANK plugin (spank/plugin/request.c) and
// checked against the shared case table testdata/validation_cases.tsv.
//
// # Where the request lives (the job comment)
//
// slurmctld never sees SPANK options, so easyscale-sbatch records the request
// in the job's comment (sbatch --comment), which squeue (%k), scontrol and
// squeue --json all show:
//
//	es-req min=1 max=4 lw=8 d1
//
// Once the job runs, the runtime overwrites the comment with its status. The
// status keeps the request inside it, so the request is never lost:
//
//	es step=1200/5000 workers=6/8 d1 req=1-4
//
// Here workers=W/L carries the logical workers L and req=MIN-MAX the node
// range. Either form may end with the optional speeds=TYPE:SPEED,... field,
// the job's own throughput per GPU type relative to the reference type
// ([ParseSpeeds]; e.g. speeds=t4:0.4,v100:1), which the backfill planner
// prefers to the site's speed table; a reader that predates it skips it as
// an unknown key=value token. The runtime's status writer keeps it only if
// its Request carries it (the environment twins do not set it yet). [ParseComment] reads both forms; [Comment.String] writes them. The
// alternatives were rejected: the job name belongs to the user, --wckey
// collides with site accounting policies and is dropped when TrackWCKey is
// off, and AdminComment can only be set by operators. The backfill daemon
// should still persist a request the first time it sees it (pending jobs,
// where backfill matters, always carry the es-req form).
package elastic
