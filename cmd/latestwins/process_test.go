package main

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/latestwins/latestwins/internal/authority"
)

const (
	shaA   = "aaaaaaa1aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	shaB   = "bbbbbbb2bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	shaC   = "ccccccc3cccccccccccccccccccccccccccccccc"
	mainRf = "refs/heads/main"
)

// deployScript is a deploy command that writes the fencing variables it was given into the file
// named by its first argument.
const deployScript = `printf '%s %s\n' "$LATESTWINS_GENERATION" "$LATESTWINS_FENCING_TOKEN" > "$1"`

// TestProcessesForcedRace runs A -> B -> C as separate processes: A and B claim and enter their
// builds, C claims later, builds and deploys; then A and B try to deploy and are refused before
// their deploy commands start.
func TestProcessesForcedRace(t *testing.T) {
	f := newDynamoFixture(t)
	passes := []struct {
		name, sha string
		gen       int64
	}{{"A", shaA, 1}, {"B", shaB, 2}, {"C", shaC, 3}}
	for _, p := range passes {
		state := f.path(p.name + ".json")
		r := f.must(0, "claim", "--environment", "prod", "--scopes", "api", "--sha", p.sha, "--ref", mainRf,
			"--intent-id", "push-"+p.name, "--state", state, "--json")
		var res authority.AcceptResult
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
			t.Fatalf("claim %s --json: %v\n%s", p.name, err, r.stdout)
		}
		if res.Generation != p.gen || res.Claim == nil || !slices.Equal(res.Claim.Scopes(), []string{"api"}) {
			t.Fatalf("claim %s: generation %d, claim %+v; want generation %d claiming api", p.name, res.Generation, res.Claim, p.gen)
		}
		// The pass is now building; the test holds it there by not going on with it.
		r = f.must(0, "gate", "--state", state, "--phase", "build")
		if want := fmt.Sprintf("authorized: generation %d may enter build", p.gen); !strings.Contains(r.stdout, want) {
			t.Fatalf("gate build %s: %q, want %q", p.name, r.stdout, want)
		}
	}

	r := f.must(0, "run", "--state", f.path("C.json"), "--", "sh", "-c", deployScript, "sh", f.path("deployed-C"))
	if !strings.Contains(r.stdout, "prod/api: deployed") {
		t.Fatalf("run C stdout: %q", r.stdout)
	}
	if got := readMarker(t, f.path("deployed-C")); got != "3 1" {
		t.Fatalf("C's deploy command got generation and token %q, want \"3 1\"", got)
	}

	// A and B finish their builds now, together, and must stop before deploying.
	late := map[string]*proc{}
	for _, name := range []string{"A", "B"} {
		late[name] = f.start("run", "--state", f.path(name+".json"), "--", "sh", "-c", deployScript, "sh", f.path("deployed-"+name))
	}
	for name, p := range late {
		r := p.wait()
		if r.code != 3 {
			t.Fatalf("run %s: exit %d, want 3 (superseded)\nstdout:\n%s\nstderr:\n%s", name, r.code, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stderr, "superseded by generation 3 ("+shaC[:7]+")") {
			t.Fatalf("run %s stderr: %q", name, r.stderr)
		}
		if _, err := os.Stat(f.path("deployed-" + name)); !os.IsNotExist(err) {
			t.Fatalf("superseded pass %s ran its deploy command (stat: %v)", name, err)
		}
	}

	s := f.status("prod")
	api := s.Scopes["api"]
	if api == nil || api.Live == nil || api.Live.Sha != shaC || api.Live.Generation != 3 {
		t.Fatalf("live is not C at generation 3: %+v", api)
	}
	if s.Observed != s.Desired || s.Desired != 3 || !s.Settled || api.Pending != nil {
		t.Fatalf("status: observed %d, desired %d, settled %v, pending %+v; want 3/3 settled", s.Observed, s.Desired, s.Settled, api.Pending)
	}
	if api.LeaseHeld || api.Lease.Holder != "" {
		t.Fatalf("lease still held after C completed: %+v", api.Lease)
	}

	events := f.history("prod")
	for _, gen := range []int64{1, 2} {
		want := fmt.Sprintf("Pass %d stopped before deploy", gen)
		if !slices.ContainsFunc(eventsOf(events, authority.EventStopped), func(ev authority.Event) bool {
			return ev.Generation == gen && strings.HasPrefix(ev.Message, want)
		}) {
			t.Errorf("history has no %q event:\n%s", want, f.must(0, "history", "prod").stdout)
		}
	}
	deployed := eventsOf(events, authority.EventDeployed)
	if len(deployed) != 1 || deployed[0].Generation != 3 || deployed[0].Sha != shaC {
		t.Errorf("deployed events %+v, want exactly C's", deployed)
	}
	if leased := eventsOf(events, authority.EventLeased); len(leased) != 1 || leased[0].Generation != 3 {
		t.Errorf("leased events %+v: only C may have entered deploy", leased)
	}
	text := f.must(0, "history", "prod").stdout
	for _, want := range []string{"Pass 1 stopped before deploy", "Pass 2 stopped before deploy", "Deployed " + shaC[:7] + " (generation 3)"} {
		if !strings.Contains(text, want) {
			t.Errorf("history text lacks %q:\n%s", want, text)
		}
	}
}

