package authority_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/memory"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

var orderNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func orderAuthority(t *testing.T) *authority.Authority {
	t.Helper()
	return authority.New(memory.New(), authority.WithClock(storetest.NewClock(orderNow)))
}

func branchIntent(id string, c byte, ref string) authority.Intent {
	return authority.Intent{ID: id, Environment: "staging", Scopes: []string{"api"}, Sha: strings.Repeat(string(c), 40), Ref: ref}
}

// deployPending deploys what api has pending in staging at gen.
func deployPending(t *testing.T, a *authority.Authority, gen int64) {
	t.Helper()
	ctx := t.Context()
	g, err := a.Gate(ctx, authority.GateRequest{Environment: "staging", Generation: gen, Scopes: []string{"api"}, Phase: "deploy", Holder: "run", LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Complete(ctx, authority.Completion{Environment: "staging", Generation: gen, Scopes: []string{"api"}, Holder: "run",
		Tokens: g.Tokens, Outcome: authority.OutcomeSuccess}); err != nil {
		t.Fatal(err)
	}
}

// TestFutureOrderIsRefused: an ordering fact later than the Authority's clock by more than
// MaxOrderSkew is bad input naming the fact, its value and the allowance, and nothing is written;
// one within the allowance is taken. The refused fact pins nothing: a later real push deploys.
func TestFutureOrderIsRefused(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	year2100 := time.Unix(4102444800, 0).UTC()
	for _, tc := range []struct {
		field string
		order authority.Order
	}{
		{authority.FieldPushedAt, authority.Order{PushedAt: year2100}},
		{authority.FieldCommittedAt, authority.Order{CommittedAt: orderNow.Add(authority.MaxOrderSkew + time.Second)}},
	} {
		a := orderAuthority(t)
		in := branchIntent("pinning", 'f', "refs/heads/main")
		in.Order = tc.order
		_, err := a.Accept(ctx, in, true)
		var input *authority.InputError
		if !errors.As(err, &input) || input.Field != tc.field || input.Value == "" ||
			!strings.Contains(err.Error(), authority.MaxOrderSkew.String()) || !strings.Contains(err.Error(), input.Value) {
			t.Fatalf("%s in the future: %v; want bad input naming %s, its value and the %s allowed", tc.field, err, tc.field, authority.MaxOrderSkew)
		}
		if _, err := a.Status(ctx, "staging"); !errors.Is(err, authority.ErrInvalidInput) {
			t.Fatalf("a refused intent left state: %v", err)
		}
		real := branchIntent("real", 'a', "refs/heads/main")
		real.Order = authority.Order{PushedAt: orderNow.Add(-time.Minute), CommittedAt: orderNow.Add(-time.Minute)}
		res, err := a.Accept(ctx, real, true)
		if err != nil || len(res.Stale) != 0 || res.Claim == nil || len(res.Claim.Scopes()) != 1 {
			t.Fatalf("a real push after the refused one: %+v, %v; want it claimed", res, err)
		}
	}

	a := orderAuthority(t)
	in := branchIntent("skewed", 'b', "refs/heads/main")
	in.Order = authority.Order{PushedAt: orderNow.Add(authority.MaxOrderSkew), CommittedAt: orderNow.Add(authority.MaxOrderSkew)}
	if _, err := a.Accept(ctx, in, true); err != nil {
		t.Fatalf("facts just within the allowance for clock skew: %v; want them taken", err)
	}
}

// TestStoredFutureOrderPinsNothing: a document written before the boundary refused future facts
// may hold a commit pushed "in 2100". Such a stored fact counts as unknown, so the next real push
// of the branch is newer and deploys, instead of being older than the pinned commit forever.
func TestStoredFutureOrderPinsNothing(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	year2100 := time.Unix(4102444800, 0).UTC()
	store := memory.New()
	// A writer whose clock read 2100 stands for one that took any fact.
	then := authority.New(store, authority.WithClock(storetest.NewClock(year2100)))
	pinned := branchIntent("pinned", 'f', "refs/heads/main")
	pinned.Order = authority.Order{PushedAt: year2100, CommittedAt: year2100}
	if _, err := then.Accept(ctx, pinned, false); err != nil {
		t.Fatal(err)
	}

	now := authority.New(store, authority.WithClock(storetest.NewClock(orderNow)))
	real := branchIntent("real", 'a', "refs/heads/main")
	real.Order = authority.Order{PushedAt: orderNow.Add(-time.Minute), CommittedAt: orderNow.Add(-time.Minute)}
	res, err := now.Accept(ctx, real, true)
	if err != nil || len(res.Stale) != 0 || res.Claim == nil || len(res.Claim.Scopes()) != 1 {
		t.Fatalf("a real push after one pinned in 2100: %+v, %v; want it newer, and claimed", res, err)
	}
}

// TestBoundedDropsOnlyFutureFacts: Bounded leaves out the facts beyond the allowance, keeps the
// others, and names what it left out.
func TestBoundedDropsOnlyFutureFacts(t *testing.T) {
	t.Parallel()
	past := orderNow.Add(-time.Hour)
	o, dropped := authority.Order{PushedAt: orderNow.Add(time.Hour), CommittedAt: past, Forced: true}.Bounded(orderNow)
	if !o.PushedAt.IsZero() || !o.CommittedAt.Equal(past) || !o.Forced {
		t.Fatalf("bounded order %+v; want pushed_at left out, the rest kept", o)
	}
	if len(dropped) != 1 || dropped[0].Field != authority.FieldPushedAt {
		t.Fatalf("dropped %+v; want pushed_at named", dropped)
	}
	if _, dropped := (authority.Order{PushedAt: past}).Bounded(orderNow); len(dropped) != 0 {
		t.Fatalf("a past fact dropped: %+v", dropped)
	}
}

// answers is a Comparer that answers from a table by base, and counts what it was asked.
type answers struct {
	by    map[string]authority.CommitOrder
	asked []string
}

func (c *answers) Compare(_ context.Context, _ authority.Intent, base, _ string) (authority.CommitOrder, error) {
	c.asked = append(c.asked, base)
	if o, ok := c.by[base]; ok {
		return o, nil
	}
	return authority.Diverged, nil
}

// TestCompareLiveOrdersAgainstAnotherBranch: with CompareLive, a commit the live one builds on is
// older whatever branch the intent names; without it, only the intent's branch is compared.
func TestCompareLiveOrdersAgainstAnotherBranch(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	live := strings.Repeat("a", 40)
	for _, tc := range []struct {
		name      string
		opts      func(c *answers) []authority.AcceptOption
		wantStale bool
	}{
		{"compared with the live commit", func(c *answers) []authority.AcceptOption {
			return []authority.AcceptOption{authority.WithComparer(c), authority.CompareLive()}
		}, true},
		{"only the intent's branch", func(c *answers) []authority.AcceptOption {
			return []authority.AcceptOption{authority.WithComparer(c)}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := orderAuthority(t)
			res, err := a.Accept(ctx, branchIntent("main", 'a', "refs/heads/main"), true)
			if err != nil {
				t.Fatal(err)
			}
			deployPending(t, a, res.Generation)
			c := &answers{by: map[string]authority.CommitOrder{live: authority.Behind}}
			res, err = a.Accept(ctx, branchIntent("old", '0', "refs/heads/old"), true, tc.opts(c)...)
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Stale["api"] != 0; got != tc.wantStale {
				t.Fatalf("an ancestor of the live commit on another branch: %+v (asked %v); stale %v, want %v", res, c.asked, got, tc.wantStale)
			}
			e, err := a.Status(ctx, "staging")
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantStale {
				if m := e.Scopes["api"].Mailbox; m != nil {
					t.Fatalf("pending %+v; want nothing: the older commit recorded as out of order", m)
				}
				if ev := e.Events[len(e.Events)-1]; !strings.HasPrefix(ev.Message, "Arrived out of order") {
					t.Fatalf("newest event %+v; want arrived out of order", ev)
				}
			}
		})
	}
}

// TestWithBarriersDecides: the barrier function is told what each scope has live, and its answers
// replace the barriers the intent names.
func TestWithBarriersDecides(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a := orderAuthority(t)
	res, err := a.Accept(ctx, branchIntent("first", 'a', "refs/heads/main"), true)
	if err != nil {
		t.Fatal(err)
	}
	deployPending(t, a, res.Generation)
	var told []string
	decide := func(_ context.Context, scope string, live *authority.Live) (bool, error) {
		sha := "-"
		if live != nil {
			sha = live.Sha
		}
		told = append(told, scope+"@"+sha)
		return scope == "web", nil
	}
	in := branchIntent("second", 'b', "refs/heads/main")
	in.Scopes, in.Barrier = []string{"api", "web"}, []string{"api"}
	if _, err := a.Accept(ctx, in, false, authority.WithBarriers(decide)); err != nil {
		t.Fatal(err)
	}
	if want := []string{"api@" + strings.Repeat("a", 40), "web@-"}; !slices.Equal(told, want) {
		t.Fatalf("told %v; want %v", told, want)
	}
	e, err := a.Status(ctx, "staging")
	if err != nil {
		t.Fatal(err)
	}
	if e.Scopes["api"].Mailbox.Barrier || !e.Scopes["web"].Mailbox.Barrier {
		t.Fatalf("barriers api %v, web %v; want web only, as decided", e.Scopes["api"].Mailbox.Barrier, e.Scopes["web"].Mailbox.Barrier)
	}
}
