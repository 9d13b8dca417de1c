package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/memory"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

func TestPutGetRevisions(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	client, table := migrated(t)
	s := New(client, table)
	key := authority.EnvKey("staging")

	if d, err := s.Get(ctx, key); !errors.Is(err, authority.ErrNotFound) || !strings.Contains(err.Error(), key) {
		t.Fatalf("Get of a missing document = %v, %v; want ErrNotFound naming %s", d, err, key)
	}
	doc := func(rev, desired int64) *authority.Doc {
		return &authority.Doc{Key: key, Rev: rev, Env: &authority.Env{Name: "staging", Desired: desired, Observed: desired}}
	}
	// A revision other than 0 cannot create the document.
	if _, err := s.Put(ctx, doc(4, 1)); !errors.Is(err, authority.ErrConflict) {
		t.Fatalf("Put at revision 4 of a missing document: %v, want ErrConflict", err)
	}
	if rev, err := s.Put(ctx, doc(0, 1)); err != nil || rev != 1 {
		t.Fatalf("first Put = %d, %v; want revision 1", rev, err)
	}
	for _, rev := range []int64{0, 2, 9} {
		if got, err := s.Put(ctx, doc(rev, 99)); !errors.Is(err, authority.ErrConflict) {
			t.Fatalf("Put at revision %d over revision 1 = %d, %v; want ErrConflict", rev, got, err)
		}
	}
	if rev, err := s.Put(ctx, doc(1, 2)); err != nil || rev != 2 {
		t.Fatalf("second Put = %d, %v; want revision 2", rev, err)
	}
	if _, err := s.Put(ctx, doc(1, 3)); !errors.Is(err, authority.ErrConflict) {
		t.Fatalf("Put at the stale revision 1: %v, want ErrConflict", err)
	}
	got, err := s.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(doc(2, 2), got); diff != "" {
		t.Fatalf("stored document differs (-want +got):\n%s", diff)
	}
}

// realisticDocs builds documents through the Authority itself (accept, claim, gate with a lease,
// a failed attempt, a named lease), so that every field the domain fills is round-tripped.
func realisticDocs(t *testing.T) []*authority.Doc {
	t.Helper()
	ctx := t.Context()
	mem := memory.New()
	clock := storetest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC))
	a := authority.New(mem, authority.WithClock(clock))
	res, err := a.Accept(ctx, authority.Intent{ID: "d-1", Environment: "preview/pr-803", Scopes: []string{"api", "web"},
		Sha: "a1b2c3d4e5000000000000000000000000000000", Ref: "refs/heads/main", Before: "0f0f0f0000000000000000000000000000000000", Source: "example/app", Actor: "octocat"}, true)
	if err != nil {
		t.Fatal(err)
	}
	g, err := a.Gate(ctx, authority.GateRequest{Environment: "preview/pr-803", Generation: res.Generation, Scopes: []string{"api"},
		Phase: "deploy", Holder: "run-1", LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	if _, err := a.Complete(ctx, authority.Completion{Environment: "preview/pr-803", Generation: res.Generation, Scopes: []string{"api"},
		Holder: g.Holder, Tokens: g.Tokens, Outcome: authority.OutcomeFailure, Attempt: 1, MaxAttempts: 3, Message: "exit 1 ✗"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Acquire(ctx, "refresh: config ✓", "host:42", "refresh", time.Minute); err != nil {
		t.Fatal(err)
	}
	var docs []*authority.Doc
	for _, key := range []string{authority.EnvKey("preview/pr-803"), authority.LeaseKey("refresh: config ✓")} {
		d, err := mem.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, d)
	}
	return docs
}

func TestRoundTripAndItemLayout(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	client, table := migrated(t)
	s := New(client, table)
	for _, want := range realisticDocs(t) {
		put := *want
		put.Rev = 0
		rev, err := s.Put(ctx, &put)
		if err != nil || rev != 1 {
			t.Fatalf("Put %s = %d, %v", want.Key, rev, err)
		}
		want.Rev = 1
		got, err := s.Get(ctx, want.Key)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s does not round-trip (-want +got):\n%s", want.Key, diff)
		}
	}

	// The stored item: the keys, revision and index attribute at the top, the state in its compact
	// stored form.
	out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table),
		Key: map[string]types.AttributeValue{attrPK: &types.AttributeValueMemberS{Value: authority.EnvKey("preview/pr-803")}}})
	if err != nil {
		t.Fatal(err)
	}
	item := out.Item
	if rev, ok := item[attrRev].(*types.AttributeValueMemberN); !ok || rev.Value != "1" {
		t.Errorf("rev = %#v, want N 1", item[attrRev])
	}
	wid, ok := item[attrWID].(*types.AttributeValueMemberS)
	if !ok || len(wid.Value) != 32 {
		t.Errorf("wid = %#v, want a 32-digit write id", item[attrWID])
	}
	if p, ok := item[attrPending].(*types.AttributeValueMemberS); !ok || p.Value != pendingValue {
		t.Errorf("pending = %#v, want S %q on an environment with pending work", item[attrPending], pendingValue)
	}
	hot, ok := item[attrHot].(*types.AttributeValueMemberS)
	if !ok {
		t.Fatalf("hot = %T, want the compact state as a string", item[attrHot])
	}
	e, err := authority.DecodeEnv([]byte(hot.Value))
	if err != nil || e.EventSeq == 0 || e.Scopes["api"] == nil || e.Scopes["web"] == nil {
		t.Errorf("hot decodes to %+v (%v); want a timeline counter and api and web", e, err)
	}
	if marker, ok := item[attrEnv].(*types.AttributeValueMemberS); !ok || !strings.Contains(marker.Value, "upgrade latestwins") {
		t.Errorf("env = %#v; want a string that makes a latestwins of the first layout fail to decode the item", item[attrEnv])
	}
	if _, ok := item[attrLease]; ok {
		t.Errorf("an environment document carries a lease attribute")
	}
}

