package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/pass"
	"github.com/latestwins/latestwins/internal/report"
)

func (c *cmdEnv) intentFlags() {
	c.str(&c.s.environment, "environment", "", "environment, e.g. staging or preview/pr-803")
	c.str(&c.s.scopes, "scopes", "", "comma-separated scopes, e.g. api,web")
	c.str(&c.s.sha, "sha", "", "commit to deploy (default $GITHUB_SHA)")
	c.str(&c.s.ref, "ref", "", "branch or ref of the commit (default $GITHUB_REF)")
	c.str(&c.s.before, "before", "", "the commit this one was pushed on top of (guards against out-of-order deliveries)")
	c.str(&c.s.source, "source", "", "where the intent comes from (push, cli, ...)")
	c.str(&c.s.actor, "actor", "", "who asked (default $GITHUB_ACTOR)")
	c.str(&c.s.intentID, "intent-id", "", "unique id of the intent; a repeat returns the same generation (default: the GitHub run)")
	c.boolean(&c.s.redeploy, "redeploy", false, "deploy this commit even if a newer one of its branch was seen")
	c.str(&c.s.pushedAt, "pushed-at", "", fmt.Sprintf("when the commit was pushed (the push's repository.pushed_at: RFC 3339 or Unix seconds, at most %s ahead of this clock); orders late intents (default: from a push event's payload)", authority.MaxOrderSkew))
	c.str(&c.s.committedAt, "committed-at", "", fmt.Sprintf("the commit's time (head_commit.timestamp: RFC 3339 or Unix seconds, at most %s ahead of this clock); orders pushes of the same second", authority.MaxOrderSkew))
	c.boolean(&c.s.forced, "forced", false, "the push was forced: newer than a push of the same second")
	c.str(&c.s.policy, "policy", "", "the environment's policy, latest or queue; a change is recorded (default: keep the stored one, latest for a new environment)")
	c.str(&c.s.requires, "requires", "", "comma-separated environments a commit must be live in (same scope, deployed with success) before it deploys in this one; none: no longer any; a change is recorded (default: keep the stored requirement)")
	c.boolean(&c.s.requiresAncestor, "requires-ancestor", false, "with --requires: a descendant of the commit live there counts too (only through the App, which asks GitHub; here only the same commit counts)")
	c.soakVar()
	c.windowsVar()
	c.str(&c.s.alertAfter, "alert-after", "", "how long a scope may wait for its newest commit before status calls it behind or stuck, e.g. 30m; 0: no alarm (default: keep the stored one)")
	c.str(&c.s.barrier, "barrier", "", "comma-separated scopes in which this commit is a barrier: newer commits wait behind it instead of superseding it")
	c.intVar(&c.s.queueLimit, "queue-limit", authority.DefaultQueueLimit, 1, "pending intents one scope may hold; one more is refused (exit 9)")
	c.approvalsFlags()
}

// order reads the ordering facts of the intent (--pushed-at, --committed-at, --forced).
func (c *cmdEnv) order() (authority.Order, error) {
	o := authority.Order{Forced: c.s.forced}
	for _, f := range []struct {
		name, raw string
		to        *time.Time
	}{{"pushed-at", c.s.pushedAt, &o.PushedAt}, {"committed-at", c.s.committedAt, &o.CommittedAt}} {
		if f.raw == "" {
			continue
		}
		t, err := parseInstant(f.raw)
		if err != nil {
			return o, c.badSetting(f.name, f.raw, "give a time as RFC 3339 (2026-11-30T12:00:00Z) or Unix seconds (1764504000)")
		}
		*f.to = t
	}
	return o, nil
}

// orderError says where an ordering fact the Authority refused (later than its clock by more than
// the allowance for clock skew) came from: a flag, or the push event's payload.
func (c *cmdEnv) orderError(err error) error {
	var input *authority.InputError
	if !errors.As(err, &input) {
		return err
	}
	flag, payload := "--pushed-at", "repository.pushed_at"
	switch input.Field {
	case authority.FieldPushedAt:
	case authority.FieldCommittedAt:
		flag, payload = "--committed-at", "head_commit.timestamp"
	default:
		return err
	}
	if c.s.fromEvent[input.Field] {
		return fmt.Errorf("%s of the push event ($GITHUB_EVENT_PATH) is later than this machine's clock: correct the clock, or give %s: %w", payload, flag, err)
	}
	return fmt.Errorf("%s: %w", flag, err)
}

