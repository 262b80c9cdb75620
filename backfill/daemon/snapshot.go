package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/easyscale/easyscale-slurm/backfill/config"
	"github.com/easyscale/easyscale-slurm/backfill/planner"
	"github.com/easyscale/easyscale-slurm/internal/elastic"
	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
)

// ErrUnreachable is wrapped by the snapshot error when slurmctld does not
// answer (`scontrol ping` fails); the daemon then keeps its state untouched
// and retries with backoff.
var ErrUnreachable = errors.New("slurmctld is unreachable")

// ExtraCommentPrefix starts the comment of every extra job:
// "es-extra parent=<JOBID>".
const ExtraCommentPrefix = "es-extra"

// ExtraComment returns the comment of an extra job lent to parent.
func ExtraComment(parent string) string { return ExtraCommentPrefix + " parent=" + parent }

// ExtraJobName returns the job name of an extra job lent to parent.
func ExtraJobName(parent string) string { return "es-extra-" + parent }

// parseExtraComment returns the parent job id of an extra job's comment, or
// ok=false when the comment is not exactly ExtraComment(parent) for a
// numeric parent (extra words, other spacing or a non-numeric id are a
// user's comment, not ours).
func parseExtraComment(c string) (parent string, ok bool) {
	v, found := strings.CutPrefix(c, ExtraCommentPrefix+" parent=")
	if !found || !slurmcli.Digits(v) {
		return "", false
	}
	return v, true
}

// extraParent returns the parent of j when j looks like an extra job: its
// comment is exactly ExtraComment(parent) and its name exactly
// ExtraJobName(parent). Anything else is an ordinary job, whoever owns it.
func extraParent(j slurmcli.Job) (string, bool) {
	parent, ok := parseExtraComment(j.Comment)
	if !ok || j.Name != ExtraJobName(parent) {
		return "", false
	}
	return parent, true
}

// NodeView is one node as the daemon sees it.
type NodeView struct {
	Name, GPUType string
	// Total and Used GPUs (sinfo Gres / GresUsed).
	Total, Used int
	// CPUs is the node's CPU count (the T of sinfo's CPUsState "A/I/O/T";
	// 0 when unreadable).
	CPUs int
	// Managed: the node is in the configured partitions and node list and
	// its GPU type may be lent. Lendable: managed, up, with an idle CPU.
	// Schedulable: Slurm may start jobs on it (idle, mixed, allocated or
	// planned; not down, drained or not responding).
	Managed, Lendable, Schedulable bool
	// Partitions are the partitions the node is in (sinfo).
	Partitions []string
	// Weight is the node's scheduling weight (`scontrol show node`
	// Weight=; Slurm allocates nodes of lower weight first), read only
	// when a job waits for resources and shrink-to-admit or start-small is
	// on: 0 when not read.
	Weight int
}

// ElasticJob is a running job whose comment is an EasyScale request.
type ElasticJob struct {
	Job     slurmcli.Job
	Request elastic.Request
	// Progress is the runtime's report in the status comment (`es
	// step=S/T workers=W/L ...`); nil before the runtime wrote one.
	Progress *elastic.Progress
	// User, Account and WorkDir come from squeue (the same record as Job).
	User, Account, WorkDir string
	// Rendezvous is WorkDir/.easyscale/JOBID; Ready is true once its
	// coordinator and token files are there, its user's and of this run
	// (rendezvous.go); NotReady says why not ("" when Ready).
	Rendezvous string
	Ready      bool
	NotReady   string
	// Status is the job's status as far as failing lends go
	// ([statusKey]): a change lifts a stop of its growth
	// (planner.RetryPolicy.MayLend).
	Status string
	// End is when its time limit ends (zero: unlimited or unknown).
	End time.Time
	// Base is its own allocation: GPUs by node. BaseGuessed: its GPUs
	// were requested per job on more than one node, so Base's split is a
	// guess (allocation); it is then never shrunk nor shed.
	Base        []NodeAlloc
	BaseGuessed bool
	// Managed: every node of Base is managed by this daemon.
	Managed bool
}

