package authority

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Soak is how long a commit must have been live in each environment this one requires before it
// deploys here (ReasonSoaking): soak: 30m, or per required environment soak: {staging: 30m,
// qa: 1h}. It holds only where the environment requires others (Requirements), and never a
// rollback.
//
// The soak counts from when the commit first went live in the required environment, not from its
// newest deploy there: a deploy of the commit already live keeps that time (Live.Since). Without
// requires-ancestor only the commit itself counts, and it soaks while it stays live there: another
// commit going live there ends its promotion, and a deploy of it again starts the soak anew. With
// requires-ancestor a descendant counts too, and the soak counts from when the deploy gate here
// (or the recovery sweep, for a head no gate asks about) first saw the commit or a descendant live
// there, from when that one went live, recorded on the waiting entry (Ref.SoakFrom) and never
// moved later: a busy staging, where newer descendants follow each other every few minutes,
// would otherwise restart the soak with each and starve production.
type Soak struct {
	// For applies to every required environment that Environments does not name.
	For time.Duration `json:"for,omitempty"`
	// Environments holds the soak of each required environment it names.
	Environments map[string]time.Duration `json:"environments,omitempty"`
}

// MaxSoak is the longest soak. A commit that must wait longer than a week in a required environment
// is one nobody deploys on a timer any more (promote it by hand); and a soak that long is more
// likely a mistaken unit (30h for 30m) than a wish, which would hold every deploy here silently.
const MaxSoak = 7 * 24 * time.Hour

// validate checks the soak of env's intent, which requires req: nil when the intent leaves the
// stored requirement, which is then not known here and the soak is checked against it by nobody
// (a soak on an environment that requires nothing holds nothing).
func (s *Soak) validate(env string, req *Requirements) error {
	if s == nil {
		return nil
	}
	bad := func(value, fix string) error { return &InputError{Field: "soak", Value: value, Fix: fix} }
	rng := fmt.Sprintf("give a positive soak of at most %s (a week), e.g. 30m or 1h30m", soakDuration(MaxSoak))
	if s.For < 0 || s.For > MaxSoak {
		return bad(s.For.String(), rng)
	}
	for _, name := range slices.Sorted(maps.Keys(s.Environments)) {
		d := s.Environments[name]
		if d <= 0 || d > MaxSoak {
			return bad(name+"="+d.String(), rng)
		}
		if err := ValidateEnvironment(name); err != nil {
			return err
		}
		if req != nil && !slices.Contains(req.Environments, name) {
			return bad(name, fmt.Sprintf("%s does not require %s: a soak counts in the environments it requires; add it to requires, or leave it out of soak", env, name))
		}
	}
	if req != nil && len(req.Environments) == 0 && s.normal() != nil {
		return bad(s.String(), fmt.Sprintf("%s requires no environment: a soak counts in the environments it requires; name them (requires: [staging]), or remove the soak", env))
	}
	return nil
}

// normal is s without what holds for nothing; nil when it holds for nothing at all.
func (s *Soak) normal() *Soak {
	if s == nil {
		return nil
	}
	n := Soak{For: max(s.For, 0)}
	for name, d := range s.Environments {
		if d > 0 {
			if n.Environments == nil {
				n.Environments = map[string]time.Duration{}
			}
			n.Environments[name] = d
		}
	}
	if n.For == 0 && n.Environments == nil {
		return nil
	}
	return &n
}

// duration is the soak in the required environment env; zero: none.
func (s *Soak) duration(env string) time.Duration {
	if s == nil {
		return 0
	}
	if d, ok := s.Environments[env]; ok {
		return max(d, 0)
	}
	return max(s.For, 0)
}

// String says what the soak holds for, for the timeline: "soak 30m", "soak staging 30m, qa 1h".
func (s *Soak) String() string {
	if s = s.normal(); s == nil {
		return ""
	}
	var parts []string
	if s.For > 0 {
		parts = append(parts, soakDuration(s.For))
	}
	for _, name := range slices.Sorted(maps.Keys(s.Environments)) {
		parts = append(parts, name+" "+soakDuration(s.Environments[name]))
	}
	return "soak " + strings.Join(parts, ", ")
}

// SoakWait is what a commit soaks for in a required environment (ReasonSoaking): it has been live
// there since Since (or a descendant has, with requires-ancestor), Soaked of For so far, and may
// deploy here at Ends. Where several required environments soak, it is the one that ends last.
type SoakWait struct {
	Environment string        `json:"environment"`
	Sha         string        `json:"sha"`
	Since       time.Time     `json:"since"`
	Soaked      time.Duration `json:"soaked"`
	For         time.Duration `json:"for"`
	Ends        time.Time     `json:"ends"`
}

