package report

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/memory"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

// The rollup reads what the Authority really records: its retry and final failure words, and,
// through the state, the commit time of the commit that is live.
func TestReadRollupFromTheAuthority(t *testing.T) {
	ctx := t.Context()
	start := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	clock := storetest.NewClock(start)
	auth := authority.New(memory.New(), authority.WithClock(clock))
	sha1, sha2 := strings.Repeat("1", 40), strings.Repeat("2", 40)
	pass := func(id, sha string, committed time.Time, outcomes ...authority.Outcome) {
		t.Helper()
		acc, err := auth.Accept(ctx, authority.Intent{ID: id, Environment: "staging", Scopes: []string{"api"}, Sha: sha,
			Ref: "refs/heads/main", Source: "push", Actor: "octocat", Order: authority.Order{CommittedAt: committed}}, true)
		if err != nil {
			t.Fatal(err)
		}
		for i, o := range outcomes {
			clock.Advance(10 * time.Minute)
			g, err := auth.Gate(ctx, authority.GateRequest{Environment: "staging", Generation: acc.Generation, Scopes: []string{"api"},
				Phase: "deploy", Holder: id, LeaseTTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := auth.Complete(ctx, authority.Completion{Environment: "staging", Generation: acc.Generation, Scopes: []string{"api"},
				Holder: id, Tokens: g.Tokens, Outcome: o, Attempt: i + 1, MaxAttempts: 2, Run: id}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// 1: fails, fails again on its final attempt (at 09:20). 2: deploys at 10:10.
	pass("run-1", sha1, time.Time{}, authority.OutcomeFailure, authority.OutcomeFailure)
	clock.Advance(40 * time.Minute)
	pass("run-2", sha2, start.Add(30*time.Minute), authority.OutcomeSuccess)
	now := clock.Now()
	state, err := auth.Status(ctx, "staging")
	if err != nil {
		t.Fatal(err)
	}
	r, err := ReadRollup(ctx, auth, "staging", state)
	if err != nil {
		t.Fatal(err)
	}
	f := r.Report(start, now).Scopes[0]
	// Accepted 09:00 and 10:00, both live at 10:10: 70m and 10m; 2's commit 09:30, 40m before.
	if f.Deploys != 1 || f.Commits != 2 || f.Failures != 1 || f.ChangeFailureRate != 1 {
		t.Errorf("figures %+v; want 1 deploy of 2 commits, 1 terminal failure (not 2: the first attempt retries)", f)
	}
	if f.LeadFromAccept.Count != 2 || f.LeadFromAccept.MeanSeconds != (40*time.Minute).Seconds() {
		t.Errorf("lead from acceptance %+v; want 70m and 10m", f.LeadFromAccept)
	}
	if f.LeadFromCommit.Count != 1 || f.LeadFromCommit.MeanSeconds != (40*time.Minute).Seconds() {
		t.Errorf("lead from the commit %+v; want 40m, of the one commit whose time is known", f.LeadFromCommit)
	}
	if f.Restore.Count != 1 || f.Restore.MeanSeconds != (50*time.Minute).Seconds() {
		t.Errorf("restore %+v; want the final failure at 09:20 to the deploy at 10:10, 50m", f.Restore)
	}
	if f.BehindSeconds != (70 * time.Minute).Seconds() {
		t.Errorf("behind %vs; want 09:00 to 10:10", f.BehindSeconds)
	}
}

// hookStore stands for the copy of the outbox: on every write of an environment's document it
// updates a rollup with the document's outbox (Rollup.Update), but for the writes lost says to skip,
// whose events the next update reads from the records.
type hookStore struct {
	*memory.Store
	t      *testing.T
	tl     TimelineReader
	rollup *Rollup
	lose   func(n int) bool
	n      int
	gaps   int // updates that read events from the records first
}

func (s *hookStore) Put(ctx context.Context, d *authority.Doc) (int64, error) {
	rev, err := s.Store.Put(ctx, d)
	if err != nil || d.Env == nil {
		return rev, err
	}
	s.n++
	if s.lose(s.n) {
		return rev, nil
	}
	if len(d.Env.Outbox) > 0 && slices.MinFunc(d.Env.Outbox, func(a, b authority.Event) int { return int(a.Seq - b.Seq) }).Seq > s.rollup.Through+1 {
		s.gaps++
	}
	if err := s.rollup.Update(ctx, s.tl, d.Env); err != nil {
		s.t.Errorf("update the rollup: %v", err)
	}
	return rev, nil
}

// A rollup kept up to date as the outboxes are copied is the rollup read from the records at the
// end, even when some updates were lost; and it knows the commit time of every push, which the
// records do not keep.
func TestRollupKeptAsTheOutboxIsCopied(t *testing.T) {
	ctx := t.Context()
	start := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	clock := storetest.NewClock(start)
	st := &hookStore{Store: memory.New(), t: t, rollup: NewRollup("staging"), lose: func(n int) bool { return n%4 == 2 }}
	auth := authority.New(st, authority.WithClock(clock))
	st.tl = auth
	for i := range 12 {
		scope := []string{"api", "web"}[i%2]
		acc, err := auth.Accept(ctx, authority.Intent{ID: fmt.Sprintf("run-%d", i), Environment: "staging", Scopes: []string{scope}, Sha: fmt.Sprintf("%040x", i+1),
			Ref: "refs/heads/main", Source: "push", Order: authority.Order{CommittedAt: clock.Now().Add(-time.Hour)}}, true)
		if err != nil {
			t.Fatal(err)
		}
		clock.Advance(7 * time.Minute)
		if i%3 == 1 {
			continue // superseded by the next push of its scope
		}
		g, err := auth.Gate(ctx, authority.GateRequest{Environment: "staging", Generation: acc.Generation, Scopes: []string{scope}, Phase: "deploy", Holder: "h", LeaseTTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		outcome := authority.OutcomeSuccess
		if i == 6 {
			outcome = authority.OutcomeFailure
		}
		if _, err := auth.Complete(ctx, authority.Completion{Environment: "staging", Generation: acc.Generation, Scopes: []string{scope}, Holder: "h",
			Tokens: g.Tokens, Outcome: outcome, Attempt: 1, MaxAttempts: 1}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(3 * time.Hour)
	}
	if _, err := auth.Compact(ctx, "staging"); err != nil {
		t.Fatal(err)
	}
	state, err := auth.Status(ctx, "staging")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.rollup.Update(ctx, auth, state); err != nil { // the events the last writes left in the outbox, if any
		t.Fatal(err)
	}
	read, err := ReadRollup(ctx, auth, "staging", state)
	if err != nil {
		t.Fatal(err)
	}
	now := clock.Now()
	kept, want := st.rollup.Report(start, now), read.Report(start, now)
	if kept.Through != state.EventSeq || kept.Total.Deploys == 0 || kept.Total.Failures != 1 {
		t.Fatalf("the kept rollup is through event %d of %d, %+v", kept.Through, state.EventSeq, kept.Total)
	}
	if st.gaps == 0 {
		t.Errorf("no update found a gap to read from the records: the lost updates test nothing")
	}
	noCommit := cmpopts.IgnoreFields(Figures{}, "LeadFromCommit")
	if diff := cmp.Diff(want, kept, noCommit); diff != "" {
		t.Errorf("kept as the outbox is copied (-read from the records +kept):\n%s", diff)
	}
	if kept.Total.LeadFromCommit.Count != uint64(kept.Total.Commits) || want.Total.LeadFromCommit.Count >= kept.Total.LeadFromCommit.Count {
		t.Errorf("commit times known: %d of %d commits kept, %d read from the records; want every one kept, fewer read",
			kept.Total.LeadFromCommit.Count, kept.Total.Commits, want.Total.LeadFromCommit.Count)
	}
}

// expiredTimeline is a synthetic timeline whose events below kept have expired.
type expiredTimeline struct {
	syntheticTimeline
	kept  int64
	reads *int
}

func (e expiredTimeline) History(ctx context.Context, env string, before int64, limit int) (*authority.HistoryPage, error) {
	*e.reads++
	page, err := e.syntheticTimeline.History(ctx, env, before, limit)
	if err != nil {
		return nil, err
	}
	page.Events = slices.DeleteFunc(page.Events, func(ev authority.Event) bool { return ev.Seq < e.kept })
	return page, nil
}

// An environment whose older events expired is read from its oldest kept, not page by page from
// its first event.
func TestReadRollupStartsAtTheOldestKept(t *testing.T) {
	reads := 0
	tl := expiredTimeline{syntheticTimeline: syntheticTimeline{n: 1_000_000}, kept: 990_001, reads: &reads}
	r, err := ReadRollup(t.Context(), tl, "staging", nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Through != 1_000_000 || !r.From.Equal(tl.event(990_001).At) {
		t.Errorf("read through %d from %v; want through 1000000 from event 990001's time", r.Through, r.From)
	}
	if reads > 40 {
		t.Errorf("%d reads for 10,000 events kept of 1,000,000: want the bisection's 20 and 10 pages", reads)
	}
}

// The per-scope layout numbers events per scope and pages its timeline by time: its rollup, read
// whole or through the kept one, is the single document's for the same passes, across more than
// one page of events.
func TestRollupOfThePerScopeLayout(t *testing.T) {
	ctx := t.Context()
	start := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	run := func(opts ...authority.Option) (*authority.Authority, *Rollup, *Delivery, *Delivery) {
		clock := storetest.NewClock(start)
		auth := authority.New(memory.New(), append(opts, authority.WithClock(clock))...)
		for i := range 320 {
			scope := []string{"api", "web", "worker"}[i%3]
			sha := fmt.Sprintf("%040x", i+1)
			acc, err := auth.Accept(ctx, authority.Intent{ID: fmt.Sprintf("run-%d", i), Environment: "staging", Scopes: []string{scope}, Sha: sha,
				Ref: "refs/heads/main", Source: "push", Actor: "octocat", Order: authority.Order{CommittedAt: clock.Now().Add(-time.Minute)}}, true)
			if err != nil {
				t.Fatal(err)
			}
			clock.Advance(7 * time.Minute)
			if i == 200 {
				// A report half way keeps its rollup; the last one reads on from it.
				state, err := auth.Status(ctx, "staging")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := ReadDelivery(ctx, auth, "staging", state, 7*24*time.Hour, clock.Now()); err != nil {
					t.Fatal(err)
				}
			}
			if i%5 == 4 {
				continue // superseded by the next push of its scope
			}
			g, err := auth.Gate(ctx, authority.GateRequest{Environment: "staging", Generation: acc.Generation, Scopes: []string{scope},
				Phase: "deploy", Holder: sha, LeaseTTL: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			outcome := authority.OutcomeSuccess
			if i%7 == 3 {
				outcome = authority.OutcomeFailure
			}
			if _, err := auth.Complete(ctx, authority.Completion{Environment: "staging", Generation: acc.Generation, Scopes: []string{scope},
				Holder: sha, Tokens: g.Tokens, Outcome: outcome, Attempt: 1, MaxAttempts: 1, Run: sha}); err != nil {
				t.Fatal(err)
			}
			clock.Advance(3 * time.Minute)
		}
		state, err := auth.Status(ctx, "staging")
		if err != nil {
			t.Fatal(err)
		}
		r, err := ReadRollup(ctx, auth, "staging", state)
		if err != nil {
			t.Fatal(err)
		}
		d, err := ReadDelivery(ctx, auth, "staging", state, 7*24*time.Hour, clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		whole, err := wholeDelivery(ctx, auth, "staging", state, 7*24*time.Hour, clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		return auth, r, d, whole
	}
	// The kept rollup of the single document learnt commit times from the state half way, which
	// the records do not keep; the per-scope layout's report reads the timeline whole each time,
	// as the single document's would without a kept rollup.
	single, want, _, wantDelivery := run()
	split, got, gotDelivery, _ := run(authority.WithScopeDocuments())
	if page, err := split.History(ctx, "staging", 0, 1); err != nil || !page.Timed {
		t.Fatalf("the per-scope layout's timeline: %+v, %v; want it paged by time", page, err)
	}
	if page, err := single.History(ctx, "staging", 0, 1); err != nil || page.Timed || page.Newest <= RollupPage {
		t.Fatalf("the single document's timeline: %+v, %v; want more than a page of numbered events", page, err)
	}
	now := start.Add(60 * 24 * time.Hour)
	if diff := cmp.Diff(want.Report(start, now), got.Report(start, now)); diff != "" {
		t.Errorf("the rollup of the per-scope layout (-single document +per-scope):\n%s", diff)
	}
	if diff := cmp.Diff(wantDelivery, gotDelivery); diff != "" {
		t.Errorf("the delivery report of the per-scope layout (-single document +per-scope):\n%s", diff)
	}
}
