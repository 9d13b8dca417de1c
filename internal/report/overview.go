package report

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// Overview is what is live where: per scope, the commit live in every environment that has the
// scope, how far each is behind the newest commit accepted there, freezes, and promotion waits.
// Built once from the environments' states as read from the store (NewOverview) for every view:
// `latestwins status` without an environment (OverviewText, --json), and the App's front page and
// GET /v1/environments. Its strings are as stored, not escaped.
type Overview struct {
	Environments []string        `json:"environments"` // sorted
	Scopes       []OverviewScope `json:"scopes"`       // sorted by name
}

// OverviewScope is one scope across the environments that have it.
type OverviewScope struct {
	Scope  string      `json:"scope"`
	Places []Placement `json:"places"` // in Overview.Environments order, only those with the scope
}

// Placement is one scope in one environment.
type Placement struct {
	Environment string `json:"environment"`
	Live        *Live  `json:"live,omitempty"` // nil: nothing deployed yet
	// Behind is how many accepted commits newer than the live one are pending there (the head and
	// those waiting), and Since when the oldest of them was accepted (Age: how long ago): how far
	// the environment is behind the newest commit accepted for the scope. 0: up to date.
	Behind int       `json:"behind"`
	Newest string    `json:"newest,omitempty"` // the newest pending commit, when Behind > 0
	Since  time.Time `json:"since,omitzero"`
	Age    string    `json:"age,omitempty"`
	// Frozen is set while a rollback freezes the scope (Row.Frozen's words).
	Frozen string `json:"frozen,omitempty"`
	// Waiting is set while the head waits for its commit in a required environment: the words its
	// deploy gate says (authority.WaitText).
	Waiting string `json:"waiting,omitempty"`
	// Promotion is that wait: the required environment, the commit that waits, what is live there.
	Promotion *authority.PromotionWait `json:"promotion,omitempty"`
	// Requires names the environments this one requires, as stored.
	Requires *authority.Requirements `json:"requires,omitempty"`
}

// NewOverview builds the overview from the environments' states and now.
func NewOverview(envs []*authority.Env, now time.Time) *Overview {
	o := &Overview{Environments: []string{}, Scopes: []OverviewScope{}}
	byName := map[string]*authority.Env{}
	scopes := map[string]bool{}
	for _, e := range envs {
		byName[e.Name] = e
		o.Environments = append(o.Environments, e.Name)
		for name := range e.Scopes {
			scopes[name] = true
		}
	}
	sort.Strings(o.Environments)
	names := make([]string, 0, len(scopes))
	for n := range scopes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		os := OverviewScope{Scope: name}
		for _, env := range o.Environments {
			e := byName[env]
			if sc := e.Scopes[name]; sc != nil {
				os.Places = append(os.Places, newPlacement(e, name, sc, byName, now))
			}
		}
		o.Scopes = append(o.Scopes, os)
	}
	return o
}

func newPlacement(e *authority.Env, name string, sc *authority.Scope, envs map[string]*authority.Env, now time.Time) Placement {
	p := Placement{Environment: e.Name, Requires: e.Requires}
	var liveGen int64
	if l := sc.Live; l != nil {
		p.Live = &Live{Sha: l.Sha, Short: ShortSha(l.Sha), Generation: l.Generation, At: l.At, Ago: Ago(now, l.At)}
		liveGen = l.Generation
	}
	for _, ref := range sc.Entries() {
		if ref.Failed || ref.Generation <= liveGen {
			continue
		}
		p.Behind++
		p.Newest = ref.Sha
		if p.Since.IsZero() || ref.At.Before(p.Since) {
			p.Since = ref.At
		}
	}
	if p.Behind > 0 {
		p.Age = Ago(now, p.Since)
	}
	if f := sc.Freeze; f != nil {
		p.Frozen = FrozenText(f)
	}
	p.Promotion, p.Waiting = promotionWait(e.View(name, envs), now)
	return p
}

// OverviewText writes the overview as a table, one line per scope and environment; text from
// users is escaped (Escape).
func OverviewText(w io.Writer, o *Overview) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCOPE\tENVIRONMENT\tLIVE\tDEPLOYED\tBEHIND\tNOTES")
	for _, s := range o.Scopes {
		for _, p := range s.Places {
			live, at := "-", "-"
			if p.Live != nil {
				live, at = Escape(p.Live.Short), p.Live.Ago
			}
			behind := "-"
			if p.Behind > 0 {
				behind = fmt.Sprintf("%d (newest %s, accepted %s)", p.Behind, Escape(ShortSha(p.Newest)), p.Age)
			}
			notes := ""
			for _, n := range []string{p.Frozen, p.Waiting} {
				if n == "" {
					continue
				}
				if notes != "" {
					notes += "; "
				}
				notes += Escape(n)
			}
			if notes == "" {
				notes = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", Escape(s.Scope), Escape(p.Environment), live, at, behind, notes)
		}
	}
	return tw.Flush()
}
