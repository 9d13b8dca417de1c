package report

import (
	"strings"
	"testing"

	"github.com/latestwins/latestwins/internal/authority"
)

// What one environment says of another's commits reaches only a viewer who may see that other
// one: a structured wait is worded again without the live commit, a stored message that embeds
// one is withheld, and everything else is as stored.
func TestViewerHidesAnotherEnvironmentsCommits(t *testing.T) {
	w := &authority.PromotionWait{Environment: "staging", Sha: strings.Repeat("b", 40), Live: strings.Repeat("a", 40)}
	full := authority.WaitText(&authority.HeldError{Promotion: w})
	structured := authority.Event{Kind: authority.EventLocked, Message: "Pass 3 waits before deploy: " + full, Wait: w}
	legacy := authority.Event{Kind: authority.EventLocked, Message: "Pass 3 waits before deploy: " + full}
	plain := authority.Event{Kind: authority.EventDeployed, Message: "Deployed bbbbbbb (generation 3)"}
	if !strings.Contains(full, "aaaaaaa") {
		t.Fatalf("the wait's words %q do not name staging's live commit", full)
	}
	prodOnly := Viewer(func(env string) bool { return env == "production" })
	both := Viewer(func(string) bool { return true })
	for _, tt := range []struct {
		name      string
		v         Viewer
		ev        authority.Event
		want, not string
	}{
		{"structured, hidden", prodOnly, structured, "waiting for staging: bbbbbbb is not live there yet", "aaaaaaa"},
		{"legacy, hidden", prodOnly, legacy, "withheld", "aaaaaaa"},
		{"structured, seen", both, structured, "(aaaaaaa is)", ""},
		{"legacy, seen", both, legacy, "(aaaaaaa is)", ""},
		{"plain", prodOnly, plain, plain.Message, "withheld"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.v.Event(tt.ev).Message
			if !strings.Contains(got, tt.want) || (tt.not != "" && strings.Contains(got, tt.not)) {
				t.Errorf("message %q; want it to contain %q and not %q", got, tt.want, tt.not)
			}
		})
	}
	st := &Status{Rows: []Row{{Scope: "api", PromotionWait: w, Promotion: full}}}
	if r := prodOnly.Status(st).Rows[0]; strings.Contains(r.Promotion, "aaaaaaa") || r.PromotionWait.Live != "" {
		t.Errorf("row for a viewer who may not see staging: %q %+v", r.Promotion, r.PromotionWait)
	}
}
