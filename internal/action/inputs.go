package action

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sethvargo/go-githubactions"

	"github.com/latestwins/latestwins/internal/authority"
)

// Commands the Action runs (the command input).
const (
	cmdClaim    = "claim"
	cmdGate     = "gate"
	cmdRun      = "run"
	cmdComplete = "complete"
	cmdStatus   = "status"
)

// On-superseded policies.
const (
	onSkip   = "skip"
	onFail   = "fail"
	onCancel = "cancel"
)

// inputs are the Action's inputs (action.yml), with the defaults action.yml declares applied again
// here so that a missing variable means the same as an omitted input.
type inputs struct {
	command      string
	environment  string
	scopes       []string
	sha          string
	ref          string
	generation   int64 // > 0: claim this generation, accepted before, instead of an intent of the run
	run          string
	phase        string
	leaseTTL     time.Duration
	wait         time.Duration
	onSuperseded string
	maxAttempts  int
	store        string
	defaultStore bool // neither store nor api-url was given: store is the workflow's repository
	apiURL       string
	token        string
	comment      bool
	checkRun     bool
}

func readInputs(a *githubactions.Action) (*inputs, error) {
	get := func(name, def string) string {
		if v := a.GetInput(name); v != "" {
			return v
		}
		return def
	}
	in := &inputs{
		command:      get("command", cmdRun),
		environment:  get("environment", ""),
		scopes:       splitList(get("scopes", "")),
		sha:          authority.CanonicalSha(get("sha", "")),
		ref:          get("ref", ""),
		run:          get("run", ""),
		phase:        get("phase", "deploy"),
		onSuperseded: get("on-superseded", onSkip),
		store:        get("store", ""),
		apiURL:       get("api-url", ""),
		token:        get("github-token", ""),
	}
	switch in.command {
	case cmdClaim, cmdGate, cmdRun, cmdComplete, cmdStatus:
	default:
		return nil, &authority.InputError{Field: "command", Value: in.command, Fix: "use claim, gate, run, complete or status"}
	}
	switch in.onSuperseded {
	case onSkip, onFail, onCancel:
	default:
		return nil, &authority.InputError{Field: "on-superseded", Value: in.onSuperseded, Fix: "use skip, fail or cancel"}
	}
	if in.environment == "" {
		return nil, &authority.InputError{Field: "environment", Fix: "set the environment input, e.g. environment: staging"}
	}
	if err := authority.ValidateEnvironment(in.environment); err != nil {
		return nil, err
	}
	var err error
	if in.leaseTTL, err = duration(get("lease-ttl", "2m"), "lease-ttl"); err != nil {
		return nil, err
	}
	if in.leaseTTL < authority.MinLeaseTTL || in.leaseTTL > authority.MaxLeaseTTL {
		return nil, &authority.InputError{Field: "lease-ttl", Value: in.leaseTTL.String(),
			Fix: fmt.Sprintf("use a lease TTL from %s to %s (default 2m)", authority.MinLeaseTTL, authority.MaxLeaseTTL)}
	}
	if in.wait, err = duration(get("wait", "10m"), "wait"); err != nil {
		return nil, err
	}
	var bad *authority.InputError
	if err := authority.ValidateSha(in.sha); in.sha != "" && errors.As(err, &bad) {
		return nil, &authority.InputError{Field: "sha", Value: get("sha", ""), Fix: bad.Fix + ", or leave it empty for the event's commit"}
	}
	if raw := get("generation", ""); raw != "" {
		if in.generation, err = strconv.ParseInt(raw, 10, 64); err != nil || in.generation < 1 {
			return nil, &authority.InputError{Field: "generation", Value: raw,
				Fix: "give the generation the workflow was dispatched for (${{ inputs.generation }}), a whole number from 1, or leave it empty"}
		}
		if in.sha != "" {
			return nil, &authority.InputError{Field: "sha", Value: in.sha, Fix: "leave sha empty with generation: the generation decides the commit (see the sha output)"}
		}
		if len(in.scopes) == 0 {
			return nil, &authority.InputError{Field: "scopes", Fix: "with generation, name the scopes the workflow was dispatched for (${{ inputs.scopes }})"}
		}
	}
	raw := get("max-attempts", "3")
	if in.maxAttempts, err = strconv.Atoi(raw); err != nil || in.maxAttempts < 1 {
		return nil, &authority.InputError{Field: "max-attempts", Value: raw, Fix: "give a whole number of attempts, 1 or more (default 3)"}
	}
	if in.comment, err = boolean(get("comment", "true"), "comment"); err != nil {
		return nil, err
	}
	if in.checkRun, err = boolean(get("check-run", "true"), "check-run"); err != nil {
		return nil, err
	}
	if in.command == cmdRun && strings.TrimSpace(in.run) == "" {
		return nil, &authority.InputError{Field: "run", Fix: "give the command to run under the lease (run: ./deploy.sh), or use command: gate"}
	}
	switch {
	case in.apiURL != "" && in.store != "":
		return nil, &authority.InputError{Field: "api-url", Value: in.apiURL,
			Fix: "give either store or api-url, not both: api-url goes through the latestwins App, store opens the store itself"}
	case in.apiURL == "" && in.store == "":
		repo := a.Getenv("GITHUB_REPOSITORY")
		if repo == "" {
			return nil, &authority.InputError{Field: "store",
				Fix: "set the store input: github://OWNER/REPO (refs of a GitHub repository; in a workflow it defaults to the workflow's own, from GITHUB_REPOSITORY, " +
					"which is not set here), dynamodb://TABLE?region=R (with AWS credentials in the job), or bolt://PATH on a self-hosted runner; " +
					"or api-url: the latestwins App's URL (with permissions: id-token: write)"}
		}
		in.store, in.defaultStore = DefaultStore(repo), true
	}
	return in, nil
}

