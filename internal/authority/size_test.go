package authority

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestWorstCaseDocumentFitsAnItem builds an environment at every limit the domain enforces, with
// every string at its longest and a full outbox, and checks that it stays well inside DynamoDB's
// 400 KB item size.
func TestWorstCaseDocumentFitsAnItem(t *testing.T) {
	long := func(prefix string, n int) string { return prefix + strings.Repeat("x", n-len(prefix)) }
	sha := strings.Repeat("f", 64)
	now := time.Date(2026, 11, 29, 12, 0, 0, 123456789, time.UTC)
	order := Order{PushedAt: now, CommittedAt: now, Forced: true}
	e := newEnv(long("preview/", 128))
	e.Desired, e.Observed, e.EventSeq = 1<<40, 1<<40-1, 1<<40
	for i := range MaxScopes {
		name := long(fmt.Sprintf("s%02d", i), 64)
		e.Scopes[name] = &Scope{
			Mailbox: &Ref{Generation: 1 << 40, Sha: sha, Ref: long("refs/heads/", maxFieldLen), Before: sha, Order: order,
				Source: long("push", maxFieldLen), Actor: long("a", maxFieldLen), IntentID: long("i", maxIDLen), Origin: long("github:", maxFieldLen), Attempt: 99, At: now},
			Owner: 1 << 40,
			Live: &Live{Sha: sha, Ref: long("refs/heads/", maxFieldLen), Generation: 1 << 40, Run: long("https://", maxFieldLen),
				Token: 1 << 40, Before: sha, Order: order, At: now},
			Lease: Lease{Holder: long("h", maxIDLen), Purpose: long("p", 32), Generation: 1 << 40, Token: 1 << 40, AcquiredAt: now, ExpiresAt: now,
				Sha: sha, Ref: long("refs/heads/", maxFieldLen)},
			Failure:  &Failure{Generation: 1 << 40, Sha: sha, Message: truncate(long("m", 2*maxMessageSize), maxMessageSize), Attempt: 9, MaxAttempts: 9, At: now},
			ActiveAt: now,
			Prev:     &Live{Sha: sha, Ref: long("refs/tags/", maxFieldLen)},
			Freeze:   &Freeze{Generation: 1 << 40, Sha: sha, Actor: long("a", maxFieldLen), Reason: long("r", maxFieldLen), At: now},
		}
	}
	e.Policy = PolicyQueue
	e.Requires = &Requirements{Ancestor: true}
	for i := range maxRequired {
		e.Requires.Environments = append(e.Requires.Environments, long(fmt.Sprintf("e%d/", i), 128))
	}
	// Waiting intents up to their bound, spread over the scopes, each with the longest fields.
	queued := 0
	for i := 0; ; i++ {
		q := &Ref{Generation: 1 << 40, Sha: sha, Ref: long("refs/heads/", maxFieldLen), Before: sha, Order: order,
			Source: long("push", maxFieldLen), Actor: long("a", maxFieldLen), IntentID: long("i", maxIDLen), Origin: long("github:", maxFieldLen),
			Attempt: 99, At: now, Barrier: true, Claimed: true, Failed: true, Rollback: true}
		sc := e.Scopes[long(fmt.Sprintf("s%02d", i%MaxScopes), 64)]
		sc.Queue = append(sc.Queue, q)
		if e.checkQueuedSize() != nil {
			sc.Queue = sc.Queue[:len(sc.Queue)-1]
			break
		}
		queued++
	}
	t.Logf("%d waiting intents of the longest kind fit the queued bound", queued)
	for range maxOutbox {
		e.record(now, Event{Kind: EventTookOver, Scope: long("s", 64), Generation: 1 << 40, Sha: sha, Holder: long("h", maxIDLen),
			Token: 1 << 40, Message: long("m", 3*maxMessageSize)})
	}
	for i := range MaxScopes {
		e.Accepts = append(e.Accepts, IntentRecord{ID: long(fmt.Sprintf("%04d", i), maxIDLen), Generation: 1 << 40, Sha: sha, At: now,
			Scopes: []string{long("s", 64)}})
	}
	b, err := EncodeEnv(e)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("worst-case environment document: %d bytes", len(b))
	if len(b) > 390_000 {
		t.Fatalf("worst-case document is %d bytes: too close to DynamoDB's 400 KB item limit", len(b))
	}
}