// NodeAlloc is a GPU count on one node.
type NodeAlloc struct {
	Node string
	GPUs int
}

// ExtraView is an extra job as Slurm lists it.
type ExtraView struct {
	Job    slurmcli.Job
	Parent string
	// Node and GPUs: from NodeList and TRES-per-node once it runs ("" / 0
	// while pending).
	Node string
	GPUs int
	// End is when its time limit ends; zero while pending.
	End time.Time
}

// View is one consistent reading of the cluster.
type View struct {
	Now   time.Time
	Nodes []NodeView
	// Running and Pending list the jobs that are not extra jobs.
	Running, Pending []slurmcli.Job
	// Elastic lists the running elastic jobs, by id.
	Elastic map[string]*ElasticJob
	// Extras are the live (pending or running) extra jobs, by id: jobs in
	// the extra job form (extraParent), and recorded extra jobs their owner
	// renamed, which reconcile moves here from the ordinary jobs
	// (renamedExtra). Ended maps extra jobs Slurm still lists in a final
	// state to that state.
	Extras map[string]*ExtraView
	Ended  map[string]string
	// Lookalikes are live jobs whose comment starts with
	// ExtraCommentPrefix but that are not in the extra job form (name and
	// comment exact): ordinary jobs, listed only to log them once.
	Lookalikes map[string]*ExtraView
	// All holds every job squeue listed and the snapshot could read, by id.
	All map[string]slurmcli.Job
	// Placements are the pending jobs' --exclude and --constraint, by id,
	// read when a job waits for resources; a job without an entry (or a
	// nil map: squeue failed) is one whose placement cannot be checked, so
	// shrink-to-admit and start-small leave it alone.
	Placements map[string]slurmcli.Placement
	// Priorities are the pending jobs' priorities (squeue's %Q, read with
	// Placements), by id, the tasks of job arrays and the components of
	// heterogeneous jobs included, which Placements leaves out: such a job
	// is never acted on but is ranked as Slurm ranks it (priorityOf). A
	// job without an entry has a priority the daemon could not read.
	Priorities map[string]uint64
	// InReservation holds, by id, the pending jobs (read with Priorities)
	// that run in an advance reservation (squeue's %v): Slurm ranks them
	// ahead of every other job of their tier
	// (planner.PriorityKey.InReservation). A MAGNETIC reservation, which
	// Slurm also tries for jobs that do not name it (a tester saw them
	// listed twice in the backfill order), is not modelled: such jobs are
	// ranked by their priority.
	InReservation map[string]bool
	// RunningPlacements are the running jobs' --exclude and --constraint,
	// by id, read when an elastic job may be grown (one is ready): its
	// extra jobs go only where its owner let it run (runningJob). A nil
	// map (squeue failed) or a job without an entry grows nowhere.
	RunningPlacements map[string]slurmcli.Placement
	// RunningComposite holds, by id, how squeue's %i prints each running
	// job that is a task of a job array or a component of a heterogeneous
	// job (slurmcli.Placement.Composite), read with RunningPlacements:
	// such a job is never shrunk or shed (planner.DonorFacts.Composite).
	RunningComposite map[string]string
	// RunningPlacementsUnread is why RunningPlacements could not be read
	// (nil: read, or not needed).
	RunningPlacementsUnread error
	// PendingPlacementsUnread is why Placements could not be read this
	// cycle (nil: read, or not needed): nothing is admitted, started small
	// or kept off.
	PendingPlacementsUnread error
	// Reservations are Slurm's advance reservations (scontrol show
	// reservation), read with Placements when shrink-to-admit or
	// start-small may act: their nodes count as reserved from their start
	// (reservations). ReservationsUnread is why they could not be read
	// (nil: read, or not needed): nothing is admitted or started small.
	// Reservations is not nil once read, none or some.
	Reservations       []slurmcli.Reservation
	ReservationsUnread error
	// BackfillInterval is Slurm's bf_interval, read with Reservations (at
	// most every 10 min); BackfillIntervalUnread is why it could not be
	// (then Slurm's default, 30 s, stands in).
	BackfillInterval       time.Duration
	BackfillIntervalUnread error
	// ReservationsFirst: Slurm ranks a pending job in an advance
	// reservation ahead of jobs of higher partition tiers too (no
	// PreemptType=preempt/partition_prio, whose preemption check ranks the
	// higher tier first: sort_job_queue2), read with BackfillInterval; false
	// when it could not be read (docs/deploy.md requires partition_prio).
	ReservationsFirst bool
	// reservationIndex is the pending jobs' and advance reservations'
	// planned starts, indexed by the first reservations call of the cycle
	// (admission and start-small both ask).
	reservationIndex *planner.Reservations[string, string]
	// peers are the jobs Daemon.peerMedianFor counts, read once a cycle
	// (shrink-to-admit and start-small both ask); nil until then.
	peers *planner.Peers
	// Partitions are the partitions' MaxTime (0: UNLIMITED) and
	// PriorityTier by name, read with Placements
	// (slurmcli.Runner.Partitions); a partition without an entry (or a nil
	// map: sinfo failed, PartitionsUnread) has an unknown MaxTime, so no
	// limit in it is raised ([limitCap]), and an unknown tier ([tierOf]).
	Partitions       map[string]slurmcli.Partition
	PartitionsUnread error
	// Unreadable are the jobs left out of this view because their record
	// could not be read (by job id; "line N" when squeue's record had no
	// readable id), with why. Reconciliation leaves records of these ids
	// alone for the cycle.
	Unreadable map[string]error
	// BadRequests are running jobs whose comment starts as an EasyScale
	// one ("es-req ", "es ") but does not parse (e.g. changed with
	// `scontrol update Comment=`), by job id, with why: they are not
	// elastic jobs to the planner (never grown), and the daemon warns once.
	BadRequests map[string]error
	// Names are every node and partition name sinfo listed.
	Names SlurmNames
	// WeightsUnread is why the nodes' weights could not be read (nil: read,
	// or not needed this cycle; see NodeView.Weight).
	WeightsUnread error

	// userID looks up a user name's uid (Snapshotter.UserID); uids caches
	// its answers for the view's cycle (ownerUID).
	userID func(name string) (uint32, error)
	uids   map[string]string
}

