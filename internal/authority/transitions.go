package authority

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits on what one environment document holds. Its history is not among them: events and intents
// leave the document for records of their own.
const (
	// maxOutbox bounds the events an environment's outbox may hold: a transition that would go
	// beyond it waits until the store takes the records again.
	maxOutbox      = 128
	maxMessageSize = 300
	maxIDLen       = 160 // intent ids and lease holders
	maxFieldLen    = 160 // refs, sources, actors, origins
	// MaxFieldLen is the longest ref, source, actor or origin an intent may carry.
	MaxFieldLen = maxFieldLen
	// MaxScopes is how many scopes one environment may have.
	MaxScopes = 64
)

// Intent is a request to bring scopes of an environment to a commit.
type Intent struct {
	ID          string   `json:"id"`
	Environment string   `json:"environment"`
	Scopes      []string `json:"scopes"`
	Sha         string   `json:"sha"`
	Ref         string   `json:"ref,omitempty"`
	Before      string   `json:"before,omitempty"` // the commit this one was pushed on top of, when known
	Source      string   `json:"source,omitempty"`
	Actor       string   `json:"actor,omitempty"`
	// Redeploy skips the out-of-order guard: the intent asks for this commit even if it is older.
	Redeploy bool `json:"redeploy,omitempty"`
	// Origin tells whoever made the intent how to start its work again (the App: the installation,
	// repository and branch to dispatch on). The domain keeps it with the mailbox entry and hands it
	// to the recovery sweep; it never reads it.
	Origin string `json:"origin,omitempty"`
	// Order is what the push's payload says about when it happened (see Order).
	Order Order `json:"order,omitzero"`
	// Policy, when set, is the environment's policy as its maker's configuration says: an intent
	// with another policy than the stored one switches the environment first, in the same write,
	// and records the switch (see Env.setPolicy). Empty keeps the stored policy.
	Policy Policy `json:"policy,omitempty"`
	// Barrier lists the scopes of Scopes for which this intent is a barrier: newer intents wait
	// behind it instead of superseding it. The maker decides (the App: the push's changed files
	// match the scope's barrier-paths, or the changed files are not known).
	Barrier []string `json:"barrier,omitempty"`
	// Requires, when set, is the environment's promotion requirement as its maker's configuration
	// says: another one than the stored one replaces it in the same write, and the change is
	// recorded (an empty one requires nothing). nil keeps the stored requirement.
	Requires *Requirements `json:"requires,omitempty"`
	// AlertAfter, when set, is the environment's alert-after as its maker's configuration says
	// (zero: no alarm); nil keeps the stored one. Never taken from JSON: over the App's API the
	// trusted configuration's applies, whatever a workload sends.
	AlertAfter *time.Duration `json:"-"`
	// Gates, when set, are the environment's gates as its maker's configuration says (an empty
	// one holds for nothing); nil keeps the stored ones. Never taken from JSON, as AlertAfter.
	Gates *Gates `json:"-"`
}

func (in *Intent) validate() error {
	if err := ValidateEnvironment(in.Environment); err != nil {
		return err
	}
	if in.ID == "" || len(in.ID) > maxIDLen {
		return &InputError{Field: "intent-id", Value: truncate(in.ID, 40), Fix: fmt.Sprintf("give a unique intent id of 1-%d characters (a delivery id, or run id)", maxIDLen)}
	}
	if err := validateScopes(in.Scopes, true); err != nil {
		return err
	}
	for field, v := range map[string]string{"ref": in.Ref, "source": in.Source, "actor": in.Actor, "origin": in.Origin} {
		if len(v) > maxFieldLen {
			return &InputError{Field: field, Value: truncate(v, 40), Fix: fmt.Sprintf("use at most %d characters", maxFieldLen)}
		}
	}
	if in.Policy != "" {
		if _, err := ParsePolicy(string(in.Policy)); err != nil {
			return err
		}
	}
	if in.Requires != nil {
		if err := in.Requires.validate(in.Environment); err != nil {
			return err
		}
	}
	if err := validateAlertAfter(in.AlertAfter); err != nil {
		return err
	}
	if err := in.Gates.validate(in.Environment, in.Requires); err != nil {
		return err
	}
	for _, b := range in.Barrier {
		if !slices.Contains(in.Scopes, b) {
			return &InputError{Field: "barrier", Value: b, Fix: "name as barriers only scopes of the intent"}
		}
	}
	if in.Before != "" {
		if err := ValidateSha(in.Before); err != nil {
			return &InputError{Field: "before", Value: truncate(in.Before, 70), Fix: "give the full sha of the commit this one was pushed on top of (40 hex digits, 64 in a SHA-256 repository), or leave it empty"}
		}
	}
	return ValidateSha(in.Sha)
}

// checkCapacity refuses an intent that would give the environment more than MaxScopes scopes, so
// that its document stays within the store's item size.
func (e *Env) checkCapacity(scopes []string) error {
	if e.Split {
		n := len(e.Dir)
		for _, s := range scopes {
			if _, found := slices.BinarySearch(e.Dir, s); !found && e.Scopes[s] == nil {
				n++
			}
		}
		if n > MaxScopesSplit {
			return &InputError{Field: "scopes", Value: strings.Join(scopes, ","),
				Fix: fmt.Sprintf("environment %s would have %d scopes; at most %d fit, split it into several environments", e.Name, n, MaxScopesSplit)}
		}
		return nil
	}
	n := len(e.Scopes)
	for _, s := range scopes {
		if _, ok := e.Scopes[s]; !ok {
			n++
		}
	}
	if n > MaxScopes {
		return &InputError{Field: "scopes", Value: strings.Join(scopes, ","),
			Fix: fmt.Sprintf("environment %s would have %d scopes; at most %d fit in its single document: move it to the per-scope layout (latestwins migrate --per-scope %s, up to %d scopes) or split it into several environments",
				e.Name, n, MaxScopes, e.Name, MaxScopesSplit)}
	}
	return nil
}

