package action

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// TestEventOrderFromTheFutureIsBadInput: a push event whose repository.pushed_at or head commit
// time is far ahead of the runner's clock would pin the scope (every later push would look older).
// The claim is refused as bad input that says which field of the event it is and what to correct,
// nothing is written, and a later run of a real push claims in order.
func TestEventOrderFromTheFutureIsBadInput(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		edit func(p map[string]any)
		want string
	}{
		{"pushed_at", func(p map[string]any) { p["repository"].(map[string]any)["pushed_at"] = 4102444800 }, "repository.pushed_at"},
		{"committed_at", func(p map[string]any) { p["head_commit"].(map[string]any)["timestamp"] = "2100-01-01T00:00:00Z" }, "git commit --amend --no-edit --date=now"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			claim := map[string]string{"command": "claim", "environment": "staging", "scopes": "api"}
			r := w.job("future", "1", "push", pushEvent, func(p map[string]any) {
				pushOf(sha('0'), sha('f'))(p)
				tt.edit(p)
			}).step(claim)
			if !errors.Is(r.err, authority.ErrInvalidInput) || r.outputs["outcome"] != "invalid" || !strings.Contains(r.log, "::error::") {
				t.Fatalf("claim of a push from the future: %v, outcome %q\n%s; want bad input", r.err, r.outputs["outcome"], r.log)
			}
			for _, want := range []string{tt.want, "2100-01-01T00:00:00Z", authority.MaxOrderSkew.String()} {
				if !strings.Contains(r.err.Error(), want) {
					t.Errorf("refusal %q does not say %q", r.err, want)
				}
			}
			st, closeFn, err := openBolt(t.Context(), w.store)
			if err != nil {
				t.Fatal(err)
			}
			_, err = authority.New(st).Status(t.Context(), "staging")
			closeFn()
			if !errors.Is(err, authority.ErrInvalidInput) {
				t.Fatalf("staging has state after the refused claim: %v", err)
			}

			r = w.job("real", "2", "push", pushEvent, func(p map[string]any) {
				pushOf(sha('1'), sha('a'))(p)
				p["repository"].(map[string]any)["pushed_at"] = time.Now().Add(-time.Minute).Unix()
			}).step(claim)
			if r.err != nil || r.outputs["authorized"] != "true" {
				t.Fatalf("a real push's run after it: %v, outputs %v\n%s", r.err, r.outputs, r.log)
			}
		})
	}
}
