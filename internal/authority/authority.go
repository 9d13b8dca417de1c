package authority

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Bounds of a lease's TTL that the command line and the Action accept. A shorter lease cannot be
// renewed reliably (every third of it, through a store or the App's API); a longer one keeps a dead
// pass's scope locked for longer than a day.
const (
	MinLeaseTTL = 5 * time.Second
	MaxLeaseTTL = 24 * time.Hour
)

// Defaults for leases.
const (
	DefaultLeaseTTL = 2 * time.Minute
	DefaultSkew     = 5 * time.Second
	// maxAttempts bounds the conflict-retry loop of one operation; far above what 64 racers need.
	maxAttempts = 2000
)

var phaseRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Authority runs the latest-wins protocol over a Store. It is safe for concurrent use. It remembers
// the last revision it wrote of each document, so a pass that goes on in the same process writes
// without reading first; a stale memory costs one failed condition and a re-read, never a wrong
// decision, because every write is conditional on the revision it was computed from.
type Authority struct {
	store Store
	clock Clock
	skew  time.Duration
	log   *slog.Logger

	mu    sync.Mutex
	cache map[string]*Doc        // key -> a private copy of the last document this process wrote or read
	locks map[string]*sync.Mutex // key -> serialises this process's updates of the document
	// stored: key -> what of the document's outbox this process knows to be stored as records.
	stored     map[string]*storedMark
	retention  time.Duration
	queueLimit int  // pending intents one scope may hold
	scoped     bool // new environments use the per-scope layout (WithScopeDocuments)
	// layoutKnown: the store's settings say new environments use the per-scope layout
	// (PerScopeDefault); layoutAt: when they were last read.
	layoutKnown bool
	layoutAt    time.Time
	promoter    Comparer                 // asked whether a commit live in a required environment descends from one waiting
	wake        map[string]chan struct{} // key -> closed at the next write of the document (Changed)
	observer    Observer                 // told every gate's answer; nil: nobody
	descends    descendsCache
}

// Option configures an Authority.
type Option func(*Authority)

// WithClock sets the clock (tests use a fake one).
func WithClock(c Clock) Option { return func(a *Authority) { a.clock = c } }

// WithSkew sets the margin past a lease's expiry before another holder may take it over.
func WithSkew(d time.Duration) Option { return func(a *Authority) { a.skew = d } }

// MinRetention is the shortest retention ParseRetention takes: intent ids kept for less than a day
// would let a webhook re-delivered the next day be accepted a second time.
const MinRetention = 24 * time.Hour

// ParseRetention reads a retention, in days ("90d") or as a Go duration ("2160h"), of at least
// MinRetention.
func ParseRetention(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int64
		n, err = strconv.ParseInt(days, 10, 64)
		d = time.Duration(n) * 24 * time.Hour
	}
	if err != nil || d < MinRetention {
		return 0, &InputError{Field: "retention", Value: s, Fix: "give how long events and intent ids are kept, in days (90d) or as a duration (2160h), at least a day"}
	}
	return d, nil
}

// WithRetention sets how long events and intent ids are kept (default DefaultRetention); both the
// command line and the Lambda take it from LATESTWINS_RETENTION.
func WithRetention(d time.Duration) Option { return func(a *Authority) { a.retention = d } }

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(a *Authority) { a.log = l } }

// New returns an Authority over store.
func New(store Store, opts ...Option) *Authority {
	a := &Authority{store: store, clock: systemClock{}, skew: DefaultSkew, log: slog.New(slog.DiscardHandler),
		cache: map[string]*Doc{}, locks: map[string]*sync.Mutex{}, stored: map[string]*storedMark{}, retention: DefaultRetention,
		queueLimit: DefaultQueueLimit}
	for _, o := range opts {
		o(a)
	}
	return a
}

// Now is the Authority's clock reading.
func (a *Authority) Now() time.Time { return a.clock.Now() }

// Skew is the expiry margin in force.
func (a *Authority) Skew() time.Duration { return a.skew }

