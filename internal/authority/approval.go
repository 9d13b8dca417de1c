package authority

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// ApprovalRule is how many people must approve a commit in an environment before it deploys there
// (the approvals gate, ReasonApproval), and who may. An approval belongs to one commit in one
// environment: it is recorded on the commit's pending entries (Ref.Approvals), so a newer commit
// needs its own, and a commit superseded while it waits drops out with its approvals.
type ApprovalRule struct {
	// Count is how many distinct people must approve; 0: no approvals are needed.
	Count int `json:"count,omitempty"`
	// Approvers, when set, are who may approve: GitHub logins and teams (@org/team-slug). The door
	// an approval comes through checks them with GitHub; the evaluator re-checks plain logins.
	Approvers []string `json:"approvers,omitempty"`
	// ExcludePusher: the approval of whoever pushed the commit (Ref.Actor) does not count
	// (pusher-may-approve: false).
	ExcludePusher bool `json:"exclude_pusher,omitempty"`
}

// Bounds of the approvals gate.
const (
	// MaxApprovals is the most approvals a rule may require.
	MaxApprovals = 10
	// maxApprovers bounds a rule's approvers list.
	maxApprovers = 50
	// maxRefApprovals bounds the approvals kept on one pending entry: distinct people, so a rule's
	// Count always fits, with room for approvals that do not count (the pusher's, say).
	maxRefApprovals = 16
	// maxApprovalBytes bounds the stored form of every approval of an environment's document,
	// together: only an approval adds one, so the worst-case document (TestWorstCaseDocumentFitsAnItem)
	// grows by at most this much and stays inside DynamoDB's item size. About 140 approvals by the
	// longest logins, more by ordinary ones.
	maxApprovalBytes = 10_000
)

