package authority

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestStoredLayoutVersions: a document of version 2, as builds before policies wrote it, still
// decodes; a document that uses no policy feature is still written as version 2 (so those builds
// keep reading it); one with a policy or a queue is written as version 3 and comes back whole; one with a
// promotion requirement as version 4; a newer version is refused.
func TestStoredLayoutVersions(t *testing.T) {
	v2 := `{"v":2,"n":"staging","d":3,"o":2,"q":7,"s":{"api":{"m":{"g":3,"s":"c3","r":"refs/heads/main","i":"d-3","t":1772366400000000000},"o":3,"t":1772366400000000000}}}`
	e, err := DecodeEnv([]byte(v2))
	if err != nil {
		t.Fatalf("decode a version 2 document: %v", err)
	}
	if e.PolicyOrDefault() != PolicyLatest || e.Scopes["api"].Mailbox.Sha != "c3" || len(e.Scopes["api"].Queue) != 0 {
		t.Fatalf("version 2 document read as %+v", e)
	}
	b, err := EncodeEnv(e)
	if err != nil {
		t.Fatal(err)
	}
	if v := version(t, b); v != 2 {
		t.Fatalf("a document without policy features written as version %d, want 2", v)
	}

	at := time.Date(2026, 3, 1, 12, 0, 0, 5, time.UTC)
	q := &Env{Name: "prod", Policy: PolicyQueue, Desired: 3, Observed: 0, Scopes: map[string]*Scope{"db": {
		Mailbox: &Ref{Generation: 1, Sha: "a1", IntentID: "i1", At: at, Barrier: true, Failed: true},
		Queue:   []*Ref{{Generation: 2, Sha: "b2", IntentID: "i2", At: at, Claimed: true}, {Generation: 3, Sha: "c3", IntentID: "i3", At: at}},
	}}}
	b, err = EncodeEnv(q)
	if err != nil {
		t.Fatal(err)
	}
	if v := version(t, b); v != 3 {
		t.Fatalf("a queue document written as version %d, want 3", v)
	}
	back, err := DecodeEnv(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(q, back); diff != "" {
		t.Fatalf("queue document round trip (-want +got):\n%s", diff)
	}
	// A promotion requirement makes the document version 4: a build that knows only version 3
	// refuses it rather than dropping the requirement and deploying what staging never ran.
	q.Requires = &Requirements{Environments: []string{"qa", "staging"}, Ancestor: true}
	b, err = EncodeEnv(q)
	if err != nil {
		t.Fatal(err)
	}
	if v := version(t, b); v != 4 {
		t.Fatalf("a document with a promotion requirement written as version %d, want 4", v)
	}
	if back, err = DecodeEnv(b); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(q, back); diff != "" {
		t.Fatalf("requirement round trip (-want +got):\n%s", diff)
	}
	// Gates make it version 6: a build without them would deploy what they hold.
	q.Gates = &Gates{Approvals: &ApprovalRule{Count: 1}}
	if b, err = EncodeEnv(q); err != nil {
		t.Fatal(err)
	}
	if v := version(t, b); v != 6 {
		t.Fatalf("a document with gates written as version %d, want 6", v)
	}
	if back, err = DecodeEnv(b); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(q, back); diff != "" {
		t.Fatalf("gates round trip (-want +got):\n%s", diff)
	}
	if _, err := DecodeEnv([]byte(`{"v":7,"n":"x"}`)); err == nil || !strings.Contains(err.Error(), "upgrade latestwins") {
		t.Fatalf("a newer layout: %v; want a refusal that says to upgrade", err)
	}
	// A layout newer than this build's that names the release reading it: the refusal names it.
	if _, err := DecodeEnv([]byte(`{"v":8,"n":"x","rl":"v1.9.0"}`)); err == nil || !strings.Contains(err.Error(), "use latestwins v1.9.0 or newer") ||
		!strings.Contains(err.Error(), "latestwins/latestwins@v1.9.0") {
		t.Fatalf("a newer layout naming its release: %v; want a refusal that names the release", err)
	}
}

func version(t *testing.T, b []byte) int {
	t.Helper()
	var p struct {
		V int `json:"v"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	return p.V
}

// TestMovedIsALayoutOlderBuildsRefuse: a moved environment's document is written as layout 5, so
// that a build of layout 4 refuses it ("upgrade latestwins") instead of writing over the marker; it
// reads back with where the state went, and an environment not moved stays in its layout.
func TestMovedIsALayoutOlderBuildsRefuse(t *testing.T) {
	e := &Env{Name: "staging", Desired: 1, Observed: 1, Scopes: map[string]*Scope{"api": {Owner: 1}}}
	layout := func(e *Env) int {
		b, err := EncodeEnv(e)
		if err != nil {
			t.Fatal(err)
		}
		var probe struct {
			V int `json:"v"`
		}
		if err := json.Unmarshal(b, &probe); err != nil {
			t.Fatal(err)
		}
		return probe.V
	}
	if v := layout(e); v != storedVersionV2 {
		t.Fatalf("an environment not moved is stored as layout %d, want %d", v, storedVersionV2)
	}
	at := time.Date(2026, 12, 2, 1, 2, 3, 4, time.UTC)
	e.Moved = &Moved{To: "git+file:///srv/state.git", At: at}
	if v := layout(e); v != storedVersionMoved {
		t.Fatalf("a moved environment is stored as layout %d, want %d", v, storedVersionMoved)
	}
	b, _ := EncodeEnv(e)
	back, err := DecodeEnv(b)
	if err != nil || back.Moved == nil || back.Moved.To != e.Moved.To || !back.Moved.At.Equal(at) {
		t.Fatalf("decoded %+v, %v; want the marker back", back, err)
	}
}
