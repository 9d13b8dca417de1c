package dynamo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

// killer stops its process at request n: requests before it reach the server; request n itself is
// lost before it is sent, or (afterSend) sent, committed and its answer lost; every later request
// fails, as nothing runs after a kill.
type killer struct {
	API
	mu        sync.Mutex
	seen, n   int
	afterSend bool
}

var errKilled = errors.New("process killed")

// Unwrap gives the client underneath, for the scan of latestwins migrate.
func (k *killer) Unwrap() API { return k.API }

// step runs do unless the process is dead by now.
func (k *killer) step(do func() error) error {
	k.mu.Lock()
	k.seen++
	i := k.seen
	k.mu.Unlock()
	switch {
	case k.n == 0 || i < k.n:
		return do()
	case i == k.n && k.afterSend:
		_ = do()
		return networkError("killed after send")
	default:
		return errKilled
	}
}

func (k *killer) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (out *dynamodb.GetItemOutput, err error) {
	err = k.step(func() error { out, err = k.API.GetItem(ctx, in, o...); return err })
	return out, err
}

func (k *killer) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (out *dynamodb.PutItemOutput, err error) {
	err = k.step(func() error { out, err = k.API.PutItem(ctx, in, o...); return err })
	return out, err
}

func (k *killer) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, o ...func(*dynamodb.Options)) (out *dynamodb.BatchWriteItemOutput, err error) {
	err = k.step(func() error { out, err = k.API.BatchWriteItem(ctx, in, o...); return err })
	return out, err
}

func (k *killer) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (out *dynamodb.BatchGetItemOutput, err error) {
	err = k.step(func() error { out, err = k.API.BatchGetItem(ctx, in, o...); return err })
	return out, err
}

// onePass runs a whole pass (accept and claim, gate deploy, complete) of intent id at commit sha,
// tolerating the refusals a retried pass meets after its work already ended.
func onePass(ctx context.Context, a *authority.Authority, env, id, sha string) error {
	res, err := a.Accept(ctx, authority.Intent{ID: id, Environment: env, Scopes: []string{"api"}, Sha: sha, Ref: "refs/heads/main"}, true)
	if err != nil {
		return err
	}
	if res.Claim == nil || len(res.Claim.Claimed) == 0 {
		return nil // its work already ended: nothing to redo
	}
	g, err := a.Gate(ctx, authority.GateRequest{Environment: env, Generation: res.Generation, Scopes: []string{"api"}, Phase: "deploy", Holder: id, LeaseTTL: time.Minute})
	if errors.Is(err, authority.ErrSuperseded) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = a.Complete(ctx, authority.Completion{Environment: env, Generation: res.Generation, Scopes: []string{"api"}, Holder: g.Holder,
		Tokens: g.Tokens, Outcome: authority.OutcomeSuccess, Attempt: 1, MaxAttempts: 3})
	return err
}