// Accept records an intent and returns its generation. With claim, the pass that made the intent
// also claims the intent's scopes in the same write.
//
// An intent id is remembered for the retention: a repeat returns the first generation and changes
// nothing, however many intents came after it, and the same id with another commit or other scopes
// is bad input. The id is looked up in the environment's document first, then in the intent
// records: an intent leaves the document's outbox only after its record landed, so reading in that
// order cannot miss one, and the conditional write catches an intent accepted after the reads.
func (a *Authority) Accept(ctx context.Context, in Intent, claim bool, opts ...AcceptOption) (*AcceptResult, error) {
	if err := in.validate(); err != nil {
		return nil, err
	}
	if err := in.Order.Check(a.clock.Now()); err != nil {
		return nil, fmt.Errorf("accept intent %q in %s: %w", in.ID, in.Environment, err)
	}
	var o acceptOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.enter != nil {
		if err := o.enter.validate(claim); err != nil {
			return nil, err
		}
	}
	var (
		res     *AcceptResult
		prior   *IntentRecord
		answers = map[string]verdict{}
	)
	prepare := func(ctx context.Context, d *Doc) error {
		prior = nil
		if prior = a.outboxIntent(d.Env, in.ID); prior != nil {
			return nil
		}
		var err error
		if prior, err = a.intentRecord(ctx, in.Environment, in.ID); err != nil || prior != nil {
			return err
		}
		if o.barriers != nil {
			if in.Barrier, err = d.Env.barriersOf(ctx, o.barriers, &in); err != nil {
				return err
			}
		}
		if o.comparer != nil {
			if shas := d.Env.undecidedShas(&in, answers, o.anyLive, a.clock.Now()); len(shas) > 0 {
				return ask(ctx, o.comparer, &in, shas, answers)
			}
		}
		return nil
	}
	// An intent that switches the policy to latest supersedes what waits in every scope.
	names := func(h *Env) []string {
		if in.Policy != "" && in.Policy != h.policy() {
			return nil
		}
		return in.Scopes
	}
	reservedHere := false // an attempt of this call reserved the intent's entry (counter.go)
	_, err := a.acceptIn(ctx, &in, names, prepare, func(d *Doc, now time.Time) (bool, error) {
		if d.Env == nil {
			d.Env = newEnv(in.Environment)
			d.Env.Split = d.Assembled   // a new environment is written in the per-scope layout when the store's settings say so
			d.Env.Counted = d.Assembled // and takes its generations from the counter
			d.Env.Taken = d.Taken
		}
		if reservedHere && prior != nil {
			// This call's reservation, which another writer filled before this attempt (one that
			// lost a scope's race while applying the log): it is this call's accept, not a
			// repeat, and its scopes say what it did.
			res = &AcceptResult{Accepted: []string{}, Reserved: true}
			return false, nil
		}
		if prior == nil {
			if err := d.Env.checkCapacity(in.Scopes); err != nil {
				return false, err
			}
		}
		before := d.Env.EventSeq
		// The accept's write is one document: the environment's, or in the per-scope layout one
		// scope's (an intent of several scopes goes through the head's log, a switch of the policy
		// writes every scope). Only such a write may enter the deploy phase (EnterDeploy).
		oneDoc := !d.Env.Split || (len(in.Scopes) == 1 && (in.Policy == "" || in.Policy == d.Env.policy()))
		var err error
		if res, err = d.Env.accept(&in, prior, answers, a.queueLimit, now); err != nil {
			return false, err
		}
		if err := d.Env.checkQueuedSize(); err != nil {
			return false, err
		}
		if res.Reserved {
			_, again := d.Env.logged(in.ID)
			if !again {
				d.Env.reserve(&in, answers, claim, now)
			}
			reservedHere = true
			return d.Env.EventSeq != before || !again, nil
		}
		if claim && len(res.Accepted) > 0 {
			res.Claim = d.Env.claim(res.Generation, res.Accepted, now)
			if o.enter != nil {
				res.Entered = d.enterAtOnce(o.enter, res.Claim, oneDoc, now, a.skew)
			}
		}
		if !res.Duplicate && !res.Joined {
			d.Env.logIntent(&in, res.Generation, answers, claim, now)
		}
		// A repeat of an accepted intent, re-claimed by its own pass, records nothing and writes nothing.
		return d.Env.EventSeq != before, nil
	})
	if err == nil && res.Reserved {
		res, err = a.acceptReserved(ctx, in, claim)
	}
	if err != nil {
		return nil, fmt.Errorf("accept intent %q in %s: %w", in.ID, in.Environment, err)
	}
	if res.Entered != nil {
		a.observeGate(GateRequest{Environment: in.Environment, Generation: res.Generation, Phase: "deploy"}, res.Entered, nil)
	}
	a.log.InfoContext(ctx, "accepted", "environment", in.Environment, "intent", in.ID, "generation", res.Generation, "duplicate", res.Duplicate)
	return res, nil
}

