package authority

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Requirements make an environment's deploys wait for others (promotion): the pass of a commit X
// in a scope passes its deploy gate only once X is live, deployed with a success outcome, in the
// same scope of every required environment. With Ancestor, a descendant of X live there counts too,
// as the Authority's promotion comparer decides (WithPromotionComparer); without a comparer only X
// itself counts.
type Requirements struct {
	Environments []string `json:"environments"`
	Ancestor     bool     `json:"ancestor,omitempty"`
}

// maxRequired bounds the environments one environment may require: each costs its gate one read.
const maxRequired = 8

// validate checks the required environments of env's intent.
func (r *Requirements) validate(env string) error {
	if len(r.Environments) > maxRequired {
		return &InputError{Field: "requires", Value: strings.Join(r.Environments, ","), Fix: fmt.Sprintf("require at most %d environments", maxRequired)}
	}
	for _, name := range r.Environments {
		if err := ValidateEnvironment(name); err != nil {
			return err
		}
		if name == env {
			return &InputError{Field: "requires", Value: name, Fix: "an environment cannot require itself"}
		}
	}
	return nil
}

// normal is r sorted, without repeats; nil when it requires nothing.
func (r *Requirements) normal() *Requirements {
	if r == nil || len(r.Environments) == 0 {
		return nil
	}
	envs := slices.Clone(r.Environments)
	slices.Sort(envs)
	return &Requirements{Environments: slices.Compact(envs), Ancestor: r.Ancestor}
}

// String says what is required, for the timeline: "staging" or "staging (or a descendant)".
func (r *Requirements) String() string {
	if r == nil {
		return "none"
	}
	s := strings.Join(r.Environments, ", ")
	if r.Ancestor {
		s += " (or a descendant)"
	}
	return s
}

func (r *Requirements) equal(o *Requirements) bool {
	if r == nil || o == nil {
		return r == o
	}
	return r.Ancestor == o.Ancestor && slices.Equal(r.Environments, o.Environments)
}

// setRequires switches the environment's requirements and records the change. nil: leave them.
func (e *Env) setRequires(r *Requirements, actor string, now time.Time) {
	if r == nil {
		return
	}
	r = r.normal()
	if r.equal(e.Requires) {
		return
	}
	from := e.Requires
	e.Requires = r
	e.record(now, Event{Kind: EventRequires, Message: fmt.Sprintf("Promotion requirement changed from %s to %s by %s", from, r, orUnknown(actor))})
}

// PromotionWait is what a pass waits for before its deploy gate: its commit live in a required
// environment.
type PromotionWait struct {
	Environment string `json:"environment"` // the required environment
	Sha         string `json:"sha"`         // the commit that waits
	Live        string `json:"live,omitempty"`
	Ancestor    bool   `json:"ancestor,omitempty"` // a descendant would do
	// Unasked: nobody asked whether Live descends from Sha (a view built without a comparer).
	Unasked bool `json:"unasked,omitempty"`
}

func (w *PromotionWait) text() string {
	s := fmt.Sprintf("waiting for %s: %s is not live there yet", w.Environment, shortSha(w.Sha))
	switch {
	case w.Live != "" && w.Ancestor && w.Unasked:
		s += fmt.Sprintf(" (%s is; whether it descends from %s is asked at the deploy gate)", shortSha(w.Live), shortSha(w.Sha))
	case w.Live != "" && w.Ancestor:
		s += fmt.Sprintf(" (%s is, and is not a descendant of it)", shortSha(w.Live))
	case w.Live != "":
		s += fmt.Sprintf(" (%s is)", shortSha(w.Live))
	}
	return s
}

// promotionRetry is how soon a pass waiting for a required environment is told to ask again: a
// deploy there takes minutes.
const promotionRetry = 15 * time.Second

// required is what the gates of one environment know of the environments it requires: their
// documents as read (nil: nothing accepted there), and the comparer's answers, keyed by
// descendKey, of whether a commit live there descends from the one waiting.
type required struct {
	envs     map[string]*Env
	descends map[string]bool
}

