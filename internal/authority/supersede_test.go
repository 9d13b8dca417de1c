package authority

import "testing"

func TestSupersededIn(t *testing.T) {
	t.Parallel()
	const old, mid, top = "1111111aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "2222222bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "3333333ccccccccccccccccccccccccccccccccc"
	tests := []struct {
		name     string
		env      Env
		sha      string
		accepted int64
		want     int64 // generation of the commit that supersedes sha; 0: none
	}{
		{"nothing accepted", Env{}, top, 0, 0},
		{"the newest itself, pending", Env{Scopes: map[string]*Scope{"api": {Mailbox: &Ref{Generation: 2, Sha: top}}}}, top, 2, 0},
		{"the newest itself, live", Env{Scopes: map[string]*Scope{"api": {Live: &Live{Generation: 2, Sha: top}}}}, top, 2, 0},
		{"live, with newer pending", Env{Scopes: map[string]*Scope{"api": {Mailbox: &Ref{Generation: 3, Sha: top}, Live: &Live{Generation: 2, Sha: mid}}}}, mid, 2, 3},
		{"accepted in another scope after the newest here", Env{Scopes: map[string]*Scope{
			"api": {Live: &Live{Generation: 2, Sha: old}}, "web": {Mailbox: &Ref{Generation: 5, Sha: mid}}}}, mid, 5, 0},
		{"in the timeline only, older than what is live", Env{Scopes: map[string]*Scope{"api": {Live: &Live{Generation: 4, Sha: top}}},
			Events: []Event{{Kind: EventAccepted, Generation: 3, Sha: mid}}}, mid, 3, 4},
		{"never accepted, unknown", Env{Scopes: map[string]*Scope{"api": {Mailbox: &Ref{Generation: 1, Sha: top}}}}, mid, 0, 0},
		{"never accepted, the parent of the newest", Env{Scopes: map[string]*Scope{"api": {Mailbox: &Ref{Generation: 4, Sha: top, Before: mid}}}}, mid, 0, 4},
		{"never accepted, arrived out of order", Env{Scopes: map[string]*Scope{"api": {Mailbox: &Ref{Generation: 1, Sha: top}}},
			Events: []Event{{Kind: EventSuperseded, Scope: "api", Generation: 2, Sha: old}}}, old, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.env.AcceptedGeneration(tt.sha); got != tt.accepted {
				t.Errorf("AcceptedGeneration = %d, want %d", got, tt.accepted)
			}
			var got int64
			if r := tt.env.SupersededIn("api", tt.sha); r != nil {
				got = r.Generation
			}
			if got != tt.want {
				t.Errorf("SupersededIn = generation %d, want %d", got, tt.want)
			}
		})
	}
}
