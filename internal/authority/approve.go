package authority

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Approval is a deployment that the App's deployment protection rule let run, because the deploy
// gate's evaluator said its commit may go (Hold): only a deployment status of an approved
// deployment may make its commit live (Report).
type Approval struct {
	Environment string
	Scopes      []string
	Sha         string
	Deployment  int64  // GitHub's deployment id
	Run         int64  // the workflow run the deployment belongs to, for the audit trail
	Actor       string // who started the run
}

// approvalID is the record id that remembers the approval of a deployment.
func approvalID(deployment int64) string { return "approval:" + strconv.FormatInt(deployment, 10) }

// Approve records an approval of the protection rule, for the retention: the deployment's id with
// its commit and scopes, and an event in the timeline. Approving the same deployment again changes
// nothing. It is an error matching ErrInvalidInput when the commit is neither pending nor live in
// any of the scopes: only a commit the evaluator let go can be approved.
func (a *Authority) Approve(ctx context.Context, ap Approval) error {
	if err := ValidateEnvironment(ap.Environment); err != nil {
		return err
	}
	if err := validateScopes(ap.Scopes, true); err != nil {
		return err
	}
	if err := ValidateSha(ap.Sha); err != nil {
		return err
	}
	if ap.Deployment <= 0 {
		return &InputError{Field: "deployment", Value: strconv.FormatInt(ap.Deployment, 10), Fix: "approve a deployment by GitHub's id for it"}
	}
	id := approvalID(ap.Deployment)
	var done *IntentRecord
	prepare := a.findRequest(ap.Environment, id, &done)
	_, err := a.updatePrepared(ctx, EnvKey(ap.Environment), prepare, func(doc *Doc, now time.Time) (bool, error) {
		if done != nil {
			return false, nil
		}
		if doc.Env == nil {
			return false, &InputError{Field: "environment", Value: ap.Environment, Fix: "unknown environment: nothing was ever accepted for it; check the name"}
		}
		var gen int64
		for _, name := range ap.Scopes {
			if sc := doc.Env.Scopes[name]; sc != nil {
				for _, r := range sc.Entries() {
					if r.Sha == ap.Sha {
						gen = max(gen, r.Generation)
					}
				}
				if sc.Live != nil && sc.Live.Sha == ap.Sha {
					gen = max(gen, sc.Live.Generation) // a deploy of what is live, again
				}
			}
		}
		if gen == 0 {
			return false, &InputError{Field: "sha", Value: ap.Sha, Fix: fmt.Sprintf("%s is neither pending nor live in %v of %s: only such a commit is approved", shortSha(ap.Sha), ap.Scopes, ap.Environment)}
		}
		doc.Env.Accepts = append(doc.Env.Accepts, IntentRecord{ID: id, Generation: gen, Sha: ap.Sha, Scopes: ap.Scopes, At: now})
		run := ""
		if ap.Run > 0 {
			run = fmt.Sprintf(", run %d", ap.Run)
		}
		doc.Env.record(now, Event{Kind: EventApproved, Generation: gen, Sha: ap.Sha,
			Message: fmt.Sprintf("Deployment %d of %s (generation %d%s%s) approved by the deployment protection rule", ap.Deployment, shortSha(ap.Sha), gen, run, byActor(ap.Actor))})
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("approve deployment %d of %s in %s: %w", ap.Deployment, shortSha(ap.Sha), ap.Environment, err)
	}
	return nil
}

// Unapproved is a deployment status that reported an outcome for a deployment the App did not
// approve (one created directly through GitHub's API, say): recorded and shown as a warning, never
// counted as live, for promotion, freezes or queues.
type Unapproved struct {
	Sha        string    `json:"sha"`
	Deployment int64     `json:"deployment"`
	Success    bool      `json:"success"`
	At         time.Time `json:"at"`
}

// Text says what the warning is about.
func (u *Unapproved) Text() string {
	state := "failure"
	if u.Success {
		state = "success"
	}
	return fmt.Sprintf("deployment %d of %s reported %s, but latestwins never approved it: not counted as live", u.Deployment, shortSha(u.Sha), state)
}