// ownerUID is the uid the name service gives user name now, as digits, or
// "" when it gives none (the name does not resolve: an outage, or a name
// no longer known), looked up once per view.
func (v *View) ownerUID(name string) string {
	if uid, ok := v.uids[name]; ok {
		return uid
	}
	uid := ""
	if v.userID != nil && name != "" {
		if id, err := v.userID(name); err == nil {
			uid = strconv.FormatUint(uint64(id), 10)
		}
	}
	if v.uids == nil {
		v.uids = map[string]string{}
	}
	v.uids[name] = uid
	return uid
}

// limitCap is the cap on the time limit of a job in partitions (squeue's
// comma-separated list): the smallest MaxTime among them (v.Partitions),
// none when all are UNLIMITED, unknown when one was not read. The daemon
// raises limits as root, past Slurm's own check of MaxTime; it reads no
// QOS MaxWall.
func limitCap(v *View, partitions string) planner.LimitCap {
	var c planner.LimitCap
	names := slurmcli.SplitPartitions(partitions)
	if len(names) == 0 {
		return planner.LimitCap{Unknown: true, Partition: partitions} // no partition named: its MaxTime is not known
	}
	for _, p := range names {
		part, ok := v.Partitions[p]
		d := part.MaxTime
		switch {
		case !ok:
			return planner.LimitCap{Unknown: true, Partition: p}
		case d > 0 && (c.Max == 0 || d < c.Max):
			c = planner.LimitCap{Max: d, Partition: p}
		}
	}
	return c
}