// parseInstant reads RFC 3339 or Unix seconds.
func parseInstant(s string) (time.Time, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 0 {
		return time.Unix(n, 0).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	return t.UTC(), err
}

// eventDefaults fills what a GitHub Actions push event tells about the commit being claimed, when
// it is the event's own commit: its parent and the ordering facts of the push.
func (c *cmdEnv) eventDefaults() {
	g := c.io.Getenv
	if g("GITHUB_EVENT_NAME") != "push" || g("GITHUB_EVENT_PATH") == "" {
		return
	}
	b, err := os.ReadFile(g("GITHUB_EVENT_PATH"))
	if err != nil {
		return
	}
	var p struct {
		After      string `json:"after"`
		Before     string `json:"before"`
		Forced     bool   `json:"forced"`
		Repository struct {
			PushedAt json.RawMessage `json:"pushed_at"`
		} `json:"repository"`
		HeadCommit struct {
			Timestamp string `json:"timestamp"`
		} `json:"head_commit"`
	}
	if json.Unmarshal(b, &p) != nil || p.After == "" || p.After != c.s.sha {
		return
	}
	if c.s.before == "" && p.Before != "" && strings.Trim(p.Before, "0") != "" {
		c.s.before = p.Before
	}
	// Payload values that do not parse (null, another format) are left out: they are GitHub's, not
	// the user's, so they must never turn into a refusal of bad input.
	c.s.fromEvent = map[string]bool{}
	if pushed := strings.Trim(string(p.Repository.PushedAt), `"`); c.s.pushedAt == "" && pushed != "" {
		if _, err := parseInstant(pushed); err == nil {
			c.s.pushedAt = pushed
			c.s.fromEvent[authority.FieldPushedAt] = true
		}
	}
	if c.s.committedAt == "" && p.HeadCommit.Timestamp != "" {
		if _, err := parseInstant(p.HeadCommit.Timestamp); err == nil {
			c.s.committedAt = p.HeadCommit.Timestamp
			c.s.fromEvent[authority.FieldCommittedAt] = true
		}
	}
	if !c.s.forced {
		c.s.forced = p.Forced
	}
}

func (c *cmdEnv) stateFlag() {
	c.str(&c.s.state, "state", "", "file the steps of one pass share (generation, scopes, tokens)")
}

// intent builds the intent of claim and run from the flags and the GitHub run, and checks it as
// far as it can be checked before anything is opened.
func (c *cmdEnv) intent() (authority.Intent, error) {
	c.githubDefaults()
	raw := c.s.sha
	c.s.sha, c.s.before = authority.CanonicalSha(c.s.sha), authority.CanonicalSha(c.s.before)
	c.eventDefaults()
	if err := c.requireEnvironment(); err != nil {
		return authority.Intent{}, err
	}
	if err := c.requireScopes(); err != nil {
		return authority.Intent{}, err
	}
	if c.s.sha == "" {
		return authority.Intent{}, &authority.InputError{Field: "sha", Fix: "give the commit to deploy (--sha or LATESTWINS_SHA; in GitHub Actions, $GITHUB_SHA)"}
	}
	var bad *authority.InputError
	if err := authority.ValidateSha(c.s.sha); errors.As(err, &bad) {
		return authority.Intent{}, c.badSetting("sha", raw, bad.Fix)
	}
	if err := authority.ValidateSha(c.s.before); c.s.before != "" && errors.As(err, &bad) {
		return authority.Intent{}, c.badSetting("before", c.s.before, "give the full sha of the commit this one was pushed on top of (40 hex digits, 64 in a SHA-256 repository), or leave it out")
	}
	if c.s.intentID == "" {
		c.s.intentID = fmt.Sprintf("cli:%s:%d", hostname(), time.Now().UnixNano())
	}
	if c.s.source == "" {
		c.s.source = "cli"
	}
	order, err := c.order()
	if err != nil {
		return authority.Intent{}, err
	}
	in := authority.Intent{ID: c.s.intentID, Environment: c.s.environment, Scopes: splitList(c.s.scopes), Sha: c.s.sha,
		Ref: c.s.ref, Before: c.s.before, Order: order, Source: c.s.source, Actor: c.s.actor, Redeploy: c.s.redeploy,
		Barrier: splitList(c.s.barrier)}
	if c.s.policy != "" {
		p, err := authority.ParsePolicy(c.s.policy)
		if err != nil {
			return authority.Intent{}, err
		}
		in.Policy = p
	}
	if in.Requires, err = c.requirements(); err != nil {
		return authority.Intent{}, err
	}
	if in.AlertAfter, err = c.alertAfter(); err != nil {
		return authority.Intent{}, err
	}
	if in.Gates, err = c.gates(); err != nil {
		return authority.Intent{}, err
	}
	return in, nil
}

// alertAfter reads --alert-after: nil when not given (the stored one stays), zero for 0 or none.
func (c *cmdEnv) alertAfter() (*time.Duration, error) {
	raw := strings.TrimSpace(c.s.alertAfter)
	switch raw {
	case "":
		return nil, nil
	case "0", "none":
		var none time.Duration
		return &none, nil
	}
	d, err := time.ParseDuration(raw)
	if err != nil || d <= 0 || d > authority.MaxAlertAfter {
		return nil, c.badSetting("alert-after", raw, fmt.Sprintf("give a duration such as 30m (at most %s), or 0 for no alarm", authority.MaxAlertAfter))
	}
	return &d, nil
}

// requireScopes checks that scopes are named, and their names.
func (c *cmdEnv) requireScopes() error {
	if len(splitList(c.s.scopes)) == 0 {
		return &authority.InputError{Field: "scopes", Fix: "name the scopes (--scopes api,web), or share the --state file written by claim"}
	}
	return c.checkScopes()
}

func runClaim(ctx context.Context, c *cmdEnv, args []string) error {
	c.newFlags("claim")
	c.intentFlags()
	c.stateFlag()
	c.str(&c.s.holder, "holder", "", "lease holder id for later steps (default: the GitHub job, or the host)")
	c.apiFlags()
	c.attemptVar("attempt number (default $GITHUB_RUN_ATTEMPT)")
	c.boolean(&c.s.quiet, "quiet", false, "print only the generation, for a script: G=$(latestwins claim -q ...)")
	c.fs.BoolVar(&c.s.quiet, "q", false, "short for --quiet")
	if err := c.parse(args); err != nil {
		return err
	}
	if err := c.noArguments(); err != nil {
		return err
	}
	if c.s.quiet && c.s.jsonOut {
		return usageErrorf("--quiet and --json ask for two different outputs: give one")
	}
	in, err := c.intent()
	if err != nil {
		return err
	}
	c.mode = storeCreate
	if err := c.connect(ctx); err != nil {
		return err
	}
	defer c.done()
	res, err := c.pass.Claim(ctx, in)
	if err != nil {
		return c.orderError(err)
	}
	claimed := []string{}
	if res.Claim != nil {
		claimed = res.Claim.Scopes()
	}
	if c.s.holder == "" {
		c.s.holder = c.defaultHolder()
	}
	if err := c.saveState(&passState{Environment: c.s.environment, Generation: res.Generation, Scopes: claimed, Holder: c.s.holder}); err != nil {
		return err
	}
	switch {
	case c.s.jsonOut:
		if err := c.printJSON(res); err != nil {
			return err
		}
	case c.s.quiet:
		c.printf("%d\n", res.Generation)
	default:
		c.printf("generation %d\n", res.Generation)
		if res.Duplicate {
			c.printf("already accepted (intent %s): same generation, nothing changed\n", c.s.intentID)
		}
		if len(claimed) > 0 {
			c.printf("claimed %s\n", strings.Join(claimed, ","))
		}
		for scope, by := range res.Stale {
			c.printf("%s: arrived out of order, superseded by generation %d\n", scope, by)
		}
		if res.Claim != nil {
			for _, s := range res.Claim.Superseded {
				c.printf("%s: %v\n", s.Scope, s)
			}
		}
	}
	if len(claimed) == 0 {
		if c.s.quiet {
			c.progress("generation %d claimed nothing: superseded on arrival", res.Generation)
		}
		return &exitError{code: ExitSuperseded}
	}
	return nil
}

func runGate(ctx context.Context, c *cmdEnv, args []string) error {
	c.newFlags("gate")
	c.str(&c.s.environment, "environment", "", "environment")
	c.str(&c.s.scopes, "scopes", "", "scopes (default: those the pass claimed, from --state)")
	c.str(&c.s.phase, "phase", "deploy", "phase to enter: build, deploy, publish, ...")
	c.str(&c.s.holder, "holder", "", "lease holder id (default: from --state, the GitHub job, or the host)")
	c.boolean(&c.s.lease, "lease", true, "take the scopes' leases (deploy phase only; other phases check authority only)")
	c.stateFlag()
	c.apiFlags()
	c.int64Var(&c.s.generation, "generation", 0, 0, "the pass's generation (default: from --state)")
	c.durVar(&c.s.leaseTTL, "lease-ttl", authority.DefaultLeaseTTL, "lease length")
	c.durVar(&c.s.wait, "wait", 0, "how long to wait for a held lease")
	c.durVar(&c.s.skew, "lease-skew", authority.DefaultSkew, "margin past a lease's expiry before it is taken over")
	if err := c.parse(args); err != nil {
		return err
	}
	if err := c.noArguments(); err != nil {
		return err
	}
	if err := c.checkLeaseTTL(); err != nil {
		return err
	}
	st, err := c.loadState()
	if err != nil {
		return err
	}
	c.fromState(st)
	if err := c.requireEnvironment(); err != nil {
		return err
	}
	if err := c.requireGeneration(); err != nil {
		return err
	}
	if err := c.requireScopes(); err != nil {
		return err
	}
	c.mode = storeMustExist
	if err := c.connect(ctx); err != nil {
		return err
	}
	defer c.done()
	g, err := c.gate(ctx)
	if err != nil {
		if interrupted(ctx, err) {
			return &exitError{code: ExitInterrupted, msg: "interrupted while waiting for the lease; nothing was taken, and the gate can be retried"}
		}
		return c.reportRefusal(err)
	}
	if len(g.Tokens) > 0 {
		st.Environment, st.Generation, st.Holder, st.Tokens, st.ExpiresAt = g.Environment, g.Generation, g.Holder, g.Tokens, g.ExpiresAt
		st.Scopes = sortedScopes(g.Tokens)
		if err := c.saveState(st); err != nil {
			return err
		}
	}
	if c.s.jsonOut {
		return c.printJSON(g)
	}
	c.printf("authorized: generation %d may enter %s\n", g.Generation, g.Phase)
	for _, s := range sortedScopes(g.Tokens) {
		c.printf("lease %s/%s token %d until %s\n", g.Environment, s, g.Tokens[s], g.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return nil
}

// interrupted reports whether err is ctx ending (a signal) rather than an answer.
func interrupted(ctx context.Context, err error) bool {
	return ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}

// gate enters the phase, waiting on a held lease up to --wait and honouring retry_after.
func (c *cmdEnv) gate(ctx context.Context) (*authority.Grant, error) {
	if err := c.requireScopes(); err != nil {
		return nil, err
	}
	ttl := time.Duration(0)
	if c.s.lease && c.s.phase == "deploy" {
		ttl = c.s.leaseTTL
		if c.s.holder == "" {
			c.s.holder = c.defaultHolder()
		}
	}
	req := authority.GateRequest{Environment: c.s.environment, Generation: c.s.generation, Scopes: splitList(c.s.scopes),
		Phase: c.s.phase, Holder: c.s.holder, LeaseTTL: ttl}
	return pass.Gate(ctx, c.pass, req, c.s.wait, func(held *authority.HeldError, pause, left time.Duration) {
		if w := report.Waiting(held); w != "" {
			c.progress("waiting: %s: %s; asking again within %s (%s left to wait)", held.Resource, w, pause.Round(time.Second), left.Round(time.Second))
			return
		}
		c.progress("waiting: %s is locked by %s (%s, generation %d); free within %s at the latest, asking again meanwhile (%s left to wait)",
			held.Resource, held.Holder, held.Purpose, held.Generation, pause.Round(time.Second), left.Round(time.Second))
	})
}

// heldMessage says why a lasting hold ended the pass, and how its work goes on.
func heldMessage(held *authority.HeldError) string {
	when := "once it may go"
	if !held.Until.IsZero() {
		when = "once it may go (" + held.Until.UTC().Format("Mon 02 Jan 15:04 MST") + ")"
	}
	return fmt.Sprintf("held: %s: %s; the commit stays pending, and the recovery sweep (the App's, or latestwins sweep on a schedule) starts its work again %s",
		held.Resource, report.Waiting(held), when)
}

// reportRefusal turns a superseded or locked refusal into its exit code with a one-line explanation.
func (c *cmdEnv) reportRefusal(err error) error {
	var sup *authority.SupersededError
	var held *authority.HeldError
	switch {
	case errors.As(err, &sup):
		if c.s.jsonOut {
			_ = c.printJSON(map[string]any{"authorized": false, "superseded": sup})
		}
		c.progress("superseded: %v", sup)
		return &exitError{code: ExitSuperseded}
	case errors.As(err, &held):
		if c.s.jsonOut {
			// reason says what holds the pass (a lease, a queue, a barrier, a failure, a freeze, a
			// promotion): holder and purpose are a lease's only.
			kind := "locked"
			if held.Why().Lasting() {
				kind = "held"
			}
			out := map[string]any{"error": kind, "reason": held.Why(), "message": held.Error(), "resource": held.Resource,
				"holder": held.Holder, "purpose": held.Purpose, "generation": held.Generation, "retry_after": int64(held.RetryAfter / time.Second)}
			for k, v := range map[string]any{"ahead": held.Ahead, "head_sha": held.HeadSha, "barrier": held.Barrier, "blocked": held.Blocked} {
				if v != 0 && v != "" && v != false {
					out[k] = v
				}
			}
			if held.Frozen != nil {
				out["frozen"] = held.Frozen
			}
			if held.Promotion != nil {
				out["promotion"] = held.Promotion
			}
			if held.Soak != nil {
				out["soak"] = held.Soak
			}
			if held.Approval != nil {
				out["approval"] = held.Approval
			}
			if held.Window != nil {
				out["window"] = held.Window
			}
			if !held.Until.IsZero() {
				out["until"] = held.Until
			}
			_ = c.printJSON(out)
		}
		if held.Why().Lasting() {
			return &exitError{code: ExitHeld, msg: heldMessage(held)}
		}
		return &exitError{code: ExitLocked, msg: fmt.Sprintf("gave up waiting: %v", held)}
	}
	return err
}

func runComplete(ctx context.Context, c *cmdEnv, args []string) error {
	c.newFlags("complete")
	c.str(&c.s.environment, "environment", "", "environment")
	c.str(&c.s.scopes, "scopes", "", "scopes (default: from --state)")
	c.str(&c.s.outcome, "outcome", "success", "success, failure, lost, interrupted or invalid")
	c.str(&c.s.message, "message", "", "what happened, for the timeline and status")
	c.str(&c.s.holder, "holder", "", "lease holder id (default: from --state)")
	c.str(&c.s.tokens, "tokens", "", "fencing tokens as SCOPE=N pairs (default: from --state)")
	c.str(&c.s.run, "run", "", "run id or URL to record with the live state (default: the GitHub run)")
	c.stateFlag()
	c.apiFlags()
	c.int64Var(&c.s.generation, "generation", 0, 0, "the pass's generation (default: from --state)")
	c.attemptVar("attempt number (default $GITHUB_RUN_ATTEMPT, else 1)")
	c.intVar(&c.s.maxAttempts, "max-attempts", 3, 1, "attempts before a failure is terminal")
	if err := c.parse(args); err != nil {
		return err
	}
	if err := c.noArguments(); err != nil {
		return err
	}
	st, err := c.loadState()
	if err != nil {
		return err
	}
	c.fromState(st)
	c.githubDefaults()
	if err := c.requireEnvironment(); err != nil {
		return err
	}
	if err := c.requireGeneration(); err != nil {
		return err
	}
	if err := c.checkScopes(); err != nil {
		return err
	}
	outcome, err := authority.ParseOutcome(c.s.outcome)
	if err != nil {
		return err
	}
	tokens := st.Tokens
	if c.s.tokens != "" {
		if tokens, err = parseTokens(c.s.tokens); err != nil {
			return err
		}
	}
	c.mode = storeMustExist
	if err := c.connect(ctx); err != nil {
		return err
	}
	defer c.done()
	res, err := c.complete(ctx, outcome, tokens)
	if err != nil {
		return err
	}
	return c.reportCompletion(res)
}

func (c *cmdEnv) complete(ctx context.Context, outcome authority.Outcome, tokens map[string]int64) (*authority.CompleteResult, error) {
	if c.s.attempt == 0 {
		c.s.attempt = 1
	}
	if c.s.run == "" && c.io.Getenv("GITHUB_RUN_ID") != "" {
		c.s.run = fmt.Sprintf("%s/%s/actions/runs/%s", strings.TrimSuffix(c.io.Getenv("GITHUB_SERVER_URL"), "/"), c.io.Getenv("GITHUB_REPOSITORY"), c.io.Getenv("GITHUB_RUN_ID"))
	}
	return c.pass.Complete(ctx, authority.Completion{Environment: c.s.environment, Generation: c.s.generation,
		Scopes: splitList(c.s.scopes), Holder: c.s.holder, Tokens: tokens, Outcome: outcome, Attempt: c.s.attempt,
		MaxAttempts: c.s.maxAttempts, Message: c.s.message, Run: c.s.run})
}

func (c *cmdEnv) reportCompletion(res *authority.CompleteResult) error {
	if c.s.jsonOut {
		out := map[string]any{"outcome": res.Overall(), "results": res.Results, "superseded": res.Superseded}
		if len(c.deploys) > 0 {
			sha, ref, shas := deployedCommits(c.deploys, res.Results)
			out["sha"], out["ref"], out["shas"] = sha, ref, shas
		}
		if err := c.printJSON(out); err != nil {
			return err
		}
	} else {
		for _, s := range sortedKeysOf(res.Results) {
			var line string
			switch res.Results[s] {
			case authority.ResultDeployed:
				line = "deployed"
			case authority.ResultSuperseded:
				line = fmt.Sprintf("superseded, nothing published (%v)", res.Superseded[s])
			case authority.ResultRetry:
				line = fmt.Sprintf("%s on attempt %d of %d: retryable, nothing terminal published", c.s.outcome, c.s.attempt, c.s.maxAttempts)
			case authority.ResultFailed:
				line = fmt.Sprintf("%s: terminal error recorded (attempt %d of %d)", c.s.outcome, c.s.attempt, c.s.maxAttempts)
			}
			c.printf("%s/%s: %s\n", c.s.environment, s, line)
		}
	}
	switch res.Overall() {
	case authority.ResultSuperseded:
		return &exitError{code: ExitSuperseded}
	case authority.ResultRetry:
		// The retryable endings keep their own documented codes.
		switch authority.Outcome(c.s.outcome) {
		case authority.OutcomeLost:
			return &exitError{code: ExitLeaseLost}
		case authority.OutcomeInterrupted:
			return &exitError{code: ExitInterrupted}
		}
		return &exitError{code: ExitRetry}
	case authority.ResultFailed:
		return &exitError{code: ExitFailed}
	}
	return nil
}

// deployedCommits are the commit and ref the scopes of results deploy, as run's command gets them:
// sha and ref are empty when the scopes deploy different ones; shas has every scope's.
func deployedCommits[V any](claimed []authority.ClaimedScope, results map[string]V) (sha, ref string, shas map[string]string) {
	shas = map[string]string{}
	first := true
	for _, cl := range claimed {
		if _, ok := results[cl.Scope]; !ok && len(results) > 0 {
			continue
		}
		shas[cl.Scope] = cl.Sha
		if first {
			sha, ref, first = cl.Sha, cl.Ref, false
			continue
		}
		if cl.Sha != sha {
			sha = ""
		}
		if cl.Ref != ref {
			ref = ""
		}
	}
	return sha, ref, shas
}

func runStatus(ctx context.Context, c *cmdEnv, args []string) error {
	c.newFlags("status")
	c.interspersed = true
	c.str(&c.s.environment, "environment", "", "environment (or the first argument); none: what is live where, in every environment")
	var rows int
	c.intVar(&rows, "rows", report.DefaultStatusRows, 0, "list at most this many scopes, what is behind first, and count the rest; 0: every scope, by name")
	c.apiFlags()
	if err := c.parse(args); err != nil {
		return err
	}
	if len(c.positional) == 0 && c.s.environment == "" {
		return c.overview(ctx)
	}
	if err := c.envArg(); err != nil {
		return err
	}
	c.mode = storeReadOnly
	if err := c.connect(ctx); err != nil {
		return err
	}
	defer c.done()
	e, err := c.view.Status(ctx, c.s.environment)
	if err != nil {
		return err
	}
	if c.s.jsonOut {
		return c.printJSON(statusJSON(e, c.view.Now()))
	}
	return report.StatusTextRowsWith(c.io.Stdout, e, c.view.Now(), rows, c.requiredStates(ctx, e))
}

// requiredStates reads the environments e requires, so that the rows say what a head waits for
// there (promotion, soak time); nil when e requires nothing or one of them cannot be read, and
// then nothing is said of them.
func (c *cmdEnv) requiredStates(ctx context.Context, e *authority.Env) map[string]*authority.Env {
	if e.Requires == nil {
		return nil
	}
	out := map[string]*authority.Env{}
	for _, r := range e.Requires.Environments {
		st, err := c.view.Status(ctx, r)
		if errors.Is(err, authority.ErrInvalidInput) {
			out[r] = nil // nothing accepted there yet: nothing is live
			continue
		}
		if err != nil {
			c.progress("what %s waits for in %s is not said: %v", e.Name, r, err)
			return nil
		}
		out[r] = st
	}
	return out
}

// readEnv parses the flags of a read-only command about one environment and reads its state. It
// never creates a store.
func (c *cmdEnv) readEnv(ctx context.Context, args []string) (*authority.Env, error) {
	if args != nil {
		if err := c.parse(args); err != nil {
			return nil, err
		}
	}
	if err := c.envArg(); err != nil {
		return nil, err
	}
	c.mode = storeReadOnly
	if err := c.connect(ctx); err != nil {
		return nil, err
	}
	defer c.done()
	return c.view.Status(ctx, c.s.environment)
}

// statusJSON is the --json shape of status: the state without the timeline and intent records. A
// frozen scope's freeze carries its name, the generation an unfreeze gives.
func statusJSON(e *authority.Env, now time.Time) map[string]any {
	scopes := map[string]any{}
	for name, s := range e.Scopes {
		lag := authority.Judge(s, now, e.AlertAfter)
		scopes[name] = map[string]any{"live": s.Live, "pending": s.Mailbox, "queue": s.Queue, "owner": s.Owner, "lease": s.Lease,
			"lease_held": s.Lease.Holder != "" && now.Before(s.Lease.ExpiresAt), "failure": s.Failure,
			"blocked": s.Mailbox != nil && s.Mailbox.Failed, "freeze": s.Freeze,
			"convergence": lag.State, "waiting_seconds": int64(lag.Waited / time.Second)}
	}
	return map[string]any{"environment": e.Name, "policy": e.PolicyOrDefault(), "desired_generation": e.Desired, "observed_generation": e.Observed,
		"settled": e.Observed == e.Desired, "alert_after_seconds": int64(e.AlertAfter / time.Second), "scopes": scopes}
}

func runHistory(ctx context.Context, c *cmdEnv, args []string) error {
	c.newFlags("history")
	c.interspersed = true
	c.str(&c.s.environment, "environment", "", "environment (or the first argument)")
	c.apiFlags()
	c.intVar(&c.s.limit, "limit", 50, 0, "how many events, the newest first (0: every event kept)")
	c.int64Var(&c.s.beforeSeq, "before", 0, 0, "only events numbered below this: the next page after one that said so (0: the newest)")
	if err := c.parse(args); err != nil {
		return err
	}
	if err := c.envArg(); err != nil {
		return err
	}
	c.mode = storeReadOnly
	if err := c.connect(ctx); err != nil {
		return err
	}
	defer c.done()
	page, err := c.history(ctx)
	if err != nil {
		return err
	}
	if c.s.jsonOut {
		return c.printJSON(page)
	}
	if err := report.TimelineText(c.io.Stdout, page.Events); err != nil {
		return err
	}
	if page.Before > 0 {
		c.progress("older events: latestwins history %s --before %d", c.s.environment, page.Before)
	}
	return nil
}

// history reads the page of events the flags ask for; --limit 0 reads every page.
func (c *cmdEnv) history(ctx context.Context) (*authority.HistoryPage, error) {
	const pageSize = 1000
	if c.s.limit > 0 {
		return c.view.History(ctx, c.s.environment, c.s.beforeSeq, c.s.limit)
	}
	all := &authority.HistoryPage{Events: []authority.Event{}}
	before := c.s.beforeSeq
	for {
		page, err := c.view.History(ctx, c.s.environment, before, pageSize)
		if err != nil {
			return nil, err
		}
		all.Events, all.Newest = append(page.Events, all.Events...), page.Newest
		if page.Before == 0 {
			return all, nil
		}
		before = page.Before
	}
}

// envArg takes the environment from the first positional argument when given.
func (c *cmdEnv) envArg() error {
	rest := c.positional
	if len(rest) > 1 {
		return usageErrorf("unexpected arguments %q", rest[1:])
	}
	if len(rest) == 1 {
		c.s.environment = rest[0]
	}
	return c.requireEnvironment()
}

func runUnlock(ctx context.Context, c *cmdEnv, args []string) error {
	c.newFlags("unlock")
	c.interspersed = true
	c.str(&c.s.reason, "reason", "", "why, for the timeline (required)")
	c.str(&c.s.actor, "actor", "", "who unlocks (default $GITHUB_ACTOR or $USER)")
	if err := c.parse(args); err != nil {
		return err
	}
	if len(c.positional) != 1 {
		return usageErrorf("name one lease: latestwins unlock ENV/SCOPE --reason TEXT")
	}
	resource := c.positional[0]
	if c.s.reason = strings.TrimSpace(c.s.reason); c.s.reason == "" {
		return c.badSetting("reason", "", "say why the lease is unlocked, e.g. --reason \"the runner died\"; it goes in the timeline")
	}
	c.defaultActor()
	c.mode = storeMustExist
	if err := c.open(ctx); err != nil {
		return err
	}
	defer c.done()
	prev, err := c.auth.Unlock(ctx, resource, c.s.reason, c.s.actor)
	if errors.Is(err, authority.ErrNotFound) {
		c.printf("%s is not locked in %s; nothing to do\n", resource, c.where)
		return nil
	}
	if err != nil {
		return err
	}
	if c.s.jsonOut {
		return c.printJSON(map[string]any{"unlocked": resource, "was": prev})
	}
	c.printf("unlocked %s (was held by %s for %s, generation %d, token %d)\n", resource, prev.Holder, prev.Purpose, prev.Generation, prev.Token)
	return nil
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

func sortedKeysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func runSkip(ctx context.Context, c *cmdEnv, args []string) error {
	return runDecide(ctx, c, authority.DecideSkip, args)
}

func runRetry(ctx context.Context, c *cmdEnv, args []string) error {
	return runDecide(ctx, c, authority.DecideRetry, args)
}

// runDecide unblocks a scope whose head (a queue's, or a barrier) failed terminally.
func runDecide(ctx context.Context, c *cmdEnv, action authority.DecisionAction, args []string) error {
	c.newFlags(string(action))
	c.interspersed = true
	c.str(&c.s.reason, "reason", "", "why, for the timeline (required)")
	c.str(&c.s.actor, "actor", "", "who decides (default $GITHUB_ACTOR or $USER)")
	if err := c.parse(args); err != nil {
		return err
	}
	env, scope, err := c.scopeAndReason(string(action), "fixed the migration by hand")
	if err != nil {
		return err
	}
	c.mode = storeMustExist
	if err := c.open(ctx); err != nil {
		return err
	}
	defer c.done()
	failed, err := c.auth.Decide(ctx, authority.Decision{Environment: env, Scope: scope, Action: action, Reason: c.s.reason, Actor: c.s.actor})
	if errors.Is(err, authority.ErrNotBlocked) {
		c.printf("%s is not blocked by a failure; nothing to do\n", c.positional[0])
		return nil
	}
	if err != nil {
		return err
	}
	if c.s.jsonOut {
		return c.printJSON(map[string]any{string(action): c.positional[0], "failed": failed})
	}
	if action == authority.DecideSkip {
		c.printf("skipped %s (generation %d) in %s: the next waiting intent goes\n", report.ShortSha(failed.Sha), failed.Generation, c.positional[0])
	} else {
		c.printf("%s (generation %d) in %s will be retried: the recovery sweep re-drives it, or run its pass again\n", report.ShortSha(failed.Sha), failed.Generation, c.positional[0])
	}
	return nil
}

func runPolicy(ctx context.Context, c *cmdEnv, args []string) error {
	c.newFlags("policy")
	c.interspersed = true
	c.str(&c.s.actor, "actor", "", "who changes it (default $GITHUB_ACTOR or $USER)")
	if err := c.parse(args); err != nil {
		return err
	}
	if len(c.positional) != 2 {
		return usageErrorf("name the environment and the policy: latestwins policy ENV latest|queue")
	}
	p, err := authority.ParsePolicy(c.positional[1])
	if err != nil {
		return err
	}
	c.defaultActor()
	// Only an environment something was accepted for has a policy to set: a store that was never
	// created holds none, and is not made for the refusal.
	c.mode = storeMustExist
	if err := c.open(ctx); err != nil {
		return err
	}
	defer c.done()
	changed, err := c.auth.SetPolicy(ctx, c.positional[0], p, c.s.actor)
	if err != nil {
		return err
	}
	if !changed {
		c.printf("%s already has policy %s\n", c.positional[0], p)
		return nil
	}
	c.printf("%s now has policy %s\n", c.positional[0], p)
	return nil
}
