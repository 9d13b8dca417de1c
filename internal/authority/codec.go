package authority

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// The stored form of an environment is compact JSON with short names and times as Unix
// nanoseconds: the document every transition writes stays small (docs/design.md has the budget),
// while the JSON the API and `status --json` speak keeps its readable names. Version 2 is this form;
// a document without a version is the first layout (timeline and intent ids inside the document),
// which DecodeEnv reads by moving its events and intents into the outbox, so that a write that stores
// the outbox (Compact, which latestwins migrate runs, does at once) stores them as records and drops
// them.
//
// Version 3 adds what policies need (the environment's policy, the intents waiting behind a scope's
// head, and the barrier, claimed and failed marks of an entry), all optional. A document is
// written as version 3 only when it uses one of them, so that a build that knows only version 2
// refuses it ("upgrade latestwins") instead of reading it and dropping a queue it cannot see; any
// other document stays version 2, which every build since reads.
//
// Version 4 adds an environment's promotion requirement (the environments it requires, and
// whether a descendant counts), by the same rule: only a document that has one is written as
// version 4, so that a build that knows only version 3 refuses it instead of dropping the
// requirement and letting a commit reach the environment before it went live where it must first.
//
// Version 5 is a document whose environment was moved to another store (Authority.Move): the
// state as it was, and where it went. Only a moved document is written as version 5, so that a
// build that knows only version 4 refuses it ("upgrade latestwins") instead of writing over it.
//
// Version 7 is a document of the per-scope layout (scoped.go): the head, a scope's document or the
// directory. Every one of them is written as version 7, so that a build that knows only the
// single document refuses it instead of taking a head for a whole environment without scopes.
const (
	storedVersionScoped = 7
	storedVersionGates  = 6
	storedVersionMoved  = 5
	storedVersion       = 4
	storedVersionV3     = 3
	storedVersionV2     = 2
)

type storedEnv struct {
	V  int                     `json:"v"`
	N  string                  `json:"n"`
	D  int64                   `json:"d"`
	O  int64                   `json:"o"`
	Q  int64                   `json:"q,omitempty"`
	P  string                  `json:"p,omitempty"`  // policy, version 3
	R  []string                `json:"r,omitempty"`  // required environments, version 4
	Ra bool                    `json:"ra,omitempty"` // a descendant counts, version 4
	Aa int64                   `json:"aa,omitempty"` // alert after, nanoseconds; a build that drops it only loses the alarm
	Mv *storedMoved            `json:"mv,omitempty"` // where the state went, version 5
	Gt *Gates                  `json:"gt,omitempty"` // soak, approvals and change windows, version 6
	S  map[string]*storedScope `json:"s,omitempty"`
	X  []storedEvent           `json:"x,omitempty"`
	A  []storedIntent          `json:"a,omitempty"`
	Pt string                  `json:"pt,omitempty"` // which document of the per-scope layout, version 7
	Lg []storedLogEntry        `json:"lg,omitempty"` // the head's log, version 7
	Ap int64                   `json:"ap,omitempty"` // a scope document's applied generation, version 7
	Dr []string                `json:"dr,omitempty"` // the directory's scope names, version 7
	Ct bool                    `json:"ct,omitempty"` // a head whose generations come from the counter, version 7
}

type storedScope struct {
	M  *storedRef        `json:"m,omitempty"`
	W  []*storedRef      `json:"w,omitempty"` // waiting behind M, version 3
	O  int64             `json:"o,omitempty"`
	L  *storedLive       `json:"l,omitempty"`
	K  *storedLease      `json:"k,omitempty"`
	F  *storedFailure    `json:"f,omitempty"`
	T  int64             `json:"t,omitempty"`
	Rf []string          `json:"rf,omitempty"` // refusals recorded; a build that drops them records a repeated one again
	Ua *storedUnapproved `json:"ua,omitempty"` // a warning; a build that drops it loses only the warning
	P  *storedLive       `json:"p,omitempty"`  // the previous live commit; a build that drops it loses only the rollback default
	Fz *storedFreeze     `json:"fz,omitempty"` // version 3
}