func (v *View) node(name string) *NodeView {
	for i := range v.Nodes {
		if v.Nodes[i].Name == name {
			return &v.Nodes[i]
		}
	}
	return nil
}

// Snapshotter reads the cluster through Slurm's client commands.
type Snapshotter struct {
	Slurm  slurmcli.Runner
	Config *config.Config
	// Loc is the time zone Slurm prints times in (nil: time.Local).
	Loc *time.Location
	// UserID returns the uid the name service gives a user name (nil: the
	// system's user database): an elastic job is lent to only when its
	// printed owner's name gives squeue's UserId (not a stand-in), and a
	// record without a uid is compared by the uid its name gives now
	// (View.ownerUID).
	UserID func(name string) (uint32, error)

	// sched is Slurm's bf_interval and PreemptType as last read (bfRead,
	// the snapshot's now), re-read after bfIntervalTTL.
	sched  slurmcli.SchedulerConfig
	bfRead time.Time
}

// bfIntervalTTL is how long a read bf_interval is used before `scontrol
// show config` is read again: an admin's `scontrol reconfigure` is seen
// within it.
const bfIntervalTTL = 10 * time.Minute

// schedulerConfig returns Slurm's bf_interval and PreemptType
// (slurmcli.Runner.SchedulerConfig), read at most once per bfIntervalTTL;
// unread is why they could not be read (then Slurm's default bf_interval,
// slurmcli.DefaultBackfillInterval, and preempt/partition_prio, which
// docs/deploy.md requires, stand in).
func (s *Snapshotter) schedulerConfig(ctx context.Context, now time.Time) (c slurmcli.SchedulerConfig, unread error) {
	if !s.bfRead.IsZero() && now.Sub(s.bfRead) < bfIntervalTTL {
		return s.sched, nil
	}
	c, err := s.Slurm.SchedulerConfig(ctx)
	if err != nil {
		return slurmcli.SchedulerConfig{BackfillInterval: slurmcli.DefaultBackfillInterval, PreemptType: "preempt/partition_prio"}, err
	}
	s.sched, s.bfRead = c, now
	return c, nil
}

// userID is UserID, or the system's user database.
func (s *Snapshotter) userID() func(string) (uint32, error) {
	if s.UserID != nil {
		return s.UserID
	}
	return systemUserID
}

