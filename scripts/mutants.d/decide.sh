# shellcheck shell=bash
# The deploy gate's one decision (internal/authority/decide.go) and the doors that ask it: a
# deployment status counts only for a deployment the protection rule approved.
mutant "a deployment status counts for a deployment nobody approved" internal/authority/outbox.go \
  's/if approved == nil \|\| approved\.Sha != r\.Sha \{/if false {/' \
  TestDeploymentStatusOfAnUnapprovedDeployment ./app/
mutant "the protection rule records no approval" app/internal/surfaces/protection.go \
  's/v\.approve && dep > 0 \{/false \&\& dep > 0 {/' \
  TestDeploymentStatusClosesTheLoop/success ./app/
mutant "the status rows leave an unapproved deployment out" internal/report/status.go \
  's/\t\tr\.Warning = u\.Text\(\)\n//' \
  TestStatusShowsAnUnapprovedDeployment ./internal/report/
# No text crosses visibility: the API words a refusal for the token's repository.
mutant "the API tells a token what is live where its repository feeds nothing" app/internal/api/api.go \
  's/return ok && e\.FedBy\(wl\.Repository\)/return ok \&\& e != nil/' \
  TestAPIHidesWhatIsLiveWhereTheTokenDoesNotFeed ./app/
mutant "a stored message naming another environment's commits is shown to anyone" internal/report/viewer.go \
  's/\t\tif !v\.Sees\(m\[1\]\) \{/\t\tif false {/' \
  TestViewerHidesAnotherEnvironmentsCommits ./internal/report/
mutant "the API's status shows the outbox's events as stored" internal/report/viewer.go \
  's/c\.Events, c\.Outbox = v\.Events\(e\.Events\), v\.Events\(e\.Outbox\)/c.Events = v.Events(e.Events)/' \
  TestAPIHidesWhatIsLiveWhereTheTokenDoesNotFeed ./app/
mutant "the page's timeline shows another environment's commits (Chromium)" app/internal/web/status.go \
  's/ev := viewer\.Event\(e\.Events\[i\]\)/ev := e.Events[i]/' \
  TestNoTextCrossesVisibilityInChromium ./app/browsertest/