type storedMoved struct {
	To string `json:"to"`
	T  int64  `json:"t"`
}

type storedUnapproved struct {
	S string `json:"s"`
	D int64  `json:"d"`
	K bool   `json:"k,omitempty"`
	T int64  `json:"t,omitempty"`
}

type storedFreeze struct {
	G int64  `json:"g"`
	S string `json:"s"`
	A string `json:"a,omitempty"`
	R string `json:"r"`
	T int64  `json:"t,omitempty"`
}

func encodeLive(l *Live) *storedLive {
	return &storedLive{S: l.Sha, R: l.Ref, G: l.Generation, U: l.Run, K: l.Token, B: l.Before, Or: encodeOrder(l.Order), T: nanos(l.At),
		Sn: nanos(l.Since)}
}

func decodeLive(l *storedLive) *Live {
	return &Live{Sha: l.S, Ref: l.R, Generation: l.G, Run: l.U, Token: l.K, Before: l.B, Order: decodeOrder(l.Or), At: fromNanos(l.T),
		Since: fromNanos(l.Sn)}
}

// encodeSoakFrom and decodeSoakFrom store a Ref's SoakFrom as Unix nanoseconds.
func encodeSoakFrom(m map[string]time.Time) map[string]int64 {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]int64, len(m))
	for env, t := range m {
		out[env] = nanos(t)
	}
	return out
}

func decodeSoakFrom(m map[string]int64) map[string]time.Time {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]time.Time, len(m))
	for env, n := range m {
		out[env] = fromNanos(n)
	}
	return out
}

type storedOrder struct {
	P int64 `json:"p,omitempty"`
	C int64 `json:"c,omitempty"`
	F bool  `json:"f,omitempty"`
}

type storedRef struct {
	G  int64        `json:"g"`
	S  string       `json:"s"`
	R  string       `json:"r,omitempty"`
	B  string       `json:"b,omitempty"`
	Or *storedOrder `json:"or,omitempty"`
	Sr string       `json:"sr,omitempty"`
	Ac string       `json:"ac,omitempty"`
	I  string       `json:"i"`
	Og string       `json:"og,omitempty"`
	N  int          `json:"n,omitempty"`
	T  int64        `json:"t,omitempty"`
	Br bool         `json:"br,omitempty"` // version 3
	Cl bool         `json:"cl,omitempty"` // version 3
	X  bool         `json:"x,omitempty"`  // version 3
	Rb bool         `json:"rb,omitempty"` // version 3
	Sn int64        `json:"sn,omitempty"` // waiting since; a build that drops it counts the scope behind from its newest intent
	Bg *Override    `json:"bg,omitempty"` // break-glass: only where gates are, so version 6
	// Sf is where the soak counts from in each required environment (Ref.SoakFrom). It is
	// written only while the environment has a soak, so in a document of version 6; a build that
	// drops it (the soak removed meanwhile) loses nothing it would use.
	Sf map[string]int64 `json:"sf,omitempty"`
	Ap []storedAppr     `json:"ap,omitempty"` // approvals by people; only an environment with an approvals gate (version 6) counts them
}

type storedAppr struct {
	L string `json:"l"`
	D string `json:"d,omitempty"`
	T int64  `json:"t,omitempty"`
}

func encodeApprovals(as []CommitApproval) []storedAppr {
	var out []storedAppr
	for _, a := range as {
		out = append(out, storedAppr{L: a.Login, D: a.Door, T: nanos(a.At)})
	}
	return out
}

func decodeApprovals(as []storedAppr) []CommitApproval {
	var out []CommitApproval
	for _, a := range as {
		out = append(out, CommitApproval{Login: a.L, Door: a.D, At: fromNanos(a.T)})
	}
	return out
}

func encodeRef(m *Ref) *storedRef {
	return &storedRef{G: m.Generation, S: m.Sha, R: m.Ref, B: m.Before, Or: encodeOrder(m.Order), Sr: m.Source, Ac: m.Actor,
		I: m.IntentID, Og: m.Origin, N: m.Attempt, T: nanos(m.At), Br: m.Barrier, Cl: m.Claimed, X: m.Failed, Rb: m.Rollback, Sn: nanos(m.Since), Bg: m.BreakGlass,
		Ap: encodeApprovals(m.Approvals),
		Sf: encodeSoakFrom(m.SoakFrom)}
}