// TestKilledAtEveryRequest: a pass on an environment with history, killed at each of its DynamoDB
// requests in turn (the request lost before it is sent, or committed with its answer lost), then run
// again by a new process, leaves every event of the timeline exactly once and every intent
// remembered once.
func TestKilledAtEveryRequest(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	client, table := migrated(t)
	clock := storetest.NewClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	proc := func(api API) *authority.Authority {
		return authority.New(New(api, table), authority.WithClock(clock))
	}
	// Count the requests of one pass after some history.
	count := &killer{API: client}
	if err := onePass(ctx, proc(client), "count", "run-0", fmt.Sprintf("%040x", 0)); err != nil {
		t.Fatal(err)
	}
	if err := onePass(ctx, proc(count), "count", "run-1", fmt.Sprintf("%040x", 1)); err != nil {
		t.Fatal(err)
	}
	total := count.seen
	kills := 0
	for _, afterSend := range []bool{false, true} {
		for n := 1; n <= total; n++ {
			env := fmt.Sprintf("kill-%v-%02d", afterSend, n)
			if err := onePass(ctx, proc(client), env, "run-0", fmt.Sprintf("%040x", 0)); err != nil {
				t.Fatal(err)
			}
			k := &killer{API: client, n: n, afterSend: afterSend}
			if err := onePass(ctx, proc(k), env, "run-1", fmt.Sprintf("%040x", 1)); err != nil {
				kills++
			}
			if err := onePass(ctx, proc(client), env, "run-1", fmt.Sprintf("%040x", 1)); err != nil {
				t.Fatalf("killed at request %d of %d (after send %v), the pass run again: %v", n, total, afterSend, err)
			}
			a := proc(client)
			page, err := a.History(ctx, env, 0, 1000)
			if err != nil {
				t.Fatal(err)
			}
			for i, ev := range page.Events {
				if ev.Seq != int64(i+1) {
					t.Fatalf("killed at request %d (after send %v): timeline numbers %d at %d; want every event once", n, afterSend, ev.Seq, i+1)
				}
			}
			if int64(len(page.Events)) != page.Newest {
				t.Fatalf("killed at request %d (after send %v): %d events of %d", n, afterSend, len(page.Events), page.Newest)
			}
			e, err := a.Status(ctx, env)
			if err != nil {
				t.Fatal(err)
			}
			if e.Desired != 2 || e.Scopes["api"].Live == nil || e.Scopes["api"].Live.Generation != 2 {
				t.Fatalf("killed at request %d (after send %v): %d/%d, live %+v; want generation 2 deployed once", n, afterSend, e.Observed, e.Desired, e.Scopes["api"].Live)
			}
			for id, gen := range map[string]int64{"run-0": 1, "run-1": 2} {
				res, err := a.Accept(ctx, authority.Intent{ID: id, Environment: env, Scopes: []string{"api"}, Sha: fmt.Sprintf("%040x", gen-1), Ref: "refs/heads/main"}, false)
				if err != nil || !res.Duplicate || res.Generation != gen {
					t.Fatalf("killed at request %d (after send %v): %s again: %+v, %v; want a repeat of generation %d", n, afterSend, id, res, err, gen)
				}
			}
		}
	}
	t.Logf("a pass makes %d requests; %d of %d kills stopped it", total, kills, 2*total)
}

// firstLayoutItem is an environment item as the first layout wrote it: the whole state, its newest
// events and its intents as a map attribute named after the json tags.
func firstLayoutItem(t *testing.T, env string, n int, at time.Time) map[string]types.AttributeValue {
	t.Helper()
	ts := at.Format(time.RFC3339Nano)
	var events []string
	intents := map[string]any{}
	for i := 1; i <= n; i++ {
		events = append(events, fmt.Sprintf(`{"seq":%d,"at":%q,"kind":"accepted","scope":"api","generation":%d,"sha":"%040x","message":"Accepted %07x"}`, i, ts, i, i, i))
		intents[fmt.Sprintf("delivery-%d", i)] = map[string]any{"generation": i}
	}
	intentJSON, _ := json.Marshal(intents)
	raw := fmt.Sprintf(`{"name":%q,"desired":%d,"observed":%d,"event_seq":%d,"scopes":{`+
		`"api":{"mailbox":{"generation":%d,"sha":"%040x","ref":"refs/heads/main","lineage":["%040x"],"intent_id":"delivery-%d","at":%q},"owner":%d,`+
		`"lease":{"holder":"gha:acme/api/77/1/deploy","purpose":"deploy","generation":%d,"token":9,"acquired_at":%q,"expires_at":%q},"active_at":%q},`+
		`"web":{"owner":3,"live":{"sha":"%040x","ref":"refs/heads/main","generation":3,"run":"run-3","token":4,"at":%q},"lease":{"token":4},`+
		`"failure":{"generation":2,"sha":"%040x","message":"boom","attempt":3,"max_attempts":3,"at":%q},"active_at":%q}},`+
		`"intents":%s,"events":[%s]}`,
		env, n, n-1, n, n, n, n-1, n, ts, n, n, ts, at.Add(2*time.Minute).Format(time.RFC3339Nano), ts, 3, ts, 2, ts, ts, intentJSON, strings.Join(events, ","))
	var m map[string]any
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		t.Fatalf("first-layout JSON: %v\n%s", err, raw)
	}
	av, err := attributevalue.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]types.AttributeValue{
		attrPK: &types.AttributeValueMemberS{Value: authority.EnvKey(env)}, attrRev: number(int64(n)),
		attrWID: &types.AttributeValueMemberS{Value: "first-layout"}, attrEnv: av,
		attrPending: &types.AttributeValueMemberS{Value: pendingValue},
	}
}

