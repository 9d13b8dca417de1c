package surfaces

import (
	"context"
	"log/slog"

	"github.com/google/go-github/v60/github"

	"github.com/latestwins/latestwins/app/internal/core"
)

// GitHub Actions creates a deployment for every job that names an environment, so the App creates
// none of its own (each would show twice in GitHub's environments view). What it adds is the
// superseded state: the deployment of a job rejected as superseded is marked inactive, with the
// same "Superseded by generation N (sha7)", instead of lingering as waiting or failed.

// maxStatusDescription is GitHub's limit on a deployment status's description.
const maxStatusDescription = 140

// markSuperseded shows a superseded job's deployment as inactive. It is best effort: the review,
// already posted, is what stops the job; an App without the deployments permission logs a warning.
func (a *Handler) markSuperseded(ctx context.Context, log *slog.Logger, installation int64, repo core.RepoRef, d *github.Deployment, why string) {
	if d.GetID() == 0 {
		return // the job creates no deployment
	}
	if len(why) > maxStatusDescription {
		why = why[:maxStatusDescription]
	}
	if err := a.review.MarkInactive(ctx, installation, repo, d.GetID(), why); err != nil {
		log.WarnContext(ctx, "mark superseded deployment inactive (does the App have the deployments: write permission?)", "deployment_id", d.GetID(), "err", err)
	}
}