// truncate cuts s to at most n bytes on a character boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// AcceptResult says what became of an intent.
type AcceptResult struct {
	Generation int64 `json:"generation"`
	// Duplicate: the intent id was accepted before; this is its first generation and nothing changed.
	Duplicate bool `json:"duplicate,omitempty"`
	// Joined: every scope already had this commit pending at Generation; the intent joined it rather
	// than taking a generation of its own.
	Joined bool `json:"joined,omitempty"`
	// Accepted lists the scopes whose mailbox now holds this intent.
	Accepted []string `json:"accepted"`
	// Stale lists scopes where the intent arrived behind a newer commit of its branch: it was recorded
	// as superseded at once, by the generation named.
	Stale map[string]int64 `json:"stale,omitempty"`
	// Claim is set when the intent was accepted and claimed in one write.
	Claim *ClaimResult `json:"claim,omitempty"`
	// Ahead says, per scope where the intent waits behind others (policy queue, or a barrier), how
	// many pending intents are ahead of it.
	Ahead map[string]int `json:"ahead,omitempty"`
	// Entered is the deploy phase's grant, with the leases, when Accept was asked to enter it
	// (EnterDeploy) and the gate let the pass go in the same write.
	Entered *Grant `json:"entered,omitempty"`
	// Reserved: on a counted head, an intent of several scopes that has its entry in the
	// head's log and no generation yet (counter.go).
	Reserved bool `json:"-"`
}

func (r *AcceptResult) ahead(scope string, n int) {
	if n <= 0 {
		return
	}
	if r.Ahead == nil {
		r.Ahead = map[string]int{}
	}
	r.Ahead[scope] = n
}

// ClaimResult lists the scopes a pass now owns, and those it may not touch.
type ClaimResult struct {
	Generation int64              `json:"generation"`
	Claimed    []ClaimedScope     `json:"claimed"`
	Superseded []*SupersededError `json:"superseded,omitempty"`
	Idle       []string           `json:"idle,omitempty"` // nothing pending there
}

// ClaimedScope is a scope a pass owns, with the commit it is to reconcile.
type ClaimedScope struct {
	Scope     string `json:"scope"`
	Sha       string `json:"sha"`
	Ref       string `json:"ref,omitempty"`
	IntentGen int64  `json:"intent_generation"`
	IntentID  string `json:"intent_id"`
	Attempt   int    `json:"attempt"` // failed attempts so far
	// Ahead > 0: the intent waits behind that many others; the pass may work, but takes the scope's
	// lease (deploys) only once they have their outcomes.
	Ahead      int    `json:"ahead,omitempty"`
	PrevHolder string `json:"-"`
}

// Scopes returns the claimed scope names.
func (c *ClaimResult) Scopes() []string {
	out := make([]string, 0, len(c.Claimed))
	for _, s := range c.Claimed {
		out = append(out, s.Scope)
	}
	return out
}

// Grant is a passed gate: authority for a phase, and the leases when the phase asked for them.
type Grant struct {
	Environment string           `json:"environment"`
	Generation  int64            `json:"generation"`
	Phase       string           `json:"phase"`
	Holder      string           `json:"holder,omitempty"`
	Tokens      map[string]int64 `json:"tokens,omitempty"` // per scope, when leased
	ExpiresAt   time.Time        `json:"expires_at,omitzero"`
	TookOver    []string         `json:"took_over,omitempty"` // scopes whose expired lease was recovered
	// RequestedAt is when the caller sent the request that was granted, by the caller's clock. The
	// store's clock set ExpiresAt no earlier than that, so a holder that counts its deadline from
	// RequestedAt + TTL never counts past the lease. Set by the caller (pass.Gate), never stored.
	RequestedAt time.Time `json:"-"`

	handovers []handover // the scopes whose lease was handed to this pass after it waited (Observer)
}

// Outcome is what a pass reports when it completes.
type Outcome string

// Outcomes a pass reports.
const (
	OutcomeSuccess     Outcome = "success"
	OutcomeFailure     Outcome = "failure"     // the work failed; retryable unless the attempt is the last
	OutcomeLost        Outcome = "lost"        // the lease was lost: retryable infrastructure loss
	OutcomeInterrupted Outcome = "interrupted" // stopped by a signal: retryable
	OutcomeInvalid     Outcome = "invalid"     // bad configuration or input: terminal at once
)

// ParseOutcome checks an outcome name.
func ParseOutcome(s string) (Outcome, error) {
	switch o := Outcome(s); o {
	case OutcomeSuccess, OutcomeFailure, OutcomeLost, OutcomeInterrupted, OutcomeInvalid:
		return o, nil
	}
	return "", &InputError{Field: "outcome", Value: s, Fix: "use success, failure, lost, interrupted or invalid"}
}

// Result is how a scope ended for a completing pass.
type Result string

// Results of Complete, per scope.
const (
	ResultDeployed   Result = "deployed"
	ResultSuperseded Result = "superseded"
	ResultRetry      Result = "retry"  // nothing terminal published; the intent stays pending
	ResultFailed     Result = "failed" // terminal error published; observed moves past it
	// ResultUnapproved: a deployment status of a deployment the App never approved; only a warning
	// was recorded (Report).
	ResultUnapproved Result = "unapproved"
)

// Completion is what a pass reports at its end.
type Completion struct {
	Environment string           `json:"environment"`
	Generation  int64            `json:"generation"`
	Scopes      []string         `json:"scopes"`
	Holder      string           `json:"holder,omitempty"`
	Tokens      map[string]int64 `json:"tokens,omitempty"` // the deploy leases, released in the same write
	Outcome     Outcome          `json:"outcome"`
	Attempt     int              `json:"attempt,omitempty"`
	MaxAttempts int              `json:"max_attempts,omitempty"`
	Message     string           `json:"message,omitempty"`
	Run         string           `json:"run,omitempty"`
}

// CompleteResult is the result per scope.
type CompleteResult struct {
	Results    map[string]Result           `json:"results"`
	Superseded map[string]*SupersededError `json:"superseded,omitempty"`
}

// keep copies into r what prev said of the scopes of names that landed.
func (r *CompleteResult) keep(prev *CompleteResult, names []string, landed map[string]bool) {
	for _, name := range names {
		if !landed[name] {
			continue
		}
		if res, ok := prev.Results[name]; ok {
			r.Results[name] = res
		}
		if sup := prev.Superseded[name]; sup != nil {
			if r.Superseded == nil {
				r.Superseded = map[string]*SupersededError{}
			}
			r.Superseded[name] = sup
		}
	}
}