// killedDeploy starts `run` on intent push-old whose deploy command signals through a named pipe and
// then sleeps, and kills the run process and the command's process group with SIGKILL once the
// command runs, as a machine that died would lose both. It returns the killed pass's lease holder.
func killedDeploy(t *testing.T, f *fixture) string {
	t.Helper()
	fifo := f.path("started")
	lines := fifoLine(t, fifo)
	p := f.start("run", "--environment", "prod", "--scopes", "api", "--sha", shaA, "--ref", mainRf, "--intent-id", "push-old",
		"--lease-ttl", "6s", "--grace", "2s", "--lease-skew", "1ms",
		"--", "sh", "-c", `echo "$$" > "$1"; sleep 600`, "sh", fifo)
	line := awaitLine(t, lines, p)
	pgid, err := strconv.Atoi(line)
	if err != nil || pgid <= 1 {
		t.Fatalf("the deploy command sent %q, not its pid", line)
	}
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL the run process: %v", err)
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL the deploy command's process group: %v", err)
	}
	<-p.done
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the run process ended with %v, not by SIGKILL", p.cmd.ProcessState)
	}
	// The dead pass left its lease behind: a newer pass has to wait for it to expire.
	api := f.scope("prod", "api")
	holder := api.Lease.Holder
	if !strings.HasSuffix(holder, fmt.Sprintf("#%d", p.cmd.Process.Pid)) || api.Lease.Purpose != "deploy" || api.Lease.Token != 1 {
		t.Fatalf("after the kill the lease is %+v, want the killed pass's deploy lease with token 1", api.Lease)
	}
	return holder
}

// checkWaitedAndTookOver checks the stderr of a pass that waited out the killed pass's lease.
func checkWaitedAndTookOver(t *testing.T, stderr, oldHolder string, oldGen int64) {
	t.Helper()
	waiting := regexp.MustCompile(`waiting: prod/api is locked by ` + regexp.QuoteMeta(oldHolder) +
		fmt.Sprintf(` \(deploy, generation %d\); free within [1-9][0-9]*s at the latest`, oldGen))
	if !waiting.MatchString(stderr) {
		t.Errorf("stderr shows no waiting progress with retry_after:\n%s", stderr)
	}
	if !strings.Contains(stderr, "prod/api: recovered an interrupted operation") {
		t.Errorf("stderr does not say the lease was recovered:\n%s", stderr)
	}
}

// checkTakeover checks the timeline after a takeover: the recovery is recorded once, by gen, and
// exactly one deploy happened, of sha at gen with token 2.
func checkTakeover(t *testing.T, f *fixture, gen int64, sha string) []authority.Event {
	t.Helper()
	text := f.must(0, "history", "prod").stdout
	if !strings.Contains(text, "Recovered an interrupted operation (Interrupted: deploy)") {
		t.Errorf("history does not record the recovery:\n%s", text)
	}
	events := f.history("prod")
	took := eventsOf(events, authority.EventTookOver)
	if len(took) != 1 || took[0].Generation != gen || took[0].Token != 2 {
		t.Errorf("took-over events %+v, want one by generation %d with token 2", took, gen)
	}
	deployed := eventsOf(events, authority.EventDeployed)
	if len(deployed) != 1 || deployed[0].Generation != gen || deployed[0].Sha != sha || deployed[0].Token != 2 {
		t.Errorf("deployed events %+v, want exactly one: %s at generation %d with token 2", deployed, sha[:7], gen)
	}
	return events
}