// text says "soaking in staging: 12m of 30m; ends 14:32 UTC", with the date when it ends on
// another day than the wait was told.
func (w *SoakWait) text() string {
	soaked := w.Soaked.Truncate(time.Second)
	if w.For%time.Minute == 0 {
		soaked = w.Soaked.Truncate(time.Minute)
	}
	end := w.Ends.UTC()
	layout := "15:04"
	if end.Second() != 0 || end.Nanosecond() != 0 {
		layout = "15:04:05"
	}
	if told := w.Since.Add(w.Soaked).UTC(); told.YearDay() != end.YearDay() || told.Year() != end.Year() {
		layout = "Mon 2 Jan " + layout
	}
	return fmt.Sprintf("soaking in %s: %s of %s; ends %s UTC", w.Environment, soakDuration(soaked), soakDuration(w.For), end.Format(layout))
}

// soakDuration spells d the short way: 30m, 1h30m, 45s (not 30m0s).
func soakDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// soakWait says what the pass of ref soaks for; nil: nothing. It is asked once every required
// environment has the commit (promotionWait), never for a rollback (hold), and reads only the
// view: where the soak of each required environment counts from is soakStart's.
func soakWait(v View, ref *Ref, now time.Time) *SoakWait {
	if v.Requires == nil || ref == nil || v.Gates == nil || v.Gates.Soak.normal() == nil {
		return nil
	}
	var wait *SoakWait
	for _, r := range v.Requires.Environments {
		d := v.Gates.Soak.duration(r)
		if d <= 0 {
			continue
		}
		since, ok := soakStart(v, ref, r)
		if !ok {
			continue // not live there: promotionWait holds it, and a renderer says so
		}
		ends := since.Add(d)
		if !now.Before(ends) {
			continue
		}
		if wait == nil || ends.After(wait.Ends) {
			wait = &SoakWait{Environment: r, Sha: ref.Sha, Since: since, Soaked: max(now.Sub(since), 0), For: d, Ends: ends}
		}
	}
	return wait
}

// soakStart is when the soak of ref in the required environment r counts from, and whether the
// commit (or, with requires-ancestor, a descendant the comparer vouched for) is live there.
// Without requires-ancestor it is when the commit became live there (Live.Since). With it, it is
// the earliest of that of the commit live there now and of the one the deploy gate saw first
// (Ref.SoakFrom): the soak never counts from later than it did.
func soakStart(v View, ref *Ref, r string) (time.Time, bool) {
	live := v.Required[r]
	if live == nil {
		return time.Time{}, false
	}
	ancestor := v.Requires != nil && v.Requires.Ancestor
	if live.Sha != ref.Sha && !(ancestor && v.Descends[descendKey(ref.Sha, live.Sha)]) {
		return time.Time{}, false
	}
	since := live.since()
	if from, ok := ref.SoakFrom[r]; ok && ancestor && from.Before(since) {
		since = from
	}
	return since, true
}

// retryAfter is how soon a pass soaking is told to ask again: when the soak ends, in whole seconds,
// at least one.
func (w *SoakWait) retryAfter(now time.Time) time.Duration {
	secs := (w.Ends.Sub(now) + time.Second - 1) / time.Second
	return max(secs, 1) * time.Second
}

// noteSoakStarts records, on the entries the pass at gen would deploy in scopes, where their soak
// counts from (noteSoakStart). It reports whether it recorded any.
func (e *Env) noteSoakStarts(gen int64, scopes []string, req *required) bool {
	noted := false
	for _, name := range scopes {
		if sc := e.Scopes[name]; sc != nil && e.noteSoakStart(name, sc.passRef(gen), req) {
			noted = true
		}
	}
	return noted
}

// noteHeadSoakStarts records where the soak of each scope's head counts from (noteSoakStart), for
// the recovery sweep: a head whose pass ended held, or gave up waiting, is asked about by no gate
// while it waits, and a busy required environment would otherwise move its soak's start with every
// descendant the sweep sees. It reports whether it recorded any.
func (e *Env) noteHeadSoakStarts(req *required) bool {
	noted := false
	for _, name := range sortedKeys(e.Scopes) {
		if e.noteSoakStart(name, e.Scopes[name].Mailbox, req) {
			noted = true
		}
	}
	return noted
}

// noteSoakStart records on ref, waiting in scope name, where its soak counts from in each required
// environment where it is not recorded yet (Ref.SoakFrom): with requires-ancestor only, where what
// is live there moves on while the entry waits. The evaluator computes it from the view
// (soakStart); the write of the deploy gate or the sweep keeps it. It reports whether it recorded
// any.
func (e *Env) noteSoakStart(name string, ref *Ref, req *required) bool {
	if e.Requires == nil || !e.Requires.Ancestor || e.Gates == nil || e.Gates.Soak.normal() == nil || ref == nil || ref.Rollback {
		return false
	}
	v := e.view(name, req, true)
	noted := false
	for _, r := range e.Requires.Environments {
		if e.Gates.Soak.duration(r) <= 0 {
			continue
		}
		since, ok := soakStart(v, ref, r)
		if from, had := ref.SoakFrom[r]; !ok || (had && !since.Before(from)) {
			continue
		}
		// A new map: the entry's copies (the document this write started from) share the old one.
		next := maps.Clone(ref.SoakFrom)
		if next == nil {
			next = map[string]time.Time{}
		}
		next[r] = since
		ref.SoakFrom = next
		noted = true
	}
	return noted
}
