package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	shaA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	shaB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	shaC = "cccccccccccccccccccccccccccccccccccccccc"
)

// commitsSeen runs a deploy command that writes what it was told of its commits.
func (h *harness) commitsSeen(code int, args ...string) (seen, stdout string) {
	h.t.Helper()
	file := filepath.Join(h.dir, "commits.txt")
	args = append(args, "--", "sh", "-c", `echo "sha=$LATESTWINS_SHA ref=$LATESTWINS_REF shas=$LATESTWINS_SHAS" > "$0"`, file)
	o := h.must(code, args...)
	b, err := os.ReadFile(file)
	if err != nil {
		h.t.Fatal(err)
	}
	return strings.TrimSpace(string(b)), o.stdout
}

// run gives its command the commit it deploys, as claimed: the event's commit when it claims a new
// intent, the rollback's commit for a rollback's generation, and every scope's when they differ.
func TestRunGivesTheCommandTheCommitItDeploys(t *testing.T) {
	h := newHarness(t)
	// An inherited LATESTWINS_SHA never reaches the command as the deployed commit.
	h.vars["LATESTWINS_SHA"] = shaC
	seen, out := h.commitsSeen(ExitOK, "run", "--environment", "prod", "--scopes", "api,web", "--sha", shaA, "--ref", "refs/heads/main", "--intent-id", "a", "--json")
	if want := "sha=" + shaA + " ref=refs/heads/main shas=api=" + shaA + ",web=" + shaA; seen != want {
		t.Fatalf("command saw %q, want %q", seen, want)
	}
	var res struct {
		Sha  string            `json:"sha"`
		Ref  string            `json:"ref"`
		Shas map[string]string `json:"shas"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Sha != shaA || res.Ref != "refs/heads/main" || res.Shas["web"] != shaA {
		t.Fatalf("run --json: %+v (%v)\n%s", res, err, out)
	}

	// web moves on to B alone; a pass of both scopes then deploys api at A and web at B.
	delete(h.vars, "LATESTWINS_SHA")
	h.must(ExitOK, "claim", "--environment", "prod", "--scopes", "api", "--sha", shaA, "--ref", "refs/heads/main", "--intent-id", "a2", "--redeploy")
	h.must(ExitOK, "claim", "--environment", "prod", "--scopes", "web", "--sha", shaB, "--ref", "refs/heads/main", "--intent-id", "b")
	h.vars["LATESTWINS_SHA"] = shaC
	seen, out = h.commitsSeen(ExitOK, "run", "--environment", "prod", "--scopes", "api,web", "--generation", "3", "--json")
	if want := "sha= ref=refs/heads/main shas=api=" + shaA + ",web=" + shaB; seen != want {
		t.Fatalf("command saw %q, want %q", seen, want)
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Sha != "" || res.Shas["api"] != shaA || res.Shas["web"] != shaB {
		t.Fatalf("run --json of different commits: %+v (%v)\n%s", res, err, out)
	}

	// A rollback's generation deploys the rollback's commit, not the newest push.
	delete(h.vars, "LATESTWINS_SHA")
	h.must(ExitOK, "run", "--environment", "prod", "--scopes", "api", "--sha", shaB, "--intent-id", "b-api", "--", "true")
	h.must(ExitOK, "rollback", "prod/api", "--to", shaA, "--reason", "B breaks checkout")
	seen, _ = h.commitsSeen(ExitOK, "run", "--environment", "prod", "--scopes", "api", "--generation", "5")
	if want := "sha=" + shaA + " ref= shas=api=" + shaA; seen != want { // a rollback names no ref
		t.Fatalf("the rollback's command saw %q, want %q", seen, want)
	}
}

// claim -q prints the bare generation, for G=$(latestwins claim -q ...); --json prints all of the
// answer; both at once is bad input.
func TestClaimQuietPrintsTheBareGeneration(t *testing.T) {
	h := newHarness(t)
	for i, flag := range []string{"-q", "--quiet"} {
		o := h.must(ExitOK, "claim", flag, "--environment", "prod", "--scopes", "api", "--sha", shaA, "--intent-id", "a"+flag)
		if want := []string{"1\n", "2\n"}[i]; o.stdout != want {
			t.Fatalf("claim %s printed %q, want %q", flag, o.stdout, want)
		}
	}
	o := h.must(ExitOK, "claim", "--json", "--environment", "prod", "--scopes", "api", "--sha", shaB, "--intent-id", "b")
	var res struct {
		Generation int64    `json:"generation"`
		Accepted   []string `json:"accepted"`
		Claim      struct {
			Claimed []struct{ Scope, Sha string } `json:"claimed"`
		} `json:"claim"`
	}
	if err := json.Unmarshal([]byte(o.stdout), &res); err != nil || res.Generation != 3 || len(res.Claim.Claimed) != 1 || res.Claim.Claimed[0].Sha != shaB {
		t.Fatalf("claim --json: %+v (%v)\n%s", res, err, o.stdout)
	}
	h.must(ExitUsage, "claim", "-q", "--json", "--environment", "prod", "--scopes", "api", "--sha", shaC)
}

// A flag error says the one problem and where the help is, not the usage of every flag; -h still
// prints every flag.
func TestFlagErrorSaysTheProblemAndWhereTheHelpIs(t *testing.T) {
	h := newHarness(t)
	for _, args := range [][]string{{"claim", "--no-such-flag"}, {"status", "prod", "--limit"}, {"run", "--wait", "soon", "--", "true"}} {
		o := h.must(ExitUsage, args...)
		lines := strings.Split(strings.TrimSpace(o.stderr), "\n")
		if len(lines) != 1 || !strings.Contains(o.stderr, "run 'latestwins "+args[0]+" -h' for help") {
			t.Errorf("latestwins %s said:\n%s", strings.Join(args, " "), o.stderr)
		}
	}
	o := h.must(ExitOK, "claim", "-h")
	for _, want := range []string{"Usage of latestwins claim:", "-intent-id", "-quiet"} {
		if !strings.Contains(o.stderr, want) {
			t.Errorf("claim -h does not show %q:\n%s", want, o.stderr)
		}
	}
}

// unfreeze says what goes next and the command that deploys it.
func TestUnfreezeSaysWhatGoesNext(t *testing.T) {
	h := newHarness(t)
	h.must(ExitOK, "run", "--environment", "prod", "--scopes", "api", "--sha", shaA, "--intent-id", "a", "--", "true")
	h.must(ExitOK, "run", "--environment", "prod", "--scopes", "api", "--sha", shaB, "--intent-id", "b", "--", "true")
	h.must(ExitOK, "rollback", "prod/api", "--reason", "B breaks checkout")
	h.must(ExitOK, "run", "--environment", "prod", "--scopes", "api", "--generation", "3", "--", "true")
	h.must(ExitOK, "claim", "--environment", "prod", "--scopes", "api", "--sha", shaC, "--intent-id", "c")
	o := h.must(ExitOK, "unfreeze", "prod/api", "--freeze", "3", "--reason", "fixed forward")
	if !strings.Contains(o.stdout, "next: ccccccc at generation 4") || !strings.Contains(o.stdout, "latestwins run --environment prod --scopes api --generation 4 -- CMD") {
		t.Fatalf("unfreeze said:\n%s", o.stdout)
	}
	h.must(ExitOK, "run", "--environment", "prod", "--scopes", "api", "--generation", "4", "--", "true")
	h.must(ExitOK, "rollback", "prod/api", "--reason", "again")
	h.must(ExitOK, "run", "--environment", "prod", "--scopes", "api", "--generation", "5", "--", "true")
	if o := h.must(ExitOK, "unfreeze", "prod/api", "--freeze", "5", "--reason", "ok"); !strings.Contains(o.stdout, "nothing is pending in prod/api") {
		t.Fatalf("unfreeze with nothing held said:\n%s", o.stdout)
	}
}

// A held run's --json says what holds it, by the typed reason, not only a lease holder it has not.
func TestHeldRunJSONSaysWhatHoldsIt(t *testing.T) {
	h := newHarness(t)
	h.must(ExitOK, "run", "--environment", "prod", "--scopes", "api", "--sha", shaA, "--intent-id", "a", "--", "true")
	h.must(ExitOK, "run", "--environment", "prod", "--scopes", "api", "--sha", shaB, "--intent-id", "b", "--", "true")
	h.must(ExitOK, "rollback", "prod/api", "--reason", "B breaks checkout")
	o := h.must(ExitLocked, "run", "--environment", "prod", "--scopes", "api", "--sha", shaC, "--intent-id", "c", "--wait", "0s", "--json", "--", "true")
	var held struct {
		Reason  string         `json:"reason"`
		Message string         `json:"message"`
		Frozen  map[string]any `json:"frozen"`
	}
	if err := json.Unmarshal([]byte(o.stdout), &held); err != nil || held.Reason != "frozen" || held.Frozen["generation"] != float64(3) ||
		!strings.Contains(held.Message, "held by a freeze") {
		t.Fatalf("run --json of a held pass: %+v (%v)\n%s", held, err, o.stdout)
	}
}