func descendKey(sha, live string) string { return sha + ".." + live }

// readRequired reads, for the refs about to pass a gate in e (by scope), the required
// environments' documents not read yet, one read each, and asks the promotion comparer about the
// commits live there that are not the ref's own. It writes nothing.
func (a *Authority) readRequired(ctx context.Context, e *Env, refs map[string]*Ref, req *required) error {
	if e == nil || e.Requires == nil {
		return nil
	}
	for _, r := range e.Requires.Environments {
		if _, ok := req.envs[r]; ok {
			continue
		}
		d, err := a.readEnvScopes(ctx, r, sortedKeys(refs))
		if err != nil {
			return fmt.Errorf("read required environment %s: %w", r, err)
		}
		req.envs[r] = d.Env
	}
	if !e.Requires.Ancestor || a.promoter == nil {
		return nil
	}
	for _, name := range sortedKeys(refs) {
		ref := refs[name]
		if ref == nil || ref.Rollback {
			continue
		}
		for _, r := range e.Requires.Environments {
			re := req.envs[r]
			if re == nil || re.Scopes[name] == nil || re.Scopes[name].Live == nil {
				continue
			}
			live := re.Scopes[name].Live.Sha
			key := descendKey(ref.Sha, live)
			if _, ok := req.descends[key]; ok || live == ref.Sha {
				continue
			}
			if d, ok := a.descends.get(key); ok {
				req.descends[key] = d
				continue
			}
			in := Intent{ID: ref.IntentID, Environment: e.Name, Scopes: []string{name}, Sha: ref.Sha, Ref: ref.Ref, Origin: ref.Origin}
			o, err := a.promoter.Compare(ctx, in, ref.Sha, live)
			if err != nil {
				// Not known: the commit waits, and the next gate asks again.
				a.log.WarnContext(ctx, "promotion: could not compare commits", "environment", e.Name, "scope", name, "base", ref.Sha, "head", live, "err", err)
				continue
			}
			req.descends[key] = o == Ahead || o == Identical
			a.descends.put(key, req.descends[key]) // how two commits relate never changes
		}
	}
	return nil
}

func newRequired() *required {
	return &required{envs: map[string]*Env{}, descends: map[string]bool{}}
}

// WithPromotionComparer lets the gates and the sweep of environments that accept a descendant of a
// commit (Requirements.Ancestor) ask c whether what is live in a required environment descends from
// the commit waiting: Compare(intent, commit, live) answering Ahead or Identical. Without one, only
// the same commit counts.
func WithPromotionComparer(c Comparer) Option { return func(a *Authority) { a.promoter = c } }

// SetRequires sets the environments env requires and records the change; empty requires nothing.
// It reports whether the requirements changed.
func (a *Authority) SetRequires(ctx context.Context, env string, r Requirements, actor string) (bool, error) {
	if err := ValidateEnvironment(env); err != nil {
		return false, err
	}
	if err := r.validate(env); err != nil {
		return false, err
	}
	changed := false
	// The requirement is the head's alone: no scope is read or written for it.
	_, err := a.updateIn(ctx, env, scopesOf([]string{}), nil, false, func(d *Doc, now time.Time) (bool, error) {
		if d.Env == nil {
			d.Env = newEnv(env)
		}
		changed = !r.normal().equal(d.Env.Requires)
		d.Env.setRequires(&r, actor, now)
		return changed, nil
	})
	if err != nil {
		return false, fmt.Errorf("set the requirements of %s: %w", env, err)
	}
	return changed, nil
}

// PromoteRequest asks for the commit live in a scope of one environment (From) in the same scope
// of another.
type PromoteRequest struct {
	Environment string
	Scope       string
	From        string
	Actor       string
	// Request identifies the request (a comment's delivery): a repeat changes nothing and returns
	// the first answer. Empty: a new request.
	Request string
	Source  string
	Origin  string
}

// PromoteResult is an accepted promotion.
type PromoteResult struct {
	*AcceptResult
	Sha string `json:"sha"`
	Ref string `json:"ref,omitempty"`
}