// giveBack frees the leases of g on the scopes of landed (an earlier attempt's writes) that g
// still holds, and records why.
func (e *Env) giveBack(g *Grant, landed map[string]bool, now time.Time) {
	for _, name := range sortedKeys(g.Tokens) {
		sc := e.Scopes[name]
		if !landed[name] || sc == nil || sc.Lease.Holder != g.Holder || sc.Lease.Token != g.Tokens[name] || sc.Lease.Generation != g.Generation {
			continue
		}
		e.release([]string{name}, g.Holder, g.Generation, g.Tokens, now)
		e.record(now, Event{Kind: EventReleased, Scope: name, Generation: g.Generation, Holder: g.Holder, Token: g.Tokens[name],
			Message: fmt.Sprintf("Pass %d gave %s back: its gate was refused on another scope", g.Generation, name)})
	}
}

// unlanded is names without the scopes an earlier attempt of this transition wrote (Env.Landed).
func (e *Env) unlanded(names []string) []string {
	if len(e.Landed) == 0 {
		return names
	}
	return slices.DeleteFunc(slices.Clone(names), func(name string) bool { return e.Landed[name] })
}

// Overall folds the per-scope results into one: failed beats retry beats superseded beats deployed.
func (r *CompleteResult) Overall() Result {
	rank := map[Result]int{ResultDeployed: 0, ResultSuperseded: 1, ResultRetry: 2, ResultFailed: 3, ResultUnapproved: 4}
	best := ResultDeployed
	for _, res := range r.Results {
		if rank[res] > rank[best] {
			best = res
		}
	}
	return best
}

// --- pure transitions on an environment document --------------------------------------------------

func newEnv(name string) *Env {
	return &Env{Name: name, Scopes: map[string]*Scope{}}
}

func (e *Env) scope(name string) *Scope {
	if e.Scopes == nil {
		e.Scopes = map[string]*Scope{}
	}
	s, ok := e.Scopes[name]
	if !ok {
		s = &Scope{}
		e.Scopes[name] = s
	}
	return s
}

// record appends an event to the outbox; a later write stores it as a record of its own.
func (e *Env) record(now time.Time, ev Event) {
	e.EventSeq++
	ev.Seq = e.EventSeq
	ev.At = now
	ev.Message = truncate(ev.Message, maxMessageSize)
	e.Outbox = append(e.Outbox, ev)
}

// settle recomputes observed: the highest G such that every intent up to G has its outcome. Pending
// intents are exactly the mailbox entries, so it is one less than the oldest entry, or desired when
// the mailbox is empty. It never goes back.
func (e *Env) settle() {
	obs := e.Desired
	for _, s := range e.Scopes {
		for _, m := range s.Entries() {
			if !m.Failed { // a failed intent has its outcome, even while it blocks
				obs = min(obs, m.Generation-1)
				break
			}
		}
	}
	if obs > e.Observed {
		e.Observed = obs
	}
}

// HasPending reports whether any scope holds unreconciled work.
func (e *Env) HasPending() bool {
	for _, s := range e.Scopes {
		if s.Mailbox != nil {
			return true
		}
	}
	return false
}

// accept records an intent: the next generation, and the mailbox entry of each of its scopes unless
// the commit arrived behind a newer one of its branch. prior is the intent's record when it was
// accepted before (from the outbox or the records); order answers what the payloads could not.
func (e *Env) accept(in *Intent, prior *IntentRecord, order map[string]verdict, limit int, now time.Time) (*AcceptResult, error) {
	if prior != nil {
		if err := prior.matches(in); err != nil {
			return nil, err
		}
		// A repeat: the scopes it names whose mailbox still holds this intent are what its pass may
		// claim (a later job of the same run may name only some of them).
		res := &AcceptResult{Generation: prior.Generation, Duplicate: true, Accepted: []string{}}
		for _, name := range sortedKeys(e.Scopes) {
			for i, m := range e.Scopes[name].Entries() {
				if m.IntentID == in.ID && slices.Contains(in.Scopes, name) {
					res.Accepted = append(res.Accepted, name)
					res.ahead(name, i)
					break
				}
			}
		}
		return res, nil
	}
	e.setPolicy(in.Policy, in.Actor, now)
	e.setRequires(in.Requires, in.Actor, now)
	e.setGates(in.Gates, in.Actor, now)
	e.setAlertAfter(in.AlertAfter)
	rec := IntentRecord{ID: in.ID, Sha: in.Sha, Scopes: slices.Clone(in.Scopes), At: now}
	if gen, ok := e.joins(in); ok {
		// Every scope already has this very commit pending at gen (the App accepted the push, and the
		// workflow it dispatched, or the push's own run, now asks for it): the intent joins that
		// generation instead of superseding it or being held back as stale, so its pass can claim it.
		rec.Generation = gen
		e.Accepts = append(e.Accepts, rec)
		res := &AcceptResult{Generation: gen, Joined: true, Accepted: slices.Clone(in.Scopes)}
		for _, name := range in.Scopes {
			e.Scopes[name].ActiveAt = now
			res.ahead(name, e.Scopes[name].position(gen))
		}
		e.record(now, Event{Kind: EventAccepted, Generation: gen, Sha: in.Sha,
			Message: fmt.Sprintf("%s from %s%s joined generation %d, which already has it pending", shortSha(in.Sha), orUnknown(in.Source), byActor(in.Actor), gen)})
		return res, nil
	}
	if e.Counted && len(in.Scopes) > 1 {
		// On a counted head an intent of several scopes is reserved first, and filled and
		// applied after (Authority.Accept). What would refuse it now (a full queue) refuses it
		// before it is reserved, as it refuses an intent of one scope.
		// An entry reserved already (by this intent's accept that stopped) is filled and
		// applied whatever the queues hold now, as it would have been.
		if _, reserved := e.logged(in.ID); reserved {
			return &AcceptResult{Accepted: []string{}, Reserved: true}, nil
		}
		trial, top := e.clone(), int64(0)
		for _, name := range in.Scopes {
			top = max(top, e.topOf(name))
		}
		for _, name := range in.Scopes {
			if err := trial.applyIntent(in, top+1, name, order, limit, now, &AcceptResult{}); err != nil {
				return nil, err
			}
		}
		return &AcceptResult{Accepted: []string{}, Reserved: true}, nil
	}
	gen, err := e.nextGeneration(in.Scopes)
	if err != nil {
		return nil, err
	}
	rec.Generation = gen
	res := &AcceptResult{Generation: gen, Accepted: []string{}}
	for _, name := range in.Scopes {
		if err := e.applyIntent(in, gen, name, order, limit, now, res); err != nil {
			return nil, err
		}
	}
	e.Accepts = append(e.Accepts, rec)
	e.settle()
	return res, nil
}