// TestProcessesKilledDeployNewerPassTakesOver kills a pass with SIGKILL in the middle of its deploy;
// a newer pass waits for the dead lease to expire, takes it over and deploys its own commit.
func TestProcessesKilledDeployNewerPassTakesOver(t *testing.T) {
	newerPassTakesOver(t, newDynamoFixture(t))
}

// TestProcessesKilledDeployNewerPassTakesOverPerScope is the same in the per-scope layout, where
// the lease lives in the scope's own document. It runs beside the package's other parallel tests.
func TestProcessesKilledDeployNewerPassTakesOverPerScope(t *testing.T) {
	t.Parallel()
	newerPassTakesOver(t, newDynamoPerScopeFixture(t))
}

// TestProcessesKilledDeployNewerPassTakesOverOnGit is the same on a git+file:// store. It runs beside
// the package's other parallel tests: most of it is the wait for the dead lease to expire.
func TestProcessesKilledDeployNewerPassTakesOverOnGit(t *testing.T) {
	t.Parallel()
	newerPassTakesOver(t, newGitFixture(t))
}

func newerPassTakesOver(t *testing.T, f *fixture) {
	t.Helper()
	oldHolder := killedDeploy(t, f)

	r := f.must(0, "run", "--environment", "prod", "--scopes", "api", "--sha", shaB, "--ref", mainRf, "--before", shaA,
		"--intent-id", "push-new", "--wait", "30s", "--lease-skew", "1ms",
		"--", "sh", "-c", deployScript, "sh", f.path("deployed-new"))
	checkWaitedAndTookOver(t, r.stderr, oldHolder, 1)
	if got := readMarker(t, f.path("deployed-new")); got != "2 2" {
		t.Errorf("the newer deploy command got generation and token %q, want \"2 2\"", got)
	}

	s := f.status("prod")
	api := s.Scopes["api"]
	if api.Live == nil || api.Live.Sha != shaB || api.Live.Generation != 2 || api.Live.Token != 2 {
		t.Fatalf("live %+v, want %s at generation 2 with token 2", api.Live, shaB[:7])
	}
	if s.Desired != 2 || s.Observed != s.Desired || api.Pending != nil {
		t.Fatalf("status %d/%d, pending %+v: an intent was lost", s.Observed, s.Desired, api.Pending)
	}
	if api.Lease.Holder != "" {
		t.Fatalf("lease still held: %+v", api.Lease)
	}

	events := checkTakeover(t, f, 2, shaB)
	if !slices.ContainsFunc(eventsOf(events, authority.EventSuperseded), func(ev authority.Event) bool {
		return ev.Generation == 1 && ev.Sha == shaA && strings.HasPrefix(ev.Message, "Superseded by generation 2")
	}) {
		t.Errorf("the killed pass's intent is not recorded as superseded: %+v", events)
	}
}

// TestProcessesKilledDeploySameIntentRetryTakesOver kills a pass mid-deploy and re-runs the same
// intent as attempt 2: it waits for the dead lease, takes it over and deploys its own commit.
func TestProcessesKilledDeploySameIntentRetryTakesOver(t *testing.T) {
	f := newDynamoFixture(t)
	oldHolder := killedDeploy(t, f)

	r := f.must(0, "run", "--environment", "prod", "--scopes", "api", "--sha", shaA, "--ref", mainRf,
		"--intent-id", "push-old", "--attempt", "2", "--wait", "30s", "--lease-skew", "1ms",
		"--", "sh", "-c", deployScript, "sh", f.path("deployed-retry"))
	checkWaitedAndTookOver(t, r.stderr, oldHolder, 1)
	if !strings.Contains(r.stderr, "generation 1 claimed api") {
		t.Errorf("the retry did not claim as generation 1:\n%s", r.stderr)
	}
	if got := readMarker(t, f.path("deployed-retry")); got != "1 2" {
		t.Errorf("the retried deploy command got generation and token %q, want \"1 2\"", got)
	}

	s := f.status("prod")
	api := s.Scopes["api"]
	if api.Live == nil || api.Live.Sha != shaA || api.Live.Generation != 1 || api.Live.Token != 2 {
		t.Fatalf("live %+v, want %s at generation 1 with token 2", api.Live, shaA[:7])
	}
	if s.Desired != 1 || s.Observed != 1 || api.Pending != nil || api.Lease.Holder != "" {
		t.Fatalf("status %d/%d, pending %+v, lease %+v; want 1/1 settled and free", s.Observed, s.Desired, api.Pending, api.Lease)
	}
	checkTakeover(t, f, 1, shaA)
}