// Snapshot reads nodes and jobs and returns the view at now. A job whose
// record cannot be read (squeue's, or its node list or GRES) is left out
// and listed in View.Unreadable; the others make the view. Errors wrap
// ErrUnreachable when slurmctld does not answer, else say which command
// failed.
func (s *Snapshotter) Snapshot(ctx context.Context, now time.Time) (*View, error) {
	if err := s.Ping(ctx); err != nil {
		return nil, err
	}
	nodes, err := s.Slurm.Sinfo(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading nodes: %w", err)
	}
	jobs, skipped, err := s.Slurm.ListJobs(ctx, "--states=all")
	if err != nil {
		return nil, fmt.Errorf("reading jobs: %w", err)
	}
	v := &View{Now: now, Elastic: map[string]*ElasticJob{}, Extras: map[string]*ExtraView{}, Ended: map[string]string{},
		Lookalikes: map[string]*ExtraView{}, All: map[string]slurmcli.Job{}, Unreadable: map[string]error{},
		BadRequests: map[string]error{}, userID: s.userID()}
	for _, pe := range skipped {
		key := pe.ID
		if key == "" {
			key = fmt.Sprintf("line %d", pe.Line)
		}
		v.Unreadable[key] = pe
	}
	v.Nodes = s.nodes(nodes)
	v.Names = slurmNames(nodes)
	for _, j := range jobs {
		if err := s.addJob(v, j); err != nil {
			v.Unreadable[j.ID] = err
			continue
		}
		v.All[j.ID] = j
	}
	if v.anyReady() {
		ps, err := s.Slurm.RunningPlacements(ctx)
		if err != nil {
			v.RunningPlacementsUnread = err // not fatal: no job is grown, shrunk or shed this cycle
		}
		v.setRunningPlacements(ps)
		// A job may grow: a lend must end before an advance reservation
		// starts on its node, or Slurm leaves the extra job pending
		// (ReqNodeNotAvail) for pending_timeout (helper 112's, on the lab).
		s.readReservations(ctx, v)
	}
	// Only shrink-to-admit, start-small and keep_off_pinned read
	// placements (and the pending jobs' priorities with them): no extra
	// squeue per cycle when they are off or no job waits (for resources or
	// its turn, for the first two).
	acts := s.Config.Admit.Enabled || s.Config.StartSmallRule() != planner.StartSmallOff
	if acts && slices.ContainsFunc(v.Pending, func(j slurmcli.Job) bool { return j.Reason == "Resources" || j.Reason == "Priority" }) ||
		s.Config.KeepOffPinned && len(v.Pending) > 0 {
		ps, err := s.Slurm.PendingPlacements(ctx)
		if err != nil {
			v.PendingPlacementsUnread = err // not fatal: nothing is admitted or started small this cycle
		}
		v.setPendingPlacements(ps)
		if acts {
			s.readReservations(ctx, v)
			var sc slurmcli.SchedulerConfig
			sc, v.BackfillIntervalUnread = s.schedulerConfig(ctx, v.Now)
			v.BackfillInterval, v.ReservationsFirst = sc.BackfillInterval, !sc.PartitionPreemption()
		}
		if v.Partitions, err = s.Slurm.Partitions(ctx); err != nil {
			v.Partitions, v.PartitionsUnread = nil, err // not fatal: no limit is raised and nothing admitted this cycle
		}
		if v.Placements != nil && acts { // keep-off alone places no job
			v.WeightsUnread = s.readWeights(ctx, v.Nodes)
		}
	}
	return v, nil
}

// anyReady reports whether an elastic job of v is ready to be grown.
func (v *View) anyReady() bool {
	for _, e := range v.Elastic {
		if e.Ready {
			return true
		}
	}
	return false
}

// readWeights sets the nodes' scheduling weights from `scontrol show node
// -o`: the admission and start-small checks predict where Slurm places a
// job (planner.Cluster.Place), and Slurm takes nodes of lower
// weight first. A node scontrol does not list, or lists without a readable
// weight, gets Slurm's default, 1. An error leaves every weight 0 (equal)
// and is returned for the daemon to log; it is not fatal.
func (s *Snapshotter) readWeights(ctx context.Context, nodes []NodeView) error {
	details, err := s.Slurm.ShowNodes(ctx)
	if err != nil {
		return fmt.Errorf("reading the nodes' weights: %w", err)
	}
	weight := make(map[string]int, len(details))
	for _, d := range details {
		weight[d.Name] = d.Weight
	}
	for i := range nodes {
		nodes[i].Weight = max(weight[nodes[i].Name], 1)
	}
	return nil
}

// Ping runs `scontrol ping`, which answers in milliseconds also when the
// controller is down. The error wraps ErrUnreachable unless it says UP.
func (s *Snapshotter) Ping(ctx context.Context) error {
	out, err := s.Slurm.Output(ctx, "scontrol", "ping")
	if err == nil && strings.Contains(string(out), "UP") {
		return nil
	}
	if err == nil {
		err = fmt.Errorf("scontrol ping: %s", strings.TrimSpace(string(out)))
	}
	return fmt.Errorf("%w: %w", ErrUnreachable, err)
}

func (s *Snapshotter) loc() *time.Location {
	if s.Loc == nil {
		return time.Local
	}
	return s.Loc
}