// applyIntent puts the intent accepted at gen into the scope name: its mailbox entry, or, when
// the commit arrived behind a newer one of its branch, a superseded event. res gathers what the
// scope did. The per-scope layout applies an intent of several scopes with it, scope by scope
// (logEntry).
func (e *Env) applyIntent(in *Intent, gen int64, name string, order map[string]verdict, limit int, now time.Time, res *AcceptResult) error {
	sc := e.scope(name)
	sc.ActiveAt = now
	e.applied(name, gen)
	if by, stale := e.staleFor(sc, in, order, now); stale {
		if res.Stale == nil {
			res.Stale = map[string]int64{}
		}
		res.Stale[name] = by
		e.record(now, Event{Kind: EventSuperseded, Scope: name, Generation: gen, Sha: in.Sha,
			Message: fmt.Sprintf("Arrived out of order: %s is older than generation %d of %s; recorded as superseded", shortSha(in.Sha), by, in.Ref)})
		return nil
	}
	entry := &Ref{Generation: gen, Sha: in.Sha, Ref: in.Ref, Before: in.Before, Order: in.Order, Source: in.Source,
		Actor: in.Actor, IntentID: in.ID, Origin: in.Origin, At: now, Barrier: slices.Contains(in.Barrier, name)}
	if err := e.enqueue(name, sc, entry, limit, now); err != nil {
		return err
	}
	res.Accepted = append(res.Accepted, name)
	pos := sc.position(gen)
	res.ahead(name, pos)
	what := "Accepted"
	if entry.Barrier {
		what = "Accepted barrier"
	}
	msg := fmt.Sprintf("%s %s from %s%s", what, shortSha(in.Sha), orUnknown(in.Source), byActor(in.Actor))
	if pos > 0 {
		msg += fmt.Sprintf("; queued: %d ahead of this commit", pos)
	}
	e.record(now, Event{Kind: EventAccepted, Scope: name, Generation: gen, Sha: in.Sha, Message: msg})
	return nil
}

// matches refuses an intent id that comes back with another commit or scopes it was not accepted
// for: that is not a repeat, and answering "nothing changed" would silently drop the new request. A
// repeat may name some of the intent's scopes: the jobs of one run, each deploying one scope of it.
func (r *IntentRecord) matches(in *Intent) error {
	if r.Sha != "" && r.Sha != in.Sha {
		was, now := shortSha(r.Sha), shortSha(in.Sha)
		if was == now {
			was, now = r.Sha, in.Sha
		}
		return &InputError{Field: "intent-id", Value: in.ID,
			Fix: fmt.Sprintf("intent %s was accepted for %s; this call says %s: give every intent its own id", in.ID, was, now)}
	}
	if len(r.Scopes) > 0 && !subset(in.Scopes, r.Scopes) {
		return &InputError{Field: "intent-id", Value: in.ID,
			Fix: fmt.Sprintf("intent %s was accepted for scopes %s; this call says %s: give every intent its own id", in.ID, strings.Join(sortedCopy(r.Scopes), ","), strings.Join(sortedCopy(in.Scopes), ","))}
	}
	return nil
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	sort.Strings(c)
	return c
}

