package githubapp

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-github/v60/github"
)

// CancelRun asks GitHub to cancel workflow run runID. GitHub answers at once and cancels shortly
// after; cancelling a run that has already completed is an error (409).
func (c *Client) CancelRun(ctx context.Context, owner, repo string, runID int64) error {
	op := fmt.Sprintf("cancel workflow run %d in %s/%s", runID, owner, repo)
	if err := requireNames(op, "owner", owner, "repo", repo); err != nil {
		return err
	}
	if runID <= 0 {
		return fmt.Errorf("%s: the run id must be positive", op)
	}
	_, err := c.gh.Actions.CancelWorkflowRunByID(ctx, owner, repo, runID)
	var accepted *github.AcceptedError
	if err != nil && !errors.As(err, &accepted) {
		return c.wrap(op, err)
	}
	return nil
}

// DispatchWorkflow starts the workflow_dispatch workflow workflowFile (its file name, such as
// deploy.yml) on ref (a branch or tag) with inputs, which may be nil.
func (c *Client) DispatchWorkflow(ctx context.Context, owner, repo, workflowFile, ref string, inputs map[string]any) error {
	op := fmt.Sprintf("dispatch workflow %s on %s in %s/%s", workflowFile, ref, owner, repo)
	if err := requireNames(op, "owner", owner, "repo", repo, "workflow file", workflowFile, "ref", ref); err != nil {
		return err
	}
	if strings.Contains(workflowFile, "/") {
		return fmt.Errorf("%s: give the workflow's file name (deploy.yml), not a path", op)
	}
	_, err := c.gh.Actions.CreateWorkflowDispatchEventByFileName(ctx, owner, repo, workflowFile, github.CreateWorkflowDispatchEventRequest{Ref: ref, Inputs: inputs})
	if err != nil {
		return c.wrap(op, err)
	}
	return nil
}
