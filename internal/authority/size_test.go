package authority

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestWorstCaseDocumentFitsAnItem builds an environment at every limit the domain enforces, with
// every string at its longest, and checks that it stays well inside DynamoDB's 400 KB item size.
func TestWorstCaseDocumentFitsAnItem(t *testing.T) {
	long := func(prefix string, n int) string { return prefix + strings.Repeat("x", n-len(prefix)) }
	sha := strings.Repeat("f", 64)
	now := time.Date(2026, 11, 29, 12, 0, 0, 123456789, time.UTC)
	lineage := make([]string, maxLineage)
	for i := range lineage {
		lineage[i] = sha
	}
	e := newEnv(long("preview/", 128))
	e.Desired, e.Observed, e.EventSeq = 1<<40, 1<<40-1, 1<<40
	for i := range MaxScopes {
		name := long(fmt.Sprintf("s%02d", i), 64)
		e.Scopes[name] = &Scope{
			Mailbox: &Ref{Generation: 1 << 40, Sha: sha, Ref: long("refs/heads/", maxFieldLen), Before: sha, Lineage: lineage,
				Source: long("push", maxFieldLen), Actor: long("a", maxFieldLen), IntentID: long("i", maxIDLen), Origin: long("github:", maxFieldLen), Attempt: 99, At: now},
			Owner: 1 << 40,
			Live: &Live{Sha: sha, Ref: long("refs/heads/", maxFieldLen), Generation: 1 << 40, Run: long("https://", maxFieldLen),
				Token: 1 << 40, Lineage: lineage, At: now},
			Lease:    Lease{Holder: long("h", maxIDLen), Purpose: long("p", 32), Generation: 1 << 40, Token: 1 << 40, AcquiredAt: now, ExpiresAt: now},
			Failure:  &Failure{Generation: 1 << 40, Sha: sha, Message: truncate(long("m", 2*maxMessageSize), maxMessageSize), Attempt: 9, MaxAttempts: 9, At: now},
			ActiveAt: now,
		}
	}
	for i := range maxIntents {
		e.Intents[long(fmt.Sprintf("%04d", i), maxIDLen)] = IntentRecord{Generation: 1 << 40}
	}
	for range maxEvents + 10 {
		e.record(now, Event{Kind: EventTookOver, Scope: long("s", 64), Generation: 1 << 40, Sha: sha, Holder: long("h", maxIDLen),
			Token: 1 << 40, Message: long("m", 3*maxMessageSize)})
	}
	e.fit()
	if len(e.Events) == 0 || len(e.Intents) != maxIntents {
		t.Fatalf("fit dropped more than the oldest events: %d events, %d intents left", len(e.Events), len(e.Intents))
	}
	b, err := json.Marshal(&Doc{Key: EnvKey(e.Name), Rev: 1 << 40, Pending: true, Env: e})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("worst-case environment document: %d bytes of JSON, keeping %d events", len(b), len(e.Events))
	if len(b) > maxDocBytes+200 {
		t.Fatalf("worst-case document is %d bytes: too close to DynamoDB's 400 KB item limit", len(b))
	}
}

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