func (s *Snapshotter) nodes(in []slurmcli.Node) []NodeView {
	c := s.Config
	out := make([]NodeView, 0, len(in))
	for _, n := range in {
		typ, ok := gpuType(n.GRES)
		if !ok {
			continue // CPU-only or several GPU types: the planner needs one type per node
		}
		total, used := n.GPUs()
		if _, hasSpeed := c.Speeds[typ]; !hasSpeed || total == 0 {
			continue
		}
		nv := NodeView{Name: n.Name, GPUType: typ, Total: total, Used: min(used, total), Partitions: n.Partitions, CPUs: cpusState(n.CPUs, 3)}
		nv.Managed = anyIn(n.Partitions, c.Partitions) && (len(c.Nodes) == 0 || in1(n.Name, c.Nodes)) &&
			(len(c.GPUTypes) == 0 || in1(typ, c.GPUTypes))
		nv.Lendable = nv.Managed && usableState(n.State) && idleCPUs(n.CPUs) > 0
		nv.Schedulable = schedulable(n.State)
		out = append(out, nv)
	}
	return out
}

// gpuType returns the node's only GPU type ("" when untyped).
func gpuType(gres []slurmcli.GRES) (string, bool) {
	typ, found := "", false
	for _, g := range gres {
		if g.Name != "gpu" {
			continue
		}
		if found && g.Type != typ {
			return "", false
		}
		typ, found = g.Type, true
	}
	return typ, found
}

// usableState: idle or mixed nodes (also "planned": idle now, reserved later
// by backfill, which is exactly a gap), not drained, down or completing.
func usableState(state string) bool {
	switch strings.TrimRight(state, "*~#!%$@^-+") {
	case "idle", "mixed", "planned":
		return !strings.HasSuffix(state, "*")
	}
	return false
}

// idleCPUs reads the I of sinfo's CPUsState "A/I/O/T" (0 when unreadable).
func idleCPUs(s string) int { return cpusState(s, 1) }

// cpusState reads field i of sinfo's CPUsState "A/I/O/T" (0 when
// unreadable or negative).
func cpusState(s string, i int) int {
	f := strings.Split(s, "/")
	if len(f) != 4 {
		return 0
	}
	n, err := strconv.Atoi(f[i])
	if err != nil || n < 0 {
		return 0
	}
	return n
}

func anyIn(have, allowed []string) bool {
	if len(allowed) == 0 {
		return true
	}
	for _, h := range have {
		if in1(h, allowed) {
			return true
		}
	}
	return false
}

