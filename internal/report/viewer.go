package report

import (
	"regexp"
	"strings"

	"github.com/latestwins/latestwins/internal/authority"
)

// Viewer says which environments a reader may see: a signed-in user on the status page, the
// repository of a token over the API, the readers of a repository where a comment, check run or
// job summary is published. What an environment's own status and timeline say of another one's
// commits (what is live in the environment it requires) is rendered for the reader at read time:
// hidden from one who may not see that environment. nil: every environment.
type Viewer func(env string) bool

// Sees reports whether the viewer may see env.
func (v Viewer) Sees(env string) bool { return v == nil || v(env) }

// Wait is a promotion wait as the viewer may read it: without what is live in the required
// environment when the viewer may not see it.
func (v Viewer) Wait(w *authority.PromotionWait) *authority.PromotionWait {
	if w == nil || w.Live == "" || v.Sees(w.Environment) {
		return w
	}
	hidden := *w
	hidden.Live, hidden.Unasked = "", false
	return &hidden
}

// legacyWait finds a promotion wait in the words of an event stored without its structured form:
// "waiting for ENV: SHA is not live there yet (LIVE is...)".
var legacyWait = regexp.MustCompile(`waiting for ([A-Za-z0-9][A-Za-z0-9._/-]*): [0-9a-f]+ is not live there yet \(`)

// Event is ev as the viewer may read it. An event that says what is live in an environment the
// viewer may not see is worded again from its structured form without it; one stored before events
// had that form, whose words name such an environment's commits, is withheld.
func (v Viewer) Event(ev authority.Event) authority.Event {
	if v == nil {
		return ev
	}
	if w := ev.Wait; w != nil {
		if hidden := v.Wait(w); hidden != w {
			full, short := authority.WaitText(&authority.HeldError{Promotion: w}), authority.WaitText(&authority.HeldError{Promotion: hidden})
			if strings.Contains(ev.Message, full) {
				ev.Message = strings.Replace(ev.Message, full, short, 1)
			} else {
				ev.Message = short
			}
			ev.Wait = hidden
		}
		return ev
	}
	for _, m := range legacyWait.FindAllStringSubmatch(ev.Message, -1) {
		if !v.Sees(m[1]) {
			ev.Message = "(withheld: this event names commits of " + m[1] + ", which you may not see)"
			break
		}
	}
	return ev
}

// Events is events as the viewer may read them.
func (v Viewer) Events(events []authority.Event) []authority.Event {
	if v == nil {
		return events
	}
	out := make([]authority.Event, len(events))
	for i, ev := range events {
		out[i] = v.Event(ev)
	}
	return out
}

// Status rewrites st's rows for the viewer: the promotion waits, and the late rows' words that
// quote them, without what is live where the viewer may not see.
func (v Viewer) Status(st *Status) *Status {
	if v == nil {
		return st
	}
	for i := range st.Rows {
		r := &st.Rows[i]
		if hidden := v.Wait(r.PromotionWait); hidden != r.PromotionWait {
			r.PromotionWait, r.Promotion = hidden, authority.WaitText(&authority.HeldError{Promotion: hidden})
			r.Late = r.lateText(st.Name) // a stuck row words the promotion wait too
		}
	}
	return st
}

// Env is a copy of e with its timeline (Events, and the Outbox of events not yet stored as records)
// as the viewer may read it, for renderings of the whole state (the API's status, a publication).
func (v Viewer) Env(e *authority.Env) *authority.Env {
	if v == nil || e == nil {
		return e
	}
	c := *e
	c.Events, c.Outbox = v.Events(e.Events), v.Events(e.Outbox)
	return &c
}