// racers is how many processes race in the tests on DynamoDB. On a git+file:// store, where every
// request is a git program of its own and only receive-pack's old-id check stands between the
// processes, 64 race for one lease (each loser is done at its first conflict) and 16 claim together
// (each must win in the end: 64 take about a minute on two cores, 16 about 3 s).
const (
	racers         = 8
	gitLeaseRacers = 64
	gitClaimers    = 16
)

// TestProcessesClaimTogether starts 8 claim processes at once on one environment: every intent gets
// its own generation, 1 to 8, and none is lost.
func TestProcessesClaimTogether(t *testing.T) {
	claimTogether(t, newDynamoFixture(t), racers)
}

// TestProcessesClaimTogetherPerScope is the same in the per-scope layout: distinct generations,
// which may skip those of accepts that lost the scope's race, and none lost.
func TestProcessesClaimTogetherPerScope(t *testing.T) {
	claimTogether(t, newDynamoPerScopeFixture(t), racers)
}

// TestProcessesClaimTogetherOnGit starts 16 at once on a git+file:// store.
func TestProcessesClaimTogetherOnGit(t *testing.T) {
	claimTogether(t, newGitFixture(t), gitClaimers)
}

func claimTogether(t *testing.T, f *fixture, n int) {
	t.Helper()
	racers := int64(n)
	procs := make([]*proc, racers)
	shas := make([]string, racers)
	for i := range procs {
		shas[i] = fmt.Sprintf("c1a1%036d", i)
		procs[i] = f.start("claim", "--environment", "prod", "--scopes", "api", "--sha", shas[i], "--ref", mainRf,
			"--intent-id", fmt.Sprintf("push-%d", i), "--json")
	}
	gens := make([]int64, racers)
	bySha := map[string]int64{}
	for i, p := range procs {
		r := p.wait()
		if r.code != 0 {
			t.Fatalf("%v: exit %d\nstdout:\n%s\nstderr:\n%s", p, r.code, r.stdout, r.stderr)
		}
		var res authority.AcceptResult
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
			t.Fatalf("%v --json: %v\n%s", p, err, r.stdout)
		}
		if res.Duplicate || res.Claim == nil || len(res.Claim.Claimed) != 1 || res.Claim.Claimed[0].IntentGen != res.Generation {
			t.Fatalf("%v: %+v, want a new generation that claims its own intent", p, res)
		}
		gens[i] = res.Generation
		bySha[shas[i]] = res.Generation
	}
	// The single document hands out 1..n without a gap; the per-scope layout may skip the
	// generations of heads whose scope write lost its race.
	sorted := slices.Sorted(slices.Values(gens))
	s := f.status("prod")
	for i, g := range sorted {
		if g != int64(i+1) && (!f.perScope || i > 0 && g <= sorted[i-1]) {
			t.Fatalf("generations %v, want %d distinct ones (exactly 1..%[2]d in the single document)", sorted, racers)
		}
	}
	newest := sorted[len(sorted)-1]
	api := s.Scopes["api"]
	if s.Desired < newest || api.Owner != newest || api.Pending == nil || api.Pending.Generation != newest || bySha[api.Pending.Sha] != newest {
		t.Fatalf("status desired %d, owner %d, pending %+v; want generation %d pending and owning", s.Desired, api.Owner, api.Pending, newest)
	}
	events := f.history("prod")
	accepted := map[int64]string{}
	for _, ev := range eventsOf(events, authority.EventAccepted) {
		accepted[ev.Generation] = ev.Sha
	}
	superseded := map[int64]bool{}
	for _, ev := range eventsOf(events, authority.EventSuperseded) {
		superseded[ev.Generation] = true
	}
	for sha, g := range bySha {
		if accepted[g] != sha {
			t.Errorf("generation %d accepted %q, want %q", g, accepted[g], sha)
		}
		if g < newest && !superseded[g] {
			t.Errorf("intent of generation %d has no outcome: neither pending nor superseded", g)
		}
	}
	if len(accepted) != n || len(superseded) != n-1 {
		t.Errorf("%d accepted and %d superseded generations, want %d and %d", len(accepted), len(superseded), n, n-1)
	}
}

