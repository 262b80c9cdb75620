// Package daemon is easyscale-backfilld: it lends GPUs that Slurm leaves idle
// to running EasyScale elastic jobs and takes them back before any waiting
// job's reserved start (issue 5; EasyScale, arXiv 2208.14228, §4.3).
//
// # One cycle
//
//	         ┌──────────── every poll_interval (backoff while Slurm is down) ───────────┐
//	         ▼                                                                           │
//	Snapshotter ──► reconcile ──► planner.Plan ──► shrink ──► admit ──► grow ──► prune ─┘
//	scontrol ping   Slurm vs.      pure: gaps,      re-read    re-read    intent,   [retention]
//	sinfo, squeue   the SQLite     shrinks,         by id,     by id,     sbatch    metrics
//	                store, failed  grants, retry    SIGTERM,   scontrol   extra jobs
//	                lends          holds            scancel    update     (Actuator)
//
// The snapshot reads `scontrol ping` (a down controller answers in
// milliseconds, while sinfo would retry for ~9 s), `sinfo` (GPUs per node
// from Gres/GresUsed, idle CPUs, state) and one `squeue --states=all`
// (running jobs with their TRES-per-node/per-job GPU counts, end times,
// user, account and WorkDir; pending jobs with the start and nodes Slurm's
// backfill planned, i.e. what `squeue --start` shows; extra jobs in final
// states). A job is elastic when its comment parses with
// elastic.ParseComment; it can grow, shrink or shed once its rendezvous
// directory WorkDir/.easyscale/JOBID holds `coordinator` and `token`
// written by the job's own user for its current run (rendezvous.go: owner,
// modes, no links, the coordinator file no older than the run; lstat only,
// never read), since WorkDir may be writable by others (the daemon must see
// WorkDir, as on a shared filesystem). A job whose GPUs were asked per job
// (`--gpus=N`) on several nodes is never shrunk nor shed: squeue does not
// say how Slurm spread them.
//
// # Reading what users wrote
//
// Job names, comments and work directories are the users' text, and Slurm
// 22.05 prints them verbatim, field separator 0x1F and newlines included.
// Every squeue and sinfo call therefore delimits fields and records with
// separators drawn at random for that call (128 bits each, see
// slurmcli.NewSeparators; squeue's travel in SQUEUE_FORMAT2, which other
// users cannot read): no user can know them when naming a job, so no text
// can end a field or a record early, and a record always describes the job
// whose id opens it. This was chosen over `squeue --json`, which 22.05
// escapes correctly but whose -j/-t filters it ignores (each re-read of one
// job by id would transfer every job slurmctld holds) and whose schema
// changes with each Slurm release; see the slurmcli package documentation.
// `scontrol show job`, whose unquoted Key=Value text a job name can imitate,
// is not read. A record that still cannot be read (a count that is not a
// number, a node list or GRES that does not parse) is left out of the view
// with one warning naming its job id; the cycle goes on without it, and a
// recorded extra job whose record (or whose parent's) is unreadable is left
// as it is until it can be read again.
//
// # Growing: extra jobs
//
// The idle GPUs of a node are sinfo's (Gres less GresUsed, less the GPUs
// of extra jobs submitted but not started), but never more than squeue's
// running jobs leave free (planner.FreeGPUs): sinfo is read before squeue,
// and a job that starts in between (a pinned job taking the nodes whose
// extra jobs Slurm just preempted for it, seen on the lab) must not have
// its GPUs lent again.
//
// A waiting job that Slurm has not planned yet (squeue shows no expected
// start or planned nodes: every job between its submission and the next
// backfill pass) reserves nothing, yet may start at that pass on any node
// it can use. For unplanned_hold (default 60 s) after a cycle first sees
// it waiting with reason None, Resources or Priority, no GPU it may need
// is lent on the nodes of its partitions, --nodelist, --exclude (where
// read) and GPU type (unplanned.go, planner.UnplannedJob); running extra
// jobs stay. Without it a pinned job that needs every GPU of a type found
// some lent 0.2 s after its submission (tests/backfill's d1 test, on both
// Slurm versions). A user's pending jobs can so delay lends by at most
// unplanned_hold each, as a planned reservation of theirs would; they
// change no other job.
//
// How much a job grows per cycle is the planner's: at most doubling while
// any job is pending, to its maximum at once when none is
// (planner.Snapshot.NothingQueued, issue 17: a shrunk job grows back as
// soon as GPUs are idle and nobody waits for them).
//
// Slurm 22.05 cannot grow a running GPU job: `--dependency=expand` fails with
// "has allocated GRES" and leaves the expand job stuck (NOTES.md §4). So a
// job grows by one extra job per lent node: same user (root submits with
// --uid), the job's account, partition extra.partition (preemptible),
// --nodes=1 --ntasks=N --nodelist=NODE --gres=gpu:TYPE:N for N lent GPUs,
// --export=ALL,SLURM_GPUS_PER_TASK=1 (the script's srun then runs one worker
// task per GPU, each bound to its own GPU; 22.05's sbatch refuses
// --gpus-per-task beside a typed --gres, srun accepts it — checked on the
// lab; sbatch itself runs with PATH and SLURM_CONF alone, [SubmitEnv], so
// that none of a root daemon's environment reaches the job, and `easyscale
// worker` starts again on the job's own environment, which its coordinator
// publishes in DIR/environment), --no-requeue, --chdir=WorkDir (relative
// paths resolve as in the job), output to DIR/extra-<id>.out,
// --time ending before the gap closes minus safety_margin, rounded down to
// whole minutes and ending safety_margin before the parent's own end,
// --job-name=es-extra-JOBID, --comment="es-extra parent=JOBID", running
// extra.worker_command (default `srun easyscale worker --join "$(cat
// DIR/coordinator)" --token-file DIR/token`; srun starts one worker per
// task, and a command without srun is refused by the config). Each worker
// joins the job's coordinator and is admitted at the next step boundary.
//
// The planner counts GPUs; the request counts nodes. A physical worker is one
// task on one GPU, own or lent, so with the job's GPUs per node g the job may
// have at most min(max·g, logical workers) physical workers: its own GPUs
// plus one per extra job task. The logical workers are the job's lw= (or
// the L of workers=P/L once its runtime has updated the comment); a job that
// declared none runs as many as it had physical workers at its first start
// (elastic.Request), which the daemon takes to be one per GPU of its own
// allocation, so such a job is not grown. A job whose runtime reports that
// every logical worker has a worker (workers=P/L with P >= L: it runs
// several tasks per GPU) is capped at the GPUs it holds: a lent GPU's
// worker would wait unadmitted for the whole lend. The planner gets MaxGPUs = that cap,
// MinGPUs = min·g and, for a d1 job (bit-identical on one GPU type), the
// GPU type(s) it runs on as the only types it may grow onto (a d2 job may
// mix types, but only those it asked for when it asked for a type,
// --gres=gpu:TYPE:N; speeds apply). Extra jobs go only where the job's
// owner let it run (planner.RunningJob.OffNodes, from `squeue
// --states=RUNNING -o %A|%i|%x|%Q|%v|%O|%f` each cycle an elastic job is ready): never
// onto a node of its --exclude, and only onto its own nodes when it asks
// node features (--constraint), which the daemon does not evaluate; a job
// whose placement does not read is not grown that cycle. Nodes this daemon
// added to the list while the job waited (a move's slower nodes, a
// keep-off's pinned types; Slurm keeps a running job's list) are not its
// owner's and do not bound its growth (daemonExcluded). CPU-only elastic
// jobs are not grown (the planner lends GPUs).
//
// Every decision is the planner's (package planner, the same code the
// simulator runs): the type rule, the worker cap and minimum
// (planner.GPUBounds), merging one job's grows on
// one node into one extra job, ending an extra job safety_margin before its
// parent (its time limit runs from its start, a little after the cycle),
// rounding time limits down to whole minutes (config.SlurmTimeUnit) and
// dropping those below min_lend, and spreading (among the slots of the
// longest lend, a node where the job has no extra job yet goes first, so
// one reservation takes back fewer of its workers and a whole idle node is
// not left unused while another is stacked). The daemon turns each grow
// into one extra job as it is.
//
// # Shrinking
//
// For each shrink the planner returns (deadline = reserved start −
// safety_margin) the daemon sends `scancel --signal=TERM` once now +
// grace_period + 2·poll_interval reaches the deadline; the worker hands its
// logical workers back at the next step boundary and exits 0. After
// grace_period, or at the deadline, `scancel` ends it; with cycles every
// poll_interval that is before the deadline. An extra job that has
// not started is cancelled at once. Slurm's partition-priority preemption
// of extra.partition is the backstop; because extra jobs are --no-requeue a
// preempted one ends (state PREEMPTED, recorded) instead of coming back
// later, and the runtime goes on at its own size.
//
// # Shrink-to-admit
//
// With admit.enabled (the default; easyscale-simulate's --policy elastic
// runs it too, --shrink-to-admit=false measures gap filling alone), when a queued
// job cannot start the daemon shrinks running elastic jobs' own (base)
// allocations so that it can, at once (planner.AdmitOnNodes, which holds
// every rule below, over planner.Cluster.Admit with WholeNodes; EasyScale
// and Pollux reallocate on arrivals; the daemon only reads the facts it
// needs from Slurm and applies the answer). Each cycle,
// after the planner's shrinks and before any grow, it considers the
// pending jobs squeue shows waiting for resources or for their turn
// (Reason "Resources": a partition's first blocked job; "Priority": jobs
// behind it, which Slurm's backfill starts once GPUs are free, within
// bf_interval) in partitions where it is on, at most AdmitDepth (Slurm's
// bf_max_job_test default, 500), in Slurm's priority order (squeue's %Q,
// read with the placements; equal priorities the lower id first), and
// applies at most one admission:
//
//   - Donors are running jobs whose comment parses as an elastic EasyScale
//     request (the job's id and squeue record, never its name; a job whose
//     request cannot be read is never a donor), whose coordinator is up,
//     on two or more nodes all managed by this daemon, with a readable
//     start and time limit, and not in admit.off_partitions. A donor gives
//     up whole nodes only (`scontrol update JobId=ID NumNodes=N`, which
//     keeps the first N nodes of its node list and releases the last ones,
//     so its batch host stays; where Slurm 23.02 and later refuse it for a
//     job submitted with --ntasks-per-node, again with `NumTasks=` the job's
//     task count: slurmcli.TaskCountRefusal), never below its request's minimum nor below
//     orig − ⌊admit.max_loss · orig⌋ nodes, orig being its node count
//     before its first shrink-to-admit (from the store).
//   - Which donors yield is admit.rule's. Under "objective" (the default,
//     the planner's one objective: the sum of the jobs' completion times)
//     the queued job must have a planned start (squeue --start) in the
//     future; donors yield in order of least loss per GPU given, each only
//     as far as it still ends no later than the latest of the running
//     jobs' ends (a job's time limit counted without what shrink-to-admit
//     raised it by: a raise must not loosen the next admission's bound),
//     the queued job's own end by waiting (its planned start
//     plus its time limit) and, with drain_horizon (the default), the time
//     the managed nodes need at the least for the work of other users'
//     running and pending jobs (drain.go, planner.Drain; a pending job
//     counts only when Slurm may start it now and only managed nodes can
//     run it: a held job queued for free must not loosen it), so the makespan
//     does not grow (a donor's end counted with its nodes back when the
//     queued job's time limit is up, admit.horizon "returned", the
//     default; "kept" counts it as if it ran to its end on fewer nodes,
//     planner.ShrinkLoss; "contested" counts so only the donor whose GPU
//     types another pending job may use and which has the most time left
//     there, planner.Pools.Kept); past that bound a donor may still give
//     nodes while, counted as never getting them back, it ends within
//     (1 + admit.allowance) × its run at its start allocation, from its
//     start (its time limit before its first shrink, or its progress
//     report's pace when less: planner.StartRun; planner.AllowedEnd;
//     default 0.75, 0: never past the
//     bound), so that the job with the most time left is not kept whole
//     while short jobs queue behind it; the queued job's time limit must be at
//     most planner.StartSmallPeerFactor (2) × the median time left of the
//     jobs competing for the managed nodes, its owner's pending jobs left
//     out (the peer bound, as for start-small: shortest remaining time
//     first; planner.Peers.MedianFor); and the admission
//     stands only when the donors' summed loss is below the queued job's
//     wait. A donor's loss is planner.BorrowLoss: the work it misses while
//     the queued job holds its nodes (at most its time limit), by
//     planner.DefaultModel of its logical workers on its GPUs at their
//     types' speeds, plus rescale_cost for the shrink and again for the
//     grow back. Under "longest-left" (the rule before issue 17) a donor
//     yields only if its remaining time is longer than the queued job's
//     time limit, longest first. Either way a donor holding a node that
//     another pending job's reservation (squeue --start nodes) names,
//     whatever GPUs that job asks (one whose GPUs squeue does not show per
//     node or per job, e.g. --gpus-per-task, reserves its whole nodes; see
//     pendingJob), gives only as many nodes as leave its raised time limit
//     ending by the earliest such start (planner.DonorGives; none under
//     "longest-left"): Slurm plans by time limits, and a limit raised past
//     that start would move the reservation. That holds for the jobs behind
//     the queued one too: Slurm lets a job it ranks lower wait for the
//     admitted one, but not for a donor's raised limit (admitCandidates).
//     The queued job goes only onto GPUs that are idle or that the donors
//     release (GPUs of this daemon's extra jobs count as idle: Slurm
//     preempts extra.partition for it), onto a node another pending job
//     plans to start on only when its time limit ends by that start even
//     if Slurm starts it a backfill pass later (bf_interval, read from
//     `scontrol show config`, plus 5 s: a tester saw an admitted job with
//     2.4 s to spare stay pending under bf_interval=30), whether that job
//     ranks above it or below (Slurm's own backfill rule,
//     planner.TakesReserved; a job ranked below was planned with the
//     queued one waiting, and a tester saw one Slurm had backfilled start
//     10 min late when the job above it was admitted early), and only in
//     the layout it asked for (its node count, GPUs per node, GPU type and
//     --nodelist); a job that must run in an advance reservation
//     (--reservation) or asks for contiguous nodes (--contiguous) is never
//     admitted (a tester saw each stay pending after a shrink); nor is any
//     job when a pending job ranked ahead of it would fit on the idle GPUs
//     plus the released nodes and did not fit before: Slurm starts jobs in
//     priority order and would start that one instead (planner.AdmitOnNodes,
//     takenByAhead: a tester saw such a job take the freed node and the
//     admitted one wait 13 min past its planned start). Every pending job
//     Slurm may start counts, whatever its Reason (a tester saw one whose
//     Reason named a higher-priority partition take the freed node), but
//     held jobs, jobs waiting for a dependency or a begin time, and jobs
//     whose one partition is DOWN, INACTIVE or below their request or
//     that a QOS or association limit no shrink lifts holds (a job count,
//     a per-job limit, usage so far: limitNoShrinkLifts; a limit on what
//     a user, account or QOS holds now still counts, since a donor's
//     shrink may lift it) (startsNever, candidates.go), in Slurm's order
//     under preempt/partition_prio: the partitions' PriorityTier (read with MaxTime; a job of a lower tier, as in
//     extra.partition, is ranked behind, whatever its priority; an unread
//     tier counts as ranked ahead; a queued job in a partition whose tier
//     was not read is not admitted; one in several of different tiers,
//     which Slurm ranks apart on each one's nodes, counts in each tier on
//     that tier's partitions' nodes alone, and is not admitted), then a
//     job in an advance reservation (squeue's %v; counted only on its
//     reservation's nodes, or on all for a FLEX one, and not admitted;
//     under another PreemptType, read with bf_interval from `scontrol
//     show config`, such jobs rank first across tiers too), then
//     priority; a job waiting for its reservation to start (Reason
//     Reservation) counts as none; the simulator applies the rule too; so it starts now and
//     no reservation moves
//     (Slurm's estimates for a job waiting on other nodes may, while
//     the admitted job runs: a tester saw a head's estimate follow a
//     donor's raised end and start on time).
//   - Remaining work: with a progress report in the comment (`es step=S/T
//     ...`, 0 < S ≤ T) the elapsed time scaled by the steps left,
//     (now − start)·(T − S)/S, but at most the time left of its limit;
//     without one, the time left of its limit (End − now). At the smaller
//     size it takes remaining · from/to (proportional rule: throughput grows
//     at most linearly with nodes, so this never falls short), and the new
//     time limit is elapsed + that + max(safety_margin, time_limit_margin ×
//     that), whole minutes rounded up, never below the old limit
//     (planner.RaisedTimeLimit, the one rule start-small uses too). The
//     daemon runs as root or a Slurm operator, who may raise limits past
//     the checks Slurm makes for a user, so it caps them itself: each
//     partition's MaxTime is read with the placements (`sinfo --all
//     --noheader -o %R|%l|%p`, slurmcli.Runner.Partitions), a job's cap is the smallest
//     MaxTime of its partitions (UNLIMITED: none), and a donor gives up
//     only as many nodes as keep its raised limit within it, none when
//     even one would not (planner.LimitCap; an unread MaxTime: none). A
//     shorter limit than the work needs is never set. QOS MaxWall (and an
//     association's MaxWall) is not read: a site that caps run time only
//     by QOS should turn start_small and admit off, or set the partition's
//     MaxTime too.
//
// Applying an admission: before any donor is changed, re-read the queued
// job by id (`squeue --jobs=ID`, then the pending jobs' --exclude and
// --constraint) and go on only when it is still PENDING with Reason
// Resources or Priority and the user, partition, node count, time limit, GPU request,
// --nodelist, --exclude and --constraint the snapshot read; then re-read
// every donor by id and go on only when each is still RUNNING with the
// user, partition, node list and time limit the snapshot read and an
// elastic request with the same node range. Any change: one error, one
// "admit-skip" decision naming the job, nothing done. Then, donor by
// donor: record the shrink in the store (admit_shrinks, state
// intent) and the decision log ("admit-shrink"); `scontrol update
// TimeLimit=` first (on Slurm without slurmdbd a resized job accepts no
// further update, NOTES.md §4), then `NumNodes=`; mark the record done. If
// the shrink is refused the old limit is put back and the record
// abandoned; when that happens after earlier donors of the same admission
// were shrunk, nothing is admitted and each of those is recorded as an
// "admit-undo" decision: Slurm cannot grow a running job's node count
// back, so it keeps its raised limit (which covers its work on fewer
// nodes) and its store record (done: its node count before the shrink
// still caps later shrinks), and lending grows it back with extra jobs
// like any elastic job below its maximum. The EasyScale runtime takes the released node's killed task as
// a membership change and goes on, bit-identically, on the rest. Slurm then
// starts the queued job on the released node. After a restart, a record
// still in state intent is finished (the job is on the smaller node count:
// the raised limit is set again) or undone (still on the old count: the old
// limit is put back) before anything new is decided; the cycle that
// applied or finished a shrink lends nothing (it read the cluster before).
//
// # Start-small
//
// With [start_small] rule other than off (default ends-earlier), when no
// shrink-to-admit was applied in the cycle, a pending job waiting for
// resources (tried in queue order, the earliest planned start first, at
// most one per cycle; not only the queue head) may start now on
// fewer nodes than it asked for: only when it is an elastic EasyScale job
// (its comment an es-req with a node range, e.g. submitted with
// easyscale-sbatch --elastic=1-4 -N 4) in a partition listed in
// start_small.partitions (empty: all), without --nodelist, asking more
// than its minimum. It goes onto whole idle nodes of its GPU type that no
// other pending job's reservation names (GPUs of this daemon's extra jobs
// count as idle), at most one fewer than it asked for and never below its
// minimum, when planner.StartSmall allows it under the rule
// (before-reservation: it ends at that size before its own reserved start;
// ends-earlier: it ends earlier than by waiting, and no later than the
// running job that ends last (a limit shrink-to-admit raised counted
// without the raise, as for shrink-to-admit), or its own run at its
// request when that is later, so a job started small never sets the
// makespan; and it must save
// itself more than the waiting jobs (Reason Resources or Priority, the
// first planner.CriticalDelayJobs of its GPU type) lose past the end of
// every running job while it holds the nodes for its raised limit,
// planner.Cluster.CriticalDelay over the running jobs' allocations and
// limits; and, the peer bound, its raised limit must be at most
// planner.StartSmallPeerFactor (2) × the median time left of the jobs
// competing for the managed nodes, its owner's pending jobs left out (so
// the long jobs she queues cannot loosen it), peers.go: a job far longer than most,
// started early, holds its nodes through the stream of short jobs that
// arrive meanwhile, planner.WithinPeerBound, BENCHMARKS.md E67). Because the
// nodes it takes are named by no reservation, a job behind the head
// cannot move the head's reserved start. These choices, which size
// and which time limit, are planner.StartSmallOnNodes's; the daemon reads
// the facts from Slurm and applies the answer. Its work is its time
// limit at the requested size under planner.DefaultModel. The daemon
// re-reads it by id (still pending for the same user, partition, node
// count, time limit and request, else "start-small-skip"), logs the
// decision ("start-small"), raises its time limit by shrink-to-admit's
// rule (planner.RaisedTimeLimit: its limit × asked/started nodes, the run
// time of a job that scales linearly, plus max(safety_margin,
// time_limit_margin × that), whole minutes rounded up; a job whose raised
// limit would pass the smallest MaxTime of its partitions is not started
// small at all, see planner.LimitCap above), then lowers its node
// count (`scontrol update JobId=ID NumNodes=K`, which Slurm 22.05 accepts
// for a pending job: lab test TestAnElasticJobStartsSmallOnTheIdleNodeInsteadOfWaiting),
// putting the limit back if Slurm refuses. Slurm then starts it on the
// idle nodes; extra jobs grow it later like any running elastic job. A
// user's comment decides only about that user's own job, which gets at most
// the node-hours it asked for plus the margin and the rounding of its limit
// up to whole minutes, per node (run time grows at most in proportion to
// the nodes taken away). A job is started small once: the daemon records
// it in state_db (table started_small: its owner, node counts, GPUs and
// limits) before it changes Slurm, tries no recorded job again, and
// forgets the record when Slurm no longer lists the job (or lists its id
// under another user). An owner who sets the node count back, or asks for
// more GPUs per node instead (seen while the job waits, or once it runs on
// more nodes or GPUs than the daemon left it: Slurm 22.05 lists a requeued
// job's new request only then) gets the limit it asked for back
// ("start-small-restore"; a running job past it ends, as it would have at
// its request) while the limit is within the daemon's raise (one an admin
// raised further is left): a raise is computed from the job's limit and
// node count, and before this a job set back to its request was raised
// again cycle after cycle (a tester's finding, 10 → 17 → 29 → 48 min).
//
// Where a queued job may go (shrink-to-admit and start-small alike): only
// nodes of one of its partitions, none of its --exclude, only its
// --nodelist when it named one. The excluded nodes and --constraint come
// from `squeue -o %A|%i|%x|%Q|%v|%O|%f` (slurmcli.PendingPlacements: 22.05's --Format
// has no excluded-nodes field; a job array's tasks and a heterogeneous
// job's components, whose %i differs from their own id %A, are ranked by
// their priority but never acted on: slurmcli.WholeJobs), read when a job waits for resources, with
// the nodes' scheduling weights when shrink-to-admit or start-small is on
// (`scontrol show node -o` Weight=; Slurm takes nodes of lower weight
// first; unreadable weights count as equal, with one warning until they
// read again). planner.Cluster.Place predicts where Slurm puts the job: a
// request per node (--gres=gpu:K) only on nodes with K GPUs free
// (FitNodes), one per job (--gpus=N) spread as cons_tres spreads it (Fit). A job
// whose placement could not be read, that asks for node features (which
// the daemon does not check), or that waits in extra.partition (preemptible
// work) makes no other job shrink and is never started small. Slurm's
// advance reservations (`scontrol create reservation`, read each cycle
// a job may grow or shrink-to-admit or start-small may act: `scontrol show
// reservation -o`, slurmcli.Reservations; while they cannot be read
// nothing is grown, admitted or started small) bound every lend on their
// nodes, which ends by their start and is not made on the nodes of an
// active one (Slurm starts no extra job there: it stayed pending until
// pending_timeout, and a trade up's slow extra job was ended for it: helper
// 112's, on the lab), and count as another pending job's reservation, on
// their nodes from their start (now, for an active one) until their end: a donor gives up a node of one only if its raised
// limit ends by that start, the admitted job goes there only if it ends by
// then, and start-small takes none of their nodes (testers saw a job
// admitted onto a node a maintenance reservation held stay pending,
// planned after it). A job that may run inside a reservation is kept off
// its nodes too (the daemon does not read who may), and while the
// reservations cannot be read nothing is admitted or started small (one
// warning). Not checked: CPUs, memory, licenses, QOS or association
// limits. A queued job that a freed node still cannot hold for one of
// those stays pending. The shrunk job then grows back through extra jobs, and
// over its life it loses at most admit.max_loss of its nodes. Nor are the
// starts of pending jobs Slurm has not planned yet (Reason BeginTime,
// Dependency: no SCHEDNODES) kept: a donor's raised limit may delay one
// that becomes eligible while the admitted job runs (a tester saw 3–4
// min).
//
// # Nudging eligible jobs
//
// A requeued job (a node failure, `scontrol requeue`, preemption) waits
// Reason "BeginTime" until `cred_expire` has passed (120 s by default),
// and then for Slurm's scheduler's next pass: eligibility by the clock is
// no event, so on an idle cluster that is the next event or the main
// scheduler's sched_interval (60 s by default; 7–17 s on the lab, whose
// bf_interval is 1 s; docs/first-node-loss.md). With nudge_eligible (on by
// default) each cycle lists the pending elastic jobs held by their begin
// time; one whose begin time has passed by slurmctld's clock (squeue
// prints none, whatever the daemon's clock says) is re-read by id (still
// pending, BeginTime, same user, still elastic, begin time passed), the decision is logged ("nudge") and the daemon runs `scontrol
// update JobId=ID StartTime=now-300` (nudge.go; slurmctld raises a begin
// time in the past to its own now): for an eligible job a change
// of nothing, but a job update, after which slurmctld runs its scheduler;
// on the lab the job started 0.2–0.3 s after it. Rules
// (planner.PlanNudges): each job once while it stays held, at most
// planner.MaxNudgesPerCycle a cycle, never a job whose begin time lies
// ahead; the daemon runs one early cycle 250 ms after the earliest begin
// time still ahead, at most one per poll_interval (NudgeWait). A user
// decides only about their own job (which was eligible already); the
// metric nudges_total{result} counts them. A begin time update also
// restarts the job's accrue time (the age factor of its priority,
// job_mgr.c `acct_policy_remove_accrue_time`), which for a job that became
// eligible a moment before is about the same. Measured on the 22.05 lab
// and run by tests/backfill on 24.11 too.
//
// # Releasing the slow nodes a job does not use
//
// With shed_slow_nodes (on by default where the Slurm series allows it,
// 22.05: MixedShrinkSafeSeries) a cycle in which no admission or
// start-small changed an allocation releases, for each running elastic
// d2 job on more than one node, the nodes planner.ShedNodes says it can
// give up without slowing down: on a mix of GPU types the optimal
// placement of its logical workers can leave a slow node's GPUs without
// any while every all-reduce waits for that node (BENCHMARKS.md, issue 17,
// E31), when they are the last nodes of its list. The job is re-read by
// id (running, the same node list, batch host and owner), the decision
// logged ("shed") and the daemon runs `scontrol update JobId=ID
// NumNodes=N` (shed.go; with NumTasks= where Slurm 23.02 and later ask for
// it); Slurm releases the last nodes and kills the job's tasks there,
// which the runtime takes as a membership change. The batch host is always
// kept. `NodeList=<kept nodes>` would release any node, but on Slurm
// 24.11.5 slurmctld then died with "double free or corruption" when the
// job's extra job ended (22.05 survived it), so a slow node in the middle
// of a list stays. Each job and node list is tried once (a refusal is logged and
// counted, not retried every cycle); the metric sheds_total{result}
// counts them. A user's comment or job name cannot name another job: the
// job acted on is the one squeue listed by id, re-read by id.
//
// Every change to a job (a shrink, shed, move, keep-off, nudge or small
// start) first re-reads it with `squeue --jobs=ID` (a moved job's
// excluded nodes are set after reading its placement, squeue -o
// %A|%i|..., which marks an array task or a heterogeneous job's component:
// slurmcli.Placement.Composite, never moved; nor is such a job shrunk,
// shed, grown or started small: planner.DonorFacts.Composite,
// View.RunningComposite, slurmcli.WholeJobs), and a job under whose id
// squeue lists more than one record is never changed: the last task of
// a job array has the array's id, and `scontrol update JobId=ID` or a
// requeue would change every task, tasks the user never marked elastic
// too (a tester saw the daemon raise and put back the time limits of a
// whole array every second). Such a running job is then planned as an
// ordinary one while squeue lists it (reread.go).
//
// # Keeping jobs off the GPU types pinned jobs wait for
//
// With keep_off_pinned (on by default) each cycle walks the pending jobs
// in queue order (planner.QueueOrder) and, for an elastic EasyScale job
// with a planned start that names no GPU type, no --nodelist and no
// --constraint and may run only on nodes this daemon manages, asks
// planner.KeepOff whether to keep it off the types that jobs pinned to
// one type (--gres=gpu:TYPE:N; waiting with Reason Resources, Priority or
// None, planned, and fitting on that type) queued ahead of it need: it is
// when its other types hold its request and serve it at least
// planner.DefaultNearlyAsWell as fast (its es-req speeds=, else
// [speeds]), but never off a type it would leave in time: when its time
// limit ends by Slurm's planned start (squeue's START_TIME) of the first
// pinned job waiting for that type, it takes nothing from it, as Slurm's
// backfill lets a job run ahead of a reservation. Nodes are counted whatever their state, so a node completing
// a job changes nothing. The job is re-read by id (pending, the same
// owner, partition, comment and excluded nodes), the decision logged
// ("keep-off"), the added nodes and the whole list recorded in state_db
// (kept_off, before the update) and the daemon runs `scontrol update
// JobId=ID ExcNodeList=<the owner's nodes and the nodes the pinned jobs
// ahead may use>` (keepoff.go): Slurm then starts the job on the other
// types, leaving the pinned jobs' GPUs to them, rather than let it
// backfill onto them (Slurm's backfill keeps only the planned starts of
// the jobs it tests, so it lets such a job take those GPUs where it ends
// before a pinned job's planned start, and before the pinned job is
// planned at all; in the simulator, which plans every job as Slurm does
// since BENCHMARKS.md E67, keep-off changes little). When
// no pinned job ahead needs the types any more, or once the job's time
// limit has passed since it was first kept off (planner.KeepOffExpired),
// the added nodes are taken out again ("keep-off-lifted"), planned or
// not. A job is kept off in one spell at most, so a pinned job held and
// released over and over makes two updates, not one a cycle. When Slurm's
// list is no longer the one the daemon set, the owner changed it: the
// list is the owner's from then on and the job is kept off nothing more.
// At most 32 updates a cycle (keepOffPerCycle); a dry run is logged once
// per list, and an update Slurm refuses is tried again 10 s later
// (its record put back to what Slurm holds); the metric
// keep_offs_total{result} counts them. Turning the option off puts
// back the nodes of every job still recorded. Anyone may queue a pinned
// job, so anyone may keep other users' elastic jobs off the nodes that
// job may use for up to their time limit, but never make them wait for a
// type that cannot hold them, never touch a job that is not an elastic
// EasyScale request, and never drop an exclusion its owner set. Job arrays
// and heterogeneous jobs are not kept off (squeue's %i names them
// differently from their ids, so their excluded nodes are not read).
//
// # Trading extra jobs up to faster GPUs
//
// With trade_up (on by default) the planner's round may end an elastic
// job's extra job on slower GPUs and lend it as many idle GPUs of a faster
// type in the same cycle (planner: tradeup.go), weighed at the job's time
// left (its progress since it started, capped by its time limit): the
// daemon submits the new extra jobs with the cycle's grows and, only once
// sbatch took as many GPUs for the job as the trade ends (none were
// withheld or refused), signals the slow extra job as for any shrink (its
// decision says "trading up"); it cancels it after grace_period if it is
// still there. A signalled extra job is passed to the planner as leaving
// (planner.Extra.Leaving): it counts against the job's maximum and the
// lend caps until it is gone and is not traded again. A new worker that
// joins before the slow one left, when every logical worker has a worker,
// waits for a place (runtime/cluster, runtime/torchengine) and is admitted
// at the step boundary that releases the slow one. A new extra job
// that Slurm leaves pending is cancelled after pending_timeout, as any,
// and the job grows again on a later cycle.
//
// # Moving a job to faster GPUs
//
// A d2 job that Slurm started on T4s because nothing faster was free keeps
// their pace to its end, and a long one sets the makespan (BENCHMARKS.md,
// issue 17, E39). With move_to_faster (on by default) each cycle in which
// no allocation changed looks at the running elastic d2 jobs in id order
// (move.go): a job whose nodes are all this daemon's and known, in a
// partition where running jobs may be shrunk, whose extra jobs (if any)
// are all this daemon's records (one of its owner's that Slurm lists with
// its id as parent and the daemon did not record stops the move), not
// moved before and with a known time left (from its status comment's
// progress since it started, capped by its time limit, at the pace its
// extra jobs help keep: E54) is moved
// when nodes of a faster type, none of its own, in its partitions,
// outside its --exclude and none any pending job may start on, can hold
// its GPUs per node with their idle GPUs and those of this daemon's extra
// jobs there (Slurm preempts extra.partition for the requeued job, as for
// an admitted one; a node where another job also runs in extra.partition
// counts none lent, since Slurm may preempt that job instead) (a job
// naming a GPU type, a --nodelist or a --constraint is not moved, nor a
// job array's task or a heterogeneous job's component, which squeue's %i
// prints otherwise than their ids: slurmcli.Placement.Composite), and planner.MoveToFaster finds it among
// the longest running jobs and ending at least 10 % sooner
// there after move_cost (a job with started extra jobs weighed at the GPUs
// it holds with them, at most its maximum, on the fewest nodes of one
// faster type that hold that many when there are: it restarts on its own
// node count and the next cycles grow it onto the rest as onto any idle
// GPUs, which nothing holds for it: a job another user submits while it
// waits may take them, and it then grows onto what is idle, slower GPUs
// included (a tester saw it on the lab), E55). The job is
// re-read by id (running, the same
// nodes, owner, partition and request), the move recorded in state_db
// (moved, with the owner's excluded nodes as squeue lists them while it
// runs, before anything changes), and the daemon runs `scontrol requeue
// ID` and decides ("move"), then cancels the job's extra jobs (after the
// requeue, so that one Slurm refuses leaves the job as it ran; one
// scancel fails to end is cancelled by the next cycle's reconciliation,
// its parent no longer running); once the job waits it sets its excluded nodes
// to its owner's plus the slower nodes it ran on and every other node
// slower than the target that it may run on, so that Slurm does not start
// it on another idle slow node (`scontrol update
// ExcNodeList=`; Slurm refuses that for a running job; nudge_eligible
// leaves the job alone until then), so that Slurm
// restarts it on the faster ones, where the runtime resumes from its
// newest checkpoint, bit-identical (tests/backfill
// TestALongD2JobOnAT4IsMovedToAnIdleV100AndKeepsTheFixedRunsDigest).
// A d1 job that names no GPU type is moved the same way when its
// runtime's status comment says numerics=start-over (easyscale run
// --on-other-numerics=start-over, torch jobs): its checkpoint's bits are
// its old type's, so it starts over from step 0 on the new type,
// bit-identical to a fixed run there; the work it has done counts
// against the move (planner.MoveRequest.Redo: its steps done at the pace
// of those left), it is weighed at its own GPUs on one type, and it
// restarts excluding every node of another type it may run on
// (BENCHMARKS.md E59; TestTheDaemonMovesAD1JobThatStartsOverOntoOneType).
// The re-read before the requeue checks that the comment still says so.
// moved.go follows each record: when the job runs again it is marked
// ran; when it waits again afterwards (an admin's or a node failure's
// requeue), when the nodes left to it while it waits no longer hold its
// GPUs idle (another job took the faster nodes; this daemon's extra jobs
// there count as idle), or at the latest once it has waited 10 minutes
// (moveWaitBound) for the faster nodes, its owner's list is put back
// unless the owner changed it. A requeue
// Slurm refuses (--no-requeue) ends the move. A job is moved once; a dry
// run logs the move once; the metric moves_total{result} counts them. A
// requeue that reports an error counts as done when the job waits
// afterwards (a timeout after slurmctld acted). Only the job's own comment
// decides whether it is moved; another user's pending jobs can only stop
// a move (their nodes are never taken), and another user's job posing as
// its extra job does not.
//
// # Failing extra jobs
//
// An extra job can fail at once; the daemon used to submit another every
// cycle (issue 20: 25 extra jobs in 47 s, about 8,600 failed Slurm jobs a
// day at the default poll, loading slurmctld and the accounting database
// for everyone): the job's rendezvous files point at a dead or hung
// coordinator, its token is broken, or a joiner is refused on the lent
// node. Any user can cause it for their own job. A lend can also fail
// before it runs: sbatch refuses it, or Slurm keeps it pending. Each rule
// below is the planner's (planner.LendEnd.Outcome,
// planner.SubmitFailure.Outcome, planner.PendingLend.Outcome,
// planner.LendHistory.Record, planner.RetryPolicy.MayLend); the daemon
// reads the facts and applies the answer.
//
//   - How the daemon learns a lend failed: reconciliation sees a recorded
//     extra job end (squeue lists it in a final state, or no longer lists
//     it: squeue forgets ended jobs after MinJobAge and sacct is not
//     always there, so the state is not needed). The end is a failure when
//     it was seen at least a minute (planner.FailureSlackSeconds) before
//     the end of the extra job's time limit as recorded at sbatch, while
//     its parent still ran, and the daemon had not signalled it (recorded
//     state signalled); it says nothing when the parent no longer runs,
//     the daemon cancelled it, or Slurm preempted it (PREEMPTED); it is a
//     success otherwise (it ran to its limit). An extra job cancelled by
//     its user is a failure too.
//   - A refused sbatch (no Slurm job is made; a "grow-failed" decision)
//     is a failed lend of the job on the node when Slurm answered the
//     request: sbatch exited with a message such as "Invalid partition
//     name specified", "Requested node configuration is not available",
//     an invalid account or a QOS policy, a job_submit plugin's refusal,
//     or the daemon could not form the request for the job's user. It is
//     not counted when the answer says slurmctld could not take requests
//     (unreachable, socket timeout, munge, standby, "temporarily unable to
//     accept job") or when sbatch gave no answer (could not be run, killed
//     at its timeout, no job id printed): that is Slurm's or the daemon's
//     fault, so the cycle ends there with an error and the daemon backs
//     off (see "When slurmctld is down"), and no one's growth is ever
//     stopped by an outage. A refused job's other grows of that cycle
//     are not submitted. A partition or QOS in [extra] that Slurm does
//     not know is refused for every job: each backs off and stops.
//   - An extra job cancelled because it stayed PENDING past
//     pending_timeout is a failed lend on its node only (the node's count
//     and wait; the job is not held elsewhere and never stopped by it):
//     the GPUs the snapshot saw idle were not free after all. When
//     Slurm's pending reason is a limit of the job's user, account or QOS
//     (Assoc..., QOS...), which holds on every node, it counts against the
//     job too, like any failed lend.
//   - Backoff: after k consecutive failed lends of a job (on any node),
//     the job is not grown before the newest failure + min(retry.base ·
//     2^(k−1), retry.max); after k_n consecutive failed lends on node n,
//     it is not grown onto n before that node's newest failure + the same
//     wait for k_n. A lend that succeeds clears the job's count and its
//     node's, so one broken node backs off alone.
//   - Stop: after retry.stop_after consecutive failed lends the job is not
//     grown at all until its status changes. Its status is its run (the
//     start time squeue reports: a requeue or restart), its request (the
//     es-req part of its comment, not the progress its runtime writes)
//     and its rendezvous coordinator and token files (device, inode, size,
//     modification time: a new coordinator publishes them again), and the
//     daemon's [extra] settings (partition, qos, worker_command: an admin
//     who fixes the partition sbatch refused and restarts the daemon lifts
//     the stops it caused), hashed; the files are not read. The stop is said once: one warning
//     "not growing job: ..." with job_id and node (the node of the failure
//     that stopped it), a "stop-growing" decision, growth_stops_total and
//     the jobs_not_grown gauge; a restarted daemon does not say it again.
//     A status change lifts the stop ("growing job again" at info) but not
//     the backoff: the status is the user's to change, and a changed file
//     must not buy a lend a cycle. With the defaults (1m, 1h, 5) a job
//     whose lends all fail gets 5 extra jobs within about 20 minutes, then
//     none while its status stands still, and at most one round of lends
//     an hour however often it changes. A lend of a stopped job that still
//     runs and reaches its limit lifts the stop too.
//
// The failures are kept in state_db (lend_failures), per job and node, so
// a restarted daemon keeps backing off; a job's are deleted once squeue no
// longer lists the job. A held job's extra jobs stay and are shrunk like
// any other; the planner skips it (planner.RunningJob.NoGrow) or the nodes
// it backs off from (NoGrowNodes), and the cycle's Report lists it in
// Held. Each failed lend is a "lend-failed" decision (a refused sbatch:
// "grow-failed") and counts in lend_failures_total by reason (ended,
// sbatch, pending, changed: its owner changed it from what was lent,
// partition, QOS or account, GPUs, nodes, requeue or time limit, and it
// was cancelled).
//
// # State, restarts and reconciliation
//
// Every decision, every shrink-to-admit and every submitted extra job is
// written to the daemon's SQLite file (backfillstore.Open; one daemon per
// file, enforced by flock
// on the file itself, so deleting state_db's .lock file lets no second
// daemon in; the refusal names the running daemon's PID).
// Reconciliation runs at the start of every cycle, so a restart after
// SIGKILL takes no special path: recorded extra jobs that ended are marked
// with their final state; extra jobs whose parent is no longer running, that
// stayed pending past pending_timeout, or that outlived their grace period
// are cancelled. When slurmctld is unreachable the cycle stops before
// reconciling, so nothing is marked ended or cancelled on stale information.
//
// The file stays bounded ([retention], backfillstore.DB.Prune, at the end
// of every cycle): decisions beyond the newest retention.decisions (default
// 10,000) or older than retention.max_age (a week) are deleted, and so are
// ended extra jobs beyond the newest retention.ended_extras (1,000) or
// older than max_age, but never an extra job Slurm still lists (it must
// stay known as this daemon's); finished shrink-to-admit records older
// than max_age go once Slurm no longer lists their job (a donor requeued
// for longer keeps what it lost counted against admit.max_loss). SQLite reuses the freed
// pages: 10,000 cycles that lend every cycle or two, each lend failing
// (at once, refused by sbatch, or pending past pending_timeout), leave the
// file under 256 KiB (TestTenThousandCyclesLeaveTheDatabaseBounded;
// measured 78 to 98 KiB), where it grew by about 240 bytes a cycle before;
// lend_failures holds one row per job and node that failed.
//
// # When slurmctld is down
//
// A failed cycle changes nothing it has not finished. While slurmctld does
// not answer, the daemon probes it with `scontrol ping` (milliseconds, also
// when it is down) every poll_interval, and runs a full cycle as soon as it
// answers: no doubled delay is left over from the outage. Other failures
// (a command or database error while slurmctld answers) back off the whole
// cycle, poll_interval doubling up to max_backoff, but never past the time
// the earliest scheduled shrink needs a cycle (its signal time, or the end
// of a signalled job's grace period): backoff never makes a shrink late.
//
// # Which jobs are the daemon's (the ownership rule)
//
// The daemon runs as root and could cancel anyone's job, so it signals or
// cancels only extra jobs it submitted itself, as its SQLite file records
// them: job id, user, job name, comment and partition, written when sbatch
// returns. The job id sbatch returned is what makes a job the daemon's:
// an extra job runs under its user's uid, so the user may change its name
// and comment (`scontrol update JobId=ID Name=kept Comment=kept`). A
// recorded id Slurm lists out of the extra job form, under the recorded
// user, is still the daemon's extra job: it is warned about once and then
// handled as any other (its GPUs count as lent toward the caps, it is
// cancelled when its parent ends or after pending_timeout, and shrunk when
// the planner says so). One its owner changed (moved to another partition,
// out of the [extra] qos or out of its parent's account, renamed or not;
// more GPUs, GPUs per task or socket, or running with more GPUs than lent,
// as an exclusive job does; more CPUs than its GPUs' share of the node's,
// at least 2 a GPU, which would keep other jobs off the node's other GPUs
// (a site whose DefCpuPerGPU gives more than that share sees such lends
// cancelled, and logged, as changed);
// more, other or no listed nodes; made requeueable, or a longer time
// limit: a requeued job restarts with a new limit) is cancelled at once
// and counts as a failed lend (reason "changed"): a lend is for what the
// planner lent only. Every record keeps the owner's numeric uid beside the
// name (squeue's UserId; backfillstore schema 10), and owners are compared
// by uid: when the name service cannot resolve a uid (an LDAP or sssd
// outage), Slurm prints a stand-in for the name (24.11 the uid, 22.05
// "nobody", itself a real account), but UserId is still the owner's. A
// recorded id Slurm lists under another uid is not the daemon's (the id was
// reused, also when both print as "nobody"): its record ends, the job is
// left alone. One listed under the owner's uid is the daemon's whatever
// name is printed, and is handled as above. Per-user sums and rules (the
// per-user cap, other daemons' lends, the horizon of other users' work)
// key an owner by the printed name where it gives UserId and by the uid
// where it is a stand-in (View.ownerKey), so 22.05's "nobody" does not
// make several users one. A record written before
// version 10 has no uid and is compared by name: listed under a stand-in
// where a name was recorded, the job is neither taken for another user's
// nor acted on; its record, and a start-small or an unfinished
// shrink-to-admit record of it, waits unchanged for a cycle that prints
// the name (a warning is logged once); a record without a uid is compared
// by the uid its name gives now where the name resolves, so an old record
// of the real nobody is not matched by 22.05's stand-in. An elastic job is
// lent to, and shrunk to admit, only when its printed owner's name gives
// squeue's UserId (not ready otherwise, logged once per job and reason):
// with a stand-in "nobody", the real nobody's rendezvous files in a shared
// work directory passed for another user's job (a helper's finding on
// 22.05). Its rendezvous files must be UserId's, and its extra jobs are
// submitted as root with sbatch --uid=NAME --gid=GROUP, names checked to
// give UserId and the owner's group (Slurm looks digits up as a name
// first). Right before each `scancel --signal=TERM` or
// `scancel` it re-reads the job by id (`squeue --jobs=ID`, fresh
// separators) and acts only when Slurm still lists that id under the
// recorded owner (its uid; its name in a record without one); otherwise it logs an error once and does nothing (a job
// Slurm no longer knows needs nothing either). Name, comment and partition
// are not compared there: they are the owner's to change, and a tester
// who renamed a job hundreds of times a second refused every cancel that
// expected the snapshot's name. A name or comment alone never makes a job
// the daemon's.
//
// The only unrecorded jobs it takes over are its own submissions whose
// record was lost because it was killed between sbatch and the database
// write: before every sbatch it writes a submission intent (parent, user,
// name, comment, partition, node, and the time limit and GPUs lent) and
// deletes it once the job is recorded. An unrecorded job is adopted
// (recorded with the time limit and GPUs its intent lent, then reconciled
// like any recorded one: kept, cancelled if its parent is gone, or if its
// owner changed it while the daemon was down) only when it matches such an
// intent exactly: name es-extra-<parent>, comment
// "es-extra parent=<parent>", partition extra.partition, the parent's user,
// and the intent's node. Intents no job matched for 10 minutes are dropped,
// except one a job matches in all but its owner, printed as a stand-in
// and whose intent has no uid (ownerUnresolved): it waits for the name. An
// intent holds the parent's uid, so one written since version 10 matches
// its job whatever name squeue prints for the owner. What the window between sbatch
// and the database write leaves open (a helper's finding): an owner who,
// in it, moves the waiting job to another node, partition, name or comment
// makes it match no intent, and it is then left alone as any user's job
// (it runs as the owner's own, under Slurm's limits for them, never
// counted as lent); only a crash of the daemon in that window exposes it.
// A job of a record without a uid (written before version 10) whose
// owner's name never resolves again is never acted on: only its own time
// limit bounds it.
//
// Every other job is left alone and logged once, whatever it looks like: a
// user's job that borrows the extra comment, an extra-looking job in another
// partition or of another user, an orphan whose parent is gone, and another
// daemon's extra job (counted as GPUs lent to its user when its parent is a
// running elastic job of the same user; otherwise planned as an ordinary
// job). Such a job ends by its own time limit; Slurm's preemption of
// extra.partition is the backstop for its GPUs.
//
// # Scope
//
// The partitions, nodes and gpu_types keys bound the nodes a daemon manages.
// An elastic job grows only when all of its nodes are managed, and another
// daemon's extra jobs are never acted on (they count toward their user's
// lent GPUs), so several daemons may manage disjoint parts of one cluster;
// give every daemon its own state_db and disjoint nodes.
//
// # Metrics
//
// /metrics on metrics_address serves easyscale_backfill_{cycles_total,
// gaps_found_total, idle_gpus, gpus_lent, gpus_granted_total, grows_total,
// shrinks_total, trades_total, reconciled_total, extra_ends_total, planning_seconds,
// cycle_seconds, slurm_failures_total, lend_failures_total{reason=
// ended|sbatch|pending|changed}, growth_stops_total, jobs_not_grown,
// jobs_backing_off, pruned_rows_total, nudges_total{result},
// sheds_total{result}, keep_offs_total{result}} and the Go/process
// collectors.
package daemon