func decodeRef(m *storedRef) *Ref {
	return &Ref{Generation: m.G, Sha: m.S, Ref: m.R, Before: m.B, Order: decodeOrder(m.Or), Source: m.Sr, Actor: m.Ac,
		IntentID: m.I, Origin: m.Og, Attempt: m.N, At: fromNanos(m.T), Barrier: m.Br, Claimed: m.Cl, Failed: m.X, Rollback: m.Rb, Since: fromNanos(m.Sn), BreakGlass: m.Bg,
		Approvals: decodeApprovals(m.Ap),
		SoakFrom:  decodeSoakFrom(m.Sf)}
}

// usesV3 reports whether a document needs version 3 of the stored form.
func (e *Env) usesV3() bool {
	if e.Policy != "" {
		return true
	}
	for _, sc := range e.Scopes {
		if len(sc.Queue) > 0 || sc.Freeze != nil {
			return true
		}
		if m := sc.Mailbox; m != nil && (m.Barrier || m.Claimed || m.Failed || m.Rollback) {
			return true
		}
	}
	return false
}

type storedLive struct {
	S  string       `json:"s"`
	R  string       `json:"r,omitempty"`
	G  int64        `json:"g"`
	U  string       `json:"u,omitempty"`
	K  int64        `json:"k,omitempty"`
	B  string       `json:"b,omitempty"`
	Or *storedOrder `json:"or,omitempty"`
	T  int64        `json:"t,omitempty"`
	// Sn is when the commit became live (Live.Since), set only once the same commit was deployed
	// again. A document without it (older, or never redeployed) reads it as T; a build that drops
	// it counts a soak from the newest deploy, later than it should, never earlier.
	Sn int64 `json:"sn,omitempty"`
}

type storedLease struct {
	H string `json:"h,omitempty"`
	P string `json:"p,omitempty"`
	G int64  `json:"g,omitempty"`
	K int64  `json:"k"`
	A int64  `json:"a,omitempty"`
	E int64  `json:"e,omitempty"`
	S string `json:"s,omitempty"`
	R string `json:"r,omitempty"`
	F int64  `json:"f,omitempty"` // released at; a build that drops it only reports no hand-over time
}

type storedFailure struct {
	G int64  `json:"g"`
	S string `json:"s"`
	M string `json:"m"`
	A int    `json:"a,omitempty"`
	X int    `json:"x,omitempty"`
	T int64  `json:"t,omitempty"`
}

type storedEvent struct {
	Q int64          `json:"q"`
	T int64          `json:"t"`
	K string         `json:"k"`
	S string         `json:"s,omitempty"`
	G int64          `json:"g,omitempty"`
	H string         `json:"h,omitempty"`
	C string         `json:"c,omitempty"`
	N int64          `json:"n,omitempty"`
	M string         `json:"m"`
	W *PromotionWait `json:"w,omitempty"` // a promotion wait the message words; a build that drops it shows the message to everyone
}

type storedIntent struct {
	I string   `json:"i"`
	G int64    `json:"g"`
	H string   `json:"h,omitempty"`
	S []string `json:"s,omitempty"`
	T int64    `json:"t"`
}

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func encodeOrder(o Order) *storedOrder {
	if o == (Order{}) {
		return nil
	}
	return &storedOrder{P: nanos(o.PushedAt), C: nanos(o.CommittedAt), F: o.Forced}
}

func decodeOrder(o *storedOrder) Order {
	if o == nil {
		return Order{}
	}
	return Order{PushedAt: fromNanos(o.P), CommittedAt: fromNanos(o.C), Forced: o.F}
}