// TestHotItemStaysSmall: the document every transition writes is bounded by the environment's
// scopes, not by its history. Eight scopes with 40-character shas, driven through thousands of
// passes with leases, failures and redeliveries, never need more than 4 KB; and the busiest state
// they can be in (every scope live, pending, leased and failed at once) is reported.
func TestHotItemStaysSmall(t *testing.T) {
	ctx := t.Context()
	s := newMapStore()
	clock := &stepClock{now: t0}
	a := New(s, WithClock(clock))
	scopes := []string{"api", "web", "worker", "db", "search", "billing", "auth", "frontend"}
	passes := 2000
	if testing.Short() {
		passes = 300
	}
	largest, at := 0, 0
	for i := range passes {
		clock.now = clock.now.Add(time.Minute)
		scope := scopes[i%len(scopes)]
		in := Intent{ID: fmt.Sprintf("gha:example-org/service-%s/%d", scope, 10_000_000_000+i), Environment: "production",
			Scopes: []string{scope}, Sha: fmt.Sprintf("%040x", 1_000_000+i), Ref: "refs/heads/main", Source: "example-org/service-" + scope,
			Actor: "octocat", Order: Order{PushedAt: clock.now.Truncate(time.Second), CommittedAt: clock.now.Truncate(time.Second)}}
		res, err := a.Accept(ctx, in, true)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Accept(ctx, in, true); err != nil { // a redelivery
			t.Fatal(err)
		}
		holder := fmt.Sprintf("gha:example-org/service-%s/%d/1/deploy", scope, 10_000_000_000+i)
		g, err := a.Gate(ctx, GateRequest{Environment: "production", Generation: res.Generation, Scopes: []string{scope}, Phase: "deploy", Holder: holder, LeaseTTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		outcome := OutcomeSuccess
		if i%7 == 3 {
			outcome = OutcomeFailure
		}
		if _, err := a.Complete(ctx, Completion{Environment: "production", Generation: res.Generation, Scopes: []string{scope}, Holder: holder,
			Tokens: g.Tokens, Outcome: outcome, Attempt: 3, MaxAttempts: 3, Message: "exit status 1",
			Run: fmt.Sprintf("https://github.com/example-org/service-%s/actions/runs/%d", scope, 10_000_000_000+i)}); err != nil {
			t.Fatal(err)
		}
		if n := len(s.docs[EnvKey("production")]); n > largest {
			largest, at = n, i
		}
	}
	t.Logf("after %d passes the largest stored document was %d bytes (pass %d)", passes, largest, at)
	if largest > 4096 {
		t.Fatalf("the environment document reached %d bytes; want at most 4 KB for 8 scopes at any history length", largest)
	}

	// The busiest state: every scope live, with a newer commit pending, its lease held and its last failure.
	d, err := s.Get(ctx, EnvKey("production"))
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range scopes {
		sc := d.Env.Scopes[name]
		sc.Mailbox = &Ref{Generation: d.Env.Desired, Sha: fmt.Sprintf("%040x", 9_000_000+i), Ref: "refs/heads/main", Before: sc.Live.Sha,
			Order: Order{PushedAt: clock.now, CommittedAt: clock.now}, Source: "example-org/service-" + name, Actor: "octocat",
			IntentID: fmt.Sprintf("gha:example-org/service-%s/%d", name, 20_000_000_000+i), At: clock.now}
		sc.Lease = Lease{Holder: fmt.Sprintf("gha:example-org/service-%s/%d/1/deploy", name, 20_000_000_000+i), Purpose: "deploy",
			Generation: d.Env.Desired, Token: 9999, AcquiredAt: clock.now, ExpiresAt: clock.now, Sha: sc.Mailbox.Sha, Ref: "refs/heads/main"}
		sc.Failure = &Failure{Generation: d.Env.Desired, Sha: sc.Mailbox.Sha, Message: "exit status 1", Attempt: 3, MaxAttempts: 3, At: clock.now}
	}
	b, err := EncodeEnv(d.Env)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("8 scopes all live, pending, leased and failed at once: %d bytes", len(b))
}

type stepClock struct{ now time.Time }

func (c *stepClock) Now() time.Time { return c.now }

func TestTruncateKeepsCharactersWhole(t *testing.T) {
	s := strings.Repeat("é", 200) // two bytes each
	got := truncate(s, 301)
	if len(got) > 301 || !strings.HasSuffix(got, "…") || strings.ContainsRune(got, '\uFFFD') {
		t.Fatalf("truncate cut a character: %d bytes, %q", len(got), got[len(got)-8:])
	}
	if truncate("short", 300) != "short" {
		t.Fatal("truncate changed a short string")
	}
}

// TestWorstCasePerScopeItemsFit: in the per-scope layout no item grows with the environment but
// the directory and the head's log, and both stay far inside DynamoDB's 400 KB at the longest
// names: the directory of MaxScopesSplit scopes, and a head whose log holds maxLogScopes scope
// names (one intent of every scope) with the records of those intents, which it keeps until the
// log is trimmed. A scope's own document is one scope of the single document's worst case.
func TestWorstCasePerScopeItemsFit(t *testing.T) {
	long := func(prefix string, n int) string { return prefix + strings.Repeat("x", n-len(prefix)) }
	sha := strings.Repeat("f", 64)
	now := time.Date(2026, 12, 2, 12, 0, 0, 123456789, time.UTC)
	env := long("preview/", 128)
	names := make([]string, MaxScopesSplit)
	for i := range names {
		names[i] = long(fmt.Sprintf("s%04d", i), 64)
	}
	dir, err := EncodeEnv(&Env{Name: env, Part: partDir, Dir: names})
	if err != nil {
		t.Fatal(err)
	}
	head := &Env{Name: env, Part: partHead, Desired: 1 << 40, EventSeq: 1 << 40, Policy: PolicyQueue, Gates: nil}
	in := Intent{ID: long("i", maxIDLen), Scopes: names[:maxLogScopes], Sha: sha, Ref: long("refs/heads/", maxFieldLen), Before: sha,
		Order: Order{PushedAt: now, CommittedAt: now, Forced: true}, Source: long("push", maxFieldLen), Actor: long("a", maxFieldLen),
		Origin: long("github:", maxFieldLen), Barrier: names[:maxLogScopes]}
	answers := map[string]verdict{}
	for i := range 64 {
		answers[strings.Repeat(fmt.Sprintf("%x", i%16), 64)] = older
	}
	head.Log = []logEntry{{Generation: 1 << 40, Intent: in, Answers: answers, Claim: true, At: now}}
	head.Accepts = []IntentRecord{{ID: in.ID, Generation: 1 << 40, Sha: sha, Scopes: in.Scopes, At: now}}
	for range maxOutbox {
		head.record(now, Event{Kind: EventPolicy, Generation: 1 << 40, Message: long("m", 3*maxMessageSize)})
	}
	h, err := EncodeEnv(head)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("worst-case directory: %d bytes; worst-case head: %d bytes", len(dir), len(h))
	for what, n := range map[string]int{"directory": len(dir), "head": len(h)} {
		if n > 390_000 {
			t.Fatalf("the worst-case %s is %d bytes: too close to DynamoDB's 400 KB item limit", what, n)
		}
	}
}