var (
	loginRE = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9]|-[A-Za-z0-9]){0,38}$`)
	teamRE  = regexp.MustCompile(`^@([A-Za-z0-9](?:[A-Za-z0-9]|-[A-Za-z0-9]){0,38})/([A-Za-z0-9][A-Za-z0-9_.-]{0,99})$`)
)

// ValidLogin reports whether s is spelled as a GitHub login: 1-39 letters, digits and single
// hyphens, not starting or ending with a hyphen.
func ValidLogin(s string) bool { return len(s) <= 39 && loginRE.MatchString(s) }

// SplitTeam splits an approver naming a team, @org/team-slug, into its organization and slug;
// ok is false for anything else (a login).
func SplitTeam(approver string) (org, slug string, ok bool) {
	m := teamRE.FindStringSubmatch(approver)
	if m == nil || len(m[1]) > 39 {
		return "", "", false
	}
	return m[1], m[2], true
}

// ApproverFix says what an approver must be.
const ApproverFix = "name GitHub users by login (alice) and teams as @org/team-slug (@acme/sre)"

// Validate checks the rule as an intent carries it: an *InputError says what to fix.
func (r *ApprovalRule) Validate() error { return r.validate() }

func (r *ApprovalRule) validate() error {
	if r == nil {
		return nil
	}
	if r.Count < 0 || r.Count > MaxApprovals {
		return &InputError{Field: "approvals", Value: fmt.Sprint(r.Count), Fix: fmt.Sprintf("require between 1 and %d approvals (0 removes the gate)", MaxApprovals)}
	}
	if r.Count == 0 && (len(r.Approvers) > 0 || r.ExcludePusher) {
		return &InputError{Field: "approvals", Value: "0", Fix: "approvers and pusher-may-approve need approvals: N, how many people must approve"}
	}
	if len(r.Approvers) > maxApprovers {
		return &InputError{Field: "approvers", Value: fmt.Sprint(len(r.Approvers)), Fix: fmt.Sprintf("name at most %d approvers; name a team (@org/team) for more people", maxApprovers)}
	}
	seen := map[string]bool{}
	teams := false
	for _, a := range r.Approvers {
		_, _, team := SplitTeam(a)
		if !team && !ValidLogin(a) {
			return &InputError{Field: "approvers", Value: truncate(a, 60), Fix: ApproverFix}
		}
		if seen[strings.ToLower(a)] {
			return &InputError{Field: "approvers", Value: a, Fix: "name each approver once"}
		}
		seen[strings.ToLower(a)] = true
		teams = teams || team
	}
	if len(r.Approvers) > 0 && !teams && len(r.Approvers) < r.Count {
		return &InputError{Field: "approvals", Value: fmt.Sprint(r.Count),
			Fix: fmt.Sprintf("%d approvals can never come from the %d approvers named: name more approvers (or a team), or require fewer", r.Count, len(r.Approvers))}
	}
	return nil
}

func (r *ApprovalRule) normal() *ApprovalRule {
	if r == nil || r.Count <= 0 {
		return nil
	}
	c := *r
	c.Approvers = slices.Clone(r.Approvers)
	if len(c.Approvers) == 0 {
		c.Approvers = nil
	}
	return &c
}

// String says what the rule holds for, for the timeline.
func (r *ApprovalRule) String() string {
	if r = r.normal(); r == nil {
		return ""
	}
	s := fmt.Sprintf("approvals %d", r.Count)
	if len(r.Approvers) > 0 {
		s += " by " + strings.Join(r.Approvers, ", ")
	}
	if r.ExcludePusher {
		s += " (not the pusher)"
	}
	return s
}

// mayApprove reports whether the rule lets login's approval count, as far as the evaluator can
// tell without GitHub: any login when no approvers are named or a team is among them (the door
// asked GitHub about the team), else only the logins named.
func (r *ApprovalRule) mayApprove(login string) bool {
	if len(r.Approvers) == 0 {
		return true
	}
	for _, a := range r.Approvers {
		if _, _, team := SplitTeam(a); team || strings.EqualFold(a, login) {
			return true
		}
	}
	return false
}

// counted is who of ref's approvers count for the rule: distinct logins (GitHub's are not case
// sensitive), in the order they approved, without the pusher's when the rule excludes it.
func (r *ApprovalRule) counted(ref *Ref) []string {
	var by []string
	for _, a := range ref.Approvals {
		switch {
		case r.ExcludePusher && strings.EqualFold(a.Login, ref.Actor):
		case !r.mayApprove(a.Login):
		case slices.ContainsFunc(by, func(b string) bool { return strings.EqualFold(a.Login, b) }):
		default:
			by = append(by, a.Login)
		}
	}
	return by
}

// CommitApproval is one person's approval of a commit in an environment, kept on the commit's
// pending entry (Ref.Approvals): who, when and through which door.
type CommitApproval struct {
	Login string    `json:"login"`
	Door  string    `json:"door,omitempty"` // ApprovalDoorComment, ApprovalDoorPage or ApprovalDoorCLI
	At    time.Time `json:"at"`
}

// The doors an approval comes through.
const (
	ApprovalDoorComment = "comment" // /latestwins approve ENV SHA on a pull request or issue
	ApprovalDoorPage    = "page"    // the Approve button of the signed-in status page
	ApprovalDoorCLI     = "cli"     // latestwins approve, an operator with store credentials
)

// ApprovalWait is what a commit waits for: approvals by people (ReasonApproval).
type ApprovalWait struct {
	Environment string `json:"environment"`
	Sha         string `json:"sha"`
	// Need is how many more approvals it needs; Count how many the rule requires.
	Need  int `json:"need"`
	Count int `json:"count"`
	// By is who approved it so far, as the rule counts them.
	By []string `json:"by,omitempty"`
	// ExcludePusher: the pusher's own approval does not count.
	ExcludePusher bool `json:"exclude_pusher,omitempty"`
}

func (w *ApprovalWait) text() string {
	s := fmt.Sprintf("waiting for approval: %d of %d", w.Count-w.Need, w.Count)
	if len(w.By) > 0 {
		s += ", approved by " + strings.Join(w.By, ", ")
	}
	short := shortSha(w.Sha)
	return s + fmt.Sprintf(" (latestwins approve %s --sha %s, or comment /latestwins approve %s %s)", w.Environment, short, w.Environment, short)
}

// approvalWait says whether the pass of ref waits for approvals; nil: it may go.
func approvalWait(v View, ref *Ref) *ApprovalWait {
	if v.Gates == nil || ref == nil {
		return nil
	}
	r := v.Gates.Approvals.normal()
	if r == nil {
		return nil
	}
	by := r.counted(ref)
	if len(by) >= r.Count {
		return nil
	}
	return &ApprovalWait{Environment: v.Environment, Sha: ref.Sha, Need: r.Count - len(by), Count: r.Count, By: by, ExcludePusher: r.ExcludePusher}
}

// approvalRetry is how soon a pass waiting for approvals is told to ask again: people approve in
// minutes, not seconds.
const approvalRetry = 30 * time.Second

// CommitApprovalRequest is one person's approval of a commit in an environment (ApproveCommit).
type CommitApprovalRequest struct {
	Environment string
	// Sha is the commit: its full sha, or at least MinShaPrefix hex digits of one pending there.
	Sha string
	// Scopes are where it is approved; empty: every scope where the commit is pending.
	Scopes []string
	// Login is who approves: a GitHub login, checked by the door (permission, approvers).
	Login string
	// Door is how the approval came: ApprovalDoorComment, ApprovalDoorPage or ApprovalDoorCLI.
	Door string
}

// ScopeApproval is what an approval did in one scope.
type ScopeApproval struct {
	Scope      string   `json:"scope"`
	Generation int64    `json:"generation"`
	Sha        string   `json:"sha"`
	By         []string `json:"by"`   // who counts now, the approver among them unless the rule excludes them
	Need       int      `json:"need"` // approvals still needed; 0: the commit may deploy
	Count      int      `json:"count"`
	// Repeat: the approver had approved this entry before; nothing changed.
	Repeat bool `json:"repeat,omitempty"`
	// Pusher: the approver pushed the commit, and the rule does not count the pusher's approval.
	Pusher bool `json:"pusher,omitempty"`
}

// CommitApprovalResult is what ApproveCommit did, by scope (sorted by name).
type CommitApprovalResult struct {
	Environment string          `json:"environment"`
	Scopes      []ScopeApproval `json:"scopes"`
}

// ApproveCommit records r.Login's approval of a commit pending in r.Environment: on the commit's
// pending entries in the scopes named (every scope where it is pending when none is), with who,
// when and through which door, and an event in the timeline for each. A repeat by the same person
// changes nothing. It is an *InputError when the environment needs no approvals, or the commit is
// not pending in a scope named (the error says what is pending there). A pass waiting at the
// gate goes at its next ask; one that gave up is re-driven by the recovery sweep, as for promotion.
func (a *Authority) ApproveCommit(ctx context.Context, r CommitApprovalRequest) (*CommitApprovalResult, error) {
	if err := ValidateEnvironment(r.Environment); err != nil {
		return nil, err
	}
	r.Sha = CanonicalSha(r.Sha)
	if err := ValidateShaPrefix(r.Sha); err != nil {
		return nil, err
	}
	if err := validateScopes(r.Scopes, false); err != nil {
		return nil, err
	}
	if !ValidLogin(r.Login) {
		return nil, &InputError{Field: "actor", Value: truncate(r.Login, 40), Fix: "an approval is a person's: give their GitHub login (--actor NAME)"}
	}
	switch r.Door {
	case ApprovalDoorComment, ApprovalDoorPage, ApprovalDoorCLI:
	default:
		return nil, &InputError{Field: "door", Value: truncate(r.Door, 40), Fix: "approvals come from people: a comment, the status page, or latestwins approve"}
	}
	var res *CommitApprovalResult
	_, err := a.update(ctx, EnvKey(r.Environment), func(doc *Doc, now time.Time) (bool, error) {
		res = nil
		if doc.Env == nil {
			return false, &InputError{Field: "environment", Value: r.Environment, Fix: "unknown environment: nothing was ever accepted for it; check the name"}
		}
		if err := doc.Env.requireScopes(r.Scopes); err != nil {
			return false, err
		}
		var err error
		res, err = doc.Env.approveCommit(r, now)
		if err != nil {
			return false, err
		}
		for _, s := range res.Scopes {
			if !s.Repeat {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("approve %s in %s: %w", shortSha(r.Sha), r.Environment, err)
	}
	return res, nil
}

// approveCommit is ApproveCommit's transition.
func (e *Env) approveCommit(r CommitApprovalRequest, now time.Time) (*CommitApprovalResult, error) {
	rule := e.Gates.approvals()
	if rule == nil {
		return nil, &InputError{Field: "environment", Value: e.Name,
			Fix: fmt.Sprintf("%s needs no approvals (its configuration sets no approvals:): nothing to approve", e.Name)}
	}
	scopes := r.Scopes
	if len(scopes) == 0 {
		scopes = sortedKeys(e.Scopes)
	} else {
		scopes = sortedCopy(scopes)
	}
	res := &CommitApprovalResult{Environment: e.Name}
	var found []*Ref
	var foundScopes []string
	for _, name := range scopes {
		var match []*Ref
		for _, m := range e.Scopes[name].Entries() {
			if strings.HasPrefix(m.Sha, r.Sha) && !m.Rollback {
				match = append(match, m)
			}
		}
		if len(match) == 0 {
			if len(r.Scopes) > 0 {
				return nil, &InputError{Field: "sha", Value: r.Sha, Fix: e.notPending(r.Sha, name)}
			}
			continue
		}
		if shas := distinctShas(match); len(shas) > 1 {
			return nil, &InputError{Field: "sha", Value: r.Sha,
				Fix: fmt.Sprintf("%s names %d commits pending in %s/%s (%s): give more of the sha", r.Sha, len(shas), e.Name, name, strings.Join(shas, ", "))}
		}
		for _, m := range match {
			found, foundScopes = append(found, m), append(foundScopes, name)
		}
	}
	if len(found) == 0 {
		return nil, &InputError{Field: "sha", Value: r.Sha, Fix: e.notPending(r.Sha, "")}
	}
	if shas := distinctShas(found); len(shas) > 1 {
		return nil, &InputError{Field: "sha", Value: r.Sha,
			Fix: fmt.Sprintf("%s names %d commits pending in %s (%s): give more of the sha", r.Sha, len(shas), e.Name, strings.Join(shas, ", "))}
	}
	for i, m := range found {
		s := ScopeApproval{Scope: foundScopes[i], Generation: m.Generation, Sha: m.Sha, Count: rule.Count,
			Pusher: rule.ExcludePusher && strings.EqualFold(r.Login, m.Actor)}
		if slices.ContainsFunc(m.Approvals, func(a CommitApproval) bool { return strings.EqualFold(a.Login, r.Login) }) {
			s.Repeat = true
		} else {
			if len(m.Approvals) >= maxRefApprovals {
				return nil, &InputError{Field: "actor", Value: r.Login,
					Fix: fmt.Sprintf("%s in %s/%s has %d approvals, the most kept; none more is recorded", shortSha(m.Sha), e.Name, s.Scope, maxRefApprovals)}
			}
			// A new slice: clones of the state share the old one.
			m.Approvals = append(slices.Clone(m.Approvals), CommitApproval{Login: r.Login, Door: r.Door, At: now})
		}
		s.By = rule.counted(m)
		s.Need = max(0, rule.Count-len(s.By))
		res.Scopes = append(res.Scopes, s)
		if s.Repeat {
			continue
		}
		note := ""
		switch {
		case s.Pusher:
			note = "; the pusher's own approval does not count here"
		case !rule.mayApprove(r.Login):
			note = "; not among the approvers, so it does not count"
		}
		e.record(now, Event{Kind: EventApprovedCommit, Scope: s.Scope, Generation: m.Generation, Sha: m.Sha,
			Message: fmt.Sprintf("%s (generation %d) approved by %s through the %s: %d of %d approvals%s", shortSha(m.Sha), m.Generation, r.Login, doorName(r.Door),
				len(s.By), rule.Count, note)})
	}
	if err := e.checkQueuedSize(); err != nil {
		return nil, &InputError{Field: "actor", Value: r.Login, Fix: "the commits waiting in this environment's queues hold too many approvals to record more: " + err.Error()}
	}
	if n := e.approvalBytes(); n > maxApprovalBytes {
		return nil, &InputError{Field: "actor", Value: r.Login,
			Fix: fmt.Sprintf("the commits pending in %s hold %d bytes of approvals, more than the %d one document keeps: deploy or supersede some of them first", e.Name, n, maxApprovalBytes)}
	}
	return res, nil
}

// approvalBytes is how much the approvals of every pending entry of e take in the stored form.
func (e *Env) approvalBytes() int {
	n := 0
	for _, sc := range e.Scopes {
		for _, m := range sc.Entries() {
			if len(m.Approvals) == 0 {
				continue
			}
			b, err := json.Marshal(encodeApprovals(m.Approvals))
			if err != nil {
				panic(fmt.Sprintf("encode approvals: %v", err))
			}
			n += len(b)
		}
	}
	return n
}

// notPending says that no commit named by prefix is pending (in the scope named, or anywhere in
// e), and what is.
func (e *Env) notPending(prefix, scope string) string {
	scopes := []string{scope}
	where := e.Name + "/" + scope
	if scope == "" {
		scopes, where = sortedKeys(e.Scopes), e.Name
	}
	var pending []string
	for _, name := range scopes {
		for _, m := range e.Scopes[name].Entries() {
			pending = append(pending, fmt.Sprintf("%s in %s (generation %d)", shortSha(m.Sha), name, m.Generation))
		}
	}
	if len(pending) == 0 {
		return fmt.Sprintf("%s is not pending in %s: nothing is; only a commit waiting to deploy is approved", shortSha(prefix), where)
	}
	return fmt.Sprintf("%s is not pending in %s; pending there: %s", shortSha(prefix), where, strings.Join(pending, ", "))
}

// distinctShas lists the commits of refs, once each, shortened.
func distinctShas(refs []*Ref) []string {
	var out []string
	for _, m := range refs {
		if s := m.Sha; !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for i := range out {
		out[i] = shortSha(out[i])
	}
	return out
}

// doorName is how the timeline says which door an approval came through.
func doorName(door string) string {
	switch door {
	case ApprovalDoorComment:
		return "comment /latestwins approve"
	case ApprovalDoorPage:
		return "status page"
	}
	return "command line (latestwins approve)"
}

// approvals is the environment's approval rule, nil when it needs none.
func (g *Gates) approvals() *ApprovalRule {
	if g == nil {
		return nil
	}
	return g.Approvals.normal()
}

// ApprovalsOf is who approved ref, in order, once each, for status renderers.
func ApprovalsOf(ref *Ref) []string {
	if ref == nil {
		return nil
	}
	var by []string
	for _, a := range ref.Approvals {
		if !slices.ContainsFunc(by, func(b string) bool { return strings.EqualFold(a.Login, b) }) {
			by = append(by, a.Login)
		}
	}
	return by
}