// DefaultStore is the store the Action uses when given neither store nor api-url: refs under
// refs/latestwins/ of the workflow's own repository (OWNER/REPO), written with the github-token
// input, which needs permissions: contents: write.
func DefaultStore(repo string) string { return "github://" + repo }

func duration(raw, field string) (time.Duration, error) {
	d, err := time.ParseDuration(raw)
	if err != nil || d < 0 {
		return 0, &authority.InputError{Field: field, Value: raw, Fix: "give a duration such as 90s, 2m or 1h"}
	}
	return d, nil
}

func boolean(raw, field string) (bool, error) {
	b, err := strconv.ParseBool(raw)
	if err != nil {
		return false, &authority.InputError{Field: field, Value: raw, Fix: "use true or false"}
	}
	return b, nil
}

// splitList splits a comma, space or newline separated list, dropping empties.
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' || r == '\r' })
}

// event is what the Action takes from the triggering event: the commit, its branch or pull
// request, and the commit it was pushed on top of.
type event struct {
	name   string
	sha    string
	ref    string
	before string
	pr     int
	order  authority.Order // what a push payload says about when it happened
}

const zeroSha = "0000000000000000000000000000000000000000"

// eventOf reads a push or pull_request payload; other events fall back to GITHUB_SHA and GITHUB_REF.
func eventOf(gh *githubactions.GitHubContext) event {
	ev := event{name: gh.EventName, sha: gh.SHA, ref: gh.Ref}
	p := gh.Event
	switch gh.EventName {
	case "push":
		if s, ok := p["after"].(string); ok && s != "" && s != zeroSha {
			ev.sha = s
		}
		if s, ok := p["ref"].(string); ok && s != "" {
			ev.ref = s
		}
		if s, ok := p["before"].(string); ok && s != zeroSha {
			ev.before = s
		}
		ev.order = pushOrder(p)
	case "pull_request", "pull_request_target":
		pr, _ := p["pull_request"].(map[string]any)
		if n, ok := p["number"].(float64); ok {
			ev.pr = int(n)
			ev.ref = fmt.Sprintf("refs/pull/%d/head", ev.pr)
		}
		if head, ok := pr["head"].(map[string]any); ok {
			if s, ok := head["sha"].(string); ok && s != "" {
				ev.sha = s
			}
		}
		if s, ok := p["before"].(string); ok && s != zeroSha {
			ev.before = s
		}
	}
	return ev
}

// pushOrder reads repository.pushed_at (epoch seconds, or a time), head_commit.timestamp and forced
// from a push payload: the facts that order pushes of one branch whatever order their runs claim in.
func pushOrder(p map[string]any) authority.Order {
	var o authority.Order
	if repo, ok := p["repository"].(map[string]any); ok {
		switch v := repo["pushed_at"].(type) {
		case float64:
			o.PushedAt = time.Unix(int64(v), 0).UTC()
		case string:
			if t, err := time.Parse(time.RFC3339, v); err == nil {
				o.PushedAt = t.UTC()
			}
		}
	}
	if head, ok := p["head_commit"].(map[string]any); ok {
		if v, ok := head["timestamp"].(string); ok {
			if t, err := time.Parse(time.RFC3339, v); err == nil {
				o.CommittedAt = t.UTC()
			}
		}
	}
	o.Forced, _ = p["forced"].(bool)
	return o
}

// orderError says what to correct when the Authority refuses an ordering fact of the event's
// payload: a time later than this runner's clock by more than the allowance for clock skew.
func orderError(err error) error {
	var input *authority.InputError
	if !errors.As(err, &input) {
		return err
	}
	switch input.Field {
	case authority.FieldPushedAt:
		return fmt.Errorf("the push event's repository.pushed_at is GitHub's time of the push, and this runner's clock is behind it: "+
			"correct the runner's clock, or the event file if it was written by hand: %w", err)
	case authority.FieldCommittedAt:
		return fmt.Errorf("the push event's head_commit.timestamp is the commit's date, set by its committer's clock: "+
			"commit again with a correct date (git commit --amend --no-edit --date=now) and push, or correct this runner's clock: %w", err)
	}
	return err
}