// EncodeEnv returns the stored form of an environment's state. Events (what Status reads for
// rendering) is not part of it.
func EncodeEnv(e *Env) ([]byte, error) {
	s := storedEnv{V: storedVersionV2, N: e.Name, D: e.Desired, O: e.Observed, Q: e.EventSeq, P: string(e.Policy), Aa: int64(e.AlertAfter)}
	switch {
	case e.Requires != nil:
		s.V, s.R, s.Ra = storedVersion, e.Requires.Environments, e.Requires.Ancestor
	case e.usesV3():
		s.V = storedVersionV3
	}
	if m := e.Moved; m != nil {
		s.V, s.Mv = storedVersionMoved, &storedMoved{To: m.To, T: nanos(m.At)}
	}
	if e.Gates != nil {
		// A build that read the environment without its gates would deploy what they hold.
		s.V, s.Gt = storedVersionGates, e.Gates
	}
	if e.Part != "" {
		s.V, s.Pt, s.Ap, s.Dr, s.Ct = storedVersionScoped, string(e.Part), e.Applied, e.Dir, e.Counted
		for _, l := range e.Log {
			s.Lg = append(s.Lg, encodeLogEntry(l))
		}
	}
	if len(e.Scopes) > 0 {
		s.S = make(map[string]*storedScope, len(e.Scopes))
	}
	for name, sc := range e.Scopes {
		ss := &storedScope{O: sc.Owner, T: nanos(sc.ActiveAt), Rf: sc.Refused}
		if m := sc.Mailbox; m != nil {
			ss.M = encodeRef(m)
		}
		for _, q := range sc.Queue {
			ss.W = append(ss.W, encodeRef(q))
		}
		if l := sc.Live; l != nil {
			ss.L = encodeLive(l)
		}
		if l := sc.Prev; l != nil {
			// Only what a rollback needs: the commit, and its branch when it differs.
			ss.P = &storedLive{S: l.Sha}
			if sc.Live == nil || sc.Live.Ref != l.Ref {
				ss.P.R = l.Ref
			}
		}
		if f := sc.Freeze; f != nil {
			ss.Fz = &storedFreeze{G: f.Generation, S: f.Sha, A: f.Actor, R: f.Reason, T: nanos(f.At)}
		}
		if l := sc.Lease; l != (Lease{}) {
			ss.K = &storedLease{H: l.Holder, P: l.Purpose, G: l.Generation, K: l.Token, A: nanos(l.AcquiredAt), E: nanos(l.ExpiresAt), S: l.Sha, R: l.Ref, F: nanos(l.ReleasedAt)}
		}
		if u := sc.Unapproved; u != nil {
			ss.Ua = &storedUnapproved{S: u.Sha, D: u.Deployment, K: u.Success, T: nanos(u.At)}
		}
		if f := sc.Failure; f != nil {
			ss.F = &storedFailure{G: f.Generation, S: f.Sha, M: f.Message, A: f.Attempt, X: f.MaxAttempts, T: nanos(f.At)}
		}
		s.S[name] = ss
	}
	for _, ev := range e.Outbox {
		s.X = append(s.X, storedEvent{Q: ev.Seq, T: nanos(ev.At), K: string(ev.Kind), S: ev.Scope, G: ev.Generation, H: ev.Sha, C: ev.Holder, N: ev.Token, M: ev.Message, W: ev.Wait})
	}
	for _, in := range e.Accepts {
		s.A = append(s.A, storedIntent{I: in.ID, G: in.Generation, H: in.Sha, S: in.Scopes, T: nanos(in.At)})
	}
	return json.Marshal(&s)
}

// DecodeEnv reads an environment's stored form, in this layout or the first one, and checks the
// invariants every transition keeps: a document that breaks one is refused with a *CorruptError
// (matching ErrCorrupt), so that nothing is decided from it.
func DecodeEnv(b []byte) (*Env, error) {
	e, err := decodeEnv(b)
	if err != nil {
		return nil, err
	}
	if err := e.checkInvariants(); err != nil {
		return nil, fmt.Errorf("decode environment: %w", err)
	}
	return e, nil
}