// subset reports whether every element of a is in b.
func subset(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// pendingAccept returns the record of an intent still in the outbox.
func (e *Env) pendingAccept(id string) *IntentRecord {
	for i := range e.Accepts {
		if e.Accepts[i].ID == id {
			r := e.Accepts[i]
			return &r
		}
	}
	return nil
}

// joins reports whether every scope of the intent has exactly its commit pending, on its branch, at
// one generation.
func (e *Env) joins(in *Intent) (int64, bool) {
	if in.Redeploy || in.Ref == "" {
		return 0, false
	}
	var gen int64
	for _, name := range in.Scopes {
		sc := e.Scopes[name]
		if sc == nil {
			return 0, false
		}
		var found *Ref
		for _, m := range sc.Entries() {
			if m.Ref == in.Ref && m.Sha == in.Sha && !m.Failed && (gen == 0 || m.Generation == gen) {
				found = m
			}
		}
		if found == nil {
			return 0, false
		}
		gen = found.Generation
	}
	return gen, gen != 0
}

// staleFor reports whether the intent's commit is behind what the scope holds for its branch: the
// pending commit or the live one is the same or newer, by the facts of the pushes (see order.go).
func (e *Env) staleFor(sc *Scope, in *Intent, order map[string]verdict, now time.Time) (int64, bool) {
	if in.Redeploy || in.Ref == "" {
		return 0, false
	}
	for _, m := range sc.Entries() {
		if m.Ref != in.Ref {
			continue
		}
		if v := decide(in, m.Sha, m.Before, m.Order, order, now); v == older || v == same {
			return m.Generation, true
		}
	}
	if l := sc.Live; l != nil && liveVerdict(in, l, order, now) == older {
		return l.Generation, true
	}
	return 0, false
}

// claim moves the owner of each scope to gen where the pass may reconcile it: the mailbox entry is at
// most gen and no newer pass owns it. A nil scopes list claims every pending scope.
func (e *Env) claim(gen int64, scopes []string, now time.Time) *ClaimResult {
	res := &ClaimResult{Generation: gen, Claimed: []ClaimedScope{}}
	if scopes == nil {
		for name, sc := range e.Scopes {
			if sc.Mailbox != nil {
				scopes = append(scopes, name)
			}
		}
		sort.Strings(scopes)
	}
	for _, name := range scopes {
		sc := e.scope(name)
		m := sc.Mailbox
		list := sc.Entries()
		pos := sc.position(gen)
		switch {
		case m == nil:
			res.Idle = append(res.Idle, name)
		case pos > 0:
			// Its own intent waits behind others: the pass claims it, and owns the scope once it is
			// the head.
			q := list[pos]
			if q.Failed {
				res.Superseded = append(res.Superseded, &SupersededError{Environment: e.Name, Scope: name, Generation: gen, Done: true})
				continue
			}
			if !q.Claimed {
				q.Claimed = true
				sc.ActiveAt = now
				e.record(now, Event{Kind: EventClaimed, Scope: name, Generation: gen, Sha: q.Sha,
					Message: fmt.Sprintf("Pass %d claimed %s (%s); queued: %d ahead of this commit", gen, name, shortSha(q.Sha), pos)})
			}
			res.Claimed = append(res.Claimed, ClaimedScope{Scope: name, Sha: q.Sha, Ref: q.Ref, IntentGen: q.Generation, IntentID: q.IntentID, Attempt: q.Attempt, Ahead: pos})
		case pos < 0 && list[len(list)-1].Generation > gen && (sc.Owner != gen || m.Generation > gen):
			newest := list[len(list)-1]
			res.Superseded = append(res.Superseded, &SupersededError{Environment: e.Name, Scope: name, Generation: gen, By: newest.Generation, BySha: newest.Sha})
		case m.Failed:
			res.Superseded = append(res.Superseded, &SupersededError{Environment: e.Name, Scope: name, Generation: gen, Done: true})
		case m.Generation > gen:
			res.Superseded = append(res.Superseded, &SupersededError{Environment: e.Name, Scope: name, Generation: gen, By: m.Generation, BySha: m.Sha})
		case sc.Owner > gen:
			res.Superseded = append(res.Superseded, &SupersededError{Environment: e.Name, Scope: name, Generation: gen, By: sc.Owner, BySha: m.Sha})
		case m.Rollback && m.Generation != gen:
			// A rollback's head is deployed by the rollback's own pass, the one its freeze lets
			// through: a newer pass taking it over would be held by that freeze, and the rollback's
			// pass superseded.
			res.Superseded = append(res.Superseded, &SupersededError{Environment: e.Name, Scope: name, Generation: gen, By: m.Generation, BySha: m.Sha})
		default:
			if sc.Owner < gen {
				sc.Owner = gen
				sc.ActiveAt = now
				e.record(now, Event{Kind: EventClaimed, Scope: name, Generation: gen, Sha: m.Sha,
					Message: fmt.Sprintf("Pass %d claimed %s (%s)", gen, name, shortSha(m.Sha))})
			}
			res.Claimed = append(res.Claimed, ClaimedScope{Scope: name, Sha: m.Sha, Ref: m.Ref, IntentGen: m.Generation, IntentID: m.IntentID, Attempt: m.Attempt})
		}
	}
	return res
}

// authorize is the authority check (Evaluate without the lease): the pass at gen owns the scope
// and nothing newer was accepted; nil when it may go on.
func (e *Env) authorize(gen int64, name string) *SupersededError {
	v := Evaluate(e.view(name, nil, false), Question{Generation: gen})
	if v.Go() {
		return nil
	}
	return v.Err().(*SupersededError)
}

// leaseFree reports whether a lease can be granted to the pass (gen, holder) now: free, expired past
// the skew margin, or held by that very pass. A grant belongs to one generation and holder: the same
// holder name in another generation (an explicit --holder reused, a client naming itself) is another
// pass and waits like any other.
func leaseFree(l *Lease, holder string, gen int64, now time.Time, skew time.Duration) bool {
	return l.Holder == "" || (l.Holder == holder && l.Generation == gen) || !now.Before(l.ExpiresAt.Add(skew))
}

func heldError(resource string, l *Lease, now time.Time, skew time.Duration) *HeldError {
	wait := l.ExpiresAt.Add(skew).Sub(now)
	secs := (wait + time.Second - 1) / time.Second
	if secs < 1 {
		secs = 1
	}
	return &HeldError{Resource: resource, Holder: l.Holder, Purpose: l.Purpose, Generation: l.Generation,
		ExpiresAt: l.ExpiresAt, RetryAfter: secs * time.Second}
}

// grant gives the pass (gen, holder) the lease and returns the displaced expired lease of another
// pass, if any. Every grant carries a new token, greater than every earlier one of the resource, even
// a repeat by the pass that holds it: the newest grant is the only one that renews, completes or
// releases, so an older one (a stale step of the same pass, a lost response the client asked again
// for) can never act on it. The store resolves an ambiguous write before answering, so a grant is
// never applied twice behind its caller's back.
func grant(l *Lease, holder, purpose string, gen int64, ttl time.Duration, now time.Time) (tookOverFrom *Lease) {
	if l.Holder != "" && (l.Holder != holder || l.Generation != gen) {
		prev := *l
		tookOverFrom = &prev
	}
	l.Token++
	l.AcquiredAt, l.ReleasedAt = now, time.Time{}
	l.Holder, l.Purpose, l.Generation = holder, purpose, gen
	l.Sha, l.Ref = "", ""
	l.ExpiresAt = now.Add(ttl)
	return tookOverFrom
}

// gate checks authority for a phase and, when ttl > 0, grants the leases of every scope together.
// Each scope's answer is the evaluator's (Evaluate), with what the gate read of the environments
// this one requires (req); a refusal is recorded once for what it waits for (recordRefusal).
func (e *Env) gate(gen int64, scopes []string, phase, holder string, ttl time.Duration, now time.Time, skew time.Duration, req *required) (*Grant, error) {
	for _, name := range scopes {
		if v := Evaluate(e.view(name, req, true), Question{Generation: gen}); !v.Go() {
			e.recordRefusal(now, v, Event{Kind: EventStopped, Scope: name, Generation: gen, Sha: v.BySha,
				Message: fmt.Sprintf("Pass %d stopped before %s: %s", gen, phase, v.Text())})
			return nil, v.Err()
		}
	}
	g := &Grant{Environment: e.Name, Generation: gen, Phase: phase}
	if ttl <= 0 {
		return g, nil
	}
	if e.noteSoakStarts(gen, scopes, req) {
		// Where a soak counts from is kept by this write: the refusal that follows is recorded anew
		// (and so written), though it says what the pass was told before.
		e.forgetRefusals(gen, scopes)
	}
	for _, name := range scopes {
		v := Evaluate(e.view(name, req, true), Question{Generation: gen, Lease: true, Holder: holder, Now: now, Skew: skew})
		switch v.Reason {
		case ReasonGo:
			continue
		case ReasonLocked:
			e.recordRefusal(now, v, Event{Kind: EventLocked, Scope: name, Generation: gen, Holder: v.Lease.Holder, Token: v.Lease.Token,
				Message: fmt.Sprintf("Pass %d waits: %s", gen, v.Text())})
		default:
			e.recordRefusal(now, v, Event{Kind: EventLocked, Scope: name, Generation: gen, Sha: v.HeadSha, Wait: v.Promotion,
				Message: fmt.Sprintf("Pass %d waits before %s: %s", gen, phase, v.Text())})
			if v.Reason.Lasting() {
				// A pass held for longer than it waits ends held (pass.Gate): nobody moves the scope
				// until the gate lets it go, so the sweep starts it on its first round after that.
				e.Scopes[name].ActiveAt = time.Time{}
			}
		}
		return nil, v.Err()
	}
	g.Holder, g.Tokens, g.ExpiresAt = holder, map[string]int64{}, now.Add(ttl)
	for _, name := range scopes {
		sc := e.Scopes[name]
		if waited, ok := sc.handedOver(gen, now); ok {
			g.handovers = append(g.handovers, handover{scope: name, waited: waited})
		}
		if prev := grant(&sc.Lease, holder, phase, gen, ttl, now); prev != nil {
			g.TookOver = append(g.TookOver, name)
			e.record(now, Event{Kind: EventTookOver, Scope: name, Generation: gen, Holder: holder, Token: sc.Lease.Token,
				Message: fmt.Sprintf("Recovered an interrupted operation (Interrupted: %s) held by %s, generation %d", prev.Purpose, prev.Holder, prev.Generation)})
		}
		// The lease remembers what its pass deploys, so that a deploy finished under it is recorded
		// as live even when a newer intent took the mailbox meanwhile.
		m := sc.passRef(gen)
		sc.Lease.Sha, sc.Lease.Ref = m.Sha, m.Ref
		sc.ActiveAt = now
		g.Tokens[name] = sc.Lease.Token
		e.record(now, Event{Kind: EventLeased, Scope: name, Generation: gen, Holder: holder, Token: sc.Lease.Token,
			Message: fmt.Sprintf("Pass %d entered %s with token %d", gen, phase, sc.Lease.Token)})
	}
	return g, nil
}

// passRef is the pending intent the pass at gen deploys in the scope: its own, or the head (which
// a pass of a newer generation that owns the scope takes over); nil when nothing is pending.
func (s *Scope) passRef(gen int64) *Ref {
	if p := s.position(gen); p > 0 {
		return s.Entries()[p]
	}
	return s.Mailbox
}

// maxOtherRefusals bounds the refusals a scope remembers of passes that have no pending intent in
// it (superseded ones that still poll, say): the newest generations' are kept. Those of passes
// with a pending intent are all kept; the queue limit and the bound on queued bytes bound them.
const maxOtherRefusals = 8

// recordRefusal records ev, the refusal v of a pass at a gate, unless that pass was refused for
// the same reason and what it waits for before: a poller asking again writes nothing, however many
// others poll the same scope meanwhile. A new verdict (another holder, the pass right ahead gone, a
// barrier or freeze of its own) is recorded anew. The scope remembers the newest refusal of each
// generation that asked (Scope.Refused) as a short mark: the generation and a hash of the reason
// and what it waits for.
func (e *Env) recordRefusal(now time.Time, v Verdict, ev Event) {
	sc := e.Scopes[ev.Scope]
	if sc == nil {
		e.record(now, ev)
		return
	}
	prefix := strconv.FormatInt(v.Generation, 10) + " "
	h := fnv.New64a()
	h.Write([]byte(v.Reason.String() + "\x00" + v.waitsFor()))
	mark := prefix + strconv.FormatUint(h.Sum64(), 36)
	if slices.Contains(sc.Refused, mark) {
		return
	}
	e.record(now, ev)
	sc.Refused = slices.DeleteFunc(sc.Refused, func(m string) bool { return strings.HasPrefix(m, prefix) })
	sc.Refused = append(sc.Refused, mark)
	// Forget the refusals of generations with nothing pending here but the newest few.
	slices.SortFunc(sc.Refused, func(a, b string) int { return cmp.Compare(refusalGeneration(b), refusalGeneration(a)) })
	others := 0
	sc.Refused = slices.DeleteFunc(sc.Refused, func(m string) bool {
		g := refusalGeneration(m)
		if sc.position(g) >= 0 || g == sc.Owner {
			return false
		}
		others++
		return others > maxOtherRefusals
	})
}

// forgetRefusals forgets the refusals remembered for the pass at gen in scopes, so that its next
// one is recorded.
func (e *Env) forgetRefusals(gen int64, scopes []string) {
	prefix := strconv.FormatInt(gen, 10) + " "
	for _, name := range scopes {
		sc := e.Scopes[name]
		if sc == nil {
			continue
		}
		// A new slice: the document this write started from shares the old one.
		var kept []string
		for _, m := range sc.Refused {
			if !strings.HasPrefix(m, prefix) {
				kept = append(kept, m)
			}
		}
		sc.Refused = kept
	}
}

// refusalGeneration is the generation a remembered refusal is of.
func refusalGeneration(mark string) int64 {
	g, _, _ := strings.Cut(mark, " ")
	n, _ := strconv.ParseInt(g, 10, 64)
	return n
}

// requireScopes refuses scopes the environment does not have: a typo is bad input, not a pass
// that lost its authority.
func (e *Env) requireScopes(scopes []string) error {
	for _, name := range scopes {
		if _, ok := e.Scopes[name]; !ok {
			have := sortedKeys(e.Scopes)
			if e.Split {
				have = e.Dir // a transition of the per-scope layout reads the directory when a scope is missing
			}
			return &InputError{Field: "scope", Value: name,
				Fix: fmt.Sprintf("environment %s has no scope %s; it has %s", e.Name, name, strings.Join(have, ", "))}
		}
	}
	return nil
}

// checkTokens verifies that the caller's grant is still the current one of each scope's lease: the
// same token, generation and holder.
func (e *Env) checkTokens(scopes []string, holder string, gen int64, tokens map[string]int64) error {
	for _, name := range scopes {
		tok, ok := tokens[name]
		if !ok {
			continue
		}
		sc := e.Scopes[name]
		if sc == nil {
			return &LostError{Resource: resourceName(e.Name, name), Token: tok, Reason: "no such scope"}
		}
		if sc.Lease.Holder != holder || sc.Lease.Token != tok || sc.Lease.Generation != gen {
			reason := "taken over"
			if sc.Lease.Holder == "" {
				reason = "released or unlocked"
			}
			return &LostError{Resource: resourceName(e.Name, name), Token: tok, Holder: sc.Lease.Holder, Current: sc.Lease.Token, Reason: reason}
		}
	}
	return nil
}

// renew extends the caller's leases. It does not check authority: a superseded pass may finish the
// step it is in.
func (e *Env) renew(g *Grant, ttl time.Duration, now time.Time) error {
	scopes := sortedKeys(g.Tokens)
	if err := e.checkTokens(scopes, g.Holder, g.Generation, g.Tokens); err != nil {
		return err
	}
	for _, name := range scopes {
		sc := e.Scopes[name]
		sc.Lease.ExpiresAt = now.Add(ttl)
		sc.ActiveAt = now
	}
	g.ExpiresAt = now.Add(ttl)
	return nil
}

func (e *Env) release(scopes []string, holder string, gen int64, tokens map[string]int64, now time.Time) {
	for _, name := range scopes {
		sc := e.Scopes[name]
		if sc == nil {
			continue
		}
		if tok, ok := tokens[name]; ok && sc.Lease.Holder == holder && sc.Lease.Token == tok && sc.Lease.Generation == gen {
			sc.Lease.free()
			sc.Lease.ReleasedAt = now
		}
	}
}

// free ends the current grant; the token counter stays.
func (l *Lease) free() {
	l.Holder, l.ExpiresAt, l.Sha, l.Ref = "", time.Time{}, "", ""
}

// complete records how a pass ended, fenced by its tokens, and releases its leases in the same write.
func (e *Env) complete(c *Completion, now time.Time, skew time.Duration) (*CompleteResult, error) {
	if res := e.repeatedSuccess(c); res != nil {
		return res, nil
	}
	if err := e.checkTokens(c.Scopes, c.Holder, c.Generation, c.Tokens); err != nil && c.Outcome != OutcomeLost {
		return nil, err
	}
	if c.Outcome != OutcomeLost && c.Outcome != OutcomeInterrupted {
		// An ending without the deploy lease's token must not overrule a pass that holds it now.
		for _, name := range c.Scopes {
			l := &e.Scopes[name].Lease
			if _, ok := c.Tokens[name]; !ok && liveLease(l, now, skew) && (l.Holder != c.Holder || l.Generation != c.Generation) {
				return nil, heldError(resourceName(e.Name, name), l, now, skew)
			}
		}
	}
	res := &CompleteResult{Results: map[string]Result{}}
	final := c.Outcome == OutcomeInvalid || (c.Outcome == OutcomeFailure && c.Attempt >= c.MaxAttempts)
	for _, name := range c.Scopes {
		sc := e.Scopes[name]
		sc.ActiveAt = now
		if sc.Owner == c.Generation && (sc.Mailbox == nil || (sc.Mailbox.Failed && sc.position(c.Generation) <= 0)) {
			// A repeat of a completion that took effect reports the same result and changes nothing.
			switch {
			case c.Outcome == OutcomeSuccess && sc.Live != nil && sc.Live.Generation == c.Generation:
				res.Results[name] = ResultDeployed
				continue
			case final && sc.Failure != nil && sc.Failure.Generation == c.Generation:
				res.Results[name] = ResultFailed
				continue
			}
		}
		sup := e.authorize(c.Generation, name)
		if (sup != nil || sc.grantedOther(c.Generation)) && e.deployedUnderGrant(c, name, now) {
			res.Results[name] = ResultDeployed
			continue
		}
		if sup != nil && c.Outcome != OutcomeLost && c.Outcome != OutcomeInterrupted {
			if res.Superseded == nil {
				res.Superseded = map[string]*SupersededError{}
			}
			res.Superseded[name] = sup
			res.Results[name] = ResultSuperseded
			e.record(now, Event{Kind: EventStopped, Scope: name, Generation: c.Generation,
				Message: fmt.Sprintf("Pass %d ended (%s) without publishing: %s", c.Generation, c.Outcome, supersededBy(sup))})
			continue
		}
		pos := max(sc.position(c.Generation), 0) // the pass's own intent, or the head it took over
		m := &Ref{}                              // nothing pending (a lost pass that was superseded): only the timeline changes
		if list := sc.Entries(); len(list) > 0 {
			m = list[pos]
		}
		switch {
		case c.Outcome == OutcomeSuccess:
			live := &Live{Sha: m.Sha, Ref: m.Ref, Generation: c.Generation, Run: c.Run, Token: c.Tokens[name], At: now,
				Before: m.Before, Order: m.Order}
			sc.setLive(live)
			sc.Failure = nil
			e.endEntry(sc, pos, false, now)
			res.Results[name] = ResultDeployed
			e.record(now, Event{Kind: EventDeployed, Scope: name, Generation: c.Generation, Sha: m.Sha, Holder: c.Holder, Token: live.Token,
				Message: fmt.Sprintf("Deployed %s (generation %d)", shortSha(m.Sha), c.Generation)})
		case final:
			res.Results[name] = ResultFailed
			msg := c.Message
			if strings.TrimSpace(msg) == "" {
				msg = defaultFailureMessage(c)
			}
			sc.Failure = &Failure{Generation: c.Generation, Sha: m.Sha, Message: truncate(msg, maxMessageSize), Attempt: c.Attempt, MaxAttempts: c.MaxAttempts, At: now}
			e.endEntry(sc, pos, true, now)
			what := "Configuration error"
			if c.Outcome == OutcomeFailure {
				what = fmt.Sprintf("Failed on the final attempt (%d of %d)", c.Attempt, c.MaxAttempts)
			}
			if m.Failed {
				msg += "; nothing behind it deploys until someone decides (skip or retry)"
			}
			e.record(now, Event{Kind: EventFailed, Scope: name, Generation: c.Generation, Sha: m.Sha,
				Message: fmt.Sprintf("%s: %s", what, msg)})
		default: // retryable: failure before the last attempt, lease lost, interrupted
			res.Results[name] = ResultRetry
			if c.Outcome == OutcomeFailure {
				m.Attempt = max(m.Attempt, c.Attempt)
			}
			kind, msg := EventFailed, fmt.Sprintf("Attempt %d of %d failed; will retry: %s", c.Attempt, c.MaxAttempts, orUnknown(c.Message))
			switch c.Outcome {
			case OutcomeLost:
				kind, msg = EventLost, "Lease lost while working; retryable infrastructure loss"
			case OutcomeInterrupted:
				kind, msg = EventLost, "Interrupted by a signal; retryable"
			}
			if c.Message != "" && c.Outcome != OutcomeFailure {
				msg += ": " + c.Message
			}
			e.record(now, Event{Kind: kind, Scope: name, Generation: c.Generation, Message: msg})
		}
	}
	e.release(c.Scopes, c.Holder, c.Generation, c.Tokens, now)
	e.settle()
	return res, nil
}

// repeatedSuccess recognises a success completion that already took effect (its answer was lost
// and it is asked again): every scope's live state is this pass's deploy with this very token. It
// reports the same result and changes nothing; nil means it is not such a repeat.
func (e *Env) repeatedSuccess(c *Completion) *CompleteResult {
	if c.Outcome != OutcomeSuccess || len(c.Scopes) == 0 {
		return nil
	}
	res := &CompleteResult{Results: map[string]Result{}}
	for _, name := range c.Scopes {
		sc := e.Scopes[name]
		tok, ok := c.Tokens[name]
		if sc == nil || !ok || sc.Live == nil || sc.Live.Generation != c.Generation || sc.Live.Token != tok || sc.Lease.Token != tok || sc.Lease.Holder != "" {
			return nil
		}
		res.Results[name] = ResultDeployed
	}
	return res
}

// grantedOther reports whether the scope's lease was granted for another commit than the one the
// pass at gen would end now: the head it took over was superseded while it deployed. Its success
// is recorded as what it deployed, as a superseded pass's is.
func (s *Scope) grantedOther(gen int64) bool {
	m := s.passRef(gen)
	return m != nil && s.Lease.Sha != "" && s.Lease.Sha != m.Sha
}

// deployedUnderGrant records the deploy of a pass that was superseded while it deployed under a
// valid grant (or whose grant deployed another commit than the one it would end now): the target
// now serves its commit, so that commit is live, provided its generation is not older than live's
// (the same pass may have deployed another head before). The newer intent stays pending and its
// pass deploys next; live never goes back.
// It reports whether it recorded the deploy.
func (e *Env) deployedUnderGrant(c *Completion, name string, now time.Time) bool {
	sc := e.Scopes[name]
	tok, ok := c.Tokens[name]
	l := &sc.Lease
	if c.Outcome != OutcomeSuccess || !ok || l.Holder != c.Holder || l.Token != tok || l.Generation != c.Generation || l.Sha == "" {
		return false
	}
	if sc.Live != nil && sc.Live.Generation > c.Generation {
		return false
	}
	sc.setLive(&Live{Sha: l.Sha, Ref: l.Ref, Generation: c.Generation, Run: c.Run, Token: tok, At: now})
	pending := ""
	if m := sc.Mailbox; m != nil {
		pending = fmt.Sprintf("; generation %d (%s) is pending", m.Generation, shortSha(m.Sha))
	}
	e.record(now, Event{Kind: EventDeployed, Scope: name, Generation: c.Generation, Sha: l.Sha, Holder: c.Holder, Token: tok,
		Message: fmt.Sprintf("Deployed %s (generation %d), superseded while it deployed%s", shortSha(l.Sha), c.Generation, pending)})
	return true
}

// unlock frees a scope's lease by hand; the token counter stays.
func (e *Env) unlock(name, reason, actor string, now time.Time) (Lease, bool) {
	sc := e.Scopes[name]
	if sc == nil || sc.Lease.Holder == "" {
		return Lease{}, false
	}
	prev := sc.Lease
	sc.Lease.free()
	e.record(now, Event{Kind: EventUnlocked, Scope: name, Generation: prev.Generation, Holder: prev.Holder, Token: prev.Token,
		Message: fmt.Sprintf("Unlocked by %s: %s (was held by %s for %s)", orUnknown(actor), reason, prev.Holder, prev.Purpose)})
	return prev, true
}

// defaultFailureMessage says what happened when a terminal ending came without a message.
func defaultFailureMessage(c *Completion) string {
	if c.Outcome == OutcomeInvalid {
		return fmt.Sprintf("pass %d reported bad configuration or input without saying what", c.Generation)
	}
	return fmt.Sprintf("pass %d failed on attempt %d of %d without a message", c.Generation, c.Attempt, c.MaxAttempts)
}

func supersededBy(s *SupersededError) string {
	if s.Done {
		return "its work here already ended"
	}
	if s.By == 0 {
		return "it does not own the scope"
	}
	if s.BySha != "" {
		return fmt.Sprintf("superseded by generation %d (%s)", s.By, shortSha(s.BySha))
	}
	return fmt.Sprintf("superseded by generation %d", s.By)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func byActor(actor string) string {
	if actor == "" {
		return ""
	}
	return " by " + actor
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