// migrateAll compacts every environment of the table, as latestwins migrate does.
func migrateAll(ctx context.Context, s *Store, a *authority.Authority) (int, error) {
	envs, err := s.Environments(ctx)
	if err != nil {
		return 0, err
	}
	moved := 0
	for _, env := range envs {
		wrote, err := a.Compact(ctx, env)
		if err != nil {
			return moved, err
		}
		if wrote {
			moved++
		}
	}
	return moved, nil
}

// TestMigrateFirstLayout: a table written by the first layout, full of pending work, live leases,
// failures, timelines and intent ids, is moved to the new layout by migrate: run twice, or killed at
// any request and run again, it ends in the same state, keeping every piece of queued work, every
// event once, and every intent id.
func TestMigrateFirstLayout(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clock := storetest.NewClock(at.Add(time.Minute))
	envs := map[string]int{"staging": 40, "prod": 7, "preview/pr-9": 256}

	setup := func(t *testing.T) (*dynamodb.Client, string) {
		client, table := migrated(t)
		for env, n := range envs {
			if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: firstLayoutItem(t, env, n, at)}); err != nil {
				t.Fatal(err)
			}
		}
		return client, table
	}
	// state is what must survive: the state of every environment, its whole timeline, its intents.
	state := func(t *testing.T, client API, table string) map[string]any {
		a := authority.New(New(client, table), authority.WithClock(clock))
		out := map[string]any{}
		for env, n := range envs {
			e, err := a.Status(ctx, env)
			if err != nil {
				t.Fatal(err)
			}
			e.Events, e.Outbox, e.Accepts = nil, nil, nil
			page, err := a.History(ctx, env, 0, 1000)
			if err != nil {
				t.Fatal(err)
			}
			out[env] = e
			out[env+" timeline"] = page.Events
			for i := 1; i <= n; i++ {
				res, err := a.Accept(ctx, authority.Intent{ID: fmt.Sprintf("delivery-%d", i), Environment: env, Scopes: []string{"api"}, Sha: fmt.Sprintf("%040x", i)}, false)
				if err != nil || !res.Duplicate || res.Generation != int64(i) {
					t.Fatalf("%s: delivery-%d again: %+v, %v; want a repeat of generation %d", env, i, res, err, i)
				}
			}
		}
		return out
	}

	client, table := setup(t)
	want := state(t, client, table) // read through the first layout, before any migration
	s := New(client, table)
	a := authority.New(s, authority.WithClock(clock))
	if moved, err := migrateAll(ctx, s, a); err != nil || moved != len(envs) {
		t.Fatalf("migrate: %d moved, %v", moved, err)
	}
	if moved, err := migrateAll(ctx, s, authority.New(s, authority.WithClock(clock))); err != nil || moved != 0 {
		t.Fatalf("migrate again: %d moved, %v; want nothing left to do", moved, err)
	}
	if diff := cmp.Diff(want, state(t, client, table)); diff != "" {
		t.Fatalf("migration changed the state (-before +after):\n%s", diff)
	}
	for env := range envs {
		d, err := s.Get(ctx, authority.EnvKey(env))
		if err != nil || len(d.Env.Outbox) != 0 || len(d.Env.Accepts) != 0 {
			t.Fatalf("%s after migration: %+v, %v; want the timeline and intents out of the document", env, d, err)
		}
	}

	// Killed at every request, then run again: the same end.
	count := &killer{API: client}
	cs, ct := setup(t)
	count.API = cs
	if _, err := migrateAll(ctx, New(count, ct), authority.New(New(count, ct), authority.WithClock(clock))); err != nil {
		t.Fatal(err)
	}
	total := count.seen
	for n := 1; n <= total; n += max(1, total/12) {
		client, table := setup(t)
		k := &killer{API: client, n: n, afterSend: n%2 == 0}
		_, _ = migrateAll(ctx, New(k, table), authority.New(New(k, table), authority.WithClock(clock)))
		s := New(client, table)
		if _, err := migrateAll(ctx, s, authority.New(s, authority.WithClock(clock))); err != nil {
			t.Fatalf("migrate after a kill at request %d: %v", n, err)
		}
		if diff := cmp.Diff(want, state(t, client, table)); diff != "" {
			t.Fatalf("migrate killed at request %d of %d, then run again, changed the state (-want +got):\n%s", n, total, diff)
		}
	}
}