func decodeEnv(b []byte) (*Env, error) {
	var probe struct {
		V int `json:"v"`
		// Rl, in a layout newer than this build's, names the first release that reads it: a
		// build that writes a layout after 7 stores it, so that older builds can say which
		// release to use.
		Rl string `json:"rl"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, fmt.Errorf("decode environment: %w", err)
	}
	switch probe.V {
	case 0:
		return decodeFirstLayout(b)
	case storedVersionV2, storedVersionV3, storedVersion, storedVersionMoved, storedVersionGates, storedVersionScoped:
	default:
		if probe.Rl != "" {
			return nil, fmt.Errorf("decode environment: stored layout %d is newer than this build's %d: use latestwins %s or newer (the Action: uses: latestwins/latestwins@%s)",
				probe.V, storedVersionScoped, probe.Rl, probe.Rl)
		}
		return nil, fmt.Errorf("decode environment: stored layout %d is newer than this build's %d: upgrade latestwins", probe.V, storedVersionScoped)
	}
	var s storedEnv
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("decode environment: %w", err)
	}
	e := &Env{Name: s.N, Desired: s.D, Observed: s.O, EventSeq: s.Q, Policy: Policy(s.P), AlertAfter: time.Duration(max(s.Aa, 0))}
	if len(s.R) > 0 {
		e.Requires = &Requirements{Environments: s.R, Ancestor: s.Ra}
	}
	if m := s.Mv; m != nil {
		e.Moved = &Moved{To: m.To, At: fromNanos(m.T)}
	}
	e.Gates = s.Gt.normal()
	if s.V == storedVersionScoped {
		switch p := docPart(s.Pt); p {
		case partHead, partScope, partDir:
			e.Part = p
		default:
			return nil, fmt.Errorf("decode environment: a document of stored layout 7 says it is the %q part, which this build does not know: upgrade latestwins", s.Pt)
		}
		e.Applied, e.Dir, e.Counted = s.Ap, s.Dr, s.Ct
		for _, l := range s.Lg {
			e.Log = append(e.Log, decodeLogEntry(l))
		}
	}
	if len(s.S) > 0 {
		e.Scopes = make(map[string]*Scope, len(s.S))
	}
	for name, ss := range s.S {
		sc := &Scope{Owner: ss.O, ActiveAt: fromNanos(ss.T), Refused: ss.Rf}
		if m := ss.M; m != nil {
			sc.Mailbox = decodeRef(m)
		}
		for _, q := range ss.W {
			sc.Queue = append(sc.Queue, decodeRef(q))
		}
		if l := ss.L; l != nil {
			sc.Live = decodeLive(l)
		}
		if l := ss.P; l != nil {
			sc.Prev = &Live{Sha: l.S, Ref: l.R}
			if l.R == "" && sc.Live != nil {
				sc.Prev.Ref = sc.Live.Ref
			}
		}
		if f := ss.Fz; f != nil {
			sc.Freeze = &Freeze{Generation: f.G, Sha: f.S, Actor: f.A, Reason: f.R, At: fromNanos(f.T)}
		}
		if k := ss.K; k != nil {
			sc.Lease = Lease{Holder: k.H, Purpose: k.P, Generation: k.G, Token: k.K, AcquiredAt: fromNanos(k.A), ExpiresAt: fromNanos(k.E), Sha: k.S, Ref: k.R, ReleasedAt: fromNanos(k.F)}
		}
		if u := ss.Ua; u != nil {
			sc.Unapproved = &Unapproved{Sha: u.S, Deployment: u.D, Success: u.K, At: fromNanos(u.T)}
		}
		if f := ss.F; f != nil {
			sc.Failure = &Failure{Generation: f.G, Sha: f.S, Message: f.M, Attempt: f.A, MaxAttempts: f.X, At: fromNanos(f.T)}
		}
		e.Scopes[name] = sc
	}
	for _, x := range s.X {
		e.Outbox = append(e.Outbox, Event{Seq: x.Q, At: fromNanos(x.T), Kind: EventKind(x.K), Scope: x.S, Generation: x.G, Sha: x.H, Holder: x.C, Token: x.N, Message: x.M, Wait: x.W})
	}
	for _, a := range s.A {
		e.Accepts = append(e.Accepts, IntentRecord{ID: a.I, Generation: a.G, Sha: a.H, Scopes: a.S, At: fromNanos(a.T)})
	}
	return e, nil
}

// firstLayout is an environment as the first layout stored it: the state with its newest events and
// the ids of the intents of its newest generations inside.
type firstLayout struct {
	Name     string `json:"name"`
	Desired  int64  `json:"desired"`
	Observed int64  `json:"observed"`
	Scopes   map[string]*struct {
		Mailbox  *Ref      `json:"mailbox,omitempty"`
		Owner    int64     `json:"owner"`
		Live     *Live     `json:"live,omitempty"`
		Lease    Lease     `json:"lease"`
		Failure  *Failure  `json:"failure,omitempty"`
		ActiveAt time.Time `json:"active_at"`
	} `json:"scopes,omitempty"`
	Intents map[string]struct {
		Generation int64 `json:"generation"`
	} `json:"intents,omitempty"`
	Events   []Event `json:"events,omitempty"`
	EventSeq int64   `json:"event_seq"`
}

// decodeFirstLayout reads a document of the first layout. Its events and intent ids go to the
// outbox, to be stored as records like any other (the intents with the time of the newest event, as
// the first layout kept none).
func decodeFirstLayout(b []byte) (*Env, error) {
	var f firstLayout
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("decode environment of the first layout: %w", err)
	}
	e := &Env{Name: f.Name, Desired: f.Desired, Observed: f.Observed, EventSeq: f.EventSeq}
	if len(f.Scopes) > 0 {
		e.Scopes = make(map[string]*Scope, len(f.Scopes))
	}
	for name, s := range f.Scopes {
		e.Scopes[name] = &Scope{Mailbox: s.Mailbox, Owner: s.Owner, Live: s.Live, Lease: s.Lease, Failure: s.Failure, ActiveAt: s.ActiveAt}
	}
	e.Outbox = slices.Clone(f.Events)
	var last time.Time
	if n := len(f.Events); n > 0 {
		last = f.Events[n-1].At
	}
	for _, id := range sortedKeys(f.Intents) {
		e.Accepts = append(e.Accepts, IntentRecord{ID: id, Generation: f.Intents[id].Generation, At: last})
	}
	return e, nil
}

// storedDoc is a whole document as the stores that keep one blob per key (memory, bolt) hold it.
type storedDoc struct {
	Key     string          `json:"key"`
	Rev     int64           `json:"rev"`
	Pending bool            `json:"pending,omitempty"`
	Env     json.RawMessage `json:"env,omitempty"`
	Lease   *NamedLease     `json:"lease,omitempty"`

	Deliveries *DeliveryCursor `json:"deliveries,omitempty"`
	Kept       json.RawMessage `json:"kept,omitempty"`
}

// EncodeDoc returns a document's stored form as one blob.
func EncodeDoc(d *Doc) ([]byte, error) {
	s := storedDoc{Key: d.Key, Rev: d.Rev, Pending: d.Pending, Lease: d.Lease, Deliveries: d.Deliveries, Kept: d.Kept}
	if d.Env != nil {
		b, err := EncodeEnv(d.Env)
		if err != nil {
			return nil, err
		}
		s.Env = b
	}
	return json.Marshal(&s)
}

// DecodeDoc reads a blob EncodeDoc wrote, or one of the first layout.
func DecodeDoc(b []byte) (*Doc, error) {
	var s storedDoc
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("decode document: %w", err)
	}
	d := &Doc{Key: s.Key, Rev: s.Rev, Pending: s.Pending, Lease: s.Lease, Deliveries: s.Deliveries, Kept: s.Kept}
	if len(s.Env) > 0 && !bytes.Equal(s.Env, []byte("null")) {
		e, err := DecodeEnv(s.Env)
		if err != nil {
			if ce, ok := errors.AsType[*CorruptError](err); ok && s.Key != "" {
				ce.Key = s.Key // the key it is stored under, whatever name it holds
			}
			return nil, fmt.Errorf("decode document %s: %w", s.Key, err)
		}
		d.Env = e
	}
	return d, nil
}