// Promote reads the commit live in r.From's scope and accepts it in r.Environment's as a new
// intent, asked for even if it is older than what that scope holds (an explicit request, like a
// redeploy), and claimed for its generation in the same write, as a rollback is: a pass run with
// that generation deploys it through the usual gates, the promotion requirement among them.
func (a *Authority) Promote(ctx context.Context, r PromoteRequest) (*PromoteResult, error) {
	if err := ValidateEnvironment(r.From); err != nil {
		return nil, err
	}
	if r.From == r.Environment {
		return nil, &InputError{Field: "from", Value: r.From, Fix: "promote from another environment than the one promoted to"}
	}
	if err := ValidateScope(r.Scope); err != nil {
		return nil, err
	}
	id := r.Request
	if id == "" {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("promote id: %w", err)
		}
		id = hex.EncodeToString(b[:])
	}
	source := r.Source
	if source == "" {
		source = "promote from " + r.From
	}
	in := Intent{ID: "promote:" + r.Scope + ":" + id, Environment: r.Environment, Scopes: []string{r.Scope}, Source: source,
		Actor: r.Actor, Origin: r.Origin, Redeploy: true}
	if r.Request != "" {
		// A repeat of the request promotes what it promoted the first time, whatever is live in
		// From by now: Accept answers it as the repeat it is.
		first, err := a.Intents(ctx, r.Environment, []string{in.ID})
		if err != nil {
			return nil, fmt.Errorf("promote %s/%s from %s: %w", r.Environment, r.Scope, r.From, err)
		}
		if rec, ok := first[in.ID]; ok && rec.Sha != "" {
			in.Sha = rec.Sha
			res, err := a.Accept(ctx, in, true)
			if err != nil {
				return nil, fmt.Errorf("promote %s from %s: %w", shortSha(in.Sha), r.From, err)
			}
			return &PromoteResult{AcceptResult: res, Sha: in.Sha}, nil
		}
	}
	d, err := a.readEnvScopes(ctx, r.From, []string{r.Scope})
	if err != nil {
		return nil, fmt.Errorf("promote %s/%s from %s: %w", r.Environment, r.Scope, r.From, err)
	}
	var live *Live
	if d.Env != nil && d.Env.Scopes[r.Scope] != nil {
		live = d.Env.Scopes[r.Scope].Live
	}
	if live == nil {
		return nil, &InputError{Field: "from", Value: r.From + "/" + r.Scope, Fix: fmt.Sprintf("nothing is live in %s/%s yet: there is nothing to promote", r.From, r.Scope)}
	}
	if ValidateSha(live.Sha) != nil {
		return nil, &InputError{Field: "from", Value: r.From + "/" + r.Scope,
			Fix: fmt.Sprintf("what is live in %s/%s is recorded as %s, a sha abbreviated before shas had to be full: deploy that commit there again, so that it is recorded in full, and promote it then", r.From, r.Scope, live.Sha)}
	}
	in.Sha, in.Ref, in.Before, in.Order = live.Sha, live.Ref, live.Before, live.Order
	if ValidateSha(in.Before) != nil {
		in.Before = "" // abbreviated, stored by an older version: the promotion skips the order guard anyway
	}
	res, err := a.Accept(ctx, in, true)
	if err != nil {
		return nil, fmt.Errorf("promote %s from %s: %w", shortSha(live.Sha), r.From, err)
	}
	return &PromoteResult{AcceptResult: res, Sha: live.Sha, Ref: live.Ref}, nil
}

// descendsCache remembers the comparer's answers for pairs of commits, which never change, so
// that gates and sweep rounds ask GitHub about a pair once per process (they ask while the
// environment's updates in this process wait). It forgets everything when it is full.
type descendsCache struct {
	mu sync.Mutex
	m  map[string]bool
}

// maxDescends bounds descendsCache.
const maxDescends = 4096

func (c *descendsCache) get(key string) (bool, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.m[key]
	return d, ok
}

func (c *descendsCache) put(key string, d bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxDescends {
		c.m = map[string]bool{}
	}
	c.m[key] = d
}