func TestPendingIndex(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	client, table := migrated(t)
	s := New(client, table)
	revs := map[string]int64{}
	put := func(name string, pending bool) {
		t.Helper()
		key := authority.EnvKey(name)
		rev, err := s.Put(ctx, &authority.Doc{Key: key, Rev: revs[key], Pending: pending, Env: &authority.Env{Name: name}})
		if err != nil {
			t.Fatal(err)
		}
		revs[key] = rev
	}
	var want []string
	for i := range 25 {
		name := fmt.Sprintf("preview/pr-%03d", i)
		put(name, i%5 != 0)
		if i%5 != 0 {
			want = append(want, name)
		}
	}
	// A lease document never enters the index, even if it says pending.
	if _, err := s.Put(ctx, &authority.Doc{Key: authority.LeaseKey("x"), Pending: true, Lease: &authority.NamedLease{Name: "x"}}); err != nil {
		t.Fatal(err)
	}
	pager := &pagedQueries{API: client}
	ps := New(pager, table)
	check := func() {
		t.Helper()
		got, err := ps.Pending(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("Pending (-want +got):\n%s", diff)
		}
	}
	check()
	if n := pager.queries.Load(); n < 6 {
		t.Fatalf("Pending made %d queries of at most 4 items for %d environments; want it to follow every page", n, len(want))
	}
	// Settling removes an environment from the index; new work puts it back.
	put("preview/pr-001", false)
	put("preview/pr-005", true)
	want = append([]string{"preview/pr-002", "preview/pr-003", "preview/pr-004", "preview/pr-005"}, want[4:]...)
	check()
}

// pagedQueries forces small pages, so that Pending has to follow LastEvaluatedKey.
type pagedQueries struct {
	API
	queries atomic.Int64
}

func (p *pagedQueries) Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	p.queries.Add(1)
	in.Limit = aws.Int32(4)
	return p.API.Query(ctx, in, optFns...)
}

func TestCanceledContext(t *testing.T) {
	t.Parallel()
	client, table := migrated(t)
	s := New(client, table)
	key := authority.EnvKey("canceled")
	if _, err := s.Put(t.Context(), &authority.Doc{Key: key, Env: &authority.Env{Name: "canceled"}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Put(ctx, &authority.Doc{Key: key, Rev: 1, Env: &authority.Env{Name: "canceled", Desired: 5}}); !errors.Is(err, context.Canceled) || errors.Is(err, authority.ErrConflict) {
		t.Errorf("Put with a canceled context: %v; want context.Canceled and no conflict", err)
	}
	if _, err := s.Get(ctx, key); !errors.Is(err, context.Canceled) {
		t.Errorf("Get with a canceled context: %v", err)
	}
	if _, err := s.Pending(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Pending with a canceled context: %v", err)
	}
	if d, err := s.Get(t.Context(), key); err != nil || d.Rev != 1 || d.Env.Desired != 0 {
		t.Errorf("after a canceled Put: %+v, %v; want revision 1 unchanged", d, err)
	}
}