func in1(s string, list []string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

var finalStates = map[string]bool{"COMPLETED": true, "CANCELLED": true, "FAILED": true, "TIMEOUT": true,
	"PREEMPTED": true, "NODE_FAIL": true, "OUT_OF_MEMORY": true, "BOOT_FAIL": true, "DEADLINE": true}

// addJob files j in v; on error v is unchanged.
func (s *Snapshotter) addJob(v *View, j slurmcli.Job) error {
	if parent, ok := extraParent(j); ok {
		return s.addExtra(v, j, parent)
	}
	if strings.HasPrefix(j.Comment, ExtraCommentPrefix) && !finalStates[j.State] {
		v.Lookalikes[j.ID] = &ExtraView{Job: j, Node: j.NodeList}
	}
	switch j.State {
	case "PENDING":
		v.Pending = append(v.Pending, j)
	case "RUNNING":
		c, err := elastic.ParseComment(j.Comment)
		switch {
		case err == nil:
			if err := s.addElastic(v, j, c); err != nil {
				return err
			}
		case !errors.Is(err, elastic.ErrNotEasyScale):
			v.BadRequests[j.ID] = err
		}
		v.Running = append(v.Running, j)
	}
	return nil
}

func (s *Snapshotter) addExtra(v *View, j slurmcli.Job, parent string) error {
	if finalStates[j.State] {
		v.Ended[j.ID] = j.State
		return nil
	}
	x, err := s.extraView(j, parent)
	if err != nil {
		return err
	}
	v.Extras[j.ID] = x
	return nil
}

// extraView reads live job j as an extra job lent to parent (also a
// recorded one its owner renamed: reconcile.go).
func (s *Snapshotter) extraView(j slurmcli.Job, parent string) (*ExtraView, error) {
	x := &ExtraView{Job: j, Parent: parent}
	if j.State != "PENDING" {
		alloc, _, err := allocation(j)
		if err != nil {
			return nil, err
		}
		if len(alloc) == 1 {
			x.Node, x.GPUs = alloc[0].Node, alloc[0].GPUs
		}
		x.End, _ = slurmcli.ParseTime(j.EndTime, s.loc())
	}
	return x, nil
}

func (s *Snapshotter) addElastic(v *View, j slurmcli.Job, c elastic.Comment) error {
	base, exact, err := allocation(j)
	if err != nil {
		return err
	}
	e := &ElasticJob{Job: j, Request: c.Request, Progress: c.Progress, User: j.User, Account: j.Account, WorkDir: j.WorkDir, Base: base,
		BaseGuessed: !exact, Managed: len(base) > 0}
	e.End, _ = slurmcli.ParseTime(j.EndTime, s.loc())
	var coord, token os.FileInfo
	switch {
	case j.WorkDir == "":
		e.NotReady = "no working directory"
	case v.ownerUID(j.User) != j.UID:
		// A stand-in name: Slurm prints one for a uid the name service
		// cannot resolve (24.11 the uid, 22.05 "nobody", which is also a
		// real account). Extra jobs are submitted as the owner (sbatch
		// --uid) and its rendezvous files must be the owner's (squeue's
		// UserId): a printed "nobody" would let the real nobody's files pass
		// for another user's job (a helper's finding on 22.05: its job was
		// shrunk for nobody's and nobody's worker joined it).
		e.NotReady = fmt.Sprintf("squeue printed its owner as %q, whose uid is %q to the name service, not the job's uid %s "+
			"(the name service does not resolve the owner)", j.User, v.ownerUID(j.User), j.UID)
	default:
		e.Rendezvous = filepath.Join(j.WorkDir, ".easyscale", j.ID)
		uid, err := strconv.ParseUint(j.UID, 10, 32)
		if err == nil {
			start, _ := slurmcli.ParseTime(j.StartTime, s.loc())
			coord, token, err = rendezvousFiles(e.Rendezvous, uint32(uid), start)
		}
		if e.Ready = err == nil; err != nil {
			e.NotReady = err.Error()
		}
	}
	e.Status = statusKey(j, c.Request, s.Config.Extra, coord, token)
	for _, b := range base {
		if n := v.node(b.Node); n == nil || !n.Managed {
			e.Managed = false
		}
	}
	v.Elastic[j.ID] = e
	return nil
}

// statusKey is an elastic job's status as far as its failing lends go:
// what could make its lends work again. It covers the job's run (its start
// time: a requeue or restart starts another run), its request (the es-req
// part of its comment; the progress its runtime writes there is left out,
// since a job that trains does not make lends work), and the identity of
// its rendezvous coordinator and token files (device, inode, size and
// modification time: a new coordinator publishes them again, by rename),
// and the daemon's own [extra] settings (partition, QOS, worker command):
// an admin who fixes a setting that made sbatch refuse every extra job
// (an unknown partition) and restarts the daemon lifts the stops it caused.
// Files are not read: they are the user's, and the daemon runs as root.
// The key is a SHA-256 in hex, whatever the user wrote; it only ever
// compares equal or not, and it is stored under the job's id.
func statusKey(j slurmcli.Job, req elastic.Request, extra config.Extra, files ...os.FileInfo) string {
	h := sha256.New()
	fmt.Fprintf(h, "start %q\nrequest %q\n", j.StartTime, elastic.Comment{Request: req}.String()) // canonical: defaults filled
	fmt.Fprintf(h, "extra %q %q %q\n", extra.Partition, extra.QOS, extra.WorkerCommand)
	for _, fi := range files {
		if fi == nil {
			fmt.Fprintf(h, "file none\n")
			continue
		}
		var dev, ino uint64
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			dev, ino = uint64(st.Dev), st.Ino
		}
		fmt.Fprintf(h, "file %d %d %d %d\n", dev, ino, fi.Size(), fi.ModTime().UnixNano())
	}
	return hex.EncodeToString(h.Sum(nil))
}