// TestProcessesRaceForOneLease starts 8 gate processes with distinct holders at once for one free
// deploy lease: exactly one gets it, and every other one is refused and told who holds it.
func TestProcessesRaceForOneLease(t *testing.T) {
	raceForOneLease(t, newDynamoFixture(t), racers)
}

// TestProcessesRaceForOneLeaseOnGit races 64 on a git+file:// store.
func TestProcessesRaceForOneLeaseOnGit(t *testing.T) {
	raceForOneLease(t, newGitFixture(t), gitLeaseRacers)
}

func raceForOneLease(t *testing.T, f *fixture, racers int) {
	t.Helper()
	f.must(0, "claim", "--environment", "prod", "--scopes", "api", "--sha", shaA, "--intent-id", "push-1")
	procs := make([]*proc, racers)
	for i := range procs {
		procs[i] = f.start("gate", "--environment", "prod", "--generation", "1", "--scopes", "api", "--phase", "deploy",
			"--wait", "0s", "--holder", fmt.Sprintf("racer-%d", i))
	}
	results := make([]result, racers)
	winner := -1
	for i, p := range procs {
		results[i] = p.wait()
		switch results[i].code {
		case 0:
			if winner >= 0 {
				t.Fatalf("racer-%d and racer-%d both got the lease", winner, i)
			}
			winner = i
		case 4:
		default:
			t.Fatalf("%v: exit %d, want 0 or 4\nstdout:\n%s\nstderr:\n%s", p, results[i].code, results[i].stdout, results[i].stderr)
		}
	}
	if winner < 0 {
		t.Fatal("no racer got the free lease")
	}
	if !strings.Contains(results[winner].stdout, "lease prod/api token 1 ") {
		t.Errorf("winner's output: %q", results[winner].stdout)
	}
	want := fmt.Sprintf("locked by racer-%d (deploy, generation 1)", winner)
	for i, r := range results {
		if i != winner && !strings.Contains(r.stderr, want) {
			t.Errorf("racer-%d stderr %q, want %q", i, r.stderr, want)
		}
	}
	api := f.scope("prod", "api")
	if api.Lease.Holder != fmt.Sprintf("racer-%d", winner) || api.Lease.Token != 1 || !api.LeaseHeld {
		t.Fatalf("lease %+v, want held by racer-%d with token 1", api.Lease, winner)
	}
}

func readMarker(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the deploy command did not run: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// TestProcessesBadStoreURLIsBadInput: a malformed DynamoDB store URL is bad configuration (exit 2,
// terminal, saying what to fix), not a retryable error.
func TestProcessesBadStoreURLIsBadInput(t *testing.T) {
	f := newBoltFixture(t)
	cases := []struct{ url, want string }{
		{"dynamodb://t1?region=us-east-1", `table name "t1" is invalid`},
		{"dynamodb://latestwins?regoin=us-east-1", `unknown parameter "regoin"`},
		{"dynamodb://latestwins?region=us-east-1&endpoint=localhost", `is not an http(s) URL`},
	}
	for _, c := range cases {
		for _, verb := range [][]string{{"migrate"}, {"status", "prod"}} {
			r := f.run(append(verb, "--store", c.url)...)
			if r.code != 2 || !strings.Contains(r.stderr, c.want) {
				t.Errorf("latestwins %s --store %s: exit %d, stderr %q; want exit 2 saying %q", verb[0], c.url, r.code, r.stderr, c.want)
			}
		}
	}
}
