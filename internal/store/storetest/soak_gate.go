package storetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// Soak: an environment that requires another with a soak deploys a commit only once it has been
// live there for the soak, counted from when it first went live there. Until then its deploy gate
// refuses with ReasonSoaking, saying how long so far and when it ends, and tells the pass to ask
// again then; a deploy of the same commit again there does not restart it.
func soakCases() []testCase {
	return []testCase{
		{"HeldUntilLiveForTheSoak", testSoakHeld},
		{"DescendantsDoNotRestartIt", testSoakAncestor},
	}
}

// soakPush is a push to prod whose configuration says prod requires staging (or a descendant,
// with ancestor) and soaks there for soak.
func soakPush(id, commit string, soak time.Duration, ancestor bool) authority.Intent {
	in := prodPush(id, commit, &authority.Requirements{Environments: []string{"staging"}, Ancestor: ancestor})
	in.Gates = &authority.Gates{Soak: &authority.Soak{For: soak}}
	return in
}

// wantSoaking checks that prod's deploy gate holds the pass at gen of commit for its soak in
// staging, soaked so long, retryably until its end.
func (h *harness) wantSoaking(a *authority.Authority, gen int64, commit string, soaked, soak time.Duration) {
	h.t.Helper()
	held, err := h.tryDeploy(a, "prod", gen, fmt.Sprintf("run-%d", gen), "api")
	if err != nil {
		h.t.Fatal(err)
	}
	if held == nil {
		h.t.Fatalf("prod deployed %s after %s in staging; want it held for its soak of %s", commit[:7], soaked, soak)
	}
	ends := h.clock.Now().Add(soak - soaked)
	want := fmt.Sprintf("soaking in staging: %s of %s; ends %s UTC", shortDuration(soaked.Truncate(time.Minute)), shortDuration(soak), ends.UTC().Format("15:04:05"))
	if held.Why() != authority.ReasonSoaking || held.Soak == nil || held.Soak.Environment != "staging" || held.Soak.Sha != commit ||
		!held.Soak.Ends.Equal(ends) || authority.WaitText(held) != want || !strings.Contains(held.Error(), want) ||
		held.RetryAfter != ceilSeconds(soak-soaked) || !errors.Is(held, authority.ErrLeaseHeld) {
		h.t.Fatalf("prod's deploy gate for %s after %s: %v (reason %s, wait %q, soak %+v, retry after %s); want a refusal saying %q, retry after %s",
			commit[:7], soaked, held, held.Why(), authority.WaitText(held), held.Soak, held.RetryAfter, want, ceilSeconds(soak-soaked))
	}
}

// shortDuration spells d as the gate does: 30m, not 30m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	s = strings.TrimSuffix(s, "0s")
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	if s == "" {
		s = "0s"
	}
	return s
}

// Staging deploys x; prod's gate holds x with ReasonSoaking, each time in a process of its own,
// through a redeploy of x in staging, until the clock passes the soak; then x deploys.
func testSoakHeld(t *testing.T, h *harness) {
	x := sha("50a", 1)
	const soak = 30 * time.Minute
	h.live(h.process(), "staging", "s-x", x, "api")
	res := h.accept(h.process(), soakPush("p-x", x, soak, false), true)
	h.wantSoaking(h.process(), res.Generation, x, 0, soak)

	h.clock.Advance(12 * time.Minute)
	h.wantSoaking(h.process(), res.Generation, x, 12*time.Minute, soak)
	redeploy := push("staging", "s-x-again", x, "api")
	redeploy.Redeploy = true
	sres := h.accept(h.process(), redeploy, false)
	h.deploy(h.process(), "staging", sres.Generation, "run-s-x-again", "run-s-x-again", "api")
	if l := h.scope("staging", "api").Live; !l.At.Equal(start.Add(12*time.Minute)) || !l.Since.Equal(start) {
		t.Fatalf("staging's live after a redeploy: at %s, since %s; want at %s, since %s", l.At, l.Since, start.Add(12*time.Minute), start)
	}

	h.clock.Advance(soak - 12*time.Minute - time.Second)
	h.wantSoaking(h.process(), res.Generation, x, soak-time.Second, soak)
	h.clock.Advance(time.Second)
	if held, err := h.tryDeploy(h.process(), "prod", res.Generation, "run-prod", "api"); err != nil || held != nil {
		t.Fatalf("prod's deploy once x soaked for %s: held %v, %v; want it deployed", soak, held, err)
	}
	if l := h.scope("prod", "api").Live; l == nil || l.Sha != x {
		t.Fatalf("prod after the soak: %+v; want x live", l)
	}
}

// With requires-ancestor, staging deploying a newer descendant every ten minutes does not restart
// prod's soak: it counts from when the gate first saw one live, and the stored entry keeps that.
func testSoakAncestor(t *testing.T, h *harness) {
	x := sha("50b", 0)
	const soak = 30 * time.Minute
	answers := map[string]authority.CommitOrder{}
	// Each gate asks in a process of its own: what it recorded is read back from the store.
	prod := func() *authority.Authority {
		return h.authority(h.store, authority.WithPromotionComparer(fakeComparer{answers}))
	}
	descendant := func(i int) string {
		d := sha("50c", i)
		answers[x+".."+d] = authority.Ahead
		h.live(h.process(), "staging", fmt.Sprintf("s-%d", i), d, "api")
		return d
	}
	descendant(1)
	res := h.accept(prod(), soakPush("p-x", x, soak, true), true)
	h.wantSoaking(prod(), res.Generation, x, 0, soak)
	for i := 2; i <= 3; i++ {
		h.clock.Advance(10 * time.Minute)
		descendant(i)
		h.wantSoaking(prod(), res.Generation, x, time.Duration(i-1)*10*time.Minute, soak)
	}
	if m := h.scope("prod", "api").Mailbox; m == nil || !m.SoakFrom["staging"].Equal(start) {
		t.Fatalf("prod's waiting entry: %+v; want its soak in staging counted from %s", m, start)
	}
	h.clock.Advance(10 * time.Minute)
	if held, err := h.tryDeploy(prod(), "prod", res.Generation, "run-prod", "api"); err != nil || held != nil {
		t.Fatalf("prod's deploy 30m after a descendant went live in staging: held %v, %v; want it deployed", held, err)
	}
}