// Claim claims scopes for the pass at gen; nil scopes claims every pending scope.
func (a *Authority) Claim(ctx context.Context, env string, gen int64, scopes []string) (*ClaimResult, error) {
	if err := ValidateEnvironment(env); err != nil {
		return nil, err
	}
	if err := validateScopes(scopes, false); err != nil {
		return nil, err
	}
	var res *ClaimResult
	_, err := a.updateIn(ctx, env, scopesOf(scopes), nil, false, func(d *Doc, now time.Time) (bool, error) {
		if err := checkGeneration(d, env, gen); err != nil {
			return false, err
		}
		if err := d.Env.requireScopes(scopes); err != nil {
			return false, err
		}
		before := d.Env.EventSeq
		res = d.Env.claim(gen, scopes, now)
		return d.Env.EventSeq != before, nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim in %s at generation %d: %w", env, gen, err)
	}
	return res, nil
}

func checkGeneration(d *Doc, env string, gen int64) error {
	if d.Env == nil {
		return &InputError{Field: "environment", Value: env, Fix: "nothing was ever accepted for it; check the name, or accept an intent first (latestwins claim)"}
	}
	top := d.Env.Desired
	if d.Env.Counted && (gen < 1 || gen > top) {
		// What the documents read hold is not every generation handed out (counter.go): the
		// counter says.
		if d.Env.Counter < 0 {
			return errReadCounter
		}
		top = max(top, d.Env.Counter)
	}
	if gen < 1 || gen > top {
		return &InputError{Field: "generation", Value: fmt.Sprint(gen),
			Fix: fmt.Sprintf("%s has generations 1 to %d; pass the generation your claim returned", env, top)}
	}
	return nil
}

// GateRequest asks to enter a phase.
type GateRequest struct {
	Environment string
	Generation  int64
	Scopes      []string
	Phase       string
	Holder      string
	// LeaseTTL > 0 also grants a lease on every scope; 0 is a pure authority check.
	LeaseTTL time.Duration
}

// Gate checks that the pass may enter its next phase for every scope and, when asked, grants the
// leases of all of them in the same write. It returns a *SupersededError or a *HeldError when it may not.
func (a *Authority) Gate(ctx context.Context, r GateRequest) (*Grant, error) {
	if err := ValidateEnvironment(r.Environment); err != nil {
		return nil, err
	}
	if err := validateScopes(r.Scopes, true); err != nil {
		return nil, err
	}
	if !phaseRE.MatchString(r.Phase) {
		return nil, &InputError{Field: "phase", Value: r.Phase, Fix: "use a lowercase phase name such as build, deploy or publish"}
	}
	if r.LeaseTTL > 0 {
		if err := validateHolder(r.Holder); err != nil {
			return nil, err
		}
	}
	var g *Grant
	// A deploy gate of an environment that requires others reads each of them once (not again on
	// a conflict's retry): what is live there is a fact the gate checks, not a document it writes.
	req := newRequired()
	prepare := func(ctx context.Context, d *Doc) error {
		if r.LeaseTTL <= 0 || d.Env == nil || d.Env.Requires == nil {
			return nil
		}
		refs := map[string]*Ref{}
		for _, name := range r.Scopes {
			if sc := d.Env.Scopes[name]; sc != nil {
				refs[name] = sc.passRef(r.Generation)
			}
		}
		return a.readRequired(ctx, d.Env, refs, req)
	}
	_, err := a.updateIn(ctx, r.Environment, scopesOf(r.Scopes), prepare, false, func(d *Doc, now time.Time) (bool, error) {
		if err := checkGeneration(d, r.Environment, r.Generation); err != nil {
			return false, err
		}
		if err := d.Env.requireScopes(r.Scopes); err != nil {
			return false, err
		}
		before := d.Env.EventSeq
		prev := g
		var err error
		g, err = d.Env.gate(r.Generation, r.Scopes, r.Phase, r.Holder, r.LeaseTTL, now, a.skew, req)
		if err != nil && prev != nil {
			// An earlier attempt granted the scopes it wrote before its write of another lost a
			// race, and this one refuses: those leases are given back, not left to their TTL.
			d.Env.giveBack(prev, d.Env.Landed, now)
		}
		return d.Env.EventSeq != before, err
	})
	a.observeGate(r, g, err)
	if err != nil {
		return nil, fmt.Errorf("gate %s in %s at generation %d: %w", r.Phase, r.Environment, r.Generation, err)
	}
	return g, nil
}

// Renew extends the leases of a grant by ttl. It returns a *LostError when any of them is no longer
// the caller's.
func (a *Authority) Renew(ctx context.Context, g *Grant, ttl time.Duration) error {
	if len(g.Tokens) == 0 {
		return &InputError{Field: "grant", Fix: "renew a grant that holds leases (gate with a lease TTL)"}
	}
	_, err := a.updateIn(ctx, g.Environment, scopesOf(sortedKeys(g.Tokens)), nil, false, func(d *Doc, now time.Time) (bool, error) {
		if d.Env == nil {
			return false, &LostError{Resource: g.Environment, Reason: "environment not found"}
		}
		err := d.Env.renew(g, ttl, now)
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("renew lease in %s: %w", g.Environment, err)
	}
	return nil
}

// Release gives up the leases of a grant. Only the holder releases: when any of them is no longer
// the caller's, nothing is released and it returns a *LostError.
func (a *Authority) Release(ctx context.Context, g *Grant) error {
	if len(g.Tokens) == 0 {
		return nil
	}
	_, err := a.updateIn(ctx, g.Environment, scopesOf(sortedKeys(g.Tokens)), nil, true, func(d *Doc, now time.Time) (bool, error) {
		if d.Env == nil {
			return false, &LostError{Resource: g.Environment, Reason: "environment not found"}
		}
		scopes := d.Env.unlanded(sortedKeys(g.Tokens))
		if len(scopes) == 0 {
			return false, nil // released by an earlier attempt, whose last write lost a race
		}
		if err := d.Env.checkTokens(scopes, g.Holder, g.Generation, g.Tokens); err != nil {
			return false, err
		}
		d.Env.release(scopes, g.Holder, g.Generation, g.Tokens, now)
		for _, s := range scopes {
			d.Env.record(now, Event{Kind: EventReleased, Scope: s, Generation: g.Generation, Holder: g.Holder, Token: g.Tokens[s],
				Message: fmt.Sprintf("Pass %d released %s", g.Generation, s)})
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("release lease in %s: %w", g.Environment, err)
	}
	return nil
}

// Complete records how a pass ended and releases its leases, in one write fenced by its tokens.
// Success needs the deploy leases' tokens. A superseded pass changes nothing but the timeline.
func (a *Authority) Complete(ctx context.Context, c Completion) (*CompleteResult, error) {
	if err := ValidateEnvironment(c.Environment); err != nil {
		return nil, err
	}
	if err := validateScopes(c.Scopes, true); err != nil {
		return nil, err
	}
	if _, err := ParseOutcome(string(c.Outcome)); err != nil {
		return nil, err
	}
	if c.Outcome == OutcomeSuccess {
		for _, s := range c.Scopes {
			if _, ok := c.Tokens[s]; !ok {
				return nil, &InputError{Field: "token", Value: s,
					Fix: "a successful deploy is recorded with the fencing token of its lease; gate the deploy phase with a lease first"}
			}
		}
	}
	if c.Outcome == OutcomeFailure && (c.Attempt < 1 || c.MaxAttempts < 1) {
		return nil, &InputError{Field: "attempt", Value: fmt.Sprintf("%d of %d", c.Attempt, c.MaxAttempts),
			Fix: "give the attempt number (1 or more) and max-attempts (1 or more) with a failure"}
	}
	var res *CompleteResult
	_, err := a.updateIn(ctx, c.Environment, scopesOf(c.Scopes), nil, true, func(d *Doc, now time.Time) (bool, error) {
		if err := checkGeneration(d, c.Environment, c.Generation); err != nil {
			return false, err
		}
		if err := d.Env.requireScopes(c.Scopes); err != nil {
			return false, err
		}
		prev := res
		if res = d.Env.repeatedSuccess(&c); res != nil {
			return false, nil // the success took effect before: nothing to write
		}
		// The scopes an earlier attempt completed, before its write of another lost a race,
		// keep what it decided for them.
		rest := c
		if prev != nil {
			rest.Scopes = d.Env.unlanded(c.Scopes)
			if len(rest.Scopes) == 0 {
				res = prev
				return false, nil
			}
		}
		var err error
		if res, err = d.Env.complete(&rest, now, a.skew); err != nil {
			return false, err
		}
		if len(rest.Scopes) < len(c.Scopes) {
			res.keep(prev, c.Scopes, d.Env.Landed)
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("complete generation %d in %s: %w", c.Generation, c.Environment, err)
	}
	return res, nil
}

// Unlock frees a lease by hand and records who did it and why. The resource is ENV/SCOPE for a
// scope's deploy lease, or the name of a named lease. It returns the lease as it was.
//
// With a request id (UnlockOnce), a scope's unlock is done once per id for the retention: the id is
// remembered in the same write, and a repeat (a re-delivered comment command) returns ErrRepeated
// instead of freeing whatever newer pass holds the lease by then.
func (a *Authority) Unlock(ctx context.Context, resource, reason, actor string, opts ...UnlockOption) (Lease, error) {
	if strings.TrimSpace(reason) == "" {
		return Lease{}, &InputError{Field: "reason", Fix: "say why the lease is unlocked (--reason TEXT); it goes in the timeline"}
	}
	var o unlockOptions
	for _, opt := range opts {
		opt(&o)
	}
	env, scope, splitErr := SplitResource(resource)
	if splitErr == nil {
		var prev Lease
		var found bool
		var done *IntentRecord
		id := ""
		if o.request != "" {
			id = "unlock:" + scope + ":" + o.request
		}
		prepare := func(ctx context.Context, d *Doc) error {
			done = nil
			if id == "" {
				return nil
			}
			if done = a.outboxIntent(d.Env, id); done != nil {
				return nil
			}
			var err error
			done, err = a.intentRecord(ctx, env, id)
			return err
		}
		d, err := a.updateIn(ctx, env, scopesOf([]string{scope}), prepare, false, func(d *Doc, now time.Time) (bool, error) {
			if d.Env == nil || d.Env.Scopes[scope] == nil || done != nil {
				return false, nil
			}
			prev, found = d.Env.unlock(scope, reason, actor, now)
			if id != "" {
				// Remembered whether or not the lease was held: a repeat of this request must never
				// free a lease a newer pass took since.
				d.Env.Accepts = append(d.Env.Accepts, IntentRecord{ID: id, At: now})
				return true, nil
			}
			return found, nil
		})
		if err != nil {
			return Lease{}, fmt.Errorf("unlock %s: %w", resource, err)
		}
		if done != nil {
			return Lease{}, fmt.Errorf("unlock %s for request %s: %w", resource, o.request, ErrRepeated)
		}
		if d.Env != nil && d.Env.Scopes[scope] != nil {
			if !found {
				return Lease{}, fmt.Errorf("unlock %s: %w", resource, ErrNotFound)
			}
			return prev, nil
		}
	}
	var prev Lease
	d, err := a.update(ctx, LeaseKey(resource), func(d *Doc, now time.Time) (bool, error) {
		if d.Lease == nil || d.Lease.Lease.Holder == "" {
			return false, nil
		}
		prev = d.Lease.Lease
		d.Lease.Lease.free()
		d.Lease.record(now, Event{Kind: EventUnlocked, Holder: prev.Holder, Token: prev.Token,
			Message: fmt.Sprintf("Unlocked by %s: %s (was held by %s for %s)", orUnknown(actor), reason, prev.Holder, prev.Purpose)})
		return true, nil
	})
	if err != nil {
		return Lease{}, fmt.Errorf("unlock %s: %w", resource, err)
	}
	if d.Lease == nil {
		// Neither a scope of a known environment nor a named lease: most likely a typo.
		return Lease{}, &InputError{Field: "lease", Value: resource,
			Fix: "no such lease: name it ENVIRONMENT/SCOPE of an environment and scope that exist (latestwins status ENV lists them), or a named lease"}
	}
	if prev.Holder == "" {
		return Lease{}, fmt.Errorf("unlock %s: not locked: %w", resource, ErrNotFound)
	}
	return prev, nil
}

// UnlockOption configures one Unlock.
type UnlockOption func(*unlockOptions)

type unlockOptions struct{ request string }

// UnlockOnce makes the unlock of a scope's lease happen once for request (a webhook delivery id).
func UnlockOnce(request string) UnlockOption { return func(o *unlockOptions) { o.request = request } }

// Status reads an environment's current state from the store (never from memory), with its newest
// StatusEvents events in Events.
func (a *Authority) Status(ctx context.Context, env string) (*Env, error) {
	if err := ValidateEnvironment(env); err != nil {
		return nil, err
	}
	d, err := a.readEnv(ctx, env)
	if err != nil {
		return nil, fmt.Errorf("status of %s: %w", env, err)
	}
	if d.Env == nil {
		return nil, &InputError{Field: "environment", Value: env, Fix: "unknown environment: nothing was ever accepted for it; check the name"}
	}
	if err := movedError(d); err != nil {
		return nil, err
	}
	page, err := a.history(ctx, d.Env, 0, StatusEvents)
	if err != nil {
		return nil, fmt.Errorf("status of %s: %w", env, err)
	}
	d.Env.Events = page.Events
	return d.Env, nil
}

// State reads an environment's current state from the store without its events: what a reader
// of many environments needs (metrics, say); nil when nothing was ever accepted for it.
func (a *Authority) State(ctx context.Context, env string) (*Env, error) {
	if err := ValidateEnvironment(env); err != nil {
		return nil, err
	}
	d, err := a.readEnv(ctx, env)
	if err != nil {
		return nil, fmt.Errorf("state of %s: %w", env, err)
	}
	if err := movedError(d); err != nil {
		return nil, err
	}
	return d.Env, nil
}

// StatusEvents is how many of the newest events Status reads with the state, for rendering;
// History pages through the rest.
const StatusEvents = 50

// Pending lists environments with unreconciled work, from the store's sparse index.
func (a *Authority) Pending(ctx context.Context) ([]string, error) {
	envs, _, err := a.pending(ctx)
	return envs, err
}

// pending is Pending with, for each environment of the per-scope layout, the scopes whose
// documents the index lists (the index lists one as ENV#SCOPE); an environment listed only by
// its own document has none.
func (a *Authority) pending(ctx context.Context) ([]string, map[string][]string, error) {
	names, err := a.store.Pending(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("list pending environments: %w", err)
	}
	envs := make([]string, 0, len(names))
	scopes := map[string][]string{}
	for _, n := range names {
		env, scope, _ := strings.Cut(n, "#")
		if !slices.Contains(envs, env) {
			envs = append(envs, env)
		}
		if scope != "" {
			scopes[env] = append(scopes[env], scope)
		}
	}
	return envs, scopes, nil
}

// Lister is what a store that can list every environment it holds offers (memory, bolt, and
// DynamoDB with a scan): for overviews and maintenance, never on a request path.
type Lister interface {
	Environments(ctx context.Context) ([]string, error)
}

// ErrNotListable: the store cannot list its environments.
var ErrNotListable = errors.New("the store cannot list its environments")

// Environments lists every environment the store holds, sorted; an error matching ErrNotListable
// when the store cannot list them.
func (a *Authority) Environments(ctx context.Context) ([]string, error) {
	l, ok := a.store.(Lister)
	if !ok {
		return nil, ErrNotListable
	}
	envs, err := l.Environments(ctx)
	if err != nil {
		return nil, fmt.Errorf("list environments: %w", err)
	}
	// The scopes' documents of the per-scope layout, ENV#SCOPE, are parts of ENV.
	envs = slices.DeleteFunc(envs, func(n string) bool { return strings.Contains(n, "#") })
	slices.Sort(envs)
	return envs, nil
}

// outboxIntent returns the record of intent id still in e's outbox (e may be nil), or nil when there
// is none within the retention: an intent waiting in the outbox is remembered exactly as long as
// its record would be.
func (a *Authority) outboxIntent(e *Env, id string) *IntentRecord {
	if e == nil {
		return nil
	}
	if r := e.pendingAccept(id); r != nil && !a.expired(*r, a.clock.Now()) {
		return r
	}
	return nil
}

// expired reports whether an intent of the outbox is past the retention at now.
func (a *Authority) expired(in IntentRecord, now time.Time) bool {
	return !now.Before(in.At.Add(a.retention))
}

// intentRecord reads the record of an accepted intent, or nil when there is none within the
// retention.
func (a *Authority) intentRecord(ctx context.Context, env, id string) (*IntentRecord, error) {
	recs, err := a.store.GetRecords(ctx, []string{IntentKey(env, id)})
	if err != nil {
		return nil, fmt.Errorf("read the record of intent %q: %w", id, err)
	}
	now := a.clock.Now()
	for _, r := range recs {
		if r.Intent != nil && r.Intent.ID == id && now.Before(r.ExpiresAt) {
			return r.Intent, nil
		}
	}
	return nil, nil
}

// --- the read-modify-conditional-write loop ----------------------------------------------------------

// update applies fn to the document under key and writes it back, conditional on the revision fn
// saw. fn returns whether it changed the document, and an error to return after the write (a refusal
// can still record a timeline event). On a conflict the document is read again and fn re-applied. A
// decision made on remembered state that does not write is confirmed against a fresh read.
//
// Around the write it runs the outbox: the events and intents of the document it read that this
// process does not know to be records are stored as records before the write, so that the write
// can drop them; the ones the write adds wait in the outbox for a later write. So one batch of
// records carries the events of several transitions, and costs no request after the write: a
// write stores the outbox it found once it holds outboxBatch events and intents, or when it ends a
// pass (updateFlush). A failure to store records is not the operation's failure (a later write
// stores them), unless the outbox would grow past its bound.
func (a *Authority) update(ctx context.Context, key string, fn func(*Doc, time.Time) (bool, error)) (*Doc, error) {
	return a.write(ctx, key, nil, nil, false, fn)
}

// updateIn is update of an environment's transition that touches the scopes names gives (nil:
// every scope), which is all that the per-scope layout reads and writes of it.
func (a *Authority) updateIn(ctx context.Context, env string, names namesFunc, prepare func(context.Context, *Doc) error, flush bool, fn func(*Doc, time.Time) (bool, error)) (*Doc, error) {
	return a.write(ctx, EnvKey(env), names, prepare, flush, fn)
}

// acceptIn is updateIn for Accept of in. On a counted head of the per-scope layout that this
// process remembers, the accept of one scope makes its first attempt without reading the head:
// it takes its generation and then reads the head, which is what it decides on (counter.go), so
// a read before the take would only be repeated. The first attempt on the remembered head gets
// as far as the counter's request; whatever else it decided is decided again on the head read
// after. An intent of several scopes reserves its entry in the head first, and reads it first.
func (a *Authority) acceptIn(ctx context.Context, in *Intent, names namesFunc, prepare func(context.Context, *Doc) error, fn func(*Doc, time.Time) (bool, error)) (*Doc, error) {
	if len(in.Scopes) == 1 {
		// An intent that names another policy than the remembered one would read every scope on
		// the way to the counter: it reads the head first instead.
		if d := a.remembered(EnvKey(in.Environment)); isSplit(d) && d.Env.Counted && d.Env.Moved == nil && (in.Policy == "" || in.Policy == d.Env.policy()) {
			return a.writeSplit(ctx, in.Environment, d, true, names, prepare, false, fn)
		}
	}
	return a.updateIn(ctx, in.Environment, names, prepare, false, fn)
}

// updatePrepared is update with prepare run on every document fn is about to see, before fn: the
// reads a decision needs besides the document (an intent's record), in that order.
func (a *Authority) updatePrepared(ctx context.Context, key string, prepare func(context.Context, *Doc) error, fn func(*Doc, time.Time) (bool, error)) (*Doc, error) {
	return a.write(ctx, key, nil, prepare, false, fn)
}

// updateFlush is update for the last write of a pass (complete, release) and for Compact: it stores
// the whole outbox it found before it writes, however small, so that the document keeps only this
// write's own events between passes.
func (a *Authority) updateFlush(ctx context.Context, key string, fn func(*Doc, time.Time) (bool, error)) (*Doc, error) {
	return a.write(ctx, key, nil, nil, true, fn)
}

// write is the loop of update, updatePrepared and updateFlush.
func (a *Authority) write(ctx context.Context, key string, names namesFunc, prepare func(context.Context, *Doc) error, flush bool, fn func(*Doc, time.Time) (bool, error)) (*Doc, error) {
	env, isEnv := strings.CutPrefix(key, envKeyPrefix)
	var loaded *Doc
	if isEnv {
		// The head of the per-scope layout is read afresh by every transition; a single document
		// is read when this process does not remember it, as below.
		if d := a.remembered(key); d == nil || isSplit(d) {
			var err error
			if loaded, err = a.load(ctx, key); err != nil {
				return nil, err
			}
			if loaded, err = a.finishIfMoving(ctx, env, loaded); err != nil {
				return nil, err
			}
			if isSplit(loaded) {
				return a.writeSplit(ctx, env, loaded, false, names, prepare, flush, fn)
			}
			if loaded.Env == nil {
				if per, err := a.PerScopeDefault(ctx); err != nil {
					return nil, err
				} else if per {
					return a.writeSplit(ctx, env, loaded, false, names, prepare, flush, fn)
				}
			}
		}
	}
	// Updates of one document from this process go one at a time: racing each other would only
	// waste writes on conflicts, and the remembered revision stays current between them.
	unlock, held := a.lock(key), true
	defer func() {
		if held {
			unlock()
		}
	}()
	doc, fresh := a.remembered(key), false
	if loaded != nil {
		doc, fresh = loaded, true
	}
	if doc == nil {
		var err error
		if doc, err = a.load(ctx, key); err != nil {
			return nil, err
		}
		fresh = true
	}
	for attempt := 0; attempt < maxAttempts; attempt++ {
		if err := movedError(doc); err != nil {
			return nil, err
		}
		if isEnv && isSplit(doc) {
			// Moved to the per-scope layout since this process last read it.
			unlock()
			held = false
			return a.writeSplit(ctx, env, doc, false, names, prepare, flush, fn)
		}
		if prepare != nil {
			if err := prepare(ctx, doc); err != nil {
				return nil, err
			}
		}
		work := cloneDoc(doc)
		now := a.clock.Now()
		changed, ferr := fn(work, now)
		if !changed && !fresh {
			var err error
			if doc, err = a.load(ctx, key); err != nil {
				return nil, err
			}
			fresh = true
			continue
		}
		if !changed {
			return work, ferr
		}
		if work.Env != nil {
			// An intent that waited in the outbox past the retention is forgotten there as its
			// record would be (outboxIntent): dropped, not stored.
			work.Env.Accepts = slices.DeleteFunc(work.Env.Accepts, func(in IntentRecord) bool { return a.expired(in, now) })
			// Store what the document's outbox holds, so that this write can drop it: on the first
			// attempt once it has gathered a batch (or the write ends a pass), and on a retry only
			// once it has grown past the soft limit. A retry after a conflict meets the outbox of
			// the writer that won; storing it from every loser of a race would only multiply the
			// requests, and the next write that is not racing stores it in one batch.
			if n := doc.Env.outboxLen(); n > 0 && ((attempt == 0 && (flush || n >= outboxBatch)) || n > outboxSoftLimit) {
				if err := a.archive(ctx, doc); err != nil {
					a.log.WarnContext(ctx, "storing the outbox's records failed; the next write tries again", "key", key, "err", err)
				}
			}
			a.trim(key, work.Env)
			// The bound is on what earlier writes left unstored; this transition's own events (up to
			// three per scope) always fit, so a large transition is never refused for its size.
			inherited := 0
			if doc.Env != nil {
				for _, ev := range work.Env.Outbox {
					if ev.Seq <= doc.Env.EventSeq {
						inherited++
					}
				}
			}
			if inherited > maxOutbox {
				return nil, fmt.Errorf("write %s: %d events of earlier writes wait to be stored as records, more than %d: the store does not take records (%w)",
					key, inherited, maxOutbox, ErrOutboxFull)
			}
			work.Pending = work.Env.HasPending()
		}
		rev, err := a.store.Put(ctx, work)
		if err == nil {
			work.Rev = rev
			a.remember(work)
			a.woke(key)
			return work, ferr
		}
		if !errors.Is(err, ErrConflict) {
			a.forget(key)
			return nil, fmt.Errorf("write %s: %w", key, err)
		}
		if err := backoff(ctx, attempt); err != nil {
			return nil, err
		}
		if doc, err = a.load(ctx, key); err != nil {
			return nil, err
		}
		fresh = true
	}
	return nil, fmt.Errorf("write %s: gave up after %d conflicting attempts: %w", key, maxAttempts, ErrConflict)
}

func (a *Authority) load(ctx context.Context, key string) (*Doc, error) {
	d, err := a.store.Get(ctx, key)
	if errors.Is(err, ErrNotFound) {
		d = &Doc{Key: key}
	} else if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	a.remember(d)
	return d, nil
}

// How many documents a long-lived process (serve, a Lambda instance) remembers, and keeps locks for.
const maxRemembered = 256

func (a *Authority) lock(key string) func() {
	a.mu.Lock()
	l, ok := a.locks[key]
	if !ok {
		if len(a.locks) >= 4*maxRemembered {
			// Forget the locks nobody holds. A caller that already took one from the map still
			// serialises on it; a new one for the same key would only cost a conflict, never a
			// wrong decision, since every write is conditional.
			for k, m := range a.locks {
				if m.TryLock() {
					m.Unlock()
					delete(a.locks, k)
				}
			}
		}
		l = &sync.Mutex{}
		a.locks[key] = l
	}
	a.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// backoff waits a random time below a ceiling that doubles with each conflict, from 4 ms up to about
// one second: racing processes spread out instead of colliding again on their next write.
func backoff(ctx context.Context, attempt int) error {
	return pause(ctx, 4*time.Millisecond<<min(attempt, 8))
}

// pause waits a random time below ceiling, or until ctx ends.
func pause(ctx context.Context, ceiling time.Duration) error {
	t := time.NewTimer(time.Duration(rand.Int64N(int64(ceiling)) + 1))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// remember keeps a private copy of d as the last revision this process saw.
func (a *Authority) remember(d *Doc) {
	c := cloneDoc(d)
	a.mu.Lock()
	if _, ok := a.cache[d.Key]; !ok && len(a.cache) >= maxRemembered {
		for k := range a.cache { // forget an arbitrary one: a forgotten document costs one read
			delete(a.cache, k)
			break
		}
	}
	a.cache[d.Key] = c
	a.mu.Unlock()
}

// remembered returns a private copy of the last revision this process saw of key, or nil.
func (a *Authority) remembered(key string) *Doc {
	a.mu.Lock()
	d := a.cache[key]
	a.mu.Unlock()
	if d == nil {
		return nil
	}
	return cloneDoc(d)
}

func (a *Authority) forget(key string) {
	a.mu.Lock()
	delete(a.cache, key)
	a.mu.Unlock()
}

// cloneDoc deep-copies a document, so that a transition can work on it and be thrown away.
func cloneDoc(d *Doc) *Doc {
	c := *d
	c.Env = d.Env.clone()
	if d.Lease != nil {
		l := *d.Lease
		l.Events = slices.Clone(d.Lease.Events)
		c.Lease = &l
	}
	if d.Deliveries != nil {
		dc := *d.Deliveries
		if dc.Failing != nil {
			f := *dc.Failing
			dc.Failing = &f
		}
		c.Deliveries = &dc
	}
	return &c
}

func (e *Env) clone() *Env {
	if e == nil {
		return nil
	}
	c := *e
	c.Events = slices.Clone(e.Events)
	c.Outbox = slices.Clone(e.Outbox)
	// Intent records are never changed in place, only added and dropped: their scopes can be shared.
	c.Accepts = slices.Clone(e.Accepts)
	if e.Requires != nil {
		r := *e.Requires
		r.Environments = slices.Clone(e.Requires.Environments)
		c.Requires = &r
	}
	c.Gates = e.Gates.clone()
	c.Log = slices.Clone(e.Log)
	c.Dir = slices.Clone(e.Dir)
	c.Tops = maps.Clone(e.Tops)
	c.Results = maps.Clone(e.Results)
	c.Scopes = make(map[string]*Scope, len(e.Scopes))
	for name, s := range e.Scopes {
		sc := *s
		// Refusal marks are edited in place (recordRefusal): a transition's copy must not change
		// the remembered document's.
		sc.Refused = slices.Clone(s.Refused)
		if s.Mailbox != nil {
			m := *s.Mailbox
			sc.Mailbox = &m
		}
		if s.Queue != nil {
			sc.Queue = make([]*Ref, len(s.Queue))
			for i, r := range s.Queue {
				q := *r
				sc.Queue[i] = &q
			}
		}
		if s.Live != nil {
			l := *s.Live
			sc.Live = &l
		}
		if s.Prev != nil {
			l := *s.Prev
			sc.Prev = &l
		}
		if s.Freeze != nil {
			f := *s.Freeze
			sc.Freeze = &f
		}
		if s.Failure != nil {
			f := *s.Failure
			sc.Failure = &f
		}
		c.Scopes[name] = &sc
	}
	return &c
}