// allocation spreads a running job's GPUs over its nodes: TRES-per-node
// GPUs on every node, or a TRES-per-job count split evenly (the first nodes
// get the remainder). exact is false for the latter on more than one node:
// Slurm need not spread `--gpus=N` evenly (a tester's job with --gpus=5 on
// two nodes held 1 and 4), and squeue does not say how it did.
func allocation(j slurmcli.Job) (out []NodeAlloc, exact bool, err error) {
	names, err := slurmcli.ExpandHostlist(j.NodeList)
	if err != nil {
		return nil, false, fmt.Errorf("job %s: node list: %w", j.ID, err)
	}
	if len(names) == 0 {
		return nil, true, nil
	}
	perNode, err := slurmcli.ParseGRES(j.TRESPerNode)
	if err != nil {
		return nil, false, fmt.Errorf("job %s: %w", j.ID, err)
	}
	out = make([]NodeAlloc, len(names))
	if g := slurmcli.GPUs(perNode); g > 0 {
		for i, n := range names {
			out[i] = NodeAlloc{n, g}
		}
		return out, true, nil
	}
	total, err := j.GPUs()
	if err != nil {
		return nil, false, fmt.Errorf("job %s: %w", j.ID, err)
	}
	for i, n := range names {
		out[i] = NodeAlloc{n, total / len(names)}
		if i < total%len(names) {
			out[i].GPUs++
		}
	}
	return out, len(names) == 1 || total == 0, nil
}

// setRunningPlacements sets v.RunningPlacements to the placements of the
// running jobs the daemon may grow in ps (slurmcli.WholeJobs: an array
// task is never grown) and v.RunningComposite to the others' %i; a nil ps
// (squeue failed) leaves both nil.
func (v *View) setRunningPlacements(ps map[string]slurmcli.Placement) {
	v.RunningPlacements, v.RunningComposite = slurmcli.WholeJobs(ps), nil
	for id, p := range ps {
		if p.Composite != "" {
			if v.RunningComposite == nil {
				v.RunningComposite = map[string]string{}
			}
			v.RunningComposite[id] = p.Composite
		}
	}
}

// setPendingPlacements sets v.Placements to the placements of the jobs
// the daemon may act on in ps (slurmcli.WholeJobs) and v.Priorities to
// every pending job's priority in ps (v.InReservation those in an advance
// reservation); a nil ps (squeue failed) leaves them nil.
func (v *View) setPendingPlacements(ps map[string]slurmcli.Placement) {
	v.Placements, v.Priorities, v.InReservation = slurmcli.WholeJobs(ps), nil, nil
	if ps == nil {
		return
	}
	v.Priorities = make(map[string]uint64, len(ps))
	for id, p := range ps {
		v.Priorities[id] = p.Priority
		if p.Reservation != "" {
			if v.InReservation == nil {
				v.InReservation = map[string]bool{}
			}
			v.InReservation[id] = true
		}
	}
}

// compositeOf says whether running job id is a job array's task or a
// heterogeneous job's component (composite, how squeue's %i prints it) or
// whether that could not be read this cycle (unread: the running
// placements were not read).
func (v *View) compositeOf(id string) (composite string, unread bool) {
	if v.RunningPlacements == nil {
		return "", true
	}
	return v.RunningComposite[id], false
}

// readReservations reads Slurm's advance reservations into v once a cycle
// (growth, shrink-to-admit and start-small all need them). A failure is
// not fatal: v.ReservationsUnread says why, and nothing is grown, admitted
// or started small this cycle.
func (s *Snapshotter) readReservations(ctx context.Context, v *View) {
	if v.Reservations != nil || v.ReservationsUnread != nil {
		return
	}
	var err error
	if v.Reservations, err = s.Slurm.Reservations(ctx, s.loc()); err != nil {
		v.Reservations, v.ReservationsUnread = nil, err
	}
}
