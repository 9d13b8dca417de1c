package surfaces

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/internal/authority"
)

// judge over states built by hand: out-of-order arrivals and commits the newest builds on.
func TestJudge(t *testing.T) {
	t.Parallel()
	const old, mid, top = "1111111aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "2222222bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "3333333ccccccccccccccccccccccccccccccccc"
	tests := []struct {
		name string
		env  authority.Env
		sha  string
		want verdict
	}{
		{"nothing accepted", authority.Env{Name: "prod"}, top,
			verdict{comment: "latestwins has not accepted 3333333 for prod (api), so it cannot tell whether it is the newest commit. " +
				"Pushes to the branch configured for these scopes are accepted; re-run this job once its push is, or deploy the commit through latestwins."}},
		{"arrived out of order, recorded as superseded", authority.Env{Name: "prod",
			Scopes: map[string]*authority.Scope{"api": {Mailbox: &authority.Ref{Generation: 1, Sha: top}}},
			Events: []authority.Event{{Kind: authority.EventSuperseded, Scope: "api", Generation: 2, Sha: old}}}, old,
			verdict{comment: "Superseded by generation 1 (3333333)", superseded: true}},
		{"the parent of the newest", authority.Env{Name: "prod",
			Scopes: map[string]*authority.Scope{"api": {Mailbox: &authority.Ref{Generation: 4, Sha: top, Before: mid}}}}, mid,
			verdict{comment: "Superseded by generation 4 (3333333)", superseded: true}},
		{"live, with newer pending", authority.Env{Name: "prod",
			Scopes: map[string]*authority.Scope{"api": {Mailbox: &authority.Ref{Generation: 3, Sha: top}, Live: &authority.Live{Generation: 2, Sha: mid}}}}, mid,
			verdict{comment: "Superseded by generation 3 (3333333)", superseded: true}},
		// What the deploy gate would make the pass wait for, the rule refuses with the same words.
		{"queued behind an older commit", authority.Env{Name: "prod", Policy: authority.PolicyQueue,
			Scopes: map[string]*authority.Scope{"api": {Mailbox: &authority.Ref{Generation: 1, Sha: old}, Queue: []*authority.Ref{{Generation: 2, Sha: top}}}}}, top,
			verdict{comment: "prod/api: queued: 1 ahead of this commit; latestwins dispatches it again once it may go"}},
		{"the queue's head", authority.Env{Name: "prod", Policy: authority.PolicyQueue,
			Scopes: map[string]*authority.Scope{"api": {Mailbox: &authority.Ref{Generation: 1, Sha: old}, Queue: []*authority.Ref{{Generation: 2, Sha: top}}}}}, old,
			verdict{approve: true, comment: "1111111 is the newest commit accepted for prod (api) at generation 1"}},
		{"behind a barrier", authority.Env{Name: "prod",
			Scopes: map[string]*authority.Scope{"api": {Mailbox: &authority.Ref{Generation: 1, Sha: mid, Barrier: true}, Queue: []*authority.Ref{{Generation: 2, Sha: top}}}}}, top,
			verdict{comment: "prod/api: waiting for barrier 2222222; latestwins dispatches it again once it may go"}},
		{"held by a rollback's freeze", authority.Env{Name: "prod",
			Scopes: map[string]*authority.Scope{"api": {Mailbox: &authority.Ref{Generation: 4, Sha: top}, Live: &authority.Live{Generation: 3, Sha: old},
				Freeze: &authority.Freeze{Generation: 3, Sha: old, Actor: "oncall", Reason: "r"}}}}, top,
			verdict{comment: "prod/api: held by a freeze: rolled back to 1111111 by oncall; waiting for unfreeze (freeze 3); latestwins dispatches it again once it may go"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := judge(&tt.env, []string{"api"}, tt.sha, nil)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(verdict{})); diff != "" {
				t.Errorf("judge (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseProtectionCallback(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url     string
		want    core.ProtectionRun
		wantErr string
	}{
		{"https://api.github.com/repos/octo-org/api/actions/runs/1234/deployment_protection_rule",
			core.ProtectionRun{Repo: core.RepoRef{Owner: "octo-org", Name: "api"}, RunID: 1234}, ""},
		{"https://ghe.example.com/api/v3/repos/acme/web/actions/runs/9/deployment_protection_rule",
			core.ProtectionRun{Repo: core.RepoRef{Owner: "acme", Name: "web"}, RunID: 9}, ""},
		{"https://api.github.com/repos/o/r/actions/runs/0/deployment_protection_rule", core.ProtectionRun{}, "not a positive number"},
		{"https://api.github.com/repos/o/r/actions/runs/12/approve", core.ProtectionRun{}, "want .../repos/OWNER/REPO/actions/runs/RUN_ID/deployment_protection_rule"},
		{"", core.ProtectionRun{}, "want .../repos/OWNER/REPO"},
		{"http://[::1", core.ProtectionRun{}, "missing ']'"},
	}
	for _, tt := range tests {
		got, err := parseCallback(tt.url)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseCallback(%q) error = %v, want it to say %q", tt.url, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseCallback(%q): %v", tt.url, err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("parseCallback(%q) (-want +got):\n%s", tt.url, diff)
		}
	}
}

// A production job whose commit is not live in staging yet is refused with the gate's words.
func TestJudgeWaitsForPromotion(t *testing.T) {
	t.Parallel()
	const sha, other = "3333333ccccccccccccccccccccccccccccccccc", "9999999ddddddddddddddddddddddddddddddddd"
	prod := &authority.Env{Name: "prod", Requires: &authority.Requirements{Environments: []string{"staging"}},
		Scopes: map[string]*authority.Scope{"api": {Mailbox: &authority.Ref{Generation: 2, Sha: sha}}}}
	staging := &authority.Env{Name: "staging", Scopes: map[string]*authority.Scope{"api": {Live: &authority.Live{Generation: 5, Sha: other}}}}
	got := judge(prod, []string{"api"}, sha, map[string]*authority.Env{"staging": staging})
	if got.approve || !strings.Contains(got.comment, "waiting for staging: 3333333 is not live there yet") {
		t.Fatalf("not live in staging: %+v; want a refusal saying it waits for staging", got)
	}
	staging.Scopes["api"].Live = &authority.Live{Generation: 6, Sha: sha}
	if got := judge(prod, []string{"api"}, sha, map[string]*authority.Env{"staging": staging}); !got.approve {
		t.Fatalf("live in staging: %+v; want it approved", got)
	}
}
